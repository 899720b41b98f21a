"""Export → import round trips for OpenAI JSONL, ShareGPT (LLaMA-Factory) and HF datasets.

An imported trajectory must give the model exactly what the original did: the same messages and
calls, and the same training tokens from ``render_sample`` (tiny tokenizer, no download).
"""

import json

import pytest
from typer.testing import CliRunner

from tests.tiny import build_tiny_model
from trajforge.cli.main import app
from trajforge.envs import env_class
from trajforge.harness import HarnessConfig, run_episodes
from trajforge.parse import get_dialect
from trajforge.policies.expert import ExpertPolicy
from trajforge.policies.scripted import ScriptedPolicy
from trajforge.store import TrajectoryStore
from trajforge.store import export as ex
from trajforge.tasks import synthesize
from trajforge.train.data import render_sample

TOOLSET = env_class("sql").toolset()


def call(name, **args):
    return f'<tool_call>\n{json.dumps({"name": name, "arguments": args})}\n</tool_call>'


@pytest.fixture(scope="module")
def trajs():
    """Expert episodes plus one that recovers from a no_call, an unknown tool, a missing argument
    and a SQL error (so feedback messages that answer no call are exported too)."""
    pool = synthesize("sql", 12, seed=0).tasks
    out = run_episodes(pool[:6], ExpertPolicy())
    task = pool[6]
    script = ["I think the answer is 3.", call("run_sq", query="SELECT 1"), call("run_sql"),
              call("run_sql", query="SELECT nope FROM nowhere")]
    script += [call(c.name, **c.arguments) for c in task.reference]
    out += run_episodes([task], ScriptedPolicy(script, name="flaky"),
                        HarnessConfig(max_turns=12, max_consecutive_errors=5))
    assert {e.kind for s in out[-1].steps for e in s.errors} == {"no_call", "unknown_tool", "invalid_args"}
    # Two calls in one turn (results of a turn share one ShareGPT observation).
    task = pool[7]
    script = ["Let me look around.\n" + call("list_tables") + "\n" + call("describe_table", table="customers")]
    script += [call(c.name, **c.arguments) for c in task.reference]
    out += run_episodes([task], ScriptedPolicy(script, name="parallel"), HarnessConfig(max_turns=12))
    assert len(out[-1].steps[0].calls) == 2 and len(out[-1].steps[0].results) == 2
    return out


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(build_tiny_model(tmp_path_factory.mktemp("tiny")))


def visible(traj, upto_last_assistant=False, names=True):
    """What the model sees: role, text (assistant text as the dialect renders it), calls, tool name."""
    dialect = get_dialect(traj.dialect)
    msgs = traj.messages
    if upto_last_assistant:
        last = max(i for i, m in enumerate(msgs) if m.role == "assistant")
        msgs = msgs[:last + 1]
    out = []
    for m in msgs:
        if m.role == "assistant":
            text = m.raw if m.raw is not None else dialect.render_assistant(m.content, m.tool_calls)
            out.append(("assistant", text, [(c.name, c.arguments) for c in m.tool_calls]))
        else:
            out.append((m.role, m.content, m.name if names and m.role == "tool" else None))
    return out


def check_imported(orig, back, tokenizer, sharegpt=False):
    assert len(back) == len(orig)
    for o, b in zip(orig, back):
        assert visible(b, sharegpt, names=not sharegpt) == visible(o, sharegpt, names=not sharegpt)
        assert not b.executed and b.toolset_fingerprint == TOOLSET.fingerprint and b.dialect == "hermes"
        assert len(b.steps) == sum(m.role == "assistant" for m in o.messages)
        assert [len(s.calls) for s in b.steps] == [len(s.calls) for s in o.steps]
        assert render_sample(b, tokenizer, TOOLSET) == render_sample(o, tokenizer, TOOLSET)


