"""OpenAI-compatible policy against a real loopback HTTP server with a scripted model behind it."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.scripted_chat import ScriptedChatServer, Status
from trajforge.eval.run import collect
from trajforge.grade import graded
from trajforge.harness import CollectConfig, HarnessConfig, run_episodes
from trajforge.policies import make_policy
from trajforge.schema import Trajectory
from trajforge.store import TrajectoryStore
from trajforge.tasks import synthesize


class ScriptedServer:
    """Answers /v1/chat/completions from the task's reference, natively or as Hermes text."""

    def __init__(self, native: bool):
        self.native = native
        self.requests: list[dict] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append(body)
                reply = json.dumps(server.reply(body)).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def reply(self, body):
        turn = sum(1 for m in body["messages"] if m["role"] == "assistant")
        call = self.script[turn]
        if self.native:
            msg = {"role": "assistant", "content": None, "tool_calls": [
                {"id": f"c{turn}", "type": "function",
                 "function": {"name": call.name, "arguments": json.dumps(call.arguments)}}]}
        else:
            msg = {"role": "assistant", "content": f'<tool_call>\n{json.dumps({"name": call.name, "arguments": call.arguments})}\n</tool_call>'}
        return {"choices": [{"index": 0, "message": msg, "finish_reason": "stop"}]}


@pytest.mark.parametrize("native", [True, False])
def test_openai_policy_solves_task_over_http(native):
    task = synthesize("sql", 20, seed=0).tasks[0]
    srv = ScriptedServer(native)
    srv.script = list(task.reference)
    try:
        pol = make_policy(f"openai:{srv.url}#test-model", native_tools=native)
        [traj] = run_episodes([task], pol)
    finally:
        srv.httpd.shutdown()
    assert traj.verdict.correct and traj.end == "submitted"
    first = srv.requests[0]
    assert first["model"] == "test-model"
    if native:
        assert [t["function"]["name"] for t in first["tools"]] == ["list_tables", "describe_table", "run_sql", "submit_answer"]
        second = srv.requests[1]["messages"]
        assert second[2]["tool_calls"][0]["id"] == "c0" and second[3] == {
            "role": "tool", "content": traj.messages[3].content, "tool_call_id": "c0"}
    else:
        assert "tools" not in first and "<tools>" in first["messages"][0]["content"]


def test_bad_spec():
    with pytest.raises(ValueError, match="bad policy spec"):
        make_policy("openai:http://x")


# ---- a prompt past the server's context --------------------------------------------------------

VLLM_TOO_LONG = ("This model's maximum context length is 2048 tokens. However, you requested 2560 tokens "
                 "(2048 in the messages, 512 in the completion). Please reduce the length of the messages "
                 "or completion.")
TOO_LONG = {  # how servers refuse a prompt past the context (HTTP 400)
    "vllm": VLLM_TOO_LONG,
    "vllm_v1": "The decoder prompt (length 2100) is longer than the maximum model length of 2048. Make sure "
               "that `max_model_len` is no smaller than the number of text tokens.",
    "openai": {"message": "This model's maximum context length is 128000 tokens. However, your messages "
                          "resulted in 130012 tokens. Please reduce the length of the messages.",
               "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"},
    "sglang": "The input (2100 tokens) is longer than the model's context length (2048 tokens).",
    "llama_cpp": {"code": 400, "message": "the request exceeds the available context size, try increasing it",
                  "type": "exceed_context_size_error"},
    "trajforge_serve": {"message": "the prompt is 4200 tokens; alpha takes at most 4096", "type":
                        "invalid_request_error", "param": "messages", "code": "context_length_exceeded"},
}


