"""The one exception hierarchy of kstream.

Organised by what the caller can do about an error::

    KStreamError                      every error kstream raises on purpose
    ├── ConfigurationError            the input is wrong: fix it and run again (also a ValueError)
    │   ├── SpecError                 `module:attribute` does not name a job
    │   │   └── MissingParameterError the job function needs a `-p KEY=VALUE` it did not get
    │   ├── TimeoutConfigError        transaction/checkpoint timeouts do not fit together
    │   ├── IdentityMismatchError     the checkpoint to resume was taken by a different job
    │   ├── AuthenticationError       the cluster refused the client's credentials or TLS
    │   ├── AuthorizationError        the cluster's ACLs do not allow an operation kstream needs
    │   └── StateValueError           keyed state holds a value the job's state serde cannot store
    ├── EnvironmentSetupError         the machine lacks something: install it, free it
    │   ├── ToolMissingError          java or mvn is not on PATH
    │   ├── PortInUseError            the broker's port is taken by another process
    │   ├── DependencyResolutionError mvn could not resolve jars from Maven Central
    │   └── AlreadyRunningError       the job (or this worker index) already runs: stop it first
    ├── KafkaUnavailableError         the cluster cannot be reached: retry later
    ├── ProducerFencedError           a newer process took over this producer's transactional
    │   │                             id: this one must stop (the newer one carries on)
    │   └── CoordinatorFencedError    another coordinator of the job started: this one stops
    ├── RecordLostError               Kafka refused a record kstream had handed it: the job
    │   │                             rolls back to its latest checkpoint
    │   └── TransactionExpiredError   the broker aborted a sink epoch's transaction on timeout:
    │                                 the rollback re-publishes it from the write-ahead copy
    ├── BrokerError                   the local broker failed to start or stop: read its log
    ├── DatabaseError                 a sink's database could not be reached or refused a write:
    │                                 the job rolls back to its latest checkpoint
    ├── RecordError                   one record could not be decoded or processed
    │   ├── DecodeError               its bytes are not valid for the serde that reads them
    │   ├── TimestampError            a timestamp is not a 64-bit integer of milliseconds
    │   ├── UnsupportedTypeError      a value's type has no safe encoding (also a TypeError)
    │   └── RecordTooLargeError       a record exceeds what Kafka accepts on its topic
    ├── CheckpointError               a checkpoint could not be taken or restored
    │   ├── CheckpointDamagedError    no retained checkpoint is intact: nothing safe to resume
    │   └── InternalTopicLostError    an internal topic lost what resuming the checkpoint reads
    ├── JobFailedError                the job stopped because of an error it was told not to skip
    └── ProtocolError                 a state machine got an event its state forbids: a bug

The command line turns every `KStreamError` into one line on stderr and a
non-zero exit; anything else is a bug and keeps its traceback. Kafka's own
exceptions never reach a caller: `kstream.runtime.kafka` (and the admin client)
translate them into this tree, and only the three Kafka classes above say what
to do, so "retry later" never stands for "fenced" or "lost".
"""

from __future__ import annotations

__all__ = [
    "AlreadyRunningError",
    "AuthenticationError",
    "AuthorizationError",
    "BrokerError",
    "CheckpointDamagedError",
    "CheckpointError",
    "CheckpointStorageError",
    "ConfigurationError",
    "CoordinatorFencedError",
    "DatabaseError",
    "DecodeError",
    "DependencyResolutionError",
    "EnvironmentSetupError",
    "IdentityMismatchError",
    "InternalTopicLostError",
    "JobFailedError",
    "KStreamError",
    "KafkaUnavailableError",
    "MissingParameterError",
    "PortInUseError",
    "ProducerFencedError",
    "ProtocolError",
    "RecordError",
    "RecordLostError",
    "RecordRefusedError",
    "RecordTooLargeError",
    "SpecError",
    "StateValueError",
    "TimeoutConfigError",
    "TimestampError",
    "ToolMissingError",
    "TransactionExpiredError",
    "UnsupportedTypeError",
]


class KStreamError(Exception):
    """Root of every error kstream raises deliberately."""


class ConfigurationError(KStreamError, ValueError):
    """An option, argument or job definition is invalid."""


class StateValueError(ConfigurationError):
    """A keyed state value cannot be encoded by the job's state serde (found at a flush)."""


class SpecError(ConfigurationError):
    """A job spec (`module:attribute` or `path.py:attribute`) names no job."""


class MissingParameterError(SpecError, KeyError):
    """A job function looked up a ``-p`` parameter that was not given.

    Also a `KeyError`, so a job function may still catch it to use a default.
    """

    def __str__(self) -> str:
        # KeyError's own __str__ would quote the message like a key.
        return str(self.args[0]) if self.args else ""


class TimeoutConfigError(ConfigurationError):
    """Transaction and checkpoint timeouts are inconsistent (output could be lost)."""


class IdentityMismatchError(ConfigurationError):
    """The job being started is not the job whose checkpoint it would resume."""


