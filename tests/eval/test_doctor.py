"""``trajforge doctor``: one test per rule, each with a control that must not fire, and the issue's
demonstration — a run broken on purpose (rewards that never fire, a tiny learning rate) whose
cause the doctor names.

Run folders are real: episodes run through the real harness and environments (only the policy is
scripted, the model boundary), stores are written by ``TrajectoryStore``, curves by the trainer's
own writer (``train/curves.Curves``), adapter metadata in the file name ``save_adapter`` uses;
the tiny-learning-rate run is a real SFT run on a tiny random llama.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from trajforge.cli.main import app
from trajforge.eval import doctor as dr
from trajforge.eval.doctor import diagnose
from trajforge.eval.rundir import load_run
from trajforge.grade import RewardConfig, graded
from trajforge.harness import HarnessConfig, run_episodes
from trajforge.policies.base import TurnRequest
from trajforge.policies.expert import ExpertPolicy
from trajforge.policies.scripted import ScriptedPolicy
from trajforge.store import TrajectoryStore
from trajforge.store.migrate import ADAPTER_META
from trajforge.tasks import synthesize
from trajforge.train.curves import Curves

MISSING_ARG = '<tool_call>\n{"name": "run_sql", "arguments": {}}\n</tool_call>'
WRONG = '<tool_call>\n{"name": "submit_answer", "arguments": {"answer": "not the answer"}}\n</tool_call>'
HARNESS = HarnessConfig(max_consecutive_errors=2)
POOL = synthesize("sql", 60, seed=1).tasks
TRAIN = [t for t in POOL if t.split == "train"][:12]
HELD = [t for t in POOL if t.split in ("heldout", "test")][:12]


# ---- building run folders -------------------------------------------------------------------


def policy(name: str, first: str | None = None, then: str | None = None, only: set[str] | None = None):
    """The expert, except: turn 0 says ``first`` and later turns ``then`` (the expert's next call
    when ``then`` is None) on the tasks in ``only`` (all tasks when None)."""
    expert = ExpertPolicy()

    def reply(req: TurnRequest) -> str:
        if first is None or (only is not None and req.task.id not in only):
            return expert.act([req])[0].text
        if req.turn == 0:
            return first
        return then if then is not None else expert.act([req._replace(turn=req.turn - 1)])[0].text

    return ScriptedPolicy(reply, name=name)


def episodes(tasks, pol, rewards: RewardConfig | None = None):
    return [graded(t, rewards) for t in run_episodes(tasks, pol, HARNESS)]


def store(root: Path, name: str, trajs) -> None:
    st = TrajectoryStore(root / name)
    for t in trajs:
        st.append(t)


def curves(root: Path, recipe: str = "sft", loss=(), evals=(), **series) -> Path:
    """A curves file written by the trainer's writer: ``loss`` per step 1..n with any ``series``
    (``lr=[...]``) beside it, ``evals`` as (step, metrics) rows."""
    out = root / "train" / recipe
    c = Curves(out, recipe)
    n = max([len(loss)] + [len(v) for v in series.values()])
    for i in range(n):
        row = {k: v[i] for k, v in series.items() if i < len(v)}
        if i < len(loss):
            row["loss"] = loss[i]
        c.log(i + 1, **row)
    for step, metrics in evals:
        c.log_eval(step, metrics)
    c.close()
    return out


def adapter(folder: Path, **meta) -> None:
    (folder / ADAPTER_META).write_text(json.dumps(meta))


def fired(root: Path, rule: str) -> list[dr.Finding]:
    d = diagnose(root)
    check = next(c for c in d.checks if c.rule == rule)
    found = [f for f in d.findings if f.rule == rule]
    assert (check.result == "fired") == bool(found)
    return found


def checked_ok(root: Path, rule: str) -> bool:
    return next(c for c in diagnose(root).checks if c.rule == rule).result == "ok"


FALLING = [2.0 - 0.05 * i for i in range(30)]
FLAT = [1.5] * 30


@pytest.fixture(scope="module")
def expert_train():
    return episodes(TRAIN, ExpertPolicy())


@pytest.fixture(scope="module")
def expert_held():
    return episodes(HELD, ExpertPolicy(name="tuned"))


# ---- training curves ----------------------------------------------------------------------------


def test_success_flat_while_loss_falls(tmp_path):
    flat, good = tmp_path / "flat", tmp_path / "good"
    curves(flat, loss=FALLING, evals=[(10, {"completion": 0.30}), (30, {"completion": 0.32})])
    curves(good, loss=FALLING, evals=[(10, {"completion": 0.30}), (30, {"completion": 0.60})])
    (f,) = fired(flat, "success_flat")
    assert f.evidence["completion_first"] == 0.3 and f.evidence["loss_last"] < f.evidence["loss_first"]
    assert "transfer" in f.cause
    assert not fired(good, "success_flat") and checked_ok(good, "success_flat")


def test_success_flat_grpo_names_a_sparse_reward(tmp_path):
    curves(tmp_path, "grpo", loss=FALLING, solved=[0.1] * 30, reward=[0.05 + 0.001 * i for i in range(30)])
    (f,) = fired(tmp_path, "success_flat")
    assert "too sparse" in f.cause and "--milestone-bonus" in f.next_step


def test_grpo_solve_rate_is_judged_by_its_fifths_not_two_noisy_steps(tmp_path):
    """GRPO's ``solved`` is one batch a step: a rate rising 0.30 → 0.57 whose first step was lucky
    (0.5) and last unlucky (0.5) read as "+0 points"; one flat at 0.3 with an unlucky first step
    (0.1) read as a gain. The fifths say otherwise both times."""
    rising, flat = tmp_path / "rising", tmp_path / "flat"
    curves(rising, "grpo", loss=FALLING, solved=[0.5] + [0.3 + 0.01 * i for i in range(28)] + [0.5])
    curves(flat, "grpo", loss=FALLING, solved=[0.1] + [0.3] * 28 + [0.3])
    assert not fired(rising, "success_flat") and checked_ok(rising, "success_flat")
    (f,) = fired(flat, "success_flat")
    assert f.evidence["completion_last"] == 0.3 and f.evidence["completion_first"] == round((0.1 + 5 * 0.3) / 6, 4)


def test_memorised_train_vs_heldout_gap(tmp_path, expert_held):
    """The subject solves every train task and no held-out one: success flat names memorisation,
    and the gap rule fires; the control solves both."""
    mem, ok = tmp_path / "mem", tmp_path / "ok"
    # WRONG at every turn: the first, with no query behind it, is refused (SqlEnv.refuse_unsupported).
    for root, held in ((mem, episodes(HELD, policy("tuned", WRONG, WRONG))), (ok, expert_held)):
        store(root, "eval_store", episodes(TRAIN, ExpertPolicy(name="tuned")) + held)
        curves(root, loss=FALLING, evals=[(10, {"completion": 0.0}), (30, {"completion": 0.0})])
    (gap,) = fired(mem, "generalization_gap")
    assert gap.evidence["train_completion"] == 1.0 and gap.evidence["heldout_completion"] == 0.0
    (flat,) = fired(mem, "success_flat")
    assert "memorised" in flat.cause
    assert not fired(ok, "generalization_gap") and checked_ok(ok, "generalization_gap")


def test_loss_not_falling_names_a_tiny_learning_rate_or_the_masks(tmp_path):
    tiny, masked, control = tmp_path / "tiny", tmp_path / "masked", tmp_path / "ok"
    curves(tiny, loss=FLAT, lr=[1e-9] * 30)
    out = curves(masked, loss=FLAT, lr=[2e-4] * 30)
    adapter(out, recipe="sft", config={"lr": 2e-4}, result={"tokens": 100_000, "loss_tokens": 50, "samples": 80})
    curves(control, loss=FALLING, lr=[2e-4] * 30)
    (f,) = fired(tiny, "loss_not_falling")
    assert "learning rate is too small" in f.cause and f.evidence["peak_lr"] == 1e-9
    (m,) = fired(masked, "loss_not_falling")
    assert "masks" in m.cause and m.evidence["loss_token_share"] == 0.0005
    assert not fired(control, "loss_not_falling") and checked_ok(control, "loss_not_falling")


def test_loss_rule_leaves_grpo_alone(tmp_path):
    curves(tmp_path, "grpo", loss=FLAT)
    assert next(c for c in diagnose(tmp_path).checks if c.rule == "loss_not_falling").result == "not checked"


def test_grad_norm_nonfinite_and_exploding(tmp_path):
    nan, spike, calm = tmp_path / "nan", tmp_path / "spike", tmp_path / "calm"
    curves(nan, loss=FALLING[:5], grad_norm=[1.0, 1.1, float("nan"), 0.9, 1.0])
    c = Curves(nan / "train" / "sft", "sft", append=True)
    c.log(6, skipped_nonfinite=1)  # what fit() writes for a dropped step
    curves(spike, loss=FALLING[:10], grad_norm=[1.0] * 9 + [40.0])
    curves(calm, loss=FALLING[:10], grad_norm=[1.0 + 0.1 * (i % 3) for i in range(10)])
    (f,) = fired(nan, "grad_norm")
    assert f.status == "problem" and f.evidence == {"nonfinite_steps": 2, "steps": 6}  # the NaN step counted once
    (s,) = fired(spike, "grad_norm")
    assert s.status == "warning" and s.evidence["max"] == 40.0
    assert not fired(calm, "grad_norm")


def test_nonfinite_losses_are_counted_not_averaged(tmp_path):
    """A NaN or inf loss among finite ones (a trainer other than trajforge's, which skips such
    steps): the loss rules judge the finite values and grad_norm counts the step. A NaN in the
    first fifth was a mean of NaN ("the loss went nan → 0.675", learning rate blamed on a falling
    loss); an inf there read as a loss that fell 100% and hid a flat one."""
    nan, inf = tmp_path / "nan", tmp_path / "inf"
    curves(nan, loss=[math.nan] + FALLING[1:], evals=[(10, {"completion": 0.3}), (30, {"completion": 0.6})])
    curves(inf, loss=[math.inf] + FLAT[1:])
    assert not fired(nan, "loss_not_falling") and checked_ok(nan, "success_flat")
    (g,) = fired(nan, "grad_norm")
    assert g.evidence == {"nonfinite_steps": 1, "steps": 30}
    (f,) = fired(inf, "loss_not_falling")
    assert f.evidence["loss_first"] == f.evidence["loss_last"] == 1.5
    assert fired(inf, "grad_norm")[0].evidence["nonfinite_steps"] == 1


def test_lr_schedule_never_warmed(tmp_path):
    zero, low, ok = tmp_path / "zero", tmp_path / "low", tmp_path / "ok"
    curves(zero, loss=FALLING[:12], lr=[0.0] * 12)
    adapter(curves(low, loss=FALLING[:12], lr=[1e-5 * i for i in range(12)]), config={"lr": 1e-3})
    adapter(curves(ok, loss=FALLING[:12], lr=[1e-3 * math.cos(i / 12) for i in range(12)]), config={"lr": 1e-3})
    assert fired(zero, "lr_schedule")[0].status == "problem"
    (w,) = fired(low, "lr_schedule")
    assert w.evidence["configured_lr"] == 1e-3 and w.evidence["max_logged_lr"] < 5e-4
    assert not fired(ok, "lr_schedule") and checked_ok(ok, "lr_schedule")


def test_too_few_samples_for_the_epochs(tmp_path):
    few, many, ok = tmp_path / "few", tmp_path / "many", tmp_path / "ok"
    adapter(curves(few, loss=FALLING), config={"epochs": 2}, result={"samples": 8})
    adapter(curves(many, loss=FALLING), config={"epochs": 6}, result={"samples": 120})
    adapter(curves(ok, loss=FALLING), config={"epochs": 2}, result={"samples": 300})
    assert fired(few, "too_few_samples")[0].evidence["samples"] == 8
    assert "epochs" in fired(many, "too_few_samples")[0].title
    assert not fired(ok, "too_few_samples") and checked_ok(ok, "too_few_samples")


def test_detours_turns_rise_success_flat(tmp_path):
    wander, ok = tmp_path / "wander", tmp_path / "ok"
    curves(wander, loss=FALLING, evals=[(10, {"completion": 0.4, "avg_turns": 2.0}),
                                        (30, {"completion": 0.41, "avg_turns": 3.2})])
    curves(ok, loss=FALLING, evals=[(10, {"completion": 0.4, "avg_turns": 2.0}),
                                    (30, {"completion": 0.7, "avg_turns": 3.2})])
    (f,) = fired(wander, "detours")
    assert f.evidence["turns_last"] == 3.2 and "efficiency" in f.next_step
    assert not fired(ok, "detours")


# ---- episodes -------------------------------------------------------------------------------


def test_invalid_calls_share_and_rise(tmp_path, expert_held):
    bad, ok = tmp_path / "bad", tmp_path / "ok"
    store(bad, "eval_store", episodes(HELD, ExpertPolicy(name="base")) + episodes(HELD, policy("tuned", MISSING_ARG)))
    store(ok, "eval_store", episodes(HELD, ExpertPolicy(name="base")) + expert_held)
    found = fired(bad, "invalid_calls")
    assert {f.title.split()[0] for f in found} >= {"invalid"}  # the rise before → after
    share = next(f for f in found if "invalid_share" in f.evidence)
    assert share.evidence["kinds"] == {"invalid_args": 12}  # one missing argument per episode
    assert not fired(ok, "invalid_calls") and checked_ok(ok, "invalid_calls")


def test_before_after_rules_compare_the_same_tasks_and_enough_of_them(tmp_path, expert_held):
    """The base policy ran 1 task, the tuned one 12 (6 with a first call that fails, then repaired):
    a 2-turn base said "invalid turns rose 0% → 20%" and "average turns 2.00 → 3.00". Before →
    after is judged on the tasks both ran, 10+ of them; on those, the rise still fires."""
    few, same = tmp_path / "few", tmp_path / "same"
    tuned = episodes(HELD, policy("tuned", MISSING_ARG, only={t.id for t in HELD[:6]}))
    store(few, "eval_store", episodes(HELD[:1], ExpertPolicy(name="base")) + tuned)
    store(same, "eval_store", episodes(HELD, ExpertPolicy(name="base")) + tuned)
    assert diagnose(few).subject == "tuned"
    assert not [f for f in fired(few, "invalid_calls") if "rose" in f.title]
    assert next(c for c in diagnose(few).checks if c.rule == "detours").result == "not checked"
    (rise,) = [f for f in fired(same, "invalid_calls") if "rose" in f.title]
    assert rise.evidence["before"] == 0.0 and rise.evidence["episodes"] == 12
    assert fired(same, "detours")


def test_validity_falling_in_the_loop(tmp_path):
    curves(tmp_path, loss=FALLING, evals=[(10, {"validity": 0.9}), (30, {"validity": 0.6})])
    store(tmp_path, "eval_store", episodes(HELD, ExpertPolicy()))
    (f,) = fired(tmp_path, "invalid_calls")
    assert f.evidence == {"validity_first": 0.9, "validity_last": 0.6, "drop_at": dr.VALIDITY_DROP}


def test_void_turns(tmp_path, expert_held):
    void, ok = tmp_path / "void", tmp_path / "ok"
    store(void, "s", episodes(HELD, policy("tuned", "", "")))
    store(ok, "s", expert_held)
    (f,) = fired(void, "void_turns")
    assert f.evidence["void_turns"] == f.evidence["turns"] > 0
    assert not fired(ok, "void_turns")


def test_env_fault_share(tmp_path, expert_held):
    """A database that is not there: the SQL environment cannot start (env_start, a real fault)."""
    faulty, ok = tmp_path / "faulty", tmp_path / "ok"
    broken = [t.model_copy(update={"id": t.id + "-nodb", "db": str(tmp_path / "gone.sqlite")}) for t in HELD[:3]]
    store(faulty, "s", expert_held + episodes(broken, ExpertPolicy(name="tuned")))
    store(ok, "s", expert_held)
    (f,) = fired(faulty, "env_faults")
    assert f.evidence["kinds"] == {"env_start": 3} and f.evidence["episodes"] == 15
    assert not fired(ok, "env_faults")


def test_recovery_never_and_recovered_share(tmp_path):
    never, often = tmp_path / "never", tmp_path / "often"
    store(never, "s", episodes(HELD, policy("tuned", MISSING_ARG, WRONG)))
    store(often, "s", episodes(HELD, policy("tuned", MISSING_ARG)))  # error first, then the right calls
    (f,) = fired(never, "recovery")
    assert f.status == "problem" and f.evidence == {"recovered": 0, "errored": 12, "recovery_at": dr.RECOVERY_MIN,
                                                    "after_error": {"other": 12}}
    assert "no error → correction turns" in f.cause
    (w,) = fired(often, "recovery")  # it does recover: no "never"; but every success needed it
    assert w.status == "warning" and w.evidence["recovered"] == w.evidence["solved"] == 12


def test_a_model_that_reruns_its_failing_call_is_named_a_copier(tmp_path):
    """Stop 50's measured failure: after the error the same call again, unchanged."""
    store(tmp_path, "s", episodes(HELD, policy("tuned", MISSING_ARG, MISSING_ARG)))
    (f,) = fired(tmp_path, "recovery")
    assert f.evidence["after_error"] == {"repeat": 12}
    assert "reruns the failing call unchanged (12 of 12)" in f.cause and "--mistakes-from" in f.next_step


