"""What a campaign's job holds over time: worker memory and disk, sampled from outside.

A long campaign must show that nothing grows without bound: the workers'
resident memory (``VmRSS`` of each worker process, from ``/proc``: summed and
the largest) and the disk the job uses (blocks allocated under the broker's
data directory, where channels, the control topic and commit markers live,
and under the job's checkpoint directory). Sampled by the campaign every
`SAMPLE_EVERY_S`; the report keeps every sample and draws them
(`kstream.tools.chaos.report`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

__all__ = ["SAMPLE_EVERY_S", "ResourceSample", "disk_bytes", "rss_bytes", "sample"]

#: Seconds between samples: a few hundred points in an hour, each a /proc read per
#: worker and a walk of two directories.
SAMPLE_EVERY_S = 10.0


@dataclass(frozen=True, slots=True)
class ResourceSample:
    """One sample, `at` seconds after the campaign started; sizes in bytes."""

    at: float
    workers: int
    rss_sum: int
    rss_max: int
    broker_disk: int
    checkpoint_disk: int
    #: The part of `broker_disk` in the job's internal topics (channels, control,
    #: commit markers): what purging keeps bounded; the rest is input and output.
    internal_disk: int = 0


def rss_bytes(pid: int) -> int | None:
    """The resident set size of process `pid` (None: gone, or no ``/proc``)."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024  # kB
    except (OSError, ValueError, IndexError):
        return None
    return None


def disk_bytes(root: Path) -> int:
    """Disk used by the files under `root` (0 if absent); files vanishing meanwhile are skipped.

    Blocks allocated, not apparent sizes: Kafka preallocates each segment's
    index files (10 MB, sparse), which would count gigabytes never written.
    """
    total = 0
    for folder, _, files in os.walk(root):
        for name in files:
            try:
                total += os.lstat(os.path.join(folder, name)).st_blocks * 512
            except OSError:
                continue  # deleted while walking (a segment, a checkpoint being swept)
    return total


def sample(
    at: float, workers: Iterable[int], broker_dir: Path, checkpoints: Path, internal: str = ""
) -> ResourceSample:
    """Sample the worker processes `workers` and the two directories now; `internal`
    is the prefix of the job's internal topics (Kafka names a partition's directory
    ``<topic>-<partition>``)."""
    sizes = [r for r in (rss_bytes(pid) for pid in workers) if r is not None]
    return ResourceSample(
        at=round(at, 1),
        workers=len(sizes),
        rss_sum=sum(sizes),
        rss_max=max(sizes, default=0),
        broker_disk=disk_bytes(broker_dir),
        checkpoint_disk=disk_bytes(checkpoints),
        internal_disk=sum(
            disk_bytes(d) for d in _entries(broker_dir) if internal and d.name.startswith(internal)
        ),
    )


def _entries(folder: Path) -> list[Path]:
    try:
        return list(folder.iterdir())
    except OSError:
        return []
