"""`dashboard_view`: what the web dashboard shows, from crafted control message lists."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from kstream.protocol.counters import WorkerCounters
from kstream.protocol.dashboard import HISTORY, dashboard_view, graph_of
from kstream.protocol.identity import JobIdentity
from kstream.protocol.messages import (
    Aborted,
    Acked,
    Completed,
    ControlMessage,
    Declined,
    Presence,
    Recovered,
    Triggered,
    WorkerAlive,
)
from kstream.protocol.worker_alive import SubtaskAlignment

T0 = 1_700_000_000.0

LINE = JobIdentity(
    2, (2, 1), ("lines",), ("counts",), ("s0.flat_map:explode", "s0.edge:", "s1.process:count")
)
LOOPED = JobIdentity(
    2,
    (1, 2, 1),
    ("a",),
    ("out",),
    ("s1.process:step",),
    ("s0>s1.i0:round-robin", "s2>s1.i1:keyed", "s1>s2.i0:keyed/side1"),
)


def beat(worker: str, t: float, generation: int = 1, **kw: object) -> WorkerAlive:
    return WorkerAlive(worker, generation, t, f"p-{worker}", WorkerCounters(0, 0), **kw)  # type: ignore[arg-type]


def history() -> list[ControlMessage]:
    return [
        Presence("inc", 1, "h", "/s", T0),
        Recovered(1, None, "job started", T0),
        beat("w0", T0 + 1),
        Triggered(3, 1, T0 + 2),
        beat("w0", T0 + 2.2),
        Acked(3, 1, "s0-0", size=5, alignment_ms=1.0),
        Acked(3, 1, "s0-1", size=5),
        beat("w1", T0 + 2.9),
        Acked(3, 1, "s1-0", size=7, alignment_ms=4.0, sync_ms=2.0, unaligned=True, in_flight=9),
        Completed(3, 1, 1.0, 17, 4.0, T0 + 3, LINE),
        Triggered(4, 1, T0 + 4),
        beat("w0", T0 + 4.5),
        Acked(4, 1, "s0-0", channel_offsets={"ch": {0: 12, 1: 30}}, unaligned=True, in_flight=3),
        Declined(4, 1, "s0-1", "busy"),
    ]


def test_graph_of_a_line_has_channels_between_consecutive_stages() -> None:
    g = graph_of(LINE)
    assert [(s.index, s.parallelism, s.source) for s in g.stages] == [(0, 2, "lines"), (1, 1, "")]
    assert g.stages[0].operators == ("flat_map:explode",)  # no edge node
    assert g.stages[1].operators == ("process:count",)
    assert [(e.source, e.target, e.loop) for e in g.edges] == [(0, 1, False)]
    assert g.sinks == ("counts",)
    assert g.known_from == "identity"


def test_graph_marks_feedback_edges_as_loops() -> None:
    g = graph_of(LOOPED)
    assert [(e.source, e.target, e.input, e.kind, e.loop) for e in g.edges] == [
        (0, 1, 0, "round-robin", False),
        (2, 1, 1, "keyed", True),
        (1, 2, 0, "keyed side 1", False),
    ]
    assert [s.source for s in g.stages] == ["a", "", ""]


def test_graph_without_identity_comes_from_subtask_names() -> None:
    g = graph_of(None, ["s0-0", "s0-2", "s1-0", "junk"])
    assert [(s.index, s.parallelism) for s in g.stages] == [(0, 3), (1, 1)]
    assert g.edges == ()
    assert g.known_from == "subtasks"
    assert graph_of(None).known_from == "none"


def test_completed_checkpoint_row_names_its_slowest_subtask() -> None:
    view = dashboard_view("j", history(), T0 + 5)
    row = next(r for r in view.checkpoints if r.checkpoint == 3)
    assert (row.status, row.acks, row.size, row.duration_s) == ("completed", 3, 17, 1.0)
    assert row.slowest is not None
    assert row.slowest.subtask == "s1-0"
    assert row.slowest.after_s is not None
    assert abs(row.slowest.after_s - 0.9) < 1e-6
    assert (row.slowest.unaligned, row.slowest.in_flight) == (True, 9)


def test_checkpoint_in_flight_shows_each_subtasks_part() -> None:
    view = dashboard_view("j", history(), T0 + 5)
    assert [f.checkpoint for f in view.in_flight] == [4]
    parts = {p.subtask: p for p in view.in_flight[0].parts}
    assert set(parts) == {"s0-0", "s0-1", "s1-0"}
    assert parts["s0-0"].state == "acked"
    assert parts["s0-0"].in_flight == 3
    assert parts["s0-0"].channels == (("ch[0]", 12), ("ch[1]", 30))
    assert (parts["s0-1"].state, parts["s0-1"].reason) == ("declined", "busy")
    assert parts["s1-0"].state == "pending"
    assert dict(view.subtask_states) == {"s0-0": "running", "s0-1": "running", "s1-0": "aligning"}
    assert view.in_flight[0].age_s == 1.0


def test_runner_identity_shows_the_graph_before_a_completion() -> None:
    first = history()[:3]
    assert dashboard_view("j", first, T0 + 2).graph.known_from == "none"
    view = dashboard_view("j", first, T0 + 2, LOOPED)
    assert view.graph.known_from == "identity"
    assert len(view.graph.stages) == 3
    # A recorded identity wins over the one given.
    assert len(dashboard_view("j", history(), T0 + 5, LOOPED).graph.stages) == 2


def test_restoring_worker_marks_subtasks_without_a_current_ack() -> None:
    msgs = [
        *history()[:10],
        Recovered(2, 3, "worker w1 lost"),
        beat("w0", T0 + 6, 2, restoring=True),
    ]
    view = dashboard_view("j", msgs, T0 + 7)
    assert set(dict(view.subtask_states).values()) == {"restoring"}
    assert [(r.cause, r.checkpoint) for r in view.status.recent_recoveries][-1] == (
        "worker_lost",
        3,
    )


def test_history_is_bounded_and_the_document_is_json() -> None:
    msgs: list[ControlMessage] = [Recovered(1, None, "job started", T0)]
    for k in range(1, HISTORY + 20):
        msgs += [Triggered(k, 1, T0 + k), Aborted(k, 1, "timeout", T0 + k + 0.5)]
    view = dashboard_view("j", msgs, T0 + 500)
    assert len(view.checkpoints) == HISTORY
    assert view.checkpoints[-1].checkpoint == HISTORY + 19
    doc = json.loads(json.dumps(dashboard_view("j", history(), T0 + 5).to_json()))
    assert doc["status"]["version"] == 1
    assert doc["in_flight"][0]["parts"][0]["channels"] == {"ch[0]": 12, "ch[1]": 30}
    assert doc["subtask_states"]["s1-0"] == "aligning"


@given(st.permutations(history()), st.floats(T0, T0 + 100))
def test_any_order_of_messages_gives_a_view(msgs: list[ControlMessage], now: float) -> None:
    view = dashboard_view("j", msgs, now, LINE)
    json.dumps(view.to_json())
    ids = [r.checkpoint for r in view.checkpoints]
    assert len(ids) == len(set(ids))
    for f in view.in_flight:
        assert {p.subtask for p in f.parts} >= {"s0-0", "s0-1", "s1-0"}


def test_latest_recorded_channel_state_per_subtask() -> None:
    later = Acked(5, 1, "s1-0", channel_offsets={"ch": {0: 40}}, unaligned=True, in_flight=2)
    empty = Acked(6, 1, "s1-0", unaligned=True, in_flight=0)  # recorded nothing: not shown
    view = dashboard_view("j", [*history(), later, empty], T0 + 5)
    assert [(r.subtask, r.checkpoint, r.in_flight, r.channels) for r in view.recorded] == [
        ("s0-0", 4, 3, (("ch[0]", 12), ("ch[1]", 30))),
        ("s1-0", 5, 2, (("ch[0]", 40),)),
    ]
    assert view.to_json()["recorded"][1]["channels"] == {"ch[0]": 40}


def test_pending_subtask_shows_the_barriers_arrived_and_the_channels_recorded() -> None:
    aligning = SubtaskAlignment.of("s1-0", 4, 4, [("ch[1]", 8), ("ch[0]", 5)], None, [])
    recording = SubtaskAlignment.of("s1-0", 4, None, [], 4, [("ch[2]", 70)])
    stale = SubtaskAlignment.of("s1-0", 4, 3, [("ch[0]", 1)], None, [])  # another checkpoint
    base = history()
    view = dashboard_view("j", [*base, beat("w1", T0 + 4.6, alignment=(aligning,))], T0 + 5)
    part = next(p for p in view.in_flight[0].parts if p.subtask == "s1-0")
    assert (part.state, part.inputs, part.arrived) == ("pending", 4, (("ch[0]", 5), ("ch[1]", 8)))
    assert dict(view.subtask_states)["s1-0"] == "aligning"
    view = dashboard_view("j", [*base, beat("w1", T0 + 4.7, alignment=(recording,))], T0 + 5)
    part = next(p for p in view.in_flight[0].parts if p.subtask == "s1-0")
    assert part.recording == (("ch[2]", 70),)
    assert part.arrived == ()
    assert dict(view.subtask_states)["s1-0"] == "recording channel state"
    assert view.to_json()["in_flight"][0]["parts"][2]["recording"] == {"ch[2]": 70}
    # A newer heartbeat of the same worker without a report: nothing reported.
    later = [*base, beat("w1", T0 + 4.6, alignment=(aligning,)), beat("w1", T0 + 4.8)]
    part = next(
        p for p in dashboard_view("j", later, T0 + 5).in_flight[0].parts if p.subtask == "s1-0"
    )
    assert (part.inputs, part.arrived) == (0, ())
    view = dashboard_view("j", [*base, beat("w1", T0 + 4.6, alignment=(stale,))], T0 + 5)
    assert next(p for p in view.in_flight[0].parts if p.subtask == "s1-0").arrived == ()