def test_guessed_answers_are_named_and_are_not_recoveries(tmp_path):
    """Every answer submitted at once, right by construction, no query run: guesses."""
    def guess(req: TurnRequest) -> str:
        return WRONG.replace("not the answer", str(req.task.expected))

    store(tmp_path, "s", episodes(HELD, ScriptedPolicy(guess, name="tuned")))
    # Each guess is refused once (no query behind it) and taken the second time: the refusals are
    # errors no episode recovered from, so the rule also names that; the guesses are named apart.
    (w,) = [f for f in fired(tmp_path, "recovery") if "guesses" in f.title]
    assert w.evidence == {"guessed": 12, "solved": 12, "share_at": dr.GUESSED_SHARE}


def test_recovery_control(tmp_path, expert_held):
    store(tmp_path, "s", expert_held)
    assert not fired(tmp_path, "recovery") and checked_ok(tmp_path, "recovery")


def test_split_overlap(tmp_path, expert_train, expert_held):
    leak, ok = tmp_path / "leak", tmp_path / "ok"
    copies = [t.model_copy(update={"id": t.id + "-copy", "split": "heldout"}) for t in TRAIN[:2]]
    store(leak, "train_store", expert_train)
    store(leak, "eval_store", expert_held + episodes(copies, ExpertPolicy(name="tuned")))
    store(ok, "train_store", expert_train)
    store(ok, "eval_store", expert_held)
    (f,) = fired(leak, "split_overlap")
    assert (f.evidence["tasks"], f.evidence["prompts"]) == (0, 2)
    assert not fired(ok, "split_overlap") and checked_ok(ok, "split_overlap")


