"""Where the command line writes: results to stdout, everything else to stderr.

Results (a table, a bootstrap address, a verdict) go to `out`; progress and
errors go to `err`, as one line each through `say`, so a script can read a
command's result from stdout undisturbed.
"""

from __future__ import annotations

import logging
import time

from rich.console import Console
from rich.markup import escape

__all__ = ["err", "log_lines", "out", "say"]

err = Console(stderr=True, soft_wrap=True)
out = Console()


def say(message: str) -> None:
    """Print one progress or error line on stderr, prefixed ``kstream:``."""
    # Messages quote topics ("t[0]@5") and user errors: print them as they are, not as markup.
    err.print(f"[dim]kstream:[/dim] {escape(message)}", highlight=False)


class _OneLine(logging.Handler):
    """Each log record as one line in the style of `say`; warnings and errors say so."""

    def __init__(self, clock: bool) -> None:
        super().__init__()
        self.clock = clock

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = record.getMessage()
            if record.exc_info and record.exc_info[1] is not None:
                exc = record.exc_info[1]
                text += f" ({type(exc).__name__}: {exc})"
            text = " ".join(text.splitlines())
            if record.levelno >= logging.WARNING:
                text = f"{record.levelname}: {text}"
            when = time.strftime("%H:%M:%S ", time.localtime(record.created)) if self.clock else ""
            err.print(f"{when}[dim]kstream:[/dim] {escape(text)}", highlight=False)
        except Exception:
            self.handleError(record)


def log_lines(level: int, *, clock: bool = False) -> None:
    """Print the log records of `level` and above as one line each on stderr.

    Not rich's log layout, which wraps a long warning over several lines beside
    the one-line ``kstream:`` messages of the same console. `clock` prefixes the
    time (a worker's log file, read after the fact).
    """
    logging.basicConfig(level=level, handlers=[_OneLine(clock)], force=True)
