"""SQL over a store of real graded episodes: three scripted behaviours with known fail reasons."""

import json
from collections import Counter

import pytest
from typer.testing import CliRunner

from trajforge.cli.main import app
from trajforge.grade import graded
from trajforge.harness import HarnessConfig, run_episodes
from trajforge.policies.expert import ExpertPolicy
from trajforge.policies.scripted import ScriptedPolicy
from trajforge.schema import Outcome, SamplingConfig, Trajectory
from trajforge.store import TrajectoryStore
from trajforge.store.filters import filter_trajectories
from trajforge.store.query import connect, query, run, unreadable
from trajforge.tasks import synthesize

MISSING_ARG = '<tool_call>\n{"name": "run_sql", "arguments": {}}\n</tool_call>'


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """10 expert successes, 10 invalid_args failures, 10 no_call failures (30 episodes)."""
    pool = synthesize("sql", 30, seed=0).tasks
    cfg = HarnessConfig(max_consecutive_errors=2)
    trajs = run_episodes(pool[:10], ExpertPolicy())
    trajs += run_episodes(pool[10:20], ScriptedPolicy([MISSING_ARG], name="bad-args"), cfg)
    trajs += run_episodes(pool[20:], ScriptedPolicy(["The answer is 3."], name="no-call"), cfg)
    root = tmp_path_factory.mktemp("store")
    st = TrajectoryStore(root)
    for t in trajs:
        st.append(graded(t))
    return root, [graded(t) for t in trajs]


def test_counts_by_fail_reason(store):
    root, trajs = store
    rows = query(root, "SELECT fail_reason, outcome_tier, count(*) AS n FROM episodes GROUP BY ALL ORDER BY n, fail_reason")
    got = {(r["fail_reason"], r["outcome_tier"]): r["n"] for r in rows}
    assert got == {(None, "success"): 10, ("invalid_args", "failed"): 10, ("no_call", "failed"): 10}
    assert got == Counter((t.outcome.fail_reason, t.outcome.tier) for t in trajs)


def test_tier_filter_and_flat_columns(store):
    root, trajs = store
    [row] = query(root, "SELECT count(*) AS n, sum(n_errors) AS errors, max(turns) AS turns FROM episodes "
                        "WHERE fail_reason = 'invalid_args' AND tier = 'hard'")
    hard_bad = [t for t in trajs if t.tier == "hard" and t.outcome.fail_reason == "invalid_args"]
    assert row["n"] == len(hard_bad)
    assert row["errors"] == sum(len(s.errors) for t in hard_bad for s in t.steps)
    [ep] = query(root, f"SELECT * FROM episodes WHERE task_id = '{trajs[0].task_id}' AND policy = 'expert'")
    t = trajs[0]
    assert ep["turns"] == len(t.steps) and ep["end"] == "submitted" and ep["correct"] is True
    assert ep["reward_total"] == pytest.approx(t.reward.total) and ep["executed"] is True
    assert ep["toolset_fingerprint"] == t.toolset_fingerprint and ep["n_repairs"] == 0


def test_steps_view(store):
    root, trajs = store
    rows = query(root, "SELECT policy, count(*) AS n FROM steps WHERE list_contains(error_kinds, 'invalid_args') "
                       "GROUP BY policy")
    assert rows == [{"policy": "bad-args", "n": sum(len(t.steps) for t in trajs if t.policy == "bad-args")}]
    [first] = query(root, "SELECT * FROM steps WHERE policy = 'expert' AND step = 0 LIMIT 1")
    assert first["n_calls"] == 1 and "<tool_call>" in first["raw"] and first["error_kinds"] == []


def test_bad_sql_is_a_clear_value_error(store):
    root, _ = store
    with pytest.raises(ValueError, match="fail_reasn"):
        query(root, "SELECT fail_reasn FROM episodes")
    with pytest.raises(ValueError, match="bad query"):
        query(root, "SELEC 1")
    with pytest.raises(ValueError, match="no \\*.jsonl shards"):
        query(root / "missing", "SELECT 1")


def test_torn_line_is_skipped(tmp_path, store):
    _, trajs = store
    st = TrajectoryStore(tmp_path)
    st.append(trajs[0])
    with open(st.path, "a") as f:
        f.write('{"task_id": "torn", "sam')
    assert query(tmp_path, "SELECT count(*) AS n FROM episodes") == [{"n": 1}]