# ---- the demonstration: broken on purpose ---------------------------------------------


def test_broken_rewards_completion_weight_zero(tmp_path, expert_train):
    """A RewardConfig with the completion weight 0: solving earns nothing, and the doctor says so."""
    broken, ok = tmp_path / "broken", tmp_path / "ok"
    store(broken, "s", episodes(TRAIN, ExpertPolicy(), RewardConfig(weights=(0.0, 0.3, 0.1, 0.1))))
    store(ok, "s", expert_train + episodes(HELD, policy("tuned", WRONG, WRONG)))
    (f,) = fired(broken, "reward_static")
    assert f.status == "problem" and "completion weight l1 is 0" in f.title and "solving the task earns nothing" in f.cause
    assert f.evidence["rules"] == ["default"]
    assert not fired(ok, "reward_static") and checked_ok(ok, "reward_static")


def test_broken_verifier_never_accepts(tmp_path):
    """Expected answers no query returns: the expert's right calls are never accepted."""
    unreachable = [t.model_copy(update={"expected": "no such answer"}) for t in TRAIN]
    store(tmp_path, "s", episodes(unreachable, ExpertPolicy()))
    found = fired(tmp_path, "reward_static")
    never = next(f for f in found if "completion is 0" in f.title)
    assert "verifier accepts nothing" in never.cause and "expert" in never.next_step


