"""Topic administration: create, delete, describe and purge topics.

Thin wrappers over confluent-kafka's AdminClient that wait for the futures and
turn Kafka's errors into kstream's, so callers never see a bare KafkaException.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from confluent_kafka import KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewPartitions, NewTopic

from kstream.errors import (
    AuthenticationError,
    AuthorizationError,
    ConfigurationError,
    KafkaUnavailableError,
)
from kstream.infra.client_settings import ENV_VAR, client_config, security_settings
from kstream.infra.listener_probe import mismatch

__all__ = [
    "ACL_HINT",
    "AUTHORIZATION_CODES",
    "Admin",
    "retrying",
]

T = TypeVar("T")

#: Metadata round trips on a healthy cluster take milliseconds; this only bounds a dead one.
ADMIN_TIMEOUT_S = 30.0
#: `Admin.check_reachable` probes the listeners' protocol when no metadata came by then.
FIRST_TRY_S = 1.0


#: Codes saying the cluster's ACLs deny this principal the request: retrying cannot help.
AUTHORIZATION_CODES = frozenset(
    {
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
        KafkaError.GROUP_AUTHORIZATION_FAILED,
        KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        KafkaError.CLUSTER_AUTHORIZATION_FAILED,
    }
)
#: What an authorization error adds: where the needed ACLs are listed.
ACL_HINT = "the principal lacks an ACL the job needs; the README lists them under Secured Kafka"


def _denied(error: object, what: str) -> AuthorizationError | None:
    """`AuthorizationError` for doing `what` if `error` is an ACL denial, else None."""
    if isinstance(error, KafkaError) and error.code() in AUTHORIZATION_CODES:
        return AuthorizationError(f"{what}: {error.str()} ({ACL_HINT})")
    return None


#: Errors saying the cluster refused this client: wrong credentials or a failed TLS handshake.
_REFUSED = {KafkaError._AUTHENTICATION, KafkaError._SSL}

#: Errors a freshly created topic gives until its leader is known everywhere.
_TRANSIENT = {
    KafkaError.NOT_LEADER_FOR_PARTITION,
    KafkaError.LEADER_NOT_AVAILABLE,
    KafkaError.UNKNOWN_TOPIC_OR_PART,
    KafkaError._TRANSPORT,
    KafkaError._TIMED_OUT,
}


def retrying(call: Callable[[], T], timeout: float | None = None) -> T:
    """Run `call`, retrying transient metadata errors until `timeout` has passed
    (`ADMIN_TIMEOUT_S`, read at the call, when None)."""
    deadline = time.monotonic() + (ADMIN_TIMEOUT_S if timeout is None else timeout)
    while True:
        try:
            return call()
        except KafkaException as exc:
            err = exc.args[0]
            transient = isinstance(err, KafkaError) and (
                err.retriable() or err.code() in _TRANSIENT
            )
            if not transient or time.monotonic() > deadline:
                raise
        time.sleep(0.1)  # back off before asking the cluster again


class Admin:
    """Topic administration on one cluster."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        #: The last refusal (authentication, TLS) the client reported, if any.
        self._refusal: KafkaError | None = None
        self._client = AdminClient(client_config(bootstrap, {"error_cb": self._on_error}))

    def _on_error(self, error: KafkaError) -> None:
        if error.code() in _REFUSED:
            self._refusal = error

    def _refused(self) -> AuthenticationError | None:
        """The error for a refusal the client met, if it met one (it reports them on poll)."""
        self._client.poll(0)
        if self._refusal is None:
            return None
        what = "the TLS handshake" if self._refusal.code() == KafkaError._SSL else "authentication"
        return AuthenticationError(
            f"Kafka at {self.bootstrap} refused {what}: {self._refusal.str()} "
            "(check the settings of --kafka-config / KSTREAM_KAFKA_CONFIG)"
        )

    def _mismatch(self) -> str | None:
        """The line saying the listeners speak another security protocol than this
        client (`kstream.infra.listener_probe`), or None."""
        # The client's protocol: librdkafka's default unless the settings say.
        protocol = security_settings().get("security.protocol", "PLAINTEXT")
        return mismatch(self.bootstrap, protocol, os.environ.get(ENV_VAR))

    def _metadata(self, topic: str | None = None, timeout: float | None = None) -> Any:
        """The cluster's metadata (of `topic` only, if given); `KafkaUnavailableError` if none
        within `timeout` (`ADMIN_TIMEOUT_S`, read at the call, when None)."""
        timeout = ADMIN_TIMEOUT_S if timeout is None else timeout
        try:
            return self._client.list_topics(topic=topic, timeout=timeout)
        except KafkaException as exc:
            if (rejection := self._refused()) is not None:
                raise rejection from None
            raise KafkaUnavailableError(
                f"Kafka at {self.bootstrap} gave no metadata within {timeout:.0f}s ({exc.args[0]})"
            ) from None

    def check_reachable(self, timeout: float = 10.0) -> None:
        """Raise `KafkaUnavailableError` unless the cluster answers within `timeout`.

        A bootstrap address that refuses connections fails at once: librdkafka
        would retry it until the timeout and report only a generic transport error.
        A listener speaking another security protocol than the client's (plaintext
        against SASL_SSL, or the reverse) is a `ConfigurationError` saying so.
        """
        refused = _refusing(self.bootstrap)
        if refused is not None:
            raise KafkaUnavailableError(f"Kafka at {self.bootstrap} did not answer ({refused})")
        deadline = time.monotonic() + timeout
        wait, probed = min(FIRST_TRY_S, timeout), False
        while True:
            try:
                md = self._client.list_topics(timeout=wait)
                break
            except KafkaException as exc:
                if not probed:
                    # A healthy cluster answers within milliseconds, a listener of
                    # another protocol never: look at it now, not after `timeout`
                    # (first, too: a plaintext listener fails a TLS handshake).
                    probed = True
                    if (wrong := self._mismatch()) is not None:
                        raise ConfigurationError(wrong) from None
                    wait = deadline - time.monotonic()
                    if wait > 0:
                        continue  # once: the rest of `timeout` for a slow cluster
                if (rejection := self._refused()) is not None:
                    raise rejection from None
                raise KafkaUnavailableError(
                    f"Kafka at {self.bootstrap} did not answer within {timeout:.0f}s "
                    f"({exc.args[0]})"
                ) from None
        if not md.brokers:
            raise KafkaUnavailableError(f"Kafka at {self.bootstrap} reports no brokers")

    def broker_config(self, name: str) -> str | None:
        """The value of broker setting `name` on (any) one broker, or None if unknown."""
        # Exported at run time; the package's type stubs leave them out.
        from confluent_kafka.admin import (  # type: ignore[attr-defined]
            ConfigResource,
            ResourceType,
        )

        md = self._metadata()
        if not md.brokers:
            return None
        resource = ConfigResource(ResourceType.BROKER, str(next(iter(md.brokers))))
        for fut in self._client.describe_configs([resource]).values():
            try:
                entries = fut.result(timeout=ADMIN_TIMEOUT_S)
            except KafkaException as exc:
                what = f"cannot read broker setting {name}"
                if (denied := _denied(exc.args[0], what)) is not None:
                    raise denied from None
                raise KafkaUnavailableError(f"{what}: {exc.args[0]}") from None
            entry = entries.get(name)
            if entry is not None and entry.value is not None:
                return str(entry.value)
        return None

    def topic_config(self, topics: Iterable[str], name: str) -> dict[str, str]:
        """Setting `name` of each existing topic among `topics` (missing topics are left out)."""
        from confluent_kafka.admin import (  # type: ignore[attr-defined]
            ConfigResource,
            ResourceType,
        )

        out: dict[str, str] = {}
        resources = [ConfigResource(ResourceType.TOPIC, t) for t in sorted(set(topics))]
        if not resources:
            return out
        for resource, fut in self._client.describe_configs(resources).items():
            try:
                entries = fut.result(timeout=ADMIN_TIMEOUT_S)
            except KafkaException as exc:
                err = exc.args[0]
                if isinstance(err, KafkaError) and err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                    continue
                what = f"cannot read the configuration of topic {resource.name}"
                if (denied := _denied(err, what)) is not None:
                    raise denied from None
                raise KafkaUnavailableError(
                    f"cannot read the configuration of topic {resource.name}: {err}"
                ) from None
            entry = entries.get(name)
            if entry is not None and entry.value is not None:
                out[resource.name] = str(entry.value)
        return out

    def partitions(self, topic: str) -> int | None:
        """Number of partitions of `topic`, or None if it does not exist.

        Raises `AuthorizationError` if the ACLs hide the topic from this principal.
        """
        md = self._metadata(topic)
        meta = md.topics.get(topic)
        if (
            meta is not None
            and meta.error is not None
            and meta.error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
        ):
            raise AuthorizationError(
                f"not authorized to describe topic {topic} on {self.bootstrap}: "
                "the principal needs an ACL on it (READ for an input, WRITE for an output)"
            )
        if meta is None or meta.error is not None:
            return None
        return len(meta.partitions)

    def replication(self, topic: str) -> int | None:
        """Replication factor of `topic` (replicas of its first partition), or None if absent."""
        md = self._metadata(topic)
        meta = md.topics.get(topic)
        if meta is None or meta.error is not None or not meta.partitions:
            return None
        return len(meta.partitions[min(meta.partitions)].replicas)

    def topics(self, timeout: float | None = None) -> set[str]:
        """The cluster's topics; `KafkaUnavailableError` if it gives none within `timeout`."""
        return set(self._metadata(timeout=timeout).topics)

    def create_topics(
        self,
        topics: Mapping[str, int],
        config: Mapping[str, str] | None = None,
        *,
        exist_ok: bool = True,
        replication: int = -1,
    ) -> None:
        """Create each topic with its partition count; existing topics are left alone.

        `replication` -1 takes the broker's default replication factor.

        An existing topic with a different partition count is a `ConfigurationError`
        when `exist_ok` is set, since channel layouts depend on exact counts.
        """
        if not topics:
            return
        new = [
            NewTopic(
                name, num_partitions=n, replication_factor=replication, config=dict(config or {})
            )
            for name, n in topics.items()
        ]
        futures = self._client.create_topics(new, operation_timeout=ADMIN_TIMEOUT_S)
        for name, fut in futures.items():
            try:
                fut.result()
            except KafkaException as exc:
                err: KafkaError = exc.args[0]
                if err.code() != KafkaError.TOPIC_ALREADY_EXISTS or not exist_ok:
                    raise KafkaUnavailableError(
                        f"cannot create topic {name}: {err.str()}"
                    ) from None
                have = self.partitions(name)
                if have is not None and have != topics[name]:
                    raise ConfigurationError(
                        f"topic {name} exists with {have} partitions, expected {topics[name]}"
                    ) from None
        self._await_visible(topics)

    def _await_visible(self, topics: Mapping[str, int]) -> None:
        """Wait until the metadata shows every topic with a leader for each partition.

        A created topic reaches the brokers' metadata a moment later (seconds on a
        broker with many partitions), and a client that looks it up before then
        finds nothing.
        """
        deadline = time.monotonic() + ADMIN_TIMEOUT_S
        waiting = set(topics)
        while True:
            md = self._metadata()
            waiting = {name for name in waiting if not _led(md.topics.get(name))}
            if not waiting:
                return
            if time.monotonic() > deadline:
                raise KafkaUnavailableError(
                    f"created topics not visible after {ADMIN_TIMEOUT_S:.0f}s: "
                    + ", ".join(sorted(waiting))
                )
            time.sleep(0.05)  # polling the cluster's metadata: there is no event to wait on

    def delete_topics(self, names: Iterable[str]) -> None:
        """Delete topics; missing ones are ignored."""
        names = list(names)
        if not names:
            return
        for name, fut in self._client.delete_topics(
            names, operation_timeout=ADMIN_TIMEOUT_S
        ).items():
            try:
                fut.result()
            except KafkaException as exc:
                err: KafkaError = exc.args[0]
                if err.code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
                    raise KafkaUnavailableError(
                        f"cannot delete topic {name}: {err.str()}"
                    ) from None

    def add_partitions(self, topic: str, total: int) -> None:
        """Grow `topic` to `total` partitions (its records stay where they are)."""
        fut = self._client.create_partitions(
            [NewPartitions(topic, total)], operation_timeout=ADMIN_TIMEOUT_S
        )[topic]
        try:
            fut.result()
        except KafkaException as exc:
            err: KafkaError = exc.args[0]
            raise KafkaUnavailableError(
                f"cannot grow topic {topic} to {total} partitions: {err.str()}"
            ) from None
        self._await_visible({topic: total})

    def delete_groups(self, names: Iterable[str]) -> None:
        """Delete consumer groups (their committed offsets); missing ones are ignored."""
        names = list(names)
        if not names:
            return
        for name, fut in self._client.delete_consumer_groups(
            names, request_timeout=ADMIN_TIMEOUT_S
        ).items():
            try:
                fut.result()
            except KafkaException as exc:
                err: KafkaError = exc.args[0]
                if err.code() != KafkaError.GROUP_ID_NOT_FOUND:
                    raise KafkaUnavailableError(
                        f"cannot delete consumer group {name}: {err.str()}"
                    ) from None

    def delete_records_before(self, offsets: Iterable[TopicPartition]) -> None:
        """Purge each partition's records before the given offset (log start moves up)."""
        tps = [tp for tp in offsets if tp.offset > 0]
        if not tps:
            return
        for tp, fut in self._client.delete_records(tps, operation_timeout=ADMIN_TIMEOUT_S).items():
            try:
                fut.result()
            except KafkaException as exc:
                raise KafkaUnavailableError(
                    f"cannot purge {tp.topic}[{tp.partition}] before {tp.offset}: {exc.args[0]}"
                ) from None

    def first_records(
        self, topic: str, per_partition: int, timeout: float = 5.0
    ) -> dict[int, list[Any]]:
        """Up to `per_partition` of the first retained records of each partition of `topic`.

        Read committed; a partition gives fewer when it holds fewer, when its
        read fails, or when `timeout` seconds pass first (a sample, never an
        error: nothing here refuses a run). A missing topic gives ``{}``.
        """
        from confluent_kafka import OFFSET_BEGINNING, Consumer

        n = self.partitions(topic)
        if n is None:
            return {}
        consumer = Consumer(
            client_config(
                self.bootstrap,
                {
                    "group.id": "kstream-admin",
                    "enable.auto.commit": False,
                    # An empty partition says so at once instead of at the timeout.
                    "enable.partition.eof": True,
                    "isolation.level": "read_committed",
                },
            )
        )
        got: dict[int, list[Any]] = {p: [] for p in range(n)}
        reading = set(got)
        try:
            consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(n)])
            deadline = time.monotonic() + timeout
            while reading and time.monotonic() < deadline:
                for m in consumer.consume(500, 0.1):
                    p = m.partition() or 0
                    if p not in reading:
                        continue
                    if m.error() is None:
                        got[p].append(m)
                    if m.error() is not None or len(got[p]) >= per_partition:
                        reading.discard(p)
                        consumer.pause([TopicPartition(topic, p)])
        except KafkaException:
            pass  # a sample: what was read so far
        finally:
            consumer.close()
        return got

    def watermarks(self, topic: str) -> dict[int, tuple[int, int]]:
        """(low, high) offsets of every partition of `topic`."""
        from confluent_kafka import Consumer

        n = self.partitions(topic)
        if n is None:
            raise ConfigurationError(f"topic {topic} does not exist on {self.bootstrap}")
        consumer = Consumer(client_config(self.bootstrap, {"group.id": "kstream-admin"}))
        try:
            return {
                p: retrying(
                    lambda p=p: consumer.get_watermark_offsets(  # type: ignore[misc]
                        TopicPartition(topic, p), timeout=ADMIN_TIMEOUT_S, cached=False
                    )
                )
                for p in range(n)
            }
        except KafkaException as exc:
            raise KafkaUnavailableError(
                f"cannot read the offsets of {topic}: {exc.args[0]}"
            ) from None
        finally:
            consumer.close()


