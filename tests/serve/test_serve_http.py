"""``trajforge serve`` over a real loopback HTTP server, read by the official openai client.

The model boundary is scripted (``ScriptedBackend``): what the model "says" is fixed, so the
parse → tool_calls path, streaming and errors are checked exactly. The tokenizer, the dialect, the
HTTP server and the client are all real. test_serve_hf.py runs the same server on a real model.
"""

import json

import httpx
import openai
import pytest
from transformers import AutoTokenizer

from tests.serve.conftest import ScriptedBackend
from trajforge.envs import env_class
from trajforge.parse import get_dialect
from trajforge.parse.openai import DeltaAccumulator
from trajforge.schema import Message
from trajforge.serve import ChatService, Server, served_models

TOOLS = env_class("sql").toolset().openai()
CALL = '<tool_call>\n{"name": "run_sql", "arguments": {"query": "SELECT COUNT(*) FROM customers"}}\n</tool_call>'


@pytest.fixture
def serve(tiny):
    """serve(reply) → (server, backend, client): a started server whose model says ``reply``."""
    base, adapters = tiny
    tok = AutoTokenizer.from_pretrained(base)
    started = []

    def make(reply):
        backend = ScriptedBackend(tok, reply if callable(reply) else lambda a, p: reply)
        server = Server(ChatService(backend, served_models("tiny", adapters))).start()
        started.append(server)
        return server, backend, openai.OpenAI(base_url=server.url, api_key="unused", max_retries=0)

    yield make
    for s in started:
        s.close()


def test_close_stops_serve_forever_in_a_callers_thread(tiny):
    """A thread the caller started on ``serve_forever`` ends at ``close()`` (it used to keep polling the
    closed socket at 100% of a core), and one that gets there after ``close()`` returns at once."""
    import threading
    import time

    base, adapters = tiny
    backend = ScriptedBackend(AutoTokenizer.from_pretrained(base), lambda a, p: "hi")
    server = Server(ChatService(backend, served_models("tiny", adapters)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    assert httpx.get(f"{server.url}/models", timeout=10).status_code == 200
    server.close()
    thread.join(timeout=10)
    assert not thread.is_alive()

    late = Server(ChatService(backend, served_models("tiny", adapters)))
    late.close()
    started = time.monotonic()
    late.serve_forever()  # closed first: nothing to serve, no loop on a dead socket
    assert time.monotonic() - started < 5


def ask(client, **kw):
    kw.setdefault("model", "alpha")
    kw.setdefault("messages", [{"role": "user", "content": "How many customers are there?"}])
    return client.chat.completions.create(**kw)


def test_models_lists_base_and_adapters(serve):
    _, _, client = serve("hi")
    models = {m.id: m for m in client.models.list().data}
    assert list(models) == ["tiny", "alpha", "beta"]
    assert models["alpha"].model_extra["parent"] == "tiny" and models["tiny"].model_extra["parent"] is None


def test_tool_call_is_parsed_into_openai_tool_calls(serve):
    server, backend, client = serve("Let me count.\n" + CALL)
    resp = ask(client, tools=TOOLS, temperature=0)
    choice = resp.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content == "Let me count."
    [call] = choice.message.tool_calls
    assert call.id.startswith("call_") and call.type == "function" and call.function.name == "run_sql"
    assert json.loads(call.function.arguments) == {"query": "SELECT COUNT(*) FROM customers"}
    # The request's tools were rendered by the adapter's dialect into a system turn, through the
    # tokenizer's chat template: the same prompt the HF policy and SFT build.
    adapter, prompt, sampling = backend.calls[0]
    assert adapter == "alpha" and sampling.temperature == 0
    toolset = env_class("sql").toolset()
    asked = [Message(role="system"), Message(role="user", content="How many customers are there?")]
    chat = get_dialect("hermes").to_chat(asked, toolset)
    tok = backend.tokenizer
    want = tok(tok.apply_chat_template(chat, tokenize=False, add_generation_prompt=True), add_special_tokens=False)
    assert prompt == want["input_ids"]
    assert resp.usage.prompt_tokens == len(prompt) and resp.usage.completion_tokens == len(
        tok("Let me count.\n" + CALL, add_special_tokens=False)["input_ids"]) + 1


def test_base_model_and_each_adapter_reach_the_backend(serve):
    _, backend, client = serve(lambda adapter, prompt: f"I am {adapter or 'base'}.")
    assert [ask(client, model=m).choices[0].message.content for m in ("tiny", "alpha", "beta")] == [
        "I am base.", "I am alpha.", "I am beta."]
    assert [c[0] for c in backend.calls] == [None, "alpha", "beta"]


def test_rejected_call_comes_back_as_text(serve):
    bad = '<tool_call>\n{"name": "drop_table", "arguments": {}}\n</tool_call>'
    _, _, client = serve(bad)
    choice = ask(client, tools=TOOLS).choices[0]
    assert choice.message.tool_calls is None and choice.message.content == bad and choice.finish_reason == "stop"


def test_history_with_calls_and_results_is_rendered_by_the_dialect(serve):
    _, backend, client = serve("done")
    messages = [{"role": "system", "content": "Be brief."},
                {"role": "user", "content": "Count customers."},
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": "call_1", "type": "function",
                     "function": {"name": "run_sql", "arguments": '{"query": "SELECT 1"}'}}]},
                {"role": "tool", "tool_call_id": "call_1", "content": "1\n(1 row)"}]
    ask(client, messages=messages, tools=TOOLS)
    text = backend.tokenizer.decode(backend.calls[0][1])
    assert "Be brief.\n\n# Tools" in text and "<tools>" in text
    assert '<tool_call>\n{"name": "run_sql", "arguments": {"query": "SELECT 1"}}\n</tool_call>' in text
    assert "<tool_response>\n1\n(1 row)\n</tool_response>" in text


