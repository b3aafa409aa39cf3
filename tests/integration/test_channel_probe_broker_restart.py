"""Flow control's channel probe lives through broker restarts (real broker, real SIGKILLs).

Fault campaigns lost dozens of workers an hour to SIGSEGV on librdkafka's
``rdk:main`` thread whenever the broker came back. The cause was the probe's
admin client: its OffsetFetch (ListConsumerGroupOffsets), answered "not
coordinator" by a restarting broker, made librdkafka dereference the admin
client's absent consumer group (confluentinc/librdkafka#5315). The probe runs
here in a child process (a crash must not take pytest with it) while the
broker is SIGKILLed and restarted; the child must survive every restart and
the probe answer again after each.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from kstream.infra.admin import Admin
from kstream.infra.broker import LocalBroker
from kstream.runtime.kafka import client_config
from kstream.testing import unique_name

# ~90 s of broker restarts: extended tier (the chaos suite restarts a broker under a
# running job in the default tier).
pytestmark = [pytest.mark.broker, pytest.mark.extended]

#: Broker restarts per run: the old probe's process died within three in trials.
RESTARTS = 4

CHILD = """
import sys, time
from kstream.protocol.barrier import Channel
from kstream.runtime.channels.flow import ChannelProbe
bootstrap, topic, group, out = sys.argv[1:5]
probe = ChannelProbe(bootstrap, {Channel(topic, 0): group})
last = None
with open(out, "a") as f:
    while True:
        p = probe.latest
        if p is not None and p.at != last and p.positions:
            last = p.at
            f.write(f"{time.monotonic()} {sorted(p.positions.values())}\\n")
            f.flush()
        time.sleep(0.05)
"""


def answers(path: Path) -> list[tuple[float, str]]:
    lines = path.read_text().splitlines() if path.exists() else []
    return [(float(t), rest) for t, rest in (line.split(" ", 1) for line in lines)]


def test_the_channel_probe_survives_broker_restarts(
    bootstrap: str, local_broker: LocalBroker | None, tmp_path: Path
) -> None:
    if local_broker is None:
        pytest.skip("the tests run against a cluster they did not start: not ours to kill")
    topic, group = unique_name("probe"), unique_name("probe-group")
    Admin(bootstrap).create_topics({topic: 1})
    # A reader's position report, as `PositionReport` commits it.
    reader = Consumer(client_config(bootstrap, {"group.id": group, "enable.auto.commit": False}))
    deadline = time.monotonic() + 60
    while True:
        try:
            reader.commit(offsets=[TopicPartition(topic, 0, 7)], asynchronous=False)
            break
        except Exception:  # the group's coordinator is still loading
            assert time.monotonic() < deadline, "could not commit the reader's position"
            time.sleep(0.5)
    reader.close()
    out = tmp_path / "answers.txt"
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, bootstrap, topic, group, str(out)],
        stderr=subprocess.PIPE,
    )
    try:

        def answered_since(t: float, what: str) -> None:
            deadline = time.monotonic() + 90
            while not any(at > t and rest == "[7]" for at, rest in answers(out)):
                code = child.poll()
                assert code is None, f"the probe's process died ({code}) {what}"
                assert time.monotonic() < deadline, f"no probe answer {what}"
                time.sleep(0.2)

        answered_since(0.0, "before any restart")
        for i in range(RESTARTS):
            assert local_broker.kill()
            local_broker.start()
            answered_since(time.monotonic(), f"after broker restart {i + 1}")
        assert child.poll() is None
    finally:
        child.kill()
        _, err = child.communicate()
    assert child.returncode == -9, err.decode(errors="replace")[-2000:]
