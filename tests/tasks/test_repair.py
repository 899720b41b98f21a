"""Self-repair demonstrations: a realistic mistake executed for real, then the reference; every
environment; graded recovered; mistakes drawn from a policy's own measured failures."""

from __future__ import annotations

import functools
import json
import time
from collections import Counter

import pytest

from trajforge.envs import env_spec
from trajforge.grade import graded
from trajforge.harness import run_episodes
from trajforge.policies.base import Generation
from trajforge.policies.repair import RepairPolicy
from trajforge.policies.scripted import ScriptedPolicy
from trajforge.schema import Mistake, Trajectory
from trajforge.tasks import synthesize
from trajforge.tasks.repair import LEADING_KINDS, REASON_KINDS, Measured, Planner, generic_mistakes, measured_mistakes

from tests.envs.mcp.test_mcp import kv_task, write_env

ENV_KINDS = {
    "sql": {"wrong_table", "wrong_column", "misplaced_column", "collapsed_join", "wrong_entity", "nearest_template", "intermediate",
            "premature_answer"},
    "travel": {"sold_out", "wrong_entity", "bad_date", "nearest_template", "intermediate", "extra_args"},
    "web": {"wrong_entity", "bad_url", "intermediate"},
    "code": {"wrong_solution", "intermediate", "bad_path"},
}
GENERIC = {"malformed", "wrong_tool", "bad_args"}


POOL_SIZE = {"sql": 40, "travel": 40, "web": 16, "code": 8}
"""Tasks synthesized per environment (web and code verify every task in a browser session or the
sandbox, so they get fewer)."""


@functools.lru_cache(maxsize=None)
def train_pool(env: str) -> tuple:
    return tuple(t for t in synthesize(env, n=POOL_SIZE[env], seed=0).tasks if t.split == "train")


@functools.lru_cache(maxsize=None)
def repair_episodes(env: str, n_tasks: int, samples: int) -> list[Trajectory]:
    pool = list(train_pool(env))
    chosen = list({t.template: t for t in pool}.values())[:n_tasks]  # one task per template
    policy = RepairPolicy(Planner(pool))
    return [graded(t) for t in run_episodes(chosen, policy, samples=samples)]


def mistaken(traj: Trajectory) -> str | None:
    return next((s.mistake for s in traj.steps if s.mistake), None)


@pytest.mark.parametrize("env,n_tasks,samples", [("sql", 6, 8), ("travel", 6, 8), ("web", 3, 6), ("code", 1, 6)])
def test_every_repair_episode_grades_recovered(env, n_tasks, samples):
    train_pool(env)
    t0 = time.perf_counter()
    trajs = repair_episodes(env, n_tasks, samples)
    kinds = Counter()
    for t in trajs:
        kind = mistaken(t)
        if kind is None:  # a sample past the task's mistakes is the plain expert episode
            assert t.outcome.tier == "success"
            continue
        kinds[kind] += 1
        assert t.outcome.tier == "recovered", (t.task_id, kind, t.outcome, t.verdict)
        # the mistake was executed (or refused) for real: the environment's answer follows it
        at = next(i for i, s in enumerate(t.steps) if s.mistake)
        step = t.steps[at]
        assert step.errors or step.results, kind
        # the turn after the mistakes opens with the recovery sentence and makes the reference call
        after = next(s for s in t.steps[at:] if not s.mistake)
        assert after.calls and not after.errors
    assert set(kinds) >= ENV_KINDS[env] | GENERIC, kinds
    assert time.perf_counter() - t0 < 25


