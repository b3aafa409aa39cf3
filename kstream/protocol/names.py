"""The names kstream gives things on the cluster: topics, consumer groups,
transactional ids and record headers. Each is defined here once.

These are wire values: records written under one name are read back under the
same name by a later run, by `kstream checkpoints` and by the audit, so a
change here is a change of the on-cluster format. Every name of a job starts
with ``kstream.<job>.``, so one job's topics, groups and transactional ids
never collide with another's and are easy to list and delete.

==================== ======================================== ===================
what                 name                                     used by
==================== ======================================== ===================
channel topic        ``kstream.<job>.s<stage>``               tasks (input 0 of
                                                              `stage`)
                     ``kstream.<job>.s<stage>.i<k>``          tasks (input k >= 1)
loop channel topic   ``kstream.<job>.s<stage>.loop``          tasks (the feedback
                                                              edge of an iterate
                                                              head `stage`)
control topic        ``kstream.<job>.control``                runner, workers
dead-letter topic    ``kstream.<job>.dead-letters``           tasks
commit-marker topic  ``kstream.<job>.commits``                transactional sinks
task group           ``kstream.<job>.<task>``                 a subtask's consumer
runner group         ``kstream.<job>.c``                      the runner's control
                                                              reader
worker group         ``kstream.<job>.w``                      a worker's control
                                                              reader
history group        ``kstream.<job>.history``                `read_history`
transactional id     ``kstream.<job>.<task>.<topic>.<slot>``  transactional sinks
==================== ======================================== ===================

The job name is also a directory (``<state-dir>/<job>``). `check_job_name`
decides once which names can be all of these; everything that takes a job
name (`kstream.Job`, every command's ``--job-name``) asks it before it
creates anything.
"""

from __future__ import annotations

import re

from kstream.errors import ConfigurationError

__all__ = [
    "ERROR_HEADER",
    "JOB_NAME_MAX",
    "KEY_SHA256_HEADER",
    "KEY_TRUNCATED_HEADER",
    "LINEAGE_HEADERS",
    "LINEAGE_OFFSET_HEADER",
    "LINEAGE_PARTITION_HEADER",
    "LINEAGE_TOPIC_HEADER",
    "SHA256_HEADER",
    "STACK_HEADER",
    "TASK_HEADER",
    "TRUNCATED_HEADER",
    "channel_topic",
    "check_job_name",
    "commit_topic",
    "control_topic",
    "dead_letter_topic",
    "history_group",
    "loop_topic",
    "marker_reader_group",
    "runner_group",
    "sink_transactional_id",
    "slot_transactional_id",
    "task_group",
    "worker_group",
]


# -- the job name ---------------------------------------------------------------

#: Kafka's longest topic name.
TOPIC_NAME_MAX = 249
#: The longest job name: ``kstream.`` (8) and the longest suffix (``.dead-letters``,
#: 13; a channel's ``.s<stage>.i<input>`` or ``.s<stage>.loop`` stays shorter up to
#: 10^12 stages) leave 228 characters of the 249; 200 keeps a margin for a suffix
#: added later. As a directory name it is far inside every file system's 255 bytes.
JOB_NAME_MAX = 200
#: Kafka's legal topic characters (ASCII only), so every name of the job is one too.
_LEGAL = re.compile(r"[A-Za-z0-9._-]+")
#: A name shown in a refusal is cut to this many characters.
_SHOWN = 40


def check_job_name(name: str) -> str:
    """`name` if it can name a job, else `ConfigurationError` with one line saying why.

    A job name is non-empty, at most `JOB_NAME_MAX` characters of Kafka's topic
    alphabet (ASCII letters, digits, ``.``, ``_``, ``-``), and not ``.`` or ``..``
    (it is a directory of the state dir).
    """
    shown = repr(name if len(name) <= _SHOWN else name[:_SHOWN] + "...")
    if not name:
        raise ConfigurationError("the job name is empty; give a name such as wordcount-1")
    if len(name) > JOB_NAME_MAX:
        raise ConfigurationError(
            f"job name {shown} has {len(name)} characters; at most {JOB_NAME_MAX}, so every "
            f"topic of the job fits Kafka's {TOPIC_NAME_MAX}"
        )
    if not _LEGAL.fullmatch(name):
        bad = "".join(dict.fromkeys(c for c in name if not _LEGAL.fullmatch(c)))
        raise ConfigurationError(
            f"job name {shown} holds {bad!r}; only ASCII letters, digits, '.', '_' and '-' "
            "(Kafka's topic characters) are allowed"
        )
    if name in (".", ".."):
        raise ConfigurationError(f"job name {name!r} names no directory of its own; choose another")
    return name