def test_one_total_for_all_fires_only_when_outcomes_differ(tmp_path, expert_train):
    """Expert successes of one shape earn one total by design (it fired "the reward never moves"
    on a healthy expert store); one total over solved and unsolved episodes is the problem."""
    same, blind = tmp_path / "same", tmp_path / "blind"
    total = expert_train[0].reward.total
    alike = [t for t in expert_train if t.reward.total == total]
    alike += [t.model_copy(update={"sample": 1}) for t in alike]  # several samples per task, as RFT keeps
    assert len(alike) >= dr.MIN_EPISODES and all(t.outcome.correct for t in alike)
    store(same, "train_store", alike)
    assert not fired(same, "reward_static") and checked_ok(same, "reward_static")
    zero = RewardConfig(weights=(0.0, 0.0, 0.0, 0.0))
    store(blind, "s", episodes(TRAIN[:6], ExpertPolicy(), zero) + episodes(TRAIN[6:], policy("tuned", WRONG, WRONG), zero))
    one = next(f for f in fired(blind, "reward_static") if "every episode's reward" in f.title)
    assert one.evidence == {"episodes": 12, "solved": 6}


def _rft_run(folder: Path, warm: bool, round0_samples: int, round1_samples: int) -> None:
    """The adapter files ``train rft`` leaves (round-0 SFT on the expert data, round 1 on top of it
    when warm, the last round adopted into the run's folder with the rounds recorded)."""
    (folder / "round-0").mkdir(parents=True)
    (folder / "round-1").mkdir()
    adapter(folder / "round-0", recipe="sft", init_adapter=None, config={"epochs": 2.0},
            result={"samples": round0_samples})
    one = dict(init_adapter=str(folder / "round-0") if warm else None, config={"epochs": 2.0},
               result={"samples": round1_samples})
    adapter(folder / "round-1", recipe="sft", **one)
    adapter(folder, **one, recipe="rft", rft={"config": {"rounds": 1, "warm_start": warm},
                                              "rounds": [{"round": 0, "trained_on": round0_samples},
                                                         {"round": 1, "kept": 10, "verified": 20,
                                                          "trained_on": round1_samples}]})