def test_the_mistakes_come_back_as_the_environments_real_answers():
    trajs = {mistaken(t): t for t in repair_episodes("sql", 6, 8)
             if mistaken(t) and t.steps[0].mistake}  # tasks whose first call is the query
    col = trajs["wrong_column"]
    [result] = col.steps[0].results
    assert not result.ok and result.error == "no_such_column" and "columns of the query's tables" in result.content
    assert trajs["wrong_table"].steps[0].results[0].error == "no_such_table"
    assert trajs["malformed"].steps[0].errors[0].kind in ("truncated", "malformed")
    assert trajs["wrong_tool"].steps[0].errors[0].kind == "unknown_tool"
    assert trajs["bad_args"].steps[0].errors[0].kind == "invalid_args"
    inter = trajs["intermediate"].steps[0]
    assert inter.results[0].ok and "SELECT *" in inter.calls[0].arguments["query"]
    # the recovery turn says what went wrong before the right call
    assert "There is no column" in col.messages[4].content


def test_a_misplaced_column_drops_the_join_and_the_recovery_adds_it_back():
    pool = list(train_pool("sql"))
    task = next(t for t in pool if t.template == "orders_from_city")
    [m] = [m for m in env_spec("sql").mistakes(task, pool) if m.kind == "misplaced_column"]
    city = task.entities["city"]
    assert m.calls[0].arguments["query"] == f"SELECT COUNT(*) FROM orders o WHERE city = '{city}'"
    assert m.recovery == ("city is a column of customers, which my query did not join; "
                          "I'll add JOIN customers c ON o.customer_id = c.id.")
    [traj] = [graded(t) for t in run_episodes([task], RepairPolicy(lambda t, k: m))]
    assert traj.outcome.tier == "recovered"
    [result] = traj.steps[0].results
    assert result.error == "no_such_column" and "city is a column of customers (JOIN customers" in result.content
    # a join whose alias the query uses elsewhere is never dropped: the mistake would not be one error
    spender = next(t for t in pool if t.template == "top_spender_in_city")
    assert "misplaced_column" not in {m.kind for m in env_spec("sql").mistakes(spender, pool)}


def test_a_premature_answer_is_refused_for_real_and_both_mistaken_turns_are_masked():
    """The measured guessed_answer failure: a failing query, a number submitted at once. The
    environment refuses the number, and the fix comes after both; only the fix is trained."""
    pool = list(train_pool("sql"))
    task = next(t for t in pool if t.template == "orders_from_city")
    [m] = [m for m in env_spec("sql").mistakes(task, pool) if m.kind == "premature_answer"]
    assert [c.name for c in m.calls] == ["run_sql", "submit_answer"]
    assert m.recovery.startswith("No query has succeeded yet, so nothing supports 6. city is a column of customers")
    [traj] = [graded(t) for t in run_episodes([task], RepairPolicy(lambda t, k: m))]
    assert traj.outcome.tier == "recovered" and not traj.outcome.guessed and traj.verdict.correct
    errors = [s.results[0].error for s in traj.steps]
    assert errors[:2] == ["no_such_column", "unsupported_answer"] and not any(errors[2:])
    assert [bool(s.mistake) for s in traj.steps] == [True, True] + [False] * (len(traj.steps) - 2)
    assert "So I'll submit 6." in traj.steps[1].raw
    assert REASON_KINDS["guessed_answer"] == REASON_KINDS["unsupported_answer"] == "premature_answer"
    # a policy measured guessing gets this mistake first
    guesser = Planner(pool, Measured(by_task={}, reasons=Counter({"guessed_answer": 3})))
    assert guesser(task, 0).kind == "premature_answer"


