"""Whether another coordinator runs the job, decided from control messages alone."""

from __future__ import annotations

from kstream.protocol.messages import ControlMessage, decode, decode_all
from kstream.protocol.presence import RECENT_S, Presence, needs_wait
from kstream.protocol.presence import last_presence as last_of_messages
from kstream.protocol.presence import still_alive as alive_in_messages


def parse(wire: dict[str, object]) -> Presence | None:
    """The presence a control record announces, or None (another kind, malformed)."""
    message: ControlMessage | None = decode(wire)
    return message if isinstance(message, Presence) else None


def last_presence(wire: list[dict[str, object]]) -> Presence | None:
    return last_of_messages(decode_all(wire))


def still_alive(wire: list[dict[str, object]]) -> Presence | None:
    return alive_in_messages(decode_all(wire))


def presence(incarnation: str = "a", *, at: float = 1000.0, stopped: bool = False) -> Presence:
    return Presence(incarnation, 42, "host-1", "/srv/state", at, stopped)


def test_a_presence_round_trips_through_its_message() -> None:
    p = presence(stopped=True)
    assert parse(p.to_dict()) == p


def test_other_and_malformed_messages_are_no_presence() -> None:
    assert parse({"type": "heartbeat", "worker": "w0", "generation": 1}) is None
    broken = {**presence().to_dict(), "pid": "42"}
    assert parse(broken) is None
    assert last_presence([{"type": "trigger", "checkpoint": 1}]) is None


def test_the_last_announcement_counts() -> None:
    history = [presence("a").to_dict(), {"type": "ack"}, presence("b", at=1001.0).to_dict()]
    assert last_presence(history) == presence("b", at=1001.0)


def test_only_a_recent_unstopped_announcement_is_waited_for() -> None:
    assert not needs_wait(None, 1000.0)
    assert needs_wait(presence(at=1000.0), 1000.0 + RECENT_S - 1)
    assert not needs_wait(presence(at=1000.0), 1000.0 + RECENT_S + 1)
    assert not needs_wait(presence(at=1000.0, stopped=True), 1000.0)


def test_a_heartbeat_after_start_up_proves_another_runner_alive() -> None:
    assert still_alive([]) is None
    assert still_alive([{"type": "heartbeat"}]) is None
    assert still_alive([presence("a").to_dict()]) == presence("a")
    # It said it stopped after its heartbeat: nobody is left.
    assert still_alive([presence("a").to_dict(), presence("a", stopped=True).to_dict()]) is None