def test_too_few_samples_judges_a_warm_rft_round_by_its_round_0(tmp_path):
    """A warm RFT round trains its few keeps (plus as many expert episodes) on top of round 0 by
    design: 20 samples there are no lack of data when round 0 learned the tools from 112. Round
    0, a cold round and an SFT on top of another adapter are still judged by their own count."""
    warm, small_start, cold, sft = (tmp_path / n for n in ("warm", "small_start", "cold", "sft"))
    _rft_run(warm, warm=True, round0_samples=112, round1_samples=20)
    assert not fired(warm, "too_few_samples") and checked_ok(warm, "too_few_samples")
    _rft_run(small_start, warm=True, round0_samples=12, round1_samples=20)
    assert [f.source for f in fired(small_start, "too_few_samples")] == ["round-0/trajforge_adapter.json"]
    _rft_run(cold, warm=False, round0_samples=12, round1_samples=32)
    assert len(fired(cold, "too_few_samples")) == 3
    sft.mkdir()
    adapter(sft, recipe="sft", init_adapter="base-sft", config={"epochs": 2.0}, result={"samples": 20})
    assert fired(sft, "too_few_samples")


def test_grpo_reward_curve_that_never_moves(tmp_path):
    curves(tmp_path, "grpo", loss=FLAT[:5], reward=[0.0] * 5)
    (f,) = fired(tmp_path, "reward_static")
    assert "no advantage" in f.cause


