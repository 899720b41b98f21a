"""``trajforge doctor RUN_DIR``: read a run's curves, metrics and stores and name what is wrong.

    trajforge doctor runs/demo             # findings, each with its numbers and the next thing to try
    trajforge doctor runs/demo --json      # the same as JSON

    from trajforge.eval.doctor import diagnose
    for f in diagnose("runs/demo").findings:
        print(f.rule, f.cause, f.evidence, f.next_step)

Each rule is a small function over the run (``Facts``) with its threshold stated beside it (the
constants below; README "Diagnosing a run" lists them). A rule returns its findings (``[]``: it
looked and found nothing), or a string saying why it could not look (no curves, too few
episodes); ``Diagnosis.checks`` records which of the three each rule gave, so "healthy" means
"every rule that could look found nothing", never "nothing was looked at". With no finding the
diagnosis holds one ``healthy`` finding.

What a run directory holds (stores, ``metrics.json``, ``curves.jsonl``, adapter metadata):
``eval/rundir.py``. Rules about one policy look at the run's *subject*: the "after" policy of the
before/after pair (``rundir.pick_pair``), else the last policy to appear. Rates count episodes
not graded env_fault, as ``grade/metrics.py`` does.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Literal

from pydantic import BaseModel, Field

from trajforge.eval.rundir import Curves, Pair, Run, load_run, pick_pair
from trajforge.grade.metrics import summarize
from trajforge.schema import Trajectory

# ---- thresholds (README "Diagnosing a run" repeats them) --------------------------------------
LOSS_FALL = 0.30
"""The loss "falls" when its last fifth averages at least 30% below its first fifth."""
LOSS_STALL = 0.05
"""The loss "does not fall" when its last fifth is within 5% of its first fifth (or above)."""
FLAT_SUCCESS = 0.05
"""Completion is "flat" when it gained at most 5 points (in-loop first → last, or before → after)."""
GAP = 0.20
"""Train completion 20+ points above held-out completion is memorisation."""
TURNS_RISE = 0.5
"""Average turns "rise" by half a turn or more."""
INVALID_RATE = 0.15
"""15%+ of the subject's turns with a parse or validation error."""
VALIDITY_DROP = 0.10
"""In-loop validity 10+ points below its first value, or invalid turns up 10+ points before → after."""
VOID_RATE = 0.05
"""5%+ of the subject's turns empty (no text, no call)."""
ENV_FAULT_RATE = 0.05
"""5%+ of all episodes graded env_fault."""
RECOVERY_MIN = 0.20
"""Under 20% of the episodes that met an error recovered: the model does not repair."""
RECOVERED_SHARE = 0.30
"""30%+ of the solved episodes needed a recovery: first attempts are often wrong."""
GUESSED_SHARE = 0.05
"""5%+ of the accepted answers were guesses (``Outcome.guessed``): completion is partly luck."""
MIN_EPISODES = 10
"""Rates are judged on at least this many episodes (or turns, or errored episodes)."""
LR_TINY = 1e-6
"""A peak learning rate below 1e-6 cannot move a LoRA adapter in a short run."""
LOSS_TOKEN_SHARE = 0.01
"""Under 1% of the trained tokens carrying loss: the masks hide what should be learned."""
GRAD_SPIKE = 10.0
"""A gradient norm 10x the run's median is an explosion."""
LR_PEAK_SHARE = 0.5
"""A schedule whose highest logged rate stays under half the configured one never warmed up."""
MIN_SAMPLES = 50
"""Fewer training samples than this is too few to learn a tool's idioms from."""
MANY_EPOCHS = 4.0
"""This many epochs or more over fewer than ``MANY_EPOCHS_SAMPLES`` samples memorises them."""
MANY_EPOCHS_SAMPLES = 500
GROUP_SIGNAL = 0.25
"""Under a quarter of GRPO's groups (3+ steps) had rollouts that scored differently: most of each
step's rollouts carry no advantage, so nothing is learned from them."""
GROUPS_FAIL, GROUPS_SOLVE = 0.2, 0.8
"""A GRPO solve rate at or under 20% (over 80%) says its agreeing groups mostly all fail (all succeed)."""
HELD_OUT = ("heldout", "test")
"""Splits that must not share a task or a prompt with ``train``."""

Status = Literal["problem", "warning", "healthy"]


class Finding(BaseModel):
    """One thing found wrong (or the single "healthy" finding), with the numbers behind it."""

    rule: str
    """The rule that fired (a function name below without ``rule_``)."""
    status: Status
    """``problem`` (training cannot work as it is), ``warning`` (worth a look) or ``healthy``."""
    title: str
    """What was seen, in a line."""
    cause: str
    """The likely cause."""
    evidence: dict[str, Any] = Field(default_factory=dict)
    """The numbers behind it (and the threshold they crossed)."""
    next_step: str
    """The next thing to try."""
    source: str | None = None
    """The curves file, adapter or policy the numbers come from."""


class Check(BaseModel):
    """What one rule did."""

    rule: str
    result: Literal["fired", "ok", "not checked"]
    note: str = ""
    """Why the rule could not look (``not checked``)."""


class Diagnosis(BaseModel):
    root: str
    """The run directory."""
    subject: str | None
    """The policy the per-policy rules judged."""
    findings: list[Finding]
    checks: list[Check]

    @property
    def healthy(self) -> bool:
        return all(f.status == "healthy" for f in self.findings)


# ---- facts ------------------------------------------------------------------------------------