def test_a_sold_out_booking_is_refused_for_real_and_the_fix_books_the_references_option():
    """Travel's measured natural error: the search lists an option as sold out, the model books it
    anyway. The mistake books the first such option listed before the reference's; the environment
    refuses it (and names what is still open), and the fix books the reference's option."""
    pool = list(train_pool("travel"))
    fits = [(t, m) for t in pool for m in env_spec("travel").mistakes(t, pool) if m.kind == "sold_out"]
    assert fits, "no train task's search lists a sold-out option"
    task, m = fits[0]
    [wrong] = m.calls
    right = task.reference[m.at]
    key = "flight_id" if wrong.name == "book_flight" else "hotel_id"
    assert wrong.name == right.name and wrong.arguments[key] != right.arguments[key]
    assert {k: v for k, v in wrong.arguments.items() if k != key} == {k: v for k, v in right.arguments.items() if k != key}
    # the fix's id as the call writes it (a JSON string), to be copied token for token
    assert m.recovery.startswith(f"{wrong.arguments[key]} is sold out, as the search said; "
                                 f"I'll book \"{right.arguments[key]}\"")
    [traj] = [graded(t) for t in run_episodes([task], RepairPolicy(lambda t, k: m))]
    assert traj.outcome.tier == "recovered" and traj.verdict.correct
    step = next(s for s in traj.steps if s.mistake)
    [result] = step.results
    # the error names what is open, cheapest first: the reference's option among them, not the refused one
    assert result.error == "sold_out" and "cheapest first: " in result.content
    open_now = result.content.split("cheapest first: ")[1]
    assert f'"{right.arguments[key]}"' in open_now and wrong.arguments[key] not in open_now
    # the mistaken turn's words never name the option the fix books: only the search listing does
    assert right.arguments[key] not in step.raw and wrong.arguments[key] in step.raw
    # the search the mistake follows really listed that option as sold out
    search = traj.steps[traj.steps.index(step) - 1].results[0].content
    assert any(line.startswith(wrong.arguments[key]) and line.endswith("| sold out") for line in search.splitlines())
    # it leads: one sample per task teaches it wherever it fits
    assert "sold_out" in LEADING_KINDS and Planner(pool)(task, 0).kind == "sold_out"


def test_a_misspelt_city_is_fixed_by_copying_the_suggestion_as_the_call_spells_it():
    """A small model respells a held-out city wrongly inside a JSON string (``Dubai`` → ``Dubrook``:
    one prose token, three pieces in a string). The error suggests the city in the call's own
    spelling, the recovery sentence repeats it so, and the fix's serialized call holds that text."""
    pool = list(train_pool("travel"))
    task, m = next((t, m) for t in pool for m in env_spec("travel").mistakes(t, pool) if m.kind == "wrong_entity")
    [wrong] = m.calls
    right = task.reference[m.at]
    key = next(k for k, v in wrong.arguments.items() if v != right.arguments[k])
    city = right.arguments[key]
    assert wrong.arguments[key] != city and f'the error suggests "{city}"' in m.recovery
    # the recovery carries loss, so it never spells the misspelling (quoted, it taught misspelling)
    assert wrong.arguments[key] not in m.recovery
    # respelt as a small model respells: the first letters kept, then an ending the fix cannot be
    # grown from (a prefix of the city taught a tuned model to extend its own misspelling)
    assert wrong.arguments[key][:3] == city[:3] and not city.startswith(wrong.arguments[key])
    [traj] = [graded(t) for t in run_episodes([task], RepairPolicy(lambda t, k: m))]
    assert traj.outcome.tier == "recovered" and traj.verdict.correct
    step = next(s for s in traj.steps if s.mistake)
    [result] = step.results
    assert result.error == "unknown_city" and f'did you mean "{city}"?' in result.content
    assert f'"{city}"' in json.dumps(right.arguments)
    # both cities of a flight search are misspelt across a pool, so the fix is not always the origin
    keys = {next(k for k, v in m.calls[0].arguments.items() if v != t.reference[m.at].arguments[k])
            for t in pool for m in env_spec("travel").mistakes(t, pool) if m.kind == "wrong_entity"}
    assert {"origin", "destination"} <= keys


