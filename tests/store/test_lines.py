"""Every append writes a line that reads back: a record that cannot be stored as it is is stored
degraded, with a note saying what changed, and never lost.

Each case is a record the schema accepts in memory but that does not survive the round trip as
it is: a lone surrogate in a tool's output, bytes or an object as the verdict's answer, an integer
past the int-string limit, nesting past the serializer's depth, NaN timings and log-probs (which
would come back as ``null`` and fail validation).
"""

from __future__ import annotations

import json
import time

import pytest

from trajforge.grade import graded
from trajforge.harness.faults import RECORD_DEGRADED
from trajforge.schema import Message, SamplingConfig, Step, ToolResult, Trajectory, Verdict
from trajforge.store import TrajectoryStore, resume_keys
from trajforge.store.lines import read_line, write_line

BUDGET_S = 5.0


def traj(task_id: str = "t", **fields) -> Trajectory:
    return Trajectory(task_id=task_id, policy="p", env="sql", toolset_fingerprint="f", dialect="hermes",
                      sampling=SamplingConfig(), **fields)


def deep(n: int) -> list:
    value: list = []
    for _ in range(n):
        value = [value]
    return value


CASES = {
    "surrogate_in_tool_output": dict(steps=[Step(index=0, raw="x", results=[ToolResult(name="a", content="ok \udcff")])],
                                     messages=[Message(role="tool", content="\ud800 result")]),
    "bytes_answer": dict(verdict=Verdict(submitted=True, answer=b"\xff\xfe")),
    "object_answer": dict(verdict=Verdict(submitted=True, answer=object())),
    "huge_int_answer": dict(verdict=Verdict(submitted=True, answer=10 ** 5000)),
    "deep_answer": dict(verdict=Verdict(submitted=True, answer=deep(5000))),
    "nan_timing": dict(steps=[Step(index=0, raw="x", gen_s=float("nan"), tool_s=float("inf"))]),
    "nan_logprobs": dict(steps=[Step(index=0, raw="x", completion_ids=[1, 2], completion_logprobs=[-0.1, float("nan")])]),
    "huge_token_id": dict(steps=[Step(index=0, raw="x", completion_ids=[10 ** 5000])]),
}


@pytest.mark.parametrize("case", CASES)
def test_an_unstorable_record_is_stored_degraded_with_a_note(case):
    started = time.perf_counter()
    original = graded(traj(**CASES[case]))
    with pytest.raises((ValueError, RecursionError)):  # as it is, it does not make the round trip
        read_line(original.model_dump_json(exclude_none=True))
    line = write_line(original)
    line.encode("utf-8")  # valid UTF-8
    back = read_line(line)
    note = back.faults[-1]
    assert note.kind == RECORD_DEGRADED and note.message.startswith("stored degraded")
    # The idempotency key and the grade are the original's: a resume counts the episode as done.
    assert (back.task_id, back.policy, back.sample, back.sampling) == (
        original.task_id, original.policy, original.sample, original.sampling)
    assert back.outcome == original.outcome and back.end == original.end
    # What could be kept is kept: the steps and messages (repaired) are still there.
    assert len(back.steps) == len(original.steps) and len(back.messages) == len(original.messages)
    assert time.perf_counter() - started < BUDGET_S


def test_what_is_changed_is_named():
    back = read_line(write_line(traj(**CASES["surrogate_in_tool_output"])))
    assert back.steps[0].results[0].content == "ok \ufffd" and back.messages[0].content == "\ufffd result"
    assert "2 strings repaired" in back.faults[-1].message
    back = read_line(write_line(traj(**CASES["nan_logprobs"])))
    assert back.steps[0].completion_logprobs is None and back.steps[0].completion_ids == [1, 2]
    assert "steps.0.completion_logprobs" in back.faults[-1].message
    back = read_line(write_line(traj(**CASES["huge_int_answer"])))
    assert back.verdict.submitted and back.verdict.answer is None and "verdict.answer" in back.faults[-1].message


def test_a_storable_record_is_written_as_it_is():
    t = graded(traj(steps=[Step(index=0, raw="fine", gen_s=0.5)], verdict=Verdict(answer={"a": [1, None]})))
    assert write_line(t) == t.model_dump_json(exclude_none=True) + "\n"


def test_store_appends_never_lose_an_episode_and_resume_skips_them(tmp_path):
    store = TrajectoryStore(tmp_path)
    trajs = [graded(traj(f"t{i}", **fields)) for i, fields in enumerate(CASES.values())]
    with store.writer() as shard:
        for t in trajs[:4]:
            shard.append(t)
    with store.writer(background=True) as shard:  # the async harness's writer
        for t in trajs[4:6]:
            shard.append(t)
    for t in trajs[6:]:
        store.append(t)  # the single-writer path
    stored = store.read()
    assert store.torn == [] and sorted(t.task_id for t in stored) == sorted(t.task_id for t in trajs)
    assert all(t.faults[-1].kind == RECORD_DEGRADED for t in stored)
    have = store.keys()
    assert all(any(k in have for k in resume_keys(t.task_id, "p", 0, SamplingConfig())) for t in trajs)
    # ``grade`` rewrites the store through the same path.
    store.rewrite([graded(t) for t in stored])
    assert len(store.read()) == len(trajs) and store.torn == []
