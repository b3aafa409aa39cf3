"""The documentation's rules that a test can hold: a short README, no "§" in the code,
and the README's test command being the one CI runs."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
CI = ROOT / ".ci" / "run"

#: The README is the front page; everything longer goes in a page of the site.
README_MAX_LINES = 250


def _steps(line: str) -> list[str]:
    """A shell line's commands joined by ``&&``, each without leading ``VAR=value``."""
    steps = []
    for part in line.split("&&"):
        words = shlex.split(part)
        while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=\S*", words[0]):
            words.pop(0)
        if words:
            steps.append(shlex.join(words))
    return steps


def readme_test_command() -> list[str]:
    """The second set-up command of the README: the one that runs the checks and tests."""
    block = re.search(r"## Set-up\n.*?```sh\n(.*?)```", README.read_text(), re.S)
    assert block is not None, "README.md has no Set-up section with a sh block"
    commands = [ln for ln in block[1].splitlines() if ln.strip() and not ln.startswith("#")]
    assert len(commands) == 2, commands
    return _steps(commands[1])


def ci_steps() -> list[str]:
    """Every command .ci/run runs, in order (comments and control lines left out)."""
    steps: list[str] = []
    for line in CI.read_text().replace("\\\n", " ").splitlines():
        line = line.strip()
        if not line or line.startswith(("#", "set ", "if ", "fi", "then")):
            continue
        steps.extend(_steps(line))
    return steps


def test_the_readme_is_a_front_page_of_at_most_250_lines() -> None:
    lines = README.read_text().count("\n")
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines"


def test_no_section_sign_in_the_code_it_cites_docs_by_label() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{n}"
        for tree in ("kstream", "connectors")
        for path in sorted((ROOT / tree).rglob("*.py"))
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if "§" in line
    ]
    assert found == []


def test_ci_runs_the_readmes_test_command_in_its_order() -> None:
    readme = readme_test_command()
    assert readme[-1].endswith("-m pytest"), readme
    ci = ci_steps()
    at = 0
    for step in readme:
        assert step in ci[at:], f"{step!r} is not run by .ci/run after {ci[:at]!r}"
        at = ci.index(step, at) + 1


def test_the_command_parser_sees_a_changed_command() -> None:
    # The check above can fail: a step CI does not run is found missing.
    assert _steps("A=1 x -q && y 'b c'") == ["x -q", "y 'b c'"]
    assert "scripts/check --fast" not in ci_steps()


def test_the_readmes_python_examples_run() -> None:
    # The README's code is what a reader copies: each Python block that runs a job
    # through the testing kit runs here, assertions included.
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    runnable = [b for b in blocks if "kstream.testing" in b]
    assert runnable, "the README shows a job's unit test"
    for block in runnable:
        exec(compile(block, str(README), "exec"), {})
