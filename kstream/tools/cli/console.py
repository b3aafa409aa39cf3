"""Where the command line writes: results to stdout, everything else to stderr.

Results (a table, a bootstrap address, a verdict) go to `out`; progress and
errors go to `err`, as one line each through `say`, so a script can read a
command's result from stdout undisturbed.
"""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape

__all__ = ["err", "out", "say"]

err = Console(stderr=True, soft_wrap=True)
out = Console()


def say(message: str) -> None:
    """Print one progress or error line on stderr, prefixed ``kstream:``."""
    # Messages quote topics ("t[0]@5") and user errors: print them as they are, not as markup.
    err.print(f"[dim]kstream:[/dim] {escape(message)}", highlight=False)
