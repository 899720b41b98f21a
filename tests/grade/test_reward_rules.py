"""Reward weights per environment and task type (issue 13 item 8): chosen per episode, stored with
every breakdown, settable in ``--config`` and on ``grade`` / ``collect``, and regrading recomputes.

Episodes are real: the expert runs a pool mixing SQL and travel tasks through the harness and the
real environments; the CLI runs in-process through typer.
"""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from trajforge.cli.main import app
from trajforge.eval.run import collect
from trajforge.grade import RewardConfig, RewardRule, graded
from trajforge.policies.expert import ExpertPolicy
from trajforge.store import TrajectoryStore
from trajforge.tasks import synthesize
from trajforge.tasks.pool import write_tasks

runner = CliRunner()
SQL_W = (0.6, 0.3, 0.05, 0.05)
TRAVEL_W = (0.2, 0.7, 0.05, 0.05)


def _by_hand(r, weights, bonus, milestones):
    """R = l1*completion + l2*step + l3*efficiency - l4*violation, step = bonus × milestones."""
    l1, l2, l3, l4 = weights
    return round(l1 * r.completion + l2 * bonus * milestones + l3 * r.efficiency - l4 * r.violation, 6)


@pytest.fixture(scope="module")
def mixed_pool(tmp_path_factory):
    root = tmp_path_factory.mktemp("mixed")
    tasks = synthesize("sql", 4, seed=0).tasks + synthesize("travel", 4, seed=0).tasks
    write_tasks(root / "tasks.jsonl", tasks)
    return root, tasks


def test_resolve_most_specific_rule_wins():
    cfg = RewardConfig(weights=(1, 0, 0, 0), milestone_bonus=0.1,
                       per={"sql": RewardRule(weights=SQL_W), "sql/hard": RewardRule(milestone_bonus=0.5),
                            "*/hard": RewardRule(weights=TRAVEL_W)})
    assert cfg.resolve("sql", "easy") == (SQL_W, 0.1, "sql")
    assert cfg.resolve("sql", "hard") == ((1, 0, 0, 0), 0.5, "sql/hard")  # unset weights: the defaults
    assert cfg.resolve("web", "hard") == (TRAVEL_W, 0.1, "*/hard")
    assert cfg.resolve("web", "easy") == ((1, 0, 0, 0), 0.1, "default")
    for bad in ("", "*", "sql/", "/hard", "a/b/c"):
        with pytest.raises(ValueError, match="ENV, ENV/TIER"):
            RewardConfig(per={bad: RewardRule()})


def test_two_envs_get_their_own_weights_stored(mixed_pool, tmp_path):
    _, tasks = mixed_pool
    cfg = RewardConfig(per={"sql": RewardRule(weights=SQL_W), "travel": RewardRule(weights=TRAVEL_W,
                                                                                 milestone_bonus=0.2)})
    collect(tasks, ExpertPolicy(), tmp_path / "store", rewards=cfg, show_progress=False)
    stored = TrajectoryStore(tmp_path / "store").read()  # what is on disk, read back
    assert {t.env for t in stored} == {"sql", "travel"}
    for t in stored:
        want = (SQL_W, 0.1, "sql") if t.env == "sql" else (TRAVEL_W, 0.2, "travel")
        assert (t.reward.weights, t.reward.milestone_bonus, t.reward.rule) == want
        assert t.reward.total == _by_hand(t.reward, *want[:2], len(t.verdict.milestones))
    travel = [t for t in stored if t.env == "travel"]
    assert any(t.verdict.milestones for t in travel), "travel episodes reach milestones: the bonus matters"


