"""Rejection-sampling fine-tuning (train/rft.py): what is kept, the rounds, and the CLI on a real
(tiny) model sampling in the harness."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from trajforge.cli.main import app
from trajforge.grade import graded
from trajforge.harness import run_episodes
from trajforge.policies import make_policy
from trajforge.policies.repair import RepairPolicy
from trajforge.policies.scripted import ScriptedPolicy
from trajforge.store import TrajectoryStore
from trajforge.tasks.pool import write_tasks
from trajforge.tasks.repair import Planner
from trajforge.train.rft import RFTConfig, call_signature, keep_verified, round_key, train_rft, unsure_tasks, warm_slice
from trajforge.train.sft import SFTConfig, SFTResult

TINY = dict(max_steps=1, r=4, replay_share=0.0, batch_size=2, grad_accum=1)


def _train(sql_tasks):
    return [t for t in sql_tasks if t.split == "train"]


def test_kept_attempts_are_verified_distinct_and_shortest_first(sql_tasks):
    tasks = _train(sql_tasks)[:4]
    repaired = [graded(t) for t in run_episodes(tasks, RepairPolicy(Planner(_train(sql_tasks))), samples=3)]
    clean = [graded(t) for t in run_episodes(tasks, make_policy("expert"), samples=2)]
    wrong = [graded(t) for t in run_episodes(tasks, ScriptedPolicy(['<answer>"nothing"</answer>']))]
    assert {t.outcome.tier for t in repaired} == {"recovered"} and {t.outcome.tier for t in wrong} == {"failed"}
    kept = keep_verified(repaired + wrong + clean, per_task=2)
    assert all(t.outcome.tier in ("success", "recovered") for t in kept)
    for task in tasks:
        mine = [t for t in kept if t.task_id == task.id]
        assert len(mine) == 2
        # The expert's two identical attempts count once; the shortest (the clean one) comes first.
        assert mine[0].outcome.tier == "success" and mine[1].outcome.tier == "recovered"
        assert len({call_signature(t) for t in mine}) == 2
    # A later round keeps nothing it has already kept.
    seen: set = set()
    keep_verified(clean, per_task=2, seen=seen)
    assert keep_verified(clean, per_task=2, seen=seen) == []


def test_a_rounds_key_does_not_depend_on_the_order_of_its_settings(expert_trajs):
    """A field moved within a config class must not make a finished round train again."""
    cfg = SFTConfig(max_steps=3)

    class Reordered:  # the same settings, declared in the opposite order
        def model_dump(self, **kw):
            return dict(reversed(cfg.model_dump(**kw).items()))

    key = round_key(expert_trajs[:2], "m", cfg)
    assert round_key(expert_trajs[:2], "m", Reordered()) == key
    assert round_key(expert_trajs[:2], "m", SFTConfig(max_steps=4)) != key


def test_rounds_sample_keep_and_retrain_from_the_base(tiny_model, sql_tasks, expert_trajs, tmp_path, monkeypatch):
    """A sampler at the model boundary (the repair policy: each attempt a different mistake, then
    recovered) stands for a policy that sometimes succeeds; everything else is the real path."""
    tasks = _train(sql_tasks)[:3]
    seen_adapters = []

    def sampler(adapter, round_):
        seen_adapters.append(adapter)
        return RepairPolicy(Planner(_train(sql_tasks)), name=f"rft-round{round_}")

    cfg = RFTConfig(rounds=2, attempts=2, keep_per_task=1, **TINY)
    res = train_rft(tasks, expert_trajs[:4], tiny_model, tmp_path / "rft", cfg, policy_for=sampler, progress=False)
    assert [r.round for r in res.rounds] == [0, 1, 2]
    assert seen_adapters == [str(tmp_path / "rft" / "round-0"), str(tmp_path / "rft" / "round-1")]
    one, two = res.rounds[1], res.rounds[2]
    assert one.sampled == 6 and one.verified == 6 and one.solved_tasks == 3 and one.kept == 3
    assert one.trained_on == 4 + 3 and two.trained_on == 4 + 3 + two.kept
    meta = json.loads((tmp_path / "rft" / "trajforge_adapter.json").read_text())
    assert meta["recipe"] == "rft" and [r["round"] for r in meta["rft"]["rounds"]] == [0, 1, 2]
    assert (tmp_path / "rft" / "adapter_model.safetensors").exists()
    assert len(TrajectoryStore(tmp_path / "rft" / "samples").read()) == 12
    # A rerun (after a crash, say) samples nothing it already has, keeps the same data and trains
    # no round again: each was trained to the end on the same data and settings.
    import trajforge.train.rft as rft

    trained = []
    real_sft = rft.train_sft
    monkeypatch.setattr(rft, "train_sft", lambda data, *a, **k: trained.append(len(data)) or real_sft(data, *a, **k))
    (tmp_path / "rft" / "round-1" / rft.ROUND_RECORD).write_text("{not json")  # a damaged record
    again = train_rft(tasks, expert_trajs[:4], tiny_model, tmp_path / "rft", cfg, policy_for=sampler, progress=False)
    assert len(TrajectoryStore(tmp_path / "rft" / "samples").read()) == 12
    assert [r.trained_on for r in again.rounds] == [r.trained_on for r in res.rounds]
    assert trained == [one.trained_on]  # only the round whose record was damaged
    assert [r.sft.steps for r in again.rounds] == [r.sft.steps for r in res.rounds]
    # Other settings are another run: every round trains again.
    trained.clear()
    train_rft(tasks, expert_trajs[:4], tiny_model, tmp_path / "rft", cfg.model_copy(update={"lr": 1e-4}),
              policy_for=sampler, progress=False)
    assert len(trained) == 3


def test_train_rft_from_the_cli_samples_a_real_model(tiny_model, sql_tasks, expert_trajs, tmp_path):
    store = TrajectoryStore(tmp_path / "expert")
    for t in expert_trajs[:4]:
        store.append(t)
    write_tasks(tmp_path / "tasks.jsonl", _train(sql_tasks)[:2] + [t for t in sql_tasks if t.split == "test"][:1])
    res = CliRunner().invoke(app, [
        "train", "rft", "--tasks", str(tmp_path / "tasks.jsonl"), "--data", str(tmp_path / "expert"),
        "--model", tiny_model, "--out", str(tmp_path / "rft"), "--rounds", "1", "--attempts", "2",
        "--max-new-tokens", "16", "--max-turns", "2", "--max-steps", "1", "--r", "4", "--replay-share", "0"])
    assert res.exit_code == 0, res.output
    assert "round 1: 4 attempts" in res.output and "tokens sampled" in res.output
    sampled = TrajectoryStore(tmp_path / "rft" / "samples").read()
    assert len(sampled) == 4 and {t.split for t in sampled} <= {"train"}
    assert all(t.sampling.temperature == 0.7 for t in sampled)
    # The sampler is named by its adapter's weights: a rerun whose round 0 trained another adapter
    # samples afresh instead of resuming the old adapter's attempts.
    from trajforge.train.rft import adapter_digest

    assert {t.policy for t in sampled} == {f"rft-round1-{adapter_digest(tmp_path / 'rft' / 'round-0')}"}
    res = CliRunner().invoke(app, [
        "train", "rft", "--tasks", str(tmp_path / "tasks.jsonl"), "--data", str(tmp_path / "expert"),
        "--model", tiny_model, "--out", str(tmp_path / "rft"), "--rounds", "1", "--attempts", "2",
        "--max-new-tokens", "16", "--max-turns", "2", "--max-steps", "1", "--r", "4", "--replay-share", "0",
        "--lr", "5e-4"])
    assert res.exit_code == 0, res.output
    assert len(TrajectoryStore(tmp_path / "rft" / "samples").read()) == 8


def test_warm_rounds_go_on_from_the_previous_adapter_on_kept_plus_a_slice_of_expert(
        tiny_model, sql_tasks, expert_trajs, tmp_path):
    """``warm_start``: each round trains a new adapter on top of the previous one (its lineage
    recorded, so loading the last loads them all) on that round's kept attempts plus as many
    expert episodes; a round that keeps nothing new keeps the previous adapter."""
    from trajforge.policies.hf import adapter_lineage

    tasks = _train(sql_tasks)[:3]
    out = tmp_path / "rft"

    def sampler(adapter, round_):
        return RepairPolicy(Planner(_train(sql_tasks)), name=f"rft-round{round_}")

    cfg = RFTConfig(rounds=2, attempts=2, keep_per_task=1, warm_start=True, **TINY)
    res = train_rft(tasks, expert_trajs[:4], tiny_model, out, cfg, policy_for=sampler, progress=False)
    one, two = res.rounds[1], res.rounds[2]
    assert one.kept == 3 and one.trained_on == 3 + 3  # kept + expert_mix (1.0) x as many expert
    assert two.kept == 3 and two.trained_on == 3 + 3
    meta = json.loads((out / "trajforge_adapter.json").read_text())
    assert meta["init_adapter"] == str((out / "round-1").resolve()) and meta["rft"]["config"]["warm_start"]
    assert adapter_lineage(out) == [str((out / "round-0").resolve()), str((out / "round-1").resolve()), str(out)]
    # The same rounds from the base (ReST-EM's rule) train on all expert data plus everything kept.
    cold = train_rft(tasks, expert_trajs[:4], tiny_model, tmp_path / "cold",
                     cfg.model_copy(update={"warm_start": False}), policy_for=sampler, progress=False)
    assert [r.trained_on for r in cold.rounds[1:]] == [4 + 3, 4 + 6]
    assert json.loads((tmp_path / "cold" / "trajforge_adapter.json").read_text())["init_adapter"] is None

    def failing(adapter, round_):
        return ScriptedPolicy(['<answer>"nothing"</answer>'], name=f"fail-round{round_}")

    with pytest.raises(ValueError, match="expert_mix"):
        train_rft(tasks, expert_trajs[:4], tiny_model, tmp_path / "bad", cfg.model_copy(update={"expert_mix": -1.0}),
                  policy_for=failing, progress=False)
    none_kept = train_rft(tasks, expert_trajs[:4], tiny_model, tmp_path / "none",
                          cfg.model_copy(update={"rounds": 1}), policy_for=failing, progress=False)
    assert none_kept.rounds[1].kept == 0 and none_kept.rounds[1].sft is None
    assert none_kept.rounds[1].adapter_dir == none_kept.rounds[0].adapter_dir


class _Fixer:
    """Stands in for a model after a one-call planted mistake: it writes the reference call the
    mistake replaced and the rest (the turn index is one ahead of the reference). It records the
    turns it was asked for."""

    def __init__(self, name="fixer"):
        from trajforge.policies.expert import ExpertPolicy

        self.expert = ExpertPolicy()
        self.name, self.dialect, self.batch_size, self.temperature = name, self.expert.dialect, 8, 0.7
        self.turns: list[int] = []

    def act(self, requests):
        self.turns += [r.turn for r in requests]
        return [self.expert.reference_turn(r.task, r.turn - 1) for r in requests]


def test_a_warm_rounds_repair_mix_draws_self_repair_episodes_apart_from_the_expert_slice(sql_tasks, expert_trajs):
    """Self-repair episodes among many expert ones would mostly miss a warm round's slice:
    ``repair_mix`` draws them apart, ``expert_mix`` then only successes; without it, one draw."""
    tasks = _train(sql_tasks)
    repairs = [graded(t) for t in run_episodes(tasks[:6], RepairPolicy(Planner(tasks)))]
    assert {t.outcome.tier for t in repairs} == {"recovered"}
    expert = list(expert_trajs) + repairs
    mixed = warm_slice(expert, 4, RFTConfig(repair_mix=1.0, expert_mix=0.5), 1)
    assert sum(t.outcome.tier == "recovered" for t in mixed) == 4 and sum(t.outcome.tier == "success" for t in mixed) == 2
    alone = warm_slice(expert, 4, RFTConfig(expert_mix=2.0), 1)
    assert len(alone) == 8  # one draw over both tiers, as before repair_mix
    with pytest.raises(ValueError, match="repair_mix"):
        train_rft(tasks, expert, "unused", "/nonexistent", RFTConfig(repair_mix=-1.0))


def test_mistake_first_policy_plants_the_mistake_then_hands_the_episode_to_the_model(sql_tasks):
    from trajforge.policies.repair import MistakeFirstPolicy

    tasks = _train(sql_tasks)[:4]
    plan = Planner(_train(sql_tasks))
    fixer = _Fixer()
    policy = MistakeFirstPolicy(fixer, plan)
    assert policy.name == "fixer+mistake" and policy.temperature == 0.7 and policy.batch_size == 8
    trajs = [graded(t) for t in run_episodes(tasks, policy)]
    for task, traj in zip(tasks, trajs):
        mistake = plan(task, 0)
        assert len(mistake.calls) == 1  # what _Fixer's offset assumes
        assert [s.index for s in traj.steps if s.mistake] == [mistake.at]
        assert traj.outcome.tier == "recovered" and not traj.outcome.guessed
    # The model wrote no turn up to and including the mistake, and every turn after it.
    assert min(fixer.turns) == min(plan(t, 0).at for t in tasks) + 1
    assert len(fixer.turns) == sum(len(t.steps) - plan(task, 0).at - 1 for task, t in zip(tasks, trajs))


def test_rft_keeps_the_policys_own_recoveries_from_planted_mistakes(tiny_model, sql_tasks, expert_trajs, tmp_path):
    tasks = _train(sql_tasks)[:3]
    cfg = RFTConfig(rounds=1, attempts=0, mistake_attempts=2, keep_per_task=2, warm_start=True, **TINY)
    res = train_rft(tasks, expert_trajs[:4], tiny_model, tmp_path / "rft", cfg,
                    policy_for=lambda adapter, r: _Fixer(f"rft-round{r}"), progress=False)
    one = res.rounds[1]
    stored = TrajectoryStore(tmp_path / "rft" / "samples").read()
    assert {t.policy for t in stored} == {"rft-round1+mistake"} and one.sampled == 6
    # Two attempts per task play two different mistakes: distinct call sequences, both kept.
    assert one.kept == 6 and one.trained_on == 6 + 4  # expert_mix 1.0, but only 4 expert episodes
    assert all(any(s.mistake for s in t.steps) for t in stored)
    with pytest.raises(ValueError, match="not both 0"):
        train_rft(tasks, expert_trajs[:4], tiny_model, tmp_path / "bad", cfg.model_copy(update={"mistake_attempts": 0}),
                  policy_for=lambda adapter, r: _Fixer(), progress=False)


class _Flaky:
    """A policy that repeats itself: the expert's calls on sample 0 of each task, a wrong answer on
    every other sample, the same in every round."""

    def __init__(self, name):
        from trajforge.policies.expert import ExpertPolicy

        self.expert = ExpertPolicy()
        self.name, self.dialect, self.batch_size, self.temperature = name, self.expert.dialect, 8, 0.7

    def act(self, requests):
        return [self.expert.reference_turn(r.task, r.turn) if r.sample == 0
                else self.expert.reference_turn(r.task.model_copy(update={"reference": (
                    r.task.reference[-1].model_copy(update={"arguments": {"answer": "nothing"}}),)}), 0)
                for r in requests]


def test_warm_rounds_reinforce_the_tasks_still_failed_sometimes(tiny_model, sql_tasks, expert_trajs, tmp_path):
    """Distinct-only keeping starves warm rounds of a policy that repeats its one success (stop
    37's testbed: kept 5, then 0 for 11 rounds). ``reinforce_below`` keeps the successes of tasks
    solved in under that share of their attempts again; tasks solved every time stay distinct-only."""
    tasks = _train(sql_tasks)[:3]
    sampled = [graded(t) for t in run_episodes(tasks, _Flaky("flaky"), samples=2)]
    assert sorted(t.outcome.tier for t in sampled) == ["failed"] * 3 + ["success"] * 3
    assert unsure_tasks(sampled, 1.0) == {t.id for t in tasks} and unsure_tasks(sampled, 0.5) == set()
    assert unsure_tasks([t for t in sampled if t.outcome.correct], 1.0) == set()  # solved every time
    seen: set = set()
    assert len(keep_verified(sampled, 2, seen)) == 3
    assert keep_verified(sampled, 2, seen) == []
    again = keep_verified(sampled + sampled, 2, seen, again={tasks[0].id})
    assert [t.task_id for t in again] == [tasks[0].id]  # once: a round's own keeps stay distinct
    runs = {}
    for below in (0.0, 1.0):
        cfg = RFTConfig(rounds=2, attempts=2, keep_per_task=1, warm_start=True, reinforce_below=below, **TINY)
        runs[below] = train_rft(tasks, expert_trajs[:4], tiny_model, tmp_path / f"rft-{below}", cfg,
                                policy_for=lambda adapter, r: _Flaky(f"rft-round{r}"), progress=False)
    off, on = runs[0.0].rounds, runs[1.0].rounds
    assert [r.kept for r in off[1:]] == [3, 0] and off[2].sft is None  # round 2 learns nothing
    assert [(r.kept, r.reinforced) for r in on[1:]] == [(3, 0), (3, 3)] and on[2].trained_on == 3 + 3
    meta = json.loads((tmp_path / "rft-1.0" / "trajforge_adapter.json").read_text())
    assert meta["rft"]["config"]["reinforce_below"] == 1.0 and meta["rft"]["rounds"][2]["reinforced"] == 3


def _fake_sft(trained: list):
    """``train_sft`` at the model boundary: an adapter whose weights are a digest of its data (so
    a round trained on other data has another digest); what each call trained on is appended to
    ``trained``."""
    def fake(data, model, out_dir, cfg, progress=True, init_adapter=None):
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        trained.append([(t.task_id, t.policy, t.sample) for t in data])
        digest = hashlib.sha256("".join(t.model_dump_json() for t in data).encode()).digest()
        (out / "adapter_model.safetensors").write_bytes(digest)
        return SFTResult(adapter_dir=str(out), samples=len(data), skipped={}, tokens=0, loss_tokens=0,
                         steps=1, losses=[0.0], seconds=0.0)
    return fake


def test_a_rerun_with_other_tasks_attempts_or_temperature_takes_only_its_own_attempts(
        sql_tasks, expert_trajs, tmp_path, monkeypatch):
    """An out dir holding an earlier run's attempts under the same sampler name (round 0 trained
    on the same expert data): a rerun with fewer tasks, fewer attempts or another temperature
    keeps and trains on what a fresh run would, not on the earlier run's extra attempts."""
    import trajforge.train.rft as rft

    trained: list = []
    monkeypatch.setattr(rft, "train_sft", _fake_sft(trained))
    tasks = _train(sql_tasks)[:3]

    def sampler(temperature):
        def policy_for(adapter, round_):
            policy = RepairPolicy(Planner(_train(sql_tasks)), name=f"rft-round{round_}")
            policy.temperature = temperature
            return policy
        return policy_for

    cfg = RFTConfig(rounds=1, attempts=3, keep_per_task=3, **TINY)
    train_rft(tasks, expert_trajs[:4], "m", tmp_path / "rft", cfg, policy_for=sampler(0.7), progress=False)
    for i, (pool, attempts, temperature) in enumerate([(tasks[:2], 3, 0.7), (tasks, 2, 0.7), (tasks, 3, 0.9)]):
        run = dict(cfg=cfg.model_copy(update={"attempts": attempts}), policy_for=sampler(temperature), progress=False)
        trained.clear()
        fresh = train_rft(pool, expert_trajs[:4], "m", tmp_path / f"fresh-{i}", **run)
        again = train_rft(pool, expert_trajs[:4], "m", tmp_path / "rft", **run)
        assert again.rounds[1].sampled == len(pool) * attempts
        assert [r.model_dump(include={"sampled", "verified", "solved_tasks", "kept", "trained_on"})
                for r in again.rounds] == [r.model_dump(include={"sampled", "verified", "solved_tasks", "kept",
                                                                  "trained_on"}) for r in fresh.rounds]
        assert trained[-1] == trained[1]  # round 1 trained on the same data (round 0 is reused)


