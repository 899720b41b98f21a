"""The harness fuzz test: a collection survives any reply a model can write.

A scripted policy (the mock sits at the model boundary: it returns ``Generation`` objects, or a
loopback chat server sends the replies) answers every turn with a hostile reply from
``tests.harness.hostile_replies`` — arbitrary bytes, lone surrogates, integers past the
int-string limit, nesting past any recursion limit, control tokens, replies over the size cap,
wrong argument types, thousands of calls in one reply, unknown tools, native ``tool_calls`` of any
shape, token fields of the wrong type — in every dialect, through ``collect`` (batched and async),
``compare`` (library eval) and ``trajforge eval`` (CLI, over HTTP). Over 5,000 hostile replies in
all, and for every run:

- the run returns (0 runs lost) and the store holds every (task, sample) episode (0 missing);
- every stored line is valid UTF-8 JSON (the shard's bytes are read back and decoded strictly)
  and a readable record (no torn lines);
- no episode is ``env_fault`` but those whose policy returned token fields of the wrong type
  (``policy_error``, a broken backend): what a model writes is never infrastructure;
- a rerun (``--resume``) finds everything done and makes no model call.

Environments: the real SQL environment and ``TypedEnv`` (every JSON parameter type), both cheap.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.harness.hostile_replies import HostileReplies
from tests.harness.toy_envs import TypedEnv, typed_task
from tests.scripted_chat import ScriptedChatServer
from trajforge.cli.main import app
from trajforge.envs import EnvSpec, env_toolset, unregister
from trajforge.envs.registry import register
from trajforge.eval.run import collect, compare
from trajforge.harness import CollectConfig, HarnessConfig
from trajforge.parse import DIALECTS, get_dialect
from trajforge.parse.base import INTERNAL_ERROR
from trajforge.policies.base import Generation, TurnRequest
from trajforge.policies.scripted import ScriptedPolicy
from trajforge.schema import Trajectory
from trajforge.store import TrajectoryStore
from trajforge.tasks import synthesize
from trajforge.tasks.pool import write_tasks

HARNESS = HarnessConfig(max_turns=10, max_consecutive_errors=10)
"""Long enough episodes that each environment serves several hostile replies."""

BUDGET_S = 240
"""Time budget of each test (each takes 5-16 s alone on the 2-core machine, and up to ~100 s when
`make test`'s other worker runs a many-process test beside it; past this, something hangs or went
quadratic). Replies: at least 1,800 per collect mode, 850 for the library eval and 800 for
the CLI eval — at least 5,250 hostile replies in all."""


@pytest.fixture(scope="module", autouse=True)
def typed_env():
    register(EnvSpec(name="typed", env=TypedEnv), replace=True)
    yield
    unregister("typed")


@pytest.fixture(scope="module")
def tasks():
    sql = synthesize("sql", 24, seed=11).tasks[:8]  # a SQL environment costs a worker process to start
    return sql + [typed_task(i) for i in range(20)]


class HostilePolicy(ScriptedPolicy):
    """A scripted policy whose every turn is a hostile ``Generation`` (see the module docstring),
    drawn deterministically from the task, the turn and the dialect."""

    def __init__(self, dialect: str, name: str | None = None):
        super().__init__(script=[""], name=name or f"hostile-{dialect}", dialect=get_dialect(dialect))
        self.kinds: Counter[str] = Counter()
        self.broken: set[str] = set()
        """Tasks for which a generation had broken backend fields (see HostileReplies.broken)."""

    def reply(self, req: TurnRequest) -> Generation:
        replies = HostileReplies(self.dialect.name, req.toolset, seed=f"{self.name}:{req.task.id}:{req.turn}")
        gen = replies.generation()
        self.kinds.update(replies.drawn)
        if replies.broken:
            self.broken.add(req.task.id)
        return gen

    def act(self, requests: list[TurnRequest]) -> list[Generation]:
        self.calls += len(requests)
        return [self.reply(req) for req in requests]


class AsyncHostilePolicy(HostilePolicy):
    """The same, answering one episode at a time (``act_one``): collected by the async harness."""

    async def act_one(self, req: TurnRequest, timeout_s: float | None = None) -> Generation:
        self.calls += 1
        return self.reply(req)


def stored_lines(store: Path) -> list[dict]:
    """Every line of every shard, read back as bytes: each must be valid UTF-8 and valid JSON."""
    out = []
    for shard in sorted(store.glob("*.jsonl")):
        for n, line in enumerate(shard.read_bytes().split(b"\n"), 1):
            if line.strip():
                try:
                    out.append(json.loads(line.decode("utf-8")))  # strict: invalid UTF-8 raises
                except ValueError as e:
                    raise AssertionError(f"{shard.name}:{n} is not valid UTF-8 JSON: {e}") from None
    return out


def check_store(store: Path, tasks, policies: list[str], broken: set[tuple[str, str]] = frozenset()
                ) -> list[Trajectory]:
    """0 episodes missing, every line valid UTF-8 JSON and readable, no env_fault but the
    ``broken`` (task id, policy) episodes, which are ``policy_error``."""
    lines = stored_lines(store)
    st = TrajectoryStore(store)
    trajs = st.read()
    assert st.torn == [], st.torn
    want = {(t.id, p) for t in tasks for p in policies}
    assert len(lines) == len(want) and {(t.task_id, t.policy) for t in trajs} == want
    faults = Counter(f"{t.end}:{t.outcome.fail_reason}" for t in trajs if t.outcome.tier == "env_fault"
                     and (t.task_id, t.policy) not in broken)
    assert not faults, f"model-written input graded as infrastructure: {faults}"
    assert all(t.outcome.fail_reason == "policy_error" for t in trajs if (t.task_id, t.policy) in broken)
    internal = [e.message for t in trajs for s in t.steps for e in s.errors if INTERNAL_ERROR in e.message]
    assert not internal, internal[:3]
    return trajs


@pytest.mark.parametrize("policy_class", [HostilePolicy, AsyncHostilePolicy], ids=["batched", "async"])
@pytest.mark.slow
def test_collect_survives_hostile_replies_in_every_dialect(policy_class, tasks, tmp_path):
    started, replies, kinds = time.perf_counter(), 0, Counter()
    for dialect in DIALECTS:
        store = tmp_path / dialect
        policy = policy_class(dialect)
        new = collect(tasks, policy, store, harness=HARNESS, show_progress=False,
                      scale=CollectConfig(concurrency=8))
        assert len(new) == len(tasks)
        check_store(store, tasks, [policy.name], {(t, policy.name) for t in policy.broken})
        replies, kinds = replies + policy.calls, kinds + policy.kinds
        # --resume: everything is stored, so a rerun makes no model call and adds nothing.
        again = policy_class(dialect)
        assert collect(tasks, again, store, harness=HARNESS, show_progress=False) == [] and again.calls == 0
        assert len(TrajectoryStore(store).read()) == len(tasks)
    assert replies >= 1800, replies
    assert set(kinds) == set(HostileReplies.KINDS), kinds
    assert time.perf_counter() - started < BUDGET_S


def test_library_eval_survives_hostile_replies(tasks, tmp_path):
    started = time.perf_counter()
    policies = [HostilePolicy(d, name=f"eval-{d}") for d in ("hermes", "openai", "pythonic", "qwen3_xml")]
    results = compare(tasks, policies, tmp_path, harness=HARNESS, show_progress=False)
    assert set(results) == {p.name for p in policies}
    assert all(r["n"] + r["env_faults"] == len(tasks) for r in results.values()), results
    check_store(tmp_path, tasks, [p.name for p in policies], {(t, p.name) for p in policies for t in p.broken})
    assert time.perf_counter() - started < BUDGET_S
    assert sum(p.calls for p in policies) >= 850


def _server_reply(dialects: dict[str, HostileReplies]):
    """What the loopback server answers: a hostile message for the dialect the request's model
    name names (the CLI's policies are ``openai:URL#DIALECT``)."""
    def answer(body: dict) -> dict:
        replies = dialects[body["model"]]
        if body["model"] == "openai":
            return {"content": replies.text() if replies.rng.random() < 0.5 else None,
                    "tool_calls": replies.native_calls()}
        return {"content": replies.text()}
    return answer


@pytest.mark.slow
def test_cli_eval_survives_hostile_replies_over_http(tasks, tmp_path):
    started = time.perf_counter()
    pool = tmp_path / "tasks.jsonl"
    write_tasks(pool, tasks)
    dialects = {d: HostileReplies(d, env_toolset("sql"), seed=5) for d in DIALECTS}
    n_requests = 0
    with ScriptedChatServer([_server_reply(dialects)] * 20_000) as srv:
        args = ["eval", "--tasks", str(pool), "--split", "", "--store", str(tmp_path / "store"),
                "--json", str(tmp_path / "eval.json"), "--max-turns", "4", "--max-consecutive-errors", "4"]
        for d in DIALECTS:
            args += ["--policy", f"openai:{srv.url}#{d}" + ("" if d == "openai" else f"?dialect={d}"),
                     "--name", f"cli-{d}"]
        res = CliRunner().invoke(app, args)
        n_requests = len(srv.requests)
    assert res.exit_code == 0, res.output + repr(res.exception)
    metrics = json.loads((tmp_path / "eval.json").read_text())
    assert set(metrics) == {f"cli-{d}" for d in DIALECTS}
    check_store(tmp_path / "store", tasks, [f"cli-{d}" for d in DIALECTS])
    assert n_requests >= 800, n_requests
    assert time.perf_counter() - started < BUDGET_S
