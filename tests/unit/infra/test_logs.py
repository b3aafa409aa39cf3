"""Log lines as JSON with their context, and worker log files rotated within a bound."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kstream.infra.logs import JsonFormatter, LogContext, RotatingLog, TextFormatter, formatter


def record(message: str, level: int = logging.INFO, **extra: object) -> logging.LogRecord:
    r = logging.LogRecord("kstream.worker", level, __file__, 1, message, (), None)
    for k, v in extra.items():
        setattr(r, k, v)
    return r


def test_json_line_has_the_fields_and_context() -> None:
    ctx = LogContext()
    ctx.update(job="wc", worker="w1", generation=3)
    r = record("stored %s", subtask="s1-0", checkpoint=17, generation=4)
    r.args = ("x",)
    assert ctx.filter(r)
    line = JsonFormatter().format(r)
    assert "\n" not in line
    doc = json.loads(line)
    assert doc["message"] == "stored x"
    assert doc["level"] == "INFO"
    assert doc["logger"] == "kstream.worker"
    assert doc["time"].endswith("Z")
    assert doc["time"][10] == "T"
    # The record's own field wins over the process's.
    assert (doc["job"], doc["worker"], doc["generation"]) == ("wc", "w1", 4)
    assert (doc["subtask"], doc["checkpoint"]) == ("s1-0", 17)
    assert list(doc)[:4] == ["time", "level", "logger", "message"]


def test_json_line_without_context_and_with_an_error() -> None:
    try:
        raise ValueError("bad\nvalue")
    except ValueError:
        r = record("failed", logging.ERROR)
        r.exc_info = sys.exc_info()
    doc = json.loads(JsonFormatter().format(r))
    assert "job" not in doc
    assert "checkpoint" not in doc
    assert "ValueError: bad" in doc["error"]
    ctx = LogContext()
    ctx.update(job="a")
    ctx.update(job=None)
    r2 = record("plain")
    ctx.filter(r2)
    assert not hasattr(r2, "job")


def test_text_line() -> None:
    line = TextFormatter(clock=False).format(record("two\nlines", logging.WARNING))
    assert line == "kstream: WARNING: two lines"
    assert TextFormatter(clock=True).format(record("x"))[8:] == " kstream: x"
    with pytest.raises(ValueError, match="text, json"):
        formatter("xml")


def test_rotation_keeps_the_bound(tmp_path: Path) -> None:
    path = tmp_path / "logs" / "worker-0.log"
    handler = RotatingLog(path, 2000, 2, take_output=False)
    handler.setFormatter(JsonFormatter())
    try:
        for i in range(500):
            handler.emit(record(f"line {i:04d} " + "x" * 60))
    finally:
        handler.close()
    files = sorted(p.name for p in path.parent.iterdir())
    assert files == ["worker-0.log", "worker-0.log.1", "worker-0.log.2"]
    assert all(p.stat().st_size <= 2000 for p in path.parent.iterdir())
    assert "line 0499" in path.read_text()


def test_rotation_takes_the_process_output(tmp_path: Path) -> None:
    """stdout and stderr follow the current file: a print after many rotations
    lands in it, and the files stay within (backups + 1) x max bytes."""
    path = tmp_path / "worker-3.log"
    script = textwrap.dedent(
        f"""
        import logging, sys
        from pathlib import Path
        from kstream.infra.logs import RotatingLog, TextFormatter
        h = RotatingLog(Path({str(path)!r}), 1500, 3, take_output=True)
        h.setFormatter(TextFormatter(clock=True))
        log = logging.getLogger("t")
        log.addHandler(h)
        log.setLevel(logging.INFO)
        for i in range(400):
            log.info("record %d %s", i, "y" * 40)
            if i % 50 == 0:
                print("printed", i, flush=True)
                print("to stderr", i, file=sys.stderr, flush=True)
        print("the last print", flush=True)
        """
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=60)
    logs = list(tmp_path.iterdir())
    assert sorted(p.name for p in logs) == [f"worker-3.log{s}" for s in ("", ".1", ".2", ".3")]
    # A print between rotations may take a file a line past its bound.
    assert sum(p.stat().st_size for p in logs) <= 4 * (1500 + 100)
    assert path.read_text().rstrip().endswith("the last print")
    assert "to stderr 350" in "".join(p.read_text() for p in logs)