def test_cli_query_jsonl_table_and_error(store):
    root, _ = store
    runner = CliRunner()
    sql = "SELECT policy, count(*) AS n FROM episodes GROUP BY policy ORDER BY policy"
    res = runner.invoke(app, ["query", sql, "--store", str(root), "--format", "jsonl"])
    assert res.exit_code == 0, res.output
    assert [json.loads(line) for line in res.output.splitlines()] == [
        {"policy": "bad-args", "n": 10}, {"policy": "expert", "n": 10}, {"policy": "no-call", "n": 10}]
    res = runner.invoke(app, ["query", sql, "--store", str(root)])
    assert res.exit_code == 0 and "bad-args" in res.output and "3 rows" in res.output
    res = runner.invoke(app, ["query", "SELECT error_kinds FROM steps WHERE policy = 'bad-args' LIMIT 1",
                              "--store", str(root)])
    assert res.exit_code == 0 and "['invalid_args']" in res.output  # list cells are not read as markup
    res = runner.invoke(app, ["query", "SELECT nope FROM episodes", "--store", str(root)])
    assert res.exit_code == 2 and "nope" in res.output


def record(task, **fields):
    return Trajectory(task_id=task, policy="p", env="sql", toolset_fingerprint="f", dialect="hermes", **fields)


def test_duplicate_keys_collapse_as_the_store_reader_collapses_them(tmp_path):
    fault = {"end": "env_fault", "outcome": Outcome(tier="env_fault")}
    greedy, hot = SamplingConfig(temperature=0, seed=1), SamplingConfig(temperature=1, seed=1)
    st = TrajectoryStore(tmp_path)
    for t in [record("a"), record("a", outcome=Outcome(tier="failed")),  # written twice: the first is kept
              record("b", **fault), record("b", outcome=Outcome(tier="success")),  # a resume retried the fault
              record("c", **fault), record("c", **fault),
              record("d", sampling=greedy), record("d", sampling=greedy.model_copy(update={"seed": 2})),
              record("e", sampling=hot), record("e", sampling=hot.model_copy(update={"seed": 2}))]:
        st.append(t)
    rows = query(tmp_path, "SELECT task_id, outcome_tier FROM episodes")
    got = sorted((r["task_id"], r["outcome_tier"] or "") for r in rows)
    assert got == [("a", ""), ("b", "success"), ("c", "env_fault"), ("d", ""), ("e", ""), ("e", "")]
    assert got == sorted((t.task_id, t.outcome.tier if t.outcome else "") for t in st.read())


def test_format_1_fail_reasons_read_under_their_current_names(tmp_path):
    old = {"task_id": "t0", "policy": "p", "env": "sql", "toolset_fingerprint": "f", "dialect": "hermes",
           "verdict": {"submitted": True, "correct": False}}
    lines = [{**old, "outcome": {"tier": "failed", "correct": False, "fail_reason": "malformed_call"}},
             {**old, "task_id": "t1", "outcome": {"tier": "failed", "correct": False, "fail_reason": "truncated_call"}}]
    (tmp_path / "old.jsonl").write_text("".join(json.dumps(d) + "\n" for d in lines))
    TrajectoryStore(tmp_path).append(record("t2", outcome=Outcome(tier="failed", fail_reason="malformed")))
    rows = query(tmp_path, "SELECT task_id FROM episodes WHERE fail_reason = 'malformed' ORDER BY 1")
    assert [r["task_id"] for r in rows] == ["t0", "t2"]
    assert [t.task_id for t in filter_trajectories(TrajectoryStore(tmp_path).read(), "fail_reason=malformed")] == ["t0", "t2"]
    assert query(tmp_path, "SELECT fail_reason FROM episodes WHERE task_id = 't1'") == [{"fail_reason": "truncated"}]


def test_an_object_that_is_not_a_trajectory_is_skipped_and_counted(tmp_path):
    st = TrajectoryStore(tmp_path)
    st.append(record("a"))
    with open(st.path, "a") as f:
        f.write('{"task_id": "x", "policy": "p"}\n')
    con = connect(tmp_path)
    assert run(con, "SELECT task_id FROM episodes") == [{"task_id": "a"}]
    assert unreadable(con) == {"trajectories.jsonl": 1}
    st.read()
    assert st.torn == ["trajectories.jsonl:2"]