def test_openai_round_trip(tmp_path, trajs, tokenizer):
    path = tmp_path / "train.jsonl"
    assert ex.write_openai_jsonl(trajs, path) == len(trajs)
    rec = json.loads(path.read_text().splitlines()[0])
    assert rec["tools"] == TOOLSET.openai()
    asst = rec["messages"][2]
    tc = asst["tool_calls"][0]
    assert tc["type"] == "function" and isinstance(tc["function"]["arguments"], str)
    assert rec["messages"][3] == {"role": "tool", "tool_call_id": tc["id"], "content": trajs[0].messages[3].content}
    flaky = ex.to_openai(next(t for t in trajs if t.policy == "flaky"))["messages"]
    assert {"role": "user", "name": "error", "content": flaky[3]["content"]} == flaky[3]  # no_call feedback
    check_imported(trajs, ex.import_openai_jsonl(path, env="sql"), tokenizer)


def test_sharegpt_round_trip_and_dataset_info(tmp_path, trajs, tokenizer):
    path = ex.write_sharegpt(trajs, tmp_path / "lf", name="sql_agent")
    info = json.loads((tmp_path / "lf" / "dataset_info.json").read_text())
    assert info["sql_agent"] == {
        "file_name": "sql_agent.jsonl", "formatting": "sharegpt",
        "columns": {"messages": "conversations", "system": "system", "tools": "tools"},
        "tags": {"role_tag": "from", "content_tag": "value", "user_tag": "human", "assistant_tag": "gpt",
                 "function_tag": "function_call", "observation_tag": "observation"},
    }
    parallel = [t for line in path.read_text().splitlines() for t in json.loads(line)["conversations"]
                if t["from"] == "function_call" and t["value"].split("</think>")[-1].startswith("[")]
    assert len(parallel) == 1
    for line in path.read_text().splitlines():
        rec = json.loads(line)
        conv = rec["conversations"]
        # LLaMA-Factory's rules: human/observation on odd turns, gpt/function_call on even, even count.
        assert len(conv) % 2 == 0
        assert all(t["from"] in (("human", "observation"), ("gpt", "function_call"))[i % 2] for i, t in enumerate(conv))
        for t in conv:
            if t["from"] == "function_call":
                calls = json.loads(t["value"].split("</think>")[-1])
                assert all({"name", "arguments"} == set(c) for c in (calls if isinstance(calls, list) else [calls]))
        assert json.loads(rec["tools"]) == [t.model_dump() for t in TOOLSET.tools]
    check_imported(trajs, ex.import_sharegpt(path, env="sql"), tokenizer, sharegpt=True)


@pytest.mark.parametrize("out", ["ds", "ds.parquet"])
def test_hf_round_trip(tmp_path, trajs, tokenizer, out):
    ds = ex.to_hf_dataset(trajs)
    assert ds.num_rows == len(trajs) and {"messages", "tools", "task_id", "policy"} <= set(ds.column_names)
    assert json.loads(ds[0]["messages"]) == ex.to_openai(trajs[0])["messages"]
    back = ex.load_hf(ex.save_hf(trajs, tmp_path / out))
    check_imported(trajs, back, tokenizer)
    assert [(t.task_id, t.policy, t.tier, t.split) for t in back] == [(t.task_id, t.policy, t.tier, t.split) for t in trajs]


def test_toolset_mismatch_is_refused(trajs):
    stale = trajs[0].model_copy(update={"toolset_fingerprint": "0123456789abcdef"})
    with pytest.raises(ValueError, match="not the current sql toolset"):
        ex.to_openai(stale)
    rec = ex.to_openai(trajs[0])
    rec["tools"] = rec["tools"][:2]
    with pytest.raises(ValueError, match="not the sql environment's"):
        ex.from_openai(rec, "sql", task_id="x")


def test_import_validates_calls_like_a_rollout(trajs):
    rec = ex.to_openai(trajs[0])
    rec["messages"][2]["tool_calls"][0]["function"]["arguments"] = "{}"  # run_sql without its query
    [step0, _] = ex.from_openai(rec, "sql", task_id="x").steps
    assert step0.calls == [] and [e.kind for e in step0.errors] == ["invalid_args"]


