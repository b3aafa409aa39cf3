"""Fixtures for checkpoints in an object store: one S3Proxy per session, a bucket per test.

Registered as a plugin by tests/conftest.py. S3Proxy is resolved with mvn the
first time (`kstream.infra.object_store`) and serves a directory of the session's
temporary space on a free port of 127.0.0.1; `bridge_object_store`, one per
module, serves the hosts of a `netns` bridge on its address.
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from netns import HostNet
from netns import free_port as free_port_on

from kstream.infra.object_store import ObjectStore
from kstream.runtime.checkpoint.objects import s3_client


def free_port() -> int:
    """A port of 127.0.0.1 nobody listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class Bucket:
    """A fresh bucket of `store`: its name, a client, and the URL of a prefix in it."""

    store: ObjectStore
    name: str
    client: Any

    def url(self, prefix: str = "chk") -> str:
        return f"s3://{self.name}/{prefix}"

    def listing(self, prefix: str = "") -> list[str]:
        pages = self.client.get_paginator("list_objects_v2").paginate(
            Bucket=self.name, Prefix=prefix
        )
        return sorted(o["Key"] for page in pages for o in page.get("Contents", []))


@pytest.fixture(scope="session")
def object_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ObjectStore]:
    """S3Proxy for the session; its credentials and endpoint are in the environment
    of the tests (and the processes they start) while it runs."""
    store = ObjectStore(tmp_path_factory.mktemp("s3proxy") / "data", free_port())
    store.start()
    saved = {k: os.environ.get(k) for k in store.env}
    os.environ.update(store.env)
    try:
        yield store
    finally:
        store.stop()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@pytest.fixture
def bucket(object_store: ObjectStore) -> Bucket:
    """A new, empty bucket of the session's store."""
    client = s3_client(object_store.endpoint)
    name = f"t-{uuid.uuid4().hex[:16]}"
    client.create_bucket(Bucket=name)
    return Bucket(object_store, name, client)


@pytest.fixture(scope="module")
def bridge_object_store(
    module_host_net: HostNet, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Bucket]:
    """S3Proxy of this module's own on the bridge address of `module_host_net`, with
    one bucket, so processes in its hosts store checkpoints there; its credentials
    are in the environment (the hosts' processes inherit it) while it runs."""
    address = module_host_net.address
    store = ObjectStore(
        tmp_path_factory.mktemp("bridge-s3") / "data", free_port_on(address), address
    )
    store.start()
    saved = {k: os.environ.get(k) for k in store.env}
    os.environ.update(store.env)
    try:
        client = s3_client(store.endpoint)
        client.create_bucket(Bucket="hosts")
        yield Bucket(store, "hosts", client)
    finally:
        store.stop()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
