"""Every dialect: render→parse round trip, streaming = one-shot, a documented-format corpus, errors."""

from typing import Literal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trajforge.parse import DIALECTS, Dialect, StreamParser, dialect_for_model, get_dialect, guess_dialect
from trajforge.schema import ToolCall, ToolSpec, Toolset

NEW = ["qwen3_xml", "llama3_json", "mistral", "pythonic", "deepseek", "react", "openai"]
TEXT = [n for n in sorted(DIALECTS) if n != "openai"]  # dialects whose tools go in the system prompt


def search(query: str, limit: int = 10, exact: bool = False) -> str:
    """Search documents."""


def plot(values: list[float], title: str, scale: float = 1.0) -> str:
    """Plot numbers."""


def tag(labels: list[str], note: str = "") -> str:
    """Tag the item."""


def ping() -> str:
    """Check the service."""


def get_weather(location: str, unit: Literal["celsius", "fahrenheit"] = "celsius") -> str:
    """Current weather."""


def get_time(timezone: str) -> str:
    """Current time."""


TOOLS = Toolset(tools=tuple(ToolSpec.from_function(f) for f in (search, plot, tag, ping, get_weather, get_time)))
SETTINGS = settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# -- (a) round trip --------------------------------------------------------------------------

def strings(dialect: str):
    # Qwen3 XML values are raw text: the format has no escape for a '<' that starts a closing tag.
    banned = "<" if dialect == "qwen3_xml" else ""
    return st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters=banned), max_size=30)


floats = st.floats(allow_nan=False, allow_infinity=False)


def calls_for(dialect: str):
    s = strings(dialect)
    optional = lambda **kw: st.fixed_dictionaries({}, optional=kw)  # noqa: E731
    args = {
        "search": st.tuples(st.fixed_dictionaries({"query": s}), optional(limit=st.integers(), exact=st.booleans())),
        "plot": st.tuples(st.fixed_dictionaries({"values": st.lists(floats, max_size=4), "title": s}),
                          optional(scale=floats)),
        "tag": st.tuples(st.fixed_dictionaries({"labels": st.lists(s, max_size=3)}), optional(note=s)),
        "ping": st.tuples(st.just({}), st.just({})),
    }
    one = st.sampled_from(sorted(args)).flatmap(
        lambda name: args[name].map(lambda a: ToolCall(name=name, arguments={**a[0], **a[1]})))
    return st.lists(one, min_size=1, max_size=3)


# Reasoning text: no character that opens a call in any dialect ("<", "[", "{", ":").
content = st.text(st.sampled_from("abcxyz ÄéΩ漢.,!?'\"\n"), max_size=40)


@pytest.mark.parametrize("name", sorted(DIALECTS))
def test_render_then_parse_round_trips(name):
    dialect = get_dialect(name)

    @SETTINGS
    @given(text=content, calls=calls_for(name))
    def check(text, calls):
        rendered = dialect.render_assistant(text, calls)
        res = dialect.parse(rendered, TOOLS)
        assert res.calls == calls, rendered
        assert res.errors == [] and res.repairs == [], rendered
        assert res.text == text.strip()

    check()


# -- (b) streaming -----------------------------------------------------------------------------

