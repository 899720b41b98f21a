"""Stored record shapes: each fact of a step once on disk, formats upgraded on read, newer refused."""

from __future__ import annotations

import json

import pytest

from trajforge.schema import (STORED, CallError, Message, NewerFormatError, Outcome, Step, Task, ToolCall,
                              ToolResult, Trajectory, Verdict)
from trajforge.schema.records import FORMAT

CALL = ToolCall(name="run_sql", arguments={"query": "SELECT 1"})
NATIVE = ToolCall(name="run_sql", arguments={"query": "SELECT 2"}, id="call_1")


def episode() -> Trajectory:
    """A text turn with a result and a parse error, then a native (OpenAI) turn, then an odd tool
    message no step explains (kept as it is)."""
    steps = [Step(index=0, raw="Let me look.\n<tool_call>...</tool_call>", calls=[CALL],
                  errors=[CallError(kind="invalid_args", message="bad limit", tool="run_sql")],
                  results=[ToolResult(name="run_sql", content="1\n(1 row)")], prompt_ids=[1, 2], completion_ids=[3]),
             Step(index=1, raw="Again.", calls=[NATIVE], native=True,
                  results=[ToolResult(name="run_sql", content="2\n(1 row)")])]
    messages = [Message(role="system", content="Be brief."), Message(role="user", content="q"),
                Message(role="assistant", content="Let me look.", tool_calls=[CALL], raw=steps[0].raw),
                Message(role="tool", name="run_sql", content="1\n(1 row)"),
                Message(role="tool", name="run_sql", content="Error (invalid_args): bad limit"),
                Message(role="assistant", content="Again.", tool_calls=[NATIVE]),
                Message(role="tool", name="run_sql", content="2\n(1 row)", tool_call_id="call_1"),
                Message(role="tool", name="note", content="a message no step explains")]
    return Trajectory(task_id="t", policy="p", env="sql", toolset_fingerprint="f", dialect="hermes",
                      messages=messages, steps=steps, verdict=Verdict(submitted=True, answer="2", correct=True),
                      outcome=Outcome(tier="recovered"))


def test_stored_form_writes_each_fact_once_and_reads_back_exactly():
    traj = episode()
    line = traj.model_dump_json(exclude_none=True)
    stored = json.loads(line)
    kinds = [sorted(set(m) - {"role"}) for m in stored["messages"]]
    assert kinds[2] == ["content", "step"] and kinds[3] == ["result", "step"] and kinds[4] == ["error", "step"]
    assert kinds[5] == ["content", "step"] and kinds[6] == ["result", "step"]
    assert "a message no step explains" in line  # not a step's: stored literally
    assert line.count("1\\n(1 row)") == 1 and line.count("Let me look.\\n<tool_call>") == 1
    assert stored["format"] == FORMAT and stored["trajforge_version"]
    back = Trajectory.model_validate_json(line, context=STORED)
    assert back == traj
    assert back.messages[5].raw is None and back.steps[1].native  # the native turn renders from its calls


def test_python_dumps_stay_whole():
    assert Trajectory.model_validate(episode().model_dump()).messages == episode().messages
    assert "step" not in episode().model_dump()["messages"][2]


def test_format_1_records_are_upgraded_on_read():
    v1 = {"task_id": "t", "policy": "p", "env": "sql", "toolset_fingerprint": "f", "dialect": "openai",
          "messages": [{"role": "user", "content": "q"},
                       {"role": "assistant", "content": "", "tool_calls": [CALL.model_dump()]},
                       {"role": "tool", "name": "run_sql", "content": "1"}],
          "steps": [{"index": 0, "raw": "", "calls": [CALL.model_dump()], "results": [{"name": "run_sql", "content": "1"}],
                     "errors": [{"kind": "malformed", "message": "m"}]}],
          "verdict": {"submitted": True, "answer": "1", "correct": False, "milestones": ["q"], "detail": "no"},
          "outcome": {"tier": "failed", "fail_reason": "malformed_call", "submitted": "1", "correct": False,
                      "milestones": ["q"]}}
    traj = Trajectory.model_validate(v1, context=STORED)
    assert traj.verdict == Verdict(submitted=True, answer="1", milestones=["q"], detail="no")
    assert traj.outcome == Outcome(tier="failed", fail_reason="malformed") and not traj.outcome.correct
    assert traj.trajforge_version == "" and traj.format == FORMAT
    empty = Trajectory.model_validate({**v1, "verdict": {}, "outcome": None}, context=STORED)
    assert empty.verdict is None
    with pytest.warns(DeprecationWarning):
        assert traj.verdict["detail"] == "no"  # 0.1 code read the verdict as a dict


def test_newer_formats_are_refused_with_a_clear_message():
    data = json.loads(episode().model_dump_json())
    with pytest.raises(NewerFormatError, match=f"record format {FORMAT + 1} .* reads formats up to {FORMAT}"):
        Trajectory.model_validate({**data, "format": FORMAT + 1}, context=STORED)
    task = Task(id="x", env="sql", prompt="p", tier="easy", split="train", template="t", reference=(), expected=1)
    with pytest.raises(NewerFormatError, match="this task was written in record format"):
        Task.model_validate({**json.loads(task.model_dump_json()), "format": FORMAT + 1})
    with pytest.raises(ValueError, match="format"):
        Trajectory.model_validate({**data, "format": "two"})


def test_a_reference_to_a_missing_step_is_unreadable():
    data = json.loads(episode().model_dump_json())
    data["messages"][2]["step"] = 7
    with pytest.raises(ValueError, match="refers to step 7"):
        Trajectory.model_validate(data, context=STORED)


def test_outcome_correct_follows_the_grade():
    assert Outcome(tier="success").correct and Outcome(tier="recovered").correct
    assert not Outcome(tier="failed").correct and not Outcome(tier="env_fault").correct
