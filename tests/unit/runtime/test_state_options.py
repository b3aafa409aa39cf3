"""The state's RocksDB options: a database written under earlier options still restores."""

from __future__ import annotations

from pathlib import Path

import pytest
from rocksdict import Options

from kstream.runtime.state import store as store_module
from kstream.runtime.state.store import L0_COMPACTION_TRIGGER, StateStore, key_bytes

OP = "s1.count"


def previous_options() -> Options:
    """What `StateStore` opened databases with before `state_options` (RocksDB's defaults)."""
    options = Options(raw_mode=True)
    options.create_if_missing(True)
    return options


def options_file(db: Path) -> str:
    return max(db.glob("OPTIONS-*")).read_text()


def test_a_checkpoint_of_the_previous_options_restores_and_grows_under_the_new(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with monkeypatch.context() as patch:
        patch.setattr(store_module, "state_options", previous_options)
        old = StateStore(tmp_path / "old")
        ctx = old.context(OP)
        for round_ in range(6):
            for i in range(2000):
                ctx.key = key_bytes(f"w{i}")
                ctx.set(round_ * 10_000 + i)
            old.flush()
            old.checkpoint(tmp_path / f"chk-{round_}")
            if round_ == 2:
                # tables below L0 too, as a long-running database has them
                old._db.compact_range(None, None)
        old.close()
    assert "level0_file_num_compaction_trigger=4" in options_file(tmp_path / "chk-5")

    StateStore.restore(tmp_path / "chk-5", tmp_path / "new")
    new = StateStore(tmp_path / "new")
    assert f"level0_file_num_compaction_trigger={L0_COMPACTION_TRIGGER}" in options_file(
        tmp_path / "new"
    )
    ctx = new.context(OP)
    for i in range(2000):
        ctx.key = key_bytes(f"w{i}")
        assert ctx.get() == 50_000 + i
    for round_ in range(L0_COMPACTION_TRIGGER + 2):  # past a compaction under the new trigger
        for i in range(0, 2000, 2):
            ctx.key = key_bytes(f"w{i}")
            ctx.set(-round_)
        new.flush()
        new.checkpoint(tmp_path / f"new-chk-{round_}")
    new.close()

    again = StateStore(tmp_path / "new")
    ctx = again.context(OP)
    for i in range(2000):
        ctx.key = key_bytes(f"w{i}")
        assert ctx.get() == (-(L0_COMPACTION_TRIGGER + 1) if i % 2 == 0 else 50_000 + i)
    again.close()
