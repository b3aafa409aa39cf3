"""A progress display for the audit: the current step and the Spark stages under way.

A daemon thread polls Spark's status tracker and mirrors every active stage as
a Rich progress bar (completed tasks of total), on stderr so that stdout stays
free for the verdict. Spark reports no progress events to Python, so polling is
the only way; it costs one small py4j call per interval.
"""

from __future__ import annotations

import threading
from types import TracebackType
from typing import TYPE_CHECKING

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

if TYPE_CHECKING:
    from pyspark import SparkContext

__all__ = ["StageProgress"]

#: Polling interval: fast enough to look live, slow enough to cost nothing.
POLL_INTERVAL_S = 0.25


class StageProgress:
    """Show `step` descriptions and Spark's active stages until the context exits.

    With ``enabled=False`` it only remembers the step, so callers need no branches.
    """

    def __init__(self, enabled: bool = True, console: Console | None = None) -> None:
        self._enabled = enabled
        self._progress = Progress(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console or Console(stderr=True),
            transient=True,
        )
        self._step = self._progress.add_task("starting", total=None)
        self._stages: dict[int, TaskID] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> StageProgress:
        if self._enabled:
            self._progress.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self._enabled:
            self._progress.stop()

    def step(self, description: str) -> None:
        """Name what the audit does now (shown above the stage bars)."""
        self._progress.update(self._step, description=description)

    def watch(self, context: SparkContext) -> None:
        """Start mirroring the stages of `context` (once the session exists)."""
        if not self._enabled or self._thread is not None:
            return
        self._thread = threading.Thread(
            target=self._poll, args=(context,), name="audit-progress", daemon=True
        )
        self._thread.start()

    def _poll(self, context: SparkContext) -> None:
        tracker = context.statusTracker()
        while not self._stop.wait(POLL_INTERVAL_S):
            try:
                active = set(tracker.getActiveStageIds())
                for stage_id in active:
                    info = tracker.getStageInfo(stage_id)
                    if info is None:
                        continue
                    task = self._stages.get(stage_id)
                    if task is None:
                        task = self._progress.add_task(f"  stage {stage_id}", total=info.numTasks)
                        self._stages[stage_id] = task
                    self._progress.update(
                        task, completed=info.numCompletedTasks, total=info.numTasks
                    )
                for stage_id in list(self._stages):
                    if stage_id not in active:
                        self._progress.remove_task(self._stages.pop(stage_id))
            except Exception:
                # The session is stopping (py4j connection closed): nothing left to show.
                return