@dataclass
class Facts:
    """What the rules read: the run, its subject and before/after policies, their episodes."""

    run: Run
    pair: Pair | None
    subject: str | None
    by_policy: dict[str, list[Trajectory]]

    def counted(self, policy: str | None) -> list[Trajectory]:
        return [t for t in self.by_policy.get(policy or "", []) if not _fault(t)]

    def adapter_for(self, curves: Curves) -> dict[str, Any]:
        """The adapter metadata saved in the same folder as ``curves`` ({} when none)."""
        folder = str(Path(curves.source).parent)
        for path, meta in self.run.adapters.items():
            if str(Path(path).parent) == folder:
                return meta
        return {}


def _fault(t: Trajectory) -> bool:
    return bool(t.outcome and t.outcome.tier == "env_fault")


def _solved(t: Trajectory) -> bool:
    return bool(t.outcome and t.outcome.correct)


def _erred(step) -> bool:
    return bool(step.errors) or any(not r.ok for r in step.results)


def _troubled(t: Trajectory) -> bool:
    return any(_erred(s) for s in t.steps)


def _after_first_error(t: Trajectory) -> str:
    """What the turn after an episode's first error did: ``repeat`` (the same calls, or the same
    refused text, again), ``other`` (something else called) or ``none`` (no call, or no next turn)."""
    for i, step in enumerate(t.steps):
        if not _erred(step):
            continue
        nxt = t.steps[i + 1] if i + 1 < len(t.steps) else None
        if nxt is None or not (nxt.calls or nxt.errors):
            return "none"
        same_calls = bool(step.calls) and [(c.name, c.arguments) for c in nxt.calls] == \
            [(c.name, c.arguments) for c in step.calls]
        return "repeat" if same_calls or (step.raw and nxt.raw == step.raw) else "other"
    return "none"


def _finite(points: list[tuple[int, float]]) -> list[tuple[int, float]]:
    return [(s, v) for s, v in points if math.isfinite(v)]


