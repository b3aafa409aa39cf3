"""`kstream status`'s screen, rendered from a crafted status."""

from __future__ import annotations

from rich.console import Console

from kstream.protocol.messages import Presence, Recovered, WorkerAlive
from kstream.protocol.status import job_status
from kstream.tools.cli.status import render

T0 = 1_700_000_000.0


def screen(*messages: object, now: float) -> str:
    console = Console(width=160, record=True)
    console.print(render(job_status("wc", messages, now)))  # type: ignore[arg-type]
    return console.export_text()


def test_a_running_job_after_a_recovery() -> None:
    text = screen(
        Presence("i", 7, "host-b", "/s", T0),
        Recovered(1, None, "job started", T0),
        Recovered(2, 9, "worker w1 lost: killed by signal 9", T0 + 1),
        WorkerAlive("w1", 2, T0 + 2, "p", None, restoring=True),
        now=T0 + 3,
    )
    assert "job wc: running (coordinator pid 7 on host-b" in text
    assert "worker_lost" in text
    assert "restoring" in text
    assert "no checkpoint completed" in text


def test_a_stopped_job() -> None:
    text = screen(Presence("i", 7, "h", "/s", T0, stopped=True), now=T0 + 600)
    assert "job wc: stopped at" in text
    assert "10 min ago" in text
    silent = screen(Presence("i", 7, "h", "/s", T0), now=T0 + 60)
    assert "not running" in silent
