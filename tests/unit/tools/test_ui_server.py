"""The dashboard's HTTP side: the page, its files and the view, on a real socket.

The control-topic tail is not started (it needs a broker: tests/e2e/test_dashboard.py);
messages are handed to it as its thread would.
"""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from http.server import ThreadingHTTPServer

import pytest

from kstream.errors import ConfigurationError
from kstream.protocol.messages import Completed, Recovered, Triggered
from kstream.tools.ui.server import ControlTail, _handler, _Views, serve_ui

T0 = 1_700_000_000.0


@pytest.fixture
def site() -> Iterator[tuple[str, ControlTail]]:
    tail = ControlTail("127.0.0.1:1", "j", keep=3)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(_Views(tail, None)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", tail
    finally:
        server.shutdown()
        server.server_close()


def get(url: str, method: str = "GET") -> tuple[int, str, bytes]:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method=method), timeout=5) as r:
            return r.status, r.headers["Content-Type"], r.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers["Content-Type"] or "", b""


def test_page_and_its_files_are_served(site: tuple[str, ControlTail]) -> None:
    url, _ = site
    status, kind, body = get(url + "/")
    assert (status, kind) == (200, "text/html; charset=utf-8")
    assert b'src="/static/app.js"' in body
    for name, kind in (("app.js", "text/javascript"), ("style.css", "text/css")):
        status, got, body = get(f"{url}/static/{name}")
        assert status == 200
        assert got.startswith(kind)
        assert body


@pytest.mark.parametrize("path", ["/nope", "/static/../server.py", "/static/.hidden", "/static/"])
def test_anything_else_is_not_found(site: tuple[str, ControlTail], path: str) -> None:
    assert get(site[0] + path)[0] == 404


def test_read_only(site: tuple[str, ControlTail]) -> None:
    assert get(site[0] + "/api/view", "POST")[0] == 501


def test_view_follows_the_messages_and_keeps_the_newest(site: tuple[str, ControlTail]) -> None:
    url, tail = site
    doc = json.loads(get(url + "/api/view")[2])
    assert doc["status"]["job"] == "j"
    assert doc["checkpoints"] == []
    with tail._lock:  # as the tail's thread appends
        tail._messages.extend(
            [Recovered(1, None, "job started", T0), Triggered(2, 1, T0), Completed(2, 1, 0.5)]
        )
        tail.version += 3
    doc = json.loads(get(url + "/api/view")[2])
    assert [(r["checkpoint"], r["status"]) for r in doc["checkpoints"]] == [(2, "completed")]
    with tail._lock:
        tail._messages.append(Triggered(3, 1, T0 + 1))
        tail.version += 1
    doc = json.loads(get(url + "/api/view")[2])
    assert doc["status"]["messages"] == 3  # keep=3: the oldest went
    assert [f["checkpoint"] for f in doc["in_flight"]] == [3]


def test_bad_port_is_one_line() -> None:
    with pytest.raises(ConfigurationError, match=r"--ui-port must be in 1\.\.65535"):
        serve_ui("127.0.0.1:1", "j", 70000)
    taken = ThreadingHTTPServer(("127.0.0.1", 0), _handler(_Views(ControlTail("x", "j"), None)))
    try:
        with pytest.raises(ConfigurationError, match="is in use"):
            serve_ui("127.0.0.1:1", "j", taken.server_address[1])
    finally:
        taken.server_close()
