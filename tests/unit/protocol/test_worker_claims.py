"""Worker incarnation claims: one process per worker index in a generation."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from kstream.protocol.coordination import CoordinatorConfig, Heartbeat, Recover
from kstream.protocol.coordinator import Coordinator
from kstream.protocol.messages import Recovered, decode

TASKS = frozenset({"a-0", "a-1"})
WORKERS = frozenset({"w0", "w1"})


def _started() -> Coordinator:
    c = Coordinator(TASKS, CoordinatorConfig(interval=1.0, timeout=60.0), workers=WORKERS)
    c.start(0.0)
    return c


def test_a_second_process_for_a_live_index_rolls_back_keeping_it() -> None:
    c = _started()
    g = c.generation
    assert c.handle(Heartbeat("w0", g, 1.0, process="p1")) == []
    assert c.handle(Heartbeat("w0", g, 2.0, process="p1")) == []
    assert c.handle(Heartbeat("w1", g, 2.0, process="q1")) == []
    [recover] = c.handle(Heartbeat("w0", g, 3.0, process="p2"))
    assert isinstance(recover, Recover)
    assert recover.generation == g + 1
    assert recover.kept == (("w0", "p2"),)
    # The kept process goes on in the new generation; the other is a claim again.
    assert c.handle(Heartbeat("w0", g + 1, 4.0, process="p2")) == []
    assert c.handle(Heartbeat("w1", g + 1, 4.0, process="q1")) == []
    [again] = c.handle(Heartbeat("w0", g + 1, 5.0, process="p1"))
    assert isinstance(again, Recover)
    assert again.kept == (("w0", "p1"),)


def test_heartbeats_of_other_generations_or_without_a_process_claim_nothing() -> None:
    c = _started()
    g = c.generation
    assert c.handle(Heartbeat("w0", g, 1.0, process="p1")) == []
    assert c.handle(Heartbeat("w0", g - 1, 2.0, process="old")) == []
    assert c.handle(Heartbeat("w0", g, 2.0)) == []
    assert c.generation == g


@given(st.lists(st.sampled_from(["p1", "p2", "p3"]), min_size=1, max_size=30))
def test_never_two_processes_of_one_index_in_a_generation(processes: list[str]) -> None:
    """Whatever order claims arrive in, a generation accepts one process per index."""
    c = _started()
    accepted: dict[int, set[str]] = {}
    for t, p in enumerate(processes):
        g = c.generation
        if c.handle(Heartbeat("w0", g, float(t), process=p)) == []:
            accepted.setdefault(g, set()).add(p)
    assert all(len(ps) == 1 for ps in accepted.values())


def test_the_kept_incarnation_travels_in_the_recover_message() -> None:
    m = Recovered(3, 7, "claimed twice", 1.0, kept=(("w1", "abc"),))
    assert decode(m.to_dict()) == m
    assert "kept" not in Recovered(3, 7).to_dict()
    assert decode({**Recovered(3, 7).to_dict(), "kept": {"w1": 5}}) is None
