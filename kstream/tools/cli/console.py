"""Where the command line writes: results to stdout, everything else to stderr.

Results (a table, a bootstrap address, a verdict) go to `out`; progress and
errors go to `err`, as one line each through `say`, so a script can read a
command's result from stdout undisturbed.
"""

from __future__ import annotations

import logging
import sys

from rich.console import Console
from rich.markup import escape

from kstream.infra.logs import JsonFormatter, clock_prefix, context, formatter, one_line

__all__ = ["err", "error_line", "log_lines", "out", "say"]

err = Console(stderr=True, soft_wrap=True)
out = Console()


#: Set by `log_lines`: lines of `say` are log records then (one JSON object each).
_as_records = False
_said = logging.getLogger("kstream.cli")


def say(message: str) -> None:
    """Print one progress or error line on stderr, prefixed ``kstream:`` (with
    ``--log-format json``: a log record of ``kstream.cli``, as JSON)."""
    if _as_records:
        _said.info(message)
        return
    # Messages quote topics ("t[0]@5") and user errors: print them as they are, not as markup.
    err.print(f"[dim]kstream:[/dim] {escape(message)}", highlight=False)


def error_line(message: str) -> None:
    """Print ``kstream: error: <message>`` on stderr (with JSON logs: an error record)."""
    if _as_records:
        _said.error(message)
    else:
        err.print(f"kstream: error: {message}", highlight=False, markup=False)


class _OneLine(logging.Handler):
    """Each log record as one line in the style of `say`; warnings and errors say so."""

    def __init__(self, clock: bool) -> None:
        super().__init__()
        self.clock = clock

    def emit(self, record: logging.LogRecord) -> None:
        try:
            when = clock_prefix(record, self.clock)
            err.print(f"{when}[dim]kstream:[/dim] {escape(one_line(record))}", highlight=False)
        except Exception:
            self.handleError(record)


def log_lines(
    level: int,
    *,
    clock: bool = False,
    log_format: str = "text",
    handler: logging.Handler | None = None,
) -> None:
    """Print the log records of `level` and above as one line each on stderr
    (or through `handler`), as text or as JSON (`kstream.infra.logs`).

    Not rich's log layout, which wraps a long warning over several lines beside
    the one-line ``kstream:`` messages of the same console. `clock` prefixes the
    time (a worker's log file, read after the fact). With JSON, `say`'s lines
    are log records too, so every line of the process is an object.
    """
    global _as_records
    _as_records = log_format == "json"
    if handler is not None:
        handler.setFormatter(formatter(log_format, clock=clock))
    elif log_format == "json":
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(JsonFormatter())
    else:
        handler = _OneLine(clock)
    handler.addFilter(context)
    logging.basicConfig(level=level, handlers=[handler], force=True)
