"""Jars from Maven Central, resolved once with `mvn` into kstream's cache.

The local broker (`deploy/kafka/pom.xml`) and the audit's Spark Kafka
connector (`deploy/spark/pom.xml`) both get their classpath this way: a pom
names the artifacts, ``mvn dependency:copy-dependencies`` copies their runtime
dependencies into a ``libs`` folder of the cache, and nothing is downloaded
again once that folder is complete.

``KSTREAM_MVN_ARGS`` adds arguments to every mvn call (a settings file, a mirror).
"""

from __future__ import annotations

import os
import shlex
import subprocess
from collections.abc import Callable
from pathlib import Path

from kstream.errors import DependencyResolutionError
from kstream.infra.paths import require_tool

__all__ = ["RESOLVE_TIMEOUT_S", "resolve_maven_classpath"]

#: `mvn` downloads ~70 MB of jars on a cold cache; slow mirrors need minutes.
RESOLVE_TIMEOUT_S = 900.0


def _quiet(_: str) -> None:
    """Default progress sink: say nothing."""


def resolve_maven_classpath(
    pom: Path,
    libs: Path,
    *,
    properties: dict[str, str] | None = None,
    what: str,
    log: Callable[[str], None] = _quiet,
) -> list[Path]:
    """Copy the runtime dependencies of `pom` into `libs` with mvn, once; return the jars.

    A `.complete` marker is written only after mvn succeeded, so an interrupted
    download is retried next time. Raises `ToolMissingError` without mvn and
    `DependencyResolutionError` (one line) when Maven Central cannot serve the jars.
    """
    marker = libs / ".complete"
    if not marker.is_file():
        mvn = require_tool("mvn", f"to fetch the {what} jars from Maven Central")
        libs.mkdir(parents=True, exist_ok=True)
        log(f"resolving {what} jars with mvn into {libs} (once)")
        cmd = [
            mvn,
            "-B",
            "-q",
            # Extra mvn arguments, e.g. `-s settings.xml` naming a corporate mirror.
            *shlex.split(os.environ.get("KSTREAM_MVN_ARGS", "")),
            "-f",
            str(pom),
            *(f"-D{k}={v}" for k, v in (properties or {}).items()),
            "dependency:copy-dependencies",
            "-DincludeScope=runtime",
            f"-DoutputDirectory={libs}",
        ]
        try:
            done = subprocess.run(
                cmd, capture_output=True, text=True, timeout=RESOLVE_TIMEOUT_S, check=False
            )
        except subprocess.TimeoutExpired as exc:
            raise DependencyResolutionError(
                f"mvn did not resolve the {what} jars within {RESOLVE_TIMEOUT_S:.0f}s; "
                "is Maven Central reachable?"
            ) from exc
        if done.returncode != 0:
            lines = [ln for ln in (done.stdout + done.stderr).splitlines() if "ERROR" in ln]
            detail = lines[0].strip() if lines else f"exit code {done.returncode}"
            raise DependencyResolutionError(
                f"mvn could not resolve {what} from Maven Central: {detail}"
            )
        marker.write_text(what)
    return sorted(libs.glob("*.jar"))
