"""`kstream.runtime.runner.rescale`: when a start rescales, and what it refuses."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from kstream.connectors.kafka import KafkaSink, KafkaSource
from kstream.dataflow.identity import identity_of
from kstream.dataflow.job import Job
from kstream.dataflow.plan import plan
from kstream.errors import ConfigurationError
from kstream.protocol.coordination import History
from kstream.runtime.checkpoint.storage import LocalCheckpointStorage, SnapshotMeta
from kstream.runtime.runner.rescale import check_rescalable, rescaled_from


def wordcount() -> Job:
    j = Job("wc")
    j.source(KafkaSource("a")).key_by(lambda w: w).process(lambda k, v, s: [v]).sink(
        KafkaSink("out")
    )
    return j


def history(workers: int, *, key_groups: bool = True) -> History:
    ident = identity_of(plan(wordcount(), workers))
    if not key_groups:
        ident = dataclasses.replace(ident, max_parallelism=0)
    return History(generation=3, max_checkpoint=7, completed=(7,), identity=ident)


def test_another_parallelism_with_key_groups_is_a_rescale_from_the_recorded_layout() -> None:
    before = rescaled_from(history(2), plan(wordcount(), 3), fresh=False)
    assert before is not None
    assert before.parallelism == (2, 2)
    assert [t.id for t in before.tasks] == ["s0-0", "s0-1", "s1-0", "s1-1"]


def test_no_rescale_for_the_same_layout_a_fresh_start_nothing_completed_or_no_key_groups() -> None:
    after = plan(wordcount(), 3)
    assert rescaled_from(history(3), after, fresh=False) is None
    assert rescaled_from(history(2), after, fresh=True) is None
    assert rescaled_from(History(), after, fresh=False) is None
    # Refused by the identity check with its own line instead.
    assert rescaled_from(history(2, key_groups=False), after, fresh=False) is None


def store(tmp_path: Path, **fields: object) -> LocalCheckpointStorage:
    storage = LocalCheckpointStorage(tmp_path)
    for task in ("s0-0", "s0-1", "s1-0", "s1-1"):
        meta = SnapshotMeta(7, 3, task, key_format=3, max_parallelism=128, parallelism=2)
        storage.store(dataclasses.replace(meta, **fields), None)  # type: ignore[arg-type]
    return storage


def test_a_checkpoint_with_key_groups_and_aligned_can_be_rescaled(tmp_path: Path) -> None:
    check_rescalable(store(tmp_path), plan(wordcount(), 2), 7)


@pytest.mark.parametrize(
    ("fields", "why"),
    [
        (
            {"key_format": 2, "max_parallelism": 0},
            "job wc: checkpoint 7 has no key groups (key format 2) and cannot be rescaled: run "
            "it with its parallelism [2, 2], or start it fresh (--fresh)",
        ),
        (
            {"channel_replay": {"kstream.wc.s1": {0: [[5, 1]]}}},
            "job wc: checkpoint 7 recorded channel state (unaligned) and cannot be rescaled: run "
            "it with its parallelism [2, 2] and rescale from a later aligned checkpoint",
        ),
    ],
)
def test_what_cannot_be_rescaled_is_refused_with_one_line(
    tmp_path: Path, fields: dict[str, object], why: str
) -> None:
    with pytest.raises(ConfigurationError) as caught:
        check_rescalable(store(tmp_path, **fields), plan(wordcount(), 2), 7)
    assert str(caught.value) == why
