"""The old spellings of the job API's durations, kept for one minor release.

Every duration of the job API is an int of milliseconds whose keyword ends in
``_ms`` (``tumbling(size_ms=...)``, ``window(..., allowed_lateness_ms=...)``);
the keywords without the suffix (and `snapshot_every`, in seconds) still work,
with a `DeprecationWarning` naming the new spelling. The release after refuses
them with that line as a `ConfigurationError`, and this module goes.
"""

from __future__ import annotations

import math
import warnings

from kstream.errors import ConfigurationError

__all__ = ["renamed", "required", "seconds_to_ms"]


def renamed(
    call: str,
    new: str,
    value: int | None,
    old: str,
    old_value: int | None,
    *,
    default: int | None = None,
    stacklevel: int = 1,
) -> int | None:
    """The value of keyword `new` of `call`, or that of its deprecated spelling `old`.

    Giving `old` warns (pointing `stacklevel` frames above the caller) and gives
    its value; giving it with `new` (`value` other than `default`) is a
    `ConfigurationError`.
    """
    if old_value is None:
        return value
    if value != default:
        raise ConfigurationError(f"{call}: give {new} or the deprecated {old}, not both")
    warnings.warn(
        f"{call}({old}={old_value!r}) is deprecated: write {new}={old_value!r} (ms)",
        DeprecationWarning,
        stacklevel=stacklevel + 1,
    )
    return old_value


def required(call: str, new: str, value: int | None) -> int:
    """`value`, which the caller had to give (as `new` or its old spelling)."""
    if value is None:
        raise ConfigurationError(f"{call} needs {new} (an int of ms)")
    return value


def seconds_to_ms(every: object, stacklevel: int) -> int:
    """The deprecated `snapshot_every` (seconds) in ms, with its `DeprecationWarning`
    pointing `stacklevel` frames above the caller."""
    if isinstance(every, bool) or not (isinstance(every, int | float) and 0 < every < math.inf):
        raise ConfigurationError(
            f"snapshot_every must be a positive number of seconds or None, got {every!r}"
        )
    # A positive interval stays positive: less than half a ms is one ms.
    ms = max(1, round(every * 1000))
    warnings.warn(
        f"snapshot_every={every!r} is seconds; write snapshot_every_ms={ms}",
        DeprecationWarning,
        stacklevel=stacklevel + 1,
    )
    return ms
