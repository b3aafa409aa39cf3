"""Where checkpoints are stored, as a URL (``--checkpoint-storage``).

``file:///abs/path``: a local (or shared, mounted) directory; a job's
checkpoints are in ``<path>/<job>/chk-<n>/``. Without the option they are in
``<state-dir>/<job>/checkpoints/chk-<n>/`` as they always were.

``s3://bucket/prefix``: an S3 bucket (or an S3-compatible store, with
``--s3-endpoint-url`` or ``AWS_ENDPOINT_URL``); a job's checkpoints are under
``<prefix>/<job>/`` (`kstream.runtime.checkpoint.objects`). The prefix may be empty.

The URL is parsed once, into a `StorageURL`; a bad one is refused with one line
(`CheckpointStorageError`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Literal
from urllib.parse import unquote, urlsplit

from kstream.errors import CheckpointStorageError

__all__ = ["StorageURL", "parse_storage_url"]

#: S3's bucket naming rules (3-63 of lower-case letters, digits, dots and hyphens).
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9]$")


@dataclass(frozen=True, slots=True)
class StorageURL:
    """A parsed checkpoint-storage URL.

    `scheme` ``file``: `path` is an absolute directory. `scheme` ``s3``: `bucket`
    names the bucket and `path` the key prefix, without leading or trailing
    slashes ("" for the bucket's root).
    """

    scheme: Literal["file", "s3"]
    path: str
    bucket: str = ""

    def __str__(self) -> str:
        if self.scheme == "file":
            return f"file://{self.path}"
        return f"s3://{self.bucket}/{self.path}" if self.path else f"s3://{self.bucket}"

    def job_prefix(self, job: str) -> str:
        """The key prefix of job `job`'s objects (s3), ending in a slash."""
        return f"{self.path}/{job}/" if self.path else f"{job}/"


def parse_storage_url(text: str) -> StorageURL:
    """The `StorageURL` `text` names; `CheckpointStorageError` (one line) if it names none.

    Refused: another scheme, a relative or empty file path, a file URL naming a
    host, an s3 URL without a valid bucket name, a query or fragment, and
    ``.``/``..`` segments or empty segments (``a//b``) in a prefix.
    """
    where = f"--checkpoint-storage {text!r}"
    parts = urlsplit(text)
    if parts.query or parts.fragment:
        raise CheckpointStorageError(f"{where}: a storage URL has no query or fragment")
    if parts.scheme == "file":
        if parts.netloc not in ("", "localhost"):
            raise CheckpointStorageError(
                f"{where}: a file URL names no host (file:///absolute/path)"
            )
        path = unquote(parts.path)
        if not path.startswith("/"):
            raise CheckpointStorageError(f"{where}: the path must be absolute (file:///abs/path)")
        return StorageURL("file", str(PurePosixPath(path)))
    if parts.scheme == "s3":
        bucket = parts.netloc
        if not _BUCKET.match(bucket) or ".." in bucket:
            raise CheckpointStorageError(
                f"{where}: {bucket!r} is not an S3 bucket name (3-63 characters:"
                " lower-case letters, digits, dots and hyphens)"
            )
        prefix = unquote(parts.path).strip("/")
        segments = prefix.split("/") if prefix else []
        if any(s in ("", ".", "..") for s in segments):
            raise CheckpointStorageError(f"{where}: the prefix has an empty, '.' or '..' segment")
        return StorageURL("s3", prefix, bucket)
    raise CheckpointStorageError(
        f"{where}: not a storage URL (file:///abs/path or s3://bucket/prefix)"
    )