def test_grade_cli_regrades_with_other_weights(mixed_pool, tmp_path):
    root, tasks = mixed_pool
    store = tmp_path / "store"
    collect(tasks, ExpertPolicy(), store, show_progress=False)
    before = {t.task_id: t.reward for t in TrajectoryStore(store).read()}
    assert {r.rule for r in before.values()} == {"default"}
    res = runner.invoke(app, ["grade", str(store), "--reward-weights", "sql=0.6,0.3,0.05,0.05",
                              "--reward-weights", "0.9,0.1,0,0", "--milestone-bonus", "travel=0.25"])
    assert res.exit_code == 0, res.output
    after = TrajectoryStore(store).read()
    changed = 0
    for t in after:
        weights, bonus = (SQL_W, 0.1) if t.env == "sql" else ((0.9, 0.1, 0.0, 0.0), 0.25)
        assert (t.reward.weights, t.reward.milestone_bonus) == (weights, bonus)
        assert t.reward.rule == ("sql" if t.env == "sql" else "travel")
        assert t.reward.total == _by_hand(t.reward, weights, bonus, len(t.verdict.milestones))
        changed += t.reward.total != before[t.task_id].total
    assert changed == len(after), "every total moved with its new weights"


def test_config_file_sets_rules_and_flags_win(mixed_pool, tmp_path):
    _, tasks = mixed_pool
    store = tmp_path / "store"
    collect(tasks, ExpertPolicy(), store, show_progress=False)
    conf = tmp_path / "rewards.toml"
    conf.write_text('[rewards]\nweights = [0.4, 0.4, 0.1, 0.1]\n[rewards.per.travel]\nmilestone_bonus = 0.3\n'
                    '[rewards.per."sql/easy"]\nweights = [1.0, 0.0, 0.0, 0.0]\n')
    res = runner.invoke(app, ["grade", str(store), "--config", str(conf), "--milestone-bonus", "travel=0.05"])
    assert res.exit_code == 0, res.output
    for t in TrajectoryStore(store).read():
        if t.env == "travel":
            assert (t.reward.weights, t.reward.milestone_bonus, t.reward.rule) == ((0.4, 0.4, 0.1, 0.1), 0.05,
                                                                                   "travel")
        elif t.tier == "easy":
            assert (t.reward.weights, t.reward.rule) == ((1.0, 0.0, 0.0, 0.0), "sql/easy")
            assert t.reward.total == t.reward.completion


@pytest.mark.parametrize("flag, value, message", [
    ("--reward-weights", "sql=0.5,0.5", "expected 4 weights"),
    ("--reward-weights", "sql=a,b,c,d", "numbers separated by commas"),
    ("--milestone-bonus", "=0.2", "nothing before '='"),
    ("--milestone-bonus", "sql/=0.2", "ENV, ENV/TIER or */TIER"),
    # a NaN or inf made every total NaN; a negative violation weight paid for malformed calls
    ("--reward-weights", "nan,0.3,0.1,0.1", "finite numbers >= 0"),
    ("--reward-weights", "sql=0.5,0.3,0.1,-0.1", "finite numbers >= 0"),
    ("--milestone-bonus", "travel=inf", "finite number >= 0"),
    ("--milestone-bonus", "1e400", "finite number >= 0"),
])
def test_bad_reward_flags_exit_2_naming_the_flag(tmp_path, flag, value, message):
    store = tmp_path / "store"
    collect(synthesize("sql", 1, seed=0).tasks, ExpertPolicy(), store, show_progress=False)
    res = runner.invoke(app, ["grade", str(store), flag, value])
    assert res.exit_code == 2 and message in res.output


@pytest.mark.parametrize("bad", [{"weights": (float("nan"), 0.3, 0.1, 0.1)}, {"weights": (0.5, 0.3, 0.1, -0.1)},
                                 {"milestone_bonus": float("inf")}, {"milestone_bonus": -0.1}])
def test_weights_that_would_break_every_total_are_refused(bad):
    """NaN/inf weights gave NaN totals (and NaN GRPO advantages); a negative one reverses its term."""
    with pytest.raises(ValueError, match="finite number"):
        RewardConfig(**bad)
    with pytest.raises(ValueError, match="finite number"):
        RewardConfig(per={"sql": RewardRule(**bad)})