class AuthenticationError(ConfigurationError):
    """The cluster refused the client's credentials, or the TLS handshake failed.

    Retrying cannot help: the settings of ``--kafka-config`` must change.
    """


class AuthorizationError(ConfigurationError):
    """The cluster's ACLs do not allow the principal an operation the job needs (named)."""


class CheckpointStorageError(ConfigurationError):
    """The checkpoint storage (``--checkpoint-storage``) is malformed, unreachable or
    refuses kstream's requests: found at start-up, before anything runs."""


class EnvironmentSetupError(KStreamError):
    """The machine lacks a tool, a free port or a dependency kstream needs."""


class ToolMissingError(EnvironmentSetupError):
    """A required executable (java, mvn) is not on PATH."""


class PortInUseError(EnvironmentSetupError):
    """A port kstream wants to listen on is held by another process."""


class DependencyResolutionError(EnvironmentSetupError):
    """Maven could not resolve the jars kstream needs."""


class AlreadyRunningError(EnvironmentSetupError):
    """Another process already runs this job (or this worker of it)."""


class KafkaUnavailableError(KStreamError):
    """The Kafka cluster did not answer in time: retrying later may succeed."""


class ProducerFencedError(KStreamError):
    """A producer was fenced: another process initialised its transactional id since.

    Retrying with this producer cannot succeed; the process holding it is a
    zombie of an earlier generation and must stop. What it had not committed is
    committed (or re-published) by its successor.
    """


class CoordinatorFencedError(ProducerFencedError):
    """Another coordinator of the job started: this one was fenced and must stop."""


class RecordLostError(KStreamError):
    """Kafka did not take a record kstream produced (its delivery failed).

    The record is in no checkpoint yet, so nothing is lost for good: the worker
    stops and the job rolls back to its latest checkpoint, which replays it.
    """


class TransactionExpiredError(RecordLostError):
    """The broker aborted a pre-committed epoch's transaction: it outlived its timeout.

    Its records are not visible and never will be from this transaction. The
    worker stops, the job rolls back to its latest completed checkpoint, and the
    sink's recovery re-publishes the epoch from the checkpoint's write-ahead copy,
    so nothing is lost. Frequent expiries mean the timeout is too short for the
    checkpoint interval and timeout (`kstream run --transaction-timeout`).
    """


class BrokerError(KStreamError):
    """The local broker could not be started, reached or stopped."""


class DatabaseError(KStreamError):
    """A sink's database could not be reached, or failed a batch of rows for a
    reason that is not a row's (a row it refuses is a `RecordRefusedError`).

    The epoch's transaction is not prepared, so nothing of it is visible: the
    worker stops and the job rolls back to its latest checkpoint. The message
    carries the database's own.
    """


class RecordError(KStreamError):
    """A record could not be decoded, or a user function raised on it."""


class DecodeError(RecordError):
    """A record's bytes are not valid for its serde (`kstream.dataflow.serde`)."""


class TimestampError(RecordError):
    """A timestamp (of a record or a timer) is not an integer of ms within 64 signed bits."""


class UnsupportedTypeError(RecordError, TypeError):
    """A value has a type kstream's safe encoding (`kstream.protocol.codec`) does not carry.

    `type_name` is the offending type's module and qualified name. Also a
    `TypeError`, which is what a state serde's ``dumps`` raises for such values.
    """

    def __init__(self, type_: type, message: str = "") -> None:
        self.type_name = f"{type_.__module__}.{type_.__qualname__}"
        super().__init__(message or f"cannot store {type_.__qualname__} values ({self.type_name})")


class RecordRefusedError(RecordError):
    """A sink's destination refused one result (a database row violating a
    constraint or a column's type); the message is the destination's own, in one
    line. Handed to the job's error policy (`SinkContext.refused`)."""


class RecordTooLargeError(RecordError):
    """One record is larger than the largest Kafka record its topic accepts.

    Raised before the record reaches a producer (so it can neither be dropped
    half-way nor poison a transaction) and handled like any failing record: by
    the job's error policy. `key` and `value` are the encoded record that did
    not fit, so a dead letter can keep it.
    """

    def __init__(self, message: str, *, key: bytes | None = None, value: bytes = b"") -> None:
        super().__init__(message)
        self.key = key
        self.value = value


class CheckpointError(KStreamError):
    """A checkpoint could not be written, read or restored."""


class CheckpointDamagedError(CheckpointError):
    """Every retained checkpoint failed validation; resuming any would be wrong."""


class InternalTopicLostError(CheckpointError):
    """An internal topic the checkpoint to resume points into lost what the resume reads.

    Deleted (perhaps created again, empty) or cut by retention: resuming anyway
    would read the input again, publish output twice, or lose records. Starting
    the job with ``--fresh`` is the way on.
    """


class JobFailedError(KStreamError):
    """The job stopped on an error its configuration says not to skip."""


class ProtocolError(KStreamError, RuntimeError):
    """A coordination state machine received an event its state does not allow.

    This is always a bug in kstream (or a corrupted control topic), never a user error.
    """
