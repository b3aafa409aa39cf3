"""Where kstream finds what it needs on this machine: its cache, its deploy files, tools.

Shared by everything that starts infrastructure: the local broker, Maven
resolution, the audit's Spark session and the demo.

Layout of the cache (``KSTREAM_CACHE_DIR``, default: the user's cache dir,
e.g. ``~/.cache/kstream``)::

    <cache>/kafka-<version>/libs/          the local broker's classpath
    <cache>/spark-kafka-<version>/libs/    the audit's Spark Kafka connector
    <cache>/broker-<port>/                 one local broker's config, data and logs
    <cache>/demo/<run>/                    the demo's state
    <cache>/bench/                         the benchmark suite's peers (a Quix Streams
                                           virtualenv, the Kafka Streams build) and reports
"""

from __future__ import annotations

import os
import shutil
from importlib import resources
from pathlib import Path

import platformdirs

from kstream.errors import BrokerError, ToolMissingError

__all__ = ["cache_dir", "deploy_dir", "require_tool"]


def cache_dir() -> Path:
    """Directory for resolved jars and local broker data (``KSTREAM_CACHE_DIR`` overrides)."""
    override = os.environ.get("KSTREAM_CACHE_DIR")
    return Path(override) if override else Path(platformdirs.user_cache_dir("kstream"))


def deploy_dir() -> Path:
    """The `deploy/` folder: shipped in the wheel as `kstream/_deploy`, or the checkout's own."""
    packaged = Path(str(resources.files("kstream"))) / "_deploy"
    if (packaged / "kafka" / "pom.xml").is_file():
        return packaged
    checkout = Path(__file__).resolve().parents[2] / "deploy"
    if (checkout / "kafka" / "pom.xml").is_file():
        return checkout
    raise BrokerError(
        "kstream's deploy files are missing from this installation; reinstall kstream"
    )


def require_tool(name: str, purpose: str) -> str:
    """The path of executable `name` on PATH; `ToolMissingError` saying `purpose` if absent."""
    path = shutil.which(name)
    if path is None:
        raise ToolMissingError(f"`{name}` is not on PATH; kstream needs it {purpose}")
    return path
