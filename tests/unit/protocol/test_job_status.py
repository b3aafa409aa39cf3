"""`job_status`: a job's status from crafted control message lists."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from kstream.protocol.counters import WorkerCounters
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
    WorkerFailed,
)
from kstream.protocol.status import (
    ALIVE_S,
    COORDINATOR_ALIVE_S,
    RATE_WINDOW_S,
    checkpoint_acks,
    job_status,
)

T0 = 1_700_000_000.0


def beat(worker: str, t: float, records_in: int = 0, out: int = 0, **kw: object) -> WorkerAlive:
    return WorkerAlive(
        worker, kw.pop("generation", 1), t, kw.pop("process", f"p-{worker}"),  # type: ignore[arg-type]
        WorkerCounters(records_in, out), **kw,  # type: ignore[arg-type]
    )  # fmt: skip


def presence(t: float, stopped: bool = False) -> Presence:
    return Presence("inc", 42, "host-a", "/state", t, stopped)


def running_job() -> list[ControlMessage]:
    return [
        presence(T0),
        Recovered(1, None, "job started", T0),
        beat("w0", T0 + 1, 0, 0),
        beat("w1", T0 + 1, 0, 0),
        Triggered(5, 1, T0 + 2),
        beat("w0", T0 + 2.5, 100, 0),
        Acked(5, 1, "s0-0", size=10, alignment_ms=1.5, sync_ms=0.5),
        beat("w1", T0 + 2.6, 50, 200),
        Acked(5, 1, "s1-0", size=20, unaligned=True, in_flight=7),
        Completed(5, 1, 0.7, 30, 1.5, T0 + 2.7),
        presence(T0 + 3),
        beat("w0", T0 + 5, 400, 0),
        beat("w1", T0 + 5, 150, 800),
    ]


def test_a_running_job() -> None:
    s = job_status("j", running_job(), T0 + 6)
    assert s.state == "running"
    assert s.coordinator == "pid 42 on host-a, state dir /state"
    assert s.generation == 1
    assert [(w.worker, w.alive, w.age_s) for w in s.workers] == [
        ("w0", True, 1.0),
        ("w1", True, 1.0),
    ]
    w0, w1 = s.workers
    # w0: 0 -> 400 records in over 4 s (T0+1 .. T0+5)
    assert w0.in_per_s == 100.0
    assert w0.out_per_s == 0.0
    assert w1.in_per_s == 150 / 4
    assert w1.out_per_s == 200.0
    assert s.in_per_s == 100.0 + 150 / 4
    assert (s.records_in, s.records_out) == (550, 800)
    assert s.latest_checkpoint is not None
    assert s.latest_checkpoint.checkpoint == 5
    assert s.latest_checkpoint.age_s is not None
    assert abs(s.latest_checkpoint.age_s - 3.3) < 1e-6
    assert [t.subtask for t in s.subtasks] == ["s0-0", "s1-0"]
    # An ack's time is the newest time before it (the worker's heartbeat).
    assert s.subtasks[0].acked_at == T0 + 2.5
    assert s.subtasks[1].unaligned
    assert s.subtasks[1].in_flight == 7
    assert not any(t.behind for t in s.subtasks)
    assert s.completed == 1
    assert s.aborted == 0
    assert s.in_progress == ()
    assert s.recoveries == 0
    assert [r.cause for r in s.recent_recoveries] == ["start"]


def test_a_recovery_after_a_lost_worker() -> None:
    history = [
        *running_job(),
        Triggered(7, 1, T0 + 6),
        Recovered(2, 5, "worker w1 lost (exit -9)", T0 + 7),
        beat("w0", T0 + 8, 500, 0, generation=2),
        beat("w1", T0 + 8, 0, 0, generation=2, process="p-w1-new", restoring=True),
    ]
    s = job_status("j", history, T0 + 8.5)
    assert s.generation == 2
    assert s.recoveries == 1
    last = s.recent_recoveries[-1]
    assert (last.generation, last.checkpoint, last.cause) == (2, 5, "worker_lost")
    assert last.reason == "worker w1 lost (exit -9)"
    assert s.aborted == 1, "the checkpoint pending at the rollback"
    w1 = s.workers[1]
    assert w1.restoring
    assert w1.generation == 2
    assert w1.process == "p-w1-new"
    assert w1.in_per_s is None, "a new process has a single heartbeat"
    # The killed process's count is kept (JobCounters).
    assert s.records_in == 500 + 150


def test_a_stopped_job_and_silent_workers() -> None:
    history = [*running_job(), presence(T0 + 6, stopped=True)]
    s = job_status("j", history, T0 + 600)
    assert s.state == "stopped"
    assert s.last_seen == T0 + 6
    assert not any(w.alive for w in s.workers)
    assert s.in_per_s is None
    assert s.out_per_s is None
    assert all(w.in_per_s is None for w in s.workers)


def test_a_silent_coordinator() -> None:
    s = job_status("j", running_job(), T0 + 3 + COORDINATOR_ALIVE_S + 1)
    assert s.state == "silent"
    assert job_status("j", [beat("w0", T0)], T0).state == "unknown"


def test_liveness_bound() -> None:
    assert job_status("j", [beat("w0", T0)], T0 + ALIVE_S - 0.1).workers[0].alive
    assert not job_status("j", [beat("w0", T0)], T0 + ALIVE_S).workers[0].alive


def test_subtask_behind_and_failure() -> None:
    history = [
        *running_job(),
        Triggered(9, 1, T0 + 6),
        beat("w0", T0 + 6.5, 500),
        Acked(9, 1, "s0-0"),
        Completed(9, 1, 0.2, 30, 1.0, T0 + 7),
        Aborted(11, 1, "not complete within 60s", T0 + 8),
        WorkerFailed("w1", "division by zero"),
    ]
    s = job_status("j", history, T0 + 9)
    by = {t.subtask: t for t in s.subtasks}
    assert not by["s0-0"].behind
    assert by["s1-0"].behind  # its latest ack is of 5; 9 completed since
    assert s.failure == "w1: division by zero"
    assert s.aborted == 1


def test_rates_need_a_span() -> None:
    """Heartbeats right before acks come close together: no rate from them alone."""
    s = job_status("j", [beat("w0", T0, 0), beat("w0", T0 + 0.1, 1000)], T0 + 0.2)
    assert s.workers[0].in_per_s is None
    # The window keeps only the last RATE_WINDOW_S of heartbeats.
    old = [
        beat("w0", T0, 0),
        beat("w0", T0 + RATE_WINDOW_S + 5, 5000),
        beat("w0", T0 + RATE_WINDOW_S + 7, 5200),
    ]
    assert job_status("j", old, T0 + RATE_WINDOW_S + 7).workers[0].in_per_s == 100.0


def test_json_document() -> None:
    doc = job_status("j", running_job(), T0 + 6).to_json()
    again = json.loads(json.dumps(doc))
    assert again["version"] == 1
    assert again["job"] == "j"
    assert again["state"] == "running"
    assert [w["worker"] for w in again["workers"]] == ["w0", "w1"]
    assert again["latest_checkpoint"]["checkpoint"] == 5
    assert again["recent_recoveries"][0]["cause"] == "start"


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["w0", "w1", "w2"]),
            st.floats(0, 100),
            st.integers(0, 10_000),
            st.sampled_from(["a", "b"]),
        ),
        max_size=40,
    ),
    st.floats(0, 200),
)
def test_any_heartbeats(beats: list[tuple[str, float, int, str]], later: float) -> None:
    """Whatever the heartbeats: ages are never negative, rates only for alive workers,
    the job's total is at least every process's latest report."""
    history: list[ControlMessage] = [beat(w, T0 + t, n, process=f"{w}-{p}") for w, t, n, p in beats]
    now = T0 + later
    s = job_status("j", history, now)
    assert {w.worker for w in s.workers} == {b[0] for b in beats}
    for w in s.workers:
        assert w.age_s is not None
        assert w.age_s >= 0
        assert w.alive == (now - w.last_seen < ALIVE_S)  # type: ignore[operator]
        if not w.alive:
            assert w.in_per_s is None
    latest: dict[str, int] = {}
    for w, _, n, p in beats:
        latest[f"{w}-{p}"] = n
    assert s.records_in >= sum(latest.values())
    json.dumps(s.to_json())


def test_one_checkpoint_per_subtask() -> None:
    history = [
        *running_job(),
        Triggered(7, 1, T0 + 10),
        beat("w0", T0 + 10.5, 500),
        Acked(7, 1, "s0-0", size=3, alignment_ms=2.0, sync_ms=1.0, cut_on="started"),
        Declined(7, 1, "s1-0", "snapshot not stored: disk full"),
        Aborted(7, 1, "declined by s1-0: snapshot not stored: disk full", T0 + 11),
    ]
    found = checkpoint_acks(history, 7)
    assert found is not None
    record, rows = found
    assert record.status == "aborted"
    assert [(r.subtask, r.after_s, r.size, r.declined) for r in rows] == [
        ("s0-0", 0.5, 3, ""),
        ("s1-0", 0.5, 0, "snapshot not stored: disk full"),
    ]
    assert checkpoint_acks(history, 8) is None
    assert [r.subtask for r in checkpoint_acks(history, 5)[1]] == ["s0-0", "s1-0"]  # type: ignore[index]
