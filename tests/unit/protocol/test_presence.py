"""Whether another coordinator runs the job, decided from control messages alone."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kstream.protocol.messages import ControlMessage, decode, decode_all
from kstream.protocol.presence import (
    HEARTBEAT_S,
    IDLE_HEARTBEAT_S,
    RECENT_S,
    SLOW_ROUND_S,
    Presence,
    announce_due,
    needs_wait,
    period_s,
    wait_s,
)
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


def test_an_idle_job_announces_itself_less_often() -> None:
    assert period_s(idle=False) == HEARTBEAT_S
    assert period_s(idle=True) == IDLE_HEARTBEAT_S > HEARTBEAT_S


def test_a_starting_runner_waits_one_announced_period_and_a_slow_round() -> None:
    busy = Presence("a", 42, "host-1", "/srv/state", 1000.0, every=HEARTBEAT_S)
    idle = Presence("a", 42, "host-1", "/srv/state", 1000.0, every=IDLE_HEARTBEAT_S)
    assert wait_s(busy) == HEARTBEAT_S + SLOW_ROUND_S
    assert wait_s(idle) == IDLE_HEARTBEAT_S + SLOW_ROUND_S
    assert parse(idle.to_dict()) == idle
    # Written before announcements said their period: one second, as they were sent.
    old = {k: v for k, v in busy.to_dict().items() if k != "every"}
    assert parse(old) == busy
    # Nonsense is read as the old period, and a huge one waits no longer than an
    # announcement stays recent: a start is delayed, never blocked.
    assert parse({**busy.to_dict(), "every": -3}) == busy
    assert parse({**busy.to_dict(), "every": float("nan")}) == busy
    huge = parse({**busy.to_dict(), "every": 1e12})
    assert huge is not None
    assert wait_s(huge) == RECENT_S + SLOW_ROUND_S
    assert parse({**busy.to_dict(), "every": "soon"}) is None


@settings(max_examples=300, deadline=None)
@given(
    steps=st.lists(
        st.tuples(st.floats(min_value=0.001, max_value=0.25), st.booleans()), max_size=400
    )
)
def test_every_announcement_comes_within_the_period_the_one_before_promised(
    steps: list[tuple[float, bool]],
) -> None:
    """A coordinator's rounds, each `dt` s long, the job going idle and busy at will:
    the gap between two announcements never exceeds what the first one promised
    (plus the round in which the next falls due), whatever the idleness does."""
    now, announced, promised = 0.0, 0.0, period_s(idle=False)
    for dt, idle in steps:
        now += dt
        if announce_due(now - announced, promised, idle):
            assert now - announced <= promised + dt
            announced, promised = now, period_s(idle)


def test_falling_idle_announces_the_longer_period_before_using_it() -> None:
    # Announced "every 1 s" while busy, idle since: due after 1 s, not 4.
    assert not announce_due(0.9, HEARTBEAT_S, idle=True)
    assert announce_due(1.0, HEARTBEAT_S, idle=True)
    # Announced "every 4 s" while idle, busy again: due after 1 s.
    assert announce_due(1.0, IDLE_HEARTBEAT_S, idle=False)
    assert not announce_due(3.9, IDLE_HEARTBEAT_S, idle=True)
