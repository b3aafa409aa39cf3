"""Maven resolution without the network: the once-only marker and a missing mvn."""

from __future__ import annotations

from pathlib import Path

import pytest

from kstream.errors import ToolMissingError
from kstream.infra.maven import resolve_maven_classpath


def test_a_complete_folder_is_not_resolved_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    libs = tmp_path / "libs"
    libs.mkdir()
    for name in ("b-1.0.jar", "a-2.0.jar"):
        (libs / name).write_bytes(b"")
    (libs / ".complete").write_text("earlier run")
    # No mvn on PATH: any call to it would raise ToolMissingError.
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))

    jars = resolve_maven_classpath(tmp_path / "pom.xml", libs, what="Kafka 9.9")

    assert jars == [libs / "a-2.0.jar", libs / "b-1.0.jar"]


def test_an_incomplete_folder_without_mvn_is_one_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    libs = tmp_path / "libs"
    libs.mkdir()
    (libs / "half-downloaded.jar").write_bytes(b"")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))

    with pytest.raises(ToolMissingError) as raised:
        resolve_maven_classpath(tmp_path / "pom.xml", libs, what="Kafka 9.9")

    assert str(raised.value) == (
        "`mvn` is not on PATH; kstream needs it to fetch the Kafka 9.9 jars from Maven Central"
    )
    assert not (libs / ".complete").exists()
