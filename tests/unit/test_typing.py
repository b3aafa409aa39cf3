"""The job API's types are checked: a typed job passes ``mypy --strict``, and a job
with deliberate mistakes fails exactly on the lines marked ``# E: <message>``.

`tests/typing/good_job.py` pins each step's type with `assert_type`;
`tests/typing/bad_job.py` marks each wrong line with a part of mypy's message.
An expected error that disappears fails this test as surely as a new one.
"""

from __future__ import annotations

import re
from pathlib import Path

from mypy import api as mypy_api

ROOT = Path(__file__).resolve().parents[2]
TYPING = ROOT / "tests" / "typing"
#: ``path:line: error: message  [code]`` as mypy prints it.
ERROR = re.compile(r"^(?P<path>[^:]+):(?P<line>\d+): error: (?P<message>.*)$")
MARKER = re.compile(r"#\s*E:\s*(?P<expected>.+?)\s*$")


def mypy_errors(path: Path, cache: Path) -> dict[int, list[str]]:
    """mypy --strict's errors in `path`, by line (notes left out)."""
    out, err, status = mypy_api.run(
        [
            "--strict",
            "--config-file",
            str(ROOT / "pyproject.toml"),
            "--cache-dir",
            str(cache),
            "--show-error-codes",
            "--no-pretty",
            str(path),
        ]
    )
    assert status in (0, 1), f"mypy did not run: {err or out}"
    errors: dict[int, list[str]] = {}
    for line in out.splitlines():
        match = ERROR.match(line)
        if match is None:
            continue
        assert Path(match["path"]).resolve() == path, f"an error outside {path.name}: {line}"
        errors.setdefault(int(match["line"]), []).append(match["message"])
    return errors


def markers(path: Path) -> dict[int, str]:
    """The ``# E: <message>`` markers of `path`, by line."""
    found: dict[int, str] = {}
    for number, text in enumerate(path.read_text().splitlines(), start=1):
        match = MARKER.search(text)
        if match is not None:
            found[number] = match["expected"]
    return found


def test_a_typed_job_passes_mypy_strict(tmp_path: Path) -> None:
    assert mypy_errors(TYPING / "good_job.py", tmp_path) == {}


def test_a_wrong_job_fails_exactly_on_its_marked_lines(tmp_path: Path) -> None:
    path = TYPING / "bad_job.py"
    expected = markers(path)
    assert len(expected) >= 10, "the markers of bad_job.py went missing"
    errors = mypy_errors(path, tmp_path)
    unexpected = {n: errors[n] for n in errors.keys() - expected.keys()}
    missing = {n: expected[n] for n in expected.keys() - errors.keys()}
    assert unexpected == {}, f"errors on lines without a marker: {unexpected}"
    assert missing == {}, f"expected errors that mypy no longer reports: {missing}"
    for number, part in expected.items():
        assert any(part in message for message in errors[number]), (
            f"line {number}: no error contains {part!r}: {errors[number]}"
        )


def test_the_typing_files_are_not_collected_as_tests() -> None:
    # They are read by the type checker only (pyproject's norecursedirs).
    assert not any(p.name.startswith("test_") for p in TYPING.iterdir())
