"""LLM-driven task synthesis: an LLM proposes tasks with reference plans; only executed ones stay.

    from trajforge.tasks.llm import LLMConfig, synthesize_llm
    report = synthesize_llm("sql", 50, LLMConfig(url="http://127.0.0.1:8000/v1", model="qwen"),
                            examples=synthesize("sql", 30, seed=0).tasks)

(CLI: ``trajforge synth --env sql --llm URL --llm-model NAME --n 50 --out tasks.jsonl``.)

Each request shows the LLM the environment (``Environment.describe_for_synthesis``: for SQL the
database schema with sample rows), its tool schema, a few verified example tasks and a target tier,
and asks for one JSON object ``{"prompt", "plan": [{"name", "arguments"}, ...], "tier",
"expected"?}``. The reply is read tolerantly (json-repair), de-duplicated against the pool, then
held to the contract in ``tasks/verify.py``: valid calls, ends with the final tool, runs without
tool errors, expected value read off the execution, replay accepted. An ``expected`` the LLM states
must agree with the executed one (else ``expected_mismatch``): an LLM that misjudges its own
plan's result writes misleading prompts too. The tier comes from the executed plan's structure
(``tasks/tiering.py``; outside SQL, scaled by the example tasks' plans), not from the LLM's
claim.

Every discarded proposal is counted by reason and listed with its request number. Requests are
bounded (``max_requests``) and go out ``concurrency`` at a time; replies are checked in request
order, so what is kept does not depend on which reply arrived first. Transient HTTP failures
(connection errors, 429, 5xx) are retried with exponential backoff. When the server is unreachable or refuses (4xx), synthesis stops with
``LLMUnavailable``, whose ``report`` holds every task verified so far.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from collections.abc import Sequence
from typing import Any

import json_repair
from pydantic import BaseModel

from trajforge._compat import moved_names
from trajforge.envs import env_class, env_spec, env_toolset, make_env
from trajforge.envs.answers import answers_match
from trajforge.schema import Split, Task, Tier
from trajforge.tasks.dedup import Deduper, normalize_prompt, plan_key
from trajforge.tasks.llm_client import ChatClient, ChatFailure, LLMConfig
from trajforge.tasks.pool import Rejection, SynthReport
from trajforge.tasks.tiering import TierScale, plan_score, tier_from_plan
from trajforge.tasks.verify import PlanRejected, check_calls, run_plan, verified

TIERS: tuple[Tier, ...] = ("easy", "medium", "hard")

TIER_GUIDE = {
    "easy": "one lookup: a single simple query or tool call, then the final answer",
    "medium": "combines data: a join or a grouping, or three to four tool calls",
    "hard": "several dependent steps: a subquery, a value found first and then used, or "
            "discovering the schema before querying",
}


class LLMUnavailable(RuntimeError):
    """The LLM server could not be used; ``report`` keeps everything verified before that."""

    def __init__(self, message: str, report: SynthReport):
        super().__init__(message)
        self.report = report


# ---- prompts ----------------------------------------------------------------------------------

def example_json(task: Task) -> str:
    plan = [{"name": c.name, "arguments": c.arguments} for c in task.reference]
    example = {"prompt": task.prompt, "plan": plan, "tier": task.tier}
    if env_class(task.env).expected_from_writer:  # the writer must supply it: show its shape
        example["expected"] = task.expected
    return json.dumps(example)


def synthesis_messages(env: str, description: str, examples: Sequence[Task], tier: Tier,
                       avoid: Sequence[str]) -> list[dict]:
    """The chat messages asking for one new task of ``tier``."""
    cls = env_class(env)
    tools = json.dumps(env_toolset(env).openai())
    lines = [
        "## Environment", description, "",
        "## Tools (OpenAI function schema)", tools, "",
    ]
    if examples:
        lines += ["## Verified example tasks", *(example_json(t) for t in examples), ""]
    lines += ["## Difficulty tiers", *(f"- {k}: {v}" for k, v in TIER_GUIDE.items()), ""]
    if avoid:
        lines += ["## Already in the pool (write something different)", *(f"- {p}" for p in avoid), ""]
    final = cls.final_tool
    lines += [
        "## Your job",
        f"Write one NEW {tier} task: a realistic request a user could make, and the exact tool "
        "calls that fulfil it.",
        "- The plan is executed exactly as written; every call must succeed.",
        *([f"- The plan must end with one call to {final}."] if final else []),
        "- The task's expected result is whatever the executed plan produces; `expected` is "
        "optional, and if you give it, it must be exactly that.",
        "Reply with one JSON object and nothing else:",
        json.dumps({"prompt": "...", "plan": [{"name": "...", "arguments": {}}], "tier": tier,
                    "expected": "..."}),
    ]
    system = ("You write tasks for training and evaluating tool-using AI agents. "
              "You reply with one JSON object only.")
    return [{"role": "system", "content": system},
            {"role": "user", "content": "\n".join(lines)}]


# ---- one proposal -----------------------------------------------------------------------------

_MISSING = object()


def parse_proposal(text: str) -> tuple[str, list[Any], Any]:
    """``(prompt, plan steps, claimed expected or _MISSING)`` from an LLM reply; PlanRejected."""
    try:
        data = json_repair.loads(text) if text and text.strip() else ""
    except (ValueError, RecursionError):
        data = ""
    if isinstance(data, list) and data and isinstance(data[0], dict):
        data = data[0]  # a one-element list around the object
    if not isinstance(data, dict) or not data:
        raise PlanRejected("bad_json", f"no JSON object in the reply: {text[:120]!r}")
    prompt, plan = data.get("prompt"), data.get("plan")
    if not isinstance(prompt, str) or not prompt.strip():
        raise PlanRejected("bad_shape", "the object has no non-empty string 'prompt'")
    if not isinstance(plan, list) or not plan:
        raise PlanRejected("bad_shape", "the object has no non-empty list 'plan'")
    steps = []
    for step in plan:
        if isinstance(step, dict) and isinstance(step.get("arguments"), str):
            # Some models write arguments as a JSON string, as in OpenAI tool_calls.
            args = json_repair.loads(step["arguments"]) if step["arguments"].strip() else {}
            step = {**step, "arguments": args}
        steps.append(step)
    return prompt.strip(), steps, data.get("expected", _MISSING)


def claim_agrees(claimed: Any, actual: Any) -> bool:
    """Whether an LLM's stated expected value says the same as the executed one."""
    if isinstance(actual, (str, int, float, list)) and not isinstance(actual, bool):
        return answers_match(claimed if not isinstance(claimed, list) else json.dumps(claimed),
                             actual)
    return claimed == actual


