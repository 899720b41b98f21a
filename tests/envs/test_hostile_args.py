"""Model input is never an env fault: hostile arguments to every tool of every environment.

One test per environment (sql, travel, web, code, mcp), parametrized over its tools: each tool's
valid baseline call is varied argument by argument through ``hostile_args`` (surrogates, control
characters, NUL bytes, megabyte strings and URLs, ``../../etc`` paths, numbers past every limit,
wrong types — also those validation would stop —, 200-level nesting, an unexpected argument).
Every variant must come back as a result the model sees (success or a typed tool error), never
an ``env_fault`` and never an exception, storable as UTF-8 JSON, bounded in size and within its
time budget; afterwards the environment still works. The positive side of the rule is checked
too: the declared infrastructure failures (a shop server that does not answer, an SQL worker
that cannot start, a sandbox that cannot start, a missing dependency) *are* env faults.
"""

from __future__ import annotations

import json
import textwrap

import pytest

from tests.conftest import require_system
from tests.envs.hostile_args import HOSTILE_TEXT, Case, hostile_cases, run_cases
from trajforge.envs import make_env
from trajforge.envs.code.env import CodeEnv
from trajforge.envs.sandbox import SandboxLimits
from trajforge.envs.sql import SqlEnv
from trajforge.envs.travel.catalog import day_range
from trajforge.schema import Task, ToolCall


def call(name: str, **arguments) -> ToolCall:
    return ToolCall(name=name, arguments=arguments)


def assert_clean(problems: list[str]) -> None:
    assert not problems, f"{len(problems)} bad cases:\n" + "\n".join(problems[:40])


# ---- sql ---------------------------------------------------------------------------------------

SQL_BASELINES = [call("list_tables"), call("describe_table", table="orders"),
                 call("run_sql", query="SELECT count(*) FROM customers"),
                 call("submit_answer", answer="7")]


@pytest.fixture
def sql_env():
    env = SqlEnv(timeout_s=1.0)
    env.reset(Task(id="t", env="sql", prompt="q", tier="easy", split="train", template="x",
                   reference=(), expected=7, seed=0))
    yield env
    env.close()


@pytest.mark.parametrize("baseline", SQL_BASELINES, ids=lambda c: c.name)
def test_sql_tools_take_hostile_arguments_as_model_errors(sql_env, baseline):
    assert_clean(run_cases(sql_env.execute, hostile_cases(baseline), budget_s=3.0))
    assert sql_env.execute(call("run_sql", query="SELECT 1 AS one")).content == "one\n1\n(1 row)"


def test_sql_worker_that_cannot_start_is_an_env_fault(sql_env, monkeypatch):
    import trajforge.envs.sqlguard as guard

    def no_process(*args, **kwargs):
        raise OSError(11, "Resource temporarily unavailable")

    sql_env._db._slot[0].kill()  # the next query needs a fresh worker, and none can start
    monkeypatch.setattr(guard.subprocess, "Popen", no_process)
    monkeypatch.setattr(guard, "_pool", [])
    result = sql_env.execute(call("run_sql", query="SELECT 1"))
    assert result.fault and result.error == "sql_worker" and "cannot start" in result.content


def test_a_database_file_that_breaks_mid_episode_is_an_env_fault(tmp_path):
    import os
    import shutil

    from trajforge.envs.sqldb import ensure_db

    path = tmp_path / "shop.sqlite"
    shutil.copy(ensure_db(0), path)
    env = SqlEnv()
    env.reset(Task(id="t", env="sql", prompt="q", tier="easy", split="train", template="x",
                   reference=(), expected=1, db=str(path)))
    try:
        assert env.execute(call("run_sql", query="SELECT count(*) FROM orders")).ok
        path.write_bytes(os.urandom(100_000))  # the file the episode opened is garbage now
        broken = env.execute(call("run_sql", query="SELECT count(*) FROM order_items"))
        assert broken.fault and broken.error == "sql_database"
        env._db._slot[0].kill()  # and a fresh worker cannot reopen it
        reopened = env.execute(call("run_sql", query="SELECT 1"))
        assert reopened.fault and reopened.error == "sql_worker"
    finally:
        env.close()


