"""Loading a job from a spec: ``module:attribute`` or ``path/to/file.py:attribute``.

The attribute is a `Job`, or a callable taking the ``-p KEY=VALUE`` parameters
(a dict of strings) and returning a `Job`.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import sys
import traceback
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType

from kstream.dataflow.job import Job
from kstream.errors import ConfigurationError, KStreamError, MissingParameterError, SpecError

__all__ = ["Params", "load_job", "parse_params"]


def parse_params(items: Iterable[str]) -> dict[str, str]:
    """``KEY=VALUE`` strings to a dict; `ConfigurationError` for anything else.

    A key given twice is refused (even with the same value): which of two
    values a job would get is not something to guess from the order.
    """
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigurationError(f"parameter {item!r} must look like KEY=VALUE")
        if key in out:
            raise ConfigurationError(
                f"parameter {key!r} is given twice (-p {key}={out[key]} and -p {item}): "
                "give each parameter once"
            )
        out[key] = value
    return out


class Params(dict[str, str]):
    """The ``-p`` parameters handed to a job function.

    Looking up a parameter that was not given raises `MissingParameterError`
    (a `KeyError`) naming the parameter and how to pass it.
    """

    def __missing__(self, key: str) -> str:
        raise MissingParameterError(f"the job needs parameter {key!r}: pass it with -p {key}=VALUE")


def load_job(spec: str, params: dict[str, str]) -> Job:
    """Import the job named by `spec`; raise `SpecError` with one clear line otherwise.

    A module spec is searched on the import path with the current directory
    first, as ``python -m`` does, in the runner and in its workers alike. The
    directory is added only now, after kstream was imported: a folder named
    kstream there cannot shadow the package (workers start with ``python -P``
    for that reason). Errors in the user's code — a syntax error, a
    failed import, an exception while building the job — become one line that
    says where.
    """
    target, sep, attr = spec.rpartition(":")
    if not sep or not target or not attr:
        raise SpecError(f"job spec {spec!r} must be module:attribute or path.py:attribute")
    module = _import_file(target) if target.endswith(".py") else _import_module(target)
    try:
        obj = getattr(module, attr)
    except AttributeError:
        raise SpecError(f"{target} has no attribute {attr!r}") from None
    if isinstance(obj, Job):
        if params:
            raise SpecError(f"{spec} is a Job, not a function: it takes no -p parameters")
        return obj
    if not callable(obj):
        raise SpecError(f"{spec} is a {type(obj).__name__}, not a Job or a function returning one")
    try:
        inspect.signature(obj).bind(params)
    except TypeError:
        raise SpecError(
            f"{spec} must take one argument, the -p parameters as a dict (def job(params): ...)"
        ) from None
    except ValueError:
        pass  # no signature to check (a builtin): the call will tell
    try:
        job = obj(Params(params))
    except MissingParameterError as exc:
        raise MissingParameterError(f"{spec}: {exc}") from None
    except KStreamError:
        raise
    except Exception as exc:
        raise SpecError(f"{spec} raised {_where(exc)}") from None
    if isinstance(job, Job):
        return job
    raise SpecError(f"{spec}(params) returned {type(job).__name__}, not a kstream Job")


def _import_file(target: str) -> ModuleType:
    path = Path(target)
    if not path.is_file():
        raise SpecError(f"job file {target} does not exist")
    name = f"kstream_job_{path.stem}"
    loader = importlib.util.spec_from_file_location(name, path)
    if loader is None or loader.loader is None:
        raise SpecError(f"cannot import {target}")
    module = importlib.util.module_from_spec(loader)
    sys.modules[name] = module
    try:
        loader.loader.exec_module(module)
    except SyntaxError as exc:
        raise SpecError(f"job file {target}: {_syntax(exc)}") from None
    except Exception as exc:
        raise SpecError(f"job file {target} failed to import: {_where(exc)}") from None
    return module


def _import_module(target: str) -> ModuleType:
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)
    try:
        return importlib.import_module(target)
    except ModuleNotFoundError as exc:
        if exc.name is not None and (target == exc.name or target.startswith(exc.name + ".")):
            raise SpecError(
                f"cannot import module {target!r}: {exc} (searched the current directory "
                f"{cwd} and the installed packages; a file elsewhere can be named as "
                f"path/to/file.py:attribute)"
            ) from None
        raise SpecError(f"module {target!r} failed to import: {_where(exc)}") from None
    except SyntaxError as exc:
        raise SpecError(f"module {target!r}: {_syntax(exc)}") from None
    except Exception as exc:
        raise SpecError(f"module {target!r} failed to import: {_where(exc)}") from None


def _syntax(exc: SyntaxError) -> str:
    where = f"{exc.filename}, line {exc.lineno}" if exc.filename else f"line {exc.lineno}"
    return f"{type(exc).__name__} at {where}: {exc.msg}"


def _where(exc: BaseException) -> str:
    """``Type: message (file, line N)``: the error and the innermost frame that raised it."""
    frames = traceback.extract_tb(exc.__traceback__)
    at = f" ({frames[-1].filename}, line {frames[-1].lineno})" if frames else ""
    return f"{type(exc).__name__}: {exc}{at}"
