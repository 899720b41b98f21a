"""Worlds: world 0 is what it always was, no world > 0 holds a held-out value or template, and every
world's tasks verify and are solved by the expert in the harness — for every environment with a
generator."""

from __future__ import annotations

import functools
import hashlib
import json
import sqlite3
from collections import Counter
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from trajforge.cli.main import app
from trajforge.envs import env_spec
from trajforge.envs.code.templates import TEMPLATES as CODE_TEMPLATES
from trajforge.envs.code.worlds import world_templates
from trajforge.envs.sql.env import SqlEnv
from trajforge.envs.sql.tasks import TEMPLATES as SQL_TEMPLATES
from trajforge.envs.sql.tasks import heldout_values as sql_heldout
from trajforge.envs.sql.tasks import generator as sql_generator
from trajforge.envs.sql.worlds import SCHEMA_WORLDS, retail_world, schema_world, world_db
from trajforge.envs.sqldb import ensure_db
from trajforge.envs.travel.cities import world_cities
from trajforge.envs.travel.tasks import TEMPLATES as TRAVEL_TEMPLATES
from trajforge.envs.travel.tasks import heldout_values as travel_heldout
from trajforge.envs.web.shop.catalog import build_catalog, world_names
from trajforge.envs.web.tasks import TEMPLATES as WEB_TEMPLATES
from trajforge.envs.web.tasks import heldout_values as web_heldout
from trajforge.harness import HarnessConfig, run_episodes
from trajforge.policies.expert import ExpertPolicy
from trajforge.schema import Task, ToolCall
from trajforge.tasks import read_tasks, synthesize
from trajforge.tasks.templates import TemplateGenerator, split_sizes
from trajforge.tasks.verify import replay_reference
from trajforge.tasks.worlds import across_worlds, world_shares

WORLDS = (1, 2, 3, 4, 5, 6)  # the demo trains on 1..6
"""The worlds whose vocabularies the leak tests read."""
POOL_WORLDS = 3
"""Pools drawn across worlds 0..2."""
SIZES = {"sql": 60, "sql-exec": 40, "travel": 40, "web": 30, "code": 16}
"""Pool sizes per environment: enough train tasks in worlds 1-2, small enough to run quickly
(the code sandbox runs each reference, the web site is browsed)."""


def _digest(tasks: list[Task]) -> str:
    rows = [[t.id, t.split, t.template, t.prompt, t.entities, t.expected,
             [c.model_dump() for c in t.reference]] for t in tasks]
    return hashlib.sha256(json.dumps(rows, sort_keys=True, default=str).encode()).hexdigest()


# ---- world 0 is today's -----------------------------------------------------------------------

GOLDEN = {
    ("sql", 40): "40544ca4214882401ad89bc95b3287b9ada96eb4f4b65a52b0909dbf37648455",
    ("travel", 20): "3ed4fb865d69716ee68c0224229da3be7558731652fc799c4b181f659bc456aa",
    ("web", 12): "65d957f74748b36e2d14d6cb133e462510686ddf742715ea5e7afb5cee3d95cc",
    ("code", 8): "de97f56f4931b5a1ff794ea93922ead6ef21ce2baaed79b21d2b7f2db9da7eef",
}
"""Ids, splits, prompts, entities, expected values and references of ``synthesize(env, n, 0)``,
recorded before worlds existed (the expert's words and stamps are left out: other changes own
them). Code's was re-recorded when its prompts' example became a visible case, never a held-out
one (f4f5d06c... before; ids, tests and references unchanged)."""
SQL_DB_DUMP = "d0e8ea3349f7c952b0856df58014b689ae883691dc0db2f0f744afe7b624f42f"
"""SHA-256 of ``iterdump()`` of ``retail-0.sqlite``, recorded before worlds existed."""


def test_world_zero_database_is_the_one_it_always_was():
    path = world_db(0, 0)
    assert path == ensure_db(0) and path.name == "retail-0.sqlite"
    with sqlite3.connect(path) as conn:
        assert hashlib.sha256("\n".join(conn.iterdump()).encode()).hexdigest() == SQL_DB_DUMP
    assert world_db(0, 1).name == "retail-0-w1.sqlite"


