"""The ACLs a job's principal needs on a cluster with an authorizer, and granting them.

`job_acls` is the list :ref:`secured-kafka-acls` gives: a job reads its input topics, writes
its output topics, and owns everything named ``kstream.<job>.`` (internal
topics, consumer groups, transactional ids); it reads the broker's settings
once at start (the transaction timeout cap). `grant` creates ACLs and
`add_scram_user` a SCRAM user, as an administrator (the local broker's
``admin.properties``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from confluent_kafka import KafkaException

# Exported at run time; the package's type stubs leave them out.
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from kstream.errors import KafkaUnavailableError
from kstream.infra.client_settings import client_config

__all__ = ["Acl", "add_scram_user", "grant", "job_acls"]

#: What Kafka calls the one cluster resource.
CLUSTER = "kafka-cluster"
#: SCRAM iterations for users kstream creates (Kafka's minimum is 4096).
SCRAM_ITERATIONS = 8192
#: Administrative requests on a healthy cluster take milliseconds; this bounds a dead one.
TIMEOUT_S = 30.0


@dataclass(frozen=True, slots=True)
class Acl:
    """One allow rule: `operation` on the resource `kind` named `name` (a prefix if `prefixed`)."""

    kind: str  # "topic", "group", "transactional-id", "cluster"
    name: str
    operation: str  # "read", "write", "describe", "describe-configs", "all"
    prefixed: bool = False

    def describe(self) -> str:
        pattern = "prefixed" if self.prefixed else "literal"
        return f"{self.operation.upper()} on {self.kind} {self.name} ({pattern})"


def job_acls(job: str, inputs: Iterable[str], outputs: Iterable[str]) -> list[Acl]:
    """Exactly the ACLs a principal needs to run job `job` reading `inputs`, writing `outputs`."""
    own = f"kstream.{job}."
    acls = [Acl("topic", t, "read") for t in sorted(set(inputs))]
    acls += [Acl("topic", t, "describe-configs") for t in sorted(set(inputs))]
    acls += [Acl("topic", t, "write") for t in sorted(set(outputs))]
    acls += [Acl("topic", t, "describe-configs") for t in sorted(set(outputs))]
    acls += [
        # Internal topics: created, written, read, purged and deleted by the job.
        Acl("topic", own, "all", prefixed=True),
        # The subtasks' and the coordinator's consumer groups.
        Acl("group", own, "read", prefixed=True),
        # The transactional sinks' producers and the coordinator's control producer.
        Acl("transactional-id", own, "write", prefixed=True),
        Acl("transactional-id", own, "describe", prefixed=True),
        # The start-up check reads the broker's transaction.max.timeout.ms.
        Acl("cluster", CLUSTER, "describe-configs"),
    ]
    return acls


_KINDS: Mapping[str, ResourceType] = {
    "topic": ResourceType.TOPIC,
    "group": ResourceType.GROUP,
    "transactional-id": ResourceType.TRANSACTIONAL_ID,
    "cluster": ResourceType.BROKER,  # librdkafka's name for the cluster resource
}


def _binding(principal: str, acl: Acl) -> AclBinding:
    return AclBinding(
        _KINDS[acl.kind],
        acl.name,
        ResourcePatternType.PREFIXED if acl.prefixed else ResourcePatternType.LITERAL,
        f"User:{principal}",
        "*",
        AclOperation[acl.operation.upper().replace("-", "_")],
        AclPermissionType.ALLOW,
    )


def grant(
    bootstrap: str, admin_settings: Mapping[str, str], principal: str, acls: Iterable[Acl]
) -> None:
    """Allow user `principal` each of `acls`, as the administrator of `admin_settings`."""
    client = AdminClient(client_config(bootstrap, security=admin_settings))
    bindings = [_binding(principal, acl) for acl in acls]
    for binding, future in zip(bindings, client.create_acls(bindings).values(), strict=True):
        try:
            future.result(timeout=TIMEOUT_S)
        except KafkaException as exc:
            raise KafkaUnavailableError(f"cannot create ACL {binding}: {exc.args[0]}") from None


def add_scram_user(
    bootstrap: str,
    admin_settings: Mapping[str, str],
    user: str,
    password: str,
    mechanism: str = "SCRAM-SHA-512",
) -> None:
    """Create (or reset) SCRAM user `user`, as the administrator of `admin_settings`."""
    client = AdminClient(client_config(bootstrap, security=admin_settings))
    info = ScramCredentialInfo(ScramMechanism[mechanism.replace("-", "_")], SCRAM_ITERATIONS)
    upsert = UserScramCredentialUpsertion(user, info, password.encode())
    for future in client.alter_user_scram_credentials([upsert]).values():
        try:
            future.result(timeout=TIMEOUT_S)
        except KafkaException as exc:
            raise KafkaUnavailableError(f"cannot create SCRAM user {user}: {exc.args[0]}") from None
