"""`kstream chaos` never takes a broker it did not create: the user's broker and its
topics survive every way of pointing a campaign at it.

A real broker of the user's runs on ``KSTREAM_TEST_CHAOS_GUARD_PORT`` (default
23294, controller on the next port) holding a topic with a record; campaigns
that may run get the two ports after it. Each `kstream chaos` is the real
command in its own process.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from kstream.infra.admin import Admin
from kstream.infra.broker import LocalBroker
from kstream.testing import produce, read_all, unique_name
from kstream.tools.chaos.own_broker import OWNER_FILE

pytestmark = [pytest.mark.e2e]

#: The user's broker; a campaign that runs uses USER_PORT + 2 (and + 3).
USER_PORT = int(os.environ.get("KSTREAM_TEST_CHAOS_GUARD_PORT", "23294"))
CAMPAIGN_PORT = USER_PORT + 2
#: A campaign as short as one gets: no faults, one worker, a few lines.
SHORT = ["--duration", "3", "--rate", "10", "--workers", "1", "--kinds", "worker-kill",
         "--mean-gap", "1000"]  # fmt: skip


@pytest.fixture
def user_broker() -> Iterator[tuple[LocalBroker, str]]:
    """The user's running broker and a topic on it holding one record."""
    broker = LocalBroker(USER_PORT)
    broker.stop()
    broker.wipe()
    broker.start()
    topic = unique_name("users-topic")
    Admin(broker.bootstrap).create_topics({topic: 1})
    produce(broker.bootstrap, topic, [(b"k", b"the user's data")])
    yield broker, topic
    broker.stop()


def environment(**settings: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("KSTREAM_BROKER_PORT", "KSTREAM_CHAOS_BROKER_PORT")
    }
    return {**env, **settings}


def chaos(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kstream", "chaos", *args],
        env=env, cwd=cwd, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip


def assert_survived(broker: LocalBroker, topic: str) -> None:
    """The user's broker runs (started again if stopped) and still holds its record."""
    broker.start()
    assert [r.value for r in read_all(broker.bootstrap, topic)] == [b"the user's data"]
    assert not (broker.directory / OWNER_FILE).exists()


def refused(done: subprocess.CompletedProcess[str], out: Path) -> str:
    """The one line of a campaign refused at once; it created nothing."""
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert not out.exists(), "the refused campaign created its output directory"
    return lines[0]


def test_a_campaign_ignores_kstream_broker_port_and_leaves_that_broker_alone(
    user_broker: tuple[LocalBroker, str], tmp_path: Path
) -> None:
    broker, topic = user_broker
    pid = broker.pid()
    env = environment(
        KSTREAM_BROKER_PORT=str(USER_PORT), KSTREAM_CHAOS_BROKER_PORT=str(CAMPAIGN_PORT)
    )
    done = chaos([*SHORT, "--out", str(tmp_path / "out")], env, tmp_path)
    assert broker.pid() == pid, "the user's broker was stopped or restarted"
    assert_survived(broker, topic)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"broker on 127.0.0.1:{CAMPAIGN_PORT} " in done.stderr
    # The campaign's broker is its own, marked, and stopped at the end.
    campaign = LocalBroker(CAMPAIGN_PORT)
    assert (campaign.directory / OWNER_FILE).is_file()
    assert campaign.pid() is None


def test_a_port_kstream_broker_port_names_is_refused(
    user_broker: tuple[LocalBroker, str], tmp_path: Path
) -> None:
    broker, topic = user_broker
    env = environment(KSTREAM_BROKER_PORT=str(USER_PORT))
    line = refused(chaos([*SHORT, "--port", str(USER_PORT), "--out", str(tmp_path / "out")],
                         env, tmp_path), tmp_path / "out")  # fmt: skip
    assert line == (
        f"kstream: error: --port {USER_PORT}: the broker on port {USER_PORT} "
        "(KSTREAM_BROKER_PORT) is not the campaign's, and a campaign kills and wipes its "
        "broker; choose a --port no setting names"
    )
    assert_survived(broker, topic)


def test_a_running_broker_no_setting_names_is_refused(
    user_broker: tuple[LocalBroker, str], tmp_path: Path
) -> None:
    broker, topic = user_broker
    for port in (USER_PORT, USER_PORT - 1):  # the second's controller port is the broker's
        done = chaos([*SHORT, "--port", str(port), "--out", str(tmp_path / "out")],
                     environment(), tmp_path)  # fmt: skip
        assert refused(done, tmp_path / "out") == (
            f"kstream: error: --port {port}: 127.0.0.1:{USER_PORT} answers, and a campaign "
            "only runs on a broker it starts itself; choose another --port"
        )
    assert_survived(broker, topic)


def test_a_stopped_brokers_data_is_refused(
    user_broker: tuple[LocalBroker, str], tmp_path: Path
) -> None:
    broker, topic = user_broker
    broker.stop()
    done = chaos([*SHORT, "--port", str(USER_PORT), "--out", str(tmp_path / "out")],
                 environment(), tmp_path)  # fmt: skip
    assert refused(done, tmp_path / "out") == (
        f"kstream: error: --port {USER_PORT}: {broker.directory} holds a broker's data that "
        "no campaign created, and a campaign wipes its broker's data; choose another --port"
    )
    assert broker.pid() is None, "the refused campaign started the broker"
    assert_survived(broker, topic)