def _window(points: list[tuple[int, float]]) -> tuple[float, float]:
    """Mean of the first and of the last fifth of the finite values (at least one point each): one
    NaN/inf loss would make a mean of nothing; ``rule_grad_norm`` reports those steps."""
    values = [v for _, v in _finite(points)]
    k = max(1, len(values) // 5)
    return sum(values[:k]) / k, sum(values[-k:]) / k


def _r(x: float) -> float:
    return round(x, 4) if math.isfinite(x) else x


def _completion(ts: list[Trajectory]) -> float:
    return sum(map(_solved, ts)) / len(ts) if ts else 0.0


def _loss_fell(c: Curves) -> bool:
    if len(_finite(c.loss)) < 2:
        return False
    first, last = _window(c.loss)
    return first > 0 and last <= (1 - LOSS_FALL) * first


def _paired(facts: Facts) -> tuple[list[Trajectory], list[Trajectory]] | None:
    """The before and after policies' episodes on the (task, sample) pairs both attempted (neither
    an env_fault), when there are ``MIN_EPISODES`` of them: a before → after change is measured on
    the same tasks, never on one policy's 2 tasks against the other's 100."""
    if facts.pair is None:
        return None
    before = {(t.task_id, t.sample): t for t in facts.counted(facts.pair.before)}
    after = {(t.task_id, t.sample): t for t in facts.counted(facts.pair.after)}
    shared = [k for k in after if k in before]
    if len(shared) < MIN_EPISODES:
        return None
    return [before[k] for k in shared], [after[k] for k in shared]


def _pair_stats(facts: Facts) -> tuple[dict[str, Any], dict[str, Any]] | None:
    paired = _paired(facts)
    return None if paired is None else (summarize(paired[0]), summarize(paired[1]))


def _split_gap(facts: Facts) -> tuple[float, float, int, int] | None:
    """(train completion, held-out completion, n train, n held-out) of the subject, when both have
    ``MIN_EPISODES`` episodes."""
    mine = facts.counted(facts.subject)
    train = [t for t in mine if t.split == "train"]
    held = [t for t in mine if t.split in HELD_OUT]
    if len(train) < MIN_EPISODES or len(held) < MIN_EPISODES:
        return None
    return _completion(train), _completion(held), len(train), len(held)


# ---- rules: training curves ---------------------------------------------------------------------

Result = list[Finding] | str


def rule_success_flat(facts: Facts) -> Result:
    """Success flat while the loss falls: the objective improves and the task does not."""
    falling = [c for c in facts.run.curves if _loss_fell(c)]
    if not falling:
        return "no curves whose loss fell" if facts.run.curves else "no curves.jsonl"
    out, judged = [], 0
    for c in falling:
        first, last = _window(c.loss)
        ev: dict[str, Any] = {"loss_first": _r(first), "loss_last": _r(last), "flat_at": FLAT_SUCCESS}
        evals, solved = c.evals.get("completion") or [], c.scalars.get("solved") or []
        if len(evals) >= 2 or len(solved) >= 2:
            # An in-loop evaluation is one point per evaluation: first → last. GRPO's ``solved`` is
            # one batch of rollouts a step, noisy by ±0.1: first fifth → last fifth, as the loss.
            s0, s1 = (evals[0][1], evals[-1][1]) if len(evals) >= 2 else _window(solved)
            ev.update(completion_first=_r(s0), completion_last=_r(s1),
                      measured="in-loop evaluation" if len(evals) >= 2 else "rollouts solved (first and last fifth)")
            gain = s1 - s0
        elif (stats := _pair_stats(facts)) is not None:
            ev.update(completion_before=_r(stats[0]["completion"]), completion_after=_r(stats[1]["completion"]),
                      measured=f"{facts.pair.before} → {facts.pair.after}")
            gain = stats[1]["completion"] - stats[0]["completion"]
        else:
            continue
        judged += 1
        if gain > FLAT_SUCCESS:
            continue
        gap = _split_gap(facts)
        if gap and gap[0] - gap[1] >= GAP:
            ev.update(train_completion=_r(gap[0]), heldout_completion=_r(gap[1]))
            cause, step = ("the data is memorised: train tasks are solved, held-out ones are not",
                           "vary the training worlds (entities, schemas), train fewer epochs or add dropout, "
                           "and watch held-out completion in the loop (--eval-tasks, --eval-every)")
        elif c.recipe == "grpo":
            cause, step = ("the reward is too sparse: few rollouts earn anything, so the gradient has little "
                           "to follow", "raise the milestone bonus (--milestone-bonus) or the step weight, start "
                           "from an SFT adapter, or use the curriculum's easy tier")
        else:
            cause, step = ("the loss falls on the demonstrations but the skill does not transfer (memorised "
                           "data, or a sparse signal)", "compare train and held-out completion (evaluate the "
                           "adapter on --split train too), vary the training worlds and check the rewards")
        out.append(Finding(rule="success_flat", status="problem", source=c.source, evidence=ev, cause=cause,
                           next_step=step, title=f"completion gained {100 * gain:+.0f} points while the loss fell "
                                                 f"{100 * (1 - last / first):.0f}%"))
    return out if judged else "the loss fell, but no in-loop completion curve and no before/after pair"


def rule_loss_not_falling(facts: Facts) -> Result:
    """The loss does not fall (SFT, DPO): the learning rate or the masks."""
    curves = [c for c in facts.run.curves if len(_finite(c.loss)) >= 2 and c.recipe != "grpo"]
    if not curves:
        return "no SFT/DPO loss curve with 2+ points (a GRPO loss is not expected to fall)"
    out = []
    for c in curves:
        first, last = _window(c.loss)
        if last < (1 - LOSS_STALL) * first:
            continue
        meta = facts.adapter_for(c)
        config, result = meta.get("config") or {}, meta.get("result") or {}
        lrs = [v for _, v in c.scalars.get("lr", [])]
        peak = max(lrs, default=config.get("lr"))
        ev: dict[str, Any] = {"loss_first": _r(first), "loss_last": _r(last), "steps": len(c.loss),
                              "stall_at": LOSS_STALL, "peak_lr": peak, "configured_lr": config.get("lr")}
        tokens, loss_tokens = result.get("tokens"), result.get("loss_tokens")
        if tokens:
            ev["loss_token_share"] = _r(loss_tokens / tokens) if loss_tokens is not None else None
        if peak is not None and peak < LR_TINY:
            cause = f"the learning rate is too small ({peak:.1e} < {LR_TINY:.0e})"
            step = "raise --lr (LoRA SFT learns at 1e-4 to 1e-3; the library default is 2e-4)"
        elif all(v == 0 for _, v in _finite(c.loss)) or (tokens and loss_tokens is not None
                                                 and loss_tokens / tokens < LOSS_TOKEN_SHARE):
            cause = "almost no token carries loss: the masks hide the assistant turns"
            step = "check the loss masks (train/sequences.py) and --max-len: samples cut to prompts carry no loss"
        else:
            cause = "the learning rate or the masking"
            step = "try a higher --lr; check the loss masks and that the data holds the calls to learn"
        out.append(Finding(rule="loss_not_falling", status="problem", source=c.source, evidence=ev, cause=cause,
                           next_step=step, title=f"the loss went {first:.3f} → {last:.3f} over {len(c.loss)} steps"))
    return out


def rule_grad_norm(facts: Facts) -> Result:
    """Non-finite gradient norms (skipped steps) or a norm that explodes."""
    curves = [c for c in facts.run.curves if c.scalars.get("grad_norm") or c.scalars.get("skipped_nonfinite")
              or len(_finite(c.loss)) < len(c.loss)]
    if not curves:
        return "no gradient norms logged"
    out = []
    for c in curves:
        norms = [v for _, v in c.scalars.get("grad_norm", [])]
        points = c.scalars.get("grad_norm", []) + c.loss
        nonfinite = {s for s, v in points if not math.isfinite(v)}  # a step whose loss and norm are both NaN is one
        skipped = len(c.scalars.get("skipped_nonfinite", []))  # rows of their own, with no loss or norm
        bad = len(nonfinite) + skipped
        finite = [v for v in norms if math.isfinite(v)]
        if bad:
            out.append(Finding(rule="grad_norm", status="problem", source=c.source,
                               title=f"{bad} steps with a NaN/inf loss or gradient (skipped)",
                               evidence={"nonfinite_steps": bad, "steps": len({s for s, _ in points}) + skipped},
                               cause="numerical overflow: fp16, a learning rate too high, or an empty loss mask",
                               next_step="compute in bf16 or fp32 (TRAJFORGE_DTYPE), lower --lr, and check "
                                         "samples with no loss token"))
        if len(finite) >= 5:
            median = statistics.median(finite)
            if median > 0 and max(finite) >= GRAD_SPIKE * median:
                out.append(Finding(rule="grad_norm", status="warning", source=c.source,
                                   title=f"gradient norm peaked at {max(finite):.3g}, {max(finite) / median:.0f}x "
                                         "its median", evidence={"max": _r(max(finite)), "median": _r(median),
                                                                "spike_at": GRAD_SPIKE},
                                   cause="exploding gradients (a few outlier batches or a learning rate too high)",
                                   next_step="lower --lr or lengthen the warm-up; look at the samples of that step"))
    return out


def rule_lr_schedule(facts: Facts) -> Result:
    """A learning rate that is 0 throughout, or never comes near its configured peak."""
    curves = [c for c in facts.run.curves if len(c.scalars.get("lr", [])) >= 10]
    if not curves:
        return "no curve with 10+ logged learning rates"
    out = []
    for c in curves:
        lrs = [v for _, v in c.scalars["lr"]]
        want = (facts.adapter_for(c).get("config") or {}).get("lr")
        ev = {"max_logged_lr": max(lrs), "configured_lr": want, "peak_share_at": LR_PEAK_SHARE}
        if max(lrs) <= 0:
            out.append(Finding(rule="lr_schedule", status="problem", source=c.source, evidence=ev,
                               title="the learning rate is 0 at every step", cause="the schedule never warmed up",
                               next_step="check the warm-up and the total steps the schedule was built for"))
        elif want and max(lrs) < LR_PEAK_SHARE * want:
            out.append(Finding(rule="lr_schedule", status="warning", source=c.source, evidence=ev,
                               title=f"the learning rate peaked at {max(lrs):.2e}, under half the configured {want:.2e}",
                               cause="the warm-up is longer than the run, or the run stopped early",
                               next_step="shorten the warm-up or train the steps the schedule expects"))
    return out


def rule_too_few_samples(facts: Facts) -> Result:
    """Too few training samples, or many epochs over few of them."""
    metas = {p: m for p, m in facts.run.adapters.items() if (m.get("result") or {}).get("samples") is not None}
    if not metas:
        return "no adapter metadata with a sample count"
    out = []
    warm = _warm_rft_rounds(facts.run.adapters)
    for path, meta in metas.items():
        samples = meta["result"]["samples"]
        epochs = (meta.get("config") or {}).get("epochs")
        ev = {"samples": samples, "epochs": epochs, "min_samples": MIN_SAMPLES}
        if samples < MIN_SAMPLES and path not in warm:
            out.append(Finding(rule="too_few_samples", status="warning", source=path, evidence=ev,
                               title=f"{samples} training samples", cause="too little data to learn the tools from",
                               next_step="collect more expert episodes (trajforge synth --n, collect --samples)"))
        elif epochs and epochs >= MANY_EPOCHS and samples < MANY_EPOCHS_SAMPLES:
            out.append(Finding(rule="too_few_samples", status="warning", source=path, evidence=ev,
                               title=f"{epochs:g} epochs over {samples} samples",
                               cause="repeating few samples many times memorises them",
                               next_step="more samples (or varied worlds) and fewer epochs"))
    return out


def _warm_rft_rounds(adapters: dict[str, dict[str, Any]]) -> set[str]:
    """The adapter files of warm-started RFT rounds (``train rft --warm-start``): a round that goes
    on from the previous round's adapter on its own few keeps plus as many expert episodes, by
    design a handful of samples (README). Their count says nothing about the data the tools were
    learned from: that is round 0's (its own folder, or the ``--init-adapter``), judged there.
    Such a round is the run's adopted adapter (``rft`` meta, warm, with an ``init_adapter``) or a
    ``round-N`` folder (N >= 1) beside a warm run's adopted adapter."""
    def warm_run(meta: dict[str, Any]) -> bool:
        rft = meta.get("rft")
        config = rft.get("config") if isinstance(rft, dict) else None
        return isinstance(config, dict) and config.get("warm_start") is True

    runs = {Path(p).parent for p, m in adapters.items() if warm_run(m)}
    out = set()
    for path, meta in adapters.items():
        folder = Path(path).parent
        round_n = folder.name.startswith("round-") and folder.name[6:].isdigit() and int(folder.name[6:]) >= 1
        if meta.get("init_adapter") and (warm_run(meta) or (round_n and folder.parent in runs)):
            out.add(path)
    return out


# ---- rules: episodes --------------------------------------------------------------------------


def rule_generalization_gap(facts: Facts) -> Result:
    """Train completion far above held-out completion: memorised, not learned."""
    gap = _split_gap(facts)
    if gap is None:
        return f"the subject lacks {MIN_EPISODES}+ episodes on both train and held-out splits"
    train, held, n_train, n_held = gap
    if train - held < GAP:
        return []
    return [Finding(rule="generalization_gap", status="problem", source=facts.subject,
                    title=f"train completion {100 * train:.0f}% vs held-out {100 * held:.0f}%",
                    evidence={"train_completion": _r(train), "heldout_completion": _r(held), "n_train": n_train,
                              "n_heldout": n_held, "gap_at": GAP},
                    cause="the model memorised the training tasks (entities, nearest template)",
                    next_step="train on varied worlds, fewer epochs, retrieved demonstrations; add self-repair data")]


def rule_detours(facts: Facts) -> Result:
    """Average turns rising while completion stays flat: the policy wanders."""
    out = []
    looked = False
    for c in facts.run.curves:
        turns, comp = c.evals.get("avg_turns") or [], c.evals.get("completion") or []
        if len(turns) < 2 or len(comp) < 2:
            continue
        looked = True
        rise, gain = turns[-1][1] - turns[0][1], comp[-1][1] - comp[0][1]
        if rise >= TURNS_RISE and gain <= FLAT_SUCCESS:
            out.append(_detour(c.source, turns[0][1], turns[-1][1], comp[0][1], comp[-1][1]))
    if (stats := _pair_stats(facts)) is not None:
        looked = True
        b, a = stats
        if a["avg_turns"] - b["avg_turns"] >= TURNS_RISE and a["completion"] - b["completion"] <= FLAT_SUCCESS:
            out.append(_detour(f"{facts.pair.before} → {facts.pair.after}", b["avg_turns"], a["avg_turns"],
                               b["completion"], a["completion"]))
    return out if looked else "no in-loop avg_turns curve and no before/after pair"


def _detour(source: str, t0: float, t1: float, c0: float, c1: float) -> Finding:
    return Finding(rule="detours", status="problem", source=source,
                   title=f"average turns {t0:.2f} → {t1:.2f} while completion {100 * c0:.0f}% → {100 * c1:.0f}%",
                   evidence={"turns_first": _r(t0), "turns_last": _r(t1), "completion_first": _r(c0),
                             "completion_last": _r(c1), "rise_at": TURNS_RISE, "flat_at": FLAT_SUCCESS},
                   cause="detours: more calls that do not bring the answer closer",
                   next_step="raise the efficiency weight (--reward-weights ...,l3,...), slim trial-and-error out "
                             "of the demonstrations, look at the longest episodes (trajforge view)")


def _invalid_share(trajs: list[Trajectory]) -> tuple[float, int, Counter[str]]:
    turns = [s for t in trajs for s in t.steps]
    kinds = Counter(e.kind for s in turns for e in s.errors[:1])
    return (sum(kinds.values()) / len(turns) if turns else 0.0), len(turns), kinds


def rule_invalid_calls(facts: Facts) -> Result:
    """Many turns whose call did not parse or validate, or a share that rises."""
    mine = facts.counted(facts.subject)
    share, n_turns, kinds = _invalid_share(mine)
    if n_turns < MIN_EPISODES:
        return f"the subject has fewer than {MIN_EPISODES} turns"
    out = []
    step = ("check that training and evaluation use the same dialect; "
            + ("raise max_new_tokens (calls are cut off); " if kinds.get("truncated") else "")
            + "train on more examples of the failing call (trajforge query \"SELECT error_kinds, count(*) ...\")")
    if share >= INVALID_RATE:
        out.append(Finding(rule="invalid_calls", status="problem", source=facts.subject,
                           title=f"{100 * share:.0f}% of turns had a call that did not parse or validate",
                           evidence={"invalid_share": _r(share), "turns": n_turns, "kinds": dict(kinds.most_common()),
                                     "rate_at": INVALID_RATE},
                           cause="the model has not learned the call format or the tool schemas", next_step=step))
    if (paired := _paired(facts)) is not None:
        before, _, _ = _invalid_share(paired[0])
        after, _, _ = _invalid_share(paired[1])
        if after - before >= VALIDITY_DROP:
            out.append(Finding(rule="invalid_calls", status="problem", source=f"{facts.pair.before} → {facts.subject}",
                               title=f"invalid turns rose {100 * before:.0f}% → {100 * after:.0f}%",
                               evidence={"before": _r(before), "after": _r(after), "episodes": len(paired[1]),
                                         "rise_at": VALIDITY_DROP},
                               cause="training broke the call format (another dialect or template in the data?)",
                               next_step=step))
    for c in facts.run.curves:
        val = c.evals.get("validity") or []
        if len(val) >= 2 and val[0][1] - val[-1][1] >= VALIDITY_DROP:
            out.append(Finding(rule="invalid_calls", status="problem", source=c.source,
                               title=f"in-loop validity fell {100 * val[0][1]:.0f}% → {100 * val[-1][1]:.0f}%",
                               evidence={"validity_first": _r(val[0][1]), "validity_last": _r(val[-1][1]),
                                         "drop_at": VALIDITY_DROP},
                               cause="the parse-fail rate rises as training goes on", next_step=step))
    return out


def rule_void_turns(facts: Facts) -> Result:
    """Empty turns: the model stopped at once."""
    turns = [s for t in facts.counted(facts.subject) for s in t.steps]
    if len(turns) < MIN_EPISODES:
        return f"the subject has fewer than {MIN_EPISODES} turns"
    void = sum(1 for s in turns if not (s.raw or "").strip() and not s.calls)
    if void / len(turns) < VOID_RATE:
        return []
    return [Finding(rule="void_turns", status="problem", source=facts.subject,
                    title=f"{void} of {len(turns)} turns were empty",
                    evidence={"void_turns": void, "turns": len(turns), "rate_at": VOID_RATE},
                    cause="the model ends its turn at once (stop token, chat template or generation prompt)",
                    next_step="check the chat template's generation prompt, the EOS/stop tokens and max_new_tokens")]


def rule_env_faults(facts: Facts) -> Result:
    """A large share of infrastructure failures."""
    every = facts.run.episodes
    if len(every) < MIN_EPISODES:
        return f"fewer than {MIN_EPISODES} episodes"
    faults = [t for t in every if _fault(t)]
    if len(faults) / len(every) < ENV_FAULT_RATE:
        return []
    kinds = Counter(t.outcome.fail_reason or "env_fault" for t in faults)
    return [Finding(rule="env_faults", status="problem",
                    title=f"{len(faults)} of {len(every)} episodes failed on infrastructure",
                    evidence={"env_faults": len(faults), "episodes": len(every), "kinds": dict(kinds.most_common()),
                              "rate_at": ENV_FAULT_RATE},
                    cause="the environment or the model server failed, not the model",
                    next_step="read STORE/logs/, fix the failing service, then rerun them: collect --retry-faults "
                              "(raise --tool-timeout / --request-timeout if they are timeouts)")]


def rule_recovery(facts: Facts) -> Result:
    """Episodes that met an error and never recovered, or successes that mostly needed a recovery."""
    mine = facts.counted(facts.subject)
    errored = [t for t in mine if _troubled(t)]
    solved = [t for t in mine if _solved(t)]
    if len(errored) < MIN_EPISODES and len(solved) < MIN_EPISODES:
        return f"fewer than {MIN_EPISODES} errored or solved episodes"
    out = []
    # A right answer submitted after an error with no result holding it is luck, not repair.
    recovered = sum(1 for t in errored if t.outcome and t.outcome.positive)
    guessed = [t for t in solved if t.outcome.guessed]
    if len(guessed) >= max(2, GUESSED_SHARE * len(solved)):
        out.append(Finding(rule="recovery", status="warning", source=facts.subject,
                           title=f"{len(guessed)} of {len(solved)} accepted answers were guesses",
                           evidence={"guessed": len(guessed), "solved": len(solved), "share_at": GUESSED_SHARE},
                           cause="the model submits values no tool result held: completion overstates what it "
                                 "can do (these episodes are never recoveries nor training data)",
                           next_step="look at them (trajforge view) for the question kinds it guesses on; train on "
                                     "grounded episodes of those kinds (more tasks, RFT on them)"))
    if len(errored) >= MIN_EPISODES and recovered / len(errored) < RECOVERY_MIN:
        after = Counter(_after_first_error(t) for t in errored if not (t.outcome and t.outcome.positive))
        cause, next_step = ("the model never repairs: the data shows no error → correction turns",
                            "add self-repair demonstrations and train on recovered episodes "
                            "(train sft --tiers success,recovered)")
        if after["repeat"] * 2 >= sum(after.values()):
            cause = (f"after an error the model reruns the failing call unchanged ({after['repeat']} of "
                     f"{sum(after.values())}): it copies its last turn instead of reading the error")
            next_step = ("self-repair demonstrations of the errors it makes (collect --policy repair "
                         "--mistakes-from its own samples), their fix turns not restating the mistaken "
                         "one; a sampled retry does not cure copying")
        out.append(Finding(rule="recovery", status="problem", source=facts.subject,
                           title=f"{recovered} of {len(errored)} episodes that met an error recovered",
                           evidence={"recovered": recovered, "errored": len(errored), "recovery_at": RECOVERY_MIN,
                                     "after_error": dict(after)},
                           cause=cause, next_step=next_step))
    if len(solved) >= MIN_EPISODES and recovered / len(solved) >= RECOVERED_SHARE:
        out.append(Finding(rule="recovery", status="warning", source=facts.subject,
                           title=f"{recovered} of {len(solved)} solved episodes needed a recovery",
                           evidence={"recovered": recovered, "solved": len(solved), "share_at": RECOVERED_SHARE},
                           cause="first attempts are often wrong; successes cost extra turns",
                           next_step="look at the first failing call of recovered episodes (trajforge view) and "
                                     "train on its correct form"))
    return out


PARTS = ("completion", "step", "efficiency", "violation")


def rule_reward_static(facts: Facts) -> Result:
    """Reward components that never move: a zero weight, a verifier that never accepts, one total."""
    graded = [t for t in facts.run.episodes if t.reward is not None and not _fault(t)]
    out = []
    reward_curves = [c for c in facts.run.curves if len(c.scalars.get("reward", [])) >= 3]
    for c in reward_curves:
        values = {v for _, v in c.scalars["reward"]}
        if len(values) == 1:
            out.append(Finding(rule="reward_static", status="problem", source=c.source,
                               title=f"the mean rollout reward was {values.pop():.3f} at every step",
                               evidence={"steps": len(c.scalars["reward"])},
                               cause="every rollout scores the same: GRPO groups carry no advantage",
                               next_step="check the weights and the verifier on a few rollouts (trajforge view); "
                                         "raise --temperature or the milestone bonus"))
    if len(graded) < MIN_EPISODES:
        return out or f"fewer than {MIN_EPISODES} graded episodes"
    weights = [t.reward.weights for t in graded]
    for i, part in enumerate(PARTS):
        if all(w[i] == 0 for w in weights):
            rules = sorted({t.reward.rule or "?" for t in graded})
            out.append(Finding(rule="reward_static", status="problem" if part == "completion" else "warning",
                               title=f"the {part} weight l{i + 1} is 0 in every reward",
                               evidence={"episodes": len(graded), "weights": list(weights[0]), "rules": rules},
                               cause=f"{part} never counts in the total" + (
                                   ": solving the task earns nothing" if part == "completion" else ""),
                               next_step=f"give l{i + 1} a weight (--reward-weights [ENV=]l1,l2,l3,l4 or [rewards] "
                                         "in --config) and regrade: trajforge grade STORE"))
    completion = [t.reward.completion for t in graded]
    if all(v == 0 for v in completion):
        out.append(Finding(rule="reward_static", status="problem",
                           title=f"completion is 0 in all {len(graded)} graded episodes",
                           evidence={"episodes": len(graded), "fail_reasons": dict(Counter(
                               t.outcome.fail_reason for t in graded if t.outcome).most_common(5))},
                           cause="the reward never fires: the verifier accepts nothing (broken verifier or "
                                 "expected answers, or tasks far too hard)",
                           next_step="run the expert on the pool (collect --policy expert): it must succeed; "
                                     "else fix the verifier or the references"))
    totals = {t.reward.total for t in graded}
    # Identical successes (an expert store of one template) earn identical totals by design: one
    # total is a problem only where the episodes ended differently and the reward did not see it.
    if len(totals) == 1 and len({_solved(t) for t in graded}) > 1:
        out.append(Finding(rule="reward_static", status="problem", title=f"every episode's reward is {totals.pop()}",
                           evidence={"episodes": len(graded), "solved": sum(map(_solved, graded))},
                           cause="the reward never moves: solved and unsolved episodes score the same, so there "
                                 "is no signal to learn from",
                           next_step="check the weights (trajforge query \"SELECT reward_completion, reward_step, "
                                     "reward_total ...\") and the verifier"))
    return out


def rule_group_signal(facts: Facts) -> Result:
    """GRPO groups that mostly agree: a group whose rollouts all score alike has no advantage, and
    GRPO sharpens only what the policy samples both ways (README, "Stop 37")."""
    curves = [c for c in facts.run.curves
              if len(c.scalars.get("groups", [])) >= 3 and "informative_groups" in c.scalars]
    if not curves:
        return "no GRPO curve with 3+ steps of group counts"
    out = []
    for c in curves:
        groups = sum(v for _, v in c.scalars["groups"])
        informative = sum(v for _, v in c.scalars["informative_groups"])
        share = informative / groups if groups else 0.0
        solved = [v for _, v in c.scalars.get("solved", [])]
        mean = statistics.fmean(solved) if solved else None
        if groups == 0:  # no group at all is not a cold sampler: no rollout was usable
            out.append(_no_groups(c))
            continue
        if share >= GROUP_SIGNAL:
            out.extend(_shaping_only(c, groups, informative, mean))
            continue
        if mean is not None and mean <= GROUPS_FAIL:
            cause = ("most groups fail in every rollout: the tasks are beyond what the policy samples, and "
                     "GRPO can only sharpen choices it already makes both ways")
            step = ("SFT or RFT on these tasks first, --guided exploration, or the curriculum's partial pool "
                    "(--partial-from STORE)")
        elif mean is not None and mean >= GROUPS_SOLVE:
            cause = "most groups succeed in every rollout: nothing left to sharpen on these tasks"
            step = "drop the tasks every attempt solves, or start the curriculum at a harder tier (--curriculum-start)"
        else:
            cause = "the rollouts of a group agree: sampling too cold or groups too small to disagree"
            step = "raise --temperature or --group-size"
        out.append(Finding(rule="group_signal", status="problem" if informative == 0 else "warning",
                           source=c.source, cause=cause, next_step=step,
                           title=f"{informative:g} of {groups:g} GRPO groups ({share:.0%}) had rollouts that "
                                 "scored differently",
                           evidence={"groups": groups, "informative_groups": informative, "share": _r(share),
                                     "mean_solved": None if mean is None else _r(mean),
                                     "steps": len(c.scalars["groups"]), "share_at": GROUP_SIGNAL}))
    return out


def _no_groups(c: Curves) -> Finding:
    """Every step logged 0 groups: ``to_rollouts`` leaves out the rollouts the infrastructure
    ended (``env_fault``), so none was left to form a group, let alone one that disagrees."""
    steps = len(c.scalars["groups"])
    return Finding(rule="group_signal", status="problem", source=c.source,
                   title=f"no GRPO group in {steps} steps: every rollout ended as an env_fault",
                   cause="the environment or the model server failed on every rollout (an env_fault is never "
                         "trained on), so GRPO had nothing to learn from; not the sampling or the tasks",
                   next_step="roll a few of the tasks out with `trajforge collect` and read STORE/logs/ for "
                             "the faults, fix the failing service, then train again",
                   evidence={"groups": 0, "steps": steps})


def _shaping_only(c: Curves, groups: float, informative: float, mean: float | None) -> list[Finding]:
    """Groups that score differently but rarely split on the answer (``deciding_groups``: a solved
    and an unsolved rollout): their advantages follow step costs and milestones, not success, so
    the solve rate cannot move. (Stop 37's T = 1.0 arm, rerun with the count: 13 of 48 groups split
    on the answer, 27%, so this stays quiet there; that run failed from sampling noise, which group
    counts cannot see.)"""
    if "deciding_groups" not in c.scalars:
        return []  # a curve from before the loop logged it
    deciding = sum(v for _, v in c.scalars["deciding_groups"])
    share = deciding / groups if groups else 0.0
    if share >= GROUP_SIGNAL:
        return []
    if mean is not None and mean <= GROUPS_FAIL:
        step = ("lower --temperature (rollouts too noisy to solve anything), or SFT / RFT on these tasks "
                "first")
    else:
        step = "raise the completion weight against the shaping terms (--reward-weights)"
    return [Finding(rule="group_signal", status="warning", source=c.source, next_step=step,
                    title=f"{deciding:g} of {groups:g} GRPO groups ({share:.0%}) held a solved and an unsolved "
                          f"rollout ({informative:g} scored differently)",
                    cause="the groups differ in step costs and milestones, not in the answer: the advantage "
                          "rewards shaping terms and the solve rate has nothing to follow",
                    evidence={"groups": groups, "informative_groups": informative, "deciding_groups": deciding,
                              "share": _r(share), "mean_solved": None if mean is None else _r(mean),
                              "steps": len(c.scalars["groups"]), "share_at": GROUP_SIGNAL})]


def rule_rft_rounds(facts: Facts) -> Result:
    """RFT rounds that kept nothing new: they sampled and trained nothing new (a warm round keeps
    the previous adapter; a cold one retrains the same data), time spent for nothing."""
    runs = {p: m["rft"]["rounds"] for p, m in facts.run.adapters.items()
            if isinstance(m.get("rft"), dict) and isinstance(m["rft"].get("rounds"), list)}
    if not runs:
        return "no RFT adapter metadata"
    out = []
    for path, rounds in runs.items():
        sampled = [r for r in rounds if r.get("round", 0) >= 1]
        idle = [r for r in sampled if r.get("kept") == 0]
        if not idle:
            continue
        verified = sum(r.get("verified", 0) for r in idle)
        ev = {"rounds": len(sampled), "idle_rounds": [r.get("round") for r in idle], "verified_in_them": verified,
              "kept_by_round": [r.get("kept") for r in sampled]}
        if verified == 0:
            cause = "no attempt in those rounds was verified: the tasks are beyond what the policy samples"
            step = "SFT (or RFT) on easier tasks first, a higher --temperature, or --mistake-attempts for recoveries"
        else:
            cause = ("their verified attempts repeat calls an earlier round kept (RFT keeps distinct attempts), so "
                     "the policy already has every path it finds")
            step = ("fewer --rounds, more --attempts or a higher --temperature for new paths, tasks it does not solve "
                    "yet; in warm rounds --reinforce-below 1.0 keeps the unsure tasks' successes again (README, "
                    "\"Stop 38\": no gain on its testbed)")
        out.append(Finding(rule="rft_rounds", status="problem" if len(idle) == len(sampled) else "warning",
                           source=path, title=f"{len(idle)} of {len(sampled)} RFT rounds kept nothing new",
                           cause=cause, next_step=step, evidence=ev))
    return out


def rule_split_overlap(facts: Facts) -> Result:
    """A task or a prompt in both the train split and a held-out split."""
    splits: dict[str, set[str]] = {}
    prompts: dict[str, set[str]] = {}
    for t in facts.run.episodes:
        splits.setdefault(t.task_id, set()).add(t.split)
        user = next((m.content for m in t.messages if m.role == "user"), None)
        if user:
            prompts.setdefault(user.strip(), set()).add(t.split)
    seen = {s for ss in splits.values() for s in ss}
    if "train" not in seen or not seen & set(HELD_OUT):
        return "the stores do not hold both train and held-out episodes"

    def leaked(table: dict[str, set[str]]) -> list[str]:
        return sorted(k for k, ss in table.items() if "train" in ss and ss & set(HELD_OUT))

    tasks, texts = leaked(splits), leaked(prompts)
    if not (tasks or texts):
        return []
    return [Finding(rule="split_overlap", status="problem",
                    title=f"{len(tasks)} tasks and {len(texts)} prompts are in train and a held-out split",
                    evidence={"tasks": len(tasks), "prompts": len(texts), "examples": (tasks or texts)[:3]},
                    cause="held-out numbers are inflated: the model saw these tasks in training",
                    next_step="rebuild the splits (trajforge synth) so no task or prompt crosses them, and re-evaluate")]


RULES: tuple[Callable[[Facts], Result], ...] = (
    rule_success_flat, rule_loss_not_falling, rule_grad_norm, rule_lr_schedule, rule_too_few_samples,
    rule_generalization_gap, rule_detours, rule_invalid_calls, rule_void_turns, rule_env_faults,
    rule_recovery, rule_reward_static, rule_group_signal, rule_rft_rounds, rule_split_overlap,
)
"""Every rule, in the order findings are listed."""


# ---- running them ---------------------------------------------------------------------------


def facts_of(run: Run) -> Facts:
    pair = pick_pair(run) if run.episodes else None
    by_policy: dict[str, list[Trajectory]] = {}
    for t in run.episodes:
        by_policy.setdefault(t.policy, []).append(t)
    subject = pair.after if pair else (run.policies[-1] if run.policies else None)
    return Facts(run=run, pair=pair, subject=subject, by_policy=by_policy)


def diagnose_run(run: Run) -> Diagnosis:
    facts = facts_of(run)
    findings: list[Finding] = []
    checks: list[Check] = []
    for fn in RULES:
        name = fn.__name__.removeprefix("rule_")
        got = fn(facts)
        if isinstance(got, str):
            checks.append(Check(rule=name, result="not checked", note=got))
            continue
        findings += got
        checks.append(Check(rule=name, result="fired" if got else "ok"))
    looked = [c.rule for c in checks if c.result == "ok"]
    if not findings and not looked:  # "healthy" never means "nothing was looked at"
        findings.append(Finding(rule="nothing_checked", status="warning", title="nothing could be checked",
                                cause=f"no rule could look at {run.root}: no stores, curves or adapters it can read",
                                evidence={"rules_not_checked": len(checks)},
                                next_step="point doctor at a run directory (trajectory stores, curves.jsonl, "
                                          "metrics.json, trajforge_adapter.json)"))
    elif not findings:
        findings.append(Finding(rule="healthy", status="healthy", title="nothing wrong found",
                                cause="no rule fired", evidence={"rules_checked": looked},
                                next_step="compare against a baseline on held-out tasks"))
    return Diagnosis(root=str(run.root), subject=facts.subject, findings=findings, checks=checks)


def diagnose(run_dir: str | Path) -> Diagnosis:
    """Read ``run_dir`` (stores optional: a training run may have only curves) and diagnose it."""
    return diagnose_run(load_run(run_dir, require_stores=False))


__all__ = ["RULES", "Check", "Diagnosis", "Finding", "diagnose", "diagnose_run"]
