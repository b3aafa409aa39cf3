"""Kafka client settings: one source for every client, refused keys, the Java mapping."""

from __future__ import annotations

import ast
import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kstream.errors import ConfigurationError
from kstream.infra.client_settings import (
    ENV_VAR,
    client_config,
    read_settings,
    security_settings,
    spark_options,
    use_settings,
)

ROOT = Path(__file__).resolve().parents[3]
#: Where kstream builds Kafka clients. The Quix Streams contender runs in a
#: virtualenv of its own and cannot import kstream.
SCANNED = [ROOT / "kstream", ROOT / "connectors", ROOT / "benchmarks"]
EXEMPT = {ROOT / "benchmarks" / "quix_job.py"}
CLIENT_CLASSES = {
    "Producer",
    "Consumer",
    "AdminClient",
    "SerializingProducer",
    "DeserializingConsumer",
}

SECRET = "s3cr3t-Pa55"


def _sources() -> list[Path]:
    files = []
    for base in SCANNED:
        for path in sorted(base.rglob("*.py")):
            if path not in EXEMPT and ".venv" not in path.parts:
                files.append(path)
    return files


def _name(func: ast.expr) -> str | None:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


def client_constructions_without_settings(source: str) -> list[int]:
    """Lines of `source` building a Kafka client from anything but a `client_config(...)` call."""
    bad = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and _name(node.func) in CLIENT_CLASSES:
            first = node.args[0] if node.args else None
            if not (isinstance(first, ast.Call) and _name(first.func) == "client_config"):
                bad.append(node.lineno)
    return bad


def test_every_kafka_client_is_configured_by_client_config() -> None:
    offenders = [
        f"{path.relative_to(ROOT)}:{line}"
        for path in _sources()
        for line in client_constructions_without_settings(path.read_text())
    ]
    assert offenders == []


def test_the_scan_sees_clients_built_by_hand() -> None:
    source = (
        "p = Producer({'bootstrap.servers': b})\n"
        "c = kafka.Consumer(conf)\n"
        "a = AdminClient(client_config(b))\n"
    )
    assert client_constructions_without_settings(source) == [1, 2]


def test_only_the_settings_module_names_the_bootstrap_setting() -> None:
    # A literal "bootstrap.servers" elsewhere is a client configured by hand.
    owners = {ROOT / "kstream" / "infra" / "client_settings.py"}
    offenders = [
        str(path.relative_to(ROOT))
        for path in _sources()
        if path not in owners and '"bootstrap.servers"' in path.read_text()
    ]
    assert offenders == []


def test_every_spark_kafka_reader_takes_the_mapped_settings() -> None:
    for path in _sources():
        text = path.read_text()
        if '.format("kafka")' in text:
            assert "spark_options(" in text, path


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "client.properties"
    path.write_text(text)
    return path


def test_a_file_of_security_settings_is_read(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "# secured cluster\n"
        "security.protocol=SASL_SSL\n"
        "sasl.mechanism = SCRAM-SHA-512\n"
        "sasl.username=alice\n"
        f"sasl.password={SECRET}=x\n"
        "\n"
        "ssl.ca.location=/etc/ca.pem\n",
    )
    assert read_settings(path) == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "alice",
        "sasl.password": f"{SECRET}=x",
        "ssl.ca.location": "/etc/ca.pem",
    }


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ("bootstrap.servers=evil:9092", "bootstrap.servers is set by kstream"),
        ("transactional.id=x", "transactional.id is set by kstream"),
        ("group.id=x", "group.id is set by kstream"),
        ("isolation.level=read_uncommitted", "isolation.level is set by kstream"),
        ("sasl.kerberos.kinit.cmd=rm -rf /", "runs a shell command"),
        ("plugin.library.paths=/tmp/x.so", "loads native code"),
        ("enable.ssl.certificate.verification=false", "must be verified"),
        ("linger.ms=1000", "linger.ms is not a connection or security setting"),
        ("no equals sign", "expected key=value"),
        ("security.protocol=SSL\nsecurity.protocol=SASL_SSL", "given twice"),
    ],
)
def test_a_refused_line_gets_one_line_naming_it(tmp_path: Path, line: str, says: str) -> None:
    path = _write(tmp_path, f"sasl.password={SECRET}\n{line}\n")
    with pytest.raises(ConfigurationError) as err:
        read_settings(path)
    message = str(err.value)
    assert says in message
    assert f"{path} line " in message
    assert "\n" not in message
    assert SECRET not in message


def test_a_missing_file_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="cannot read Kafka client settings"):
        read_settings(tmp_path / "absent.properties")


def _refusal(directory: Path, text: str) -> str:
    path = directory / "c.properties"
    path.write_text(text)
    with pytest.raises(ConfigurationError) as err:
        read_settings(path)
    return str(err.value)


