"""`kstream status`: a job's status on one screen, from its control topic only.

What the screen says is decided by `kstream.protocol.status.job_status` (pure);
this module reads the topic, renders the result with rich (or prints its JSON
document) and, with ``--watch``, keeps one reader open and redraws.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Group, RenderableType
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from kstream.errors import ConfigurationError
from kstream.tools.cli.checkpoints import size_text, task_order
from kstream.tools.cli.console import out, say
from kstream.tools.cli.options import (
    POSITIVE,
    BootstrapOption,
    KafkaConfigOption,
    RequiredJobNameOption,
)

if TYPE_CHECKING:
    from kstream.protocol.messages import ControlMessage
    from kstream.protocol.status import JobStatus
    from kstream.runtime.control import ControlReader

__all__ = ["render", "status_command"]

#: Messages read per poll while catching up with the topic.
_BATCH = 5000


def status_command(
    job_name: RequiredJobNameOption,
    bootstrap_servers: BootstrapOption = None,
    kafka_config: KafkaConfigOption = None,
    watch: Annotated[
        bool, typer.Option("--watch", help="Redraw every --interval seconds until Ctrl-C.")
    ] = False,
    interval: Annotated[
        float,
        typer.Option("--interval", help="Seconds between redraws with --watch.", callback=POSITIVE),
    ] = 2.0,
    as_json: Annotated[
        bool,
        typer.Option("--json", help="Print one JSON document (with --watch: one per line)."),
    ] = False,
) -> None:
    """Show a job's workers, subtasks, latest checkpoint, recoveries and throughput,
    read from its control topic: from any machine, running or stopped."""
    from kstream.infra.admin import Admin
    from kstream.infra.cluster import bootstrap_servers as resolve
    from kstream.protocol.names import control_topic, history_group
    from kstream.protocol.status import job_status
    from kstream.runtime.control import ControlReader

    bootstrap = resolve(bootstrap_servers, say)
    admin = Admin(bootstrap)
    admin.check_reachable()
    if admin.partitions(control_topic(job_name)) is None:
        raise ConfigurationError(f"job {job_name!r} has no control topic: it never ran here")
    reader = ControlReader(bootstrap, job_name, group=history_group(job_name))
    try:
        messages: list[ControlMessage] = [m for _, m in reader.read_to_end()]

        def status() -> JobStatus:
            return job_status(job_name, messages, time.time())

        if not watch:
            _show(status(), as_json)
            return
        if as_json:
            while True:
                print(json.dumps(status().to_json()), flush=True)
                _read_until(reader, messages, time.monotonic() + interval)
        if not out.is_terminal:
            # Redrawing in place needs a terminal: into a file or a pipe, one screen
            # after another.
            while True:
                out.print(render(status()))
                _read_until(reader, messages, time.monotonic() + interval)
        from rich.live import Live

        with Live(
            render(status()), console=out, auto_refresh=False, vertical_overflow="visible"
        ) as live:
            while True:
                _read_until(reader, messages, time.monotonic() + interval)
                live.update(render(status()), refresh=True)
    except KeyboardInterrupt:
        return  # --watch ends with Ctrl-C
    finally:
        reader.close()


def _read_until(reader: ControlReader, messages: list[ControlMessage], deadline: float) -> None:
    """Append what the topic gets until `deadline` (waiting for it: the redraw's pace)."""
    while (left := deadline - time.monotonic()) > 0:
        messages.extend(m for _, m in reader.poll(min(left, 0.5), _BATCH))


def _show(status: JobStatus, as_json: bool) -> None:
    if as_json:
        print(json.dumps(status.to_json(), indent=2))
    else:
        out.print(render(status))


def _ago(age: float | None) -> str:
    if age is None:
        return "?"
    if age < 120:
        return f"{age:.1f}s ago"
    if age < 7200:
        return f"{age / 60:.0f} min ago"
    return f"{age / 3600:.1f} h ago"


def _rate(value: float | None) -> str:
    return "" if value is None else f"{value:,.0f}"


def _clock(when: float | None) -> str:
    return "" if when is None else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(when))


