"""A snapshot's manifest in an object store: the files it lists, with their sizes and
SHA-256, the shared table each one is (if any), and the attempt whose objects hold
the others (`kstream.runtime.checkpoint.objects` writes and follows it). Values and
their JSON form only: no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from kstream.errors import CheckpointError

__all__ = ["FileEntry", "Manifest", "build_manifest", "parse_manifest", "unreferenced"]

#: What an attempt token (`Manifest.attempt`) is made of: it is part of object keys.
_ATTEMPT_CHARS = frozenset("0123456789abcdef")


@dataclass(frozen=True, slots=True)
class FileEntry:
    """One file of a snapshot: its size, SHA-256, and the shared key of a table ("" if none)."""

    size: int
    sha256: str
    shared: str = ""


@dataclass(frozen=True, slots=True)
class Manifest:
    """A snapshot's manifest: its `files` (path in the snapshot -> entry) and the
    `attempt` whose objects hold those not shared ("": the layout before attempts)."""

    files: dict[str, FileEntry]
    attempt: str = ""


def build_manifest(files: Mapping[str, FileEntry], attempt: str = "") -> bytes:
    """The manifest listing `files` (path in the snapshot -> entry) of `attempt`, as JSON bytes."""
    out: dict[str, dict[str, Any]] = {}
    for rel, e in sorted(files.items()):
        entry: dict[str, Any] = {"size": e.size, "sha256": e.sha256}
        if e.shared:
            entry["shared"] = e.shared
        out[rel] = entry
    doc: dict[str, Any] = {"files": out}
    if attempt:
        doc["attempt"] = attempt
    return json.dumps(doc, sort_keys=True).encode()


def parse_manifest(data: bytes, where: str) -> Manifest:
    """What `build_manifest` wrote; `CheckpointError` naming `where` if malformed."""
    try:
        raw = json.loads(data)
        attempt = raw.get("attempt", "")
        if not (isinstance(attempt, str) and all(c in _ATTEMPT_CHARS for c in attempt)):
            raise ValueError(f"attempt {attempt!r}")
        files = {}
        for rel, e in raw["files"].items():
            shared = e.get("shared", "")
            if not (
                isinstance(rel, str)
                and type(e["size"]) is int
                and isinstance(e["sha256"], str)
                and isinstance(shared, str)
            ):
                raise TypeError(rel)
            if ".." in rel.split("/") or rel.startswith("/"):
                raise ValueError(f"path {rel!r}")
            if shared and not shared.startswith("shared/"):
                raise ValueError(f"shared key {shared!r}")
            files[rel] = FileEntry(e["size"], e["sha256"], shared)
        return Manifest(files, attempt)
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise CheckpointError(f"{where} is unreadable: {exc}") from None


def unreferenced(
    shared: Mapping[str, float], referenced: Collection[str], now: float, grace_s: float
) -> list[str]:
    """The objects the sweep deletes: of `shared` (key -> last modified, epoch seconds:
    the shared tables, and the objects of retained checkpoints' snapshots other than
    their manifests), those no retained manifest references (`referenced`) and older
    than `grace_s` at `now`. An attempt that lost to another's manifest is such."""
    return sorted(k for k, t in shared.items() if k not in referenced and now - t > grace_s)
