"""The web environment: browser tools over real HTTP, errors, milestones, verify, snapshot, cleanup."""

from __future__ import annotations

import os
import threading

import httpx
import pytest

from trajforge.envs import make_env
from trajforge.envs.web.env import WebEnv
from trajforge.envs.web.shop.catalog import build_catalog
from trajforge.envs.web.shop.server import shared_server
from trajforge.schema import Task, ToolCall

CATALOG = build_catalog(0)
SHOE = next(p for p in CATALOG.products
            if p.sizes and len(p.colors) > 1 and p.stock >= 3)


def order_task(color: str | None = SHOE.colors[1], shipping: str = "express",
               quantity: int = 2) -> Task:
    goal = {"kind": "order", "shipping": shipping,
            "items": [{"product": SHOE.id, "name": SHOE.name, "color": color,
                       "size": SHOE.sizes[1], "quantity": quantity}]}
    return Task(id="web-t", env="web", prompt=f"Buy {SHOE.name}", tier="medium", split="train",
                template="t", reference=(), expected=goal, seed=0)


def call(env, name, **args):
    return env.execute(ToolCall(name=name, arguments=args))


def buy(env, color=SHOE.colors[1], shipping="express", place=True):
    """Browse to SHOE, pick options, check out; returns the results of every call."""
    steps = [("open", {"url": "/"}), ("type", {"field": "q", "text": SHOE.name}), ("submit", {}),
             ("click", {"element": SHOE.name}), ("type", {"field": "color", "text": color}),
             ("type", {"field": "size", "text": SHOE.sizes[1]}),
             ("type", {"field": "quantity", "text": "2"}), ("click", {"element": "Add to cart"}),
             ("click", {"element": "Proceed to checkout"}),
             ("type", {"field": "shipping", "text": shipping})]
    if place:
        steps.append(("click", {"element": "Place order"}))
    results = [call(env, name, **args) for name, args in steps]
    assert all(r.ok for r in results), [r.content for r in results if not r.ok]
    return results


@pytest.fixture
def env():
    e = make_env("web")
    yield e
    e.close()


def test_toolset_schema_from_docstrings():
    tools = {t.name: t for t in WebEnv.toolset().tools}
    assert list(tools) == ["open", "click", "type", "submit", "find", "read"]
    assert tools["type"].parameters["required"] == ["field", "text"]
    assert "number from the page" in tools["click"].parameters["properties"]["element"]["description"]
    assert tools["read"].parameters["properties"]["page"] == {
        "type": "integer", "description": "Which part of a long page to show, starting at 1."}
    assert "submit" not in tools["submit"].parameters.get("required", [])


def test_reset_shows_home_page_and_a_full_purchase_verifies(env):
    first = env.reset(order_task())
    assert first.startswith("URL: /\nTitle: Home | Trailhead Outfitters\n")
    assert '[5] textbox "q" (Search products)' in first and env.milestones == []
    results = buy(env)
    assert results[2].content.startswith("URL: /search?")  # the GET form's query string
    assert results[3].content.startswith(f"URL: /product/{SHOE.id}")
    assert results[6].content == 'Set [10] "quantity" to "2" (sent when you submit the form).'
    assert "Cart (2)" in results[7].content
    assert results[-1].content.startswith("URL: /orders/1001")
    assert env.done and env.milestones == ["open", "locate", "fill", "submit"]
    verdict = env.verify()
    assert verdict.correct and verdict.submitted and verdict.detail == "order #1001 matches the task"
    assert verdict.answer["lines"][0]["size"] == SHOE.sizes[1]


def test_verify_names_what_is_wrong(env):
    env.reset(order_task())
    buy(env, shipping="standard")
    verdict = env.verify()
    assert verdict.submitted and not verdict.correct
    assert verdict.detail == "order #1001: shipping is standard, expected express"
    assert "fill" not in verdict.milestones  # the checkout form never showed express

    wrong_color = make_env("web")
    wrong_color.reset(order_task())
    buy(wrong_color, color=SHOE.colors[0])
    assert "expected 2 x " in wrong_color.verify().detail
    assert wrong_color.milestones == ["open", "locate", "submit"]
    wrong_color.close()

    any_color = make_env("web")
    any_color.reset(order_task(color=None))
    buy(any_color, color=SHOE.colors[0])
    assert any_color.verify().correct  # no color asked for: any will do
    any_color.close()


def test_tool_errors_are_clear_and_leave_the_page(env):
    env.reset(order_task())
    call(env, "open", url=f"/product/{SHOE.id}")
    cases = [
        (("click", {"element": "99"}), "no element [99] on this page"),
        (("click", {"element": "[8]"}), "[8] is a select, not a link or button; use type()"),
        (("type", {"field": "Add to cart", "text": "x"}), "no field called 'Add to cart'"),
        (("type", {"field": "11", "text": "x"}), "[11] is a button, not a field; use click()"),
        (("type", {"field": "color", "text": "plaid"}), "'plaid' is not an option of [8]"),
        (("click", {"element": "Nothing like this"}), "no link or button called"),
        (("submit", {}), "nothing to submit"),
        (("open", {"url": "https://example.com/"}), "only the shop's own pages"),
        (("open", {"url": "/no/such/page"}), "There is no page at /no/such/page. (HTTP 404"),
        (("find", {"text": "  "}), "find() needs some text"),
        (("read", {"page": 3}), "this page has 1 part(s)"),
        (("type", {"field": "q", "text": "x" * 201}), "text is too long"),
    ]
    for (name, args), message in cases:
        result = call(env, name, **args)
        assert not result.ok and message in result.content, (name, args, result.content)
        assert not result.fault
    assert env.page.url == f"/product/{SHOE.id}"  # nothing navigated away
    # A quantity the shop refuses is an HTTP 400 the model sees; typed values survive it.
    call(env, "type", field="quantity", text="50")
    refused = call(env, "click", element="Add to cart")
    assert not refused.ok and refused.error == "http_error"
    assert "quantity must be between 1 and 10" in refused.content
    assert 'textbox "quantity" = "50"' in call(env, "read").content


