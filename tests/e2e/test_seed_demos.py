"""The seeds' demos on real Kafka with a real worker process, SIGKILLed mid-run.

Each run reads every completed checkpoint back (state from the stored
databases, channel state from the offset ranges in the Kafka log) and checks
the seed's property on every one, before and after the recovery. p and q
start the snapshots themselves, taking turns of 0.25 s (bank: 0.5 s) of ticks (a dozen or
more, or eight, requests each per run); who started each completed one is read from the
control topic. Whether a given checkpoint catches the token in
a channel depends on timing; over a run's checkpoints, each with a loop range
recorded for as long as a barrier takes to go around, some always do.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.console import Console

from kstream.errors import ConfigurationError
from kstream.protocol.barrier import Alignment
from kstream.tools.seeds.demos import Initiator, bank_demo, token_ring_demo
from kstream.tools.seeds.tables import Verdict

pytestmark = [pytest.mark.broker, pytest.mark.e2e]

#: At least this many completed checkpoints per run (the runs take about 10 s; a
#: loaded machine completed 5 where a quiet one completes a dozen).
MIN_SNAPSHOTS = 4


@pytest.fixture
def console(tmp_path: Path) -> Iterator[Console]:
    with (tmp_path / "out.txt").open("w") as f:
        yield Console(file=f, width=120)


def test_the_token_is_once_in_every_unaligned_snapshot_across_a_kill(
    bootstrap: str, console: Console
) -> None:
    messages: list[str] = []
    outcome = token_ring_demo(
        ticks=240,
        rate=40.0,
        alignment=Alignment.UNALIGNED,
        naive=False,
        kills=1,
        seed=3,
        interval=0.25,
        bootstrap=bootstrap,
        say=messages.append,
        console=console,
    )
    log = "\n".join(messages)
    assert outcome.kills == 1, log
    assert outcome.recoveries >= 1, log
    assert len(outcome.snapshots) >= MIN_SNAPSHOTS, log
    assert all(s.verdict is Verdict.ONCE for s in outcome.snapshots), outcome.snapshots
    assert outcome.ok
    assert outcome.in_flight >= 1, outcome.snapshots  # caught in recorded channel state
    assert outcome.events >= 3  # the token went around
    # Snapshots started by p and by q completed, and each was verified above.
    started = {s.started_by for s in outcome.snapshots}
    assert {"p", "q"} <= started, outcome.snapshots


def test_the_naive_scheme_loses_or_doubles_the_token(bootstrap: str, console: Console) -> None:
    outcome = token_ring_demo(
        ticks=100,
        rate=25.0,
        alignment=Alignment.ALIGNED,
        naive=True,
        kills=0,
        seed=4,
        interval=0.25,
        bootstrap=bootstrap,
        say=lambda _: None,
        console=console,
    )
    assert outcome.verdicts[Verdict.VANISHED] >= 1
    assert outcome.verdicts[Verdict.DOUBLED] >= 1
    assert outcome.ok  # for the naive mode: the failure showed


def test_every_bank_snapshot_holds_the_opening_total_across_a_kill(
    bootstrap: str, console: Console
) -> None:
    messages: list[str] = []
    outcome = bank_demo(
        transfers=200,
        rate=25.0,
        alignment=Alignment.UNALIGNED,
        kills=1,
        seed=5,
        interval=0.5,  # turns longer than a snapshot under load: neither starves
        bootstrap=bootstrap,
        say=messages.append,
        console=console,
    )
    log = "\n".join(messages)
    assert outcome.recoveries >= 1, log
    assert len(outcome.snapshots) >= MIN_SNAPSHOTS, log
    assert [s.total for s in outcome.snapshots] == [6000] * len(outcome.snapshots)
    assert outcome.ok
    assert outcome.in_flight >= 1  # seed 001's M: credits in recorded channel state
    assert {"p", "q"} <= {s.started_by for s in outcome.snapshots}, outcome.snapshots


def test_q_cuts_on_ps_marker_in_every_snapshot_p_started(bootstrap: str, console: Console) -> None:
    """Seeds 000/001: a process records its state when the first marker reaches it.

    p starts every snapshot; q's source has no channel from p, so it joins by
    an injection (the coordinator's relay), but q itself is reached by p's
    marker and must cut on it, never on the barrier of its own source. Read
    from each subtask's ack (`Acked.cut_on`), not inferred.
    """
    messages: list[str] = []
    outcome = token_ring_demo(
        ticks=200,
        rate=40.0,
        alignment=Alignment.UNALIGNED,
        naive=False,
        kills=0,
        seed=7,
        interval=0.25,
        bootstrap=bootstrap,
        say=messages.append,
        console=console,
        initiator=Initiator.P,
    )
    log = "\n".join(messages)
    by_p = [s for s in outcome.snapshots if s.started_by == "p"]
    assert len(by_p) >= MIN_SNAPSHOTS, log
    assert [s.q_cut for s in by_p] == ["p's marker"] * len(by_p), by_p
    assert [s.p_cut for s in by_p] == ["own source"] * len(by_p), by_p
    assert [s.injected for s in by_p] == ["q's source"] * len(by_p), by_p
    assert outcome.ok, outcome.snapshots


def test_p_and_q_start_snapshots_independently_and_overlapping_ones_both_complete(
    bootstrap: str, console: Console
) -> None:
    """Seed 004: several snapshots with distinct ids run at once and each completes.

    With ``--concurrent`` p and q request snapshots on their own clocks, not by
    turns, so theirs overlap (and often share a sequence: neither had seen the
    other's, so the sources take them in opposite orders). Each is verified.
    """
    messages: list[str] = []
    outcome = token_ring_demo(
        ticks=200,
        rate=40.0,
        alignment=Alignment.UNALIGNED,
        naive=False,
        kills=1,
        seed=11,
        interval=0.25,
        bootstrap=bootstrap,
        say=messages.append,
        console=console,
        concurrent=True,
    )
    log = "\n".join(messages)
    assert outcome.kills == 1, log
    assert len(outcome.snapshots) >= MIN_SNAPSHOTS, log
    assert {"p", "q"} <= {s.started_by for s in outcome.snapshots}, outcome.snapshots
    # p's and q's in flight together, both completed (and verified below).
    assert outcome.overlapping >= 1, outcome.snapshots
    assert all(s.verdict is Verdict.ONCE for s in outcome.snapshots), outcome.snapshots
    assert outcome.ok


def test_concurrent_snapshots_need_unaligned_mode(bootstrap: str, console: Console) -> None:
    with pytest.raises(ConfigurationError, match="--concurrent needs --alignment unaligned"):
        token_ring_demo(
            ticks=10,
            rate=40.0,
            alignment=Alignment.ALIGNED,
            naive=False,
            kills=0,
            seed=1,
            interval=0.25,
            bootstrap=bootstrap,
            say=lambda _: None,
            console=console,
            concurrent=True,
        )
