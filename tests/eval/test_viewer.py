"""The viewer's JSON API over a real loopback server, and `trajforge view` as a real process."""

import subprocess
import sys
import threading
from collections import Counter

import httpx
import pytest

from trajforge.eval.catalog import Catalog
from trajforge.eval.viewer import make_server
from trajforge.store import TrajectoryStore

from tests.eval.conftest import XSS


@pytest.fixture(scope="module")
def client(run_dir):
    server = make_server(run_dir.root / "eval_store", port=0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    with httpx.Client(base_url=server.url, timeout=30) as c:
        yield c
    server.shutdown()
    server.server_close()


def test_facets_count_the_store(client, run_dir):
    data = client.get("/api/facets").json()
    assert data["total"] == 24
    expect = Counter(t.outcome.fail_reason for t in run_dir.episodes if t.outcome.fail_reason)
    assert {f["value"]: f["n"] for f in data["columns"]["fail_reason"]} == expect
    assert {f["value"]: f["n"] for f in data["columns"]["policy"]} == {"base": 12, "tuned": 12}


@pytest.mark.parametrize("params", [{}, {"policy": "tuned"}, {"outcome_tier": "failed", "tier": "easy"},
                                    {"fail_reason": "wrong_answer", "policy": "base"}, {"task_id": "in_city"},
                                    {"split": "heldout"}, {"env": "sql", "policy": ""}])
def test_filters_match_the_episodes(client, run_dir, params):
    def keep(t):
        row = {"policy": t.policy, "outcome_tier": t.outcome.tier, "tier": t.tier, "fail_reason": t.outcome.fail_reason,
               "split": t.split, "env": t.env}
        return all((v in t.task_id) if k == "task_id" else (not v or row[k] == v) for k, v in params.items())

    expect = sorted((t.task_id, t.policy) for t in run_dir.episodes if keep(t))
    data = client.get("/api/episodes", params={**params, "per_page": 500}).json()
    assert data["total"] == len(expect)
    assert [(r["task_id"], r["policy"]) for r in data["rows"]] == expect


def test_pages_cover_everything_once(client):
    seen = []
    for page in (1, 2, 3, 4, 5):
        data = client.get("/api/episodes", params={"page": page, "per_page": 5}).json()
        assert data["total"] == 24 and len(data["rows"]) == (5 if page < 5 else 4)
        seen += [(r["task_id"], r["policy"]) for r in data["rows"]]
    assert len(set(seen)) == 24
    assert client.get("/api/episodes", params={"page": 6, "per_page": 5}).json()["rows"] == []


def test_episode_with_siblings_and_escaped_html(client, run_dir):
    task = run_dir.improved[0]
    data = client.get("/api/episode", params={"task_id": task, "policy": "base", "sample": 0}).json()
    assert data["episode"]["outcome_tier"] == "failed" and data["episode"]["task_id"] == task
    assert [(s["policy"], s["outcome_tier"]) for s in data["siblings"]] == [("base", "failed"), ("tuned", "success")]
    assert XSS not in data["html"] and "&lt;script&gt;window.__xss=1" in data["html"]


@pytest.mark.parametrize("path,params,status,message", [
    ("/api/episodes", {"polcy": "x"}, 400, "unknown parameter 'polcy'"),
    ("/api/episodes", {"page": "two"}, 400, "'page' must be an integer, got 'two'"),
    ("/api/episodes", {"page": "0"}, 400, "page must be >= 1"),
    ("/api/episodes", {"per_page": "100000"}, 400, "per_page must be between 1 and 500"),
    ("/api/episode", {"policy": "base"}, 400, "missing parameter 'task_id'"),
    ("/api/episode", {"task_id": "nope", "policy": "base"}, 404, "no episode task_id='nope'"),
    ("/api/nothing", {}, 404, "no API endpoint '/api/nothing'"),
    ("/../etc/passwd", {}, 404, "not found"),
])
def test_bad_requests_say_what_was_wrong(client, path, params, status, message):
    res = client.get(path, params=params)
    assert res.status_code == status and message in res.json()["error"]


def test_page_assets_and_headers(client):
    res = client.get("/")
    assert res.status_code == 200 and '<script src="/viewer.js" defer></script>' in res.text
    assert "script-src 'self'" in res.headers["content-security-policy"]
    assert res.headers["x-content-type-options"] == "nosniff"
    for asset, ctype in (("/viewer.js", "text/javascript"), ("/viewer.css", "text/css"), ("/conversation.css", "text/css")):
        r = client.get(asset)
        assert r.status_code == 200 and r.headers["content-type"].startswith(ctype) and len(r.text) > 500


def test_foreign_host_header_is_refused(client):
    # A page on another origin reaching the loopback port through DNS rebinding sends its own Host.
    res = client.get("/api/facets", headers={"Host": "attacker.example:80"})
    assert res.status_code == 403 and "not this loopback viewer" in res.json()["error"]


def test_catalog_follows_a_growing_store(run_dir, tmp_path):
    store = TrajectoryStore(tmp_path)
    for t in run_dir.episodes[:3]:
        store.append(t)
    cat = Catalog(tmp_path, recheck_s=0)
    assert cat.facets()["total"] == 3
    store.append(run_dir.episodes[3])
    assert cat.page({})["total"] == 4
    t = run_dir.episodes[3]
    assert cat.episode(t.task_id, t.policy, t.sample) == t
    with open(store.path, "a") as f:
        f.write('{"task_id": "torn", "sam')
    assert cat.page({})["total"] == 4


def test_view_command_serves_until_stopped(run_dir):
    proc = subprocess.Popen([sys.executable, "-m", "trajforge.cli.main", "view", str(run_dir.root / "eval_store"),
                             "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    watchdog = threading.Timer(60, proc.kill)  # a server that never prints must not hang the suite
    watchdog.start()
    try:
        line = proc.stdout.readline()
        assert "viewing" in line, line + proc.stdout.read() if proc.poll() is not None else line
        url = line.split(" at ")[1].split()[0]
        assert url.startswith("http://127.0.0.1:")
        assert httpx.get(url + "api/facets", timeout=30).json()["total"] == 24
    finally:
        watchdog.cancel()
        proc.terminate()
        proc.wait(timeout=30)


def test_view_command_points_at_stores_below_a_run_directory(run_dir):
    from typer.testing import CliRunner

    from trajforge.cli.main import app

    res = CliRunner().invoke(app, ["view", str(run_dir.root)])
    assert res.exit_code == 2 and "holds no trajectory shards" in res.output
    assert "eval_store" in res.output and "train_store" in res.output
    res = CliRunner().invoke(app, ["view", str(run_dir.root / "nope")])
    assert res.exit_code == 2 and "does not exist" in res.output


def test_catalog_follows_a_rewritten_store(run_dir, tmp_path):
    """``trajforge grade`` rewrites the store between two looks at it: the old offsets point into
    other records, which showed another episode or a torn piece of one (422)."""
    store = TrajectoryStore(tmp_path)
    for t in run_dir.episodes[:6]:
        store.append(t)
    cat = Catalog(tmp_path, recheck_s=3600)  # no periodic look in this test
    store.rewrite(list(reversed(run_dir.episodes[:6])))
    for t in run_dir.episodes[:6]:
        assert cat.episode(t.task_id, t.policy, t.sample) == t
