"""LLM task synthesis against a real loopback OpenAI-compatible server with scripted replies."""

from __future__ import annotations

import json
import sqlite3
import threading
import time

import pytest

from tests.scripted_chat import ScriptedChatServer, Status, unused_url
from trajforge.envs.sqldb import ensure_db
from trajforge.harness import HarnessConfig, run_episodes
from trajforge.policies import make_policy
from trajforge.tasks import synthesize
from trajforge.tasks.dedup import Deduper
from trajforge.tasks.llm import (
    LLMConfig,
    LLMUnavailable,
    Proposal,
    build_candidate,
    parse_proposal,
    synthesize_llm,
)
from trajforge.tasks.verify import PlanRejected


def q(sql: str) -> dict:
    return {"name": "run_sql", "arguments": {"query": sql}}


def submit(answer) -> dict:
    return {"name": "submit_answer", "arguments": {"answer": str(answer)}}


def proposal(prompt: str, *plan: dict, **extra) -> str:
    return json.dumps({"prompt": prompt, "plan": list(plan), "tier": "easy", **extra})


def one(sql: str):
    """The first cell of ``sql`` on the generated database, computed outside the environment."""
    with sqlite3.connect(ensure_db(0)) as conn:
        return conn.execute(sql).fetchone()[0]


SPORTS = "SELECT COUNT(*) FROM products WHERE category = 'Sports'"
GERMANY = ("SELECT COUNT(*) FROM orders o JOIN customers c ON o.customer_id = c.id "
           "WHERE c.country = 'Germany'")
MAX_PRICE = "SELECT MAX(price) FROM products"


def cfg(url: str, **kw) -> LLMConfig:
    """One request at a time, so the scripted server's replies map to requests in order."""
    return LLMConfig(url=url, model="writer", backoff_s=0.01, **{"concurrency": 1, **kw})


@pytest.fixture(scope="module")
def examples():
    return synthesize("sql", 20, seed=0).tasks


