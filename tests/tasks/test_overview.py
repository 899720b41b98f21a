"""Planning text sized to the task (issue 13 item 7): on medium and hard tasks the expert first says
which tables or pages the answer needs and why; on easy ones it says one short sentence per call."""

import re

import pytest

from trajforge.envs.sql.tasks import TEMPLATES as SQL_TEMPLATES
from trajforge.envs.sqldb import SCHEMA
from trajforge.envs.web.templates import TEMPLATES as WEB_TEMPLATES
from trajforge.tasks import synthesize

TABLES = re.findall(r"CREATE TABLE (\w+)", SCHEMA)


def _sentences(text: str) -> int:
    return len(re.findall(r"[.!?](?:\s|$)", text))


@pytest.mark.parametrize("templates", [SQL_TEMPLATES, WEB_TEMPLATES], ids=["sql", "web"])
def test_every_medium_and_hard_template_has_an_overview_and_no_easy_one(templates):
    for t in templates:
        assert bool(t.overview) == (t.tier != "easy"), t.id


def _tables_named(text: str, names: set[str]) -> set[str]:
    return {n for n in names if re.search(rf"\b{re.escape(n)}\b", text)}


@pytest.mark.parametrize("worlds", [1, 3])
def test_sql_overviews_name_the_tables_of_the_query_in_the_tasks_world(worlds):
    from trajforge.envs.sql.worlds import retail_world

    tasks = synthesize("sql", 120, 0, worlds=worlds).tasks
    assert {t.tier for t in tasks} == {"easy", "medium", "hard"}
    for t in tasks:
        first = t.reasoning[0]
        if t.tier == "easy":
            assert _sentences(first) == 1 and len(first.split()) <= 16, (t.template, first)
            continue
        assert _sentences(first) >= 2, (t.template, first)
        world = retail_world(t.world)
        names = {world.tables.get(n, n) for n in TABLES}
        query = next(c.arguments["query"] for c in t.reference if c.name == "run_sql")
        used = _tables_named(query, names)
        # Medium: every table the query reads; hard: at least one (the rest it discovers).
        said = _tables_named(" ".join(t.reasoning[:2]), names)
        assert (used <= said) if t.tier == "medium" else bool(used & said), (t.template, t.world, first)
        stale = set(TABLES) - names  # world 0's names of renamed tables never leak into the words
        assert not _tables_named(" ".join(t.reasoning), stale), (t.template, t.world, first)


def test_web_overviews_name_the_page_the_task_goes_to():
    tasks = synthesize("web", 40, 0).tasks
    assert {t.tier for t in tasks} == {"easy", "medium", "hard"}
    for t in tasks:
        first = t.reasoning[0]
        if t.tier == "easy":
            assert _sentences(first) == 1, (t.template, first)
            continue
        assert _sentences(first) >= 2, (t.template, first)
        pages = [t.entities[k] for k in ("category", "product", "class") if k in t.entities]
        assert any(p in first for p in pages), (t.template, first)  # a listing, a product or a class page