@pytest.mark.parametrize("env,n", list(GOLDEN))
def test_world_zero_tasks_are_the_ones_they_always_were(env, n):
    plain = synthesize(env, n, 0)
    assert _digest(plain.tasks) == GOLDEN[(env, n)]
    if env in ("sql", "travel"):  # cheap to draw twice; worlds=1 is the same path everywhere
        assert synthesize(env, n, 0, worlds=1) == plain
    assert {t.world for t in plain.tasks} == {0}


def test_world_zero_records_are_written_as_before_and_world_reads_back(tmp_path):
    from trajforge.tasks import write_tasks

    task = synthesize("sql", 8, 0).tasks[0]
    assert "world" not in json.loads(task.model_dump_json())  # a world-0 pool is byte-identical
    moved = task.model_copy(update={"world": 2, "id": task.id + "-w2"})  # a pool holds an id once
    assert json.loads(moved.model_dump_json())["world"] == 2
    write_tasks(tmp_path / "p.jsonl", [task, moved])
    assert [t.world for t in read_tasks(tmp_path / "p.jsonl")] == [0, 2]


# ---- pools across worlds ----------------------------------------------------------------------

def test_every_builtin_generator_has_worlds_and_is_checked_here():
    from trajforge.envs.registry import BUILTINS

    generating = {name for name in BUILTINS if env_spec(name).generate is not None}
    assert generating == set(SIZES)
    assert all(env_spec(name).world_generator is not None for name in generating)


@functools.cache
def _pool(env: str):
    """``env``'s pool across worlds 0..2, drawn once per session (each test pays for its own env)."""
    return synthesize(env, SIZES[env], 0, worlds=POOL_WORLDS)


def test_world_shares_spread_train_and_world_zero_takes_the_rest():
    assert world_shares(182, 4) == [47, 45, 45, 45]
    assert world_shares(10, 1) == [10]
    assert world_shares(182, 4, world_train=61) == [182, 61, 61, 61]
    with pytest.raises(ValueError):
        world_shares(10, 0)
    with pytest.raises(ValueError):
        world_shares(10, 2, world_train=-1)


def test_world_train_keeps_world_zero_whole_and_adds_each_world_on_top():
    """``world_train``: world 0's pool is exactly the plain one (same ids, splits and order), so
    held-out and test are what they are without worlds, and each other world adds train tasks."""
    plain = synthesize("sql", 60, 0)
    added = synthesize("sql", 60, 0, worlds=3, world_train=7)
    assert [t.id for t in added.tasks if t.world == 0] == [t.id for t in plain.tasks]
    assert Counter(t.world for t in added.tasks if t.world) == {1: 7, 2: 7}
    assert {t.split for t in added.tasks if t.world} == {"train"}
    with pytest.raises(ValueError, match="worlds > 1"):
        synthesize("sql", 60, 0, world_train=7)


def _renaming_generator(world: int) -> TemplateGenerator:
    """One template ``k`` in 0..9 (held out: 100..109) whose worlds, like code's, rename the
    wording and the plan (``f<world>``) but keep the template and its entities."""
    def build(t, e, split):
        name = f"f{world}"
        return Task(id=f"x-{name}-{e['k']}", env="sql", prompt=f"Write {name} returning {e['k']}.",
                    tier="easy", split=split, template=t.id, entities=e, world=world, expected=e["k"],
                    reference=(ToolCall(name="submit_answer", arguments={"answer": f"{name}:{e['k']}"}),))

    return TemplateGenerator(
        templates=[SimpleNamespace(id="t", heldout_only=False)],
        draw=lambda t, rng, heldout: {"k": rng.randrange(10) + (100 if heldout else 0)},
        task_id=lambda t, e: f"x-f{world}-{e['k']}", build=build, space=lambda t, heldout: 10)


def test_a_world_that_only_renames_never_trains_on_a_test_instance():
    """World 0's train (7) and test (3) use all 10 seen values: world 1 may repeat the 7 train
    instances renamed (code's worlds do), never the 3 test ones."""
    report = across_worlds(_renaming_generator, 20, 0, worlds=2)
    measured = {t.entities["k"] for t in report.tasks if t.split == "test"}
    renamed = [t.entities["k"] for t in report.tasks if t.world == 1]
    assert len(measured) == 3 and len(renamed) == 7
    assert not measured & set(renamed)
    assert report.dropped["duplicate"] >= 3