def rambling(limit_chars: int):
    """A model that writes a long reply with each call, on a server that refuses (vLLM's 400) any
    prompt over ``limit_chars`` characters of messages: its own turns outgrow the context."""
    def reply(body):
        if len(json.dumps(body["messages"])) > limit_chars:
            return Status(400, VLLM_TOO_LONG)
        turn = sum(1 for m in body["messages"] if m["role"] == "assistant")
        return {"content": "Let me look again. " * 100, "tool_calls": [
            {"id": f"c{turn}", "type": "function", "function": {"name": "list_tables", "arguments": "{}"}}]}
    return reply


def run_one(task, url: str, harness: str, tmp_path) -> Trajectory:
    """One episode of the OpenAI policy at ``url`` through the batched loop or the async harness,
    read back graded from the store."""
    pol = make_policy(f"openai:{url}#test-model")
    cfg = HarnessConfig(max_turns=20, max_repeats=100)
    if harness == "batched":
        [traj] = run_episodes([task], pol, cfg)
        TrajectoryStore(tmp_path).append(graded(traj))
    else:
        collect([task], pol, tmp_path, harness=cfg, show_progress=False,
                scale=CollectConfig(retries=3, backoff_s=0.0, backoff_max_s=0.0))
    [stored] = TrajectoryStore(tmp_path).read()
    return stored


@pytest.mark.parametrize("harness", ["batched", "async"])
def test_a_conversation_that_outgrows_the_context_is_the_models_failure(harness, tmp_path):
    task = synthesize("sql", 20, seed=0).tasks[0]
    first = len(json.dumps([{"role": "system"}, {"role": "user", "content": task.prompt}]))
    with ScriptedChatServer([rambling(first + 8000)] * 50) as srv:
        traj = run_one(task, srv.url, harness, tmp_path)
        asked = len(srv.requests)
    assert traj.steps and all(s.calls for s in traj.steps)  # it acted, then its prompt grew too long
    assert (traj.end, traj.outcome.tier, traj.outcome.fail_reason) == ("context_exceeded", "failed",
                                                                     "context_exceeded")
    assert traj.faults == [] and asked == len(traj.steps) + 1  # nothing retried, nothing a fault
    assert not traj.verdict.submitted


LIST_TABLES = {"content": None, "tool_calls": [{"id": "c0", "type": "function",
                                                "function": {"name": "list_tables", "arguments": "{}"}}]}


@pytest.mark.parametrize("server", sorted(TOO_LONG))
def test_each_servers_context_refusal_after_the_first_turn_is_context_exceeded(server):
    """The error object as each server words it (the scripted server sends ``{"error": body}``)."""
    task = synthesize("sql", 20, seed=0).tasks[0]
    with ScriptedChatServer([LIST_TABLES, Status(400, TOO_LONG[server])]) as srv:
        [traj] = run_episodes([task], make_policy(f"openai:{srv.url}#test-model"))
    assert (traj.end, graded(traj).outcome.fail_reason) == ("context_exceeded", "context_exceeded")


@pytest.mark.parametrize("harness", ["batched", "async"])
@pytest.mark.parametrize("script, reason", [
    # The first prompt holds nothing the model wrote: the task, the instructions or max_tokens are
    # too long for the server, the setup's fault.
    ([Status(400, VLLM_TOO_LONG)], {"batched": "policy_error", "async": "http_400"}),
    # A 400 that is not about the context (a request the server cannot take, an unknown model).
    ([LIST_TABLES, Status(400, "[{'type': 'extra_forbidden', 'loc': ('body', 'return_token_ids')}]")],
     {"batched": "policy_error", "async": "http_400"}),
    ([LIST_TABLES, Status(404, "The model `test-model` does not exist.")],
     {"batched": "policy_error", "async": "http_404"}),
], ids=["first_prompt", "bad_request", "unknown_model"])
def test_other_refusals_stay_env_faults(script, reason, harness, tmp_path):
    task = synthesize("sql", 20, seed=0).tasks[0]
    with ScriptedChatServer(script) as srv:
        traj = run_one(task, srv.url, harness, tmp_path)
    assert (traj.end, traj.outcome.tier, traj.outcome.fail_reason) == ("env_fault", "env_fault", reason[harness])
