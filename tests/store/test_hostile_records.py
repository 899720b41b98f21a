"""Readers keep serving past unreadable records, and hostile import files get clear errors.

A real store of executed SQL episodes gets the lines a crash, a bug or a hostile writer can leave:
a 50 MB record, records nested far past any parser's depth, invalid UTF-8, a lone surrogate escape,
an integer past the int-string limit, a torn line, a JSON array. ``TrajectoryStore``, ``query``
(DuckDB), ``trajforge query``, the viewer's catalog and its HTTP API must each answer every good
episode, skip or report the bad lines, and do so within a time budget.
"""

from __future__ import annotations

import json
import threading
import time

import httpx
import pytest
from typer.testing import CliRunner

from trajforge.cli.main import app
from trajforge.eval.catalog import MAX_EPISODE_BYTES
from trajforge.eval.rundir import find_shards
from trajforge.eval.viewer import make_server
from trajforge.grade import graded
from trajforge.harness import run_episodes
from trajforge.policies.expert import ExpertPolicy
from trajforge.store import TrajectoryStore
from trajforge.store import export as ex
from trajforge.store.query import connect, query, unreadable
from trajforge.tasks import synthesize

BUDGET_S = 20.0
"""Most seconds one reader may take over the hostile store (50 MB of it; 2 busy cores)."""
DEEP = 100_000
HUGE = 50 * 1024 * 1024


@pytest.fixture(scope="module")
def good():
    pool = synthesize("sql", 6, seed=0).tasks
    return [graded(t) for t in run_episodes(pool, ExpertPolicy())]


def _line(traj, **changes) -> dict:
    return {**json.loads(traj.model_dump_json(exclude_none=True)), **changes}


@pytest.fixture(scope="module")
def hostile(tmp_path_factory, good):
    """A store whose shard-0 interleaves the good episodes with hostile lines; shard-1 starts with
    one (a reader that looks only at a shard's first line must not drop the whole shard).

    Readable by every reader: the 50 MB record ("huge"). Unreadable for ``TrajectoryStore``: the
    deep, surrogate, huge-int, torn and array lines. DuckDB reads deep and huge-int records (it has
    no depth limit; it reads an overlong integer as NULL) and skips the rest."""
    root = tmp_path_factory.mktemp("hostile-store")
    template = _line(good[0])
    huge = _line(good[0], task_id="huge", messages=template["messages"] + [
        {"role": "user", "content": "x" * HUGE}])
    deep_args = json.dumps(_line(good[0], task_id="deep"))[:-1] + ', "junk": ' + "[" * DEEP + "]" * DEEP + "}"
    bad = {
        "huge": json.dumps(huge).encode(),
        "deep": deep_args.encode(),
        "badutf8": json.dumps(_line(good[0], task_id="badutf8")).encode().replace(b"badutf8", b"bad\xff\xfe"),
        "surrogate": json.dumps(_line(good[0], task_id="surrogate-")).encode().replace(b"surrogate-",
                                                                                      b"surrogate\\ud800"),
        "hugeint": json.dumps(_line(good[0], task_id="hugeint")).encode().replace(
            b'"sample": 0', b'"sample": ' + b"9" * 5000, 1),
        "torn": json.dumps(_line(good[0], task_id="torn")).encode()[:300],
        "array": b"[1, 2, 3]",
    }
    good_lines = [g.model_dump_json(exclude_none=True).encode() for g in good]
    shard0 = [good_lines[0], bad["huge"], good_lines[1], bad["deep"], bad["badutf8"], good_lines[2],
              bad["surrogate"], bad["hugeint"], bad["torn"], good_lines[3]]
    shard1 = [bad["deep"], bad["array"], good_lines[4], good_lines[5]]
    (root / "shard-0.jsonl").write_bytes(b"\n".join(shard0) + b"\n")
    (root / "shard-1.jsonl").write_bytes(b"\n".join(shard1) + b"\n")
    return root


def timed(fn, *args):
    started = time.monotonic()
    out = fn(*args)
    took = time.monotonic() - started
    assert took < BUDGET_S, f"{fn.__name__} took {took:.1f} s"
    return out