# ---- travel ------------------------------------------------------------------------------------

def _travel_env():
    env = make_env("travel")
    env.reset(Task(id="tr", env="travel", prompt="book", tier="easy", split="train",
                   template="x", reference=(), expected={"bookings": []}, seed=0))
    return env


def _travel_baselines() -> list[ToolCall]:
    env = _travel_env()
    day = str(day_range()[0])
    a, b = env.world.city("Beijing"), env.world.city("Shanghai")
    flight = env.world.flights(a, b, day_range()[0])[0].id
    hotel = env.world.hotels["Shanghai"][0].id
    return [call("search_flights", origin="Beijing", destination="Shanghai", date=day, max_price=5000),
            call("book_flight", flight_id=flight, passenger="Li Wei"),
            call("search_hotels", city="Shanghai", check_in=day, nights=2, min_stars=3),
            call("book_hotel", hotel_id=hotel, check_in=day, nights=2, guest="Li Wei"),
            call("get_weather", city="Beijing", date=day), call("list_bookings"),
            call("cancel_booking", booking_id="B1"), call("finish", summary="Booked.")]


@pytest.mark.parametrize("baseline", _travel_baselines(), ids=lambda c: c.name)
def test_travel_tools_take_hostile_arguments_as_model_errors(baseline):
    env = _travel_env()
    env.execute(call("book_flight", **_travel_baselines()[1].arguments))  # B1 exists to cancel
    assert_clean(run_cases(env.execute, hostile_cases(baseline), budget_s=2.0))
    assert env.execute(_travel_baselines()[4]).ok


# ---- web ---------------------------------------------------------------------------------------

WEB_BASELINES = [call("open", url="/"), call("click", element="1"),
                 call("type", field="q", text="lamp"), call("submit"),
                 call("find", text="Cart"), call("read", page=1)]


@pytest.fixture
def web_env():
    env = make_env("web")
    env.reset(Task(id="w", env="web", prompt="shop", tier="easy", split="train", template="x",
                   reference=(), expected=None, seed=0))
    yield env
    env.close()


@pytest.mark.parametrize("baseline", WEB_BASELINES, ids=lambda c: c.name)
def test_web_tools_take_hostile_arguments_as_model_errors(web_env, baseline):
    home = call("open", url="/")

    def back_home():  # every case starts from the home page, with the search box typed into
        web_env.execute(home)
        web_env.execute(call("type", field="q", text="lamp"))

    back_home()
    assert_clean(run_cases(web_env.execute, hostile_cases(baseline), budget_s=3.0, between=back_home))
    assert web_env.execute(home).ok


@pytest.mark.parametrize("label", sorted(HOSTILE_TEXT))
def test_hostile_text_typed_and_submitted_reaches_the_server_as_text(web_env, label):
    # What type() keeps is posted to the real server and rendered back into a page.
    text = HOSTILE_TEXT[label]
    steps = [call("open", url="/"), call("type", field="q", text=text), call("submit"),
             call("open", url="/search?q=" + text[:1500]), call("find", text=text)]
    assert_clean(run_cases(web_env.execute, [Case(f"{label}: {s.name}", s) for s in steps], budget_s=3.0))


def test_a_shop_server_that_does_not_answer_is_an_env_fault(web_env):
    import httpx

    web_env._http.close()
    web_env._http = httpx.Client(base_url="http://127.0.0.1:9", trust_env=False, timeout=1)
    result = web_env.execute(call("open", url="/"))
    assert result.fault and result.error == "web_server_down"


def test_a_shop_session_the_server_lost_is_an_env_fault(web_env):
    web_env._server.close_session(web_env._sid)
    result = web_env.execute(call("open", url="/cart"))
    assert result.fault and result.error == "web_session_lost"


# ---- code --------------------------------------------------------------------------------------

GOOD = "def scale(nums):\n    return [x * 3 for x in nums]\n"
CODE_BASELINES = [call("write_file", path="solution.py", content=GOOD),
                  call("run_python", code="print(1)"), call("run_python", code="", path="solution.py"),
                  call("run_tests"), call("submit")]