def test_tool_choice_none_and_named(serve):
    _, backend, client = serve(CALL)
    choice = ask(client, tools=TOOLS, tool_choice="none").choices[0]
    assert choice.message.content == CALL and choice.message.tool_calls is None
    assert "<tools>" not in backend.tokenizer.decode(backend.calls[-1][1])
    choice = ask(client, tools=TOOLS, tool_choice={"type": "function", "function": {"name": "run_sql"}}).choices[0]
    assert choice.message.tool_calls[0].function.name == "run_sql"
    prompt = backend.tokenizer.decode(backend.calls[-1][1])
    assert '"run_sql"' in prompt and '"list_tables"' not in prompt  # only the named tool is shown
    with pytest.raises(openai.BadRequestError, match="drop_table"):
        ask(client, tools=TOOLS, tool_choice={"type": "function", "function": {"name": "drop_table"}})


def test_token_ids_and_logprobs_like_vllm(serve):
    server, backend, client = serve("hello there")
    resp = ask(client, logprobs=True, top_logprobs=2, extra_body={"return_token_ids": True})
    choice = resp.choices[0]
    ids = backend.tokenizer("hello there", add_special_tokens=False)["input_ids"] + [backend.tokenizer.eos_token_id]
    assert resp.model_extra["prompt_token_ids"] == backend.calls[0][1]
    assert choice.model_extra["token_ids"] == ids
    lps = choice.logprobs.content
    assert [e.logprob for e in lps] == [-0.25 * (k + 1) for k in range(len(ids))]
    assert "".join(e.token for e in lps[:-1]) == "hello there" and lps[-1].token == "<|im_end|>"
    assert [t.logprob for t in lps[0].top_logprobs] == [-0.25, -9.0]
    # Without the flags: no token fields (plain OpenAI shape).
    plain = ask(client).choices[0]
    assert plain.logprobs is None and "token_ids" not in (plain.model_extra or {})


def test_stop_strings_end_the_completion(serve):
    _, _, client = serve("one two END three")
    choice = ask(client, stop=["END"]).choices[0]
    assert choice.message.content == "one two " and choice.finish_reason == "stop"
    streamed = "".join(c.choices[0].delta.content or "" for c in ask(client, stop="END", stream=True) if c.choices)
    assert streamed == "one two "


def test_max_tokens_gives_length(serve):
    _, _, client = serve("a long answer that goes on")
    choice = ask(client, max_tokens=2).choices[0]
    assert choice.finish_reason == "length" and len(choice.message.content) > 0