def test_keeps_executed_plans_and_counts_every_rejection(examples):
    sports, germany, top = one(SPORTS), one(GERMANY), one(MAX_PRICE)
    top_name = one(f"SELECT name FROM products WHERE price = {top}")
    script = [
        # 1-3: kept (easy, medium with a correct claim inside a fenced, trailing-comma reply, hard)
        proposal("How many products are in the Sports category?", q(SPORTS), submit(sports)),
        "Here it is:\n```json\n" + proposal(
            "How many orders did customers from Germany place?", q(GERMANY), submit(germany),
            expected=germany)[:-1] + ",}\n```",
        proposal("Which product is the most expensive one in the whole catalogue?",
                 {"name": "list_tables", "arguments": {}},
                 {"name": "describe_table", "arguments": {"table": "products"}}, q(MAX_PRICE),
                 q(f"SELECT name FROM products WHERE price = {top}"), submit(top_name)),
        "Sorry, I can't help with that.",                                        # 4 bad_json
        json.dumps({"prompt": "How many customers?"}),                           # 5 bad_shape
        proposal("Drop the orders.", {"name": "drop_table", "arguments": {"table": "orders"}},
                 submit("ok")),                                                  # 6 invalid_call
        proposal("How many customers are there?", {"name": "run_sql", "arguments": {"sql": "x"}},
                 submit(1)),                                                     # 7 invalid_call
        proposal("How many customers live anywhere?",
                 q("SELECT COUNT(*) FROM customer"), submit(3)),                 # 8 tool_error
        proposal("How many gold customers are there?",
                 q("SELECT COUNT(*) FROM customers WHERE tier = 'gold'")),       # 9 no_final_call
        proposal("How many Kitchen products are there?",
                 q("SELECT COUNT(*) FROM products WHERE category = 'Kitchen'"),
                 submit(one("SELECT COUNT(*) FROM products WHERE category = 'Kitchen'")),
                 expected=10_000),                                               # 10 mismatch
        proposal("how many PRODUCTS are in the sports category", q(SPORTS),
                 submit(sports)),                                                # 11 duplicate
        proposal("How many orders did customers from Germany place in total?", q(GERMANY),
                 submit(germany)),                                               # 12 near_dup
        proposal("Count the Sports items we sell.", q(SPORTS), submit(sports)),  # 13 dup (plan)
        proposal("How many Office products are there?",
                 q("SELECT COUNT(*) FROM products WHERE category = 'Office'"),
                 submit(12345)),                                                 # 14 verify_failed
        proposal(examples[0].prompt, q("SELECT 1"), submit(1)),                  # 15 dup (pool)
        proposal("What is the highest price among Nonexistent products?",
                 q("SELECT MAX(price) FROM products WHERE category = 'Nonexistent'"),
                 submit("none")),                                                # 16 empty_result
    ]
    with ScriptedChatServer(script) as srv:
        report = synthesize_llm("sql", 20, cfg(srv.url, max_requests=len(script), seed=7),
                                examples=examples)
    assert report.dropped == {
        "bad_json": 1, "bad_shape": 1, "invalid_call": 2, "tool_error": 1, "no_final_call": 1,
        "expected_mismatch": 1, "duplicate": 3, "near_duplicate": 1, "verify_failed": 1,
        "empty_result": 1, "unfilled": 17}
    assert [(r.source, r.reason) for r in report.rejected] == [
        ("request 4", "bad_json"), ("request 5", "bad_shape"), ("request 6", "invalid_call"),
        ("request 7", "invalid_call"), ("request 8", "tool_error"), ("request 9", "no_final_call"),
        ("request 10", "expected_mismatch"), ("request 11", "duplicate"),
        ("request 12", "near_duplicate"), ("request 13", "duplicate"),
        ("request 14", "verify_failed"), ("request 15", "duplicate"), ("request 16", "empty_result")]
    assert "unknown_tool" in report.rejected[2].detail and "'query'" in report.rejected[3].detail
    assert "no such table: customer" in report.rejected[4].detail
    assert "same reference plan" in report.rejected[9].detail
    assert examples[0].id in report.rejected[11].detail
    by_prompt = {t.prompt: t for t in report.tasks}
    assert [t.tier for t in report.tasks] == ["easy", "medium", "hard"]
    # Expected values are what executing the plan produced, in the verifier's types.
    assert by_prompt["How many products are in the Sports category?"].expected == sports
    assert by_prompt["How many orders did customers from Germany place?"].expected == germany
    assert report.tasks[2].expected == top_name
    assert all(t.template == "llm" and t.split == "train" and t.env == "sql" for t in report.tasks)
    # What the writer was shown: tools, the database, examples, the target tier, a seed per request.
    first = srv.requests[0]
    user = first["messages"][1]["content"]
    assert first["model"] == "writer" and [r["seed"] for r in srv.requests[:3]] == [7, 8, 9]
    assert '"name": "run_sql"' in user and "order_items(id INTEGER" in user
    assert examples[0].prompt in user or any(e.prompt in user for e in examples)
    assert "Write one NEW easy task" in user
    assert "Write one NEW medium task" in srv.requests[1]["messages"][1]["content"]
    # The kept tasks are solvable through the harness by replaying their reference.
    trajs = run_episodes(report.tasks, make_policy("expert"))
    assert all(t.verdict.correct and t.end == "submitted" for t in trajs)


def test_off_tier_and_reasons_per_target_tier(examples):
    sports = one(SPORTS)
    script = [proposal("How many products are in the Sports category?", q(SPORTS), submit(sports))]
    with ScriptedChatServer(script) as srv:
        report = synthesize_llm("sql", 1, cfg(srv.url, max_requests=1), tiers=("hard",))
    assert report.tasks == [] and report.dropped == {"off_tier": 1, "unfilled": 1}
    assert report.rejected[0].tier == "hard"


def test_transient_errors_are_retried_with_backoff():
    sports = one(SPORTS)
    script = [Status(503), Status(429, headers={"Retry-After": "0"}),
              proposal("How many products are in the Sports category?", q(SPORTS), submit(sports))]
    with ScriptedChatServer(script) as srv:
        report = synthesize_llm("sql", 1, cfg(srv.url))
    assert len(report.tasks) == 1 and report.dropped == {} and len(srv.requests) == 3


def test_persistent_server_errors_stop_with_the_report():
    with ScriptedChatServer([Status(500)] * 10) as srv:
        with pytest.raises(LLMUnavailable, match="HTTP 500") as exc:
            synthesize_llm("sql", 3, cfg(srv.url, retries=1, max_failures_in_row=2))
    assert len(srv.requests) == 4  # two requests, each tried twice
    assert exc.value.report.dropped == {"http_error": 2, "unfilled": 3}


