"""Reworded train copies: the same verified plan and answer under another question, only in train,
never a held-out template's question, and kept by ``synth`` (whose dedup would drop a repeated plan)."""

from __future__ import annotations

import difflib
import re
import string

import pytest
from typer.testing import CliRunner

from trajforge.cli.main import app
from trajforge.envs.sql.rephrasings import REPHRASINGS, rephrase
from trajforge.envs.sql.tasks import TEMPLATES, generate_sql_exec_tasks
from trajforge.tasks import read_tasks, synthesize
from trajforge.tasks.rephrase import rephrased
from trajforge.tasks.verify import replay_reference


def _question(text: str) -> str:
    """A prompt's question without its answer-format sentence, lower case, slots kept."""
    return re.sub(r"\s*Answer with [^.?!]*[.?!]\s*$", "", text).casefold()


def test_every_seen_sql_template_has_wordings_over_its_own_slots_and_no_held_out_one_has_any():
    for template in TEMPLATES:
        wordings = REPHRASINGS.get(template.id, ())
        if template.heldout_only:
            assert not wordings, template.id
            continue
        assert len(wordings) >= 3, template.id
        for wording in wordings:
            slots = {name for _, name, _, _ in string.Formatter().parse(wording) if name}
            assert slots == set(template.slots), (template.id, wording)
            assert _question(wording) != _question(template.prompt)
    assert set(REPHRASINGS) <= {t.id for t in TEMPLATES}


def test_no_wording_asks_a_held_out_templates_question():
    held_out = [_question(t.prompt) for t in TEMPLATES if t.heldout_only]
    for template_id, wordings in REPHRASINGS.items():
        for wording in wordings:
            for question in held_out:
                ratio = difflib.SequenceMatcher(None, _question(wording), question).ratio()
                assert ratio < 0.8, (template_id, wording, question, ratio)


@pytest.fixture(scope="module")
def pool():
    return synthesize("sql", 80, seed=3)


def test_copies_are_train_only_with_their_own_stable_ids_and_the_same_verified_plan(pool):
    copies = rephrased(pool.tasks, copies=2)
    train = {t.id: t for t in pool.tasks if t.split == "train"}
    assert len(copies) == 2 * len(train)
    assert all(c.split == "train" for c in copies)
    ids = [c.id for c in copies]
    assert len(set(ids)) == len(ids) and not set(ids) & {t.id for t in pool.tasks}
    assert ids == [c.id for c in rephrased(pool.tasks, copies=2)]  # stable
    by_prompt = {}
    for task in train.values():
        mine = [c for c in copies if c.entities == task.entities and c.template == task.template]
        assert len({c.prompt for c in mine} | {task.prompt}) == 3  # two other wordings, both distinct
        for copy in mine:
            assert (copy.reference, copy.expected, copy.reasoning) == (task.reference, task.expected, task.reasoning)
            assert copy.prompt.endswith(task.prompt[task.prompt.index("Answer with"):])
        by_prompt.update({c.prompt: c for c in mine})
    for copy in list(by_prompt.values())[:12]:  # executed again: the plan still answers the copy
        assert replay_reference(copy).correct, copy.id


def test_copies_spread_over_a_templates_wordings(pool):
    copies = rephrased(pool.tasks, copies=1)
    product_price = {_question(c.prompt).split(" the ")[0] for c in copies if c.template == "product_price"}
    assert len(product_price) >= 2  # not every task's copy in the same wording


def test_synthesize_adds_copies_to_train_and_leaves_test_and_held_out_as_they_were():
    plain = synthesize("sql", 60, seed=1)
    more = synthesize("sql", 60, seed=1, rephrasings=1)
    for split in ("test", "heldout"):
        assert [t for t in more.tasks if t.split == split] == [t for t in plain.tasks if t.split == split]
    n_train = sum(t.split == "train" for t in plain.tasks)
    assert sum(t.split == "train" for t in more.tasks) == 2 * n_train
    assert [t.split for t in more.tasks] == sorted((t.split for t in more.tasks), key=["train", "test", "heldout"].index)


def test_a_template_without_wordings_gets_no_copy():
    task = synthesize("sql", 60, seed=1).tasks[0].model_copy(update={"template": "no_such_template"})
    assert rephrase(task, 0) is None
    assert rephrased([task]) == []
    with pytest.raises(ValueError, match="copies must be 0 or more"):
        rephrased([task], copies=-1)


def test_sql_exec_questions_get_wordings_without_an_answer_format():
    task = next(t for t in generate_sql_exec_tasks(30, seed=0).tasks if t.template in REPHRASINGS)
    assert "Answer with" not in task.prompt
    wording = rephrase(task, 0)
    assert wording and "Answer with" not in wording and wording != task.prompt


def test_synth_cli_writes_the_copies_its_dedup_would_drop(tmp_path):
    out = tmp_path / "tasks.jsonl"
    result = CliRunner().invoke(app, ["synth", "--env", "sql", "--n", "40", "--rephrasings", "1", "--out", str(out)])
    assert result.exit_code == 0, result.output
    tasks = read_tasks(out)
    train = [t for t in tasks if t.split == "train"]
    assert len(train) == 2 * sum(t.split == "train" for t in synthesize("sql", 40, 0).tasks)
    assert len({t.model_dump_json(include={'reference'}) for t in train}) == len(train) // 2
    bad = CliRunner().invoke(app, ["synth", "--env", "sql", "--n", "40", "--rephrasings", "-1",
                                   "--out", str(tmp_path / "x.jsonl")])
    assert bad.exit_code != 0 and "--rephrasings must be 0 or more" in bad.output
