"""How kstream's processes write their logs: one line a record, as text or as JSON.

`JsonFormatter` writes one JSON object per line::

    {"time": "2026-05-01T12:00:00.123Z", "level": "INFO", "logger": "kstream.worker",
     "message": "...", "job": "wordcount", "worker": "w0", "generation": 3}

with ``subtask`` and ``checkpoint`` too when the record is about one (``extra=``
of the logging call), and ``error`` (the exception and its traceback) when it
carries one. The process-wide fields (``job``, ``worker``, ``generation``) come
from `context`, a `logging.Filter` that the process updates as it learns them
(`LogContext.update`); a field a record sets itself wins.

`TextFormatter` is the human form: ``[HH:MM:SS ]kstream: [WARNING: ]message`` on
one line, the exception's type and text appended.

`RotatingLog` is a worker's log file, rotated at `DEFAULT_MAX_BYTES` with
`DEFAULT_BACKUPS` older files kept, whose process output (stdout and stderr:
tracebacks, native libraries) is pointed at the current file after each
rotation, so the log's disk use stays bounded by (backups + 1) x max bytes,
plus at most one record over.
"""

from __future__ import annotations

import json
import logging
import logging.handlers
import os
import sys
import time
from pathlib import Path
from typing import Any

__all__ = [
    "CONTEXT_FIELDS",
    "DEFAULT_BACKUPS",
    "DEFAULT_MAX_BYTES",
    "FORMATS",
    "LOG_FORMAT_ENV",
    "JsonFormatter",
    "LogContext",
    "RotatingLog",
    "TextFormatter",
    "clock_prefix",
    "context",
    "formatter",
    "one_line",
]

#: Where ``--log-format`` is read when not given.
LOG_FORMAT_ENV = "KSTREAM_LOG_FORMAT"
#: The values of ``--log-format``.
FORMATS = ("text", "json")
#: The fields of a JSON line beyond time, level, logger and message, in this order.
CONTEXT_FIELDS = ("job", "worker", "subtask", "generation", "checkpoint")
#: A worker's log file is rotated when it would grow beyond this ...
DEFAULT_MAX_BYTES = 10 * 1024 * 1024
#: ... keeping this many older files (``worker-0.log.1`` ... ``.3``).
DEFAULT_BACKUPS = 3


class LogContext(logging.Filter):
    """Adds the process's context fields to every record that lacks them."""

    def __init__(self) -> None:
        super().__init__()
        self.fields: dict[str, object] = {}

    def update(self, **fields: object) -> None:
        """Set fields (None removes one) for every record from now on."""
        for key, value in fields.items():
            if value is None:
                self.fields.pop(key, None)
            else:
                self.fields[key] = value

    def filter(self, record: logging.LogRecord) -> bool:
        for key, value in self.fields.items():
            if not hasattr(record, key):
                setattr(record, key, value)
        return True


#: The context of this process: its handlers carry it (`install`).
context = LogContext()


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line (see the module's docstring)."""

    def format(self, record: logging.LogRecord) -> str:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
        out: dict[str, Any] = {
            "time": f"{stamp}.{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key in CONTEXT_FIELDS:
            value = getattr(record, key, None)
            if value is not None:
                out[key] = value
        if record.exc_info and record.exc_info[1] is not None:
            out["error"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)


class TextFormatter(logging.Formatter):
    """``[HH:MM:SS ]kstream: [WARNING: ]message`` on one line."""

    def __init__(self, clock: bool) -> None:
        super().__init__()
        self.clock = clock

    def format(self, record: logging.LogRecord) -> str:
        return f"{clock_prefix(record, self.clock)}kstream: {one_line(record)}"


def one_line(record: logging.LogRecord) -> str:
    """`record`'s message on one line: ``[WARNING: ]message[ (Error: why)]``."""
    text = record.getMessage()
    if record.exc_info and record.exc_info[1] is not None:
        exc = record.exc_info[1]
        text += f" ({type(exc).__name__}: {exc})"
    text = " ".join(text.splitlines())
    if record.levelno >= logging.WARNING:
        text = f"{record.levelname}: {text}"
    return text


def clock_prefix(record: logging.LogRecord, clock: bool) -> str:
    """``HH:MM:SS `` of `record`'s local time when `clock`, else ""."""
    return time.strftime("%H:%M:%S ", time.localtime(record.created)) if clock else ""


def formatter(log_format: str, *, clock: bool = False) -> logging.Formatter:
    """The formatter of `log_format` (one of `FORMATS`)."""
    if log_format == "json":
        return JsonFormatter()
    if log_format == "text":
        return TextFormatter(clock)
    raise ValueError(f"log format must be one of {', '.join(FORMATS)}, got {log_format!r}")


class RotatingLog(logging.handlers.RotatingFileHandler):
    """A log file rotated at `max_bytes`, `backups` older files kept.

    With `take_output`, the process's stdout and stderr write to the current
    file too (now and after each rotation): what is not a log record (a
    traceback printed by the interpreter, a native library's output) is kept
    with the records and counts against the same bound.
    """

    def __init__(self, path: Path, max_bytes: int, backups: int, *, take_output: bool) -> None:
        if max_bytes < 1 or backups < 0:
            raise ValueError(f"log rotation needs max bytes >= 1 and backups >= 0, got "
                             f"{max_bytes} and {backups}")  # fmt: skip
        path.parent.mkdir(parents=True, exist_ok=True)
        super().__init__(path, maxBytes=max_bytes, backupCount=backups, encoding="utf-8")
        self.take_output = take_output
        self._point_output()

    def doRollover(self) -> None:  # noqa: N802 (the standard library's name)
        super().doRollover()
        self._point_output()

    def _point_output(self) -> None:
        if not self.take_output or self.stream is None:
            return
        sys.stdout.flush()
        sys.stderr.flush()
        fd = self.stream.fileno()
        os.dup2(fd, 1)
        os.dup2(fd, 2)
