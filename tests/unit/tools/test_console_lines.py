"""`kstream.tools.cli.console.log_lines`: every log record is one `kstream:` line."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from kstream.tools.cli.console import log_lines


@pytest.fixture
def root_handlers() -> Iterator[None]:
    root = logging.getLogger()
    saved, level = root.handlers[:], root.level
    yield
    root.handlers[:] = saved
    root.setLevel(level)


@pytest.mark.usefixtures("root_handlers")
def test_a_long_multi_line_warning_is_one_line_saying_it_is_a_warning(
    capsys: pytest.CaptureFixture[str],
) -> None:
    log_lines(logging.INFO)
    reason = "the reader returned nothing " * 20
    logging.getLogger("kstream.control").warning("stalled:\n%s\nreplaced it", reason)
    logging.getLogger("kstream.worker").info("w0: generation 2")
    logging.getLogger("kstream.worker").debug("not shown")
    err = capsys.readouterr().err
    assert err.splitlines() == [
        f"kstream: WARNING: stalled: {reason} replaced it",
        "kstream: w0: generation 2",
    ]


@pytest.mark.usefixtures("root_handlers")
def test_a_worker_logs_lines_have_their_time(capsys: pytest.CaptureFixture[str]) -> None:
    log_lines(logging.INFO, clock=True)
    logging.getLogger("kstream.worker").info("w0: generation 2")
    [line] = capsys.readouterr().err.splitlines()
    when, _, rest = line.partition(" ")
    assert rest == "kstream: w0: generation 2"
    assert len(when.split(":")) == 3