def test_refusal_keeps_tasks_already_verified():
    sports = one(SPORTS)
    script = [proposal("How many products are in the Sports category?", q(SPORTS), submit(sports)),
              Status(401, "bad key")]
    with ScriptedChatServer(script) as srv:
        with pytest.raises(LLMUnavailable, match="HTTP 401") as exc:
            synthesize_llm("sql", 5, cfg(srv.url))
    assert len(srv.requests) == 2  # a 4xx is not retried
    assert [t.expected for t in exc.value.report.tasks] == [sports]
    assert exc.value.report.dropped == {"http_error": 1, "unfilled": 4}


def test_unreachable_server():
    with pytest.raises(LLMUnavailable, match="cannot reach") as exc:
        synthesize_llm("sql", 2, cfg(unused_url(), retries=1))
    assert exc.value.report.tasks == [] and exc.value.report.dropped["http_error"] == 1


def test_request_budget_is_a_hard_bound():
    with ScriptedChatServer(["no json here"] * 10) as srv:
        report = synthesize_llm("sql", 2, cfg(srv.url, max_requests=3))
    assert len(srv.requests) == 3 and report.dropped == {"bad_json": 3, "unfilled": 2}


def test_unknown_env_fails_before_any_request():
    with pytest.raises(KeyError, match="unknown environment 'nope'"):
        synthesize_llm("nope", 1, cfg(unused_url()))


@pytest.mark.parametrize("text, reason", [
    ("", "bad_json"), ("[1, 2]", "bad_json"), ('{"plan": []}', "bad_shape"),
    ('{"prompt": "x", "plan": "run it"}', "bad_shape"),
])
def test_parse_proposal_rejects(text, reason):
    with pytest.raises(PlanRejected) as exc:
        parse_proposal(text)
    assert exc.value.reason == reason


def test_parse_proposal_accepts_string_arguments():
    prompt, steps, _ = parse_proposal(json.dumps({"prompt": " P ", "plan": [
        {"name": "run_sql", "arguments": json.dumps({"query": "SELECT 1"})}]}))
    assert prompt == "P" and steps == [{"name": "run_sql", "arguments": {"query": "SELECT 1"}}]


def test_end_state_env_expected_is_the_executed_state():
    """travel verifies its end state (active bookings): the plan's end state becomes `expected`."""
    template = synthesize("travel", 6, seed=0).tasks[0]
    steps = [{"name": c.name, "arguments": dict(c.arguments)} for c in template.reference]
    booker = next(s for s in steps if s["name"].startswith("book_"))
    person = "passenger" if "passenger" in booker["arguments"] else "guest"
    booker["arguments"][person] = "Mara Quinn"
    steps[-1]["arguments"] = {"summary": "Booked it for Mara Quinn."}
    prompt = template.prompt.replace(template.reference[1].arguments[person], "Mara Quinn")
    executed = {**booker["arguments"]}
    bad_id = [*steps[:1], {"name": booker["name"], "arguments": {**executed, (
        "flight_id" if "flight_id" in executed else "hotel_id"): "NOPE-1"}}, steps[-1]]
    ola = json.loads(json.dumps(steps).replace("Mara Quinn", "Ola Berg"))
    script = [
        json.dumps({"prompt": prompt, "plan": steps}),                                    # kept
        json.dumps({"prompt": "Book something impossible for Mara Quinn.", "plan": bad_id}),
        json.dumps({"prompt": "Please sort out the usual trip as discussed.",             # dup plan
                    "plan": steps}),
        json.dumps({"prompt": "Same trip again, but for Ola Berg this time.", "plan": ola,
                    "expected": {"bookings": []}}),                               # mismatch
    ]
    with ScriptedChatServer(script) as srv:
        report = synthesize_llm("travel", 5, cfg(srv.url, max_requests=len(script)))
    assert [(r.source, r.reason) for r in report.rejected] == [
        ("request 2", "tool_error"), ("request 3", "duplicate"), ("request 4", "expected_mismatch")]
    [task] = report.tasks
    [booking] = task.expected["bookings"]
    assert booking["name"] == "Mara Quinn" and task.env == "travel"
    trajs = run_episodes([task], make_policy("expert"))
    assert trajs[0].verdict.correct


def test_an_environment_crash_rejects_only_that_candidate(tmp_path):
    garbage = tmp_path / "not-a-db.sqlite"
    garbage.write_bytes(b"this is not sqlite" * 100)
    where = Proposal(env="sql", tier="easy", db=str(garbage))
    text = proposal("How many products are in the Sports category?", q(SPORTS), submit(8))
    with pytest.raises(PlanRejected) as exc:
        build_candidate(text, where, Deduper())
    assert exc.value.reason == "env_fault" and "DatabaseError" in exc.value.detail


