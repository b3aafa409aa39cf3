"""The checks a runner makes before a job starts, and the internal topics it creates.

Every refusal is one `KStreamError` raised before any worker starts, so a job
that cannot run leaves nothing half-started: the cluster must answer, input
topics exist, no sink writes a topic the job reads (unless the job allows
it), sinks accept their outputs, the transaction timeout suits the
checkpointing and the broker, and the worker count matches the internal
topics an earlier run of the job created.

Results of a stage with event time carry it as their Kafka timestamp, and
Kafka's time retention judges a record by that timestamp: results of old
input (a backfill, event time in 1970) would be deleted at the broker's next
retention check. So `--create-topics` creates such output topics with
``retention.ms=-1`` (and says so), and a run warns once, in one line, when an
existing one's retention is shorter than the age of the input's oldest event
time (`retention_warning`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from confluent_kafka import TIMESTAMP_NOT_AVAILABLE

from kstream.dataflow.graph import sink_nodes
from kstream.dataflow.inputs import Source
from kstream.dataflow.job import Job
from kstream.dataflow.outputs import Guarantee
from kstream.dataflow.plan import Plan, started_with
from kstream.errors import ConfigurationError, KStreamError, TimeoutConfigError
from kstream.infra.admin import Admin
from kstream.protocol.coordination import CoordinatorConfig
from kstream.protocol.limits import INTERNAL_TOPIC_MAX_BYTES, MAX_MESSAGE_BYTES
from kstream.protocol.names import commit_topic
from kstream.protocol.watermarks import usable_timestamp

__all__ = [
    "BROKER_MAX_TXN",
    "check_cluster",
    "event_time_outputs",
    "fed_back",
    "missing_topics",
    "retention_warning",
    "transaction_timeout",
    "uncompacted_table",
]

#: The broker setting that caps every transaction's timeout.
BROKER_MAX_TXN = "transaction.max.timeout.ms"
#: Internal topics roll a segment at least every 10 minutes, so that what purging
#: deleted leaves the disk within minutes on a long run
#: (docs/operations/internal-topics.md, "Bounds").
INTERNAL_SEGMENT_MS = 600_000
#: A topic's retention rule: a table topic must keep every key's latest value.
CLEANUP_POLICY = "cleanup.policy"
#: How long a topic keeps a record, judged by its timestamp ("-1": for good).
RETENTION_MS = "retention.ms"
#: What `--create-topics` gives output topics of stages with event time.
KEEP_FOREVER = "-1"
#: Records read from the start of each input partition to find its oldest event
#: time (the first with a usable timestamp counts).
EVENT_TIME_SAMPLE = 20


def check_cluster(
    plan: Plan,
    *,
    bootstrap: str,
    guarantee: Guarantee,
    config: CoordinatorConfig,
    transaction_timeout_s: float | None,
    create_topics: bool = False,
    say: Callable[[str], None] = print,
    relayout: Callable[[], None] | None = None,
) -> float | None:
    """Check the cluster, the input and output topics; create internal topics.

    With `create_topics`, sink topics that do not exist are created first, with
    the partitions and replication of the job's widest input topic (and `say`
    tells which; those of stages with event time with ``retention.ms=-1``);
    without it a missing one refuses the run. `say` also gets the one line of
    `retention_warning`, if retention would delete results of the input.

    `relayout`: the job is being rescaled (`kstream.runtime.runner.rescale`):
    instead of refusing internal topics of another layout, this lays them out
    anew, after every other check passed and before the missing ones are created.

    Returns the transaction timeout the workers are to use (`transaction_timeout`
    under exactly-once; `transaction_timeout_s` unchanged otherwise).
    """
    job = plan.job
    admin = Admin(bootstrap)
    admin.check_reachable()
    inputs: dict[str, int] = {}
    for stage in job.stages:
        if stage.source is not None:
            inputs[stage.source.topic] = stage.source.partitions(bootstrap)  # raises if missing
    if not job.allow_feedback and (feedback := fed_back(job)) is not None:
        raise ConfigurationError(feedback)
    problem = uncompacted_table(job, admin.topic_config(job.tables, CLEANUP_POLICY))
    if problem is not None:
        raise ConfigurationError(problem)
    if create_topics:
        _create_outputs(admin, plan, inputs, say)
    for stage in job.stages:
        for node in sink_nodes(stage.root):
            assert node.sink is not None
            if stage.source is None and node.sink.lineage:
                raise ConfigurationError(
                    f"sink {node.sink.name}: lineage needs the sink in its source's stage "
                    "(no key_by or rebalance before it): positions do not cross channels"
                )
            node.sink.check(bootstrap)
    _warn_of_retention(admin, plan, say)
    if guarantee == "exactly-once":
        transaction_timeout_s = transaction_timeout(
            config, transaction_timeout_s, admin.broker_config(BROKER_MAX_TXN)
        )
    if relayout is None:
        _check_layout(admin, job, plan)
    else:
        relayout()
    # A commit-marker topic with more partitions than needed stays as it is (see
    # `started_with`); one with fewer was refused or, rescaling, grown.
    commits = commit_topic(job.name)
    internal = {
        t: n for t, n in plan.internal_topics().items() if t != commits or not admin.partitions(t)
    }
    admin.create_topics(
        internal,
        {
            # Stated explicitly: a broker whose default is lower must not shrink them.
            MAX_MESSAGE_BYTES: str(INTERNAL_TOPIC_MAX_BYTES),
            # Purging moves a partition's log start; the broker frees disk only by
            # whole segments behind it, so segments roll at least this often.
            "segment.ms": str(INTERNAL_SEGMENT_MS),
        },
    )
    return transaction_timeout_s


def event_time_outputs(plan: Plan) -> list[str]:
    """The output topics of stages with event time: their records carry it as timestamp."""
    return sorted(
        {
            topic
            for stage in plan.job.stages
            if stage.timed
            for node in sink_nodes(stage.root)
            if node.sink is not None
            for topic in node.sink.topics()
        }
    )


def retention_warning(
    retention_ms: Mapping[str, int], oldest: Mapping[str, int], now_ms: int
) -> str | None:
    """The one line warning that retention would delete results (None: it would not).

    `retention_ms` is each output topic of a stage with event time whose time
    retention deletes (``cleanup.policy`` delete, ``retention.ms`` >= 0);
    `oldest` is each input topic's oldest event time (ms, > 0) the run will
    read. A result carries its input's event time, so one older than ``now -
    retention.ms`` is deleted at the broker's next retention check.
    """
    if not oldest:
        return None
    source, first = min(oldest.items(), key=lambda item: (item[1], item[0]))
    doomed = sorted(t for t, ms in retention_ms.items() if first < now_ms - ms)
    if not doomed:
        return None
    shortest = min(retention_ms[t] for t in doomed)
    topics = f"topic {doomed[0]} keeps" if len(doomed) == 1 else f"topics {', '.join(doomed)} keep"
    return (
        f"WARNING: output {topics} records for retention.ms={shortest} "
        f"({_duration(shortest)}), but input {source} has event time from {_when(first)}: "
        "results carry their event time as Kafka timestamp, so the broker's retention will "
        f"delete them soon after they are written; set retention.ms={KEEP_FOREVER} (or longer) "
        f"on {'it' if len(doomed) == 1 else 'them'}"
    )


def _duration(ms: int) -> str:
    days = ms / 86_400_000
    if days >= 1:
        return f"{days:g} day{'' if days == 1 else 's'}"
    return f"{ms / 1000:g} s"


def _when(ms: int) -> str:
    try:
        return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    except (OverflowError, ValueError, OSError):
        return f"{ms} ms"


def _warn_of_retention(admin: Admin, plan: Plan, say: Callable[[str], None]) -> None:
    """Say `retention_warning`'s line if there is one (read the topics' settings and inputs)."""
    outputs = event_time_outputs(plan)
    if not outputs:
        return
    retention = admin.topic_config(outputs, RETENTION_MS)
    policies = admin.topic_config(outputs, CLEANUP_POLICY)
    deleting = {
        t: int(ms)
        for t, ms in retention.items()
        if int(ms) >= 0 and "delete" in policies.get(t, "delete").split(",")
    }
    if not deleting:
        return
    oldest: dict[str, int] = {}
    for stage in plan.job.stages:
        source = stage.source
        # A run from the end reads only what comes: its event time is not known yet.
        if source is None or source.timestamps is None or source.start != "earliest":
            continue
        for records in admin.first_records(source.topic, EVENT_TIME_SAMPLE).values():
            first = next((t for m in records if (t := _event_time(source, m)) is not None), None)
            if first is not None:
                oldest[source.topic] = min(first, oldest.get(source.topic, first))
    line = retention_warning(deleting, oldest, time.time_ns() // 1_000_000)
    if line is not None:
        say(line)


def _event_time(source: Source, message: Any) -> int | None:
    """The event time the job would give `message` (None: none a Kafka timestamp can be)."""
    try:
        if source.timestamps == "kafka":
            kind, at = message.timestamp()
            value: object = at if kind != TIMESTAMP_NOT_AVAILABLE else None
        else:
            assert callable(source.timestamps)
            value = source.timestamps(source.serde.loads(message.value()))
    except Exception:
        return None  # the run makes it a record error; it tells nothing here
    ts = usable_timestamp(value)
    # A timestamp <= 0 is written with the producer's clock, not as event time.
    return ts if ts is not None and ts > 0 else None


def job_topics(plan: Plan) -> dict[str, str]:
    """Every topic the job needs, with its role: "input", "output" or "internal"."""
    kinds = dict.fromkeys(plan.internal_topics(), "internal")
    for stage in plan.job.stages:
        for node in sink_nodes(stage.root):
            assert node.sink is not None
            kinds.update(dict.fromkeys(node.sink.topics(), "output"))
        if stage.source is not None:
            kinds[stage.source.topic] = "input"
    return kinds


def missing_topics(plan: Plan, admin: Admin, timeout: float) -> list[str] | None:
    """One line per topic of the job the cluster no longer has (deleted while it ran).

    None when the cluster did not answer within `timeout`: an unreachable broker
    is the recovery's business, not a reason to stop the job.
    """
    try:
        existing = admin.topics(timeout)
    except KStreamError:
        return None
    kinds = job_topics(plan)
    lines = []
    for topic in sorted(t for t in kinds if t not in existing):
        kind = kinds[topic]
        if kind == "internal":
            advice = "the job's checkpoints point into it: start the job again with --fresh"
        elif kind == "output":
            advice = (
                "recreate it (or run with --create-topics) and run the job again: it resumes "
                "from its latest checkpoint (outputs already in the deleted topic are gone with it)"
            )
        else:
            advice = "its unread records are gone with it; recreate it to run the job again"
        lines.append(
            f"{kind} topic {topic} no longer exists (deleted while the job ran?): {advice}"
        )
    return lines


def fed_back(job: Job) -> str | None:
    """Why `job` feeds its own input (a sink writes a topic it reads), or None.

    Each output would be read again as input, and its outputs again: a job that
    does not filter them grows its topic without end. Pure: the topics are the
    job's own. Refused unless the job allows it (`Job.allow_feedback`).
    """
    # Table topics are read by sources too.
    read = {s.source.topic for s in job.stages if s.source is not None}
    for stage in job.stages:
        for node in sink_nodes(stage.root):
            assert node.sink is not None
            for topic in node.sink.topics():
                if topic in read:
                    return (
                        f"sink {node.sink.name} writes topic {topic}, which the job reads as "
                        "its input: every output would be read again (a loop without "
                        "end); give another output topic, or --allow-feedback "
                        "(Job(..., allow_feedback=True)) if the job is meant to read its outputs"
                    )
    return None


def uncompacted_table(job: Job, policies: Mapping[str, str]) -> str | None:
    """Why a table topic of `job` cannot be read as a table (None: every one can).

    `policies` is each existing table topic's ``cleanup.policy``. A table topic
    that only deletes old records loses keys' values that are still current, so
    it is refused unless the job said ``compacted=False`` for it.
    """
    for topic, compacted in sorted(job.tables.items()):
        policy = policies.get(topic)
        if compacted and policy is not None and "compact" not in policy.split(","):
            return (
                f"table topic {topic!r} has cleanup.policy={policy}, not compact: old values "
                "of keys still current would be deleted; make it compacted, or say "
                "enrich(..., compacted=False)"
            )
    return None


def _create_outputs(
    admin: Admin, plan: Plan, inputs: dict[str, int], say: Callable[[str], None]
) -> None:
    """Create the sinks' missing topics like the widest input topic (`--create-topics`).

    Those of stages with event time get ``retention.ms=-1``: their records carry
    event time as timestamp, and results of old input would otherwise be deleted
    by the broker's default retention as soon as they are written.
    """
    missing = sorted(
        topic
        for topic, role in job_topics(plan).items()
        if role == "output" and admin.partitions(topic) is None
    )
    if not missing:
        return
    model = max(sorted(inputs), key=lambda t: inputs[t])
    partitions, replication = inputs[model], admin.replication(model) or -1
    timed = set(event_time_outputs(plan))
    plain = [t for t in missing if t not in timed]
    kept = [t for t in missing if t in timed]
    admin.create_topics(dict.fromkeys(plain, partitions), replication=replication)
    admin.create_topics(
        dict.fromkeys(kept, partitions), {RETENTION_MS: KEEP_FOREVER}, replication=replication
    )
    for topic in missing:
        kept_why = (
            f"; {RETENTION_MS}={KEEP_FOREVER}: its records carry their event time as "
            "timestamp, which time retention would judge"
            if topic in timed
            else ""
        )
        say(
            f"created output topic {topic} ({partitions} partitions, replication "
            f"{replication}, like input {model}{kept_why})"
        )


def _check_layout(admin: Admin, job: Job, plan: Plan) -> None:
    """Refuse a worker count the job's existing internal topics were not made for."""
    existing = {}
    for topic in plan.internal_topics():
        n = admin.partitions(topic)
        if n is not None:
            existing[topic] = n
    problem = started_with(job, existing, plan.workers)
    if problem is not None:
        raise ConfigurationError(problem)