@given(
    key=st.sampled_from(["sasl.passwd", "bootstrap.servers", "sasl.kerberos.kinit.cmd"]),
    value=st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc")), max_size=40),
)
def test_a_refusal_never_depends_on_the_value(key: str, value: str) -> None:
    # The value may be a secret under a mistyped key: the message is the same for any value.
    with tempfile.TemporaryDirectory() as tmp:
        assert _refusal(Path(tmp), f"{key}={value}\n") == _refusal(Path(tmp), f"{key}=x\n")


def test_client_config_adds_the_settings_of_the_environment_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _write(tmp_path, "security.protocol=SASL_SSL\nsasl.username=alice\n")
    monkeypatch.delenv(ENV_VAR, raising=False)
    assert client_config("h:1", {"group.id": "g"}) == {
        "bootstrap.servers": "h:1",
        "log_level": 0,
        "group.id": "g",
    }
    use_settings(path)
    assert client_config("h:1", {"group.id": "g"}) == {
        "bootstrap.servers": "h:1",
        "log_level": 0,
        "group.id": "g",
        "security.protocol": "SASL_SSL",
        "sasl.username": "alice",
    }
    # Explicit settings (the local broker's own admin) replace the environment's.
    assert client_config("h:1", security={})["bootstrap.servers"] == "h:1"
    assert "security.protocol" not in client_config("h:1", security={})


def test_use_settings_refuses_a_bad_file_and_keeps_the_old_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(ENV_VAR, raising=False)
    bad = _write(tmp_path, "bootstrap.servers=x\n")
    with pytest.raises(ConfigurationError):
        use_settings(bad)
    assert security_settings() == {}


def test_spark_options_map_scram_over_tls_to_the_java_client() -> None:
    options = spark_options(
        {
            "security.protocol": "sasl_ssl",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "alice",
            "sasl.password": 'p"a\\ss',
            "ssl.ca.location": "/etc/ca.pem",
            "ssl.endpoint.identification.algorithm": "none",
        }
    )
    assert options == {
        "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": "SCRAM-SHA-512",
        "kafka.sasl.jaas.config": (
            "org.apache.kafka.common.security.scram.ScramLoginModule required "
            'username="alice" password="p\\"a\\\\ss";'
        ),
        "kafka.ssl.truststore.type": "PEM",
        "kafka.ssl.truststore.location": "/etc/ca.pem",
        "kafka.ssl.endpoint.identification.algorithm": "",
    }


def test_spark_options_map_plain_and_inline_certificates() -> None:
    options = spark_options(
        {
            "sasl.mechanisms": "PLAIN",
            "sasl.username": "u",
            "sasl.password": "p",
            "ssl.ca.pem": "CA",
            "ssl.certificate.pem": "CERT",
            "ssl.key.pem": "KEY",
        }
    )
    assert options["kafka.sasl.jaas.config"].startswith(
        "org.apache.kafka.common.security.plain.PlainLoginModule required"
    )
    assert options["kafka.ssl.truststore.certificates"] == "CA"
    assert options["kafka.ssl.keystore.type"] == "PEM"
    assert options["kafka.ssl.keystore.certificate.chain"] == "CERT"
    assert options["kafka.ssl.keystore.key"] == "KEY"


def test_spark_options_refuse_what_java_cannot_take() -> None:
    with pytest.raises(ConfigurationError, match=r"sasl\.kerberos\.keytab has no counterpart"):
        spark_options({"sasl.kerberos.keytab": "/k"})
    with pytest.raises(ConfigurationError, match=r"need sasl\.mechanism"):
        spark_options({"sasl.mechanism": "GSSAPI", "sasl.username": "u"})


def test_no_settings_map_to_no_options() -> None:
    assert spark_options({}) == {}


@pytest.mark.parametrize("command", ["run", "worker", "checkpoints", "audit", "demo wordcount"])
def test_every_command_refuses_a_bad_settings_file_in_one_line(
    tmp_path: Path, command: str
) -> None:
    import os
    import subprocess
    import sys

    path = _write(tmp_path, f"sasl.password={SECRET}\nbootstrap.servers=elsewhere:9092\n")
    env = {k: v for k, v in os.environ.items() if k != ENV_VAR}
    args = {
        "run": ["kstream.examples.wordcount:job"],
        "worker": ["kstream.examples.wordcount:job", "--worker", "0", "--workers", "1"],
        "checkpoints": ["--job-name", "j"],
        "audit": ["--input", "i", "--output", "o"],
        "demo wordcount": [],
    }[command]
    done = subprocess.run(
        [sys.executable, "-m", "kstream", *command.split(), *args, "--kafka-config", str(path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "bootstrap.servers is set by kstream" in lines[0]
    assert SECRET not in done.stderr + done.stdout