def _samples(name: str) -> list[str]:
    """A clean two-call turn, a truncated one and the corpus entries for the dialect."""
    d = get_dialect(name)
    clean = d.render_assistant("Checking\nboth.", [
        ToolCall(name="get_weather", arguments={"location": "Zürich \"HB\" {x}"}),
        ToolCall(name="plot", arguments={"values": [1.5, -2.0], "title": "t"})])
    return [clean, clean[: len(clean) * 2 // 3]] + [raw for raw, *_ in CORPUS.get(name, [])]


@pytest.mark.parametrize("name", sorted(DIALECTS))
def test_streaming_equals_one_shot_for_any_chunking(name):
    dialect = get_dialect(name)
    samples = _samples(name)

    @SETTINGS
    @given(which=st.integers(0, len(samples) - 1), cuts=st.lists(st.integers(0, 10_000), max_size=8))
    def check(which, cuts):
        text = samples[which]
        points = sorted({c % (len(text) + 1) for c in cuts})
        stream = StreamParser(dialect, TOOLS)
        for a, b in zip([0] + points, points + [len(text)]):
            stream.feed(text[a:b])
            stream.snapshot  # provisional parses never raise, whatever the prefix
        assert stream.finish() == dialect.parse(text, TOOLS)

    check()


@pytest.mark.parametrize("name", sorted(DIALECTS))
def test_every_prefix_parses_without_raising(name):
    dialect = get_dialect(name)
    for text in _samples(name):
        for i in range(len(text) + 1):
            res = dialect.parse(text[:i], TOOLS)
            assert res.calls or res.errors


# -- (c) conformance corpus, written as in each family's public documentation -----------------

W_SF = ToolCall(name="get_weather", arguments={"location": "San Francisco, CA"})
W_PARIS = ToolCall(name="get_weather", arguments={"location": "Paris"})
T_PARIS = ToolCall(name="get_time", arguments={"timezone": "Europe/Paris"})
DS_B, DS_E = "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>", "<｜tool▁call▁end｜><｜tool▁calls▁end｜>"
SEP = "<｜tool▁sep｜>"

# (raw output, expected calls, expected error kinds, expected repair kinds, expected text)
CORPUS: dict[str, list[tuple[str, list[ToolCall], list[str], list[str], str]]] = {
    # Chat Completions API responses as OpenAI's API reference and function-calling guide show them
    # (arguments are JSON *strings*; content is null beside tool calls).
    "openai": [
        ('{"id": "chatcmpl-abc123", "object": "chat.completion", "created": 1699896916, "model": "gpt-4o-mini",'
         ' "choices": [{"index": 0, "message": {"role": "assistant", "content": null, "tool_calls": [{"id": '
         '"call_abc123", "type": "function", "function": {"name": "get_weather", "arguments": '
         '"{\\n\\"location\\": \\"Boston, MA\\"\\n}"}}]}, "logprobs": null, "finish_reason": "tool_calls"}],'
         ' "usage": {"prompt_tokens": 82, "completion_tokens": 17, "total_tokens": 99}}',
         [ToolCall(name="get_weather", arguments={"location": "Boston, MA"}, id="call_abc123")], [], [], ""),
        ('{"role": "assistant", "content": "Checking both.", "tool_calls": ['
         '{"id": "call_12345xyz", "type": "function", "function": {"name": "get_weather", "arguments": '
         '"{\\"location\\":\\"Paris\\"}"}}, {"id": "call_67890abc", "type": "function", "function": '
         '{"name": "get_time", "arguments": "{\\"timezone\\":\\"Europe/Paris\\"}"}}]}',
         [W_PARIS.model_copy(update={"id": "call_12345xyz"}), T_PARIS.model_copy(update={"id": "call_67890abc"})],
         [], [], "Checking both."),
        ('[{"id": "call_1", "type": "function", "function": {"name": "get_weather", '
         '"arguments": "{\'location\': \'Paris\',}"}}]',
         [W_PARIS.model_copy(update={"id": "call_1"})], [], ["json_repair"], ""),
        ('{"index": 0, "message": {"role": "assistant", "content": null, "tool_calls": [{"id": "call_9", '
         '"type": "function", "function": {"name": "get_weather", "arguments": "{\\"location\\": \\"San Fr"}}]},'
         ' "finish_reason": "length"}', [], ["truncated"], [], ""),
        ('{"role": "assistant", "content": "It is sunny in Paris.", "refusal": null}', [], ["no_call"], [],
         "It is sunny in Paris."),
    ],
    "qwen3_xml": [
        ("I'll check both.\n<tool_call>\n<function=get_weather>\n<parameter=location>\nParis\n</parameter>\n"
         "<parameter=unit>\ncelsius\n</parameter>\n</function>\n</tool_call>\n<tool_call>\n<function=get_time>\n"
         "<parameter=timezone>\nEurope/Paris\n</parameter>\n</function>\n</tool_call>",
         [W_PARIS.model_copy(update={"arguments": {"location": "Paris", "unit": "celsius"}}), T_PARIS], [], [],
         "I'll check both."),
        ("<tool_call>\n<function=search>\n<parameter=query>\nrust async\n</parameter>\n<parameter=limit>\n5\n"
         "</parameter>\n<parameter=exact>\nTrue\n</parameter>\n</function>\n</tool_call>",
         [ToolCall(name="search", arguments={"query": "rust async", "limit": 5, "exact": True})], [],
         ["python_literal"], ""),
        ('<tool_call>\n<get_weather location="Paris"/>\n</tool_call>', [], ["malformed"], [], ""),
    ],
    "llama3_json": [
        ('{"name": "get_weather", "parameters": {"location": "San Francisco, CA"}}', [W_SF], [], [], ""),
        ('<|python_tag|>{"name": "get_weather", "parameters": {"location": "Paris"}}; '
         '{"name": "get_time", "parameters": {"timezone": "Europe/Paris"}}', [W_PARIS, T_PARIS], [], [], ""),
        ('Let me look that up.\n{"name": "get_weather", "parameters": {"location": "Paris",}}\nOne moment.',
         [W_PARIS], [], ["json_repair"], "Let me look that up.\nOne moment."),
        ('<|python_tag|>get_weather(location="Paris")', [], ["malformed"], [], 'get_weather(location="Paris")'),
    ],
    "mistral": [
        ('[TOOL_CALLS][{"name": "get_weather", "arguments": {"location": "Paris"}}, '
         '{"name": "get_time", "arguments": {"timezone": "Europe/Paris"}}]', [W_PARIS, T_PARIS], [], [], ""),
        ('Sure.[TOOL_CALLS]get_weather[ARGS]{"location": "Paris"}[TOOL_CALLS]get_time[ARGS]'
         '{"timezone": "Europe/Paris"}', [W_PARIS, T_PARIS], [], [], "Sure."),
        ('[TOOL_CALLS]get_weather{"location": "San Francisco, CA"}', [W_SF], [], [], ""),
        ("[TOOL_CALLS] I will call get_weather now", [], ["malformed"], [], "I will call get_weather now"),
    ],
    "pythonic": [
        ('[get_weather(location="San Francisco, CA"), get_time(timezone="Europe/Paris")]',
         [W_SF, T_PARIS], [], [], ""),
        ("Let me search.\n[search(query='rust \"async\"', limit=3, exact=true)]\nDone.",
         [ToolCall(name="search", arguments={"query": 'rust "async"', "limit": 3, "exact": True})], [],
         ["json_literal"], "Let me search.\nDone."),
        ('[search(query=__import__("os").system("rm -rf /"))]', [], ["malformed"], [], ""),
    ],
    "deepseek": [
        (f'{DS_B}function{SEP}get_weather\n```json\n{{"location": "Paris"}}\n```<｜tool▁call▁end｜>\n'
         f'<｜tool▁call▁begin｜>function{SEP}get_time\n```json\n{{"timezone": "Europe/Paris"}}\n```{DS_E}',
         [W_PARIS, T_PARIS], [], [], ""),
        (f'I will check.{DS_B}get_weather{SEP}{{"location": "San Francisco, CA"}}{DS_E}', [W_SF], [], [],
         "I will check."),
        (f"{DS_B}function{SEP}get_weather\n```json\nParis\n```{DS_E}", [], ["malformed"], [], ""),
    ],
    "react": [
        ('Thought: I need the weather first.\nAction: get_weather\nAction Input: {"location": "Paris"}',
         [W_PARIS], [], [], "I need the weather first."),
        ('Thought: Both at once.\nAction: get_weather\nAction Input: {"location": "Paris"}\n'
         "Action: get_time\nAction Input: Europe/Paris", [W_PARIS, T_PARIS], [], ["bare_input"], "Both at once."),
        ("Thought: hmm\nAction: get_weather\nThought: no input given", [], ["malformed"], [],
         "hmm\nno input given"),
    ],
}


@pytest.mark.parametrize("name,case", [(n, i) for n in CORPUS for i in range(len(CORPUS[n]))])
def test_conformance_corpus(name, case):
    raw, calls, errors, repairs, text = CORPUS[name][case]
    res = get_dialect(name).parse(raw, TOOLS)
    assert res.calls == calls
    assert [e.kind for e in res.errors] == errors
    assert [r.kind for r in res.repairs] == repairs
    assert res.text == text


# -- (d) errors ----------------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(DIALECTS))
def test_no_call(name):
    res = get_dialect(name).parse("The answer is 42.", TOOLS)
    assert [e.kind for e in res.errors] == ["no_call"] and res.text == "The answer is 42."


@pytest.mark.parametrize("name", sorted(DIALECTS))
def test_unknown_tool_and_missing_argument(name):
    d = get_dialect(name)
    unknown = d.parse(d.render_assistant("", [ToolCall(name="get_wether", arguments={"location": "x"})]), TOOLS)
    assert [e.kind for e in unknown.errors] == ["unknown_tool"] and "'get_weather'" in unknown.errors[0].message
    missing = d.parse(d.render_assistant("", [ToolCall(name="get_time", arguments={})]), TOOLS)
    assert [e.kind for e in missing.errors] == ["invalid_args"] and "'timezone'" in missing.errors[0].message


@pytest.mark.parametrize("name", sorted(DIALECTS))
def test_call_cut_off_is_truncated_not_guessed(name):
    d = get_dialect(name)
    full = d.render_assistant("Looking.", [W_PARIS, W_SF])
    cut = full[: full.index("San Fran") + len("San Fran")]
    res = d.parse(cut, TOOLS)
    assert res.calls == [W_PARIS] and [e.kind for e in res.errors] == ["truncated"]


@pytest.mark.parametrize("name", sorted(DIALECTS))
def test_one_bad_call_does_not_hide_a_good_one(name):
    d = get_dialect(name)
    res = d.parse(d.render_assistant("", [ToolCall(name="nope", arguments={}), W_PARIS]), TOOLS)
    assert res.calls == [W_PARIS] and [e.kind for e in res.errors] == ["unknown_tool"]


def test_wrong_type_is_invalid_args_for_xml_values():
    raw = ("<tool_call>\n<function=search>\n<parameter=query>\nx\n</parameter>\n"
           "<parameter=limit>\nmany\n</parameter>\n</function>\n</tool_call>")
    res = get_dialect("qwen3_xml").parse(raw, TOOLS)
    assert [e.kind for e in res.errors] == ["invalid_args"] and "limit" in res.errors[0].message


def test_pythonic_never_evaluates_code():
    res = get_dialect("pythonic").parse("[search(query=open('/etc/passwd').read())]", TOOLS)
    assert [e.kind for e in res.errors] == ["malformed"] and "literal" in res.errors[0].message


# -- detection ------------------------------------------------------------------------------------

@pytest.mark.parametrize("model,dialect", [
    ("Qwen/Qwen3-Coder-30B-A3B-Instruct", "qwen3_xml"), ("Qwen/Qwen2.5-7B-Instruct", "hermes"),
    ("NousResearch/Hermes-3-Llama-3.1-8B", "hermes"), ("HuggingFaceTB/SmolLM2-135M-Instruct", "hermes"),
    ("meta-llama/Llama-3.1-8B-Instruct", "llama3_json"), ("mistralai/Mistral-7B-Instruct-v0.3", "mistral"),
    ("mistralai/Mixtral-8x7B-Instruct-v0.1", "mistral"), ("deepseek-ai/DeepSeek-V3", "deepseek"),
    ("some-unknown-model", "hermes"),
    # Plain Qwen3 writes Hermes JSON in <tool_call>; Qwen3-Coder and Qwen3.5 write the XML format.
    ("Qwen/Qwen3-8B", "hermes"), ("Qwen/Qwen3-235B-A22B-Instruct-2507", "hermes"), ("Qwen/Qwen3-0.6B", "hermes"),
    ("Qwen/Qwen3-Coder-480B-A35B-Instruct", "qwen3_xml"), ("Qwen/Qwen3.5-27B", "qwen3_xml"),
    ("deepseek-ai/DeepSeek-R1-Distill-Qwen-7B", "deepseek"), ("smollm2-135m", "hermes"),
    ("meta-llama/Llama-4-Scout-17B-16E-Instruct", "llama3_json"),
    ("{% for m in messages %}<|start_header_id|>{{ m.role }}<|python_tag|>{% endfor %}", "llama3_json"),
    ("{{- '<tool_call>\\n<function=' + tool_call.name + '>' }}", "qwen3_xml"),
    ("{{ '<｜tool▁calls▁begin｜>' }}", "deepseek"),
])
def test_dialect_for_model(model, dialect):
    assert dialect_for_model(model).name == dialect
    assert Dialect.for_model(model).name == dialect


@pytest.mark.parametrize("name", NEW + ["hermes"])
def test_guess_dialect_from_rendered_output(name):
    # openai included: its text form is the JSON of a message, told apart from Llama's bare objects.
    text = get_dialect(name).render_assistant("Hi.", [W_PARIS])
    assert guess_dialect(text).name == name


def test_llama_type_first_object_and_plain_json_text():
    d = get_dialect("llama3_json")
    res = d.parse('{"type": "function", "name": "get_time", "parameters": {"timezone": "Europe/Paris"}}', TOOLS)
    assert res.calls == [T_PARIS] and not res.errors
    prose = d.parse('The config is {"type": "dark"}.', TOOLS)
    assert [e.kind for e in prose.errors] == ["no_call"] and prose.text == 'The config is {"type": "dark"}.'


def test_deepseek_calls_block_without_a_call():
    d = get_dialect("deepseek")
    assert [e.kind for e in d.parse("<｜tool▁calls▁begin｜>", TOOLS).errors] == ["truncated"]
    garbage = d.parse("<｜tool▁calls▁begin｜>get_time()<｜tool▁calls▁end｜>", TOOLS)
    assert [e.kind for e in garbage.errors] == ["malformed"]


@pytest.mark.parametrize("name", TEXT)
def test_system_prompt_and_chat_assembly(name):
    from trajforge.schema import Message

    d = get_dialect(name)
    prompt = d.system_prompt(TOOLS, "Be brief.")
    assert prompt.startswith("Be brief.") and all(t in prompt for t in TOOLS.names)
    msgs = [Message(role="system", content="S"), Message(role="user", content="U"),
            Message(role="assistant", content="", tool_calls=[W_PARIS, T_PARIS]),
            Message(role="tool", name="get_weather", content="r1"), Message(role="tool", name="get_time", content="r2")]
    chat = d.to_chat(msgs, TOOLS)
    assert [m["role"] for m in chat] == ["system", "user", "assistant", d.tool_role]
    assert d.parse(chat[2]["content"], TOOLS).calls == [W_PARIS, T_PARIS]
    assert chat[3]["content"].index("r1") < chat[3]["content"].index("r2")


FRAGMENTS = ["<tool_call>", "</tool_call>", "<function=get_time>", "</function>", "<parameter=timezone>",
             "</parameter>", "<|python_tag|>", "[TOOL_CALLS]", "[ARGS]", "<｜tool▁calls▁begin｜>",
             "<｜tool▁call▁begin｜>", "<｜tool▁sep｜>", "<｜tool▁call▁end｜>", "Action: ", "Action Input: ",
             '{"name": "get_time", ', '"parameters": ', '"arguments": ', '{"timezone": "UTC"}', "[get_time(",
             "timezone=", "'x'", ")]", "{", "}", "[", "]", "(", ")", '"', "'", "\\", ",", ";", "\n", "```json",
             "true", "None", "1e5", "get_time", "x"]


@pytest.mark.parametrize("name", sorted(DIALECTS))
def test_parse_never_raises_on_garbage(name):
    dialect = get_dialect(name)

    @SETTINGS
    @given(st.lists(st.sampled_from(FRAGMENTS), max_size=30).map("".join))
    def check(text):
        res = dialect.parse(text, TOOLS)
        assert res.calls or res.errors

    check()


@pytest.mark.parametrize("name,raw", [
    ("qwen3_xml", "<tool_call>\n<function=get_ti"),
    ("qwen3_xml", "<tool_call>\n<function=get_time>\n<parameter=timezone>\nUTC\n</parameter>\n"),
    ("mistral", "[TOOL_CALLS]get_time[AR"),
    ("react", "Thought: first the time.\nAction: get_time\nAction Inp"),
    ("deepseek", "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_ti"),
    ("pythonic", "[get_time(timezone='UTC'), get_weather(loc"),
    ("openai", '{"role": "assistant", "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "get_ti'),
    ("openai", '{"role": "assistant", "tool_calls": [{"function": {"name": "get_time", "arguments": "{\\"timezone'),
])
def test_cut_inside_the_syntax_is_truncated(name, raw):
    res = get_dialect(name).parse(raw, TOOLS)
    assert [e.kind for e in res.errors] == ["truncated"]


def test_qwen3_xml_tolerates_missing_tags_with_record():
    d = get_dialect("qwen3_xml")
    bare = d.parse("<function=get_time>\n<parameter=timezone>\nUTC\n</parameter>\n</function>", TOOLS)
    assert bare.calls == [ToolCall(name="get_time", arguments={"timezone": "UTC"})]
    assert [r.kind for r in bare.repairs] == ["missing_tag"]
    loose = d.parse("<tool_call><function=get_time><parameter=timezone>UTC</function></tool_call>", TOOLS)
    assert loose.calls == bare.calls and [r.kind for r in loose.repairs] == ["unclosed_tag"]


MARKERS = ("</tool_call><tool_call>{\"name\": \"ping\"} [TOOL_CALLS]x{} <|python_tag|> <｜tool▁call▁end｜>"
           "<｜tool▁calls▁end｜> ``` [ping()] \nAction: ping\nAction Input: {}\nThought: x")


@pytest.mark.parametrize("name", [n for n in sorted(DIALECTS) if n != "qwen3_xml"])
def test_values_may_contain_any_dialects_markers(name):
    d = get_dialect(name)
    calls = [ToolCall(name="search", arguments={"query": MARKERS}), T_PARIS]
    res = d.parse(d.render_assistant("Careful.", calls), TOOLS)
    assert res.calls == calls and not res.errors and not res.repairs and res.text == "Careful."


# Heads of real chat templates' tool sections, enough for detection.
QWEN3_TEMPLATE = ('{%- if tools %}<|im_start|>system\n# Tools\n<tools>{% for tool in tools %}{{ tool | tojson }}'
                  '{% endfor %}</tools>\nFor each function call, return a json object with function name and '
                  'arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{"name": <function-name>, '
                  '"arguments": <args-json-object>}\n</tool_call><|im_end|>{% endif %}')
CODER_TEMPLATE = ("{%- if tools %}<tools>{% for tool in tools %}<function>\n<name>{{ tool.function.name }}</name>"
                  "{% endfor %}</tools>\n<tool_call>\n<function=example_function_name>\n<parameter=example_parameter_1>"
                  "\nvalue_1\n</parameter>\n</function>\n</tool_call>{% endif %}")
CHATML = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"


@pytest.mark.parametrize("model,template,dialect", [
    ("Qwen/Qwen3-8B", QWEN3_TEMPLATE, "hermes"),
    ("my-org/agent-ft-v2", CODER_TEMPLATE, "qwen3_xml"),  # a renamed fine-tune keeps its template's format
    ("Qwen/Qwen3-8B", CODER_TEMPLATE, "qwen3_xml"),  # the template wins over the name
    ("Qwen/Qwen3-Coder-30B-A3B-Instruct", CHATML, "qwen3_xml"),  # a template without markers: the name
    ("/models/local-copy", CHATML, "hermes"),  # neither says: hermes
    ("smollm2-135m", None, "hermes"),  # the embedded default model (the demo relies on hermes)
])
def test_for_model_prefers_the_chat_template(model, template, dialect):
    assert Dialect.for_model(model, chat_template=template).name == dialect
    assert dialect_for_model(model, template).name == dialect


def test_template_supports_tools():
    from trajforge.parse.detect import template_supports_tools

    assert template_supports_tools(QWEN3_TEMPLATE) and template_supports_tools(CODER_TEMPLATE)
    assert not template_supports_tools(CHATML) and not template_supports_tools(None)


def test_named_chat_templates_are_read_together():
    from trajforge.parse.detect import template_supports_tools

    named = {"default": CHATML, "tool_use": CODER_TEMPLATE}
    assert template_supports_tools(named) and Dialect.for_model("x", chat_template=named).name == "qwen3_xml"


@pytest.mark.parametrize("name,template", [
    ("hermes", '<tool_call>{{"name": "ping", "arguments": {}}}</tool_call>'),
    ("llama3_json", '{{"name": "ping", "parameters": {}}}'),
    ("mistral", '[TOOL_CALLS][{{"name": "ping", "arguments": {}}}]'),
    ("openai", '[{{"type": "function", "function": {{"name": "ping", "arguments": {}}}}}]'),
])
def test_unreadable_string_arguments_are_malformed_not_empty(name, template):
    d = get_dialect(name)
    bad = d.parse(template.format('"garbage"'), TOOLS)
    assert bad.calls == [] and [e.kind for e in bad.errors] == ["malformed"]  # ping is never called with {}
    good = d.parse(template.format('"{}"'), TOOLS)
    assert good.calls == [ToolCall(name="ping")] and not good.errors


def test_damaged_json_beyond_the_repair_limit_is_malformed_and_strict_json_of_any_size_parses():
    from trajforge.parse.limits import REPAIR_LIMIT

    big = "x" * (REPAIR_LIMIT + 10)
    hermes = get_dialect("hermes")
    ok = f'<tool_call>{{"name": "search", "arguments": {{"query": "{big}"}}}}</tool_call>'
    assert hermes.parse(ok, TOOLS).calls == [ToolCall(name="search", arguments={"query": big})]
    # An unquoted key: damage only json-repair reads (the linear readers — JSON with raw control
    # characters, Python literals — do not), so its size limit applies.
    small = hermes.parse(ok.replace(big, "x").replace('"query"', "query"), TOOLS)
    assert [r.kind for r in small.repairs] == ["json_repair"]  # the same damage, small: repaired
    res = hermes.parse(ok.replace('"query"', "query"), TOOLS)
    assert res.calls == [] and [e.kind for e in res.errors] == ["malformed"]
    # Single quotes are a Python literal: read in linear time at any size, recorded the same way.
    quoted = hermes.parse(ok.replace('"query"', "'query'"), TOOLS)
    assert quoted.calls == [ToolCall(name="search", arguments={"query": big})]
    assert [r.kind for r in quoted.repairs] == ["json_repair"]