def test_grpo_groups_that_mostly_agree(tmp_path):
    """GRPO's group counts as its loop logs them (``groups``, ``informative_groups``, ``solved``):
    under a quarter of the groups with signal fires, its cause read off the solve rate."""
    runs = {name: tmp_path / name for name in ("hard", "easy", "cold", "none", "ok")}
    six = dict(loss=FLAT[:6], groups=[8.0] * 6)
    curves(runs["hard"], "grpo", **six, informative_groups=[1, 0, 2, 1, 0, 1], solved=[0.05] * 6)
    curves(runs["easy"], "grpo", **six, informative_groups=[1, 0, 2, 1, 0, 1], solved=[0.95] * 6)
    curves(runs["cold"], "grpo", **six, informative_groups=[1, 0, 2, 1, 0, 1], solved=[0.5] * 6)
    curves(runs["none"], "grpo", **six, informative_groups=[0] * 6, solved=[0.0] * 6)
    # stop 37's bimodal testbed: 2-5 of 8 groups with signal a step, and GRPO learned
    curves(runs["ok"], "grpo", **six, informative_groups=[4, 5, 5, 2, 3, 5], solved=[0.34, 0.28, 0.44, 0.53, 0.44, 0.41])
    (hard,) = fired(runs["hard"], "group_signal")
    assert hard.status == "warning" and hard.evidence["share"] == round(5 / 48, 4) and "fail in every rollout" in hard.cause
    assert "--guided" in hard.next_step
    assert "nothing left to sharpen" in fired(runs["easy"], "group_signal")[0].cause
    assert "--temperature" in fired(runs["cold"], "group_signal")[0].next_step
    assert fired(runs["none"], "group_signal")[0].status == "problem"
    assert not fired(runs["ok"], "group_signal") and checked_ok(runs["ok"], "group_signal")
    sft_only = tmp_path / "sft"
    curves(sft_only, loss=FALLING)
    assert next(c for c in diagnose(sft_only).checks if c.rule == "group_signal").result == "not checked"