def test_a_misspelt_key_in_a_rule_is_refused_by_name(tmp_path):
    """``weight =`` under ``[rewards.per.sql]`` was dropped: the sql rule silently used the defaults."""
    store = tmp_path / "store"
    collect(synthesize("sql", 1, seed=0).tasks, ExpertPolicy(), store, show_progress=False)
    conf = tmp_path / "rewards.toml"
    conf.write_text('[rewards.per.sql]\nweight = [1.0, 0.0, 0.0, 0.0]\n')
    res = runner.invoke(app, ["grade", str(store), "--config", str(conf)])
    assert res.exit_code == 2 and "per.sql.weight" in res.output, res.output
    with pytest.raises(ValueError, match="weight"):
        RewardRule(weight=(1, 0, 0, 0))


def test_collect_cli_stores_per_env_weights(mixed_pool, tmp_path):
    root, _ = mixed_pool
    res = runner.invoke(app, ["collect", "--tasks", str(root / "tasks.jsonl"), "--policy", "expert",
                              "--out", str(tmp_path / "s"), "--reward-weights", "travel=0.2,0.7,0.05,0.05"])
    assert res.exit_code == 0, res.output
    stored = TrajectoryStore(tmp_path / "s").read()
    assert {(t.env, t.reward.rule, t.reward.weights) for t in stored} == {
        ("sql", "default", RewardConfig().weights), ("travel", "travel", TRAVEL_W)}


def test_collect_rerun_with_other_weights_says_the_stored_rewards_differ(mixed_pool, tmp_path):
    """A rerun skips every finished episode, so new weights reached none of them: it said only
    "collected 0 new episodes" and left the old totals (which DPO ranks by) in the store."""
    root, _ = mixed_pool
    base = ["collect", "--tasks", str(root / "tasks.jsonl"), "--policy", "expert", "--out", str(tmp_path / "s")]
    res = runner.invoke(app, base)
    assert res.exit_code == 0 and "note:" not in res.output, res.output
    flag = ["--reward-weights", "travel=0.2,0.7,0.05,0.05"]
    res = runner.invoke(app, [*base, *flag])
    assert res.exit_code == 0 and "collected 0 new episodes" in res.output, res.output
    assert "note: 4 episodes" in res.output and "trajforge grade" in res.output, res.output
    assert runner.invoke(app, ["grade", str(tmp_path / "s"), *flag]).exit_code == 0
    res = runner.invoke(app, [*base, *flag])
    assert res.exit_code == 0 and "note:" not in res.output, res.output


def test_graded_without_rules_is_unchanged():
    """The defaults still give the 0.1 formula's weights, named ``default``."""
    tasks = synthesize("sql", 1, seed=0).tasks
    from trajforge.harness import run_episodes

    t = graded(run_episodes(tasks, ExpertPolicy())[0])
    assert (t.reward.weights, t.reward.milestone_bonus, t.reward.rule) == ((0.5, 0.3, 0.1, 0.1), 0.1, "default")


def test_train_grpo_takes_reward_rules_from_config_and_flags(mixed_pool, tmp_path):
    """The GRPO command builds ``GRPOConfig.rewards`` from ``[rewards]`` and the flags; bad values
    stop it before any model loads (exit 2), so no training runs here."""
    root, _ = mixed_pool
    base = ["train", "grpo", "--tasks", str(root / "tasks.jsonl"), "--out", str(tmp_path / "g")]
    bad_file = tmp_path / "bad.toml"
    bad_file.write_text('[rewards.per."sql/"]\nmilestone_bonus = 0.3\n')
    res = runner.invoke(app, base + ["--config", str(bad_file)])
    assert res.exit_code == 2 and "ENV, ENV/TIER or */TIER" in res.output
    res = runner.invoke(app, base + ["--reward-weights", "travel=1,2"])
    assert res.exit_code == 2 and "expected 4 weights" in res.output


def test_file_only_fields_are_not_flags():
    from trajforge.cli.options import check_defaults, config_commands

    for name in ("grade", "collect", "train grpo"):
        fn = config_commands(app)[name]
        assert check_defaults(fn) == []
    res = runner.invoke(app, ["grade", "--help"])
    assert "--per" not in res.output and "--weights" not in res.output
