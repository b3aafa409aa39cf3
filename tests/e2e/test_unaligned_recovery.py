"""Unaligned checkpoints and the alignment timeout on real worker processes, with real SIGKILLs.

The word count (two workers: every counting subtask reads a channel from each
source subtask) runs with ``--alignment unaligned`` and with a tiny
``--alignment-timeout``, so that nearly every checkpoint records channel state
as offset ranges; random workers are SIGKILLed while the input flows. The
output, read with read_committed, must hold every word's counts 1..N exactly
once. Whether a restore here replays a non-empty range depends on timing;
`tests/integration/test_unaligned_channel_state.py` makes one for certain.
"""

from __future__ import annotations

import pytest
from wordcount_runs import assert_exactly_once, run_wordcount

from kstream.protocol.barrier import Alignment

pytestmark = [pytest.mark.broker, pytest.mark.e2e]


@pytest.mark.parametrize(
    ("alignment", "timeout_s"),
    [(Alignment.UNALIGNED, None), (Alignment.ALIGNED, 0.001)],
    ids=["unaligned", "alignment-timeout"],
)
def test_word_count_recording_channel_state_is_exactly_once_across_random_kills(
    bootstrap: str, alignment: Alignment, timeout_s: float | None
) -> None:
    messages: list[str] = []
    outcome = run_wordcount(
        bootstrap,
        messages,
        workers=2,
        lines=40_000,
        rate=4000.0,
        kills=3,
        kill_after=2,
        checkpoint_interval=0.3,
        seed=23,
        alignment=alignment,
        alignment_timeout_s=timeout_s,
    )
    log = "\n".join(messages)
    assert outcome.kills == 3, log
    assert outcome.recoveries >= 3, log
    assert_exactly_once(outcome)
