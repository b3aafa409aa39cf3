"""The metrics endpoint: served over real HTTP, refused with one line on a bad port."""

from __future__ import annotations

import socket
import urllib.request
from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry, Gauge
from prometheus_client.parser import text_string_to_metric_families

from kstream.errors import ConfigurationError
from kstream.infra.metrics import check_free, serve


@pytest.fixture
def taken() -> Iterator[int]:
    """A port another socket listens on."""
    s = socket.socket()
    s.bind(("0.0.0.0", 0))
    s.listen()
    yield s.getsockname()[1]
    s.close()


def test_serves_the_registry_and_frees_the_port() -> None:
    reg = CollectorRegistry()
    Gauge("kstream_test_value", "A value.", registry=reg).set(3)
    server = serve(reg, _free_port(), "127.0.0.1")
    try:
        with urllib.request.urlopen(server.url, timeout=10) as r:
            text = r.read().decode()
    finally:
        server.close()
    fams = {f.name: f for f in text_string_to_metric_families(text)}
    assert fams["kstream_test_value"].samples[0].value == 3
    check_free(server.port, "127.0.0.1")  # closed: free again


@pytest.mark.parametrize("port", [0, -1, 65536, 70000])
def test_a_port_out_of_range_is_one_line(port: int) -> None:
    with pytest.raises(ConfigurationError, match=r"^--metrics-port must be in 1\.\.65535") as e:
        serve(CollectorRegistry(), port)
    assert "\n" not in str(e.value)


def test_a_port_in_use_is_one_line(taken: int) -> None:
    with pytest.raises(ConfigurationError, match=f"port {taken} on 0.0.0.0 is in use") as e:
        serve(CollectorRegistry(), taken, what="worker 1's metrics")
    assert str(e.value).startswith("worker 1's metrics: ")
    assert "\n" not in str(e.value)
    with pytest.raises(ConfigurationError, match="is in use"):
        check_free(taken)


def _free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port: int = s.getsockname()[1]
    s.close()
    return port
