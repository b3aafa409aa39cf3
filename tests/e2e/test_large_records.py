"""The word count on lines of ~8 KB (a few short words and one 8,000-character token):
every output exactly once, across a worker SIGKILL, by read_committed and by the audit."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from kstream.audit import run_audit
from kstream.examples import wordcount
from kstream.protocol.coordination import CoordinatorConfig
from kstream.protocol.names import dead_letter_topic
from kstream.runtime.config import JobRef, RunConfig
from kstream.runtime.runner.runner import Runner
from kstream.testing import (
    Feeder,
    read_all,
    run_until_consumed,
    unique_name,
    wait_settled,
)
from kstream.tools.demo import check_running_counts

pytestmark = [pytest.mark.broker, pytest.mark.e2e, pytest.mark.audit]

LINES = 3_000
TOKEN_CHARS = 8_000
PARTITIONS = 3


def big_token_lines(n: int, seed: int) -> list[str]:
    """`n` lines: two to four short words and one token of `TOKEN_CHARS` characters.

    Tokens come from a pool of a few hundred, so each is counted several times and
    channel batches fill with kilobytes per stream record.
    """
    rnd = random.Random(seed)
    short = ["the", "a", "kafka", "stream", "of", "big", "records"]
    pool = [
        "".join(rnd.choices("abcdefghijklmnopqrstuvwxyz", k=TOKEN_CHARS - 4)) + f"{i:04d}"
        for i in range(400)
    ]
    lines = []
    for _ in range(n):
        words = [*rnd.choices(short, k=rnd.randint(2, 4)), rnd.choice(pool)]
        rnd.shuffle(words)
        lines.append(" ".join(words))
    return lines


def test_wordcount_on_8kb_tokens_is_exactly_once(bootstrap: str, tmp_path: Path) -> None:
    from kstream.infra.admin import Admin

    run = unique_name("big")
    src, dst = f"{run}-lines", f"{run}-counts"
    Admin(bootstrap).create_topics({src: PARTITIONS, dst: PARTITIONS})
    lines = big_token_lines(LINES, seed=3)
    # Fed at a rate while the job runs, so the kill hits work in flight.
    feeder = Feeder(bootstrap, src, [s.encode() for s in lines], PARTITIONS, rate=300.0)
    params = {"input": src, "output": dst, "name": f"wc-{run}"}
    runner = Runner(
        RunConfig(
            JobRef("kstream.examples.wordcount:job", params),
            bootstrap,
            2,
            tmp_path / "state",
            checkpoints=CoordinatorConfig(interval=0.5, timeout=60.0),
        ),
        wordcount.job(params),
        say=lambda _: None,
    )
    runner.prepare()
    messages: list[str] = []
    kills = run_until_consumed(
        runner,
        src,
        feeder.ends,
        kills=1,
        say=messages.append,
        chaos=lambda _: feeder.feed(),
        timeout=400,
    )
    wait_settled(bootstrap, dst)
    check = check_running_counts(lines, read_all(bootstrap, dst))
    total = sum(len(s.split()) for s in lines)
    assert (check.missing, check.duplicates, check.out_of_order) == (0, 0, 0), messages
    assert check.wrong_final == []
    assert check.outputs == total
    assert kills == 1, messages
    # No record is too large here: nothing may be blamed.
    assert read_all(bootstrap, dead_letter_topic(params["name"])) == []
    audit = run_audit(
        input_topic=src,
        output_topic=dst,
        bootstrap=bootstrap,
        master="local[2]",
        report_dir=tmp_path / "report",
        progress=False,
    )
    assert (audit.lost, audit.duplicates, audit.unexpected) == (0, 0, 0)
