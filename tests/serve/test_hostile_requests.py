"""Every malformed request to ``trajforge serve`` gets an OpenAI-style 4xx JSON answer, in time.

A real server on loopback (the model boundary scripted, as in test_serve_http.py), spoken to with raw
sockets so nothing in a client library tidies the request first. Each case checks: an HTTP answer
came (not a dropped connection), its status is the 4xx named, its body is
``{"error": {"message", "type", "param", "code"}}`` naming what was wrong, it came within a time
budget, and the server still answers a good request afterwards.
"""

from __future__ import annotations

import json
import socket
import time
from typing import Any, NamedTuple

import httpx
import pytest
from transformers import AutoTokenizer

from tests.serve.conftest import ScriptedBackend
from trajforge.envs import env_class
from trajforge.serve import ChatService, Server, served_models
from trajforge.serve.http import MAX_BODY
from trajforge.serve.protocol import MAX_DEPTH, MAX_STOPS

TOOLS = env_class("sql").toolset().openai()
BUDGET_S = 3.0
"""Most seconds any malformed request may take to be answered (2 busy CPU cores)."""
TIMEOUT_S = 1.0
"""The server's request timeout here (the default is 30 s)."""


class Answer(NamedTuple):
    status: int
    headers: dict[str, str]
    body: Any
    seconds: float


@pytest.fixture(scope="module")
def server(tiny):
    base, adapters = tiny
    tok = AutoTokenizer.from_pretrained(base)
    # The reply holds a call whose argument decodes to a lone surrogate: answers must stay UTF-8.
    reply = '<tool_call>\n{"name": "run_sql", "arguments": {"query": "SELECT \'\\ud83d\'"}}\n</tool_call>'
    backend = ScriptedBackend(tok, lambda adapter, prompt: reply if adapter == "beta" else "hello")
    srv = Server(ChatService(backend, served_models("tiny", adapters)), allow_adapter_updates=True,
                 request_timeout_s=TIMEOUT_S).start()
    yield srv
    srv.close()


def send(server, head: str, body: bytes = b"", *, wait_s: float = 10.0) -> Answer:
    """One request over a fresh socket, read until the server closes or the answer is complete."""
    started = time.monotonic()
    with socket.create_connection((server.host, server.port), timeout=wait_s) as s:
        s.sendall(head.encode("latin-1") + body)
        data = b""
        while True:
            try:
                got = s.recv(1 << 16)
            except ConnectionResetError:
                pytest.fail(f"connection reset after {len(data)} bytes: {data[:200]!r}")
            if not got:
                break
            data += got
            head_end = data.find(b"\r\n\r\n")
            if head_end >= 0:
                lines = data[:head_end].decode("latin-1").split("\r\n")
                headers = {k.lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:])}
                if len(data) - head_end - 4 >= int(headers.get("content-length", 1 << 40)):
                    break
                if headers.get("transfer-encoding") == "chunked" and data.endswith(b"\r\n0\r\n\r\n"):
                    break
    seconds = time.monotonic() - started
    assert data, "the server closed the connection without an answer"
    head_bytes, _, payload = data.partition(b"\r\n\r\n")
    lines = head_bytes.decode("latin-1").split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:])}
    status = int(lines[0].split()[1])
    text = payload.decode("utf-8")  # strict: every answer is valid UTF-8
    return Answer(status, headers, json.loads(text) if headers.get("content-type") == "application/json" else text,
                  seconds)


def post(server, body: bytes, path: str = "/v1/chat/completions", headers: str | None = None) -> Answer:
    if headers is None:
        headers = f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
    return send(server, f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{headers}\r\n", body)


def check_error(answer: Answer, status: int, needle: str, param: str | None = "-") -> None:
    assert answer.status == status, answer
    assert answer.headers["content-type"] == "application/json"
    err = answer.body["error"]
    assert set(err) == {"message", "type", "param", "code"}
    assert needle in err["message"], err
    assert err["type"] == "invalid_request_error"
    if param != "-":
        assert err["param"] == param, err
    assert "Traceback" not in err["message"]
    assert answer.seconds < BUDGET_S, f"answered in {answer.seconds:.1f} s"


def still_serves(server) -> None:
    r = httpx.post(server.url + "/chat/completions", timeout=10,
                   json={"model": "alpha", "messages": [{"role": "user", "content": "hi"}]})
    assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"] == "hello"


def ask(**fields) -> dict:
    body = {"model": "alpha", "messages": [{"role": "user", "content": "hi"}]}
    body.update(fields)
    return body


def as_json(obj) -> bytes:
    return json.dumps(obj).encode()


def args_call(arguments) -> dict:
    return ask(messages=[{"role": "assistant", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "run_sql", "arguments": arguments}}]}])


