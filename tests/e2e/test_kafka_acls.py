"""A job's principal with exactly the ACLs the docs list runs it; one ACL less stops it.

The list: docs/guide/secured-kafka.md, "The ACLs a job needs".

The module starts a local broker with ``--security sasl-ssl-acls`` (KRaft's
StandardAuthorizer: what no ACL allows is denied) on
``KSTREAM_TEST_ACL_BROKER_PORT``, creates one SCRAM user per test and grants it
`kstream.infra.acls.job_acls`, as the broker's admin.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kstream.infra.acls import Acl, add_scram_user, grant, job_acls
from kstream.infra.admin import Admin
from kstream.infra.broker import LocalBroker
from kstream.infra.client_settings import ENV_VAR
from kstream.testing import produce, read_all, unique_name

pytestmark = [pytest.mark.broker, pytest.mark.e2e]

#: Apart from the suite's other brokers (plaintext, SASL_SSL without ACLs).
ACL_PORT = int(os.environ.get("KSTREAM_TEST_ACL_BROKER_PORT", "23198"))
LINES = ["a b a", "c a"] * 100
EXPECTED_OUTPUTS = sum(len(line.split()) for line in LINES)
#: Generous bounds for a loaded 2-core machine; reached in seconds when healthy.
CATCH_UP_S = 180.0


@pytest.fixture(scope="module")
def broker() -> Iterator[LocalBroker]:
    """A running SASL_SSL broker enforcing ACLs; this process acts as its admin."""
    broker = LocalBroker(ACL_PORT, security="sasl-ssl-acls")
    started = not broker.status().running
    if started:
        broker.wipe()
        broker.start()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(ENV_VAR, str(broker.tls.admin_properties))
        yield broker
    if started:
        broker.stop()


def principal(broker: LocalBroker, tmp_path: Path, acls: list[Acl]) -> Path:
    """A new SCRAM user allowed exactly `acls`; its ``--kafka-config`` file."""
    user, password = unique_name("tenant"), unique_name("pw")
    add_scram_user(broker.bootstrap, broker.admin_settings(), user, password)
    grant(broker.bootstrap, broker.admin_settings(), user, acls)
    path = tmp_path / f"{user}.properties"
    path.write_text(
        "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
        f"sasl.username={user}\nsasl.password={password}\nssl.ca.location={broker.tls.ca_pem}\n"
    )
    return path


def run_wordcount(
    broker: LocalBroker, settings: Path, job: str, src: str, dst: str, state: Path
) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k != ENV_VAR}
    return subprocess.Popen(
        [
            sys.executable, "-m", "kstream", "run", "kstream.examples.wordcount:job",
            "-p", f"input={src}", "-p", f"output={dst}", "--bootstrap-servers", broker.bootstrap,
            "--kafka-config", str(settings), "--job-name", job, "--workers", "2",
            "--state-dir", str(state), "--checkpoint-interval", "0.5",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )  # fmt: skip


def finish(proc: subprocess.Popen[str], timeout: float) -> str:
    """Its stderr once `proc` exits by itself; fails (stopping it) if it runs past `timeout`."""
    try:
        return proc.communicate(timeout=timeout)[1]
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGTERM)
        stderr = proc.communicate(timeout=120)[1]
        pytest.fail(f"the job did not stop by itself within {timeout:.0f}s: {stderr[-2000:]}")


@pytest.fixture
def topics(broker: LocalBroker) -> tuple[str, str]:
    src, dst = unique_name("acl-in"), unique_name("acl-out")
    Admin(broker.bootstrap).create_topics({src: 2, dst: 2})
    produce(broker.bootstrap, src, [(None, line.encode()) for line in LINES])
    return src, dst


def test_exactly_the_listed_acls_run_the_job(
    broker: LocalBroker, topics: tuple[str, str], tmp_path: Path
) -> None:
    src, dst = topics
    job = unique_name("acl-job")
    settings = principal(broker, tmp_path, job_acls(job, [src], [dst]))
    proc = run_wordcount(broker, settings, job, src, dst, tmp_path / "state")
    try:
        deadline = time.monotonic() + CATCH_UP_S
        while len(read_all(broker.bootstrap, dst)) < EXPECTED_OUTPUTS:
            assert proc.poll() is None, proc.communicate()[1]
            assert time.monotonic() < deadline, "the job did not write every output in time"
            time.sleep(0.5)  # polling the output topic; no event to wait on
    finally:
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr
    counts = sorted(int(r.value or b"0") for r in read_all(broker.bootstrap, dst) if r.key == b"a")
    assert counts == list(range(1, 301))


def test_a_missing_acl_stops_the_job_with_one_line_naming_it(
    broker: LocalBroker, topics: tuple[str, str], tmp_path: Path
) -> None:
    src, dst = topics
    job = unique_name("acl-job")
    missing = Acl("topic", src, "read")
    acls = [acl for acl in job_acls(job, [src], [dst]) if acl != missing]
    assert len(acls) == len(job_acls(job, [src], [dst])) - 1
    settings = principal(broker, tmp_path, acls)
    proc = run_wordcount(broker, settings, job, src, dst, tmp_path / "state")
    stderr = finish(proc, CATCH_UP_S)
    assert proc.returncode == 2, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert f"not authorized to describe topic {src}" in lines[0]
    assert "READ for an input" in lines[0]


def test_a_missing_transactional_id_acl_stops_the_job_naming_it(
    broker: LocalBroker, topics: tuple[str, str], tmp_path: Path
) -> None:
    # Denied at start: the coordinator's control producer is transactional
    # (`kstream.<job>.coordinator`), so the job stops before any worker runs.
    src, dst = topics
    job = unique_name("acl-job")
    missing = Acl("transactional-id", f"kstream.{job}.", "write", prefixed=True)
    acls = [acl for acl in job_acls(job, [src], [dst]) if acl != missing]
    assert len(acls) == len(job_acls(job, [src], [dst])) - 1
    settings = principal(broker, tmp_path, acls)
    proc = run_wordcount(broker, settings, job, src, dst, tmp_path / "state")
    stderr = finish(proc, CATCH_UP_S)
    assert proc.returncode == 2, stderr
    errors = [line for line in stderr.splitlines() if line.startswith("kstream: error:")]
    assert len(errors) == 1, stderr
    assert "Transactional Id authorization failed" in errors[0]
    assert "lacks an ACL" in errors[0]


def test_a_missing_sink_transactional_id_acl_stops_the_job_naming_it(
    broker: LocalBroker, topics: tuple[str, str], tmp_path: Path
) -> None:
    # Denied in a worker, not at start (the coordinator's own id is granted):
    # restarting the worker cannot grant it, so the job stops (rather than
    # restarting workers until its budget runs out).
    src, dst = topics
    job = unique_name("acl-job")
    missing = Acl("transactional-id", f"kstream.{job}.", "write", prefixed=True)
    acls = [acl for acl in job_acls(job, [src], [dst]) if acl != missing]
    acls.append(Acl("transactional-id", f"kstream.{job}.coordinator", "write"))
    settings = principal(broker, tmp_path, acls)
    proc = run_wordcount(broker, settings, job, src, dst, tmp_path / "state")
    stderr = finish(proc, CATCH_UP_S)
    assert proc.returncode == 1, stderr
    failed = [line for line in stderr.splitlines() if line.startswith("kstream: failed:")]
    assert len(failed) == 1, stderr
    assert "Transactional Id authorization failed" in failed[0]
    assert "lacks an ACL" in failed[0]
    assert "recoveries: 0" in stderr