def test_element_lookup_by_text_and_ambiguity(env):
    env.reset(order_task())
    other = next(p for p in CATALOG.products if p.id != SHOE.id and p.stock > 0 and not p.sizes)
    for p in (SHOE, other):
        call(env, "open", url=f"/product/{p.id}")
        assert call(env, "click", element="add to CART").ok  # case-insensitive
    result = call(env, "click", element="Remove")
    assert not result.ok and "matches several elements" in result.content
    # A unique part of a label works too.
    assert call(env, "click", element="checkout").content.startswith("URL: /checkout")
    assert call(env, "type", field="Full name", text="Vera Bauer").ok  # by <label>
    assert call(env, "type", field="shipping", text="Express").ok  # option text prefix


def test_find_and_read_parts():
    env = WebEnv(view_lines=5)
    env.reset(order_task())
    view = call(env, "open", url="/").content
    assert view.endswith("(part 1 of 4; read(page=2) shows more)")
    second = call(env, "read", page=2).content
    assert "[8] link" in second and "part 2 of 4" in second
    found = call(env, "find", text="yoga").content
    assert found == '1 line(s) contain "yoga":\n- [14] link "Yoga Mats"'
    assert call(env, "find", text="zebra").content == 'No line on this page contains "zebra".'
    env.close()


def test_snapshot_restore_undoes_an_order(env):
    env.reset(order_task())
    buy(env, place=False)
    snap = env.snapshot()
    assert env.page.url == "/checkout" and "fill" in env.milestones
    call(env, "click", element="Place order")
    assert env.done and env.verify().correct
    env.restore(snap)
    assert not env.done and env.milestones == ["open", "locate", "fill"]
    assert env.page.url == "/checkout" and not env.verify().submitted
    # The cart and the typed shipping choice came back with it, and the order number is reused.
    assert "Express (next day)" in call(env, "read").content
    again = call(env, "click", element="Place order")
    assert again.content.startswith("URL: /orders/1001") and env.verify().correct
    env.restore(snap)  # a snapshot stays valid after being restored once
    assert env.verify().detail == "no order or booking placed"


def test_sessions_do_not_see_each_other():
    a, b = make_env("web"), make_env("web")
    a.reset(order_task())
    b.reset(order_task())
    buy(a)
    assert "Cart (0)" in call(b, "open", url="/cart").content
    assert not b.verify().submitted and a.verify().correct
    a.close()
    b.close()


def test_observations_are_deterministic():
    def transcript():
        env = make_env("web")
        env.reset(order_task())
        out = [r.content for r in buy(env)]
        env.close()
        return out

    assert transcript() == transcript()


def test_verify_after_close_reads_the_final_state(env):
    env.reset(order_task())
    buy(env)
    server = shared_server()
    sessions = server.session_count
    env.close()
    assert server.session_count == sessions - 1
    assert env.verify().correct
    env.close()  # closing twice is harmless


def test_transport_failure_is_an_env_fault(env):
    env.reset(order_task())
    env._http.close()
    env._http = httpx.Client(base_url="http://127.0.0.1:9", trust_env=False, timeout=1)
    result = call(env, "open", url="/")
    assert result.fault and result.error == "web_server_down" and "did not answer" in result.content


def test_bad_goal_fails_at_reset():
    env = make_env("web")
    bad = order_task().model_copy(update={"expected": {"kind": "teleport"}})
    with pytest.raises(ValueError, match="not a valid goal"):
        env.reset(bad)


def _open_fds() -> int | None:
    return len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else None


def test_hundreds_of_episodes_leak_no_threads_sessions_or_sockets():
    server = shared_server()
    task = order_task()
    warm = make_env("web")  # start the server and build the catalog before counting
    warm.reset(task)
    warm.close()
    threads, fds, sessions = threading.active_count(), _open_fds(), server.session_count
    reused = make_env("web")
    for i in range(300):
        env = reused if i % 2 else make_env("web")  # a reused env and fresh ones
        env.reset(task)
        if i % 10 == 0:
            call(env, "open", url="/cart")
        env.close()
    assert server.session_count == sessions
    assert shared_server() is server and server.running
    # Handler threads end with their one-request connection; allow a straggler mid-exit.
    assert threading.active_count() <= threads + 1
    if fds is not None:
        assert _open_fds() <= fds + 2


def test_element_numbers_int_refuses_and_non_integer_parts_are_tool_errors():
    env = WebEnv(view_lines=5)
    env.reset(order_task())
    # "²" is a digit to str.isdigit but not to int(); int() also refuses 4300+ digits.
    for ref in ("²", "9" * 5000):
        for name, args in (("click", {"element": ref}), ("type", {"field": ref, "text": "x"})):
            result = call(env, name, **args)
            assert result.error == "bad_element" and "on this page" in result.content, result.content
    for page in (1.5, "2"):  # what schema validation would stop, called directly
        result = call(env, "read", page=page)
        assert result.error == "bad_value" and "ask for 1 to 4" in result.content, result.content
    assert "(part 2 of 4;" in call(env, "read", page=2).content  # the bad part was never kept
    env.close()
