"""Which dialect a policy speaks (issue 3, item 6): picked from the model (its chat template first),
overridable per policy (``dialect=`` or ``SPEC?dialect=NAME``), and then used by the harness, the
SFT renderer and eval alike."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.tiny import build_tiny_model
from trajforge.envs import env_class
from trajforge.eval.run import compare
from trajforge.harness import HarnessConfig, run_episodes
from trajforge.parse import get_dialect
from trajforge.policies import make_policy
from trajforge.policies.hf import ADAPTER_META, HFPolicy, load_model
from trajforge.policies.openai import OpenAIPolicy
from trajforge.schema import Message, Step, ToolCall, Trajectory
from trajforge.store import TrajectoryStore
from trajforge.tasks import synthesize
from trajforge.train.data import render_sample, training_dialect

CODER_TEMPLATE = ("{%- for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{%- endfor %}"
                  "{%- if tools %}<tool_call>\n<function=example_function_name>\n<parameter=example_parameter_1>"
                  "\nvalue_1\n</parameter>\n</function>\n</tool_call>{%- endif %}"
                  "{%- if add_generation_prompt %}<|im_start|>assistant\n{%- endif %}")
TOOLSET = env_class("sql").toolset()


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return build_tiny_model(tmp_path_factory.mktemp("tiny"))


@pytest.fixture(scope="module")
def loaded(tiny):
    return load_model(str(tiny), dtype="float32")


def with_template(loaded, template):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(loaded[1].name_or_path)
    tok.chat_template = template
    return loaded[0], tok


# -- picking -------------------------------------------------------------------------------------

def test_hf_policy_dialect_comes_from_the_chat_template_then_the_name(tiny, loaded):
    assert HFPolicy(str(tiny), loaded=loaded).dialect.name == "hermes"  # plain ChatML, unknown name
    coder = with_template(loaded, CODER_TEMPLATE)
    assert HFPolicy(str(tiny), loaded=coder).dialect.name == "qwen3_xml"  # the template's XML markers
    assert HFPolicy("Qwen/Qwen3-Coder-30B-A3B-Instruct", loaded=loaded).dialect.name == "qwen3_xml"
    assert HFPolicy("Qwen/Qwen3-8B", loaded=loaded).dialect.name == "hermes"
    # The embedded default keeps hermes whatever its template says (the demo depends on it).
    assert HFPolicy("smollm2-135m", loaded=coder).dialect.name == "hermes"
    assert HFPolicy(str(tiny), loaded=coder, dialect=get_dialect("pythonic")).dialect.name == "pythonic"


def test_an_adapter_acts_in_the_dialect_and_render_mode_it_was_trained_in(tiny, loaded, tmp_path):
    (tmp_path / ADAPTER_META).write_text(json.dumps({"dialect": "mistral", "render_mode": "template"}))
    pol = HFPolicy(str(tiny), adapter=str(tmp_path), loaded=with_template(loaded, CODER_TEMPLATE))
    assert pol.dialect.name == "mistral" and pol.render_mode == "template"
    assert HFPolicy(str(tiny), loaded=loaded).render_mode == "dialect"


def test_spec_options_override_the_dialect(tiny):
    pol = make_policy(f"hf:{tiny}?dialect=pythonic&render=dialect", dtype="float32")
    assert pol.dialect.name == "pythonic" and pol.render_mode == "dialect"
    assert pol.name == f"hf:{tiny}?dialect=pythonic&render=dialect"  # apart from the default-dialect policy
    expert = make_policy("expert?dialect=llama3_json")
    assert expert.dialect.name == "llama3_json" and expert.name == "expert?dialect=llama3_json"
    assert make_policy("openai:http://127.0.0.1:9/v1#m?dialect=qwen3_xml").dialect.name == "qwen3_xml"
    for bad, why in [("expert?dialect=klingon", "unknown dialect"), ("hf:m?colour=red", "bad policy option"),
                     ("expert?render=template", "hf: policies only")]:
        with pytest.raises(ValueError, match=why):
            make_policy(bad)


def test_openai_policy_dialect():
    assert OpenAIPolicy("http://127.0.0.1:9/v1", "gpt-4o").dialect.name == "openai"  # native tool_calls
    text = OpenAIPolicy("http://127.0.0.1:9/v1", "Qwen/Qwen3-Coder-30B-A3B-Instruct", native_tools=False)
    assert text.dialect.name == "qwen3_xml" and not text.native_tools
    given = OpenAIPolicy("http://127.0.0.1:9/v1", "m", dialect=get_dialect("hermes"))
    assert not given.native_tools
    with pytest.raises(ValueError, match="contradicts"):
        OpenAIPolicy("http://127.0.0.1:9/v1", "m", dialect=get_dialect("hermes"), native_tools=True)


# -- using: harness, eval, SFT renderer ----------------------------------------------------------

def test_harness_and_eval_parse_with_the_policys_dialect(tmp_path):
    tasks = synthesize("sql", 20, seed=0).tasks[:3]
    pol = make_policy("expert?dialect=mistral")
    results = compare(tasks, [pol], tmp_path / "store", HarnessConfig(), show_progress=False)
    assert results[pol.name]["n"] == 3
    trajs = [t for t in TrajectoryStore(tmp_path / "store") if t.policy == pol.name]
    assert {t.dialect for t in trajs} == {"mistral"}
    for t in trajs:
        assert t.outcome.tier == "success"
        assert all(s.raw.count("[TOOL_CALLS]") == 1 and s.calls and not s.errors for s in t.steps)


class OneAnswer:
    """Loopback /v1/chat/completions answering every request with the same choice."""

    def __init__(self, choice: dict):
        body = json.dumps({"id": "x", "object": "chat.completion", "choices": [choice]}).encode()

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                self.rfile.read(int(self.headers["Content-Length"]))
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()


def test_a_native_call_cut_by_the_token_limit_is_truncated_in_the_harness():
    cut = {"index": 0, "finish_reason": "length", "message": {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "run_sql", "arguments": '{"query": "SELECT COUNT(*) FR'}}]}}
    srv = OneAnswer(cut)
    try:
        [traj] = run_episodes(synthesize("sql", 20, seed=0).tasks[:1], make_policy(f"openai:{srv.url}#m"),
                              HarnessConfig(max_turns=1))
    finally:
        srv.httpd.shutdown()
    assert traj.dialect == "openai"
    step = traj.steps[0]
    assert step.calls == [] and [e.kind for e in step.errors] == ["truncated"]  # never dispatched


def _traj(dialect: str, raw: str) -> Trajectory:
    call = ToolCall(name="run_sql", arguments={"query": "SELECT 1"})
    msgs = [Message(role="system", content="S"), Message(role="user", content="U"),
            Message(role="assistant", content="", tool_calls=[call], raw=raw),
            Message(role="tool", name="run_sql", content="1")]
    return Trajectory(task_id="t", policy="p", env="sql", toolset_fingerprint=TOOLSET.fingerprint, dialect=dialect,
                      messages=msgs, steps=[Step(index=0, raw=raw, calls=[call], completion_ids=[1, 2, 3])])


def test_sft_renders_in_one_dialect_and_never_learns_another_dialects_raw_text(loaded):
    tok = loaded[1]
    hermes_raw = get_dialect("hermes").render_assistant("", [ToolCall(name="run_sql", arguments={"query": "SELECT 1"})])
    same = [_traj("mistral", "[TOOL_CALLS][...]")] * 2
    assert training_dialect(same, "smollm2-135m", tok).name == "mistral"  # the data's own: raws kept
    mixed = [_traj("mistral", "x"), _traj("hermes", hermes_raw)]
    assert training_dialect(mixed, "Qwen/Qwen3-Coder-30B", tok).name == "qwen3_xml"  # the model's own
    assert training_dialect([_traj("openai", "")], "smollm2-135m", tok).name == "hermes"
    assert training_dialect(same, "x", tok, name="pythonic").name == "pythonic"
    # A hermes trajectory rendered for a pythonic model: its hermes raw text and token ids are dropped.
    sample = render_sample(_traj("hermes", hermes_raw), tok, TOOLSET, get_dialect("pythonic"))
    learned = tok.decode([t for t, m in zip(sample.input_ids, sample.loss_mask) if m])
    assert learned == "[run_sql(query='SELECT 1')]<|im_end|>"
    assert "<tool_call>" not in tok.decode(sample.input_ids)


def test_an_sft_adapter_records_its_dialect_and_the_policy_uses_it(tiny, tmp_path):
    from trajforge.grade import graded
    from trajforge.train.inloop import InLoopEval
    from trajforge.train.sft import SFTConfig, train_sft

    tasks = [t for t in synthesize("sql", 20, seed=0).tasks if t.split == "train"][:4]
    trajs = [graded(t) for t in run_episodes(tasks, make_policy("expert?dialect=llama3_json"))]
    evaluator = InLoopEval(tasks[:1], str(tiny), every=1, harness=HarnessConfig(max_turns=1))
    cfg = SFTConfig(r=4, alpha=8, batch_size=4, max_steps=1, dtype="float32")
    train_sft(trajs, str(tiny), tmp_path / "adapter", cfg, progress=False, evaluator=evaluator)
    meta = json.loads((tmp_path / "adapter" / ADAPTER_META).read_text())
    assert meta["dialect"] == "llama3_json" and meta["render_mode"] == "dialect"
    assert evaluator.dialect.name == "llama3_json"  # in-loop eval parsed what was being trained
    pol = make_policy(f"hf:{tiny}@{tmp_path / 'adapter'}", dtype="float32")
    assert pol.dialect.name == "llama3_json" and pol.render_mode == "dialect"
