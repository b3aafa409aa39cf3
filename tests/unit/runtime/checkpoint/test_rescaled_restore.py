"""A restore at another parallelism: key-group ranges copied between real RocksDB
snapshots, sources' offsets and watermarks merged, and what cannot be rescaled refused."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from rocksdict import AccessType, Options, Rdict

from kstream.connectors.kafka import KafkaSink, KafkaSource
from kstream.dataflow.job import Job
from kstream.dataflow.state.serde import MSGPACK
from kstream.dataflow.state.timers import TimerDomain
from kstream.errors import CheckpointError
from kstream.protocol.key_groups import group_of, group_range, owner
from kstream.runtime.checkpoint.finish import finish
from kstream.runtime.checkpoint.restore import restore
from kstream.runtime.checkpoint.storage import LocalCheckpointStorage, SnapshotMeta
from kstream.runtime.checkpoint.take import take_snapshot
from kstream.runtime.state.store import UNGROUPED_KEY_FORMAT, StateStore
from kstream.runtime.worker.chain import TimerOperator, compile_chain, fire_due
from tests.unit.runtime.checkpoint.parts import subject

K = 16
KEYS = [f"key-{n}" for n in range(200)]


def count(key: str, value: int, ctx: Any) -> Iterator[Any]:
    ctx.set(ctx.get(0) + value)
    ctx.list("seen").append(value)
    ctx.timers.register_processing(1_000 + len(key))
    return iter(())


def fired(key: str, ts: int, ctx: Any) -> Iterator[Any]:
    yield key, ts, ctx.get(), list(ctx.list("seen"))


def job() -> Job:
    j = Job("rs", max_parallelism=K)
    j.source(KafkaSource("in")).key_by(lambda v: v[0]).process(
        lambda k, v, ctx: count(k, v[1], ctx), on_timer=fired, name="count"
    ).sink(KafkaSink("out"))
    return j


def chain(store: StateStore) -> tuple[Any, list[TimerOperator], list[Any]]:
    out: list[Any] = []
    timers: list[TimerOperator] = []
    push = compile_chain(
        job().stages[1].root,
        stage_index=1,
        state=store,
        open_sink=lambda node: out.append,
        open_edge=lambda node: out.append,
        timer_operators=timers,
    )
    return push, timers, out


def store_old(
    tmp_path: Path, storage: LocalCheckpointStorage, old: int, *, key_format: int = 3
) -> None:
    """Checkpoint 5 of stage 1 at parallelism `old`: each subtask counted its keys twice."""
    grouped = key_format == 3
    for j in range(old):
        store = StateStore(tmp_path / f"old-{j}" / "db", MSGPACK, K if grouped else 0)
        push, _, _ = chain(store)
        for key in KEYS:
            if owner(group_of(key.encode(), K), K, old) == j:
                push(key, (key, 1))
                push(key, (key, 2))
        with ThreadPoolExecutor(1) as executor:
            part = dataclasses.replace(
                subject(tmp_path, executor, store, []),
                task=f"s1-{j}",
                key_format=key_format,
                max_parallelism=K if grouped else 0,
                parallelism=old,
                watermarks=lambda j=j: {  # type: ignore[misc]
                    "input": {"channels": [100 + j], "idle": [], "watermark": 100 + j}
                },
            )
            finish(storage, executor, take_snapshot(part, 5)).future.result(timeout=30)
        store.close()


@pytest.mark.parametrize(("old", "new"), [(2, 3), (3, 1), (2, 2), (1, 4)])
def test_each_new_subtask_gets_exactly_the_state_and_timers_of_its_key_groups(
    tmp_path: Path, old: int, new: int
) -> None:
    storage = LocalCheckpointStorage(tmp_path / "checkpoints")
    store_old(tmp_path, storage, old)
    seen: list[Any] = []
    for i in range(new):
        db = tmp_path / f"new-{i}" / "db"
        r = restore(
            storage,
            5,
            f"s1-{i}",
            state_db=db,
            state_serde=MSGPACK,
            inputs={("t", 0)},
            max_parallelism=K,
            layout=(1, i, (1, new)),
        )
        assert r.state is not None
        assert r.meta is not None
        assert r.key_format == 3
        if old != new:
            # Held back to the lowest old watermark, on every (new) channel.
            low = {"channels": [100], "idle": [], "watermark": 100}
            assert r.meta.watermarks == {"input": low}
            assert r.meta.channel_offsets == {}
        assert r.rescaled_from == (0 if old == new else old)
        _, timers, out = chain(r.state)
        fire_due(timers, TimerDomain.PROCESSING, 10**6, lambda e, k, t: pytest.fail(str(e)))
        seen += out
        r.state.close()
        # Nothing of another subtask's key groups was copied.
        mine = group_range(i, K, new)
        db_ = Rdict(str(db), Options(raw_mode=True), access_type=AccessType.read_only())
        stored = db_.keys()
        assert all(int.from_bytes(k[:2], "big") in mine for k in stored)
        db_.close()
    assert sorted(seen) == sorted((key, 1_000 + len(key), 3, [1, 2]) for key in KEYS)


def test_sinks_kept_epochs_go_to_the_new_subtask_j_mod_p(tmp_path: Path) -> None:
    storage = LocalCheckpointStorage(tmp_path / "checkpoints")
    store_old(tmp_path, storage, 3)
    inherited = []
    for i in range(2):
        r = restore(
            storage,
            5,
            f"s1-{i}",
            state_db=None,
            state_serde=MSGPACK,
            max_parallelism=K,
            layout=(1, i, (1, 2)),
        )
        inherited.append([j for j, _ in r.inherited])
        assert r.kept("out#0") is not None
        assert not r.kept("out#0").meta  # type: ignore[union-attr]
    assert inherited == [[0, 2], [1]]


def test_a_checkpoint_without_key_groups_is_not_rescaled(tmp_path: Path) -> None:
    storage = LocalCheckpointStorage(tmp_path / "checkpoints")
    store_old(tmp_path, storage, 2, key_format=UNGROUPED_KEY_FORMAT)
    with pytest.raises(CheckpointError) as caught:
        restore(
            storage,
            5,
            "s1-0",
            state_db=tmp_path / "new" / "db",
            state_serde=MSGPACK,
            max_parallelism=K,
            layout=(1, 0, (1, 3)),
        )
    assert "has no key groups (key format 2) and cannot be restored at parallelism 3" in str(
        caught.value
    )


def test_recorded_channel_state_is_not_rescaled(tmp_path: Path) -> None:
    storage = LocalCheckpointStorage(tmp_path / "checkpoints")
    store_old(tmp_path, storage, 2)
    path = tmp_path / "checkpoints" / "chk-5" / "s1-1" / "meta.json"
    meta = SnapshotMeta.from_json(path.read_text())
    path.write_text(dataclasses.replace(meta, channel_replay={"t": {0: [[9, 1]]}}).to_json())
    with pytest.raises(CheckpointError, match="recorded channel state \\(unaligned\\)"):
        restore(
            storage,
            5,
            "s1-0",
            state_db=None,
            state_serde=MSGPACK,
            max_parallelism=K,
            layout=(1, 0, (1, 3)),
        )


def test_source_offsets_and_watermarks_follow_their_partitions() -> None:
    from kstream.runtime.checkpoint.restore import _source_offsets, _watermarks

    metas = [
        SnapshotMeta(
            5,
            1,
            f"s0-{j}",
            source_offsets={"in": {p: 10 * p for p in range(6) if p % 2 == j}},
            watermarks={
                "source": {
                    "max": {str(p): 1000 + p for p in range(6) if p % 2 == j},
                    "idle": [p for p in (4, 5) if p % 2 == j],
                    "watermark": 900 + j,
                }
            },
        )
        for j in range(2)
    ]
    assert [_source_offsets(metas, i, 3) for i in range(3)] == [
        {"in": {0: 0, 3: 30}},
        {"in": {4: 40, 1: 10}},
        {"in": {2: 20, 5: 50}},
    ]
    assert _watermarks(metas, 1, 3, 0) == {
        "source": {"max": {"4": 1004, "1": 1001}, "idle": [4], "watermark": 900}
    }


def test_a_stage_keeping_its_parallelism_in_a_rescaled_job_drops_its_channel_offsets(
    tmp_path: Path,
) -> None:
    storage = LocalCheckpointStorage(tmp_path / "checkpoints")
    store_old(tmp_path, storage, 2)
    # Stage 0 ran 1 subtask then, 2 now: the channels into stage 1 are laid out anew.
    storage.store(SnapshotMeta(5, 1, "s0-0", key_format=3, max_parallelism=K, parallelism=1), None)
    seen: list[Any] = []
    for i in range(2):
        r = restore(
            storage,
            5,
            f"s1-{i}",
            state_db=tmp_path / f"same-{i}" / "db",
            state_serde=MSGPACK,
            inputs={("t", 0), ("t", 2)},
            max_parallelism=K,
            layout=(1, i, (2, 2)),
        )
        assert r.meta is not None
        assert r.state is not None
        assert r.meta.channel_offsets == {}
        assert r.meta.watermarks["input"]["channels"] == [100, 100]  # the lowest: held back
        assert [j for j, _ in r.inherited] == [i]
        _, timers, out = chain(r.state)
        fire_due(timers, TimerDomain.PROCESSING, 10**6, lambda e, k, t: pytest.fail(str(e)))
        seen += out
        r.state.close()
    assert sorted(seen) == sorted((key, 1_000 + len(key), 3, [1, 2]) for key in KEYS)
