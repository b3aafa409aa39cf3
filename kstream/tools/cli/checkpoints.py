"""`kstream checkpoints`: a job's checkpoint history as a table.

The history is decoded by `kstream.protocol.checkpoint_history` from the
job's control topic; this module only reads the topic and formats the rows.
"""

from __future__ import annotations

import time

from rich.markup import escape

from kstream.errors import ConfigurationError
from kstream.protocol.cuts import Cut
from kstream.tools.cli.console import out, say
from kstream.tools.cli.options import BootstrapOption, KafkaConfigOption, RequiredJobNameOption

__all__ = ["checkpoints_command"]


def checkpoints_command(
    job_name: RequiredJobNameOption,
    bootstrap_servers: BootstrapOption = None,
    kafka_config: KafkaConfigOption = None,
) -> None:
    """List a job's checkpoints: id, who started it, status, trigger time, duration,
    alignment, size, and how each subtask joined it (its cut: started, injection,
    or the marker of which upstream subtask)."""
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
            _size(r.size),
            escape(cuts_text(r.cuts)),
        )
    out.print(table)


def cuts_text(cuts: tuple[tuple[str, str], ...]) -> str:
    """``"s0-0 started, s1-0 injection, s2-0 marker from s0-0"``: how each subtask
    joined a snapshot, in subtask order (an ack of an older kstream says nothing)."""
    parts = []
    for task, encoded in sorted(cuts, key=lambda tc: _task_order(tc[0])):
        cut = Cut.parse(encoded)
        if cut is not None:
            parts.append(f"{task} {cut}")
    return ", ".join(parts)


def _task_order(task: str) -> tuple[int, int, str]:
    """``s<stage>-<index>`` in numeric order; anything else after."""
    stage, _, index = task.removeprefix("s").partition("-")
    if stage.isdigit() and index.isdigit():
        return int(stage), int(index), ""
    return 1 << 30, 0, task


def _size(value: object) -> str:
    """A byte count in binary units (``"3 MiB"``); empty when the size is unknown."""
    if not isinstance(value, int):
        return ""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024:
            return f"{value} {unit}"
        value //= 1024
    return f"{value} TiB"
