"""The dashboard's server: a control-topic tail on a thread and a read-only HTTP server.

`ControlTail` keeps one `ControlReader` reading the job's control topic on a
daemon thread and holds the newest `KEEP` messages. It waits for a topic that
does not exist yet (a job about to start) and, when the cluster fails it,
replaces its reader at the next offset: the page outlives the job's restarts
and the broker's.

`serve_ui` serves, on a `ThreadingHTTPServer` of its own thread: ``/`` the
page, ``/static/<file>`` its files, ``/api/view`` the view (recomputed when
messages arrived, or ages moved by a second). Anything else is 404; methods
other than GET and HEAD are refused by the standard handler (501).
"""

from __future__ import annotations

import errno
import json
import logging
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any

from kstream.errors import ConfigurationError, KStreamError
from kstream.infra.metrics import check_port
from kstream.protocol.dashboard import dashboard_view
from kstream.protocol.identity import JobIdentity
from kstream.protocol.messages import ControlMessage

__all__ = ["KEEP", "ControlTail", "Dashboard", "serve_ui"]

log = logging.getLogger("kstream.ui")

#: Messages the tail keeps (the newest): hours of a job's heartbeats and checkpoints.
KEEP = 100_000
#: Seconds between looks for a control topic that does not exist yet, or after a failure.
RETRY_S = 1.0
#: A view older than this is recomputed even if no message arrived (ages move).
FRESH_S = 1.0

_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}


class ControlTail:
    """The control messages of `job` read so far (the newest `keep`), read on a thread."""

    def __init__(self, bootstrap: str, job: str, keep: int = KEEP) -> None:
        self.bootstrap, self.job = bootstrap, job
        self._messages: deque[ControlMessage] = deque(maxlen=keep)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        #: Grows with every message read (the view's cache key).
        self.version = 0
        self._thread = threading.Thread(target=self._run, name="kstream-ui-tail", daemon=True)

    def start(self) -> ControlTail:
        self._thread.start()
        return self

    def messages(self) -> tuple[int, list[ControlMessage]]:
        """(version, the messages so far) at one instant."""
        with self._lock:
            return self.version, list(self._messages)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        from kstream.infra.admin import Admin
        from kstream.protocol.names import control_topic, history_group
        from kstream.runtime.control import ControlReader

        reader: ControlReader | None = None
        offset = 0
        while not self._stop.is_set():
            try:
                if reader is None:
                    if Admin(self.bootstrap).partitions(control_topic(self.job)) is None:
                        self._stop.wait(RETRY_S)  # the job has not created it yet
                        continue
                    reader = ControlReader(
                        self.bootstrap, self.job, group=history_group(self.job), start=offset
                    )
                got = reader.poll(0.5, 5000)
                if got:
                    offset = got[-1][0] + 1
                    with self._lock:
                        self._messages.extend(m for _, m in got)
                        self.version += len(got)
            except KStreamError as exc:  # the cluster failed the reader: a new one
                log.warning("dashboard: reading the control topic failed (%s); retrying", exc)
                if reader is not None:
                    reader.close()
                reader = None
                self._stop.wait(RETRY_S)
        if reader is not None:
            reader.close()


@dataclass
class _Views:
    """The latest view, recomputed on demand (`document`)."""

    tail: ControlTail
    identity: JobIdentity | None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _key: tuple[int, float] = (-1, 0.0)
    _body: bytes = b""

    def document(self) -> bytes:
        with self._lock:
            version, messages = self.tail.messages()
            made = time.monotonic()
            if version != self._key[0] or made - self._key[1] >= FRESH_S:
                # Ages compare the topic's stamps (other hosts' wall clocks) with ours.
                view = dashboard_view(self.tail.job, messages, time.time(), self.identity)
                self._body = json.dumps(view.to_json()).encode()
                self._key = (version, made)
            return self._body


def _static(name: str) -> bytes | None:
    """The static file `name` of the package (None: no such file)."""
    if "/" in name or name.startswith("."):
        return None
    item = resources.files("kstream.tools.ui").joinpath("static", name)
    return item.read_bytes() if item.is_file() else None


def _handler(views: _Views) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "kstream-ui"

        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path == "/api/view":
                self._send(HTTPStatus.OK, "application/json", views.document())
                return
            name = "index.html" if path == "/" else path.removeprefix("/static/")
            body = _static(name) if path == "/" or path.startswith("/static/") else None
            if body is None:
                self._send(HTTPStatus.NOT_FOUND, "text/plain", b"not found\n")
                return
            suffix = name[name.rfind(".") :]
            self._send(HTTPStatus.OK, _TYPES.get(suffix, "application/octet-stream"), body)

        def do_HEAD(self) -> None:
            self.do_GET()

        def _send(self, status: HTTPStatus, kind: str, body: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            log.debug("dashboard: " + format, *args)

    return Handler


@dataclass(frozen=True)
class Dashboard:
    """A running dashboard: ``http://{address}:{port}/``."""

    address: str
    port: int
    tail: ControlTail
    _server: ThreadingHTTPServer
    _thread: threading.Thread

    @property
    def url(self) -> str:
        host = "127.0.0.1" if self.address in ("", "0.0.0.0", "::") else self.address
        return f"http://{host}:{self.port}/"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self.tail.close()


def serve_ui(
    bootstrap: str,
    job: str,
    port: int,
    address: str = "127.0.0.1",
    identity: JobIdentity | None = None,
) -> Dashboard:
    """Serve the dashboard of `job` on `address`:`port` until `Dashboard.close`.

    `identity` (a runner's own job) draws the graph until a completion records
    one. A port out of range or that cannot be bound is one `ConfigurationError` line.
    """
    check_port(port, "--ui-port")
    tail = ControlTail(bootstrap, job)
    views = _Views(tail, identity)
    try:
        server = ThreadingHTTPServer((address, port), _handler(views))
    except OSError as exc:
        why = "is in use" if exc.errno == errno.EADDRINUSE else f"cannot be bound ({exc})"
        raise ConfigurationError(f"dashboard: port {port} on {address} {why}") from None
    server.daemon_threads = True
    tail.start()
    thread = threading.Thread(target=server.serve_forever, name="kstream-ui", daemon=True)
    thread.start()
    return Dashboard(address, server.server_address[1], tail, server, thread)
