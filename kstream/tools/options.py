"""What the numeric options of the command line accept, decided in one place.

Typer parses ``nan``, ``inf`` and ``-1`` as valid floats, and a job started
with ``--checkpoint-interval nan`` only fails later, in every worker. Each
numeric option therefore names one of these checks as its callback, which
runs when the command line is parsed and raises `ConfigurationError` (one
line on stderr, exit 2) for a value outside its range::

    interval: Annotated[float, typer.Option("--checkpoint-interval", callback=POSITIVE)]
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TypeVar

import typer

from kstream.errors import ConfigurationError

__all__ = ["AT_LEAST_ONE", "NON_NEGATIVE", "PORT", "POSITIVE", "number"]

N = TypeVar("N", int, float)


def number(
    *, minimum: float, exclusive: bool = False, maximum: float | None = None
) -> Callable[[typer.CallbackParam, N | None], N | None]:
    """A callback accepting finite numbers >= `minimum` (> if `exclusive`) and <= `maximum`."""
    bound = f"> {minimum:g}" if exclusive else f">= {minimum:g}"
    if maximum is not None:
        bound += f" and <= {maximum:g}"

    def check(param: typer.CallbackParam, value: N | None) -> N | None:
        if value is None:
            return None
        low = value <= minimum if exclusive else value < minimum
        if not math.isfinite(value) or low or (maximum is not None and value > maximum):
            name = max(param.opts, key=len) if param.opts else str(param.name)
            kind = "an integer" if isinstance(value, int) else "a finite number"
            raise ConfigurationError(f"{name} must be {kind} {bound}, got {value}")
        return value

    return check


#: Durations and timeouts: zero would mean "always" or "never".
POSITIVE = number(minimum=0, exclusive=True)
#: Counts of things that may be absent (kills, an index).
NON_NEGATIVE = number(minimum=0)
#: Counts of things a job needs at least one of (workers, records, retained checkpoints).
AT_LEAST_ONE = number(minimum=1)
#: TCP ports; the local broker's controller listens on port + 1.
PORT = number(minimum=1, maximum=65534)
