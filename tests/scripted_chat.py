"""A real loopback OpenAI-compatible server that plays a fixed script of replies (stdlib only).

    with ScriptedChatServer(['{"prompt": ...}', Status(503), "plain text"]) as srv:
        ... LLMConfig(url=srv.url, model="m") ...
        srv.requests  # every JSON body received, in order

Each POST to ``/v1/chat/completions`` takes the next script item: a string is the assistant's
message content; a dict is the whole assistant message (``content`` and ``tool_calls`` as a
server would send them, of any shape); a ``Status`` is an HTTP error reply (with optional headers
such as ``Retry-After``); a callable gets the request body and returns any of these. When the script runs out
the server answers 500, so a test that asks for more than it scripted fails loudly instead of
hanging. (``tests/openai_server.py`` is the other test server: it follows task references and
injects random faults, for harness and benchmark runs.)
"""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable, NamedTuple, Union


class Status(NamedTuple):
    """An HTTP error reply."""

    code: int
    body: str = "scripted error"
    headers: dict[str, str] = {}


Reply = Union[str, dict, Status, Callable[[dict], Union[str, dict, Status]]]


class ScriptedChatServer:
    def __init__(self, script: list[Reply]):
        self.script = list(script)
        self.requests: list[dict] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if self.path != "/v1/chat/completions":
                    return self._send(404, {"error": f"no route {self.path}"})
                with server._lock:
                    server.requests.append(body)
                    item = server.script.pop(0) if server.script else Status(500, "script exhausted")
                if callable(item):
                    item = item(body)
                if isinstance(item, Status):
                    return self._send(item.code, {"error": item.body}, item.headers)
                msg = {"role": "assistant", **item} if isinstance(item, dict) else {"role": "assistant", "content": item}
                self._send(200, {"id": "x", "object": "chat.completion", "model": body.get("model"),
                                 "choices": [{"index": 0, "message": msg, "finish_reason": "stop"}]})

            def _send(self, code, payload, headers=None):
                data = json.dumps(payload).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> "ScriptedChatServer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def unused_url() -> str:
    """A loopback URL nothing listens on (a port bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"