class Proposal(BaseModel):
    """Where a proposal is headed: the environment instance it runs against, and its tier."""

    env: str
    tier: Tier
    split: Split = "train"
    seed: int = 0
    db: str | None = None


def build_candidate(text: str, where: Proposal, dedup: Deduper,
                    allowed: Sequence[Tier] = TIERS, scale: TierScale | None = None) -> Task:
    """The verified Task an LLM reply describes, or PlanRejected with the first failed check."""
    prompt, steps, claimed = parse_proposal(text)
    hit = dedup.check_prompt(prompt)
    if hit:
        raise PlanRejected(*hit)
    final = env_class(where.env).final_tool
    calls = check_calls(where.env, steps)
    hit = dedup.check_plan(where.env, calls, final)
    if hit:
        raise PlanRejected(*hit)
    key = f"{normalize_prompt(prompt)}|{plan_key(calls, final)}|{where.db}|{where.seed}"
    written = writer_expected(where.env, claimed)
    probe = Task(id=f"{where.env}-llm-{hashlib.sha1(key.encode()).hexdigest()[:10]}",
                 env=where.env, prompt=prompt, tier=where.tier, split=where.split, template="llm",
                 reference=(), expected=written, seed=where.seed, db=where.db)
    task, run = verified(probe, calls)
    if written is None and claimed is not _MISSING and claimed is not None \
            and not claim_agrees(claimed, run.expected):
        raise PlanRejected("expected_mismatch",
                           f"the LLM claimed {claimed!r}; executing the plan gave {run.expected!r}")
    tier = tier_from_plan(run.calls, final, run.results, prompt, scale, env=where.env)
    if tier not in allowed:
        raise PlanRejected("off_tier", f"the plan is {tier}; wanted {', '.join(allowed)}")
    return task.model_copy(update={"tier": tier})


def writer_expected(env: str, claimed: Any) -> Any:
    """For environments whose expectation the writer supplies (code: the hidden tests), the
    validated claim — the executed reference must then satisfy it; None for the others, whose
    expectation is read off the execution."""
    cls = env_class(env)
    if not cls.expected_from_writer:
        return None
    if claimed is _MISSING or claimed is None:
        raise PlanRejected("no_tests", f"{env} tasks need `expected` (the hidden tests) in the reply")
    try:
        return cls.check_expected(claimed)
    except ValueError as e:
        reason = "weak_tests" if "same value" in str(e) else "bad_tests"
        raise PlanRejected(reason, str(e)) from None


# ---- the loop ---------------------------------------------------------------------------------

def describe(where: Proposal) -> str:
    """``describe_for_synthesis`` of the environment a proposal will run in."""
    env = make_env(where.env, seed=where.seed)
    probe = Task(id=f"{where.env}-probe", env=where.env, prompt="", tier="easy", split=where.split,
                 template="llm", reference=(), expected=None, seed=where.seed, db=where.db)
    try:
        if not env.expected_from_writer:  # those can't start without the writer's expectation
            env.reset(probe)
        return env.describe_for_synthesis()
    finally:
        env.close()


def tier_scale(env: str, examples: Sequence[Task]) -> TierScale:
    """Plan scores of the examples' executed references, with their tiers (``tasks/tiering.py``).

    Plans the environment tiers itself (``EnvSpec.tier``: SQL's queries) need no scale; an example
    whose reference no longer runs is left out.
    """
    final = env_class(env).final_tool
    own = env_spec(env).tier
    points = []
    for task in examples:
        if task.env != env or (own is not None and own(task.reference) is not None):
            continue
        try:
            run = run_plan(task.model_copy(update={"expected": None}), task.reference)
        except PlanRejected:
            continue
        points.append((plan_score(task.reference, final, run.results, task.prompt), task.tier))
    return TierScale(tuple(points))


