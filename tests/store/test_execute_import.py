"""``import-openai --execute``: imported conversations replayed in the environment, graded and stored
as trainable trajectories (results from the environment, not the file); the rest counted by reason."""

from __future__ import annotations

import json
import sqlite3

import pytest
from typer.testing import CliRunner

from trajforge.cli.main import app
from trajforge.eval.run import collect
from trajforge.policies import make_policy
from trajforge.schema import Task, ToolCall
from trajforge.store import TrajectoryStore
from trajforge.store.execute import execute_imported
from trajforge.store.export import read_openai_jsonl, write_openai_jsonl
from trajforge.tasks import synthesize, write_tasks


def cli(*args):
    return CliRunner().invoke(app, [*map(str, args)])


def flat(output: str) -> str:
    return " ".join(output.split())


@pytest.fixture(scope="module")
def chats(tmp_path_factory):
    """A pool, and an OpenAI JSONL of its expert episodes edited the ways other people's data differs:
    a tool result that is not what the tool returns, a wrong final answer, a question no task asks, a
    conversation cut before it submits, and one with no assistant turn."""
    root = tmp_path_factory.mktemp("import")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TRAJFORGE_HOME", str(root / "home"))
        tasks = synthesize("sql", 12, seed=3).tasks
        pool = write_tasks(root / "pool.jsonl", tasks)
        collect(tasks, make_policy("expert"), root / "expert", show_progress=False)
        write_openai_jsonl(TrajectoryStore(root / "expert").read(), root / "clean.jsonl")
        records = [json.loads(line) for line in (root / "clean.jsonl").read_text().splitlines()]
        first_result = next(m for m in records[1]["messages"] if m["role"] == "tool")
        first_result["content"] = "count\n999\n(1 row)"  # the file claims another result
        for m in records[2]["messages"]:
            for tc in m.get("tool_calls", []):
                if tc["function"]["name"] == "submit_answer":
                    tc["function"]["arguments"] = json.dumps({"answer": "12345"})
        next(m for m in records[3]["messages"] if m["role"] == "user")["content"] = "What is the meaning of life?"
        records[4]["messages"] = records[4]["messages"][:3]  # system, user, the first assistant turn
        records[5]["messages"] = records[5]["messages"][:2]  # no assistant turn at all
        (root / "chats.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
        yield root, pool, tasks


def test_execute_replays_grades_and_stores_what_runs(chats, monkeypatch):
    root, pool, _ = chats
    monkeypatch.setenv("TRAJFORGE_HOME", str(root / "home"))
    res = cli("import-openai", root / "chats.jsonl", "--env", "sql", "--out", root / "store", "--execute",
              "--tasks", pool)
    assert res.exit_code == 0, res.output
    text = flat(res.output)
    assert (f"executed 10 of 12 conversations into {root / 'store'}: success 8, failed 2 (max_turns 1, "
            "wrong_answer 1); environment results differed from the file's in 1") in text
    assert "not executed: no_task 1, no_turns 1" in text
    assert "chats:3: no_task: no task of the pool asks 'What is the meaning of life?'" in text

    stored = TrajectoryStore(root / "store").read()
    assert len(stored) == 10 and all(t.executed and t.outcome is not None for t in stored)
    assert sum(t.outcome.tier == "success" for t in stored) == 8  # what `train sft` takes by default
    # The results are the environment's: nowhere the 999 the file claimed.
    assert not any("999" in r.content for t in stored for s in t.steps for r in s.results)
    # Importing the same file again adds nothing (each conversation keeps its key).
    again = cli("import-openai", root / "chats.jsonl", "--env", "sql", "--out", root / "store", "--execute",
                "--tasks", pool)
    assert again.exit_code == 0 and len(TrajectoryStore(root / "store").read()) == 10


def test_execute_needs_a_pool_and_without_it_nothing_changes(chats, tmp_path):
    root, pool, _ = chats
    res = cli("import-openai", root / "chats.jsonl", "--env", "sql", "--out", tmp_path / "s", "--execute")
    assert res.exit_code == 2 and "--execute needs --tasks POOL" in flat(res.output)
    plain = cli("import-openai", root / "chats.jsonl", "--env", "sql", "--out", tmp_path / "s")
    assert plain.exit_code == 0 and "imported 12 trajectories" in flat(plain.output)
    assert not any(t.executed for t in TrajectoryStore(tmp_path / "s").read())


def test_ambiguous_tasks_and_environments_that_cannot_start_are_reported(chats, tmp_path, monkeypatch):
    root, _, tasks = chats
    monkeypatch.setenv("TRAJFORGE_HOME", str(root / "home"))
    imported = read_openai_jsonl(root / "clean.jsonl", env="sql").trajectories[:2]
    asks = [next(t for t in tasks if t.prompt in imported[i].messages[1].content) for i in range(2)]
    twin = asks[0].model_copy(update={"id": "twin", "expected": "something else"})
    db = tmp_path / "gone.sqlite"
    sqlite3.connect(db).close()
    moved = asks[1].model_copy(update={"id": "moved", "db": str(db)})
    db.unlink()
    run = execute_imported(imported, [asks[0], twin, moved], env="sql")
    assert [(s.reason, s.detail.split(":")[0]) for s in run.skipped] == [
        ("ambiguous_task", "2 tasks with different answers ask it"), ("env_fault", "FileNotFoundError")]
    assert run.trajectories == []


def test_a_conversation_is_matched_to_its_task_under_the_observation(tmp_path, monkeypatch):
    # The harness puts the environment's first observation below the prompt; matching looks past it.
    from trajforge.store.execute import TaskIndex

    task = Task(id="a", env="sql", prompt="How many?\n\nEvidence: count rows", tier="easy", split="dev",
                template="x", reference=(ToolCall(name="list_tables"),), expected=1)
    index = TaskIndex([task])
    assert index.find("How many?\n\nEvidence: count rows\n\nThe page shows ...") == [task]
    assert index.find("how  many?\n\nevidence: COUNT rows") == [task]
    assert index.find("How many?") == []