def test_a_tool_without_arguments_given_the_searchs_is_refused_and_called_again_with_none():
    """A tuned model carried the request's city and dates into ``list_bookings`` (20 of 23 held-out
    rebook_hotel tasks, stop 60) and, refused, searched without ever listing. The mistake is that
    call; the validator refuses it before the tool runs and the fix lists with no arguments."""
    pool = list(train_pool("travel"))
    task, m = next((t, m) for t in pool for m in env_spec("travel").mistakes(t, pool) if m.kind == "extra_args")
    [wrong] = m.calls
    assert wrong.name == task.reference[m.at].name == "list_bookings" and task.reference[m.at].arguments == {}
    search = next(c for c in task.reference if c.name.startswith("search_"))
    assert wrong.arguments == search.arguments
    [traj] = [graded(t) for t in run_episodes([task], RepairPolicy(lambda t, k: m))]
    assert traj.outcome.tier == "recovered" and traj.verdict.correct
    at = next(i for i, s in enumerate(traj.steps) if s.mistake)
    [error] = traj.steps[at].errors
    assert error.kind == "invalid_args" and "unexpected argument" in error.message and not traj.steps[at].results
    fix = traj.steps[at + 1]
    assert fix.raw.startswith("list_bookings takes no arguments") and fix.calls[0].arguments == {}
    # a task that searches nothing (cancel_hotel) carries the request's city and date instead
    from trajforge.envs.travel.tasks import generate_compose_tasks

    cancel = generate_compose_tasks(3, only=["cancel_hotel"]).tasks[0]
    [m] = env_spec("travel").mistakes(cancel, [cancel])
    assert m.kind == "extra_args" and m.calls[0].arguments == {"city": cancel.entities["city"],
                                                               "date": cancel.entities["date"]}
    [traj] = [graded(t) for t in run_episodes([cancel], RepairPolicy(lambda t, k: m))]
    assert traj.outcome.tier == "recovered" and traj.verdict.correct


def test_the_planner_leads_with_the_kinds_it_is_given():
    """``lead`` replaces ``LEADING_KINDS``: on travel, ``wrong_entity`` after ``sold_out`` makes it
    the first mistake of every task that has no sold-out option to book, where the default
    rotation plays it on a few."""
    pool = list(train_pool("travel"))
    default, led = Planner(pool), Planner(pool, lead=("sold_out", "wrong_entity"))
    firsts = Counter(led(t, 0).kind for t in pool)
    assert set(firsts) == {"sold_out", "wrong_entity"}
    assert firsts["sold_out"] == sum(default(t, 0).kind == "sold_out" for t in pool)
    assert sum(default(t, 0).kind == "wrong_entity" for t in pool) < firsts["wrong_entity"]
    # the other kinds are still there, after the leading ones
    t = next(t for t in pool if led(t, 0).kind == "wrong_entity")
    assert {m.kind for m in led.candidates(t)} == {m.kind for m in default.candidates(t)}


def test_the_planner_plays_a_structural_mistake_first_wherever_one_fits():
    """One repair sample per task (the recipes' setting) teaches the structural mistakes on every
    task one fits, a collapsed join before a dropped one; the other tasks keep the rotation, so
    their first mistakes still vary."""
    pool = list(train_pool("sql"))
    planner = Planner(pool)
    fitting = {t.id: [k for k in LEADING_KINDS if k in {m.kind for m in env_spec("sql").mistakes(t, pool)}]
               for t in pool}
    fits = [t for t in pool if fitting[t.id]]
    sql_kinds = [k for k in LEADING_KINDS if k != "sold_out"]  # sold_out is travel's
    assert len(fits) >= 5 and any(fitting[t.id] == sql_kinds for t in fits)
    assert all(planner(t, 0).kind == fitting[t.id][0] for t in fits)
    assert all(planner(t, len(fitting[t.id])).kind not in LEADING_KINDS for t in fits)
    rest = {planner(t, 0).kind for t in pool if t not in fits}
    assert len(rest) >= 4 and not rest & set(LEADING_KINDS), rest


