"""An exception inside one episode ends that episode with a recorded reason, never the run.

Each case breaks one stage of one episode — the environment's start, an exception escaping
``execute``, ``verify``, ``close``, snapshots and restores, the policy's answer for one request, the
harness's handling of one turn — and checks, in the batched loop, the async harness, guided
exploration and pipelines, that the other episodes finish untouched, that the broken one is
stored, and that its classification follows ``trajforge.harness.faults``: the policy and the
environment are infrastructure (``env_fault``, the stage named), the handling of what the model
wrote is the model's (``failed``).
"""

from __future__ import annotations

import json
import time

import pytest
from pydantic import BaseModel, field_validator

from tests.harness.toy_envs import BreakableEnv, broken_task
from trajforge.envs import EnvSpec, unregister
from trajforge.envs.registry import register
from trajforge.eval.metrics import evaluate
from trajforge.eval.run import collect
from trajforge.grade import graded
from trajforge.harness import CollectConfig, HarnessConfig, run_episodes
from trajforge.harness.explore import ExplorationConfig, guided
from trajforge.harness.pipeline import HANDOFF, Pipeline, Role, run_pipeline
from trajforge.parse import get_dialect
from trajforge.parse.base import ParseResult
from trajforge.parse.hermes import HermesDialect
from trajforge.policies.base import Generation
from trajforge.policies.scripted import ScriptedPolicy
from trajforge.store import TrajectoryStore

STAGES = {  # stage → (tier, fail_reason) in both harnesses
    "none": ("success", None),
    "reset": ("env_fault", "env_start"),
    "execute": ("env_fault", "tool_crash"),
    "execute_type": ("env_fault", "tool_crash"),
    "verify": ("env_fault", "env_verify"),
    "verify_type": ("env_fault", "env_verify"),
    "verify_none": ("env_fault", "env_verify"),  # the async harness once graded it failed/"submitted"
    "close": ("success", None),
}
FAST = CollectConfig(concurrency=4, retries=1, backoff_s=0.0, backoff_max_s=0.0)


@pytest.fixture(scope="module", autouse=True)
def breakable_env():
    register(EnvSpec(name="breakable", env=BreakableEnv), replace=True)
    yield
    unregister("breakable")


def call(name: str, **args) -> str:
    return f'<tool_call>\n{json.dumps({"name": name, "arguments": args})}\n</tool_call>'


def solve(req) -> str:
    """Poke, then submit the task's expected answer."""
    return call("poke") if req.turn == 0 else call("submit_answer", answer=req.task.expected)


class Async(ScriptedPolicy):
    """A scripted policy answering one episode at a time: collected by the async harness."""

    async def act_one(self, req, timeout_s=None):
        [gen] = self.act([req])
        return gen


def outcomes(store) -> dict[str, tuple[str, str | None]]:
    return {t.task_id: (t.outcome.tier, t.outcome.fail_reason) for t in TrajectoryStore(store).read()}


@pytest.mark.parametrize("policy_class", [ScriptedPolicy, Async], ids=["batched", "async"])
def test_a_stage_that_breaks_ends_only_its_episode(policy_class, tmp_path):
    started = time.perf_counter()
    tasks = [broken_task(stage) for stage in STAGES] + [broken_task("none", i) for i in range(1, 4)]
    new = collect(tasks, policy_class(solve), tmp_path, show_progress=False, scale=FAST)
    assert len(new) == len(tasks)
    got = outcomes(tmp_path)
    assert got == {t.id: STAGES[t.expected] for t in tasks}
    by_id = {t.task_id: t for t in TrajectoryStore(tmp_path).read()}
    assert "RuntimeError" in by_id["break-execute-0"].faults[-1].message
    assert "ToolResult" in by_id["break-execute_type-0"].faults[-1].message
    assert not by_id["break-reset-0"].steps and by_id["break-reset-0"].faults[-1].kind == "env_start"
    assert by_id["break-verify-0"].verdict is None and len(by_id["break-verify-0"].steps) == 2
    # A resume finds everything stored (faults included) and makes no model call.
    again = policy_class(solve)
    assert collect(tasks, again, tmp_path, show_progress=False, scale=FAST) == [] and again.calls == 0
    assert time.perf_counter() - started < 30


