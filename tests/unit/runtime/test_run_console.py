"""The console of `kstream run`: counters, rate-limited notices, the exit summary."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from kstream.protocol.counters import JobCounters, WorkerCounters
from kstream.protocol.messages import decode_all
from kstream.runtime.runner.notices import Notices
from kstream.runtime.runner.report import RunReport as MessageReport


class RunReport(MessageReport):
    """The report, fed control records in their wire form."""

    def observe(self, wire: dict[str, object], now: float) -> list[str]:  # type: ignore[override]
        return [line for m in decode_all([wire]) for line in MessageReport.observe(self, m, now)]


# -- counters ------------------------------------------------------------------


def test_a_restarted_worker_adds_to_what_its_predecessor_counted() -> None:
    counters = JobCounters()
    assert counters.observe("p1", WorkerCounters(10, 30, 1)) == WorkerCounters(10, 30, 1)
    assert counters.observe("p1", WorkerCounters(15, 40, 1)) == WorkerCounters(5, 10, 0)
    # Worker w0 killed and restarted: a new process counts from zero again.
    assert counters.observe("p2", WorkerCounters(4, 8, 0)) == WorkerCounters(4, 8, 0)
    assert counters.observe("p3", WorkerCounters(1, 0, 2)) == WorkerCounters(1, 0, 2)
    assert counters.total == WorkerCounters(20, 48, 3)


def test_a_lower_report_of_one_process_changes_nothing() -> None:
    counters = JobCounters()
    counters.observe("p", WorkerCounters(10, 10, 10))
    assert counters.observe("p", WorkerCounters(9, 10, 10)) == WorkerCounters()
    assert counters.total == WorkerCounters(10, 10, 10)


@given(st.lists(st.tuples(st.sampled_from("abc"), st.integers(0, 50)), max_size=30))
def test_the_total_is_the_sum_of_each_process_highest_report(
    reports: list[tuple[str, int]],
) -> None:
    counters = JobCounters()
    added = WorkerCounters()
    for process, n in reports:
        added = added + counters.observe(process, WorkerCounters(n, 2 * n, n // 3))
    highest: dict[str, int] = {}
    for process, n in reports:
        highest[process] = max(highest.get(process, 0), n)
    n = sum(highest.values())
    assert counters.total == added
    assert counters.total.records_in == n
    assert counters.total.records_out == 2 * n


def test_counters_travel_in_heartbeats() -> None:
    c = WorkerCounters(3, 4, 5)
    assert WorkerCounters.from_message(c.to_message()) == c
    for bad in (None, "x", {"in": -1}, {"in": "3"}, {"out": True}, {"dead_letters": 1.5}):
        assert WorkerCounters.from_message(bad) is None


# -- notices -------------------------------------------------------------------


def test_one_line_per_kind_per_period_and_nothing_lost() -> None:
    notices = Notices(period=5.0)
    assert notices.offer("abort", "checkpoint 1 aborted", 0.0) == ["checkpoint 1 aborted"]
    assert notices.offer("abort", "checkpoint 2 aborted", 1.0) == []
    assert notices.offer("abort", "checkpoint 3 aborted", 2.0) == []
    # Another kind has its own allowance.
    assert notices.offer("recovery", "recovery: w0", 2.0) == ["recovery: w0"]
    assert notices.tick(4.9) == []
    assert notices.tick(5.0) == ["checkpoint 3 aborted (+1 more)"]
    assert notices.tick(100.0) == []
    # After a quiet period the next one shows at once.
    assert notices.offer("abort", "checkpoint 9 aborted", 100.0) == ["checkpoint 9 aborted"]


def test_counted_events_show_how_many_more() -> None:
    notices = Notices(period=5.0)
    assert notices.offer("dead letter", "dead letter: x", 0.0, count=4) == [
        "dead letter: x (+3 more)"
    ]
    assert notices.offer("dead letter", "dead letter: y", 1.0, count=2) == []
    assert notices.flush(2.0) == ["dead letter: y (+1 more)"]
    assert notices.flush(3.0) == []


@given(st.lists(st.tuples(st.floats(0, 3), st.integers(1, 5)), max_size=40))
def test_every_event_is_shown_or_counted_and_lines_are_spaced(
    events: list[tuple[float, int]],
) -> None:
    notices = Notices(period=5.0)
    now, shown, lines_at = 0.0, 0, []
    for dt, count in events:
        now += dt
        for line in notices.tick(now) + notices.offer("k", "e", now, count):
            lines_at.append(now)
            shown += 1 + (int(line.split("+")[1].split()[0]) if "+" in line else 0)
    for line in notices.flush(now + 1):
        shown += 1 + (int(line.split("+")[1].split()[0]) if "+" in line else 0)
    assert shown == sum(count for _, count in events)
    assert all(b - a >= 5.0 for a, b in itertools.pairwise(lines_at))


# -- the report ----------------------------------------------------------------


def heartbeat(process: str, records_in: int, out: int, dead: int, example: str = "") -> dict:
    return {
        "type": "heartbeat",
        "worker": "w0",
        "generation": 1,
        "process": process,
        "counters": {"in": records_in, "out": out, "dead_letters": dead},
        "dead_letter": example,
    }


def test_the_report_tells_dead_letters_aborts_and_recoveries() -> None:
    report = RunReport("j")
    assert report.observe({"type": "recover", "generation": 1, "checkpoint": None}, 0.0) == []
    assert report.observe(heartbeat("p1", 5, 5, 0), 1.0) == []
    assert report.observe(heartbeat("p1", 9, 9, 2, "s0-0: in[0]@7: ValueError: bad"), 2.0) == [
        "dead letter: s0-0: in[0]@7: ValueError: bad -> kstream.j.dead-letters (+1 more)"
    ]
    report.observe({"type": "trigger", "checkpoint": 1, "generation": 1}, 3.0)
    report.observe({"type": "complete", "checkpoint": 1, "generation": 1}, 3.5)
    report.observe({"type": "trigger", "checkpoint": 2, "generation": 1}, 4.0)
    lost = {
        "type": "recover",
        "generation": 2,
        "checkpoint": 1,
        "reason": "worker w0 lost: killed by signal 9",
    }
    assert report.observe(lost, 5.0) == [
        "recovery: worker w0 lost: killed by signal 9; rolling back to checkpoint 1",
        "checkpoint 2 aborted: rolled back in generation 2 (worker w0 lost: killed by signal 9)",
    ]
    silent = {**lost, "generation": 3, "reason": "worker w1 silent for more than 15s"}
    assert report.observe(silent, 6.0) == []  # held back: one recovery line per period
    assert report.tick(10.0) == [
        "recovery: worker w1 silent for more than 15s; rolling back to checkpoint 1"
    ]
    report.observe(heartbeat("p2", 3, 3, 0), 11.0)  # the restarted worker
    assert report.summary(20.0) == [
        "job j stopped after 20 s",
        "  records: 12 read from sources, 12 written to sinks, 2 dead letters "
        "(kstream.j.dead-letters)",
        "  checkpoints: 1 completed (latest 1), 1 aborted",
        "  recoveries: 2 - worker w0 lost: killed by signal 9; worker w1 silent for more than 15s",
        "  (records replayed after a recovery are counted again)",
    ]


def test_a_quiet_run_summary() -> None:
    report = RunReport("j")
    report.observe({"type": "recover", "generation": 4, "checkpoint": 9}, 0.0)
    assert report.summary(1.0)[2:] == ["  checkpoints: 0 completed, 0 aborted", "  recoveries: 0"]


def test_a_stuck_call_is_told_once_per_call_and_worker() -> None:
    report = RunReport("j")
    line = "s0-1: work() (job.py:3) has not returned for 10s on ('x'); stuck at a.py:1 in wait"
    stuck = {**heartbeat("p1", 5, 5, 0), "stuck": line, "stuck_on": "s0-1: work() on ('x')"}
    assert report.observe(stuck, 1.0) == [f"worker w0: {line}"]
    assert report.observe(stuck, 3.0) == []  # the thread repeats it every heartbeat
    assert report.observe(heartbeat("p1", 6, 6, 0), 4.0) == []  # it returned
    # The same call stuck again (after a rollback, in a new process): told again.
    assert report.observe({**stuck, "process": "p2"}, 20.0) == [f"worker w0: {line}"]