def test_a_collapsed_join_puts_every_filter_on_one_table_and_the_error_names_the_whole_path():
    """The best recipe's natural held-out error (stop 50): a query of several joins written on one
    table. The environment's error names the table and every JOIN to it; the fix is the reference."""
    pool = list(train_pool("sql"))
    task = next(t for t in pool if t.template == "city_spend_on_category")
    [m] = [m for m in env_spec("sql").mistakes(task, pool) if m.kind == "collapsed_join"]
    city, category = task.entities["city"], task.entities["category"]
    assert m.calls[0].arguments["query"] == (f"SELECT COUNT(*) FROM products WHERE city = '{city}' "
                                             f"AND category = '{category}'")
    assert m.recovery.startswith("city is a column of customers, which my query did not join")
    [traj] = [graded(t) for t in run_episodes([task], RepairPolicy(lambda t, k: m))]
    assert traj.outcome.tier == "recovered" and traj.verdict.correct
    [result] = traj.steps[0].results
    assert result.error == "no_such_column"
    assert ("city is a column of customers (JOIN order_items ON products.id = order_items.product_id "
            "JOIN orders ON order_items.order_id = orders.id JOIN customers ON orders.customer_id = customers.id)"
            in result.content)
    # one filter table, the FROM table another: the query goes on the FROM table
    spender = next(t for t in pool if t.template == "top_spender_in_city")
    [m] = [m for m in env_spec("sql").mistakes(spender, pool) if m.kind == "collapsed_join"]
    assert m.calls[0].arguments["query"] == f"SELECT COUNT(*) FROM order_items WHERE city = '{spender.entities['city']}'"
    # a single join is misplaced_column's; a filter on the one table would not fail
    for template in ("orders_from_city", "customers_in_city", "never_ordered_in_city"):
        task = next(t for t in pool if t.template == template)
        assert "collapsed_join" not in {m.kind for m in env_spec("sql").mistakes(task, pool)}, template


def test_a_planner_of_chosen_kinds_plays_only_those_in_their_order():
    pool = list(train_pool("sql"))
    planner = Planner(pool, kinds=("collapsed_join", "premature_answer"))
    task = next(t for t in pool if t.template == "city_spend_on_category")
    first, second = planner(task, 0), planner(task, 1)
    assert (first.kind, second.kind) == ("collapsed_join", "premature_answer") and planner(task, 2) is None
    assert second.calls[0] == first.calls[0]  # the guess follows the collapsed query
    single = next(t for t in pool if t.template == "customers_in_city")
    assert [planner(single, k).kind for k in (0,)] == ["premature_answer"] and planner(single, 1) is None


def test_mistakes_leave_the_rest_of_the_reference_valid():
    """Every environment mistake only reads or fails: none submits (but the refused one), books or cancels, and a web
    click is on no element of the shop (its name is misspelt)."""
    writes = {"book_flight", "book_hotel", "cancel_booking", "submit", "submit_answer", "finish", "type"}
    for env in ENV_KINDS:
        pool = list(train_pool(env))
        hook = env_spec(env).mistakes
        for task in pool:
            labels = {c.arguments.get("element") for t in pool for c in t.reference if c.name == "click"}
            for m in hook(task, pool):
                assert 0 <= m.at < len(task.reference)
                # premature_answer's last call submits before any query succeeded: refused, not
                # taken (SqlEnv.refuse_unsupported; the test above runs it); its others only read.
                # sold_out books an option its search listed as sold out: refused too (tested above)
                calls = m.calls[:-1] if m.kind in ("premature_answer", "sold_out") else m.calls
                assert not any(c.name in writes for c in calls), m
                assert not any(c.name == "click" and c.arguments["element"] in labels for c in m.calls), m