@pytest.fixture
def code_env():
    require_system("bwrap", "bubblewrap")
    env = CodeEnv(limits=SandboxLimits(wall_s=3.0))
    env.reset(Task(id="c", env="code", prompt="scale", tier="easy", split="train", template="x",
                   reference=(), expected={"function": "scale", "cases": [
                       {"args": [[1]], "expected": [3]}, {"args": [[2]], "expected": [6]}]}))
    yield env
    env.close()


@pytest.mark.parametrize("baseline", CODE_BASELINES, ids=lambda c: f"{c.name}-{'-'.join(c.arguments)}")
def test_code_tools_take_hostile_arguments_as_model_errors(code_env, baseline):
    code_env.execute(CODE_BASELINES[0])
    assert_clean(run_cases(code_env.execute, hostile_cases(baseline), budget_s=6.0))
    code_env.execute(CODE_BASELINES[0])
    assert code_env.execute(call("run_tests")).content == "2/2 tests passed."


def test_a_sandbox_that_cannot_start_is_an_env_fault(code_env, monkeypatch):
    import trajforge.envs.sandbox as sandbox

    def no_bwrap(*args, **kwargs):
        raise FileNotFoundError(2, "No such file or directory", "bwrap")

    monkeypatch.setattr(sandbox.subprocess, "Popen", no_bwrap)
    result = code_env.execute(call("run_python", code="print(1)"))
    assert result.fault and result.error == "sandbox" and "could not start" in result.content


def test_a_full_disk_is_an_env_fault_and_a_bad_path_is_not(code_env, monkeypatch):
    import errno

    import trajforge.envs.code.env as code

    def full(root, rel, data):
        raise OSError(errno.ENOSPC, "No space left on device")

    assert code_env.execute(call("write_file", path="a/../b.py", content="x")).error == "bad_path"
    monkeypatch.setattr(code.workdir, "write_file", full)
    result = code_env.execute(call("write_file", path="solution.py", content="x = 1"))
    assert result.fault and result.error == "workdir"


# ---- mcp ---------------------------------------------------------------------------------------

MCP_TOOLS = [
    {"name": "put", "description": "Store a value.", "inputSchema": {"type": "object", "properties": {
        "key": {"type": "string"}, "value": {}}, "required": ["key", "value"]}},
    {"name": "get", "description": "Read a value.", "inputSchema": {
        "type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]}},
    {"name": "scale", "description": "Multiply a stored number.", "inputSchema": {
        "type": "object", "properties": {"key": {"type": "string"}, "factor": {"type": "number"}},
        "required": ["key", "factor"]}},
    {"name": "submit", "description": "Submit.", "inputSchema": {
        "type": "object", "properties": {"answer": {}}, "required": ["answer"]}},
]
MCP_MODULE = '''
from trajforge.envs import ToolError

final_tool = "submit"


def make_state(task):
    return {"x": 2}


def put(state, key, value):
    state[key] = value
    return f"stored {key} = {value!r}"


def get(state, key):
    if key not in state:
        raise ToolError(f"no key {key!r}", kind="no_key")
    return state[key]


def scale(state, key, factor):
    state[key] = state[key] * factor  # crashes on what it did not expect: the model's doing
    return state[key]


def submit(state, answer):
    return "submitted"
'''
MCP_BASELINES = [call("put", key="y", value=3), call("get", key="x"), call("scale", key="x", factor=2),
                 call("submit", answer=4)]


@pytest.mark.parametrize("baseline", MCP_BASELINES, ids=lambda c: c.name)
def test_mcp_tools_take_hostile_arguments_as_model_errors(tmp_path, baseline):
    (tmp_path / "kv.json").write_text(json.dumps(MCP_TOOLS))
    (tmp_path / "kv.py").write_text(textwrap.dedent(MCP_MODULE))
    name = f"mcp:{tmp_path / 'kv.json'}"
    env = make_env(name)
    env.reset(Task(id="m", env=name, prompt="p", tier="easy", split="train", template="x",
                   reference=(), expected=4))
    assert_clean(run_cases(env.execute, hostile_cases(baseline), budget_s=2.0,
                           between=lambda: env.state.update(x=2)))
    assert env.execute(call("get", key="x")).content == "2"
