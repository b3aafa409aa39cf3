"""Snapshots record the state serde; a restore with another one is refused, naming both."""

from __future__ import annotations

import json

import pytest

from kstream.errors import CheckpointError
from kstream.runtime.checkpoint.storage import SnapshotMeta, check_state_serde


def meta(serde: str, has_state: bool = True) -> SnapshotMeta:
    return SnapshotMeta(
        checkpoint=4, generation=1, task="s1-0", has_state=has_state, state_serde=serde
    )


def test_the_same_serde_restores() -> None:
    check_state_serde(meta("msgpack"), "msgpack")
    check_state_serde(meta("json"), "json")


def test_another_serde_is_refused_naming_both() -> None:
    with pytest.raises(CheckpointError) as caught:
        check_state_serde(meta("json"), "msgpack")
    line = str(caught.value)
    assert "checkpoint 4 of s1-0" in line
    assert "json state serde" in line
    assert "the job's is msgpack" in line
    assert "\n" not in line


def test_a_snapshot_without_state_restores_with_any_serde() -> None:
    check_state_serde(meta("", has_state=False), "json")
    check_state_serde(meta("msgpack", has_state=False), "json")


def test_pickled_state_from_before_serdes_needs_trusted_pickle() -> None:
    legacy = SnapshotMeta.from_json(
        json.dumps({"checkpoint": 2, "generation": 0, "task": "s1-0", "has_state": True})
    )
    assert legacy.state_serde == ""
    with pytest.raises(CheckpointError, match=r"holds pickled state .*trusted-pickle"):
        check_state_serde(legacy, "msgpack")
    check_state_serde(legacy, "trusted-pickle")


def test_the_serde_name_survives_meta_json() -> None:
    assert SnapshotMeta.from_json(meta("json").to_json()).state_serde == "json"
