"""Self-repair demonstrations: executed episodes where a realistic mistake comes first, then the fix.

    trajforge collect --tasks tasks.jsonl --policy repair --samples 2 --out store/ --split train
    trajforge collect ... --policy repair --mistakes-from samples-store/     # the policy's own mistakes

A verified task's reference is replayed by the expert with one mistake put in front of one of its
calls (``Mistake.at``). The mistaken turns are executed for real — the environment's real error
or surprising result comes back — and the next turn is the reference call, opening with a
sentence that says what came back and what to do instead. The episode grades ``recovered``; its
mistaken turns are marked (``Step.mistake``) and carry loss mask 0 in training
(``Trajectory.turn_learns``), so SFT learns the recovery and never the mistake.

Where mistakes come from, first that applies for a (task, sample):

1. ``--mistakes-from STORE``: the policy's own measured failures on this task — a turn whose call
   the parser or a tool refused, after turns that followed the reference — replayed verbatim
   (``measured_mistakes``); their fail reasons also order the kinds below (``REASON_KINDS``).
2. the environment's mistakes (``EnvSpec.mistakes``: wrong table/column, wrong entity, nearest
   template, an intermediate result, ...), then the generic ones every environment with tools
   has (``generic_mistakes``: a malformed call, a call to a tool that does not exist, missing
   arguments).

Sample ``k`` of a task plays its ``k``-th mistake (the order rotated per task, so one sample per
task still covers every kind across a pool; a kind in ``LEADING_KINDS`` goes first wherever it
fits); a sample past the task's mistakes is the plain expert episode.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import NamedTuple

from trajforge.envs.mistakes import task_hash
from trajforge.envs.registry import MCP_PREFIX, env_class, env_spec
from trajforge.schema import Mistake, Task, ToolCall, Trajectory

VERB_SLIPS = {"run": "execute", "search": "find", "get": "fetch", "list": "show", "book": "reserve",
              "write": "save", "cancel": "delete", "submit": "send", "describe": "show", "open": "goto",
              "click": "press", "type": "fill", "read": "view", "finish": "done"}
"""Verbs models swap in tool names (``run_sql`` → ``execute_sql``)."""

REASON_KINDS = {
    "malformed": "malformed", "truncated": "malformed", "no_call": "malformed", "unknown_tool": "wrong_tool",
    "invalid_args": "bad_args", "no_such_table": "wrong_table", "no_such_column": "wrong_column",
    "ambiguous_column": "wrong_column", "unknown_city": "wrong_entity", "bad_date": "bad_date",
    "bad_element": "wrong_entity", "bad_url": "bad_url", "retrieval_miss": "wrong_entity",
    "empty_result_submitted": "wrong_entity", "logic_break": "intermediate", "wrong_answer": "nearest_template",
    "tests_failed": "wrong_solution", "missing_function": "wrong_solution", "bad_path": "bad_path",
    "not_found": "intermediate", "guessed_answer": "premature_answer", "unsupported_answer": "premature_answer",
    "sold_out": "sold_out",
}
"""A measured fail reason → the kind of mistake that teaches its recovery."""

LEADING_KINDS = ("collapsed_join", "misplaced_column", "sold_out")
"""Kinds a task plays first wherever they fit, in this order, ahead of the rotation: the mistakes
held-out questions actually make (``collapsed_join``: the best recipe's natural errors, stop 50).
On the SQL benchmark's 186 held-out tasks (``benchmarks/recipes.py``, stop 22) the ``no_such_column`` errors were a right column on a table the query had not joined,
not spelling slips, and self-repair taught on a rotation (9 ``misplaced_column`` episodes of 182)
recovered none of them. Leading with it (stop 26) did not make recovery measurable either
(README, "Recipes side by side"). With measured mistakes (``--mistakes-from``) this does not
apply: their own turns come first and their fail reasons order the kinds. ``sold_out`` is travel's
(a booking of an option the search listed as sold out: 6 of the first 12 natural errors of a
repair-tuned model on its held-out split, stop 57, none recovered)."""

DEMO_POLICIES = ("expert", "repair")
"""Policies whose episodes are demonstrations, never measured mistakes."""


def _slipped_name(name: str, tools: set[str]) -> str:
    verb, sep, rest = name.partition("_")
    wrong = f"{VERB_SLIPS[verb]}{sep}{rest}" if verb in VERB_SLIPS else f"{name}_tool"
    return wrong if wrong not in tools else f"{name}_tool"


def generic_mistakes(task: Task) -> list[Mistake]:
    """The mistakes any environment with tools has: a call cut off (malformed), a tool that does
    not exist, a required argument left out. None of them is dispatched, so any call can take one."""
    if not task.reference:
        return []
    toolset = env_class(task.env).toolset()
    specs = {t.name: t for t in toolset.tools}
    out = [Mistake(kind="malformed", at=0, calls=(task.reference[0],), broken=True,
                   recovery="My call was cut off before it was complete; I'll write it again in full.")]
    right = task.reference[0].name
    wrong = _slipped_name(right, set(specs))
    out.append(Mistake(kind="wrong_tool", at=0, calls=(ToolCall(name=wrong, arguments=task.reference[0].arguments),),
                       recovery=f"There is no tool {wrong}; the one to use is {right}."))
    for i, call in enumerate(task.reference):
        required = [a for a in (specs[call.name].parameters.get("required", []) if call.name in specs else [])
                    if a in call.arguments]
        if required:
            args = {k: v for k, v in call.arguments.items() if k != required[0]}
            out.append(Mistake(kind="bad_args", at=i, calls=(ToolCall(name=call.name, arguments=args),),
                               recovery=f"{call.name} needs its {required[0]} argument; I'll give it."))
            break
    return out


def env_mistakes(task: Task, pool: Sequence[Task]) -> list[Mistake]:
    """The environment's own mistakes for ``task`` (none for tool-list environments)."""
    if task.env.startswith(MCP_PREFIX):
        return []
    hook = env_spec(task.env).mistakes
    return list(hook(task, pool)) if hook else []


class Measured(NamedTuple):
    """What a policy's own samples say about its mistakes."""

    by_task: dict[str, list[Mistake]]
    """Per task, its refused turns, replayable verbatim."""
    reasons: Counter
    """How often each fail reason (of failed episodes) and each refused turn's problem occurred."""


def _same(calls: Sequence[ToolCall], ref: ToolCall) -> bool:
    return len(calls) == 1 and calls[0].name == ref.name and calls[0].arguments == ref.arguments


def _refused(traj: Trajectory, task: Task, dialect: str) -> Mistake | None:
    """The first turn of ``traj`` the parser or a tool refused, if every turn before it followed
    ``task``'s reference: the same mistake in the same place, replayable."""
    for i, step in enumerate(traj.steps):
        problem = (step.errors[0].kind if step.errors
                   else next((r.error or "tool_error" for r in step.results if not r.ok), None))
        if problem is not None:
            if any(r.fault for r in step.results) or any(r.ok for r in step.results) or i >= len(task.reference):
                return None  # a fault, or a call that did something: not a clean replay
            if (traj.dialect != dialect or step.native) and (step.errors or not step.calls):
                return None  # parse errors are text in another dialect, or in structured calls
            raw = step.raw if traj.dialect == dialect and not step.native else None
            # Its raw text is the one mistaken turn, all its calls in it; without raw text each
            # call is a turn of its own (``Mistake.calls``).
            return Mistake(kind=f"measured:{problem}", at=i, calls=() if raw is not None else tuple(step.calls),
                           raw=raw, recovery=f"That call was refused ({problem}); I'll correct it.")
        if i >= len(task.reference) or not _same(step.calls, task.reference[i]):
            return None
    return None


def measured_mistakes(trajs: Iterable[Trajectory], tasks: Sequence[Task], dialect: str = "hermes") -> Measured:
    """The mistakes a model's own graded samples of ``tasks`` made (``--mistakes-from STORE``);
    samples of other tasks, the expert's and the repair policy's episodes are left out."""
    by_id = {t.id: t for t in tasks}
    by_task: dict[str, list[Mistake]] = {}
    reasons: Counter = Counter()
    for traj in trajs:
        task = by_id.get(traj.task_id)
        # Samples of tasks outside ``tasks`` (a held-out split's) say nothing about this pool.
        if task is None or traj.policy in DEMO_POLICIES or traj.outcome is None \
                or traj.outcome.tier == "env_fault" or any(s.mistake for s in traj.steps):
            continue
        if traj.outcome.tier == "failed" and traj.outcome.fail_reason:
            reasons[traj.outcome.fail_reason] += 1
        found = _refused(traj, task, dialect)
        if found is not None:
            reasons[found.kind.removeprefix("measured:")] += 1
            mine = by_task.setdefault(traj.task_id, [])
            if all(m.raw != found.raw or m.calls != found.calls for m in mine):
                mine.append(found)
    return Measured(by_task, reasons)


class Planner:
    """Which mistake sample ``k`` of a task plays (see the module docstring): the repair policy's
    ``plan``, ``RepairPolicy(Planner(pool))`` (``trajforge.policies.repair``)."""

    def __init__(self, pool: Sequence[Task], measured: Measured | None = None, kinds: Sequence[str] = (),
                 lead: Sequence[str] = LEADING_KINDS):
        """``kinds``: only these mistake kinds of the environment's and the generic ones, in this
        order (a task none fits gets none, so its samples are plain expert episodes; ``measured``
        is not used then); empty: every kind, ordered as above. ``lead``: the kinds played first
        wherever they fit, in this order, ahead of the rotation (``LEADING_KINDS`` unless given)."""
        self.pool = list(pool)
        self.measured = measured
        self.kinds = tuple(kinds)
        self.lead = tuple(lead)
        self._cache: dict[str, list[Mistake]] = {}

    def candidates(self, task: Task) -> list[Mistake]:
        if task.id not in self._cache and self.kinds:
            made = {m.kind: m for m in reversed(env_mistakes(task, self.pool) + generic_mistakes(task))}
            self._cache[task.id] = [made[k] for k in self.kinds if k in made]
        if task.id not in self._cache:
            made = env_mistakes(task, self.pool) + generic_mistakes(task)
            if self.measured and self.measured.reasons:
                weight = Counter()
                for reason, n in self.measured.reasons.items():
                    if reason in REASON_KINDS:
                        weight[REASON_KINDS[reason]] += n
                made.sort(key=lambda m: -weight[m.kind])  # stable: the environment's order breaks ties
                own = self.measured.by_task.get(task.id, [])
            else:
                shift = task_hash(task.id) % len(made) if made else 0
                made, own = made[shift:] + made[:shift], []
                made.sort(key=self._leading)  # stable: the rotation stays
            self._cache[task.id] = own + made
        return self._cache[task.id]

    def _leading(self, mistake: Mistake) -> int:
        return self.lead.index(mistake.kind) if mistake.kind in self.lead else len(self.lead)

    def __call__(self, task: Task, sample: int) -> Mistake | None:
        found = self.candidates(task)
        return found[sample] if sample < len(found) else None


__all__ = ["LEADING_KINDS", "Measured", "Planner", "REASON_KINDS", "generic_mistakes", "measured_mistakes"]