def render(s: JobStatus) -> RenderableType:
    """The screen of `s`: a headline, then workers, subtasks, checkpoints, recoveries."""
    return Group(*_parts(s))


def _parts(s: JobStatus) -> list[RenderableType]:
    seen = None if s.last_seen is None else s.now - s.last_seen
    state = {
        "running": f"[green]running[/green] (coordinator {escape(s.coordinator)}, "
        f"seen {_ago(seen)})",
        "stopped": f"[yellow]stopped[/yellow] at {_clock(s.last_seen)} ({_ago(seen)})",
        "silent": f"[red]not running[/red]: its coordinator was last seen {_ago(seen)} "
        f"({_clock(s.last_seen)}), without saying it stopped",
        "unknown": "state unknown (no coordinator announcement in the control topic)",
    }[s.state]
    parts: list[RenderableType] = [
        Text.from_markup(f"[bold]job {escape(s.job)}[/bold]: {state}"),
        Text(
            f"generation {s.generation} · records in {s.records_in:,} "
            f"({_rate(s.in_per_s) or '?'}/s) · out {s.records_out:,} "
            f"({_rate(s.out_per_s) or '?'}/s) · dead letters {s.dead_letters:,}"
        ),
    ]
    if s.failure:
        parts.append(Text(f"failed: {s.failure}", style="red"))
    workers = Table(title="workers", title_justify="left")
    for col in ("worker", "alive", "last heartbeat", "gen", "state", "in", "out", "in/s", "out/s"):
        workers.add_column(
            col, justify="right" if col in ("in", "out", "in/s", "out/s") else "left"
        )
    for w in s.workers:
        flags = [f for f, on in (("restoring", w.restoring), ("waiting", w.waiting)) if on] + [
            f"storing: {w.storing}" for _ in (1,) if w.storing
        ]
        flags += [f"stuck: {w.stuck}" for _ in (1,) if w.stuck]
        workers.add_row(
            w.worker,
            "[green]yes[/green]" if w.alive else "[red]no[/red]",
            _ago(w.age_s),
            str(w.generation),
            escape(", ".join(flags) or "running"),
            f"{w.records_in:,}",
            f"{w.records_out:,}",
            _rate(w.in_per_s),
            _rate(w.out_per_s),
        )
    parts.append(workers)
    subtasks = Table(title="subtasks (latest snapshot acked)", title_justify="left")
    for col in ("subtask", "checkpoint", "acked", "size", "alignment ms", "sync ms", "note"):
        subtasks.add_column(col)
    for t in sorted(s.subtasks, key=lambda t: task_order(t.subtask)):
        note = []
        if t.unaligned:
            note.append(f"unaligned, {t.in_flight} in flight")
        if t.behind:
            note.append("behind the latest checkpoint")
        if t.declined:
            note.append(f"declined: {t.declined}")
        subtasks.add_row(
            t.subtask,
            str(t.checkpoint),
            _ago(t.age_s),
            size_text(t.size),
            f"{t.alignment_ms:.1f}",
            f"{t.sync_ms:.1f}",
            escape("; ".join(note)),
        )
    parts.append(subtasks)
    c = s.latest_checkpoint
    line = (
        "no checkpoint completed"
        if c is None
        else f"latest checkpoint {c.checkpoint} (generation {c.generation}) completed "
        f"{_ago(c.age_s)}"
        + ("" if c.duration_s is None else f" in {c.duration_s:.2f}s")
        + ("" if c.size is None else f", {size_text(c.size)}")
    )
    pending = ", ".join(map(str, s.in_progress)) or "none"
    parts.append(
        Text(f"{line} · completed {s.completed}, aborted {s.aborted} · in progress: {pending}")
    )
    recoveries = Table(
        title=f"recoveries ({s.recoveries} rollbacks; newest last)", title_justify="left"
    )
    for col in ("time", "gen", "to checkpoint", "cause", "reason"):
        recoveries.add_column(col)
    for r in s.recent_recoveries:
        recoveries.add_row(
            _clock(r.time),
            str(r.generation),
            "start" if r.checkpoint is None else str(r.checkpoint),
            r.cause + (" (fresh)" if r.fresh else ""),
            escape(r.reason),
        )
    parts.append(recoveries)
    return parts
