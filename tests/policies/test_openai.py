"""OpenAI-compatible policy against a real loopback HTTP server with a scripted model behind it."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from trajforge.harness import run_episodes
from trajforge.policies import make_policy
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
