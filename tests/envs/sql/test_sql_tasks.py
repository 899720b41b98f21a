"""SQL task generation: tiers, splits, held-out isolation, executed references, drops, JSONL."""

from __future__ import annotations

import dataclasses
import json
from collections import Counter

import pytest

import trajforge.envs.sql.tasks as sqltasks
from trajforge.schema import Task
from trajforge.tasks import read_tasks, synthesize, write_tasks
from trajforge.envs.sql.tasks import (
    TEMPLATES,
    TEMPLATES_BY_ID,
    entity_values,
    generate_sql_tasks,
    heldout_values,
    reasoning_for,
)
from trajforge.tasks.templates import split_sizes
from trajforge.tasks.verify import replay_reference

HELDOUT_ONLY = {t.id for t in TEMPLATES if t.heldout_only}


@pytest.fixture(scope="module", autouse=True)
def _cache_home(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TRAJFORGE_HOME", str(tmp_path_factory.mktemp("tfhome")))
        yield


@pytest.fixture(scope="module")
def report():
    return generate_sql_tasks(160, seed=3)


def test_template_catalogue():
    tiers = Counter(t.tier for t in TEMPLATES if not t.heldout_only)
    assert tiers["easy"] >= 4 and tiers["medium"] >= 4 and tiers["hard"] >= 3
    assert {TEMPLATES_BY_ID[t].tier for t in HELDOUT_ONLY} >= {"easy", "medium"}
    assert sum(t.answer == "list" for t in TEMPLATES) <= 1
    for t in TEMPLATES:
        n_calls = len(t.schema_calls) + len(t.sql) + 1
        assert len(t.reasoning) == n_calls, t.id
        assert t.prompt.count("?") == 1 and "Answer with" in t.prompt


def test_sizes_tiers_and_splits(report):
    assert len(report.tasks) == 160
    assert Counter(t.split for t in report.tasks) == split_sizes(160)
    assert {t.tier for t in report.tasks} == {"easy", "medium", "hard"}
    for split in ("train", "test", "heldout"):
        assert {t.tier for t in report.tasks if t.split == split} == {"easy", "medium", "hard"}
    ids = [t.id for t in report.tasks]
    assert len(ids) == len(set(ids))
    assert all(t.id.startswith(f"sql-{t.template}-") for t in report.tasks)


def test_split_sizes_are_deterministic():
    assert split_sizes(100) == {"train": 70, "test": 15, "heldout": 15}
    assert sum(split_sizes(33).values()) == 33


def test_every_reference_replays_correctly(report):
    for task in report.tasks:
        verdict = replay_reference(task)
        assert verdict.correct, (task.id, verdict.detail)
        assert "found_answer" in verdict.milestones
        names = [c.name for c in task.reference]
        assert names[-1] == "submit_answer" and "run_sql" in names
        if task.tier == "hard":
            assert names[:2] == ["list_tables", "describe_table"]
        else:
            assert names == ["run_sql", "submit_answer"]
        assert isinstance(task.expected, (int, float, str, list))


def test_heldout_entities_and_templates_stay_out_of_train_and_test(report):
    banned = {v.casefold() for v in heldout_values()}
    for task in report.tasks:
        if task.split == "heldout":
            assert set(task.entities.values()) <= heldout_values(), task.id
        else:
            assert task.template not in HELDOUT_ONLY
            text = (task.prompt + json.dumps(task.expected)).casefold()
            assert not [b for b in banned if b in text], task.id
    heldout_templates = {t.template for t in report.tasks if t.split == "heldout"}
    assert HELDOUT_ONLY <= heldout_templates and heldout_templates - HELDOUT_ONLY


def test_vocabulary_partitions_do_not_overlap_as_substrings():
    # A held-out name inside a seen name ("Toy" in "Toys") would leak through prompts.
    kinds = ("city", "country", "category", "product")
    seen = [v.casefold() for k in kinds for v in entity_values(k, heldout=False)]
    held = [v.casefold() for k in kinds for v in entity_values(k, heldout=True)]
    assert not [(h, s) for h in held for s in seen if h in s or s in h]
    assert not [v for v in seen + held if set(v) & set("',;") or " and " in v]


def test_train_and_test_share_no_instance(report):
    train = {t.id for t in report.tasks if t.split == "train"}
    test = {t.id for t in report.tasks if t.split == "test"}
    assert train and test and not train & test


def test_same_seed_same_pool():
    a, b = generate_sql_tasks(40, seed=9), generate_sql_tasks(40, seed=9)
    assert [t.model_dump() for t in a.tasks] == [t.model_dump() for t in b.tasks]
    assert a.dropped == b.dropped
    assert {t.id for t in generate_sql_tasks(40, seed=10).tasks} != {t.id for t in a.tasks}


def test_drops_are_counted_by_reason(monkeypatch):
    base = TEMPLATES_BY_ID["customers_in_city"]
    broken = (
        dataclasses.replace(base, id="bad_sql", sql=("SELECT COUNT(*) FROM no_such_table",)),
        dataclasses.replace(base, id="empty", answer="name",
                            sql=("SELECT name FROM customers WHERE city = '{city}' AND 0",)),
        dataclasses.replace(base, id="rejected", answer="list",
                            sql=("SELECT 'Salt and Pepper' FROM customers "
                                 "WHERE city = '{city}' LIMIT 1",)),
        dataclasses.replace(base, id="not_a_number",
                            sql=("SELECT name FROM customers WHERE city = '{city}'",)),
    )
    monkeypatch.setattr(sqltasks, "TEMPLATES", broken)
    report = generate_sql_tasks(20, seed=0)
    n_seen, n_held = len(entity_values("city", False)), len(entity_values("city", True))
    assert report.tasks == []
    assert report.dropped["reference_error"] == 2 * (n_seen + n_held)
    assert report.dropped["empty_result"] == n_seen + n_held
    assert report.dropped["verifier_rejected"] == n_seen + n_held
    assert report.dropped["duplicate"] > 0 and report.dropped["unfilled"] == 20


def test_small_space_deduplicates_and_stops():
    report = generate_sql_tasks(2000, seed=1)  # far more than the template space holds
    assert report.dropped["duplicate"] > 0 and report.dropped["unfilled"] > 0
    assert len({t.id for t in report.tasks}) == len(report.tasks)
    counts = Counter(t.split for t in report.tasks)
    assert counts["train"] > counts["test"] > 0 and counts["heldout"] > 0


def test_reasoning_for_each_call(report):
    lines = set()
    for task in report.tasks:
        for i in range(len(task.reference)):
            line = reasoning_for(task, i)
            assert line.endswith(".") and "{" not in line and len(line) < 120
            lines.add(line)
        assert str(task.reference[-1].arguments["answer"]) in reasoning_for(
            task, len(task.reference) - 1)
    assert len(lines) > len(TEMPLATES)
    with pytest.raises(IndexError):
        reasoning_for(report.tasks[0], len(report.tasks[0].reference))


def test_jsonl_roundtrip(tmp_path, report):
    path = write_tasks(tmp_path / "pool" / "sql.jsonl", report.tasks)
    back = read_tasks(path)
    assert back == report.tasks and isinstance(back[0], Task)
    assert isinstance(back[0].reference, tuple)


def test_read_tasks_names_file_and_line(tmp_path, report):
    path = tmp_path / "bad.jsonl"
    path.write_text(report.tasks[0].model_dump_json() + "\n\n{\"id\": 3}\n")
    with pytest.raises(ValueError, match=r"bad\.jsonl:3: invalid task"):
        read_tasks(path)


def test_synthesize_dispatches():
    assert len(synthesize("sql", 10, seed=0).tasks) == 10
    with pytest.raises(ValueError, match="no task generator for environment 'nope'"):
        synthesize("nope", 10, seed=0)


def test_ties_and_heldout_answers_are_dropped(monkeypatch):
    base = TEMPLATES_BY_ID["customers_in_city"]
    templates = (
        # Every row ranks equal: the top-1 answer is ambiguous.
        dataclasses.replace(base, id="tied", answer="name", unique_top=True,
                            sql=("SELECT name, 1 AS k FROM customers WHERE city = '{city}' "
                                 "ORDER BY k DESC LIMIT 1",)),
        # The answer is a held-out city: fine in heldout, a leak anywhere else.
        dataclasses.replace(base, id="leaky", answer="name",
                            sql=("SELECT 'Lisbon' FROM customers WHERE city = '{city}' LIMIT 1",)),
    )
    monkeypatch.setattr(sqltasks, "TEMPLATES", templates)
    report = generate_sql_tasks(20, seed=0)
    n_seen, n_held = len(entity_values("city", False)), len(entity_values("city", True))
    assert report.dropped["ambiguous_answer"] == n_seen + n_held
    assert report.dropped["heldout_leak"] == n_seen
    assert {t.split for t in report.tasks} == {"heldout"} and len(report.tasks) == 3


def _skeleton(sql: str) -> str:
    """A query's structure: lower case, one space between tokens, the slots left as slots."""
    return " ".join(sql.lower().replace("(", " ( ").replace(")", " ) ").replace(",", " , ").split())


def test_compose_never_holds_a_heldout_structure():
    # The compose templates fill in the grids the held-out-only templates sit in; the held-out
    # cells themselves (a product's stock by name, units over city x category) must stay unseen,
    # or the held-out split would test recall of a trained query.
    held = {_skeleton(q) for t in TEMPLATES if t.heldout_only for q in t.sql}
    seen = {_skeleton(q) for t in (*TEMPLATES, *sqltasks.COMPOSE_TEMPLATES) if not t.heldout_only
            for q in t.sql}
    assert held and not held & seen
    assert not {t.id for t in sqltasks.COMPOSE_TEMPLATES} & {t.id for t in TEMPLATES}
    assert not any(t.heldout_only for t in sqltasks.COMPOSE_TEMPLATES)
    # and a compose query that did read a held-out cell is caught by the check above
    stock = sqltasks.TEMPLATES_BY_ID["product_stock"]
    assert _skeleton(stock.sql[0]) in held
    assert _skeleton("SELECT stock FROM products  WHERE name = '{product}'") in held


def test_compose_tasks_are_verified_train_and_test_with_seen_entities_only():
    report = sqltasks.generate_compose_tasks(30, seed=1, test=6)
    assert Counter(t.split for t in report.tasks) == {"train": 30, "test": 6}
    assert {t.template for t in report.tasks} == {t.id for t in sqltasks.COMPOSE_TEMPLATES}
    banned = {v.casefold() for v in heldout_values()}
    for task in report.tasks:
        assert replay_reference(task).correct, task.id
        text = (task.prompt + json.dumps(task.expected)).casefold()
        assert not [b for b in banned if b in text], task.id
        assert len(task.reasoning) == len(task.reference)
        assert "{" not in "".join(task.reasoning), task.reasoning
    pool = {t.id for t in generate_sql_tasks(260, seed=1).tasks}
    assert not pool & {t.id for t in report.tasks}
    assert sqltasks.generate_compose_tasks(0).tasks == []


def test_compose_reasoning_names_the_column_its_query_filters_on():
    # A product and a category are both bare names in a question ("units of the Plush Bear",
    # "units of Toys products"); the expert's first sentence says which one it is and so which
    # column the query filters, the step the held-out product_stock question turns on.
    # slot: (how the sentence opens, the column the query filters on)
    kinds = {"category": ("{} is a category", "category"), "product": ("The {} is a product", "name")}
    for task in sqltasks.generate_compose_tasks(40, seed=3).tasks:
        slots = [s for s in kinds if s in task.entities]
        if not slots:  # the city-only templates name a city, which the question says outright
            continue
        (slot,) = slots
        name, (opening, column) = task.entities[slot], kinds[slot]
        first, query = task.reasoning[0], task.reference[0].arguments["query"]
        assert first.startswith(opening.format(name)), first
        assert f"{column} = '{name}'" in query, query
        assert f"{column} is '{name}'" in first, first


def test_synthesize_adds_compose_tasks_to_train_only(tmp_path):
    from typer.testing import CliRunner

    from trajforge.cli.main import app

    plain, more = synthesize("sql", 60, seed=2), synthesize("sql", 60, seed=2, compose=12)
    compose_ids = {t.id for t in sqltasks.COMPOSE_TEMPLATES}
    added = [t for t in more.tasks if t.template in compose_ids]
    assert len(added) == 12 and {t.split for t in added} == {"train"}
    assert [t for t in more.tasks if t.template not in compose_ids] == plain.tasks
    splits = [t.split for t in more.tasks]
    assert splits == sorted(splits, key=["train", "test", "heldout"].index)  # still grouped
    with pytest.raises(ValueError, match="has no composition templates"):
        synthesize("web", 20, compose=3)
    out = tmp_path / "tasks.jsonl"
    result = CliRunner().invoke(app, ["synth", "--env", "sql", "--n", "60", "--seed", "2", "--compose", "12",
                                      "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert {t.template for t in read_tasks(out)} & compose_ids
    bad = CliRunner().invoke(app, ["synth", "--env", "sql", "--compose", "-1", "--out", str(tmp_path / "x.jsonl")])
    assert bad.exit_code != 0 and "--compose must be 0 or more" in bad.output
    bad = CliRunner().invoke(app, ["synth", "--env", "web", "--compose", "2", "--out", str(tmp_path / "y.jsonl")])
    assert bad.exit_code != 0 and "no composition templates" in bad.output
    two = ["category_stock_total", "product_category"]
    chosen = synthesize("sql", 60, seed=2, compose=8, compose_templates=two)
    with pytest.raises(ValueError, match="give compose > 0 with it"):
        synthesize("sql", 60, seed=2, compose_templates=two)
    assert {t.template for t in chosen.tasks if t.template in compose_ids} == set(two)
    out = tmp_path / "two.jsonl"
    result = CliRunner().invoke(app, ["synth", "--env", "sql", "--n", "60", "--compose", "8", "--out", str(out),
                                      *(a for t in two for a in ("--compose-templates", t))])
    assert result.exit_code == 0, result.output
    assert {t.template for t in read_tasks(out) if t.template in compose_ids} == set(two)
    bad = CliRunner().invoke(app, ["synth", "--env", "sql", "--compose-templates", "product_category",
                                   "--out", str(tmp_path / "z.jsonl")])
    assert bad.exit_code != 0 and "give --compose N with it" in bad.output
    bad = CliRunner().invoke(app, ["synth", "--env", "sql", "--compose", "2", "--compose-templates", "nope",
                                   "--out", str(tmp_path / "w.jsonl")])
    assert bad.exit_code != 0 and "no compose templates ['nope']" in bad.output
