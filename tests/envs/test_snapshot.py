"""snapshot()/restore() rewind an environment to an earlier point of the episode."""

from trajforge.envs import make_env
from trajforge.schema import Task, ToolCall


def _task() -> Task:
    return Task(id="t", env="sql", prompt="How many customers?", tier="easy", split="train",
                template="t", reference=(), expected="3", seed=0)


def test_sql_restore_undoes_a_submission_and_milestones():
    env = make_env("sql")
    env.reset(_task())
    env.execute(ToolCall(name="list_tables", arguments={}))
    env.execute(ToolCall(name="run_sql", arguments={"query": "SELECT 7"}))  # else the submission is refused
    snap = env.snapshot()
    env.execute(ToolCall(name="submit_answer", arguments={"answer": "7"}))
    assert env.done and env.answer == "7"
    env.restore(snap)
    assert not env.done and env.answer is None
    assert env.milestones == snap["milestones"]
    # The snapshot is a copy: mutating the env after restore does not change it.
    env.execute(ToolCall(name="submit_answer", arguments={"answer": "8"}))
    env.restore(snap)
    assert env.answer is None and "submitted" not in env.milestones
    env.close()
