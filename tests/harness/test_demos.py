"""Retrieved demonstrations (harness/demos.py): BM25 finds the nearest paraphrase, deterministically;
a task never sees itself, its paraphrases or tools it is not shown; a pool holds one split's
solved tasks; episodes that show a block still parse and grade as without one, and a block shown
to held-out and test tasks holds none of theirs."""

from __future__ import annotations

import random

import pytest

from trajforge.grade import graded
from trajforge.harness import HarnessConfig, run_episodes
from trajforge.harness.demos import HEAD, TAIL, DemoPool, Demos, call_line, episode_demos, load_pool, without_block
from trajforge.policies import make_policy
from trajforge.schema import Message, ToolCall
from trajforge.store import TrajectoryStore
from trajforge.store.demos import open_pool
from trajforge.tasks import synthesize


@pytest.fixture(scope="module")
def tasks():
    return synthesize("sql", 40, seed=3).tasks


@pytest.fixture(scope="module")
def solved(tasks):
    """Graded expert episodes of every split."""
    return [graded(t) for t in run_episodes(tasks, make_policy("expert"))]


@pytest.fixture(scope="module")
def pool(solved):
    return DemoPool.from_trajectories(solved, split="train")


def _question(traj) -> str:
    return next(m.content for m in traj.messages if m.role == "user")


def _paraphrase(traj, task_id: str, question: str):
    """The same episode (same calls) under another task id and wording: a paraphrase of its task."""
    messages = [m.model_copy(update={"content": question}) if m.role == "user" else m for m in traj.messages]
    return traj.model_copy(update={"task_id": task_id, "messages": messages})


def test_the_nearest_paraphrase_is_found(tasks, pool):
    hamburg = next(t for t in tasks if t.split == "train" and "Hamburg" in t.prompt)
    found = pool.similar("How many of our customers are living in Hamburg?", 3)
    assert found[0].task_id == hamburg.id
    # Words shared by every question (Answer, with, a) weigh nearly nothing; the rare ones decide.
    price = pool.similar("Tell me the price of the Webcam.", 1)[0]
    assert "Webcam" in price.question and price.calls[0].startswith('run_sql(query="SELECT')


def test_retrieval_is_deterministic_whatever_the_order(solved, pool):
    shuffled = list(solved)
    random.Random(7).shuffle(shuffled)
    again = DemoPool.from_trajectories(shuffled, split="train")
    assert again.text() == pool.text() and again.sha256() == pool.sha256()
    q = "Which customers live in Lyon? Answer with a number."
    assert [e.task_id for e in again.similar(q, 5)] == [e.task_id for e in pool.similar(q, 5)]
    # Equal scores are ordered by task id: a question sharing no word with any entry.
    tied = pool.similar("zzz qqq", 4)
    assert [e.task_id for e in tied] == sorted(e.task_id for e in pool.entries)[:4]


def test_a_task_never_sees_itself_or_its_paraphrases(solved):
    train = [t for t in solved if t.split == "train"]
    own = train[0]
    para = _paraphrase(own, "para-1", "Reworded: " + _question(own))
    pool = DemoPool.from_trajectories([*train, para])
    everything = len(pool)
    by_id = pool.similar(_question(own), everything, task_id=own.task_id)
    ids = {e.task_id for e in by_id}
    assert own.task_id not in ids and "para-1" not in ids  # the paraphrase solves it by the same calls
    assert len(ids) == everything - 2
    # Without the id (a served request), the question itself identifies the task: the same block.
    assert pool.similar(_question(own), everything) == by_id
    # Another task's question leaves both in.
    other = pool.similar(_question(train[1]), everything, task_id=train[1].task_id)
    assert {own.task_id, "para-1"} <= {e.task_id for e in other}


def test_only_tasks_using_the_shown_tools_are_candidates(pool):
    narrow = pool.similar("How many customers?", len(pool), tools=["run_sql", "submit_answer"])
    assert narrow and all(set(e.tools) <= {"run_sql", "submit_answer"} for e in narrow)
    assert len(narrow) < len(pool.similar("How many customers?", len(pool)))


