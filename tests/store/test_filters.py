"""``--where`` filters: the expression, filter_trajectories over graded episodes, and ``export --where``."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from trajforge.cli.main import app
from trajforge.grade import graded
from trajforge.harness import HarnessConfig, run_episodes
from trajforge.policies.expert import ExpertPolicy
from trajforge.policies.scripted import ScriptedPolicy
from trajforge.store import TrajectoryStore
from trajforge.store.filters import Clause, Where, filter_trajectories, held_values, parse_where
from trajforge.tasks import synthesize


def call(name, **args):
    return f'<tool_call>\n{json.dumps({"name": name, "arguments": args})}\n</tool_call>'


@pytest.fixture(scope="module")
def episodes():
    """Graded SQL episodes: expert successes, and failures of three kinds on the same tasks."""
    pool = [t for t in synthesize("sql", 12, seed=0).tasks if t.split == "train"][:4]
    out = [graded(t) for t in run_episodes(pool, ExpertPolicy())]
    scripts = {"guess": [call("submit_answer", answer="nothing")],
               "column": [call("run_sql", query="SELECT nme FROM customers")],
               "miss": [call("run_sql", query="SELECT 'zzz'"), call("submit_answer", answer="zzz")]}
    for name, script in scripts.items():
        out += [graded(t) for t in run_episodes(pool, ScriptedPolicy(script, name=name), HarnessConfig(max_turns=2))]
    return out


def reasons(trajs):
    return sorted({t.outcome.fail_reason or "none" for t in trajs})


def test_parse_where_reads_clauses_and_refuses_what_it_cannot():
    assert parse_where("fail_reason=a,b env=sql") == Where((Clause("fail_reason", frozenset({"a", "b"})),
                                                            Clause("env", frozenset({"sql"}))))
    assert parse_where(["tier=hard", "split!=heldout;policy=x"]).clauses[1] == Clause("split", frozenset({"heldout"}), True)
    assert parse_where(None) == Where() == parse_where([])
    assert str(parse_where("fail_reason=b,a")) == "fail_reason=a,b"
    for bad, message in [("fail_reasn=x", "unknown field 'fail_reasn'"), ("tier", "not field=value"),
                         ("tier=,", "names no value")]:
        with pytest.raises(ValueError, match=message):
            parse_where(bad)


def test_filter_trajectories_selects_by_reason_tier_env_split_and_policy(episodes):
    assert reasons(episodes) == ["guessed_answer", "no_such_column", "none", "retrieval_miss"]
    assert reasons(filter_trajectories(episodes, "fail_reason=no_such_column,retrieval_miss")) == [
        "no_such_column", "retrieval_miss"]
    failed = filter_trajectories(episodes, "outcome_tier=failed")
    assert len(failed) == 12 and filter_trajectories(episodes, "outcome_tier!=failed") == [
        t for t in episodes if t.outcome.tier == "success"]
    assert reasons(filter_trajectories(episodes, "fail_reason=none")) == ["none"]
    assert filter_trajectories(episodes, "env=sql split=train") == episodes
    assert filter_trajectories(episodes, "env=travel") == []
    one = episodes[0]
    assert filter_trajectories(episodes, [f"task_id={one.task_id}", "policy=guess"])[0].policy == "guess"
    assert filter_trajectories(episodes, f"tier={one.tier}") == [t for t in episodes if t.tier == one.tier]
    assert filter_trajectories(episodes, None) == episodes
    assert held_values(episodes, "fail_reason")["no_such_column"] == 4


def test_export_where_writes_only_the_selected_episodes(episodes, tmp_path):
    store = tmp_path / "store"
    st = TrajectoryStore(store)
    for t in episodes:
        st.append(t)
    runner = CliRunner()
    out = tmp_path / "fix.jsonl"
    res = runner.invoke(app, ["export", str(store), "--format", "openai", "--out", str(out),
                              "--where", "fail_reason=no_such_column", "--where", "env=sql"])
    assert res.exit_code == 0, res.output
    assert "exported 4 of 16 (--where fail_reason=no_such_column env=sql)" in res.output
    lines = out.read_text().splitlines()
    assert len(lines) == 4 and all("no such column" in line for line in lines)
    # A typo selects nothing: the command says so, with what the store holds, and writes nothing.
    res = runner.invoke(app, ["export", str(store), "--format", "openai", "--out", str(tmp_path / "x.jsonl"),
                              "--where", "fail_reason=no_such_colum"])
    assert res.exit_code == 2 and "no trajectory" in res.output and "no_such_column (4)" in res.output
    assert not (tmp_path / "x.jsonl").exists()
    res = runner.invoke(app, ["export", str(store), "--format", "openai", "--out", str(tmp_path / "y.jsonl"),
                              "--where", "reason=x"])
    assert res.exit_code == 2 and "unknown field 'reason'" in res.output
