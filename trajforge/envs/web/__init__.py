"""The ``web`` environment: shop and book classes on a seeded site through a text browser.

``env`` (WebEnv: open, click, type, submit, find, read over loopback HTTP), ``shop/`` (the site:
catalog, its worlds, per-session state, pages, server, goals), ``templates`` and ``tasks`` (browsed,
replayed and verified shopping and booking tasks).
"""

from trajforge._compat import ENV_MODULE_NAMES, moved_names
from trajforge.envs.registry import EnvSpec
from trajforge.envs.web.mistakes import web_mistakes
from trajforge.envs.web.failures import wrong_answer_kind
from trajforge.envs.web.env import WebEnv
from trajforge.envs.web.tasks import generate_web_tasks, generator

SPEC = EnvSpec(name="web", env=WebEnv, generate=generate_web_tasks, world_generator=lambda w: generator(0, w),
               summary="shop and book classes on a seeded site through a text browser",
               wrong_answer=wrong_answer_kind,
               # Close: the page of a product or class the task needs was reached (locate), or its
               # form held the task's values (fill). Any page load is open; any order is submit.
               progress=frozenset({"locate", "fill"}),
               mistakes=web_mistakes)

__all__ = ["SPEC", "WebEnv"]

__getattr__ = moved_names(__name__, {
    **{n: "trajforge.envs.web.env" for n in (
        "FIND_LINES", "MAX_TYPED", "VIEW_LINES", "goal_mismatch", "goal_of", "item_matches", "read_goal",
        "same_text", "urlsplit")},
    **{n: "trajforge.envs.web.shop.goals" for n in ("BookingGoal", "OrderGoal")},
    **{n: "trajforge.envs.web.shop.page" for n in ("Element", "Page", "parse_page")},
    **{n: "trajforge.envs.web.shop.server" for n in ("COOKIE", "ShopServer", "shared_server")},
    "SessionState": "trajforge.envs.web.shop.state", **ENV_MODULE_NAMES})
