"""The seeds' ring jobs: their shape, and the processes' functions on a dict-backed state."""

from __future__ import annotations

from typing import Any

import pytest

from kstream.dataflow import snapshot_request
from kstream.dataflow.plan import plan
from kstream.errors import JobFailedError
from kstream.examples.seed_ring import (
    MAX_HOLD,
    OPENING_BALANCE,
    P_WORKER,
    Q_WORKER,
    REQUEST,
    WORKERS,
    P,
    Q,
    _bank_process,
    bank,
    hold_ticks,
    requesting,
    token_process,
    token_ring,
)
from kstream.tools.seeds.ring import RingLayout

PARAMS = {"p-input": "p-in", "q-input": "q-in", "name": "ring"}


class State:
    """One key's value state, as a keyed function sees it."""

    def __init__(self, value: Any = None) -> None:
        self.value = value

    def get(self, default: Any = None) -> Any:
        return default if self.value is None else self.value

    def set(self, value: Any) -> None:
        self.value = value

    def clear(self) -> None:
        self.value = None


def test_the_ring_is_p_in_p_q_with_a_loop_back_into_p() -> None:
    for job in (token_ring(PARAMS), bank(PARAMS)):
        p = plan(job, 1)
        assert set(p.parallelism) == {1}
        head = next(s for s in job.stages if s.iterate is not None)
        loops = [i for i in head.inputs if i.loop]
        assert len(loops) == 1
        (q_stage,) = (s for s in job.stages if len(s.inputs) == 2 and s is not head)
        # q's inputs: p's output and q's own source.
        assert {i.upstream.source is None for i in q_stage.inputs} == {True, False}
        assert loops[0].upstream is q_stage


def test_p_and_q_run_on_two_workers() -> None:
    for job in (token_ring(PARAMS), bank(PARAMS)):
        layout = RingLayout.of(plan(job, WORKERS))
        p_side = {layout.p_source, layout.head, layout.p}
        q_side = {layout.q_source, layout.q}
        assert set(layout.plan.tasks_of(P_WORKER)) == p_side
        assert set(layout.plan.tasks_of(Q_WORKER)) == q_side
        assert P_WORKER != Q_WORKER


def test_a_holder_passes_the_token_on_after_its_seeded_number_of_ticks() -> None:
    process = token_process(seed=5)
    state = State()
    assert list(process("token", ["token", 3], state)) == []
    held = hold_ticks(5, 3)
    assert 1 <= held <= MAX_HOLD
    outputs = [list(process("token", "tick", state)) for _ in range(held + 2)]
    assert outputs[held - 1] == [["token", 4]]
    assert sum(len(o) for o in outputs) == 1
    assert state.value is None
    # p's source injects hop 0.
    assert list(process("token", "token", state)) == []
    assert state.value == [0, hold_ticks(5, 0)]


def test_holding_times_are_seeded_and_replay_the_same() -> None:
    assert [hold_ticks(1, h) for h in range(50)] == [hold_ticks(1, h) for h in range(50)]
    assert {hold_ticks(1, h) for h in range(200)} == set(range(1, MAX_HOLD + 1))


def test_a_payment_moves_money_and_an_overdraft_is_refused() -> None:
    x1 = State()
    assert list(_bank_process("X1", ["pay", "X1", "Y2", 300], x1)) == [["credit", "Y2", 300]]
    assert x1.value == OPENING_BALANCE - 300
    assert list(_bank_process("X1", ["pay", "X1", "Y2", 701], x1)) == []
    assert x1.value == OPENING_BALANCE - 300
    y2 = State()
    assert list(_bank_process("Y2", ["credit", "Y2", 300], y2)) == []
    assert y2.value == OPENING_BALANCE + 300
    assert (P, Q) == ("p", "q")


def test_a_marked_record_asks_its_source_for_a_snapshot_and_reads_as_its_value() -> None:
    asked: list[None] = []
    token = snapshot_request.server.set(lambda: asked.append(None))
    try:
        assert requesting("tick") == "tick"
        assert asked == []
        assert requesting({REQUEST: ["pay", "X1", "Y2", 5]}) == ["pay", "X1", "Y2", 5]
        assert len(asked) == 1
    finally:
        snapshot_request.server.reset(token)
    # Outside a source's stage nothing serves the request: refused, not ignored.
    with pytest.raises(JobFailedError, match="outside a source's stage"):
        requesting({REQUEST: "tick"})