def test_mcp_environment_gets_the_generic_mistakes(tmp_path):
    task = kv_task(write_env(tmp_path))
    kinds = [m.kind for m in generic_mistakes(task)]
    assert kinds == ["malformed", "wrong_tool", "bad_args"]
    trajs = [graded(t) for t in run_episodes([task], RepairPolicy(Planner([task])), samples=3)]
    assert [t.outcome.tier for t in trajs] == ["recovered"] * 3
    assert sorted(mistaken(t) for t in trajs) == sorted(kinds)


def test_measured_mistakes_replay_the_policys_own_refused_turn():
    pool = list(train_pool("sql"))
    task = next(t for t in pool if t.template == "customers_in_city")
    own = ('<tool_call>\n{"name": "run_sql", "arguments": {"query": '
           '"SELECT COUNT(*) FROM customers WHERE town = \'x\'"}}\n</tool_call>')
    wrong = '<tool_call>\n{"name": "submit_answer", "arguments": {"answer": "3"}}\n</tool_call>'
    [sampled] = [graded(t) for t in run_episodes([task], ScriptedPolicy([own, wrong], name="hf:tiny"))]
    assert sampled.outcome.tier == "failed"
    measured = measured_mistakes([sampled], pool)
    [m] = measured.by_task[task.id]
    assert m.raw == own and m.at == 0 and m.kind == "measured:no_such_column"
    assert measured.reasons["no_such_column"] == 1
    planner = Planner(pool, measured)
    assert planner(task, 0) == m
    # kinds of the measured reasons come first for the other tasks
    other = next(t for t in pool if t.template == "product_price")
    assert planner(other, 0).kind == "wrong_column"
    [replayed] = [graded(t) for t in run_episodes([task], RepairPolicy(planner))]
    assert replayed.outcome.tier == "recovered"
    assert replayed.steps[0].raw == own and replayed.steps[0].mistake == "measured:no_such_column"
    # the expert's and the repair policy's own episodes are never measured
    assert not measured_mistakes([replayed], pool).by_task


class NativePolicy(ScriptedPolicy):
    """A server policy whose calls come back structured (OpenAI ``tool_calls``)."""

    def act(self, requests):
        return [Generation(text="", native_calls=[{"type": "function", "function": {
            "name": "run_sql", "arguments": '{"query": "SELECT'}}]) for _ in requests]


def test_a_refused_structured_call_is_not_measured_it_has_nothing_to_replay():
    """A structured call whose arguments are not JSON leaves no text to replay and no call to
    render: replaying it broke the repair policy (``policy_error``, an infrastructure fault)."""
    pool = list(train_pool("sql"))
    task = next(t for t in pool if t.template == "customers_in_city")
    [native] = [graded(t) for t in run_episodes([task], NativePolicy([], name="openai:m"))]
    assert native.steps[0].native and native.steps[0].errors and not native.steps[0].calls
    measured = measured_mistakes([native], pool)
    assert not measured.by_task
    [repaired] = [graded(t) for t in run_episodes([task], RepairPolicy(Planner(pool, measured)))]
    assert repaired.outcome.tier == "recovered" and not repaired.faults


def test_a_measured_turn_of_two_refused_calls_replays_as_that_one_turn():
    pool = list(train_pool("sql"))
    task = next(t for t in pool if t.template == "customers_in_city")
    two = ('<tool_call>\n{"name": "run_sql", "arguments": {"query": '
           '"SELECT COUNT(*) FROM customers WHERE town = \'x\'"}}\n</tool_call>\n'
           '<tool_call>\n{"name": "run_sql", "arguments": {"query": "SELECT COUNT(*) FROM customer"}}\n</tool_call>')
    [sampled] = [graded(t) for t in run_episodes([task], ScriptedPolicy([two, "no call"], name="hf:tiny"))]
    [m] = measured_mistakes([sampled], pool).by_task[task.id]
    [replayed] = [graded(t) for t in run_episodes([task], RepairPolicy(lambda t, k: m))]
    assert replayed.outcome.tier == "recovered"
    # its own turn verbatim, then the reference: no second mistaken turn the model never wrote
    assert [s.mistake is not None for s in replayed.steps] == [True, False, False]
    assert replayed.steps[0].raw == two and len(replayed.steps[0].results) == 2


