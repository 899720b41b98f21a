"""``trajforge migrate``: rename an argument of one tool, re-execute, keep what holds, report."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from trajforge.cli.main import app
from trajforge.envs import EnvSpec, env_toolset, register, unregister
from trajforge.envs.sql import SqlEnv
from trajforge.eval.run import collect
from trajforge.policies import make_policy
from trajforge.policies.scripted import ScriptedPolicy
from trajforge.store import TrajectoryStore
from trajforge.store.migrate import Migration, migrate_adapter, migrate_store
from trajforge.tasks import synthesize, write_tasks


class SqlWithSqlArg(SqlEnv):
    """The sql environment after one argument was renamed: run_sql(query) became run_sql(sql)."""

    def run_sql(self, sql: str) -> str:
        """Run one read-only SQLite SELECT query.

        Args:
            sql: The SQL query.
        """
        return SqlEnv.run_sql(self, sql)


class SqlThatAnswersDifferently(SqlWithSqlArg):
    """Renamed, and its results now read differently: no stored result holds."""

    def run_sql(self, sql: str) -> str:
        """Run one read-only SQLite SELECT query.

        Args:
            sql: The SQL query.
        """
        return SqlEnv.run_sql(self, sql).replace("(1 row)", "(one row)")


@pytest.fixture(scope="module")
def old_store(tmp_path_factory):
    """A store collected with today's sql schema: expert episodes plus failing ones."""
    root = tmp_path_factory.mktemp("migrate")
    tasks = synthesize("sql", 24, seed=0).tasks
    write_tasks(root / "tasks.jsonl", tasks)
    collect(tasks, make_policy("expert"), root / "store", show_progress=False)
    lost = ScriptedPolicy(["I do not know."], name="lost")  # no calls: nothing to migrate in them
    collect(tasks[:4], lost, root / "store", show_progress=False)
    return root, tasks


@pytest.fixture
def renamed():
    def use(cls):
        register(EnvSpec(name="sql", env=cls), replace=True)
    yield use
    unregister("sql")  # the built-in comes back


def test_renaming_one_argument_migrates_and_reverifies(old_store, renamed, tmp_path):
    root, tasks = old_store
    old_fp = env_toolset("sql").fingerprint
    renamed(SqlWithSqlArg)
    pool = {t.id: t for t in tasks[:-2]}  # the last two tasks are missing from the pool given
    report = migrate_store(root / "store", tmp_path / "new", Migration.from_flags(rename_arg=["run_sql.query=sql"]), pool)
    assert report.records == 28 and report.relabelled == 0
    # Every record was shown the old tools, so every one is migrated (the scripted episodes made no
    # call, and are re-verified with nothing to rewrite); two tasks are missing from the pool.
    assert report.migrated == 28 and report.reverified == 26 and report.dropped == {"no_task": 2}
    new_fp = env_toolset("sql").fingerprint
    assert report.fingerprints == {old_fp: new_fp}
    migrated = TrajectoryStore(tmp_path / "new").read()
    assert len(migrated) == 26 and {t.toolset_fingerprint for t in migrated} == {new_fp}
    assert (tmp_path / "new" / "toolsets" / f"{new_fp}.json").is_file()
    expert = [t for t in migrated if t.policy == "expert"]
    sql_calls = [c for t in expert for s in t.steps for c in s.calls if c.name == "run_sql"]
    assert sql_calls and all(set(c.arguments) == {"sql"} for c in sql_calls)
    for t in expert:
        assert all(s.prompt_ids is None and s.completion_ids is None for s in t.steps)  # re-rendered by training
        raws = [m.raw for m in t.messages if m.role == "assistant"]
        assert raws == [s.raw for s in t.steps] and not any('"query"' in r for r in raws)
        assert t.outcome.correct and t.reward is not None
    saved = json.loads((tmp_path / "new" / "migration.json").read_text())
    assert saved["reverified"] == 26 and saved["dropped"] == {"no_task": 2}


def test_records_whose_results_no_longer_hold_are_dropped(old_store, renamed, tmp_path):
    root, tasks = old_store
    renamed(SqlThatAnswersDifferently)
    report = migrate_store(root / "store", tmp_path / "new", Migration.from_flags(rename_arg=["run_sql.query=sql"]),
                           {t.id: t for t in tasks})
    changed = [f for f in report.failures if f.reason == "result_changed"]
    assert changed and "(one row)" in changed[0].detail and report.reverified == 28 - len(changed)


def test_a_mapping_to_an_argument_the_tool_lacks_is_an_invalid_call(old_store, renamed, tmp_path):
    root, tasks = old_store
    renamed(SqlWithSqlArg)
    report = migrate_store(root / "store", tmp_path / "new", Migration.from_flags(rename_arg=["run_sql.query=q"]),
                           {t.id: t for t in tasks})
    assert report.reverified == 4 and report.dropped == {"invalid_call": 24}  # the 4 made no call