DEEP = b"[" * 100_000 + b"]" * 100_000
HUGE_INT = b"9" * 5000

# (case id, raw body, status, words the message must hold, param)
BODIES = [
    ("deep-array", b'{"model": "alpha", "messages": ' + DEEP + b"}", 400, "nested deeper", None),
    ("deep-object", b'{"model": "alpha", "x": ' + b'{"a": ' * 5000 + b"1" + b"}" * 5000 + b"}", 400,
     "nested deeper", None),
    ("nested-just-past-the-limit", as_json(ask(metadata=json.loads("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1)))),
     400, f"nested deeper than {MAX_DEPTH}", "metadata"),
    ("huge-int", b'{"model": "alpha", "seed": ' + HUGE_INT + b', "messages": []}', 400,
     "integer string conversion", None),
    ("huge-int-in-unknown-field", b'{"model": "alpha", "extra": -' + HUGE_INT + b"}", 400,
     "integer string conversion", None),
    ("huge-float", b'{"model": "alpha", "temperature": 1e999, "messages": [{"role": "user", "content": "x"}]}',
     400, "temperature", "temperature"),
    ("nan", b'{"model": "alpha", "top_p": NaN, "messages": [{"role": "user", "content": "x"}]}', 400,
     "NaN is not a JSON number", None),
    ("lone-surrogate-content", b'{"model": "alpha", "messages": [{"role": "user", "content": "a\\ud83d"}]}',
     400, "lone UTF-16 surrogate", "messages[0].content"),
    ("lone-surrogate-key", b'{"model": "alpha", "messages": [{"role": "user", "\\udc00": "x"}]}', 400,
     "lone UTF-16 surrogate", "messages[0].\\udc00"),  # the key, shown escaped
    ("lone-surrogate-model", b'{"model": "\\udfff", "messages": [{"role": "user", "content": "x"}]}', 400,
     "lone UTF-16 surrogate", "model"),
    ("invalid-utf8", b'{"model": "alpha", "messages": [{"role": "user", "content": "\xff\xfe"}]}', 400,
     "not valid UTF-8", None),
    ("utf8-encoded-surrogate", b'{"model": "alpha", "messages": [{"role": "user", "content": "\xed\xa0\xbd"}]}',
     400, "not valid UTF-8", None),
    ("not-json", b"{model: alpha}", 400, "not valid JSON", None),
    ("empty-body", b"", 400, "not valid JSON", None),
    ("array-body", b"[1, 2]", 400, "must be a JSON object, not an array", None),
    ("string-body", b'"hi"', 400, "must be a JSON object, not a string", None),
    ("null-body", b"null", 400, "must be a JSON object, not null", None),
    ("missing-model", as_json({"messages": [{"role": "user", "content": "x"}]}), 400, "model", "model"),
    ("missing-messages", as_json({"model": "alpha"}), 400, "messages", "messages"),
    ("empty-messages", as_json(ask(messages=[])), 400, "at least 1", "messages"),
    ("model-number", as_json(ask(model=7)), 400, "valid string", "model"),
    ("messages-string", as_json(ask(messages="hi")), 400, "valid list", "messages"),
    ("message-string", as_json(ask(messages=["hi"])), 400, "messages[0]", "messages"),
    ("role-missing", as_json(ask(messages=[{"content": "x"}])), 400, "role must be", "messages[0].role"),
    ("role-robot", as_json(ask(messages=[{"role": "robot", "content": "x"}])), 400, "'robot'", "messages[0].role"),
    ("role-array", as_json(ask(messages=[{"role": ["user"], "content": "x"}])), 400, "an array",
     "messages[0].role"),
    ("content-number", as_json(ask(messages=[{"role": "user", "content": 5}])), 400, "must be a string",
     "messages[0].content"),
    ("content-image", as_json(ask(messages=[{"role": "user", "content": [{"type": "image_url"}]}])), 400,
     "only text", "messages[0].content"),
    ("content-part-text-object", as_json(ask(messages=[{"role": "user", "content": [{"type": "text",
                                                                                     "text": {}}]}])),
     400, "text must be a string", "messages[0].content"),
    ("tool-call-id-number", as_json(ask(messages=[{"role": "tool", "tool_call_id": 5, "content": "x"}])), 400,
     "tool_call_id must be a string", "messages[0].tool_call_id"),
    ("tool-call-id-array", as_json(ask(messages=[{"role": "tool", "tool_call_id": [], "content": "x"}])), 400,
     "tool_call_id must be a string", "messages[0].tool_call_id"),
    ("tool-message-name-number", as_json(ask(messages=[{"role": "tool", "name": 1, "content": "x"}])), 400,
     "name must be a string", "messages[0].name"),
    ("tool-calls-string", as_json(ask(messages=[{"role": "assistant", "tool_calls": "x"}])), 400,
     "must be an array", "messages[0].tool_calls"),
    ("tool-call-number", as_json(ask(messages=[{"role": "assistant", "tool_calls": [5]}])), 400,
     "needs function.name", "messages[0].tool_calls[0]"),
    ("tool-call-id-object", as_json(ask(messages=[{"role": "assistant", "tool_calls": [
        {"id": {}, "function": {"name": "f", "arguments": "{}"}}]}])), 400, "id must be a string",
     "messages[0].tool_calls[0].id"),
    ("call-arguments-array", as_json(args_call("[1]")), 400, "must be a JSON object",
     "messages[0].tool_calls[0].function.arguments"),
    ("call-arguments-not-json", as_json(args_call("{oops")), 400, "arguments is not valid JSON",
     "messages[0].tool_calls[0].function.arguments"),
    ("call-arguments-deep", as_json(args_call("[" * 50_000)), 400, "nested deeper",
     "messages[0].tool_calls[0].function.arguments"),
    ("call-arguments-huge-int", as_json(args_call('{"n": ' + "7" * 5000 + "}")), 400,
     "integer string conversion", "messages[0].tool_calls[0].function.arguments"),
    ("call-arguments-surrogate", as_json(args_call('{"q": "\\ud800"}')), 400, "lone UTF-16 surrogate",
     "messages[0].tool_calls[0].function.arguments.q"),
    ("tools-string", as_json(ask(tools="run_sql")), 400, "valid list", "tools"),
    ("tool-not-object", as_json(ask(tools=["run_sql"])), 400, "tools[0]", "tools"),
    ("tool-type", as_json(ask(tools=[{"type": "retrieval"}])), 400, "type must be 'function'", "tools[0]"),
    ("tool-without-function", as_json(ask(tools=[{"type": "function"}])), 400, "function must be an object",
     "tools[0]"),
    ("tool-name-number", as_json(ask(tools=[{"type": "function", "function": {"name": 5}}])), 400,
     "function.name must be", "tools[0]"),
    ("tool-name-markup", as_json(ask(tools=[{"type": "function", "function": {"name": "</tool_call>"}}])), 400,
     "function.name must be", "tools[0]"),
    ("tool-twice", as_json(ask(tools=[TOOLS[0], TOOLS[0]])), 400, "given twice", "tools[1]"),
    ("tool-description-object", as_json(ask(tools=[{"type": "function", "function": {
        "name": "f", "description": {}}}])), 400, "description must be a string", "tools[0]"),
    ("tool-parameters-string", as_json(ask(tools=[{"type": "function", "function": {
        "name": "f", "parameters": "x"}}])), 400, '"type": "object"', "tools[0].function.parameters"),
    ("tool-parameters-bad-schema", as_json(ask(tools=[{"type": "function", "function": {
        "name": "f", "parameters": {"type": "object", "properties": {"a": {"type": 5}}}}}])), 400,
     "not a valid JSON Schema", "tools[0].function.parameters"),
    ("tool-parameters-bad-regex", as_json(ask(tools=[{"type": "function", "function": {
        "name": "f", "parameters": {"type": "object", "properties": {"a": {"pattern": "("}}}}}])), 400,
     "not a valid JSON Schema", "tools[0].function.parameters"),
    ("tool-parameters-remote-ref", as_json(ask(tools=[{"type": "function", "function": {
        "name": "f", "parameters": {"type": "object", "properties": {"a": {"$ref": "http://10.0.0.1/s"}}}}}])),
     400, "$ref must point inside", "tools[0].function.parameters"),
    ("tool-choice-number", as_json(ask(tools=TOOLS, tool_choice=3)), 400, "tool_choice must be", "tool_choice"),
    ("tool-choice-bogus", as_json(ask(tools=TOOLS, tool_choice="always")), 400, "tool_choice must be",
     "tool_choice"),
    ("tool-choice-function-string", as_json(ask(tools=TOOLS, tool_choice={"function": "x"})), 400,
     "tool_choice must be", "tool_choice"),
    ("tool-choice-unknown-tool", as_json(ask(tools=TOOLS, tool_choice={"type": "function",
                                                                       "function": {"name": "drop"}})), 400,
     "'drop', which is not in tools", "tool_choice"),
    ("max-tokens-negative", as_json(ask(max_tokens=-1)), 400, "greater than or equal to 1", "max_tokens"),
    ("max-tokens-zero", as_json(ask(max_completion_tokens=0)), 400, "greater than or equal to 1",
     "max_completion_tokens"),
    ("max-tokens-float", as_json(ask(max_tokens=1.5)), 400, "valid integer", "max_tokens"),
    ("max-tokens-string", as_json(ask(max_tokens="10")), 400, "valid integer", "max_tokens"),
    ("n-two", as_json(ask(n=2)), 400, "less than or equal to 1", "n"),
    ("n-huge", as_json(ask(n=10**30)), 400, "less than or equal to 1", "n"),
    ("temperature-string", as_json(ask(temperature="hot")), 400, "valid number", "temperature"),
    ("temperature-high", as_json(ask(temperature=7)), 400, "less than or equal to 2", "temperature"),
    ("top-p-zero", as_json(ask(top_p=0)), 400, "greater than 0", "top_p"),
    ("seed-past-64-bits", as_json(ask(seed=2**70)), 400, "less than or equal to", "seed"),
    ("seed-string", as_json(ask(seed="1")), 400, "valid integer", "seed"),
    ("top-logprobs-high", as_json(ask(logprobs=True, top_logprobs=21)), 400, "20", "top_logprobs"),
    ("logprobs-string", as_json(ask(logprobs="yes")), 400, "valid boolean", "logprobs"),
    ("stop-number", as_json(ask(stop=[1])), 400, "stop must be a string or a list of strings", "stop"),
    ("stop-too-many", as_json(ask(stop=["a"] * 10_000)), 400, f"at most {MAX_STOPS}", "stop"),
    ("stream-string", as_json(ask(stream="yes")), 400, "valid boolean", "stream"),
    ("stream-number", as_json(ask(stream=1)), 400, "valid boolean", "stream"),
    ("stream-options-string", as_json(ask(stream=True, stream_options="usage")), 400, "stream_options",
     "stream_options"),
    ("stream-options-usage-string", as_json(ask(stream=True, stream_options={"include_usage": "yes"})), 400,
     "valid boolean", "stream_options"),
    ("stream-n-two", as_json(ask(stream=True, n=2)), 400, "less than or equal to 1", "n"),
    ("stream-surrogate", b'{"model": "alpha", "stream": true, "messages": [{"role": "user", "content": "\\ud800"}]}',
     400, "lone UTF-16 surrogate", "messages[0].content"),
    ("stream-deep", b'{"model": "alpha", "stream": true, "messages": ' + DEEP + b"}", 400, "nested deeper", None),
    ("stream-bad-tool", as_json(ask(stream=True, tools=[{"type": "function", "function": {}}])), 400,
     "function.name must be", "tools[0]"),
    ("stream-unknown-model", as_json(ask(stream=True, model="gamma")), 404, "`gamma` does not exist", "model"),
    ("prompt-too-long", as_json(ask(messages=[{"role": "user", "content": "word " * 2_000_000}])), 400,
     "characters", "messages"),
    ("too-many-turns", as_json(ask(messages=[{"role": "user", "content": ""}] * 100_000)), 400, "turns",
     "messages"),
]


@pytest.mark.parametrize("body,status,needle,param", [c[1:] for c in BODIES], ids=[c[0] for c in BODIES])
def test_malformed_body_is_answered_with_a_4xx(server, body, status, needle, param):
    check_error(post(server, body), status, needle, param)
    still_serves(server)


LORA = [
    ("not-object", b"[1]", 400, "must be a JSON object"),
    ("deep", DEEP, 400, "nested deeper"),
    ("invalid-utf8", b'{"lora_name": "\xff"}', 400, "not valid UTF-8"),
    ("name-number", b'{"lora_name": 5, "lora_path": "/tmp"}', 400, "'lora_name' is required"),
    ("path-missing", b'{"lora_name": "x"}', 400, "'lora_path' is required"),
    ("path-surrogate", b'{"lora_name": "x", "lora_path": "\\ud800"}', 400, "lone UTF-16 surrogate"),
    ("path-nul", b'{"lora_name": "x", "lora_path": "/tmp/\\u0000x"}', 400, "adapter_config.json"),
    ("path-too-long", as_json({"lora_name": "x", "lora_path": "p" * 100_000}), 400, "File name too long"),
    ("name-bad", b'{"lora_name": "bad name!", "lora_path": "/tmp"}', 400, "must start with"),
    ("name-taken", b'{"lora_name": "alpha", "lora_path": "/tmp"}', 400, "already been loaded"),
]


@pytest.mark.parametrize("body,status,needle", [c[1:] for c in LORA], ids=[c[0] for c in LORA])
def test_malformed_adapter_load_is_answered_with_a_4xx(server, body, status, needle):
    check_error(post(server, body, "/v1/load_lora_adapter"), status, needle)
    assert {m["id"] for m in httpx.get(server.url + "/models").json()["data"]} == {"tiny", "alpha", "beta"}


@pytest.mark.parametrize("body,status,needle", [
    (b'{"lora_name": "\\udfff"}', 400, "lone UTF-16 surrogate"),
    (b'{"lora_name": ["alpha"]}', 400, "'lora_name' is required"),
    (b'{"lora_name": "tiny"}', 404, "cannot be found"),  # the base model is not an adapter
    (b'{"lora_name": "' + b"a" * 100_000 + b'"}', 404, "cannot be found"),
], ids=["surrogate", "array", "base-model", "long-name"])
def test_malformed_adapter_unload_is_answered_with_a_4xx(server, body, status, needle):
    check_error(post(server, body, "/v1/unload_lora_adapter"), status, needle)
    still_serves(server)


GOOD = as_json(ask())
HEADERS = [
    ("no-content-length", "Content-Type: application/json\r\n", GOOD, 411, "Content-Length header is required"),
    ("chunked", "Transfer-Encoding: chunked\r\n", b"5\r\n{\"a\":\r\n0\r\n\r\n", 411, "chunked"),
    ("negative-length", "Content-Length: -5\r\n", GOOD, 400, "one decimal number"),
    ("letters-length", "Content-Length: abc\r\n", GOOD, 400, "one decimal number"),
    ("non-ascii-digit-length", "Content-Length: \xb2\r\n", GOOD, 400, "one decimal number"),  # '²'.isdigit()
    ("length-past-int-string-limit", f"Content-Length: {'9' * 5000}\r\n", GOOD, 400, "one decimal number"),
    ("two-lengths", f"Content-Length: {len(GOOD)}\r\nContent-Length: 3\r\n", GOOD, 400, "one decimal number"),
    ("length-over-the-limit", f"Content-Length: {10**12}\r\n", GOOD, 413, f"at most {MAX_BODY}"),
    ("length-shorter-than-body", "Content-Length: 5\r\n", GOOD, 400, "not valid JSON"),
]


@pytest.mark.parametrize("headers,body,status,needle", [c[1:] for c in HEADERS], ids=[c[0] for c in HEADERS])
def test_bad_framing_is_answered_with_a_4xx(server, headers, body, status, needle):
    check_error(post(server, body, headers=headers), status, needle)
    still_serves(server)


def test_a_body_that_stops_arriving_gets_408_after_the_request_timeout(server):
    answer = post(server, GOOD, headers=f"Content-Length: {len(GOOD) + 100}\r\n")
    check_error(answer, 408, "stopped arriving")
    assert answer.seconds >= TIMEOUT_S * 0.9
    still_serves(server)


def test_a_body_over_the_limit_is_refused_without_resetting_the_connection(server):
    # The client is still uploading when the 413 is written; the server reads and drops the rest
    # (lingers) so the client gets to read the answer rather than a reset.
    started = time.monotonic()
    r = httpx.post(server.url + "/chat/completions", content=b"x" * (MAX_BODY + 1), timeout=30,
                   headers={"Content-Type": "application/json"})
    assert r.status_code == 413 and r.json()["error"]["code"] == "body_too_large"
    assert time.monotonic() - started < BUDGET_S + 3
    still_serves(server)


STDLIB = [
    ("bad-request-line", "GARBAGE\r\n\r\n", 400, "Bad request"),
    ("bad-version", "GET /v1/models HTTP/9.9\r\nHost: x\r\n\r\n", 505, "Invalid HTTP version"),
    ("uri-too-long", f"GET /{'a' * 70_000} HTTP/1.1\r\nHost: x\r\n\r\n", 414, "URI Too Long"),
    ("too-many-headers", "GET /v1/models HTTP/1.1\r\n" + "X-A: 1\r\n" * 150 + "\r\n", 431, "Too many headers"),
    ("header-line-too-long", f"GET /v1/models HTTP/1.1\r\nX-A: {'b' * 70_000}\r\n\r\n", 431, "Line too long"),
    ("unknown-method", "PUT /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n", 405,
     "Unsupported method"),
    ("unknown-path", "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}", 404, "no route"),
    ("unknown-get-path", "GET /v1/models/\xed\xff HTTP/1.1\r\nHost: x\r\n\r\n", 404, "no route"),
]


@pytest.mark.parametrize("request_text,status,needle", [c[1:] for c in STDLIB], ids=[c[0] for c in STDLIB])
def test_requests_refused_by_the_http_layer_get_json_errors_too(server, request_text, status, needle):
    answer = send(server, request_text)
    assert answer.status == status and needle in answer.body["error"]["message"], answer
    assert set(answer.body["error"]) == {"message", "type", "param", "code"}
    assert answer.seconds < BUDGET_S
    still_serves(server)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_reply_decoding_to_a_lone_surrogate_still_answers_utf8(server, stream):
    """The model's own output is hostile too: its call's argument JSON decodes to a lone surrogate.
    The answer is 200 and valid UTF-8 JSON (``send`` decodes strictly), whatever the parser made of it."""
    body = as_json(ask(model="beta", tools=TOOLS, stream=stream))
    answer = post(server, body)
    assert answer.status == 200 and answer.seconds < BUDGET_S
    if stream:
        chunked = answer.body
        assert "data: [DONE]" in chunked and '"error"' not in chunked
    else:
        choice = answer.body["choices"][0]
        assert choice["message"]["content"] or choice["message"].get("tool_calls")


def test_keep_alive_survives_a_good_request_and_closes_after_a_bad_one(server):
    good = f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: {len(GOOD)}\r\n\r\n".encode() + GOOD
    bad = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\n["
    with socket.create_connection((server.host, server.port), timeout=10) as s:
        s.sendall(good + good + bad)
        data = b""
        while got := s.recv(1 << 16):
            data += got
    assert data.count(b"HTTP/1.1 200 OK") == 2 and data.count(b"HTTP/1.1 400 Bad Request") == 1
    assert data.rstrip().endswith(b"}}")  # the connection closed after the error's body