def test_a_rerun_under_another_max_turns_is_refused_not_fed_the_old_episodes(
        sql_tasks, expert_trajs, tmp_path, monkeypatch):
    """The resume key does not hold the harness settings: episodes cut at 8 turns would have been
    reused by a rerun at 2 as its own."""
    import trajforge.train.rft as rft

    monkeypatch.setattr(rft, "train_sft", _fake_sft([]))
    tasks = _train(sql_tasks)[:2]

    def policy_for(adapter, round_):
        return RepairPolicy(Planner(_train(sql_tasks)), name=f"rft-round{round_}")

    cfg = RFTConfig(rounds=1, attempts=2, keep_per_task=2, **TINY)
    train_rft(tasks, expert_trajs[:4], "m", tmp_path, cfg, policy_for=policy_for, progress=False)
    again = train_rft(tasks, expert_trajs[:4], "m", tmp_path, cfg, policy_for=policy_for, progress=False)
    assert again.rounds[1].sampled == 4  # the same settings resume
    with pytest.raises(ValueError, match="max_turns 8 -> 2"):
        train_rft(tasks, expert_trajs[:4], "m", tmp_path, cfg.model_copy(update={"max_turns": 2}),
                  policy_for=policy_for, progress=False)


def test_a_store_with_a_torn_line_and_an_env_fault_is_resampled_there(sql_tasks, expert_trajs, tmp_path,
                                                                       monkeypatch):
    """A crash mid-write (a torn last line) and an episode the infrastructure ended: a rerun
    samples both again, keeps no fault as data, and trains what the first run trained."""
    import trajforge.train.rft as rft

    trained: list = []
    monkeypatch.setattr(rft, "train_sft", _fake_sft(trained))
    tasks = _train(sql_tasks)[:2]
    sampler = lambda adapter, r: RepairPolicy(Planner(_train(sql_tasks)), name=f"rft-round{r}")  # noqa: E731
    cfg = RFTConfig(rounds=1, attempts=2, keep_per_task=2, **TINY)
    first = train_rft(tasks, expert_trajs[:4], "m", tmp_path / "rft", cfg, policy_for=sampler, progress=False)
    store = TrajectoryStore(tmp_path / "rft" / "samples")
    trajs = store.read()
    fault = trajs[0].model_copy(update={"end": "env_fault", "outcome": trajs[0].outcome.model_copy(
        update={"tier": "env_fault"})})
    store.rewrite([fault] + trajs[2:])  # trajs[1]: lost to the crash
    with open(store.shards()[0], "a") as f:
        f.write(trajs[1].model_dump_json()[:50])
    again = train_rft(tasks, expert_trajs[:4], "m", tmp_path / "rft", cfg, policy_for=sampler, progress=False)
    assert again.rounds[1].model_dump(include={"sampled", "verified", "kept", "trained_on"}) == \
        first.rounds[1].model_dump(include={"sampled", "verified", "kept", "trained_on"})
    assert trained[-1] == trained[1]  # the two resampled attempts in place of the lost ones
    assert store.read() and store.torn and not any(t.end == "env_fault" for t in store.read())