def test_the_store_reader_skips_and_reports_unreadable_lines(hostile, good):
    st = TrajectoryStore(hostile)
    read = timed(st.read)
    ids = {t.task_id for t in read}
    assert {g.task_id for g in good} <= ids and "huge" in ids
    assert "deep" not in ids and not any("surrogate" in i or i == "hugeint" or i == "torn" for i in ids)
    assert sorted(st.torn) == sorted(["shard-0.jsonl:4", "shard-0.jsonl:7", "shard-0.jsonl:8",
                                      "shard-0.jsonl:9", "shard-1.jsonl:1", "shard-1.jsonl:2"])
    # What it yields can be written again: exporting it never meets a lone surrogate.
    for t in read:
        t.model_dump_json().encode("utf-8")


def test_query_answers_every_good_episode_and_counts_what_it_skipped(hostile, good):
    rows = timed(query, hostile, "SELECT task_id, turns FROM episodes ORDER BY task_id")
    ids = [r["task_id"] for r in rows]
    assert {g.task_id for g in good} <= set(ids) and "huge" in ids
    con = connect(hostile)
    try:
        # badutf8, surrogate, torn (shard-0); array (shard-1). deep and hugeint are read as records.
        assert unreadable(con) == {"shard-0.jsonl": 3, "shard-1.jsonl": 1}
    finally:
        con.close()


def test_trajforge_query_prints_rows_and_a_note(hostile, good):
    res = timed(CliRunner().invoke, app, ["query", "SELECT task_id FROM episodes WHERE policy = 'expert'",
                                          "--store", str(hostile), "--format", "jsonl"])
    assert res.exit_code == 0, res.output + repr(res.exception)
    assert "skipped 4 unreadable lines (shard-0.jsonl: 3, shard-1.jsonl: 1)" in res.stderr
    assert {g.task_id for g in good} <= {json.loads(ln)["task_id"] for ln in res.stdout.splitlines()}


def test_a_shard_whose_first_line_is_hostile_is_still_found(hostile):
    assert find_shards(hostile) == [hostile / "shard-0.jsonl", hostile / "shard-1.jsonl"]