def transaction_timeout(
    config: CoordinatorConfig, requested_s: float | None, broker_max_ms: str | None
) -> float:
    """The producers' transaction timeout, checked against checkpointing and the broker.

    An epoch's transaction lives from its first record until the checkpoint after
    it completes: up to one interval plus one checkpoint timeout, twice if that
    checkpoint fails and the epoch waits for the next. A transaction the broker
    times out is aborted, silently losing the epoch, so a setting that allows
    that is refused at start-up.
    """
    need = 2 * (config.interval + config.timeout)
    cap = int(broker_max_ms) / 1000 if broker_max_ms else None
    if requested_s is not None and requested_s < need:
        raise TimeoutConfigError(
            f"--transaction-timeout {requested_s:g}s is shorter than 2 x (checkpoint interval "
            f"{config.interval:g}s + checkpoint timeout {config.timeout:g}s) = {need:g}s: a "
            "pre-committed transaction could expire before its checkpoint completes"
        )
    chosen = requested_s if requested_s is not None else max(need, 600.0)
    if cap is not None and chosen > cap:
        if requested_s is None and need <= cap:
            return cap
        raise TimeoutConfigError(
            f"transactions must live {chosen:g}s but the broker caps them at "
            f"{BROKER_MAX_TXN}={cap * 1000:.0f}; raise that or shorten the checkpoint "
            "interval/timeout"
        )
    return chosen
