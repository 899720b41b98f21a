import pytest
from transformers import AutoTokenizer

from tests.tiny import build_tiny_model
from trajforge.parse import get_dialect
from trajforge.schema import Message, Step, ToolCall, ToolSpec, Toolset, Trajectory
from trajforge.train.data import TemplateError, render_sample


def run_sql(query: str) -> str:
    """Run a query.

    Args:
        query: SQL.
    """


TOOLS = Toolset(tools=(ToolSpec.from_function(run_sql),))
CALL = ToolCall(name="run_sql", arguments={"query": "SELECT 1"})


@pytest.fixture(scope="module")
def tok(tmp_path_factory):
    return AutoTokenizer.from_pretrained(build_tiny_model(tmp_path_factory.mktemp("tiny")))


def traj(steps=None, raw=None):
    msgs = [Message(role="system", content="Be precise."), Message(role="user", content="How many?"),
            Message(role="assistant", content="I'll query.", tool_calls=[CALL], raw=raw),
            Message(role="tool", name="run_sql", content="SECRET_TOOL_OUTPUT 7"),
            Message(role="assistant", content="Done: 7")]
    return Trajectory(task_id="t", policy="expert", env="sql", toolset_fingerprint=TOOLS.fingerprint,
                      dialect="hermes", messages=msgs, steps=steps or [])


def test_mask_covers_only_assistant_text(tok):
    s = render_sample(traj(), tok, TOOLS)
    assert len(s.input_ids) == len(s.loss_mask)
    learned = tok.decode([t for t, m in zip(s.input_ids, s.loss_mask) if m])
    hidden = tok.decode([t for t, m in zip(s.input_ids, s.loss_mask) if not m])
    h = get_dialect("hermes")
    assert learned == h.render_assistant("I'll query.", [CALL]) + "<|im_end|>" + "Done: 7<|im_end|>"
    # Tool results, the system prompt (with the tool block) and the user turn carry mask 0.
    assert "SECRET_TOOL_OUTPUT" in hidden and "SECRET_TOOL_OUTPUT" not in learned
    assert "<tools>" in hidden and "How many?" in hidden


def test_rendered_text_equals_chat_template(tok):
    t = traj()
    s = render_sample(t, tok, TOOLS)
    chat = get_dialect("hermes").to_chat(t.messages, TOOLS)
    assert tok.decode(s.input_ids) == tok.apply_chat_template(chat, tokenize=False).rstrip("\n")


def test_stored_completion_ids_are_used_verbatim(tok):
    raw = "I'll query.<tool_call>{'name': 'run_sql', 'arguments': {'query': 'SELECT 1'}}</tool_call>"
    ids = tok(raw, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
    steps = [Step(index=0, raw=raw, completion_ids=ids), Step(index=1, raw="Done: 7")]
    s = render_sample(traj(steps, raw=raw), tok, TOOLS)
    learned = [t for t, m in zip(s.input_ids, s.loss_mask) if m]
    assert learned[: len(ids)] == ids


def test_non_prefix_template_is_refused(tok):
    bad = AutoTokenizer.from_pretrained(tok.name_or_path)
    bad.chat_template = "{% for m in messages|reverse %}{{ m['content'] }}{% endfor %}"
    with pytest.raises(TemplateError):
        render_sample(traj(), bad, TOOLS)