def test_grpo_steps_without_any_group_name_the_env_faults(tmp_path):
    """Every rollout an env_fault leaves no group at all (``groups`` 0 every step): that is the
    infrastructure, not a cold sampler nor tasks out of reach."""
    faulted, unsolved = tmp_path / "faulted", tmp_path / "unsolved"
    curves(faulted, "grpo", loss=[0.0] * 4, groups=[0] * 4, informative_groups=[0] * 4, solved=[0.0] * 4)
    curves(unsolved, "grpo", loss=[0.0] * 4, groups=[0] * 4, informative_groups=[0] * 4)  # no solved logged
    for root in (faulted, unsolved):
        (f,) = fired(root, "group_signal")
        assert f.status == "problem" and "env_fault" in f.cause and f.evidence["groups"] == 0, f
        assert "cold" not in f.cause and "fail in every rollout" not in f.cause
        assert "collect" in f.next_step and "--temperature" not in f.next_step


def test_grpo_groups_that_differ_only_in_shaping(tmp_path):
    """Most groups scored differently, few held a solved and an unsolved rollout
    (``deciding_groups``): the rule names it; where the groups do split on the answer, or the
    curve predates the count, it stays quiet."""
    six = dict(loss=FLAT[:6], groups=[8.0] * 6, informative_groups=[7, 6, 8, 7, 6, 8])
    noisy, ok, old = tmp_path / "noisy", tmp_path / "ok", tmp_path / "old"
    curves(noisy, "grpo", **six, deciding_groups=[1, 0, 1, 0, 1, 0], solved=[0.1] * 6)
    curves(ok, "grpo", **six, deciding_groups=[4, 3, 5, 2, 3, 4], solved=[0.3, 0.35, 0.4, 0.42, 0.45, 0.5])
    curves(old, "grpo", **six, solved=[0.1] * 6)  # logged before deciding_groups existed
    (f,) = fired(noisy, "group_signal")
    assert f.status == "warning" and f.evidence["deciding_groups"] == 3 and f.evidence["informative_groups"] == 42
    assert "shaping" in f.cause and "--temperature" in f.next_step
    assert not fired(ok, "group_signal") and not fired(old, "group_signal")


RFT_ROUNDS = [{"round": 0, "kept": 0, "verified": 0}, {"round": 1, "sampled": 240, "verified": 185, "kept": 54},
              {"round": 2, "sampled": 240, "verified": 205, "kept": 8}]
"""Stop 32's seed-1 run, as ``train rft`` records it in the adapter meta."""


def test_rft_rounds_that_keep_nothing_new(tmp_path):
    """Stop 37's testbed: round 1 kept 5, every later round's successes repeated them, so 11 rounds
    only sampled. A round whose attempts were never verified says the tasks are out of reach."""
    stalled, cold, ok = (tmp_path / n for n in ("stalled", "cold", "ok"))
    for folder, rounds in ((stalled, [{"round": 0}, {"round": 1, "verified": 8, "kept": 5}]
                            + [{"round": r, "verified": 15, "kept": 0} for r in range(2, 13)]),
                           (cold, [{"round": 0}] + [{"round": r, "verified": 0, "kept": 0} for r in (1, 2)]),
                           (ok, RFT_ROUNDS)):
        folder.mkdir()
        adapter(folder, recipe="rft", rft={"rounds": rounds})
    (f,) = fired(stalled, "rft_rounds")
    assert f.status == "warning" and f.title == "11 of 12 RFT rounds kept nothing new"
    assert f.evidence["verified_in_them"] == 165 and "repeat calls" in f.cause and "--rounds" in f.next_step
    (f,) = fired(cold, "rft_rounds")
    assert f.status == "problem" and "beyond" in f.cause
    assert not fired(ok, "rft_rounds") and checked_ok(ok, "rft_rounds")


def test_tiny_learning_rate_real_sft_run(tmp_path, monkeypatch):
    """A real 3-step SFT run on a tiny random llama at lr 1e-9 (one sample, so every step sees the
    same batch): the loss does not fall and the doctor names the learning rate, reading the curves
    and the adapter metadata the trainer wrote. (The rule's control, a falling loss, is
    ``test_loss_not_falling_names_a_tiny_learning_rate_or_the_masks``: a tiny random model's LoRA
    needs more steps to learn than this test can afford on 2 cores.)"""
    pytest.importorskip("torch")
    from tests.tiny import build_tiny_model
    from trajforge.train.sft import SFTConfig, train_sft

    monkeypatch.setenv("TRAJFORGE_DTYPE", "float32")
    model = str(build_tiny_model(tmp_path / "model"))
    demo = episodes(TRAIN[:1], ExpertPolicy())
    cfg = SFTConfig(lr=1e-9, epochs=3, batch_size=1, grad_accum=1, dropout=0.0, replay_share=0.0, seed=0)
    train_sft(demo, model, tmp_path / "run" / "adapter", cfg, progress=False)
    run = load_run(tmp_path / "run", require_stores=False)
    assert len(run.curves[0].loss) == 3 and list(run.adapters) == ["adapter/trajforge_adapter.json"]
    (f,) = fired(tmp_path / "run", "loss_not_falling")
    assert "learning rate is too small" in f.cause and f.evidence["configured_lr"] == 1e-9
    assert f.evidence["peak_lr"] < 1e-9 and f.evidence["loss_token_share"] > 0.1  # lr, not the masks