def test_an_env_fault_is_no_failed_attempt_of_the_policy(sql_tasks):
    """``reinforce_below`` judges the policy on its own attempts: one the infrastructure ended
    says nothing about how often the policy solves the task."""
    tasks = _train(sql_tasks)[:2]
    sampled = [graded(t) for t in run_episodes(tasks, _Flaky("flaky"), samples=2)]
    solved = [t for t in sampled if t.outcome.correct]
    faulted = [t.model_copy(update={"end": "env_fault", "outcome": t.outcome.model_copy(update={"tier": "env_fault"})})
               for t in sampled if not t.outcome.correct]
    assert unsure_tasks(solved + faulted, 1.0) == set()
    assert unsure_tasks(sampled, 1.0) == {t.id for t in tasks}


def test_a_negative_time_budget_is_refused(sql_tasks, expert_trajs, tmp_path, monkeypatch):
    """``--max-minutes -1`` is a mistake, not a budget spent before the run began (which trained
    round 0 for a second and stopped)."""
    import trajforge.train.rft as rft

    trained: list = []
    monkeypatch.setattr(rft, "train_sft", _fake_sft(trained))
    cfg = RFTConfig(rounds=1, attempts=1, max_seconds=-60, **TINY)
    with pytest.raises(ValueError, match="max_seconds"):
        train_rft(_train(sql_tasks)[:2], expert_trajs[:4], "m", tmp_path / "rft", cfg,
                  policy_for=lambda adapter, r: RepairPolicy(Planner(_train(sql_tasks))), progress=False)
    assert trained == []


def test_the_adopted_adapters_meta_is_the_last_rounds_not_an_earlier_runs(tmp_path):
    """The last round's adapter has no trajforge meta (a PEFT adapter from elsewhere given as
    ``init_adapter``, no round run): the out dir's meta from an earlier run, with the lineage
    that loading the adapter would merge beneath it, must not survive the copy."""
    from trajforge.policies.hf import ADAPTER_META, adapter_lineage
    from trajforge.train.rft import adopt_last_round

    out, last = tmp_path / "rft", tmp_path / "foreign"
    out.mkdir()
    last.mkdir()
    (last / "adapter_model.safetensors").write_bytes(b"new")
    (out / "adapter_model.safetensors").write_bytes(b"old")
    (out / ADAPTER_META).write_text(json.dumps({"init_adapter": str(out / "round-1"), "recipe": "rft"}))
    adopt_last_round(out, last, "rft", {"rounds": []})
    meta = json.loads((out / ADAPTER_META).read_text())
    assert "init_adapter" not in meta and meta["rft"] == {"rounds": []}
    assert adapter_lineage(out) == [str(out)]
