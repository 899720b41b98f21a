"""Training takes every toolset the data was shown: a mixed sql + travel pool in one run, one role
of a pipeline, a migrated store, and an environment from outside the package (issue 14)."""

from __future__ import annotations

import json

import pytest

from trajforge.envs import EnvSpec, env_toolset, register, unregister
from trajforge.eval.run import collect
from trajforge.grade import graded
from trajforge.policies import make_policy
from trajforge.policies.scripted import ScriptedPolicy
from trajforge.store import TrajectoryStore
from trajforge.store.migrate import Migration, migrate_store
from trajforge.tasks import synthesize
from trajforge.train.sft import SFTConfig, train_sft
from trajforge.train.toolsets import UnknownToolset

ONE_STEP = SFTConfig(max_steps=1, batch_size=2, grad_accum=1, r=4, replay_share=0)  # only the data given


def _trained_on(out) -> dict:
    return json.loads((out / "trajforge_adapter.json").read_text())


def test_a_mixed_sql_and_travel_pool_trains_in_one_run(tiny_model, tmp_path):
    tasks = [t for env in ("sql", "travel") for t in [t for t in synthesize(env, 16, seed=1).tasks
                                                       if t.split == "train"][:6]]
    collect(tasks, make_policy("expert"), tmp_path / "store", show_progress=False)
    trajs = TrajectoryStore(tmp_path / "store").read()
    assert {t.env for t in trajs} == {"sql", "travel"}
    res = train_sft(trajs, tiny_model, tmp_path / "a", ONE_STEP, progress=False)
    # Long travel episodes may pass --max-len: skipped whole and counted, never cut.
    assert res.samples + res.skipped.get("too_long", 0) == len([t for t in trajs if t.outcome.tier == "success"])
    meta = _trained_on(tmp_path / "a")
    assert sorted(meta["toolset_fingerprints"]) == sorted({env_toolset(e).fingerprint for e in ("sql", "travel")})


def test_one_role_of_a_pipeline_trains_with_its_own_toolset(tiny_model, tmp_path):
    from tests.harness.test_pipeline import analyst, gatherer, simple_tasks, writer
    from trajforge.harness.pipeline import run_pipeline, sql_research_pipeline

    pipe = sql_research_pipeline(ScriptedPolicy(gatherer, name="g"), ScriptedPolicy(analyst, name="a"),
                                 ScriptedPolicy(writer, name="w"))
    views = [graded(pipe.role_view(t, "gatherer")) for t in run_pipeline(simple_tasks(4), pipe)]
    store = TrajectoryStore(tmp_path / "store")
    for v in views:
        store.append(v)
    res = train_sft(TrajectoryStore(tmp_path / "store").read(), tiny_model, tmp_path / "a", ONE_STEP, progress=False)
    assert res.samples == 4
    assert _trained_on(tmp_path / "a")["toolset_fingerprints"] == [pipe.toolset("gatherer").fingerprint]


def test_a_migrated_store_trains_and_the_old_one_is_refused(tiny_model, tmp_path, monkeypatch):
    from tests.store.test_migrate import SqlWithSqlArg
    from trajforge.envs.toolsets import KNOWN

    tasks = [t for t in synthesize("sql", 16, seed=2).tasks if t.split == "train"][:6]
    old_fp = env_toolset("sql").fingerprint
    collect(tasks, make_policy("expert"), tmp_path / "old", show_progress=False)  # today's tools
    register(EnvSpec(name="sql", env=SqlWithSqlArg), replace=True)  # then one argument is renamed
    try:
        report = migrate_store(tmp_path / "old", tmp_path / "new",
                               Migration.from_flags(rename_arg=["run_sql.query=sql"]), {t.id: t for t in tasks})
        assert report.reverified == len(tasks)
        res = train_sft(TrajectoryStore(tmp_path / "new").read(), tiny_model, tmp_path / "a", ONE_STEP,
                        progress=False)
        assert res.samples == len(tasks)
        assert _trained_on(tmp_path / "a")["toolset_fingerprints"] == [env_toolset("sql").fingerprint]
        # The old records without their toolsets/ folder: refused by name, with the way out.
        old = TrajectoryStore(tmp_path / "old").read()
        monkeypatch.delitem(KNOWN._by_fp, old_fp)  # this process forgets it, as a fresh one would
        with pytest.raises(UnknownToolset, match="trajforge migrate"):
            train_sft(old, tiny_model, tmp_path / "b", ONE_STEP, progress=False)
    finally:
        unregister("sql")  # the built-in comes back


def test_an_environment_from_outside_the_package_is_trained_on(tiny_model, tmp_path):
    from tests.envs.test_plugin_env import readme_example
    from trajforge.envs.toolsets import env_toolset as current

    namespace: dict = {"__name__": "readme_counter"}
    exec(compile(readme_example(), "README.md", "exec"), namespace)  # register(SPEC), as a user does
    try:
        tasks = [t for t in synthesize("counter", 24, seed=0).tasks if t.split == "train"][:6]
        collect(tasks, make_policy("expert"), tmp_path / "store", show_progress=False)
        res = train_sft(TrajectoryStore(tmp_path / "store").read(), tiny_model, tmp_path / "a", ONE_STEP,
                        progress=False)
        assert res.samples == len(tasks)
        meta = _trained_on(tmp_path / "a")
        assert meta["toolset_fingerprints"] == [current("counter").fingerprint]
    finally:
        unregister("counter")
