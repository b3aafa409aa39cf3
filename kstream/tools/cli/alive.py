"""`kstream alive FILE`: is the coordinator that touches FILE alive and turning its loop?

A supervisor's probe for ``kstream run --liveness-file FILE`` (on Kubernetes, the
coordinator's exec ``startupProbe`` and ``livenessProbe``): exit 0 when FILE was
touched within ``--max-age`` seconds, else exit 1 with one line on stderr saying
why (missing, or how old). Exit 2, as for every command, is a bad option.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kstream.tools.cli.console import say
from kstream.tools.cli.options import POSITIVE

__all__ = ["alive_command"]


def alive_command(
    path: Annotated[Path, typer.Argument(help="The file given to `kstream run --liveness-file`.")],
    max_age: Annotated[
        float,
        typer.Option(
            "--max-age",
            help="Seconds since the last touch beyond which the coordinator counts as stuck.",
            callback=POSITIVE,
        ),
    ] = 60.0,
) -> None:
    """Exit 0 if PATH was touched within --max-age seconds (the loop turns), else 1."""
    from kstream.runtime.runner.alive import age

    seconds = age(path)
    if seconds is None:
        say(f"not alive: {path} does not exist (the coordinator has not reached its loop)")
        raise typer.Exit(1)
    if seconds > max_age:
        say(f"not alive: {path} last touched {seconds:.1f} s ago (--max-age {max_age:g})")
        raise typer.Exit(1)
