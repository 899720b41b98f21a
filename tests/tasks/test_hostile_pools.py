"""A hostile task pool gets one clear error naming each bad line (file:line: what), never a
traceback, and the tasks that were read are kept on the error; the CLI says it and exits 2."""

from __future__ import annotations

import json
import time

import pytest
from typer.testing import CliRunner

from trajforge.cli.main import app
from trajforge.tasks import synthesize
from trajforge.tasks.pool import TaskPoolError, read_tasks, write_tasks

BUDGET_S = 10.0


@pytest.fixture(scope="module")
def pool_file(tmp_path_factory):
    tasks = synthesize("sql", 3, seed=0).tasks
    good = [t.model_dump_json().encode() for t in tasks]
    task = json.loads(good[0])
    lines = [
        good[0],
        b'{"id": "x", "env": "sql", "prompt": "\xff\xfe"}',                 # 2: invalid UTF-8
        b"[" * 200_000 + b"]" * 200_000,                                   # 3: nested too deeply
        json.dumps({**task, "seed": 0}).encode().replace(b'"seed": 0', b'"seed": ' + b"9" * 5000),  # 4
        json.dumps({**task, "prompt": "a"}).encode().replace(b'"prompt": "a"', b'"prompt": "\\ud800"'),  # 5
        json.dumps({**task, "prompt": ["not", "text"]}).encode(),         # 6: wrong type
        json.dumps({**task, "tier": "impossible"}).encode(),              # 7: not a tier
        b"z" * 50_000,                                                     # 8: over the cap below
        good[1],
        b"   ",
        good[2],
    ]
    path = tmp_path_factory.mktemp("pool") / "tasks.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path, tasks


def test_every_bad_line_is_named_and_the_good_tasks_are_kept(pool_file):
    path, tasks = pool_file
    started = time.monotonic()
    with pytest.raises(TaskPoolError) as caught:
        read_tasks(path, max_line_bytes=16384)
    assert time.monotonic() - started < BUDGET_S
    err = caught.value
    assert [p.split(": ", 1)[0] for p in err.problems] == [f"{path}:{n}" for n in (2, 3, 4, 5, 6, 7, 8)]
    for n, needle in {2: "invalid unicode", 3: "over 16384 bytes", 4: "number out of range", 5: "hex escape",
                      6: "prompt", 7: "tier", 8: "over 16384 bytes"}.items():
        assert needle in next(p for p in err.problems if p.startswith(f"{path}:{n}:")), err.problems
    assert [t.id for t in err.tasks] == [t.id for t in tasks]
    assert isinstance(err, ValueError) and f"{path}: 7 unreadable task lines" in str(err)


def test_without_the_cap_a_deep_line_is_a_parse_error_not_a_crash(pool_file):
    path, _ = pool_file
    with pytest.raises(TaskPoolError) as caught:
        read_tasks(path)
    assert "recursion limit" in next(p for p in caught.value.problems if p.startswith(f"{path}:3:"))


def test_a_clean_pool_reads_back(tmp_path, pool_file):
    _, tasks = pool_file
    assert read_tasks(write_tasks(tmp_path / "ok.jsonl", tasks)) == tasks


def test_collect_on_a_hostile_pool_fails_with_a_clear_message(pool_file, tmp_path):
    path, _ = pool_file
    res = CliRunner().invoke(app, ["collect", "--tasks", str(path), "--policy", "expert",
                                   "--out", str(tmp_path / "store")])
    assert res.exit_code == 2, res.output + repr(res.exception)
    assert f"{path}:2:" in res.output and "Traceback" not in res.output
    assert not (tmp_path / "store").exists()


def test_a_task_id_on_two_lines_is_named(tmp_path):
    """Pools joined with ``cat`` could hold one task in train and in test; every store keys its
    episodes by task id, so the second line is refused by name, the first kept."""
    a, b = synthesize("sql", 2, seed=0).tasks[:2]
    moved = a.model_copy(update={"split": "test" if a.split != "test" else "train"})
    path = tmp_path / "joined.jsonl"
    path.write_text("".join(t.model_dump_json() + "\n" for t in (a, b, moved)))
    with pytest.raises(TaskPoolError) as caught:
        read_tasks(path)
    assert caught.value.problems == [f"{path}:3: task id {a.id!r} is already on line 1"]
    assert [t.id for t in caught.value.tasks] == [a.id, b.id]
