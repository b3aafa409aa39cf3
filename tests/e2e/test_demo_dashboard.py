"""The word-count demo with its dashboard and metrics: what a user opens while the
demo kills workers, and after it finished (the page stays up until Ctrl-C)."""

from __future__ import annotations

import json
import queue
import signal
import threading
import time
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families
from test_cli_run import kstream

from kstream.testing import free_ports

pytestmark = [pytest.mark.broker, pytest.mark.e2e]


def get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as response:
        body: bytes = response.read()
    return body.decode()


def test_the_demo_serves_its_dashboard_and_metrics_until_ctrl_c(bootstrap: str) -> None:
    ui_port = free_ports(1)
    metrics_port = free_ports(3)  # the coordinator's, then one per worker
    proc = kstream(
        "demo", "wordcount", "--lines", "4000", "--workers", "2", "--kill", "1", "--no-audit",
        "--bootstrap-servers", bootstrap,
        "--ui-port", str(ui_port), "--metrics-port", str(metrics_port),
    )  # fmt: skip
    lines: queue.Queue[str | None] = queue.Queue()
    assert proc.stderr is not None
    stderr = proc.stderr

    def read() -> None:
        for line in stderr:
            lines.put(line)
        lines.put(None)  # the demo closed its output: it exited

    threading.Thread(target=read, daemon=True).start()
    said: list[str] = []
    try:
        deadline = time.monotonic() + 180
        while not any("stays up" in line for line in said):
            try:
                line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                line = None
            if line is not None:
                said.append(line)
            else:
                state = "running" if proc.poll() is None else f"exited {proc.returncode}"
                pytest.fail(
                    f"the demo ({state}) did not say its page stays up within 180 s; "
                    "it said:\n" + "".join(said[-60:])
                )
        assert any(f"dashboard: http://127.0.0.1:{ui_port}/" in line for line in said), said
        # The page the user opens, and the data it draws.
        assert "<html" in get(f"http://127.0.0.1:{ui_port}/").lower()
        view = json.loads(get(f"http://127.0.0.1:{ui_port}/api/view"))
        status = view["status"]
        assert status["completed"] > 0, status
        assert status["recoveries"] == 1, status
        causes = [r["cause"] for r in status["recent_recoveries"]]
        assert causes == ["start", "worker_lost"], causes
        assert [s["index"] for s in view["graph"]["stages"]] == [0, 1], view["graph"]
        # The coordinator's metrics agree with the page.
        text = get(f"http://127.0.0.1:{metrics_port}/metrics")
        samples = {
            (s.name, s.labels.get("cause", "")): s.value
            for fam in text_string_to_metric_families(text)
            for s in fam.samples
        }
        assert samples["kstream_recoveries_total", "worker_lost"] == 1
        assert samples["kstream_checkpoints_completed_total", ""] == status["completed"]
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
    assert proc.returncode == 0, "".join(said[-20:])