# -- topics -------------------------------------------------------------------


def channel_topic(job: str, stage: int, input: int = 0) -> str:
    """The internal topic carrying input `input` of `stage`.

    Input 0 keeps the name of a single-input stage's topic, so a job with one
    input per stage has the topics it always had.
    """
    return f"kstream.{job}.s{stage}" if input == 0 else f"kstream.{job}.s{stage}.i{input}"


def loop_topic(job: str, stage: int) -> str:
    """The internal topic carrying the feedback edge into iterate head `stage`."""
    return f"kstream.{job}.s{stage}.loop"


def control_topic(job: str) -> str:
    """The job's control topic: one partition, one total order of control messages."""
    return f"kstream.{job}.control"


def dead_letter_topic(job: str) -> str:
    """Where records that failed under the ``dead_letter`` policy go, with why."""
    return f"kstream.{job}.dead-letters"


def commit_topic(job: str) -> str:
    """Commit markers of transactional sinks: one partition per sink subtask."""
    return f"kstream.{job}.commits"


# -- consumer groups ----------------------------------------------------------


def task_group(job: str, task: str) -> str:
    """The group of subtask `task`'s consumer (sources commit offsets under it)."""
    return f"kstream.{job}.{task}"


def runner_group(job: str) -> str:
    """The group of the runner's control-topic readers."""
    return f"kstream.{job}.c"


def worker_group(job: str) -> str:
    """The group of a worker's control-topic reader."""
    return f"kstream.{job}.w"


def history_group(job: str) -> str:
    """The group of a one-off read of the whole control topic."""
    return f"kstream.{job}.history"


# -- transactional ids ----------------------------------------------------------


def sink_transactional_id(job: str, task: str, topic: str) -> str:
    """The base of the transactional ids of subtask `task`'s sink into `topic`.

    Also the key of that sink's commit markers: a restarted subtask finds its
    own markers by it, and fences its predecessor's producers.
    """
    return f"kstream.{job}.{task}.{topic}"


def coordinator_transactional_id(job: str) -> str:
    """The transactional id of the coordinator's control producer: a starting
    coordinator initialises it, which fences every earlier one of the job."""
    return f"kstream.{job}.coordinator"


def slot_transactional_id(base: str, slot: int) -> str:
    """The transactional id of producer `slot` of the sink whose base id is `base`."""
    return f"{base}.{slot}"


def marker_reader_group(base: str) -> str:
    """The group of the consumer that reads back the commit markers of sink `base`."""
    return f"{base}.recovery"


# -- headers --------------------------------------------------------------------

#: Header naming the topic of the input record an output was computed from (UTF-8 text).
LINEAGE_TOPIC_HEADER = "kstream.src.topic"
#: Header naming that input record's partition (decimal text, e.g. ``b"3"``).
LINEAGE_PARTITION_HEADER = "kstream.src.partition"
#: Header naming that input record's offset (decimal text, e.g. ``b"1042"``).
LINEAGE_OFFSET_HEADER = "kstream.src.offset"
#: The lineage headers in the order outputs and dead letters carry them.
LINEAGE_HEADERS = (LINEAGE_TOPIC_HEADER, LINEAGE_PARTITION_HEADER, LINEAGE_OFFSET_HEADER)

#: A dead letter's error: ``<exception class>: <message>``, cut to a bounded size.
ERROR_HEADER = "kstream.error"
#: The subtask whose operator failed on a dead letter's record.
TASK_HEADER = "kstream.task"
#: The tail of the failure's traceback.
STACK_HEADER = "kstream.stack"

#: Headers that mark a dead letter whose value (or key) was cut to fit its topic:
#: the original size (decimal) and the hex SHA-256 of the whole original.
TRUNCATED_HEADER = "kstream.truncated"
SHA256_HEADER = "kstream.sha256"
KEY_TRUNCATED_HEADER = "kstream.key.truncated"
KEY_SHA256_HEADER = "kstream.key.sha256"