def pick_examples(pool: Sequence[Task], env: str, tier: Tier, k: int, rng: random.Random
                  ) -> list[Task]:
    """Up to ``k`` examples from ``pool`` for ``env``, those of ``tier`` first."""
    same = [t for t in pool if t.env == env and t.tier == tier]
    other = [t for t in pool if t.env == env and t.tier != tier]
    picked = rng.sample(same, min(k, len(same)))
    return picked + rng.sample(other, min(k - len(picked), len(other)))


def synthesize_llm(env: str, n: int, cfg: LLMConfig, examples: Sequence[Task] = (),
                   pool: Sequence[Task] = (), tiers: Sequence[Tier] = TIERS,
                   split: Split = "train", seed: int = 0, db: str | None = None) -> SynthReport:
    """Up to ``n`` verified tasks proposed by the LLM for ``env``; rejections counted by reason.

    ``examples`` of ``split`` are shown to the LLM (one of another split would be copied across
    it: a held-out task reworded into train); ``pool`` and all ``examples`` are what new tasks must
    not repeat.
    Target tiers rotate over ``tiers``, and a plan whose structural tier is not among them is
    rejected (``off_tier``). ``seed``/``db`` choose the environment instance (the database).
    """
    if not tiers:
        raise ValueError("no target tiers given")
    env_class(env)  # unknown environment: KeyError naming the known ones, before any request
    budget = cfg.max_requests if cfg.max_requests is not None else 3 * n
    rng = random.Random(cfg.seed)
    dedup = Deduper(cfg.similarity)
    final = env_class(env).final_tool
    for task in [*pool, *examples]:
        dedup.add(task, final if task.env == env else None)
    description = describe(Proposal(env=env, tier=tiers[0], split=split, seed=seed, db=db))
    scale = tier_scale(env, examples)
    showable = [t for t in examples if t.split == split]
    report = SynthReport()
    dropped: Counter[str] = Counter()
    client = ChatClient(cfg)
    failures_in_row = 0
    i = 0
    try:
        with ThreadPoolExecutor(max_workers=cfg.concurrency) as threads:
            while i < budget and len(report.tasks) < n:
                # A wave of requests goes out together; replies are then checked in request order,
                # so results don't depend on which reply arrived first.
                wave = range(i, min(i + cfg.concurrency, budget))
                i = wave[-1] + 1
                asks = []
                for k in wave:
                    tier = tiers[k % len(tiers)]
                    shown = pick_examples(showable, env, tier, cfg.examples, rng)
                    avoid = [t.prompt for t in report.tasks[-15:]]
                    messages = synthesis_messages(env, description, shown, tier, avoid)
                    asks.append((k, tier, threads.submit(_ask, client, messages, cfg.seed + k)))
                for k, tier, future in asks:
                    if len(report.tasks) >= n:
                        break  # the wave's extra replies are not needed (nor their failures)
                    reply = future.result()
                    source = f"request {k + 1}"
                    if isinstance(reply, ChatFailure):
                        _reject(report, dropped, "http_error", reply.detail, source, tier)
                        failures_in_row += 1
                        if reply.fatal or failures_in_row >= cfg.max_failures_in_row:
                            _finish(report, dropped, n)
                            raise LLMUnavailable(f"stopped after {k + 1} requests: "
                                                 f"{reply.detail}", report)
                        continue
                    failures_in_row = 0
                    where = Proposal(env=env, tier=tier, split=split, seed=seed, db=db)
                    try:
                        task = build_candidate(reply, where, dedup, tiers, scale)
                    except PlanRejected as e:
                        _reject(report, dropped, e.reason, e.detail, source, tier)
                        continue
                    dedup.add(task, final)
                    report.tasks.append(task)
    finally:
        client.close()
    _finish(report, dropped, n)
    return report


def _ask(client: ChatClient, messages: list[dict], seed: int) -> str | ChatFailure:
    try:
        return client.complete(messages, seed)
    except ChatFailure as e:
        return e


def _reject(report: SynthReport, dropped: Counter[str], reason: str, detail: str, source: str,
            tier: Tier) -> None:
    dropped[reason] += 1
    report.rejected.append(Rejection(reason=reason, detail=detail, source=source, tier=tier))


def _finish(report: SynthReport, dropped: Counter[str], n: int) -> None:
    counts = dict(dropped)
    if len(report.tasks) < n:
        counts["unfilled"] = n - len(report.tasks)
    report.dropped = counts


__all__ = [
    "ChatClient", "ChatFailure", "LLMConfig", "LLMUnavailable", "Proposal", "build_candidate",
    "claim_agrees", "parse_proposal", "synthesis_messages", "synthesize_llm",
]


__getattr__ = moved_names(__name__, {"SQL_TOOL": "trajforge.envs.sql.tiering", "DEFAULT_THRESHOLD": "trajforge.tasks.dedup"})