@pytest.mark.parametrize("env", list(SIZES))
def test_train_spans_the_worlds_and_test_heldout_stay_in_world_zero(env):
    report = _pool(env)
    sizes = split_sizes(SIZES[env])
    by = Counter((t.split, t.world) for t in report.tasks)
    assert {s for s, w in by if w} == {"train"}
    assert {w for s, w in by if s == "train"} == set(range(POOL_WORLDS))
    assert sum(by[("train", w)] for w in range(POOL_WORLDS)) == sizes["train"]
    assert by[("test", 0)] == sizes["test"] and by[("heldout", 0)] == sizes["heldout"]
    assert len({t.id for t in report.tasks}) == len(report.tasks)
    # The test split's questions never reappear, word for word, in another world's training.
    test_prompts = {t.prompt for t in report.tasks if t.split == "test"}
    assert not [t.id for t in report.tasks if t.world and t.prompt in test_prompts]


# ---- no leak ------------------------------------------------------------------------------------

def _banned(env: str) -> set[str]:
    """Every held-out value of ``env`` (its own ``heldout_values``), casefolded."""
    held = {"sql": sql_heldout, "sql-exec": sql_heldout, "travel": travel_heldout,
            "web": web_heldout}[env]()
    return {v.casefold() for v in held}


def _world_vocabulary(env: str, world: int) -> set[str]:
    """Every name world ``world`` of ``env`` is built from."""
    if env == "sql":
        w = retail_world(world)
        return {*w.cities, *w.countries, *w.categories, *w.products}
    if env == "travel":
        return {c.name for c in world_cities(world)} | {c.code for c in world_cities(world)}
    names = world_names(world)
    catalog = build_catalog(0, world)
    return {*catalog.categories, *names.brands, *names.models, *names.classes,
            *(p.name for p in catalog.products), *(c.name for c in catalog.classes)}


@pytest.mark.parametrize("env", ["sql", "travel", "web"])
@pytest.mark.parametrize("world", WORLDS)
def test_no_world_draws_a_heldout_name_even_as_a_substring(env, world):
    banned = _banned(env)
    vocabulary = {v.casefold() for v in _world_vocabulary(env, world)}
    assert not [(v, b) for v in vocabulary for b in banned if b in v]
    assert vocabulary != {v.casefold() for v in _world_vocabulary(env, 0)}  # it was renamed


def test_code_worlds_rename_functions_and_keep_every_parameter_partition():
    for world in WORLDS:
        renamed = world_templates(world)
        assert [t.id for t in renamed] == [t.id for t in CODE_TEMPLATES]
        assert [t.params for t in renamed] == [t.params for t in CODE_TEMPLATES]
        assert all(t.function in t.solution for t in renamed)
    assert {t.function for t in world_templates(1)} != {t.function for t in CODE_TEMPLATES}


HELDOUT_ONLY = {env: {t.id for t in templates if t.heldout_only} for env, templates in (
    ("sql", SQL_TEMPLATES), ("sql-exec", SQL_TEMPLATES), ("travel", TRAVEL_TEMPLATES), ("web", WEB_TEMPLATES),
    ("code", CODE_TEMPLATES))}


@pytest.mark.parametrize("env", list(SIZES))
def test_no_heldout_value_or_template_in_any_training_world(env):
    trained = [t for t in _pool(env).tasks if t.world]
    assert trained and not [t.id for t in trained if t.template in HELDOUT_ONLY[env]]
    if env == "code":  # its held-out axis is the parameter values
        params = {t.id: {p.name: p for p in t.params} for t in CODE_TEMPLATES}
        for task in trained:
            spec = params[task.template]
            for name, value in task.entities.items():
                seen = [json.loads(json.dumps(v)) for v in spec[name].seen]
                held = [json.loads(json.dumps(v)) for v in spec[name].heldout]
                assert value in seen and value not in held, (task.id, name, value)
        return
    banned = _banned(env)
    for task in trained:
        text = (task.prompt + json.dumps(task.entities) + json.dumps(task.expected)).casefold()
        assert not [b for b in banned if b in text], task.id


# ---- every world's tasks verify and are solved --------------------------------------------------