def test_concurrent_requests_are_checked_in_request_order():
    sports = one(SPORTS)
    good = proposal("How many products are in the Sports category?", q(SPORTS), submit(sports))
    replies = {0: "junk", 1: good, 2: good, 3: "junk", 4: good}  # by request seed
    in_flight, peak, lock = [0], [0], threading.Lock()

    def reply(body):
        with lock:
            in_flight[0] += 1
            peak[0] = max(peak[0], in_flight[0])
        deadline = time.monotonic() + 5  # let the wave's other requests arrive (a loaded CI box is slow)
        while body["seed"] < 4 and peak[0] < 4 and time.monotonic() < deadline:
            time.sleep(0.01)
        with lock:
            in_flight[0] -= 1
        return replies[body["seed"]]

    with ScriptedChatServer([reply] * 5) as srv:
        report = synthesize_llm("sql", 3, cfg(srv.url, concurrency=4, max_requests=5))
    assert peak[0] == 4 and len(srv.requests) == 5
    assert [(r.source, r.reason) for r in report.rejected] == [
        ("request 1", "bad_json"), ("request 3", "duplicate"), ("request 4", "bad_json"),
        ("request 5", "duplicate")]
    assert len(report.tasks) == 1 and report.dropped["unfilled"] == 2


def test_web_goal_is_the_placed_order_and_tiers_follow_the_examples():
    """web verifies the placed order against a goal: the executed order becomes the goal, and
    tiers come from the nearest example plans (a checkout is long in every tier)."""
    examples = synthesize("web", 12, seed=0).tasks
    fresh = [t for t in synthesize("web", 12, seed=1).tasks if t.tier == "easy"][:2]
    script = [json.dumps({"prompt": t.prompt + " Please.", "plan": [
        {"name": c.name, "arguments": c.arguments} for c in t.reference]}) for t in fresh]
    with ScriptedChatServer(script) as srv:
        report = synthesize_llm("web", 2, cfg(srv.url), examples=examples)
    assert report.dropped == {} and len(report.tasks) == 2
    for task, source in zip(report.tasks, fresh):
        assert task.expected["kind"] == "order"
        assert [i["product"] for i in task.expected["items"]] == [
            i["product"] for i in source.expected["items"]]
        assert task.tier == "easy"  # a fixed step count would call a 7-step checkout hard
    trajs = run_episodes(report.tasks, make_policy("expert"), HarnessConfig(max_turns=30))
    assert all(t.verdict.correct for t in trajs)


def test_examples_of_other_splits_are_never_shown_but_still_deduplicated(examples):
    """A held-out (or test) task shown to the writer comes back reworded as a train task."""
    held = [t for t in examples if t.split != "train"]
    assert held and any(t.split == "train" for t in examples)
    script = [proposal(held[0].prompt, q("SELECT 1"), submit(1)), "junk"]
    with ScriptedChatServer(script) as srv:
        report = synthesize_llm("sql", 1, cfg(srv.url, max_requests=2, examples=len(examples)),
                                examples=examples)
    shown = [r["messages"][1]["content"] for r in srv.requests]
    assert not any(t.prompt in user for t in held for user in shown)
    assert all(any(t.prompt in user for t in examples if t.split == "train") for user in shown)
    assert [r.reason for r in report.rejected] == ["duplicate", "bad_json"]


def test_a_failure_after_the_last_needed_task_does_not_stop_the_run():
    sports = one(SPORTS)
    good = proposal("How many products are in the Sports category?", q(SPORTS), submit(sports))
    replies = {0: good, 1: Status(401, "bad key")}  # by request seed: the wave's second is refused
    with ScriptedChatServer([lambda body: replies[body["seed"]]] * 2) as srv:
        report = synthesize_llm("sql", 1, cfg(srv.url, concurrency=2))
    assert len(report.tasks) == 1 and report.dropped == {} and report.rejected == []


def test_a_reply_past_the_timeout_is_counted_not_fatal():
    sports = one(SPORTS)
    good = proposal("How many products are in the Sports category?", q(SPORTS), submit(sports))

    def slow(body):
        time.sleep(0.5)
        return good

    with ScriptedChatServer([slow, good]) as srv:
        report = synthesize_llm("sql", 1, cfg(srv.url, timeout_s=0.1, retries=0, max_requests=2))
    assert len(report.tasks) == 1 and report.dropped == {"http_error": 1}
    assert "no reply" in report.rejected[0].detail and report.rejected[0].source == "request 1"
