"""`deploy/broker.sh` run as a plain script, with a PATH that lacks kstream's venv.

Each run is the real script under ``sh`` with a scrubbed environment: PATH holds
only the system's directories, so ``python3`` there is not the Python running
the tests. The broker directories live in a temporary ``KSTREAM_CACHE_DIR``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "deploy" / "broker.sh"
#: A port no broker of this test runs on (`status` only reads its directory).
PORT = 23229
#: System directories only: no virtualenv, no pyenv shims.
BARE_PATH = "/usr/bin:/bin"


def broker_sh(*args: str, cache: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["/bin/sh", str(SCRIPT), *args],
        env={"PATH": BARE_PATH, "HOME": str(cache), "KSTREAM_CACHE_DIR": str(cache), **env},
        capture_output=True, text=True, timeout=120, check=False, cwd=cache,
    )  # fmt: skip


@pytest.mark.skipif(
    not (ROOT / ".venv" / "bin" / "python").exists(), reason="the checkout has no .venv"
)
def test_status_runs_with_the_checkouts_venv_when_path_lacks_it(tmp_path: Path) -> None:
    assert str(ROOT / ".venv") not in BARE_PATH
    done = broker_sh("status", "--port", str(PORT), cache=tmp_path)
    assert "Traceback" not in done.stderr, done.stderr
    assert done.stdout.strip() == (
        f"stopped bootstrap=127.0.0.1:{PORT} dir={tmp_path / f'broker-{PORT}'}"
    )
    assert done.returncode == 1  # `status` of a stopped broker


def test_a_python_without_kstreams_dependencies_is_one_line(tmp_path: Path) -> None:
    bare = tmp_path / "bare"
    # A venv of the same interpreter with nothing installed: it lacks msgpack & co.
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    python = bare / "bin" / "python"
    done = broker_sh("status", "--port", str(PORT), cache=tmp_path, PYTHON=str(python))
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(
        f"kstream: error: no Python with kstream's dependencies ({python}: "
        "ModuleNotFoundError: No module named "
    ), lines[0]
    assert f"python3 -m venv {ROOT}/.venv" in lines[0]
    assert "or set PYTHON to a Python that has them" in lines[0]