def test_changed_tools_without_a_mapping_are_refused_record_by_record(old_store, renamed, tmp_path):
    root, tasks = old_store
    renamed(SqlWithSqlArg)
    report = migrate_store(root / "store", tmp_path / "new", Migration(), {t.id: t for t in tasks})
    assert report.dropped == {"schema_changed": 28}


def test_a_store_from_before_toolsets_is_relabelled_with_its_token_ids(old_store, tmp_path):
    root, _ = old_store
    # A 0.1 store: fingerprints over the tools alone, no toolsets/ folder.
    current = env_toolset("sql")
    old = [t.model_copy(update={"toolset_fingerprint": current.tools_fingerprint,
                                "steps": [s.model_copy(update={"completion_ids": [1, 2]}) for s in t.steps]})
           for t in TrajectoryStore(root / "store").read()]
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "trajectories.jsonl").write_text("".join(t.model_dump_json() + "\n" for t in old))
    report = migrate_store(tmp_path / "old", tmp_path / "new")
    assert report.relabelled == 28 and report.fingerprints == {current.tools_fingerprint: current.fingerprint}
    kept = TrajectoryStore(tmp_path / "new").read()
    assert all(s.completion_ids == [1, 2] for t in kept for s in t.steps)


def test_cli_migrate_end_to_end(old_store, renamed, tmp_path):
    root, _ = old_store
    renamed(SqlWithSqlArg)
    res = CliRunner().invoke(app, ["migrate", str(root / "store"), "--tasks", str(root / "tasks.jsonl"),
                                   "--out", str(tmp_path / "new"), "--rename-arg", "run_sql.query=sql"])
    assert res.exit_code == 0, res.output
    assert "28 records: 0 relabelled (fingerprint only), 28 migrated, 28 re-verified, 0 dropped" in res.output
    again = CliRunner().invoke(app, ["migrate", str(root / "store"), "--out", str(tmp_path / "new")])
    assert again.exit_code == 2 and "is a trajectory store folder; write elsewhere" in again.output


def test_mapping_files_and_flags_agree(tmp_path):
    (tmp_path / "m.toml").write_text('[[tools]]\ntool = "run_sql"\nrename = "query_db"\n'
                                     'rename_args = { query = "sql" }\ndrop_args = ["explain"]\ndefaults = { limit = 50 }\n')
    from_file = Migration.read(tmp_path / "m.toml")
    from_flags = Migration.from_flags(rename_tool=["run_sql=query_db"], rename_arg=["run_sql.query=sql"],
                                      drop_arg=["run_sql.explain"], default=["run_sql.limit=50"])
    assert from_file == from_flags
    from trajforge.schema import ToolCall

    call = from_file.apply(ToolCall(name="run_sql", arguments={"query": "q", "explain": True}))
    assert call == ToolCall(name="query_db", arguments={"sql": "q", "limit": 50})
    with pytest.raises(ValueError, match="TOOL.OLD=NEW"):
        Migration.from_flags(rename_arg=["query=sql"])


def test_adapters_from_before_toolsets_get_the_new_fingerprint(tmp_path, renamed):
    current = env_toolset("sql")
    meta = tmp_path / "trajforge_adapter.json"
    meta.write_text(json.dumps({"recipe": "sft", "env": "sql", "toolset_fingerprint": current.tools_fingerprint}))
    assert migrate_adapter(tmp_path) == {"old": current.tools_fingerprint, "new": current.fingerprint, "env": "sql"}
    saved = json.loads(meta.read_text())
    assert saved["toolset_fingerprint"] == current.fingerprint and saved["migrated_from"] == current.tools_fingerprint
    renamed(SqlWithSqlArg)  # tools changed since: no relabelling makes the adapter fit
    with pytest.raises(ValueError, match="retrain"):
        migrate_adapter(tmp_path)


def test_an_adapter_trained_with_the_current_toolset_among_others_is_left_as_it_is(tmp_path):
    from trajforge.envs.toolsets import KNOWN

    current = env_toolset("sql")
    other = KNOWN.canonical(current.with_instructions("You are a careful analyst."))  # same tools
    fps = [other.fingerprint, current.fingerprint]  # the first is not the current one
    meta = {"recipe": "sft", "env": "sql", "toolset_fingerprint": fps[0], "toolset_fingerprints": fps}
    (tmp_path / "trajforge_adapter.json").write_text(json.dumps(meta))
    assert migrate_adapter(tmp_path) == {"old": fps[0], "new": fps[0], "env": "sql"}
    assert json.loads((tmp_path / "trajforge_adapter.json").read_text()) == meta  # both toolsets still accepted