def test_a_pool_holds_the_solved_tasks_of_its_split_once(solved, tasks):
    train_ids = {t.id for t in tasks if t.split == "train"}
    pool = DemoPool.from_trajectories(solved, split="train")
    assert {e.task_id for e in pool.entries} == train_ids
    failed = solved[0].model_copy(update={"outcome": solved[0].outcome.model_copy(update={"tier": "failed"})})
    assert len(DemoPool.from_trajectories([failed])) == 0
    # Of two solving episodes of one task, the one with fewer calls.
    long = next(t for t in solved if len(t.steps) > 2)
    short = long.model_copy(update={"steps": long.steps[-2:]})
    (entry,) = DemoPool.from_trajectories([long, short]).entries
    assert len(entry.calls) == 2
    assert entry.calls == tuple(call_line(c) for s in long.steps[-2:] for c in s.calls)


def test_calls_render_compactly():
    call = ToolCall(name="run_sql", arguments={"query": 'SELECT "a" FROM t', "limit": 3})
    assert call_line(call) == 'run_sql(query="SELECT \\"a\\" FROM t", limit=3)'


def test_the_file_round_trips_and_a_changed_one_is_refused(pool, tmp_path):
    path = tmp_path / "demos.jsonl"
    sha = pool.write(path)
    assert load_pool(path, sha).text() == pool.text()
    path.write_text(path.read_text().replace("Hamburg", "Hamborg"))
    with pytest.raises(ValueError, match="changed after training"):
        load_pool(path, sha)


def test_showing_a_block_twice_changes_nothing(pool):
    demos = Demos(pool, 2)
    first = demos.show("How many customers live in Hamburg? Answer with a number.")
    assert first.startswith(HEAD) and TAIL in first
    assert demos.show(first) == first and without_block(first) == "How many customers live in Hamburg? Answer with a number."
    messages = [Message(role="system", content="tools"), Message(role="user", content=first)]
    assert demos.in_messages(messages) is messages


def test_a_pool_from_a_store_is_its_train_split(solved, tmp_path):
    store = TrajectoryStore(tmp_path / "store")
    for t in solved:
        store.append(t)
    assert open_pool(tmp_path / "store").text() == DemoPool.from_trajectories(solved, split="train").text()
    assert {e.split for e in open_pool(tmp_path / "store", split="test").entries} == {"test"}


def test_episodes_with_demos_grade_as_without_and_never_show_evaluated_tasks(tasks, solved, tmp_path):
    store = TrajectoryStore(tmp_path / "store")
    for t in solved:  # a store of every split: only its train split may reach a block
        store.append(t)
    path = tmp_path / "demos.jsonl"
    open_pool(tmp_path / "store").write(path)
    evaluated = [t for t in tasks if t.split in ("heldout", "test")]
    cfg = HarnessConfig(demos=3, demo_pool=str(path))
    with_demos = {t.task_id: graded(t) for t in run_episodes(evaluated, make_policy("expert"), cfg)}
    plain = {t.task_id: t for t in solved if t.task_id in with_demos}
    forbidden = [t.prompt for t in evaluated]
    for task in evaluated:
        traj = with_demos[task.id]
        opening = traj.messages[1].content
        assert opening.startswith(HEAD) and without_block(opening) == task.prompt
        block = opening[: -len(task.prompt)]
        assert block.count("Task: ") == 3
        assert not [p for p in forbidden if p in block], task.id
        assert not [t.id for t in evaluated if t.id in block]
        assert traj.outcome.tier == plain[task.id].outcome.tier == "success"
        assert [s.calls for s in traj.steps] == [s.calls for s in plain[task.id].steps]


def test_demos_come_from_the_adapter_unless_the_config_says_otherwise(pool, tmp_path):
    path = tmp_path / "demos.jsonl"
    sha = pool.write(path)

    class Adapted:  # what HFPolicy exposes for an adapter trained with demonstrations
        demos = {"pool": str(path), "sha256": sha, "k": 2}

    assert episode_demos(HarnessConfig(), Adapted()).k == 2
    assert episode_demos(HarnessConfig(demos=0), Adapted()) is None
    assert episode_demos(HarnessConfig(demos=4), Adapted()).k == 4
    assert episode_demos(HarnessConfig(), object()) is None
    with pytest.raises(ValueError, match="no pool"):
        episode_demos(HarnessConfig(demos=2), object())
    with pytest.raises(ValueError, match="--demos K"):
        episode_demos(HarnessConfig(demo_pool=str(path)), object())


def test_a_negative_number_of_demos_is_refused_not_sliced(pool, tmp_path):
    """``--demos -1`` used to show every pool task but one ([:-1]): a clear error instead."""
    path = tmp_path / "demos.jsonl"
    pool.write(path)
    with pytest.raises(ValueError, match="--demos must be 0 or more, not -1"):
        episode_demos(HarnessConfig(demos=-1, demo_pool=str(path)), object())
