"""Which Kafka cluster to use: the three ways, in order.

1. ``KSTREAM_BOOTSTRAP`` (or an explicit bootstrap) is set: use that cluster.
2. A Docker engine answers: start testcontainers' ``KafkaContainer`` (tests only).
3. Otherwise: the local broker of `kstream.infra.broker`, started on demand.

Commands (`kstream run`, `kstream demo`) use 1 or 3; the test suite uses all three.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from kstream.errors import ConfigurationError
from kstream.infra.broker import ensure_local_broker

__all__ = ["bootstrap_servers"]


def _quiet(_: str) -> None:
    """Default progress sink: say nothing."""


def bootstrap_servers(explicit: str | None = None, log: Callable[[str], None] = _quiet) -> str:
    """The bootstrap address to use: `explicit`, else ``KSTREAM_BOOTSTRAP``, else local.

    An explicit but empty address is refused (`ConfigurationError`): falling back
    to the local broker would run the job against a cluster nobody asked for.
    """
    if explicit is not None:
        if not explicit.strip():
            raise ConfigurationError(
                "--bootstrap-servers is empty: give host:port[,host:port...], or leave the "
                "option out to use KSTREAM_BOOTSTRAP or the local broker"
            )
        return explicit
    env = os.environ.get("KSTREAM_BOOTSTRAP")
    if env:
        return env
    return ensure_local_broker(log)
