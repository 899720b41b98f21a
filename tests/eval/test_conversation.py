"""An episode as HTML: every part of a turn shows, and nothing from the model is markup."""

from trajforge.eval.conversation import conversation_html
from trajforge.grade import graded
from trajforge.schema import CallError, Message, Repair, Step, ToolCall, ToolResult, Trajectory

EVIL = '<script>alert(1)</script><img src=x onerror="alert(2)">'


def _evil_episode() -> Trajectory:
    call = ToolCall(name="run_sql", arguments={"query": f"SELECT '{EVIL}'"})
    step = Step(index=0, raw=f"thinking {EVIL}\n<tool_call>...</tool_call>", calls=[call],
                errors=[CallError(kind="unknown_tool", message=f"no tool {EVIL}", tool=EVIL)],
                repairs=[Repair(kind="json_repair", detail=EVIL)],
                results=[ToolResult(name="run_sql", content=f"row {EVIL}", ok=False, error="sql_error", elapsed_s=0.0123)],
                gen_s=1.5, tool_s=0.0123)
    messages = [Message(role="system", content=f"sys {EVIL}"), Message(role="user", content=f"ask {EVIL}"),
                Message(role="assistant", content=f"thinking {EVIL}", tool_calls=[call], raw=step.raw),
                Message(role="tool", name="run_sql", content=f"row {EVIL}"),
                Message(role="tool", name=EVIL, content=f"Error (unknown_tool): no tool {EVIL}")]
    return graded(Trajectory(task_id=f"t{EVIL}", policy=f"p{EVIL}", env="sql", toolset_fingerprint="f",
                             dialect="hermes", tier="easy", split="test", messages=messages, steps=[step],
                             end="max_turns", verdict={"submitted": True, "answer": EVIL, "correct": False}))


def test_untrusted_text_is_escaped_everywhere():
    page = conversation_html(_evil_episode(), anchor=f'a"{EVIL}')
    assert "<script" not in page and "<img" not in page and "onerror=\"" not in page
    # Each place the payload was put shows it as text: system, user, content, raw, args, repair,
    # error, result, feedback, task id, policy, submitted answer, anchor.
    assert page.count("&lt;script&gt;alert(1)&lt;/script&gt;") >= 12
    assert 'id="a&quot;&lt;script&gt;' in page


def test_turn_parts_results_feedback_and_rewards():
    page = conversation_html(_evil_episode())
    assert "turn 0 · gen 1.50 s · tool 12 ms" in page
    assert '<code class="tool-name">run_sql</code>' in page and "&quot;query&quot;" in page
    assert '<div class="repairs">' in page and "<b>json_repair</b>" in page
    assert '<div class="errors">' in page and "<b>unknown_tool</b>" in page
    # First tool message is the call's result (with its status), the second is error feedback.
    assert '<div class="msg tool bad"><div class="role">tool result · <code>run_sql</code> · error sql_error · 12 ms' in page
    assert page.count('<div class="msg feedback">') == 1
    assert 'class="badge tier-failed"' in page and "guessed_answer" in page  # no query ran
    assert '<table class="rewards">' in page and "violation (×0.1)" in page


def test_real_episodes_render(run_dir):
    by = {(t.task_id, t.policy): t for t in run_dir.episodes}
    repaired = conversation_html(by[(run_dir.improved[4], "base")])
    assert "<b>json_repair</b>" in repaired and "submit_answer" in repaired and "(rejected)" in repaired
    solved = conversation_html(by[(run_dir.improved[4], "tuned")])
    assert '<div class="msg tool ok">' in solved and "(accepted)" in solved and "tier-success" in solved
    no_call = conversation_html(by[(run_dir.improved[0], "base")])
    assert '<details class="raw" open>' in no_call  # a turn without a call shows its raw text
