"""The seeds' demos on real Kafka with a real worker process, SIGKILLed mid-run.

Each run reads every completed checkpoint back (state from the stored
databases, channel state from the offset ranges in the Kafka log) and checks
the seed's property on every one, before and after the recovery. p and q
start the snapshots themselves, taking turns of 0.25 s (bank: 0.5 s) of ticks (a dozen or
more, or eight, requests each per run); who started each completed one is read from the
control topic. Whether a given checkpoint catches the token in
a channel depends on timing; over a run's checkpoints, each with a loop range
recorded for as long as a barrier takes to go around, some always do.

p and q run in two worker processes; the kill takes down one of them.

The naive scheme runs for real too: every row it prints is recomputed here
from the records the processes stored and the channel topics, without the
demo's code; whether a row lost or doubled the token is not asserted.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from kstream.dataflow.channel_serde import channel_serde
from kstream.errors import ConfigurationError
from kstream.protocol.barrier import Alignment
from kstream.runtime.channels.format import RECORD, BatchFormat, decode_header
from kstream.testing import read_all
from kstream.tools.seeds.bank import bank_demo
from kstream.tools.seeds.demos import Initiator
from kstream.tools.seeds.tables import Verdict
from kstream.tools.seeds.token_ring import token_ring_demo

pytestmark = [pytest.mark.broker, pytest.mark.e2e]

#: At least this many completed checkpoints per run (the runs take about 10 s; a
#: loaded machine completed 5 where a quiet one completes a dozen).
MIN_SNAPSHOTS = 4


@pytest.fixture
def console(tmp_path: Path) -> Iterator[Console]:
    with (tmp_path / "out.txt").open("w") as f:
        yield Console(file=f, width=200)


def assert_one_process_crashed(pids: dict[str, list[int]]) -> None:
    """p and q ran in two OS processes, and the kill took down one of them: its
    process was replaced, the other's ran on."""
    assert pids["p"], pids
    assert pids["q"], pids
    assert not set(pids["p"]) & set(pids["q"]), pids
    assert sorted(len(v) for v in pids.values()) == [1, 2], pids


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
    assert_one_process_crashed(outcome.pids)


def _messages(bootstrap: str, topic: str, partition: int) -> list[tuple[int, Any]]:
    """A ring channel's messages as (Kafka offset, value), decoded here: the loop
    channel q→p is round-robin, p→q keyed."""
    fmt = BatchFormat(channel_serde("msgpack"))
    keyed = not topic.endswith(".loop")
    out = []
    for r in read_all(bootstrap, topic, isolation="read_uncommitted", partitions=[partition]):
        assert r.value is not None
        assert decode_header(r.value)[0] == RECORD, "no barrier, no marker in a naive run"
        out += [(r.offset, v[1] if keyed else v) for v in fmt.decode(r.value, keyed)]
    return out


def _in_queue(messages: list[tuple[int, Any]], record: dict[str, Any]) -> int:
    """Tokens the receiver's record puts in its input channel: not consumed yet,
    in the log below the end offset it saw."""
    waiting = [v for o, v in messages[record["consumed"] :] if o < record["end"]]
    return sum(1 for v in waiting if v[0] == "token")


def test_every_naive_row_is_what_the_processes_recorded(
    bootstrap: str, console: Console, tmp_path: Path
) -> None:
    messages: list[str] = []
    outcome = token_ring_demo(
        ticks=100,
        rate=25.0,
        alignment=Alignment.ALIGNED,
        naive=True,
        kills=0,
        seed=4,
        interval=0.25,
        bootstrap=bootstrap,
        say=messages.append,
        console=console,
    )
    assert outcome.records is not None, "\n".join(messages)
    try:
        # No checkpoint was taken: no barrier, no marker went through the ring.
        assert not list(outcome.records.glob("chk-*"))
        records = {
            who: [json.loads(f.read_text()) for f in sorted(files.glob("*.json"))]
            for who, files in ((w, outcome.records / "naive" / w) for w in ("p", "q"))
        }
        assert records["p"]
        assert records["q"]
        # Each process recorded on its own, in its own OS process.
        assert {r["pid"] for r in records["p"]} == set(outcome.pids["p"])
        assert {r["pid"] for r in records["q"]} == set(outcome.pids["q"])
        assert not set(outcome.pids["p"]) & set(outcome.pids["q"])
        p_to_q = _messages(bootstrap, records["q"][0]["channel"], records["q"][0]["partition"])
        q_to_p = _messages(bootstrap, records["p"][0]["channel"], records["p"][0]["partition"])
        assert all(v[0] == "token" for _, v in p_to_q + q_to_p)
        printed = (tmp_path / "out.txt").read_text().splitlines()
        rows = list(zip(records["p"], records["q"], strict=False))
        assert len(outcome.snapshots) == len(rows) == min(map(len, records.values()))
        for i, ((p, q), s) in enumerate(zip(rows, outcome.snapshots, strict=True), 1):
            in_p_to_q, in_q_to_p = _in_queue(p_to_q, q), _in_queue(q_to_p, p)
            tokens = p["holds"] + q["holds"] + in_p_to_q + in_q_to_p
            assert (s.p_holds, s.q_holds, s.p_to_q, s.q_to_p) == (
                p["holds"],
                q["holds"],
                in_p_to_q,
                in_q_to_p,
            ), (i, p, q)
            verdict = {0: Verdict.VANISHED, 1: Verdict.ONCE}.get(tokens, Verdict.DOUBLED)
            assert s.verdict is verdict
            # The printed row shows the offsets it was composed from.
            (line,) = [row for row in printed if row.startswith(f"│ naive {i} ")]
            for cell in (f"({q['consumed']}/{q['end']})", f"({p['consumed']}/{p['end']})"):
                assert cell in line, line
            assert verdict.value in line, line
        assert outcome.ok == all(s.verdict is Verdict.ONCE for s in outcome.snapshots)
    finally:
        shutil.rmtree(outcome.records.parent.parent, ignore_errors=True)


def test_the_naive_demos_exit_status_says_whether_every_global_state_held_the_token_once(
    bootstrap: str,
) -> None:
    # The rule docs/guide/demos.md states, for both schemes: exit 1 when a global state does not
    # hold the token exactly once, 0 when every one does.
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "kstream",
            "demo",
            "token-ring",
            "--naive",
            "--ticks",
            "60",
            "--rate",
            "30",
            "--seed",
            "1",
            "--bootstrap-servers",
            bootstrap,
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env={**os.environ, "COLUMNS": "200"},
    )
    log = done.stdout[-3000:] + done.stderr[-3000:]
    found = re.search(r"(\d+) token once, (\d+) token vanished, (\d+) token doubled", done.stdout)
    assert found is not None, log
    once, vanished, doubled = map(int, found.groups())
    assert once + vanished + doubled > 0, log
    assert done.returncode == (1 if vanished + doubled else 0), log
    if done.returncode:
        assert done.stderr.strip().splitlines()[-1] == (
            f"kstream: failed: the naive scheme lost or doubled the token in "
            f"{vanished + doubled} of {once + vanished + doubled} global states"
        ), log
    kept = re.search(r"the local records are kept in (\S+)", done.stderr)
    assert kept is not None, log
    shutil.rmtree(Path(kept[1]).parents[2], ignore_errors=True)


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
    assert_one_process_crashed(outcome.pids)


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