class Picky(ScriptedPolicy):
    """Solves every task, but breaks in one way on the request of task ``break-none-99``."""

    def __init__(self, how: str):
        super().__init__(solve, name=f"picky-{how}")
        self.how, self.batches = how, []

    def act(self, requests):
        self.batches.append(len(requests))
        gens = super().act(requests)
        bad = [i for i, r in enumerate(requests) if r.task.id == "break-none-99"]
        if bad and self.how == "raises":
            raise ValueError("CUDA out of memory (for this prompt)")
        for i in bad:
            if self.how == "drops":
                del gens[i]
            elif self.how == "wrong_type":
                gens[i] = "a str, not a Generation"
            elif self.how == "bad_ids":
                gens[i] = Generation(text=gens[i].text, completion_ids="xyz")
        return gens


@pytest.mark.parametrize("how", ["raises", "drops", "wrong_type", "bad_ids"])
def test_a_policy_failing_one_request_ends_only_that_episode(how, tmp_path):
    tasks = [broken_task("none", i) for i in range(5)] + [broken_task("none", 99)]
    policy = Picky(how)
    collect(tasks, policy, tmp_path, show_progress=False)
    got = outcomes(tmp_path)
    assert got.pop("break-none-99") == ("env_fault", "policy_error")
    assert set(got.values()) == {("success", None)}
    if how in ("raises", "drops"):  # the batch was asked again one request at a time
        assert policy.batches[:2] == [6, 1]


def test_an_async_policy_failing_one_request_ends_only_that_episode(tmp_path):
    class Failing(Async):
        async def act_one(self, req, timeout_s=None):
            if req.task.id == "break-none-99":
                raise KeyError("no such adapter for this request")
            return await super().act_one(req, timeout_s)

    tasks = [broken_task("none", i) for i in range(3)] + [broken_task("none", 99)]
    collect(tasks, Failing(solve), tmp_path, show_progress=False, scale=FAST)
    got = outcomes(tmp_path)
    assert got.pop("break-none-99") == ("env_fault", "policy_error")
    assert set(got.values()) == {("success", None)}


class Buggy(HermesDialect):
    """A dialect with a bug on one reply: it hands back errors that are not ``CallError``s, so the
    harness itself raises while handling that turn."""

    def parse(self, text, toolset):
        if "TRIGGER" in text:
            return ParseResult.model_construct(text="", calls=[], errors=["not a CallError"], repairs=[])
        return super().parse(text, toolset)


@pytest.mark.parametrize("policy_class", [ScriptedPolicy, Async], ids=["batched", "async"])
def test_an_exception_handling_a_turn_fails_that_episode_as_harness_error(policy_class, tmp_path):
    def script(req):
        return "TRIGGER" if req.task.id == "break-none-99" else solve(req)

    tasks = [broken_task("none", i) for i in range(3)] + [broken_task("none", 99)]
    collect(tasks, policy_class(script, dialect=Buggy()), tmp_path, show_progress=False, scale=FAST)
    trajs = {t.task_id: t for t in TrajectoryStore(tmp_path).read()}
    bad = trajs.pop("break-none-99")
    # What the model wrote is never infrastructure: a failed episode, counted in the rates.
    assert (bad.end, bad.outcome.tier, bad.outcome.fail_reason) == ("harness_error", "failed", "harness_error")
    assert bad.faults[-1].kind == "harness_error" and "CallError" in bad.faults[-1].message
    assert all(t.outcome.tier == "success" for t in trajs.values())
    metrics = evaluate([bad, *trajs.values()])
    assert metrics["n"] == 4 and metrics["env_faults"] == 0 and metrics["completion"] == 0.75


