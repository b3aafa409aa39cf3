"""`kstream checkpoints`: a job's checkpoint history as a table.

The history is decoded by `kstream.protocol.checkpoint_history` from the
job's control topic; this module only reads the topic and formats the rows.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from kstream.errors import ConfigurationError
from kstream.protocol.cuts import Cut
from kstream.tools.cli.console import out, say
from kstream.tools.cli.options import (
    NON_NEGATIVE,
    BootstrapOption,
    KafkaConfigOption,
    RequiredJobNameOption,
)

if TYPE_CHECKING:
    from kstream.protocol.messages import ControlMessage

__all__ = ["checkpoints_command"]


def checkpoints_command(
    job_name: RequiredJobNameOption,
    bootstrap_servers: BootstrapOption = None,
    kafka_config: KafkaConfigOption = None,
    checkpoint_id: Annotated[
        int | None,
        typer.Option(
            "--id",
            help="Show this checkpoint only, subtask by subtask: when each acked after "
            "the trigger, alignment, synchronous pause, size, recorded channel state, cut.",
            callback=NON_NEGATIVE,
        ),
    ] = None,
) -> None:
    """List a job's checkpoints: id, who started it, status, trigger time, duration,
    alignment, size, and how each subtask joined it (its cut: started, injection,
    or the marker of which upstream subtask); with --id, one checkpoint's subtasks."""
    from rich.table import Table

    from kstream.infra.admin import Admin
    from kstream.infra.cluster import bootstrap_servers as resolve
    from kstream.protocol.checkpoint_history import checkpoint_history
    from kstream.runtime.control import read_messages

    bootstrap = resolve(bootstrap_servers, say)
    Admin(bootstrap).check_reachable()
    history = read_messages(bootstrap, job_name)
    if not history:
        raise ConfigurationError(f"job {job_name!r} has no control topic: it never ran here")
    if checkpoint_id is not None:
        _one(job_name, history, checkpoint_id)
        return
    table = Table(title=f"checkpoints of {job_name}")
    # "by": the source subtask that started it (empty: the coordinator).
    # "cut on": per subtask that acked it, how it joined the snapshot (`Acked.cut_on`).
    columns = ("id", "gen", "by", "status", "triggered", "duration s", "alignment ms", "size")
    for col in (*columns, "cut on"):
        # A status stays readable ("completed") on an 80-column terminal.
        table.add_column(col, min_width=9 if col == "status" else None)
    for r in checkpoint_history(history):
        t = r.triggered_at
        table.add_row(
            str(r.checkpoint),
            "" if r.generation is None else str(r.generation),
            r.started_by,
            escape(r.label),
            "" if t is None else time.strftime("%H:%M:%S", time.localtime(t)),
            "" if r.duration_s is None else f"{r.duration_s:.3f}",
            "" if r.alignment_ms is None else f"{r.alignment_ms:.1f}",
            size_text(r.size),
            escape(cuts_text(r.cuts)),
        )
    out.print(table)


def _one(job_name: str, history: list[ControlMessage], checkpoint: int) -> None:
    """One checkpoint's subtasks as a table, under a line about the checkpoint."""
    from rich.table import Table

    from kstream.protocol.status import checkpoint_acks

    found = checkpoint_acks(history, checkpoint)
    if found is None:
        raise ConfigurationError(
            f"job {job_name!r}: no checkpoint {checkpoint} in its control topic "
            "(`kstream checkpoints` lists them; older ones may have been purged)"
        )
    r, rows = found
    t = r.triggered_at
    out.print(
        f"checkpoint {r.checkpoint} of {escape(job_name)}: {escape(r.label)}"
        + ("" if r.generation is None else f", generation {r.generation}")
        + (f", started by {r.started_by}" if r.started_by else "")
        + ("" if t is None else f", triggered {time.strftime('%H:%M:%S', time.localtime(t))}")
        + ("" if r.duration_s is None else f", {r.duration_s:.3f}s end to end")
        + ("" if r.size is None else f", {size_text(r.size)}"),
        highlight=False,
    )
    table = Table()
    # "acked after s": about when each subtask acked, after the trigger (an ack
    # has no time of its own: the newest time written before it).
    for col in ("subtask", "acked after s", "alignment ms", "sync ms", "size", "recorded", "cut"):
        table.add_column(col)
    for a in sorted(rows, key=lambda a: task_order(a.subtask)):
        cut = Cut.parse(a.cut_on)
        table.add_row(
            a.subtask,
            "" if a.after_s is None else f"{a.after_s:.3f}",
            "" if a.declined else f"{a.alignment_ms:.1f}",
            "" if a.declined else f"{a.sync_ms:.1f}",
            "" if a.declined else size_text(a.size),
            f"{a.in_flight} records (unaligned)" if a.unaligned else "",
            escape(f"declined: {a.declined}" if a.declined else "" if cut is None else str(cut)),
        )
    out.print(table)


def cuts_text(cuts: tuple[tuple[str, str], ...]) -> str:
    """``"s0-0 started, s1-0 injection, s2-0 marker from s0-0"``: how each subtask
    joined a snapshot, in subtask order (an ack of an older kstream says nothing)."""
    parts = []
    for task, encoded in sorted(cuts, key=lambda tc: task_order(tc[0])):
        cut = Cut.parse(encoded)
        if cut is not None:
            parts.append(f"{task} {cut}")
    return ", ".join(parts)


def task_order(task: str) -> tuple[int, int, str]:
    """``s<stage>-<index>`` in numeric order; anything else after."""
    stage, _, index = task.removeprefix("s").partition("-")
    if stage.isdigit() and index.isdigit():
        return int(stage), int(index), ""
    return 1 << 30, 0, task


def size_text(value: object) -> str:
    """A byte count in binary units (``"3 MiB"``); empty when the size is unknown."""
    if not isinstance(value, int):
        return ""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024:
            return f"{value} {unit}"
        value //= 1024
    return f"{value} TiB"