def _some_world_tasks(env: str, k: int = 6) -> list[Task]:
    tasks = [t for t in _pool(env).tasks if t.world in (1, 2)]
    return tasks[::max(1, len(tasks) // k)][:k]


@pytest.mark.parametrize("env", list(SIZES))
def test_every_world_task_replays_and_the_expert_solves_it_in_the_harness(env):
    tasks = _some_world_tasks(env)
    assert {t.world for t in tasks} == {1, 2}
    assert all(replay_reference(t).correct for t in tasks)
    trajs = run_episodes(tasks, ExpertPolicy(), HarnessConfig(max_turns=20))
    assert [t.verdict.correct for t in trajs] == [True] * len(tasks), \
        [t.verdict.detail for t in trajs if not t.verdict.correct]


def test_sql_worlds_keep_world_zero_schema_and_schema_worlds_rename_it():
    """``synth --worlds`` draws vocabulary worlds (world 0's tables and columns: what a small model
    can learn from, README "Worlds"); ``schema_world(k)`` has world k's names and renames the schema."""
    vocabulary, renamed = retail_world(1), retail_world(schema_world(1))
    assert not vocabulary.tables and not vocabulary.columns
    assert (renamed.cities, renamed.catalog) == (vocabulary.cities, vocabulary.catalog)
    assert renamed.tables and renamed.columns and renamed.number == SCHEMA_WORLDS + 1
    with sqlite3.connect(world_db(0, 1)) as conn:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert tables == {"customers", "products", "orders", "order_items"}
    for bad in (-1, SCHEMA_WORLDS):
        with pytest.raises(ValueError):
            retail_world(bad)
    with pytest.raises(ValueError):
        schema_world(0)  # world 0's vocabulary holds the held-out names


@functools.cache
def _schema_pool():
    """A SQL pool whose worlds 1-2 are schema worlds."""
    return across_worlds(lambda w: sql_generator(0, schema_world(w) if w else 0), SIZES["sql"], 0, POOL_WORLDS)


def test_sql_schema_world_renames_tables_and_columns_in_the_database_and_the_references():
    names = retail_world(schema_world(1))
    assert names.tables and names.columns
    task = next(t for t in _schema_pool().tasks if t.world == schema_world(1) and t.reference[0].name == "list_tables")
    env = SqlEnv()
    try:
        env.reset(task)
        listed = env.execute(task.reference[0]).content
        assert set(listed.split(", ")) == {names.tables.get(t, t) for t in
                                           ("customers", "products", "orders", "order_items")}
        described = task.reference[1].arguments["table"]
        assert described in listed and env.execute(task.reference[1]).ok
    finally:
        env.close()
    queries = " ".join(c.arguments["query"] for c in task.reference if c.name == "run_sql")
    old = [t for t in names.tables if f" {t} " in f" {queries} "]
    assert not old, old  # the reference SQL names this world's tables
    template = next(t for t in SQL_TEMPLATES if t.id == task.template)
    assert task.prompt == template.prompt.format(**task.entities)  # the question keeps its words
    assert any(names.tables.get(template.describe, "") in w for w in task.reasoning)


def test_a_world_without_worlds_is_refused():
    from trajforge.envs import EnvSpec, register, unregister
    from trajforge.envs.sql.env import SqlEnv as Env

    register(EnvSpec(name="flat-test", env=Env, generate=lambda n, seed: synthesize("sql", n, seed)))
    try:
        with pytest.raises(ValueError, match="no worlds"):
            synthesize("flat-test", 10, 0, worlds=2)
        assert env_spec("flat-test").world_generator is None
    finally:
        unregister("flat-test")


def test_synth_worlds_on_the_command_line(tmp_path):
    out = tmp_path / "tasks.jsonl"
    result = CliRunner().invoke(app, ["synth", "--env", "sql", "--n", "40", "--worlds", "3",
                                      "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "train tasks per world: {0: 10, 1: 9, 2: 9}" in result.output
    tasks = read_tasks(out)
    assert len(tasks) == 40 and {t.world for t in tasks if t.split != "train"} == {0}
    bad = CliRunner().invoke(app, ["synth", "--env", "sql", "--n", "40", "--worlds", "0",
                                   "--out", str(out)])
    assert bad.exit_code == 2 and "--worlds" in bad.output
    added = CliRunner().invoke(app, ["synth", "--env", "sql", "--n", "40", "--worlds", "3", "--world-train", "5",
                                     "--out", str(out)])
    assert added.exit_code == 0, added.output
    assert "train tasks per world: {0: 28, 1: 5, 2: 5}" in added.output
    alone = CliRunner().invoke(app, ["synth", "--env", "sql", "--n", "40", "--world-train", "5", "--out", str(out)])
    assert alone.exit_code == 2 and "--world-train" in alone.output
