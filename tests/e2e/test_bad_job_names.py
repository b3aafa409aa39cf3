"""A job name no job can have is refused by every command, up front, with one line.

Each command runs as a real process against the real broker; a refused name
must leave nothing behind: no output topic (``run --create-topics`` would create
it), no topic of the job, no state directory.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kstream.infra.admin import Admin
from kstream.testing import unique_name

pytestmark = [pytest.mark.broker, pytest.mark.e2e]

#: Names no job can have, with what the one line must say.
BAD_NAMES = {
    "unicode": ("wörter", "job name 'wörter' holds 'ö'; only ASCII letters, digits"),
    "300-chars": ("j" * 300, "has 300 characters; at most 200"),
    "empty": ("", "the job name is empty"),
    "dot-dot": ("..", "job name '..' names no directory of its own"),
    "slash": ("a/b", "job name 'a/b' holds '/'"),
}


def refused(args: list[str], cwd: Path) -> str:
    """The one stderr line of a `kstream` command that must exit 2 at once.

    A command that is still running after the deadline (it took the name) is
    killed, and the test fails saying so.
    """
    proc = subprocess.Popen(
        [sys.executable, "-m", "kstream", *args],
        cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        _, stderr = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise AssertionError(f"`kstream {args[0]}` accepted the name and ran") from None
    assert "Traceback" not in stderr, stderr
    assert proc.returncode == 2, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    return lines[0]


@pytest.mark.parametrize("case", list(BAD_NAMES), ids=list(BAD_NAMES))
def test_kstream_run_refuses_a_bad_job_name_before_creating_anything(
    bootstrap: str, tmp_path: Path, case: str
) -> None:
    name, message = BAD_NAMES[case]
    src, dst = unique_name("names-in"), unique_name("names-out")
    admin = Admin(bootstrap)
    admin.create_topics({src: 2})
    state = tmp_path / "state"
    line = refused(
        ["run", "kstream.examples.wordcount:job", "-p", f"input={src}", "-p", f"output={dst}",
         "--job-name", name, "--create-topics", "--workers", "1",
         "--bootstrap-servers", bootstrap, "--state-dir", str(state)],
        tmp_path,
    )  # fmt: skip
    assert line.startswith("kstream: error: "), line
    assert message in line
    assert admin.partitions(dst) is None, "the output topic was created"
    assert not state.exists(), f"the state dir was created: {list(state.rglob('*'))}"
    # Nothing of the default-named job either (an empty name once meant the default).
    assert not {t for t in admin.topics() if src in t} - {src}, "topics of the job were created"


@pytest.mark.parametrize(
    "command",
    [
        ["worker", "kstream.examples.wordcount:job", "--workers", "1", "--worker", "0",
         "-p", "input=i", "-p", "output=o"],
        ["plan", "kstream.examples.wordcount:job", "-p", "input=i", "-p", "output=o"],
        ["checkpoints"],
    ],
    ids=["worker", "plan", "checkpoints"],
)  # fmt: skip
@pytest.mark.parametrize("case", ["unicode", "300-chars", "empty"])
def test_every_command_with_a_job_name_refuses_a_bad_one(
    bootstrap: str, tmp_path: Path, command: list[str], case: str
) -> None:
    name, message = BAD_NAMES[case]
    state = tmp_path / "state"
    extra = ["--state-dir", str(state)] if command[0] == "worker" else []
    if command[0] != "plan":
        extra += ["--bootstrap-servers", bootstrap]
    line = refused([*command, "--job-name", name, *extra], tmp_path)
    assert message in line
    assert not state.exists()