# ---- healthy, the CLI and the report ----------------------------------------------------------


def test_healthy_run_says_so(tmp_path, expert_train, expert_held):
    store(tmp_path, "train_store", expert_train)
    tuned_on_train = episodes(TRAIN, ExpertPolicy(name="tuned"))  # so the train/held-out gap is measured
    store(tmp_path, "eval_store", episodes(HELD, policy("base", WRONG, WRONG)) + expert_held + tuned_on_train)
    adapter(curves(tmp_path, loss=FALLING, lr=[1e-3] * 30, grad_norm=[1.0] * 30,
                   evals=[(10, {"completion": 0.3, "avg_turns": 2.5, "validity": 0.8}),
                          (30, {"completion": 0.8, "avg_turns": 2.1, "validity": 0.95})]),
            config={"lr": 1e-3, "epochs": 2}, result={"samples": 200, "tokens": 9000, "loss_tokens": 3000})
    curves(tmp_path, "grpo", loss=[0.1] * 6, reward=[0.24, 0.21, 0.29, 0.36, 0.3, 0.33], groups=[8] * 6,
           informative_groups=[4, 5, 5, 2, 3, 5], solved=[0.34, 0.28, 0.44, 0.53, 0.44, 0.5])
    (tmp_path / "rft").mkdir()
    adapter(tmp_path / "rft", recipe="rft", rft={"rounds": RFT_ROUNDS})
    d = diagnose(tmp_path)
    assert d.healthy and [f.rule for f in d.findings] == ["healthy"], [f.title for f in d.findings]
    assert d.subject == "tuned"
    assert {c.result for c in d.checks} == {"ok"}, [c for c in d.checks if c.result != "ok"]


def test_an_empty_folder_is_not_called_healthy(tmp_path):
    """ "healthy" means every rule that could look found nothing, never that none could look."""
    d = diagnose(tmp_path)
    assert not d.healthy and [f.rule for f in d.findings] == ["nothing_checked"]
    assert {c.result for c in d.checks} == {"not checked"}
    res = CliRunner().invoke(app, ["doctor", str(tmp_path)])
    assert "nothing could be checked" in res.output and "nothing wrong found" not in res.output


def test_cli_text_and_json(tmp_path):
    curves(tmp_path, loss=FLAT, lr=[1e-9] * 30)
    runner = CliRunner()
    res = runner.invoke(app, ["doctor", str(tmp_path)])
    assert res.exit_code == 0 and "loss_not_falling" in res.output and "learning rate is too small" in res.output
    res = runner.invoke(app, ["doctor", str(tmp_path), "--json"])
    data = json.loads(res.output)
    assert data["findings"][0]["rule"] == "loss_not_falling"
    assert runner.invoke(app, ["doctor", str(tmp_path / "missing")]).exit_code == 2


def test_cli_names_a_bad_file_instead_of_a_traceback(tmp_path):
    """Adapter metadata doctor computes with, of the wrong type: exit 2 naming the file and field
    (it was a TypeError from rule_too_few_samples)."""
    adapter(curves(tmp_path, loss=FALLING), config={"epochs": 2}, result={"samples": "8"})
    res = CliRunner().invoke(app, ["doctor", str(tmp_path)])
    assert res.exit_code == 2, res.exception
    assert "trajforge_adapter.json: 'result.samples' must be a number, got '8'" in res.output


def test_report_has_a_diagnosis_section(tmp_path):
    from trajforge.eval.report import write_report

    store(tmp_path, "s", episodes(TRAIN, ExpertPolicy(), RewardConfig(weights=(0.0, 0.3, 0.1, 0.1))))
    page = write_report(tmp_path).read_text()
    assert "<h2>Diagnosis</h2>" in page and "completion weight l1 is 0" in page
