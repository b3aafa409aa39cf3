"""The word count and the audit over SASL_SSL, against kstream's own secured broker.

The module starts a local broker with ``--security sasl-ssl`` (SCRAM-SHA-512
users, a CA made at its first start) on ``KSTREAM_TEST_SECURE_BROKER_PORT``
and runs everything as a user would: ``kstream run``/``kstream audit`` with
``--kafka-config`` pointing at the client file the broker wrote.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest

from kstream.infra.admin import Admin
from kstream.infra.broker import LocalBroker
from kstream.infra.client_settings import ENV_VAR, read_settings
from kstream.testing import produce, read_all, unique_name, wait_settled

pytestmark = [pytest.mark.broker, pytest.mark.e2e]

#: Apart from the suite's plaintext broker (KSTREAM_TEST_BROKER_PORT) and the demo's.
SECURE_PORT = int(os.environ.get("KSTREAM_TEST_SECURE_BROKER_PORT", "23196"))
LINES = [f"alpha beta w{i % 13} alpha" for i in range(2000)]
#: Generous bounds for a loaded 2-core machine; reached in seconds when healthy.
CATCH_UP_S = 180.0
AUDIT_TIMEOUT_S = 600.0


@pytest.fixture(scope="module")
def secured(bootstrap: str) -> Iterator[LocalBroker]:
    """A running SASL_SSL broker; this process's clients use its client settings.

    The suite's plaintext cluster (`bootstrap`) is reached first, while no settings apply.
    """
    broker = LocalBroker(SECURE_PORT, security="sasl-ssl")
    started = not broker.status().running
    if started:
        broker.wipe()
        broker.start()
    assert broker.client_properties is not None
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(ENV_VAR, str(broker.client_properties))
        yield broker
    if started:
        broker.stop()


def kstream(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    environment = {k: v for k, v in os.environ.items() if k != ENV_VAR}
    return subprocess.Popen(
        [sys.executable, "-m", "kstream", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**environment, **(env or {})},
    )


def wait_for(predicate: object, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return
        time.sleep(0.2)  # polling an external system's state; no event to wait on
    raise AssertionError(f"timed out waiting for {what}")


def _outputs(bootstrap: str, topic: str) -> dict[str, list[int]]:
    seen: dict[str, list[int]] = defaultdict(list)
    for r in read_all(bootstrap, topic):
        seen[(r.key or b"").decode()].append(int(r.value or b"0"))
    return dict(seen)


@pytest.fixture(scope="module")
def counted(secured: LocalBroker, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """The word count run over SASL_SSL by `kstream run --kafka-config`, to completion."""
    bootstrap = secured.bootstrap
    src, dst = unique_name("sec-in"), unique_name("sec-out")
    Admin(bootstrap).create_topics({src: 2, dst: 2})
    produce(bootstrap, src, [(None, line.encode()) for line in LINES])
    state = tmp_path_factory.mktemp("secured-state")
    proc = kstream(
        "run", "kstream.examples.wordcount:job", "-p", f"input={src}", "-p", f"output={dst}",
        "--bootstrap-servers", bootstrap, "--kafka-config", str(secured.client_properties),
        "--workers", "2", "--job-name", unique_name("secured"), "--state-dir", str(state),
        "--checkpoint-interval", "0.5",
    )  # fmt: skip
    truth: dict[str, int] = defaultdict(int)
    for line in LINES:
        for word in line.split():
            truth[word] += 1
    try:

        def caught_up() -> bool:
            assert proc.poll() is None, "kstream run exited before the job caught up"
            return {w: max(v) for w, v in _outputs(bootstrap, dst).items()} == dict(truth)

        wait_for(
            caught_up,
            CATCH_UP_S,
            "every word's count to reach its number of occurrences",
        )
    finally:
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr
    return src, dst


def test_the_word_count_runs_over_sasl_ssl_exactly_once(
    secured: LocalBroker, counted: tuple[str, str]
) -> None:
    _, dst = counted
    wait_settled(secured.bootstrap, dst)
    outputs = _outputs(secured.bootstrap, dst)
    # Exactly once: each word's running counts are 1..N, none repeated or missing.
    for word, counts in outputs.items():
        assert sorted(counts) == list(range(1, len(counts) + 1)), word
    assert sum(len(c) for c in outputs.values()) == sum(len(line.split()) for line in LINES)


def test_the_audit_reads_over_sasl_ssl(
    secured: LocalBroker, counted: tuple[str, str], tmp_path: Path
) -> None:
    src, dst = counted
    proc = kstream(
        "audit", "--input", src, "--output", dst, "--bootstrap-servers", secured.bootstrap,
        "--kafka-config", str(secured.client_properties), "--master", "local[1]",
        "--report-dir", str(tmp_path),
    )  # fmt: skip
    stdout, stderr = proc.communicate(timeout=AUDIT_TIMEOUT_S)
    assert proc.returncode == 0, stderr
    assert stdout.startswith("clean (running-count)"), stdout


def test_a_wrong_password_fails_with_one_line_naming_authentication(
    secured: LocalBroker, tmp_path: Path
) -> None:
    assert secured.client_properties is not None
    settings = read_settings(secured.client_properties)
    password = settings["sasl.password"]
    settings["sasl.password"] = "not-" + password
    wrong = tmp_path / "wrong.properties"
    wrong.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
    proc = kstream(
        "run", "kstream.examples.wordcount:job", "-p", "input=any", "-p", "output=any",
        "--bootstrap-servers", secured.bootstrap, "--job-name", unique_name("wrong-password"),
        "--state-dir", str(tmp_path / "state"),
        # Through the environment this time, as a worker or a script would get it.
        env={ENV_VAR: str(wrong)},
    )  # fmt: skip
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 2, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert "refused authentication" in lines[0]
    assert "SCRAM-SHA-512" in lines[0]
    assert password not in stderr + stdout
    assert "not-" + password not in stderr + stdout


def test_a_client_without_the_settings_is_not_let_in(secured: LocalBroker, tmp_path: Path) -> None:
    # The listener accepts no unauthenticated client: plaintext Kafka talk gets nowhere.
    proc = kstream(
        "checkpoints", "--job-name", "nobody", "--bootstrap-servers", secured.bootstrap,
    )  # fmt: skip
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 2, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    # The one line names the cause: the listener speaks another protocol than the client.
    assert lines[0] == (
        f"kstream: error: the listener at {secured.bootstrap} speaks SASL_SSL but the client "
        "is configured for PLAINTEXT (no --kafka-config given); give --kafka-config FILE "
        "(or KSTREAM_KAFKA_CONFIG) with security.protocol=SASL_SSL and the cluster's credentials"
    )


def test_sasl_ssl_settings_against_a_plaintext_listener_say_so(
    bootstrap: str, secured: LocalBroker, tmp_path: Path
) -> None:
    # The reverse: the secured cluster's settings given for the suite's plaintext broker.
    assert secured.client_properties is not None
    proc = kstream(
        "run", "kstream.examples.wordcount:job", "-p", "input=any", "-p", "output=any",
        "--bootstrap-servers", bootstrap, "--kafka-config", str(secured.client_properties),
        "--job-name", unique_name("wrong-protocol"), "--state-dir", str(tmp_path / "state"),
    )  # fmt: skip
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 2, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    address = bootstrap.split(",")[0].rpartition("//")[2]
    assert lines[0].startswith(
        f"kstream: error: the listener at {address} speaks PLAINTEXT but the client is "
        f"configured for SASL_SSL (security.protocol in {secured.client_properties})"
    ), lines[0]
    password = read_settings(secured.client_properties)["sasl.password"]
    assert password not in stderr + stdout