def _led(topic: object) -> bool:
    """Whether topic metadata (or None) shows the topic with a leader for every partition."""
    if topic is None or getattr(topic, "error", None) is not None:
        return False
    partitions = getattr(topic, "partitions", {})
    return bool(partitions) and all(p.error is None and p.leader >= 0 for p in partitions.values())


#: A TCP connect to a live broker takes milliseconds; this only bounds a black hole.
PROBE_TIMEOUT_S = 3.0


def _refusing(bootstrap: str) -> str | None:
    """Why no bootstrap address of `bootstrap` accepts a TCP connection, or None if one does.

    Addresses without a port, or whose host does not resolve, are left to
    librdkafka (None): only definite refusals and timeouts count here.
    """
    reasons = []
    for address in bootstrap.split(","):
        host, sep, port = address.strip().rpartition(":")
        if not sep or not port.isdigit():
            return None
        host = host.strip("[]")
        # A listener name prefix ("PLAINTEXT://host") is allowed by librdkafka.
        host = host.rpartition("//")[2]
        try:
            with socket.create_connection((host, int(port)), timeout=PROBE_TIMEOUT_S):
                return None
        except socket.gaierror:
            return None
        except OSError as exc:
            reasons.append(f"{address.strip()}: {exc.strerror or exc}")
    return "; ".join(reasons) or None