def test_streaming_text_token_by_token(serve):
    _, backend, client = serve("streamed words, é and ü")
    chunks = list(ask(client, stream=True, logprobs=True, stream_options={"include_usage": True},
                      extra_body={"return_token_ids": True}))
    content = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
    assert "".join(content) == "streamed words, é and ü" and len(content) > 3
    assert chunks[0].choices[0].delta.role == "assistant" and chunks[0].model_extra["prompt_token_ids"]
    ids = [i for c in chunks if c.choices for i in (c.choices[0].model_extra.get("token_ids") or [])]
    assert ids == backend.tokenizer("streamed words, é and ü", add_special_tokens=False)["input_ids"] + [
        backend.tokenizer.eos_token_id]
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].usage.completion_tokens == len(ids)


def test_streaming_tool_calls_with_the_openai_client(serve):
    _, _, client = serve("Counting.\n" + CALL)
    content, calls, finish = "", {}, None
    for c in ask(client, tools=TOOLS, stream=True):
        delta = c.choices[0].delta
        content += delta.content or ""
        for tc in delta.tool_calls or []:
            entry = calls.setdefault(tc.index, {"id": None, "name": "", "arguments": ""})
            entry["id"] = tc.id or entry["id"]
            entry["name"] += (tc.function.name or "") if tc.function else ""
            entry["arguments"] += (tc.function.arguments or "") if tc.function else ""
        finish = c.choices[0].finish_reason or finish
    assert content == "Counting." and finish == "tool_calls"
    assert calls[0]["id"].startswith("call_") and calls[0]["name"] == "run_sql"
    assert json.loads(calls[0]["arguments"]) == {"query": "SELECT COUNT(*) FROM customers"}


def test_the_sse_stream_ends_with_done_and_reassembles(serve):
    server, _, _ = serve("Counting.\n" + CALL)
    with httpx.stream("POST", server.url + "/chat/completions", json={
            "model": "beta", "messages": [{"role": "user", "content": "hi"}], "tools": TOOLS,
            "stream": True}) as r:
        assert r.headers["content-type"] == "text/event-stream"
        lines = [ln for ln in r.iter_lines() if ln]
    assert lines[-1] == "data: [DONE]" and all(ln.startswith("data: ") for ln in lines)
    chunks = [json.loads(ln[6:]) for ln in lines[:-1]]
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"
    # The project's own stream assembler reads the chunks back into the call.
    acc = DeltaAccumulator()
    for c in chunks:
        acc.feed(c)
    result = acc.finish(env_class("sql").toolset())
    assert [(c.name, c.arguments) for c in result.calls] == [("run_sql", {"query": "SELECT COUNT(*) FROM customers"})]
    assert result.text == "Counting." and not result.errors


def test_errors_are_openai_shaped(serve):
    server, _, client = serve("x")
    with pytest.raises(openai.NotFoundError) as e:
        ask(client, model="gamma")
    assert e.value.body["code"] == "model_not_found" and "gamma" in e.value.body["message"]
    r = httpx.post(server.url + "/chat/completions", content=b"{not json",
                   headers={"Content-Type": "application/json"})
    assert r.status_code == 400 and "not valid JSON" in r.json()["error"]["message"]
    r = httpx.post(server.url + "/chat/completions", json={"model": "alpha"})
    assert r.status_code == 400 and r.json()["error"]["param"] == "messages"
    r = httpx.post(server.url + "/chat/completions",
                   json={"model": "alpha", "messages": [{"role": "robot", "content": "x"}]})
    assert r.status_code == 400 and "messages[0].role" in r.json()["error"]["message"]
    r = httpx.post(server.url + "/chat/completions", json={"model": "alpha", "temperature": 7,
                                                           "messages": [{"role": "user", "content": "x"}]})
    assert r.status_code == 400 and r.json()["error"]["param"] == "temperature"
    r = httpx.post(server.url + "/chat/completions", json={"model": "alpha", "messages": [
        {"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "{oops"}}]}]})
    assert r.status_code == 400 and "arguments is not valid JSON" in r.json()["error"]["message"]
    # A prompt past the context says so in OpenAI's code (clients tell it from a bad request by it).
    r = httpx.post(server.url + "/chat/completions",
                   json={"model": "alpha", "messages": [{"role": "user", "content": "x"}] * 4097})
    assert r.status_code == 400 and r.json()["error"]["code"] == "context_length_exceeded"
    assert httpx.get(server.url + "/nothing").status_code == 404
    # The server still answers after the errors.
    assert ask(client).choices[0].message.content == "x"