def test_guided_exploration_survives_snapshots_and_restores_that_raise():
    def script(req):
        if req.temperature == 0.3:  # cooled by a rescue
            return call("submit_answer", answer=req.task.expected)
        return call("poke") if req.turn == 0 else "not a call"

    stages = ["snapshot", "snapshot_later", "restore", "none"]
    trajs = {t.task_id: graded(t) for t in run_episodes(
        [broken_task(s) for s in stages], ScriptedPolicy(script), HarnessConfig(max_turns=6),
        episode=guided(ExplorationConfig(after_failures=1)))}
    reasons = {k: (t.outcome.tier, t.outcome.fail_reason) for k, t in trajs.items()}
    assert reasons == {"break-snapshot-0": ("env_fault", "env_start"),
                       "break-snapshot_later-0": ("env_fault", "env_snapshot"),
                       "break-restore-0": ("env_fault", "env_restore"),
                       "break-none-0": ("success", None)}  # its failing turn was rewound
    # A restore that raises discards nothing: the failing turn is still there, no rescue recorded.
    restore = trajs["break-restore-0"]
    assert [s.raw for s in restore.steps] == [call("poke"), "not a call"] and not restore.rescues
    assert len(trajs["break-none-0"].rescues) == 1


class Note(BaseModel):
    """What the poker found."""

    note: str

    @field_validator("note")
    @classmethod
    def _not_boom(cls, v: str) -> str:
        if v == "boom":
            raise TypeError("validators may raise anything")  # pydantic passes a TypeError through
        return v


def test_a_pipeline_run_that_breaks_ends_only_that_run():
    def poker(req):
        if req.task.id == "break-none-99":  # raises for the whole batch it is in
            raise RuntimeError("this role's server is gone")
        if req.turn == 0:
            return call("poke")
        boom = req.task.id == "break-none-7" and req.turn == 1
        return call(HANDOFF, note="boom" if boom else "poked")

    def submitter(req):
        return call("submit_answer", answer=req.task.expected)

    pipe = Pipeline(name="poke-submit", env="breakable", roles=(
        Role(name="poker", policy=ScriptedPolicy(poker), tools=("poke",), output=Note, prompt="{task}"),
        Role(name="submitter", policy=ScriptedPolicy(submitter), tools=("submit_answer",),
             prompt="{task}\nNote: {input}")))
    tasks = [broken_task("none", i) for i in (0, 1, 7, 99)] + [broken_task("reset"), broken_task("verify")]
    trajs = {t.task_id: graded(t) for t in run_pipeline(tasks, pipe)}
    reasons = {k: (t.outcome.tier, t.outcome.fail_reason) for k, t in trajs.items()}
    assert reasons == {"break-none-0": ("success", None), "break-none-1": ("success", None),
                       "break-none-7": ("recovered", None),  # the rejected handoff was fed back, then fixed
                       "break-none-99": ("env_fault", "policy_error"),
                       "break-reset-0": ("env_fault", "env_start"),
                       "break-verify-0": ("env_fault", "env_verify")}
    rejected = [r for s in trajs["break-none-7"].steps for r in s.results if r.error == "invalid_handoff"]
    assert len(rejected) == 1 and "TypeError" in rejected[0].content


def test_the_text_a_policy_hands_over_is_stored_as_clean_text(tmp_path):
    """Bytes, None, numbers and lone surrogates as a "reply", and a tool result with a lone
    surrogate: every episode is stored, its text valid UTF-8."""
    replies = [b"\xff\xfe" + call("poke").encode(), None, 12345, "\ud83d" + call("poke"), ["a"]]

    class Odd(ScriptedPolicy):
        def act(self, requests):
            self.calls += len(requests)
            return [Generation(text=replies[int(r.task.id.rsplit("-", 1)[1]) % len(replies)])
                    if r.turn == 0 else Generation(text=solve(r)) for r in requests]

    tasks = [broken_task("none", i) for i in range(len(replies))]
    collect(tasks, Odd(solve, dialect=get_dialect("hermes")), tmp_path, show_progress=False)
    data = b"".join(p.read_bytes() for p in tmp_path.glob("*.jsonl"))
    lines = [json.loads(line.decode("utf-8")) for line in data.splitlines() if line.strip()]
    assert len(lines) == len(tasks) and "\ufffd" in data.decode("utf-8")
    assert all(t.outcome.tier in ("success", "recovered", "failed") for t in TrajectoryStore(tmp_path).read())
