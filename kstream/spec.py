"""Loading a job from a spec: ``module:attribute`` or ``path/to/file.py:attribute``.

The attribute is a `Job`, or a callable taking the ``-p KEY=VALUE`` parameters
(a dict of strings) and returning a `Job`.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Iterable
from pathlib import Path

from kstream.errors import ConfigurationError, SpecError
from kstream.job import Job

__all__ = ["load_job", "parse_params"]


def parse_params(items: Iterable[str]) -> dict[str, str]:
    """``KEY=VALUE`` strings to a dict; `ConfigurationError` for anything else."""
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigurationError(f"parameter {item!r} must look like KEY=VALUE")
        out[key] = value
    return out


def load_job(spec: str, params: dict[str, str]) -> Job:
    """Import the job named by `spec`; raise `SpecError` with one clear line otherwise."""
    target, sep, attr = spec.rpartition(":")
    if not sep or not target or not attr:
        raise SpecError(f"job spec {spec!r} must be module:attribute or path.py:attribute")
    if target.endswith(".py"):
        path = Path(target)
        if not path.is_file():
            raise SpecError(f"job file {target} does not exist")
        name = f"kstream_job_{path.stem}"
        loader = importlib.util.spec_from_file_location(name, path)
        if loader is None or loader.loader is None:
            raise SpecError(f"cannot import {target}")
        module = importlib.util.module_from_spec(loader)
        sys.modules[name] = module
        loader.loader.exec_module(module)
    else:
        try:
            module = importlib.import_module(target)
        except ModuleNotFoundError as exc:
            raise SpecError(f"cannot import module {target!r}: {exc}") from None
    try:
        obj = getattr(module, attr)
    except AttributeError:
        raise SpecError(f"{target} has no attribute {attr!r}") from None
    if isinstance(obj, Job):
        if params:
            raise SpecError(f"{spec} is a Job, not a function: it takes no -p parameters")
        return obj
    if callable(obj):
        job = obj(params)
        if isinstance(job, Job):
            return job
        raise SpecError(f"{spec}(params) returned {type(job).__name__}, not a kstream Job")
    raise SpecError(f"{spec} is a {type(obj).__name__}, not a Job or a function returning one")