def test_cli_export_and_import_openai(tmp_path, trajs):
    store = tmp_path / "store"
    st = TrajectoryStore(store)
    for t in trajs:
        st.append(t)
    runner = CliRunner()
    for fmt, out in [("openai", "o.jsonl"), ("sharegpt", "lf"), ("hf", "hf")]:
        res = runner.invoke(app, ["export", str(store), "--format", fmt, "--out", str(tmp_path / out)])
        assert res.exit_code == 0, res.output + repr(res.exception)
    assert (tmp_path / "lf" / "dataset_info.json").exists() and (tmp_path / "hf").is_dir()
    res = runner.invoke(app, ["import-openai", str(tmp_path / "o.jsonl"), "--env", "sql", "--out", str(tmp_path / "imp")])
    assert res.exit_code == 0, res.output + repr(res.exception)
    back = TrajectoryStore(tmp_path / "imp").read()
    assert len(back) == len(trajs) and all(not t.executed and t.policy == "imported" for t in back)
    res = runner.invoke(app, ["export", str(store), "--format", "csv", "--out", str(tmp_path / "x")])
    assert res.exit_code == 2 and "csv" in res.output


def test_cli_export_reports_unreadable_store_lines_and_exports_the_rest(tmp_path, trajs):
    st = TrajectoryStore(tmp_path / "store")
    for t in trajs[:2]:
        st.append(t)
    with open(st.path, "a") as f:
        f.write('{"task_id": "not a trajectory"}\n{"task_id": "torn", "sam')
    out = tmp_path / "o.jsonl"
    res = CliRunner().invoke(app, ["export", str(tmp_path / "store"), "--format", "openai", "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "skipped 2 unreadable lines (trajectories.jsonl:3, trajectories.jsonl:4)" in res.output
    assert len(out.read_text().splitlines()) == 2


def test_sharegpt_refuses_a_dataset_info_that_is_not_an_object(tmp_path, trajs):
    lf = tmp_path / "lf"
    lf.mkdir()
    for text, message in [("[1]", "holds a JSON list"), ("{bad", "is not valid JSON")]:
        (lf / "dataset_info.json").write_text(text)
        with pytest.raises(ValueError, match=f"dataset_info.json {message}"):
            ex.write_sharegpt(trajs, lf)
        assert (lf / "dataset_info.json").read_text() == text and not (lf / "trajforge.jsonl").exists()


def test_id_less_calls_keep_their_results_through_import_and_export(trajs):
    """A file whose calls and results carry no ids: each result answers its turn's calls in order
    (named after its own call), and exporting again keeps them tool results, not user feedback."""
    rec = ex.to_openai(trajs[-1])  # the turn with two calls, then the rest
    for m in rec["messages"]:
        m.pop("tool_call_id", None)
        for tc in m.get("tool_calls", []):
            tc.pop("id")
    back = ex.from_openai(rec, "sql", task_id="x")
    calls = [c for m in back.messages if m.role == "assistant" for c in m.tool_calls]
    results = [m for m in back.messages if m.role == "tool"]
    assert [m.name for m in results] == [c.name for c in calls]
    assert [m.tool_call_id for m in results] == [c.id for c in calls] and None not in [c.id for c in calls]
    again = ex.to_openai(back)["messages"]
    assert [m["role"] for m in again] == [m["role"] for m in rec["messages"]]


def test_sharegpt_lines_of_the_wrong_shape_are_named_not_crashed_on(tmp_path, trajs):
    good = json.dumps(ex.to_sharegpt(trajs[0]))
    bad = [[1, 2], {"conversations": "hi"}, {"conversations": ["hi"]},
           {"conversations": [{"from": "human", "value": 5}]},
           {"conversations": [{"from": "function_call", "value": "[1]"}]}, {"tools": [{"name": "run_sql"}]},
           {"tools": "5", "conversations": []}]
    path = tmp_path / "sg.jsonl"
    path.write_text("\n".join([good, *map(json.dumps, bad), good]) + "\n")
    with pytest.raises(ValueError) as e:
        ex.import_sharegpt(path, env="sql")
    for lineno, needle in enumerate(["the record must be an object", "conversations must be an array",
                                     "conversations[0] must be an object", "conversations[0].value must be a string",
                                     "conversations[0] function_call must be an object"], start=2):
        assert f"{path}:{lineno}: sg:{lineno - 1}: {needle}" in str(e.value)
    assert "(and 2 more)" in str(e.value)
    report = ex._read_records(path, lambda rec, task_id: ex.from_sharegpt(rec, "sql", task_id=task_id))
    assert len(report.trajectories) == 2 and len(report.rejected) == len(bad)
    assert "tools must be a string" in report.rejected[5] and "tools must be an array" in report.rejected[6]