def test_samples_of_tasks_outside_the_pool_do_not_order_its_mistakes():
    """A held-out task's failed sample in the ``--mistakes-from`` store is not the pool's: its
    fail reason must not choose which mistakes the training demonstrations play."""
    pool = list(train_pool("sql"))
    heldout = next(t for t in synthesize("sql", n=40, seed=0).tasks if t.split != "train")
    [elsewhere] = [graded(t) for t in run_episodes([heldout], ScriptedPolicy(["no call"], name="hf:tiny"))]
    assert elsewhere.outcome.tier == "failed" and elsewhere.outcome.fail_reason
    assert measured_mistakes([elsewhere], pool) == ({}, Counter())


def test_step_fields_default_to_todays_behaviour_and_old_records_read():
    from trajforge.schema import Step

    old = Trajectory.model_validate({"task_id": "t", "policy": "p", "env": "sql", "toolset_fingerprint": "f",
                                     "dialect": "hermes", "steps": [{"index": 0, "raw": "x"}]})
    assert old.steps[0].mistake is None and old.steps[0].train is None
    marked = old.model_copy(update={"steps": [Step(index=0, raw="x", mistake="wrong_column", train=False)]})
    back = Trajectory.model_validate_json(marked.model_dump_json())
    assert back.steps[0].mistake == "wrong_column" and back.steps[0].train is False
    assert Mistake(kind="x", at=0).calls == ()


def test_in_a_renamed_world_the_slips_are_that_worlds_names_and_fail_for_real():
    """A schema world renames tables and columns: the slip there is the original world's name (what
    a model that memorised it writes), and the environment refuses it as it would any other."""
    from trajforge.envs.sql.mistakes import sql_mistakes
    from trajforge.envs.sql.worlds import retail_world

    from trajforge.envs.sql.tasks import generator
    from trajforge.envs.sql.worlds import schema_world
    from trajforge.tasks.worlds import across_worlds

    drawn = across_worlds(lambda w: generator(0, schema_world(w) if w else 0), 60, 0, 3)
    pool = [t for t in drawn.tasks if t.split == "train" and t.world > 0]
    renamed = {"wrong_table": 0, "wrong_column": 0}
    for task in pool:
        world = retail_world(task.world)
        query = next(c.arguments["query"] for c in task.reference if c.name == "run_sql")
        kinds = {m.kind: m for m in sql_mistakes(task, pool)}
        # every query names a table, and each table has a slip in every world
        assert "wrong_table" in kinds, (task.world, query)
        for kind, names in (("wrong_table", world.tables), ("wrong_column", world.columns)):
            if kind in kinds:
                wrong = kinds[kind].calls[0].arguments["query"]
                renamed[kind] += any(f" {orig}" in f" {wrong}" and new in query for orig, new in names.items())
    assert renamed["wrong_table"] >= len(pool) // 2 and renamed["wrong_column"] >= 5, renamed
    planner = Planner(pool)
    kinds = ("wrong_table", "wrong_column")

    def slip(task, sample):  # sample 0 plays the table slip, sample 1 the column slip (where it has one)
        return next((m for m in planner.candidates(task) if m.kind == kinds[sample]), None)

    trajs = [graded(t) for t in run_episodes(pool[:8], RepairPolicy(slip), samples=2)]
    # the world's expert reads the schema first, so the slip comes after list_tables and describe_table
    slips = [s for t in trajs for s in t.steps if s.mistake in ("wrong_table", "wrong_column") and s.results]
    assert all(s.index >= 2 for s in slips)
    errors = {s.results[0].error for s in slips}
    assert errors == {"no_such_table", "no_such_column"}, errors
    assert all(t.outcome.tier == "recovered" for t in trajs if any(s.mistake for s in t.steps))
