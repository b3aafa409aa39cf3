"""The layers show in the imports: the pure ones load nothing that does I/O.

Each module is imported in a fresh interpreter, so whatever it pulls in
transitively (the package's front door included) counts.
"""

from __future__ import annotations

import json
import pkgutil
import subprocess
import sys

import pytest

import kstream.dataflow
import kstream.protocol

#: Libraries that do I/O (Kafka, RocksDB, processes, the network, Spark).
IO_LIBRARIES = ("confluent_kafka", "rocksdict", "subprocess", "socket", "pyspark")
#: The layers of kstream that do I/O, and the tools and connectors built on them.
IO_LAYERS = (
    "kstream.runtime",
    "kstream.infra",
    "kstream.tools",
    "kstream.connectors",
    "kstream.audit",
)
#: What a fresh interpreter loads for one import, minus what it had loaded before.
PROBE = (
    "import importlib, json, sys\n"
    "before = set(sys.modules)\n"
    "importlib.import_module(sys.argv[1])\n"
    "print(json.dumps(sorted(set(sys.modules) - before)))\n"
)


def pure_modules() -> list[str]:
    return [
        info.name
        for package in (kstream.protocol, kstream.dataflow)
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + ".")
    ]


def io_imports(module: str) -> list[str]:
    """The modules doing I/O that importing `module` loads."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE, module], capture_output=True, text=True, check=True
    )
    loaded: list[str] = json.loads(done.stdout)
    return [
        name
        for name in loaded
        if name.split(".")[0] in IO_LIBRARIES
        or any(name == layer or name.startswith(layer + ".") for layer in IO_LAYERS)
    ]


def test_the_pure_layers_are_found() -> None:
    names = pure_modules()
    assert "kstream.protocol.barrier" in names
    assert "kstream.protocol.names" in names
    assert "kstream.dataflow.plan" in names


@pytest.mark.parametrize("module", pure_modules())
def test_a_pure_module_imports_nothing_that_does_io(module: str) -> None:
    assert io_imports(module) == []


def test_the_probe_sees_io_imports() -> None:
    # The check above is only worth something if it can fail.
    assert "kstream.runtime.channels.writer" in io_imports("kstream.runtime.channels.writer")
    assert "confluent_kafka" in io_imports("kstream.runtime.channels.writer")
