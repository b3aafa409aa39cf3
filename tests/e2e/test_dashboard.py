"""The web dashboard in a real browser: `kstream run --ui-port` on a real job and broker,
the page loaded in headless Chromium (Debian's, driven by Playwright) and read as a
person reads it.

The word count runs on two workers with unaligned checkpoints while its input
flows in; the page must show the graph with both stages, a completed checkpoint in
the history, an unaligned snapshot's recorded channel, and, after a worker is
SIGKILLed, the recovery with its cause. `kstream ui`, started on its own beside the
job, shows the same job. With ``KSTREAM_UI_SCREENSHOT=PATH`` the test
saves the page there (docs/images/dashboard.png is made so). Costs about 15 s.
"""

from __future__ import annotations

import os
import signal
import threading
import urllib.request
from pathlib import Path

import pytest
from test_cli_run import kstream, wait_for, worker_processes

from kstream.infra.admin import Admin
from kstream.protocol.names import channel_topic
from kstream.testing import Feeder, free_ports, unique_name

CHROMIUM = Path("/usr/bin/chromium")

pytestmark = [
    pytest.mark.broker,
    pytest.mark.e2e,
    pytest.mark.browser,
    # CI installs it and sets KSTREAM_REQUIRE_CHROMIUM: there the test runs or fails.
    pytest.mark.skipif(
        not CHROMIUM.exists() and not os.environ.get("KSTREAM_REQUIRE_CHROMIUM"),
        reason="needs Debian's Chromium at /usr/bin/chromium (apt-get install chromium)",
    ),
]

#: Input lines per second while the test runs: channel records in flight when
#: barriers pass, so unaligned snapshots record some.
RATE = 2000.0

#: Playwright's waits for what the page shows (ms): a checkpoint every half second,
#: a recovery within the liveness timeout's order.
SHOWN_MS = 45_000


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return bool(r.status == 200)
    except OSError:
        return False


def test_dashboard_shows_graph_checkpoints_and_a_recovery(bootstrap: str, tmp_path: Path) -> None:
    from playwright import sync_api  # the dev extra's

    expect = sync_api.expect
    admin = Admin(bootstrap)
    src, dst, name = unique_name("in"), unique_name("out"), unique_name("ui-job")
    admin.create_topics({src: 2, dst: 2})
    feeder = Feeder(
        bootstrap, src, [f"a b c{i % 7} d e f".encode() for i in range(200_000)], 2, RATE
    )
    feeding = threading.Event()

    def feed() -> None:
        while not feeding.wait(0.05):  # a pace, not a synchronisation
            feeder.feed()

    port = free_ports(2)
    proc = kstream(
        "run", "kstream.examples.wordcount:job", "-p", f"input={src}", "-p", f"output={dst}",
        "--bootstrap-servers", bootstrap, "--workers", "2", "--job-name", name,
        "--state-dir", str(tmp_path), "--checkpoint-interval", "0.5",
        "--alignment", "unaligned", "--ui-port", str(port),
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}/"
    ui = None
    threading.Thread(target=feed, daemon=True).start()
    try:
        wait_for(lambda: answers(url) or proc.poll() is not None, 60, "the dashboard to answer")
        assert proc.poll() is None, proc.communicate()[1]
        with sync_api.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True)
            try:
                page = browser.new_page(viewport={"width": 1400, "height": 1000})
                page.goto(url)
                expect(page.locator("#job")).to_have_text(name)
                expect(page.locator("#state")).to_have_text("running", timeout=SHOWN_MS)
                graph = page.get_by_role("img", name="job graph")
                expect(graph).to_contain_text("stage 0 \u00d7 2", timeout=SHOWN_MS)
                expect(graph).to_contain_text("stage 1 \u00d7 2")
                expect(graph).to_contain_text(f"source: kafka:{src}")
                history = page.locator("#checkpoints")
                expect(history.locator("td", has_text="completed").first).to_be_visible(
                    timeout=SHOWN_MS
                )
                expect(page.locator("#subtasks")).to_contain_text(
                    "in-flight records recorded", timeout=SHOWN_MS
                )
                # A recorded channel: the subtask of stage 1, the channel from stage 0.
                recorded = page.locator("#recorded tr", has_text=channel_topic(name, 1))
                expect(recorded.first).to_contain_text("s1-", timeout=SHOWN_MS)
                expect(page.locator("#workers")).to_contain_text("w1")
                expect(page.locator("#recoveries")).to_contain_text("start")

                os.kill(worker_processes(name)[0], signal.SIGKILL)
                expect(page.locator("#recoveries")).to_contain_text("worker_lost", timeout=SHOWN_MS)
                expect(page.locator("#headline")).to_contain_text("recoveries 1", timeout=SHOWN_MS)
                # The job goes on: a checkpoint of the new generation completes.
                expect(page.locator("#headline")).to_contain_text("generation 2")
                rows = history.locator("tr", has_text="completed")
                expect(rows.first).to_be_visible()
                # `kstream ui` from "another machine": the same job, from its topic.
                ui = kstream(
                    "ui", "--job-name", name, "--bootstrap-servers", bootstrap,
                    "--port", str(port + 1),
                )  # fmt: skip
                other = browser.new_page()
                wait_for(lambda: answers(f"http://127.0.0.1:{port + 1}/"), 30, "kstream ui")
                other.goto(f"http://127.0.0.1:{port + 1}/")
                expect(other.get_by_role("img", name="job graph")).to_contain_text(
                    "stage 1 \u00d7 2", timeout=SHOWN_MS
                )
                expect(other.locator("#recoveries")).to_contain_text("worker_lost")
                shot = os.environ.get("KSTREAM_UI_SCREENSHOT")
                if shot:
                    page.wait_for_timeout(3000)  # a few more checkpoints in the plot
                    page.screenshot(path=shot, full_page=True)
            finally:
                browser.close()
    finally:
        feeding.set()
        if ui is not None:
            ui.send_signal(signal.SIGINT)
            ui.communicate(timeout=30)
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 0, stderr
    assert f"dashboard: {url}" in stderr
    assert ui is not None
    assert ui.returncode == 0
