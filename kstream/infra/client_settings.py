"""The settings of every Kafka client kstream creates, from one place.

Every producer, consumer and admin client of kstream (workers, coordinator,
control topic, admin, sources and sinks, the testing kit, the benchmarks) gets
its configuration from `client_config`; a unit test fails if one is built
another way. The cluster's address comes from the caller (``--bootstrap-servers``);
how to reach it securely comes from one file of librdkafka ``key=value``
properties, named by ``--kafka-config FILE`` or ``KSTREAM_KAFKA_CONFIG=FILE``
(the command line sets the variable, so worker processes inherit it)::

    security.protocol=SASL_SSL
    sasl.mechanism=SCRAM-SHA-512
    sasl.username=alice
    sasl.password=...
    ssl.ca.location=/path/to/ca.pem

Only settings about how to connect and authenticate are accepted (`ALLOWED`,
`ALLOWED_PREFIXES`). Settings kstream owns (the bootstrap address, group and
transactional ids, isolation, idempotence...) and settings that would run code
or switch off certificate checks (`UNSAFE`) are refused with one line naming
the key. Values are never quoted in an error: they may be secrets.

`spark_options` maps the same settings to the Java client's ``kafka.``-prefixed
options, for the audit's Spark reader.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kstream.errors import ConfigurationError

__all__ = [
    "ENV_VAR",
    "client_config",
    "read_settings",
    "security_settings",
    "spark_options",
    "use_settings",
]

#: The environment variable naming the settings file; worker processes inherit it.
ENV_VAR = "KSTREAM_KAFKA_CONFIG"

#: How to connect and authenticate: what a secured cluster asks of a client.
ALLOWED = frozenset(
    {
        "security.protocol",
        "client.id",
        "client.rack",
        "sasl.mechanism",
        "sasl.mechanisms",
        "sasl.username",
        "sasl.password",
        "sasl.kerberos.service.name",
        "sasl.kerberos.principal",
        "sasl.kerberos.keytab",
        "sasl.kerberos.min.time.before.relogin",
        "ssl.ca.location",
        "ssl.ca.pem",
        "ssl.ca.certificate.stores",
        "ssl.crl.location",
        "ssl.certificate.location",
        "ssl.certificate.pem",
        "ssl.key.location",
        "ssl.key.pem",
        "ssl.key.password",
        "ssl.keystore.location",
        "ssl.keystore.password",
        "ssl.endpoint.identification.algorithm",
        "ssl.cipher.suites",
        "ssl.curves.list",
        "ssl.sigalgs.list",
    }
)
#: Families of connection settings accepted whole (OAUTHBEARER's token endpoint and client).
ALLOWED_PREFIXES = ("sasl.oauthbearer.",)
#: Settings that run code or stop verifying the broker: refused even though they concern security.
UNSAFE: Mapping[str, str] = {
    "sasl.kerberos.kinit.cmd": "it runs a shell command",
    "plugin.library.paths": "it loads native code into every process",
    "ssl.engine.location": "it loads native code into every process",
    "enable.ssl.certificate.verification": "certificates must be verified",
}
#: Settings kstream decides itself, with the reason a file may not change them.
OWNED: Mapping[str, str] = {
    "bootstrap.servers": "give the cluster with --bootstrap-servers or KSTREAM_BOOTSTRAP",
    "metadata.broker.list": "give the cluster with --bootstrap-servers or KSTREAM_BOOTSTRAP",
    "transactional.id": "kstream names transactional ids per job",
    "group.id": "kstream names consumer groups per job",
    "isolation.level": "exactly-once needs kstream's own choice",
    "enable.idempotence": "exactly-once needs kstream's own choice",
    "enable.auto.commit": "offsets live in kstream's checkpoints",
}


def _refuse(source: str, key: str) -> ConfigurationError:
    if key in OWNED:
        return ConfigurationError(f"{source}: {key} is set by kstream ({OWNED[key]}); remove it")
    if key in UNSAFE:
        return ConfigurationError(f"{source}: {key} is refused ({UNSAFE[key]}); remove it")
    return ConfigurationError(
        f"{source}: {key} is not a connection or security setting kstream accepts "
        "(security.protocol, sasl.*, ssl.*, client.id)"
    )


def _accepted(key: str) -> bool:
    return key not in UNSAFE and (key in ALLOWED or key.startswith(ALLOWED_PREFIXES))


def read_settings(path: Path | str) -> dict[str, str]:
    """The settings of file `path` (librdkafka ``key=value`` lines, ``#`` comments).

    Raises `ConfigurationError` naming the file, line and key (never a value)
    for an unreadable file, a line without ``=``, a key given twice, or a key
    kstream does not accept.
    """
    path = Path(path)
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
        raise ConfigurationError(f"cannot read Kafka client settings {path}: {reason}") from None
    settings: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        where = f"{path} line {number}"
        key, sep, value = line.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigurationError(f"{where}: expected key=value")
        if key in settings:
            raise ConfigurationError(f"{where}: {key} is given twice")
        if not _accepted(key):
            raise _refuse(where, key)
        settings[key] = value.strip()
    return settings


def security_settings() -> dict[str, str]:
    """The settings of the file ``KSTREAM_KAFKA_CONFIG`` names, or none if it is unset."""
    path = os.environ.get(ENV_VAR)
    return read_settings(path) if path else {}


def use_settings(path: Path | str) -> None:
    """Check the file at `path` and make it the settings of every client of this process.

    Sets ``KSTREAM_KAFKA_CONFIG`` (an absolute path), so processes started from
    this one (workers) use the same file.
    """
    resolved = Path(path).expanduser().resolve()
    read_settings(resolved)
    os.environ[ENV_VAR] = str(resolved)


def client_config(
    bootstrap: str, *layers: Mapping[str, Any], security: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """A client configuration for `bootstrap`: quiet, then `layers` in order (later wins),
    then the security settings: `security` if given (the local broker's own
    admin), else `security_settings()`.

    librdkafka's own log lines are off: kstream reports what goes wrong itself,
    through the errors its helpers raise. The security settings come last, but
    they cannot clash: they are only connection settings, never a layer's.
    """
    config: dict[str, Any] = {"bootstrap.servers": bootstrap, "log_level": 0}
    for layer in layers:
        config.update(layer)
    config.update(security_settings() if security is None else security)
    return config


#: SASL mechanisms taking a username and password, and the Java login module of each.
_LOGIN_MODULES: Mapping[str, str] = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}
#: Settings whose Java name and meaning are the same, apart from the ``kafka.`` prefix.
_SAME_IN_JAVA = frozenset({"security.protocol", "client.id", "client.rack", "ssl.key.password"})


#: librdkafka's client certificate and key (file or inline PEM) -> the Java PEM keystore's option.
_CLIENT_CERTIFICATE: Mapping[str, str] = {
    "ssl.certificate.location": "ssl.keystore.certificate.chain",
    "ssl.certificate.pem": "ssl.keystore.certificate.chain",
    "ssl.key.location": "ssl.keystore.key",
    "ssl.key.pem": "ssl.keystore.key",
}


def _read_pem(key: str, path: str) -> str:
    try:
        return Path(path).read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigurationError(
            f"cannot read the file {key} names: {type(exc).__name__}"
        ) from None


def _jaas_quote(value: str) -> str:
    """`value` as a quoted JAAS option (the parser reads backslash escapes in quotes)."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def spark_options(settings: Mapping[str, str]) -> dict[str, str]:
    """The Java client's options (``kafka.``-prefixed, for Spark's Kafka source) for `settings`.

    A setting with no Java counterpart kstream knows raises `ConfigurationError`
    naming it, rather than letting the audit connect with weaker settings than
    the job.
    """
    options: dict[str, str] = {}
    mechanism = settings.get("sasl.mechanism") or settings.get("sasl.mechanisms")
    for key, value in settings.items():
        if key in _SAME_IN_JAVA:
            options[f"kafka.{key}"] = value.upper() if key == "security.protocol" else value
        elif key in ("sasl.mechanism", "sasl.mechanisms"):
            options["kafka.sasl.mechanism"] = value
        elif key in ("sasl.username", "sasl.password"):
            continue  # folded into the JAAS line below
        elif key == "ssl.ca.location":
            options["kafka.ssl.truststore.type"] = "PEM"
            options["kafka.ssl.truststore.location"] = value
        elif key == "ssl.ca.pem":
            options["kafka.ssl.truststore.type"] = "PEM"
            options["kafka.ssl.truststore.certificates"] = value
        elif key in _CLIENT_CERTIFICATE:
            # Java takes a PEM client certificate and key inline (a PEM keystore).
            options["kafka.ssl.keystore.type"] = "PEM"
            text = _read_pem(key, value) if key.endswith(".location") else value
            options[f"kafka.{_CLIENT_CERTIFICATE[key]}"] = text
        elif key == "ssl.keystore.location":
            options["kafka.ssl.keystore.type"] = "PKCS12"
            options["kafka.ssl.keystore.location"] = value
        elif key == "ssl.keystore.password":
            options["kafka.ssl.keystore.password"] = value
        elif key == "ssl.endpoint.identification.algorithm":
            # librdkafka says "none", Java an empty string, for "do not check the host name".
            options["kafka.ssl.endpoint.identification.algorithm"] = (
                "" if value.lower() == "none" else value
            )
        else:
            raise ConfigurationError(
                f"Kafka client setting {key} has no counterpart in the audit's Java client"
            )
    if "sasl.username" in settings or "sasl.password" in settings:
        module = _LOGIN_MODULES.get((mechanism or "").upper())
        if module is None:
            raise ConfigurationError(
                "sasl.username/sasl.password need sasl.mechanism PLAIN, SCRAM-SHA-256 or "
                "SCRAM-SHA-512 for the audit's Java client"
            )
        options["kafka.sasl.jaas.config"] = (
            f"{module} required username={_jaas_quote(settings.get('sasl.username', ''))} "
            f"password={_jaas_quote(settings.get('sasl.password', ''))};"
        )
    return options
