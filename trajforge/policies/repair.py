"""Repair policy: the expert, with one realistic mistake played first and then recovered from.

``RepairPolicy(plan)`` replays each task's verified reference like the expert, except that
``plan(task, sample)`` may give a ``Mistake`` for the episode: the reference up to ``mistake.at``,
then the mistaken turns (marked ``Generation.mistake``, so the harness stores ``Step.mistake``
and training masks them), then the reference from ``at`` on, whose first turn opens with the
mistake's recovery sentence. The harness executes every turn for real, so the error or the
surprising result the recovery answers is the environment's own. Plans come from
``trajforge.tasks.repair.Planner``; CLI: ``trajforge collect --policy repair``.

``MistakeFirstPolicy(model, plan)`` plays the same script up to and including the mistake, then
hands the episode to a model: the model's own recovery (RFT keeps the verified ones), or a
recovery measurement with an error in every episode.
"""

from __future__ import annotations

from collections.abc import Callable

from trajforge.parse import Dialect
from trajforge.policies.base import Generation, TurnRequest
from trajforge.policies.expert import ExpertPolicy
from trajforge.schema import Mistake, Task, ToolCall, Toolset


class RepairPolicy:
    batch_size = 1024  # no model: any batch is free

    def __init__(self, plan: Callable[[Task, int], Mistake | None], dialect: Dialect | None = None,
                 name: str = "repair"):
        self.plan = plan
        self.expert = ExpertPolicy(dialect, name)
        self.name = name
        self.dialect = self.expert.dialect

    def act(self, requests: list[TurnRequest]) -> list[Generation]:
        return [self.turn(req, self.plan(req.task, req.sample)) for req in requests]

    def turn(self, req: TurnRequest, mistake: Mistake | None) -> Generation:
        if mistake is None or req.turn < mistake.at:
            return self.expert.reference_turn(req.task, req.turn)
        made = max(1, len(mistake.calls))  # mistaken turns
        k = req.turn - mistake.at
        if k < made:
            return Generation(text=self.mistaken_text(req, mistake, k), mistake=mistake.kind)
        i = req.turn - made
        if i != mistake.at:
            return self.expert.reference_turn(req.task, i)
        # The mistaken turn already said the plan (``mistaken_words``): the fix says what went
        # wrong instead of restating it. A model that copies its last turn's words copies its
        # last call after them (stop 50: the recovery sentence, then the same failing query).
        return self.expert.reference_turn(req.task, i, mistake.recovery, restate=mistake.raw is not None)

    def mistaken_text(self, req: TurnRequest, mistake: Mistake, k: int) -> str:
        if k == 0 and mistake.raw is not None:
            return mistake.raw  # the policy's own measured turn, verbatim
        call = mistake.calls[k]
        why = mistaken_words(req.task, mistake, k)
        if k == 0 and mistake.broken:
            return broken_text(self.dialect, why, call, req.toolset)
        return self.dialect.render_assistant(why, [call])


def mistaken_words(task, mistake: Mistake, k: int) -> str:
    """The sentence before mistaken call ``k``: the task's own reasoning for the first, then what
    a model that trusts its last result says (``premature_answer``'s submission names the number)."""
    call = mistake.calls[k]
    if k == 0 and mistake.words is not None:
        return mistake.words
    if k == 0:
        return task.reasoning[mistake.at] if mistake.at < len(task.reasoning) else f"I'll call {call.name}."
    if "answer" in call.arguments:
        return f"So I'll submit {call.arguments['answer']}."
    return "I'll check the result."


def broken_text(dialect: Dialect, why: str, call: ToolCall, toolset: Toolset) -> str:
    """``call`` written so that the parser refuses it, as small models do: cut off partway through
    its arguments (the end of a token budget). Cut earlier until the dialect's tolerant parser
    gives up (it repairs a lost closing brace), so the turn really is refused."""
    full = dialect.render_assistant(why, [call])
    body = len(full) - len(why)
    for share in (0.6, 0.5, 0.4, 0.3):
        text = full[: len(why) + int(body * share)]
        parsed = dialect.parse(text, toolset)
        if parsed.errors and not parsed.calls:
            return text
    return full[: len(why) + body // 3]


SAMPLING_ATTRS = ("sampling", "temperature", "top_p", "max_tokens", "max_new_tokens", "seed")
"""The attributes ``harness.sampling_of`` reads off a policy."""


class MistakeFirstPolicy:
    """A model put where a mistake has just happened: the expert's reference up to the planned
    mistake, the mistaken turns (marked, executed for real), then ``model`` plays every turn after.

    What the model does next is its own recovery, or not: sampled at T > 0 it gives RFT
    recoveries in the model's own words to keep (``RFTConfig.mistake_attempts``); greedy on
    held-out tasks it measures recovery with as many errors as there are tasks
    (``benchmarks/recipes.py --probe``), where a model that rarely errs leaves too few to count.
    Tasks the plan gives no mistake for (``plan(task, sample)`` is None) are the model's from the
    first turn. The name is the model's with ``+mistake`` (resume keys keep the two apart)."""

    def __init__(self, model, plan: Callable[[Task, int], Mistake | None], name: str | None = None):
        self.model = model
        self.plan = plan
        self.repair = RepairPolicy(plan, model.dialect)
        self.name = name or f"{model.name}+mistake"
        self.dialect = model.dialect
        self.batch_size = model.batch_size

    def __getattr__(self, name: str):
        """The model's sampling settings are this policy's (``harness.sampling_of`` reads them for
        the store's resume key); policies may not import the harness, so they are passed through."""
        if name in SAMPLING_ATTRS:
            return getattr(self.model, name)
        raise AttributeError(name)

    def scripted(self, req: TurnRequest) -> Mistake | None:
        """The request's mistake when its turn is still the script's (the reference before the
        mistake, or the mistake itself), else None: the model's turn."""
        mistake = self.plan(req.task, req.sample)
        return mistake if mistake is not None and req.turn < mistake.at + max(1, len(mistake.calls)) else None

    def act(self, requests: list[TurnRequest]) -> list[Generation]:
        out: list[Generation | None] = [None] * len(requests)
        handed = []
        for i, req in enumerate(requests):
            mistake = self.scripted(req)
            if mistake is None:
                handed.append(i)
            else:
                out[i] = self.repair.turn(req, mistake)
        if handed:
            for i, gen in zip(handed, self.model.act([requests[i] for i in handed])):
                out[i] = gen
        return out