@pytest.fixture(scope="module")
def viewer(hostile):
    server = timed(make_server, hostile, 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    with httpx.Client(base_url=server.url, timeout=BUDGET_S) as c:
        yield c
    server.shutdown()
    server.server_close()


def test_the_viewer_lists_the_good_episodes_and_reports_the_rest(viewer, good):
    facets = viewer.get("/api/facets").json()
    assert facets["unreadable"] == {"shard-0.jsonl": 3, "shard-1.jsonl": 1}
    rows = viewer.get("/api/episodes", params={"per_page": 100}).json()["rows"]
    assert {g.task_id for g in good} <= {r["task_id"] for r in rows}
    for g in good:
        r = viewer.get("/api/episode", params={"task_id": g.task_id, "policy": g.policy})
        assert r.status_code == 200 and g.task_id in r.json()["episode"]["task_id"]


@pytest.mark.parametrize("task_id,needle", [
    ("huge", f"over {MAX_EPISODE_BYTES // 2**20} MiB"),
    ("deep", "cannot be read"),
])
def test_an_episode_that_cannot_be_shown_is_a_422_and_the_viewer_goes_on(viewer, good, task_id, needle):
    started = time.monotonic()
    r = viewer.get("/api/episode", params={"task_id": task_id, "policy": "expert"})
    assert r.status_code == 422 and needle in r.json()["error"], r.text[:300]
    assert time.monotonic() - started < BUDGET_S
    assert viewer.get("/api/episode", params={"task_id": good[0].task_id, "policy": "expert"}).status_code == 200


# ---- import-openai files -------------------------------------------------------------------


@pytest.fixture(scope="module")
def import_file(tmp_path_factory, good):
    """An OpenAI chat JSONL export of the good episodes with hostile lines between them."""
    records = [json.dumps(ex.to_openai(g)).encode() for g in good[:3]]
    msg = json.loads(records[0])
    call = msg["messages"][2]["tool_calls"][0]
    lines = [
        records[0],
        b"x" * 2000,                                                    # 2: not JSON
        b'{"messages": ' + b"[" * DEEP + b"]" * DEEP + b"}",            # 3: nested too deeply
        b'{"messages": [{"role": "user", "content": "\xff"}]}',         # 4: invalid UTF-8
        b'{"messages": [{"role": "user", "content": "\\ud800"}]}',      # 5: lone surrogate
        b'{"messages": [{"role": "user", "content": 1' + b"0" * 5000 + b"}]}",  # 6: int-string limit
        b"[1, 2]",                                                      # 7: not an object
        json.dumps({"messages": "hi"}).encode(),                        # 8: messages not an array
        json.dumps({"messages": [5]}).encode(),                         # 9: message not an object
        json.dumps({"messages": [{"role": "user", "content": {"a": 1}}]}).encode(),  # 10: content
        json.dumps({"messages": [{"role": "assistant", "tool_calls": [
            {**call, "function": {**call["function"], "arguments": "[" * DEEP}}]}]}).encode(),  # 11
        json.dumps({"messages": [{"role": "assistant", "tool_calls": "run_sql"}]}).encode(),  # 12
        json.dumps({"messages": [{"role": "tool", "tool_call_id": 7, "content": "x"}]}).encode(),  # 13
        json.dumps({**msg, "tools": ["run_sql"]}).encode(),             # 14: tools entries
        json.dumps({"messages": [{"role": {"x": 1}}]}).encode(),        # 15: role
        b"y" * 5000,                                                    # 16: over the cap set below
        records[1],
        b"",
        records[2],
    ]
    path = tmp_path_factory.mktemp("import") / "train.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


WANTED = {2: "Expecting value", 3: "nested too deeply", 4: "utf-8", 5: "surrogate", 6: "integer string",
          7: "the record must be an object", 8: "messages must be an array", 9: "messages[0] must be an object",
          10: "messages[0].content must be a string", 11: "call arguments are not JSON",
          12: "tool_calls must be an array", 13: "tool_call_id must be a string or null",
          14: "tools[0] must be an object", 15: "unsupported role 'dict'", 16: "Expecting value"}


def test_an_import_reads_every_good_line_and_names_each_bad_one(import_file, good):
    report = timed(ex.read_openai_jsonl, import_file, "sql")
    assert [t.task_id for t in report.trajectories] == ["train:0", "train:16", "train:18"]
    assert [t.messages[1].content for t in report.trajectories] == [g.messages[1].content for g in good[:3]]
    got = {int(r.split(":")[1]): r for r in report.rejected}
    assert sorted(got) == sorted(WANTED)
    for lineno, needle in WANTED.items():
        assert needle in got[lineno], got[lineno]
        assert got[lineno].startswith(f"{import_file}:{lineno}: ")


def test_a_line_over_the_cap_is_skipped_and_reading_goes_on(import_file):
    report = ex.read_openai_jsonl(import_file, "sql", max_line_bytes=4096)
    assert f"{import_file}:16: line is over 4096 bytes" in report.rejected
    assert [t.task_id for t in report.trajectories] == ["train:0", "train:16", "train:18"]


def test_import_openai_imports_what_it_can_and_exits_1_naming_the_rest(import_file, tmp_path):
    res = timed(CliRunner().invoke, app, ["import-openai", str(import_file), "--env", "sql",
                                          "--out", str(tmp_path / "store")])
    assert res.exit_code == 1, res.output + repr(res.exception)
    assert res.exception is None or isinstance(res.exception, SystemExit)
    assert "imported 3 trajectories" in res.output and f"error: {import_file}:3: nested too deeply" in res.output
    assert f"{len(WANTED)} lines of {import_file} could not be read" in res.output
    assert len(TrajectoryStore(tmp_path / "store").read()) == 3
    with pytest.raises(ValueError, match=f"{import_file}:2: "):  # the all-or-nothing library call
        ex.import_openai_jsonl(import_file, "sql")
