"""The checkpoint storage a run's configuration names (``--checkpoint-storage``).

Runner and workers build theirs here, from the same `RunConfig`: without the
option, `LocalCheckpointStorage` in ``<state-dir>/<job>/checkpoints`` (as
always); ``file:///path``, one in ``<path>/<job>``; ``s3://bucket/prefix``,
`ObjectCheckpointStorage` under ``<prefix>/<job>/``.
"""

from __future__ import annotations

from pathlib import Path

from kstream.errors import CheckpointStorageError
from kstream.runtime.checkpoint.objects import SWEEP_MARGIN_S, ObjectCheckpointStorage, s3_client
from kstream.runtime.checkpoint.storage import LocalCheckpointStorage, ManagedCheckpointStorage
from kstream.runtime.checkpoint.url import parse_storage_url
from kstream.runtime.config import RunConfig

__all__ = ["open_storage"]


def open_storage(config: RunConfig, job: str, *, probe: bool = True) -> ManagedCheckpointStorage:
    """Job `job`'s checkpoint storage as `config` names it.

    `probe`: check at once that it takes writes (`ManagedCheckpointStorage.probe`).
    Raises `CheckpointStorageError` (one line) for a bad URL or an unreachable
    or unwritable storage.
    """
    storage: ManagedCheckpointStorage
    if not config.checkpoint_storage:
        storage = _local(config.state_dir.resolve() / job / "checkpoints")
    else:
        url = parse_storage_url(config.checkpoint_storage)
        if url.scheme == "file":
            storage = _local(Path(url.path) / job)
        else:
            try:
                client = s3_client(config.s3_endpoint_url or None)
                # Short timeouts and no retries: a wrong endpoint fails in seconds.
                probe_client = s3_client(config.s3_endpoint_url or None, probe=True)
            except Exception as exc:  # botocore: a bad region, endpoint or profile
                raise CheckpointStorageError(
                    f"checkpoint storage {url} cannot be used: {type(exc).__name__}: {exc}"
                ) from None
            storage = ObjectCheckpointStorage(
                url,
                job,
                client,
                probe_client=probe_client,
                shared_grace_s=config.checkpoints.timeout + SWEEP_MARGIN_S,
            )
    if probe:
        storage.probe()
    return storage


def _local(root: Path) -> LocalCheckpointStorage:
    try:
        return LocalCheckpointStorage(root)
    except OSError as exc:
        raise CheckpointStorageError(
            f"checkpoint storage {root} cannot be created: {exc.strerror or exc}"
        ) from None
