"""Whether another coordinator runs the job, decided from control messages alone."""

from __future__ import annotations

from kstream.protocol.presence import RECENT_S, Presence, last_presence, needs_wait, still_alive


def presence(incarnation: str = "a", *, at: float = 1000.0, stopped: bool = False) -> Presence:
    return Presence(incarnation, 42, "host-1", "/srv/state", at, stopped)


def test_a_presence_round_trips_through_its_message() -> None:
    p = presence(stopped=True)
    assert Presence.parse(p.message()) == p


def test_other_and_malformed_messages_are_no_presence() -> None:
    assert Presence.parse({"type": "heartbeat", "worker": "w0", "generation": 1}) is None
    broken = {**presence().message(), "pid": "42"}
    assert Presence.parse(broken) is None
    assert last_presence([{"type": "trigger", "checkpoint": 1}]) is None


def test_the_last_announcement_counts() -> None:
    history = [presence("a").message(), {"type": "ack"}, presence("b", at=1001.0).message()]
    assert last_presence(history) == presence("b", at=1001.0)


def test_only_a_recent_unstopped_announcement_is_waited_for() -> None:
    assert not needs_wait(None, 1000.0)
    assert needs_wait(presence(at=1000.0), 1000.0 + RECENT_S - 1)
    assert not needs_wait(presence(at=1000.0), 1000.0 + RECENT_S + 1)
    assert not needs_wait(presence(at=1000.0, stopped=True), 1000.0)


def test_a_heartbeat_after_start_up_proves_another_runner_alive() -> None:
    assert still_alive([]) is None
    assert still_alive([{"type": "heartbeat"}]) is None
    assert still_alive([presence("a").message()]) == presence("a")
    # It said it stopped after its heartbeat: nobody is left.
    assert still_alive([presence("a").message(), presence("a", stopped=True).message()]) is None
