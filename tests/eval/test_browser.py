"""The viewer page and the report in a real headless Chromium (CDP over a pipe; see tests/browser.py).

Screenshots go to ``$TRAJFORGE_TEST_ARTIFACTS`` when set (CI uploads it), else to pytest's tmp dir.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import threading
from pathlib import Path

import pytest

from tests.browser import Browser
from tests.conftest import require_system
from tests.eval.conftest import XSS
from trajforge.eval.report import write_report
from trajforge.eval.viewer import make_server

ROWS = "document.querySelectorAll('#episodes tbody tr')"


@pytest.fixture
def artifacts(tmp_path) -> Path:
    root = os.environ.get("TRAJFORGE_TEST_ARTIFACTS")
    return Path(root) if root else tmp_path


@pytest.fixture
def browser():
    with Browser(require_system("chromium", "chromium")) as b:
        yield b


@pytest.fixture
def viewer(run_dir):
    server = make_server(run_dir.root / "eval_store", port=0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def _version(b: Browser, name: str) -> int:
    return int(b.evaluate(f"document.body.dataset.{name}"))


def _wait_version(b: Browser, name: str, after: int) -> None:
    b.wait_for(f"Number(document.body.dataset.{name}) > {after}")


def _list(b: Browser) -> list[dict]:
    return b.evaluate(f"Array.from({ROWS}, tr => ({{task: tr.dataset.taskId, policy: tr.dataset.policy, "
                      f"outcome: tr.children[4].textContent, reason: tr.children[5].textContent}}))")


def test_viewer_filters_opens_and_compares_episodes(browser, viewer, run_dir, artifacts):
    b = browser
    b.goto(viewer.url)
    b.wait_for("Number(document.body.dataset.listVersion) >= 1")
    rows = _list(b)
    assert len(rows) == len(run_dir.episodes) == 24
    assert "24 episodes" in b.evaluate("document.getElementById('page-info').textContent")

    # Filter in the page: policy, then fail reason; the list must follow.
    v = _version(b, "listVersion")
    b.evaluate("(() => { const s = document.getElementById('f-policy'); s.value = 'base'; "
               "s.dispatchEvent(new Event('change')); })()")
    _wait_version(b, "listVersion", v)
    rows = _list(b)
    assert len(rows) == 12 and {r["policy"] for r in rows} == {"base"}
    v = _version(b, "listVersion")
    b.evaluate("(() => { const s = document.getElementById('f-fail_reason'); s.value = 'no_call'; "
               "s.dispatchEvent(new Event('change')); })()")
    _wait_version(b, "listVersion", v)
    rows = _list(b)
    assert [r["task"] for r in rows] == [run_dir.improved[0]] and rows[0]["reason"] == "no_call"

    # Open it: the conversation renders, and the <script> payload in the model's text stays text.
    v = _version(b, "openVersion")
    b.click("#episodes tbody tr")
    _wait_version(b, "openVersion", v)
    left = "document.querySelector('#pane-left .conversation')"
    assert b.evaluate(f"{left}.querySelectorAll('.turn-head').length") >= 1
    assert XSS in b.evaluate(f"{left}.querySelector('.raw-text').textContent")
    assert b.evaluate(f"{left}.querySelector('.errors').textContent").count("no_call") >= 1
    assert b.evaluate("window.__xss === undefined && document.querySelectorAll('script').length === 1 "
                      "&& !document.querySelector('#panes img')")

    # Side by side: the tuned episode of the same task, with its tool calls, results and rewards.
    v = _version(b, "openVersion")
    b.click("#pane-left button.compare[data-policy='tuned']")
    _wait_version(b, "openVersion", v)
    right = "document.querySelector('#pane-right .conversation')"
    assert b.evaluate("document.getElementById('panes').classList.contains('two')")
    assert b.evaluate(f"{right}.querySelector('.ep-title').textContent").count("tuned") == 1
    assert b.evaluate(f"{right}.querySelectorAll('.call').length") >= 2
    assert b.evaluate(f"{right}.querySelectorAll('.msg.tool.ok').length") >= 2
    assert "submit_answer" in b.evaluate(f"{right}.textContent")
    assert b.evaluate(f"{right}.querySelector('table.rewards') !== null")

    # Task-id search (typed, debounced) and clearing the filters.
    v = _version(b, "listVersion")
    b.evaluate("document.getElementById('reset').click()")
    _wait_version(b, "listVersion", v)
    assert len(_list(b)) == 24
    v = _version(b, "listVersion")
    needle = run_dir.regressed[0].removeprefix("sql-")  # a substring of one id
    b.evaluate(f"(() => {{ const i = document.getElementById('f-task_id'); i.value = {json.dumps(needle)}; "
               "i.dispatchEvent(new Event('input')); })()")
    _wait_version(b, "listVersion", v)
    assert {r["task"] for r in _list(b)} == {run_dir.regressed[0]}

    shot = b.screenshot(artifacts / "viewer.png")
    assert shot.stat().st_size > 10_000
    assert b.problems() == []


def test_viewer_reports_api_errors_in_the_page(browser, viewer):
    b = browser
    b.goto(viewer.url)
    b.wait_for("Number(document.body.dataset.listVersion) >= 1")
    v = _version(b, "openVersion")
    b.evaluate("openEpisode('no-such-task', 'base', 0, 'left')")
    _wait_version(b, "openVersion", v)
    status = b.evaluate("document.getElementById('status').textContent")
    assert "no episode task_id='no-such-task'" in status
    assert [p for p in b.problems() if "404" not in p] == []  # the failed fetch is the only complaint


def test_report_loads_clean_with_its_images(browser, run_dir, artifacts, tmp_path):
    out = write_report(run_dir.root, tmp_path / "report.html")
    b = browser
    b.goto(out.as_uri())
    images = b.evaluate("Array.from(document.images, i => [i.complete, i.naturalWidth, i.alt])")
    assert [alt for _, _, alt in images] == ["completion by tier", "completion by environment", "fail reasons",
                                             "reward components", "learning curves train/sft/curves.jsonl"]
    assert all(ok and width > 300 for ok, width, _ in images), images
    assert b.evaluate("document.querySelectorAll('a[href^=\"#flip-\"]').length") == 10
    # Every in-page link lands on an element; the flipped pairs render side by side.
    assert b.evaluate("Array.from(document.querySelectorAll('a[href^=\"#\"]'))"
                      ".every(a => document.getElementById(a.getAttribute('href').slice(1)))")
    assert b.evaluate("document.querySelectorAll('.side-by-side > .episode').length") == 20
    assert b.evaluate("window.__xss === undefined && document.scripts.length === 0")
    b.screenshot(artifacts / "report.png")
    assert b.problems() == []


def test_the_browser_leaves_nothing_in_the_temp_folder(monkeypatch):
    # Every suite run used to leave one org.chromium.Chromium.* folder per browser in /tmp. A short
    # temp folder of its own (not tmp_path): a unix socket's path must stay under 108 bytes.
    tmp = Path(tempfile.mkdtemp(prefix="tfb-"))
    monkeypatch.setenv("TMPDIR", str(tmp))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    try:
        with Browser(require_system("chromium", "chromium")) as b:
            b.goto("about:blank")
            assert any(tmp.iterdir())  # its profile
        assert sorted(p.name for p in tmp.iterdir()) == []
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
