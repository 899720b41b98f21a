"""Web environment: shop and book on a real loopback web site through a text browser.

The site (``trajforge.envs.web.shop``) is a shop generated from the task's seed: categories,
brands, products with colors/sizes/stock, a cart, a checkout form and a class-booking form. It is
served over real HTTP on 127.0.0.1 by one server per process; each environment holds its own
session (a cookie), so episodes never see each other's carts or orders.

The agent's browser fetches pages with httpx and shows them as text in which every link, field
and button carries a number (``[7] button "Add to cart"``). Tools: ``open``, ``click``, ``type``,
``submit``, ``find``, ``read``. Typed values live in the browser until a form is submitted, as in
a real browser. Placing an order or a booking ends the episode; ``verify`` compares the server's
record of it with the task's goal (``webshop.goals``).

Milestones, in order: ``open`` (loaded a page), ``locate`` (reached the page of a product or class
the task needs), ``fill`` (the cart holds what the task asks for and the checkout or booking form
shows the right values), ``submit`` (an order or booking was placed).

State: the browser (current page, typed values, which form is active, which part of a long page
is shown) is deep-copied like any environment's; the server-side session (cart, orders, bookings,
stock sold) is exported with it, so ``restore`` undoes an order placed after the snapshot.
"""

from __future__ import annotations

import functools
import re
import ssl
from typing import Any
from urllib.parse import urlencode, urljoin, urlsplit

import httpx

from trajforge.envs.base import Environment, InfraError, ToolError, Verdict
from trajforge.envs.web.shop.goals import (
    BookingGoal,
    OrderGoal,
    goal_mismatch,
    goal_of,
    item_matches,
    read_goal,
    same_text,
)
from trajforge.envs.web.shop.page import Element, Page, parse_page
from trajforge.envs.web.shop.server import COOKIE, NO_SESSION, ShopServer, shared_server
from trajforge.envs.web.shop.state import SessionState
from trajforge.parse.limits import clean_text, clip, short
from trajforge.schema import Task

VIEW_LINES = 40
"""Lines per part of a page; longer pages are read part by part with ``read(page=N)``."""
FIND_LINES = 20
MAX_TYPED = 200
MAX_URL = 2000
"""Longest path ``open`` accepts (the shop's own URLs are under 200 characters)."""
SHOWN_ELEMENTS = 15
"""Elements an "no such element" error lists."""
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
SEVERAL_PLACED = "orders/bookings were placed; the task wanted one"
"""The end of a verdict's detail when more than one thing was placed (``web/failures.py``)."""


class WebEnv(Environment):
    """Buy things and book classes on a web shop through a text browser."""

    name = "web"
    tool_names = ("open", "click", "type", "submit", "find", "read")
    instructions = (
        "You are a shopping assistant using a text web browser on the Trailhead Outfitters "
        "online shop. Pages are shown as text; every link, form field and button has a number "
        "in brackets, like [7]. Open pages with open(url) using a path such as / or "
        "/search?q=lamp, follow links and press buttons with click(element), fill form fields "
        "and pick dropdown options with type(field, text), then submit() the form or click its "
        "button. The shopper is signed in, so checkout already shows their name and address. "
        "The task is finished when the order or booking is placed."
    )
    state_fields = ("page", "values", "active_form", "part", "placed_count")

    def __init__(self, seed: int = 0, timeout_s: float = 10.0, view_lines: int = VIEW_LINES):
        super().__init__(seed=seed)
        self.timeout_s = timeout_s
        self.view_lines = view_lines
        self.page: Page | None = None
        self.values: dict[int, str] = {}
        """Typed values of the current page's fields, by element id."""
        self.active_form: int | None = None
        """The form last typed into; ``submit()`` sends it."""
        self.part = 1
        self.placed_count = 0
        self._server: ShopServer | None = None
        self._sid: str | None = None
        self._http: httpx.Client | None = None
        self._final: SessionState | None = None  # the session as it was at close()

    # ---- episode lifecycle ------------------------------------------------------------------

    def reset(self, task: Task) -> str:
        """Open a fresh shop session for ``task.seed`` (in ``task.world``) and load the home page."""
        super().reset(task)
        self.close()
        if task.expected is not None:
            read_goal(task.expected)  # a malformed goal is a broken task: fail before the model acts
        self._server = shared_server()
        self._sid = self._server.open_session(task.seed, task.world)
        self._final = None
        self._http = httpx.Client(base_url=self._server.base_url, cookies={COOKIE: self._sid},
                                  follow_redirects=True, trust_env=False, timeout=self.timeout_s,
                                  verify=_tls_context())
        self.values, self.active_form, self.part, self.placed_count = {}, None, 1, 0
        self.page = self._fetch("GET", "/")
        return self._view()

    def close(self) -> None:
        """End the session (its final state stays readable by ``verify``)."""
        if self._http is not None:
            self._http.close()
            self._http = None
        if self._server is not None and self._sid is not None:
            try:
                self._final = self._server.session_state(self._sid)
            except KeyError:
                self._final = None
            self._server.close_session(self._sid)
        self._sid = None

    def snapshot(self) -> dict[str, Any]:
        snap = super().snapshot()
        snap["session"] = self._require_server().export_session(self._sid or "")
        return snap

    def restore(self, snap: dict[str, Any]) -> None:
        super().restore({k: v for k, v in snap.items() if k != "session"})
        self._require_server().import_session(self._sid or "", snap["session"])

    def verify(self) -> Verdict:
        state = self._session()
        placed = [*state.orders, *state.bookings]
        if not placed:
            return Verdict(milestones=list(self.milestones), detail="no order or booking placed")
        first = placed[0]
        answer = first.model_dump()
        if self.task is None or self.task.expected is None:
            return Verdict(submitted=True, answer=answer, milestones=list(self.milestones),
                           detail="no goal to compare with")
        problem = goal_mismatch(read_goal(self.task.expected), first)
        if problem is None and len(placed) > 1:
            problem = f"{len(placed)} {SEVERAL_PLACED}"
        what = f"order #{first.number}" if hasattr(first, "lines") else f"booking #{first.number}"
        return Verdict(submitted=True, answer=answer, correct=problem is None,
                       milestones=list(self.milestones),
                       detail=f"{what} matches the task" if problem is None
                       else f"{what}: {problem}")

    def expected_outcome(self) -> dict[str, Any]:
        """The goal this episode's end state fulfils (for plan-driven synthesis): the one order or
        booking the plan placed, exactly (``goal_of``)."""
        state = self._session()
        placed = [*state.orders, *state.bookings]
        if len(placed) != 1:
            raise ToolError(f"the plan placed {len(placed)} orders/bookings; a task wants exactly "
                            "one", kind="no_final_call" if not placed else "verify_failed")
        return goal_of(placed[0]).model_dump()

    # ---- tools ------------------------------------------------------------------------------

    def open(self, url: str) -> str:
        """Open a page of the shop and show it.

        Args:
            url: A path on the shop, e.g. "/" (home page), "/search?q=red lamp", "/cart".
        """
        self._load("GET", self._site_path(url))
        return self._view()

    def click(self, element: str) -> str:
        """Click a link or button on the current page and show the page that results.

        Args:
            element: The element's number from the page, e.g. "12", or its exact text, e.g.
                "Add to cart".
        """
        el = self._element(element, ("link", "button"))
        if el.kind == "link":
            if not el.href:
                raise ToolError(f"link [{el.id}] {el.label!r} goes nowhere", kind="bad_element")
            self._load("GET", self._site_path(urljoin(self._page().url, el.href)))
        else:
            if el.form is None:
                raise ToolError(f"button [{el.id}] {el.label!r} does nothing on this page",
                                kind="bad_element")
            self._send_form(el.form, el)
        return self._view()

    def type(self, field: str, text: str) -> str:
        """Fill a form field or choose a dropdown option; nothing is sent until you submit.

        Args:
            field: The field's number from the page, e.g. "7", or its name, e.g. "quantity".
            text: The value to enter; for a dropdown, one of its options.
        """
        el = self._element(field, ("textbox", "select"))
        # What a keyboard can type: no control characters, no lone surrogates (a form post could
        # not encode them).
        text = _CONTROL.sub(" ", clean_text(str(text)))
        if len(text) > MAX_TYPED:
            raise ToolError(f"text is too long ({len(text)} characters; {MAX_TYPED} at most)",
                            kind="bad_value")
        value = _pick_option(el, text) if el.kind == "select" else " ".join(text.split())
        self.values[el.id] = value
        self.active_form = el.form
        self._progress()
        shown = el.option_text(value) if el.kind == "select" else value
        return f'Set [{el.id}] "{el.name}" to "{shown}" (sent when you submit the form).'

    def submit(self) -> str:
        """Submit the form you last typed into and show the page that results."""
        if self.active_form is None:
            raise ToolError("nothing to submit: type() into a form field first, or click a "
                            "form's button", kind="no_form")
        form = self._page().forms[self.active_form]
        button = self._page().element(form.buttons[0]) if form.buttons else None
        self._send_form(form.index, button)
        return self._view()

    def find(self, text: str) -> str:
        """Show the lines of the current page that contain some text (ignoring case).

        Args:
            text: The text to look for, e.g. "price" or "Add to cart".
        """
        needle = " ".join(str(text).split()).casefold()
        if not needle:
            raise ToolError("find() needs some text to look for", kind="bad_value")
        lines = self._page().lines(self.values)
        hits = [line for line in lines if needle in " ".join(line.split()).casefold()]
        shown = clip(clean_text(str(text)), 80)
        if not hits:
            return f'No line on this page contains "{shown}".'
        more = len(hits) - FIND_LINES
        out = "\n".join(hits[:FIND_LINES])
        return f'{len(hits)} line(s) contain "{shown}":\n{out}' + (
            f"\n... {more} more" if more > 0 else "")

    def read(self, page: int = 1) -> str:
        """Show the current page again; a long page is shown in parts.

        Args:
            page: Which part of a long page to show, starting at 1.
        """
        parts = self._parts()
        if not isinstance(page, int) or not 1 <= page <= parts:  # 1.5 or "2" would be kept as
            # the part shown and break every later view
            raise ToolError(f"this page has {parts} part(s); ask for 1 to {parts}",
                            kind="bad_value")
        self.part = page
        return self._view()

    # ---- browser ------------------------------------------------------------------------------

    def _fetch(self, method: str, path: str, data: dict[str, str] | None = None) -> Page:
        """One HTTP request (redirects followed). A page the server answered with an error status
        is a ToolError (the server is up: it was this request); no answer at all is an
        ``InfraError`` (the server is down or stuck), the one env fault here."""
        if self._http is None:
            raise InfraError("WebEnv used before reset(task)")  # caller bug -> env_fault
        try:
            resp = self._http.request(method, path, data=data)
        except httpx.TransportError as e:
            alive = self._server is not None and self._server.running
            raise InfraError(f"the shop server did not answer {method} {clip(path)} "
                             f"({type(e).__name__}{'' if alive else '; its thread has stopped'})",
                             kind="web_server_down") from None
        if resp.status_code == NO_SESSION:  # the browser's cookie is ours, never the model's
            raise InfraError("the shop server no longer has this episode's session",
                             kind="web_session_lost")
        url = resp.url.raw_path.decode("ascii", errors="replace")
        page = parse_page(resp.text, url)
        if resp.status_code >= 400:
            message = " ".join(page.errors) or page.title or f"HTTP {resp.status_code}"
            raise ToolError(f"{message} (HTTP {resp.status_code}; you are still on "
                            f"{self._page().url})", kind="http_error")
        return page

    def _load(self, method: str, path: str, data: dict[str, str] | None = None) -> None:
        self.page = self._fetch(method, path, data)
        self.values, self.active_form, self.part = {}, None, 1
        self.reach("open")
        self._progress()

    def _send_form(self, index: int, button: Element | None) -> None:
        page = self._page()
        form = page.forms[index]
        pairs = list(form.hidden)
        for eid in form.fields:
            el = page.element(eid)
            if el is not None and el.name:
                pairs.append((el.name, self.values.get(eid, el.value)))
        if button is not None and button.name:
            pairs.append((button.name, button.value))
        action = self._site_path(urljoin(page.url, form.action or page.url))
        if form.method == "get":
            base = action.split("?", 1)[0]
            self._load("GET", f"{base}?{urlencode(pairs)}")
        else:
            self._load("POST", action, dict(pairs))

    def _view(self) -> str:
        page = self._page()
        lines = page.lines(self.values)
        parts = self._parts()
        start = (self.part - 1) * self.view_lines
        body = "\n".join(lines[start:start + self.view_lines])
        head = f"URL: {page.url}\nTitle: {page.title}\n"
        foot = (f"\n(part {self.part} of {parts}; read(page={self.part + 1}) shows more)"
                if self.part < parts else "")
        return head + body + foot

    def _parts(self) -> int:
        return max(1, -(-len(self._page().raw_lines) // self.view_lines))

    def _element(self, ref: str, kinds: tuple[str, ...]) -> Element:
        """Find an element by number ("7", "[7]") or by its text/name (case-insensitive)."""
        page = self._page()
        what = "field" if "textbox" in kinds else "link or button"
        key = str(ref).strip()
        number = key.strip("[]").strip()
        # isdecimal, not isdigit: int() refuses "²", a digit; and past 4300 digits it refuses any
        # number, while no page has a billion elements.
        if number.isdecimal():
            el = page.element(int(number)) if len(number) < 10 else None
            if el is None:
                raise ToolError(f"no element [{clip(number, 20)}] on this page; "
                                f"{_listing(page, kinds)}", kind="bad_element")
            if el.kind not in kinds:
                hint = "use type() to fill it" if el.kind in ("textbox", "select") else \
                    "use click() on it"
                raise ToolError(f"[{el.id}] is a {el.kind}, not a {what}; {hint}",
                                kind="bad_element")
            return el
        wanted = " ".join(key.split()).casefold()
        if not wanted:
            raise ToolError(f"give the {what}'s number or text", kind="bad_element")
        pool = [e for e in page.elements if e.kind in kinds]
        for match in (lambda e: wanted in (e.label.casefold(), e.name.casefold()),
                      lambda e: wanted in e.label.casefold()):
            hits = [e for e in pool if match(e)]
            if len(hits) == 1:
                return hits[0]
            if len(hits) > 1:
                ids = ", ".join(f"[{e.id}]" for e in hits[:8])
                raise ToolError(f"{short(ref)} matches several elements ({ids}); use its number",
                                kind="bad_element")
        raise ToolError(f"no {what} called {short(ref)} on this page; {_listing(page, kinds)}",
                        kind="bad_element")

    def _site_path(self, url: str) -> str:
        """A path on the shop from what the model wrote (path, or a URL on this site)."""
        url = str(url).strip()
        if not url:
            raise ToolError("open() needs a path, e.g. / or /search?q=lamp", kind="bad_url")
        if len(url) > MAX_URL:
            raise ToolError(f"the URL is {len(url)} characters long; the shop's pages need under "
                            f"{MAX_URL} (e.g. /search?q=red lamp)", kind="bad_url")
        if _CONTROL.search(url) or clean_text(url) is not url:
            raise ToolError(f"the URL {short(url)} contains control or invalid characters; use a "
                            "path such as / or /search?q=lamp", kind="bad_url")
        parts = urlsplit(url)
        if parts.scheme or parts.netloc:
            here = urlsplit(self._require_server().base_url).netloc
            if parts.scheme not in ("http", "https") or parts.netloc != here:
                raise ToolError(f"only the shop's own pages can be opened, not {short(url)}; use a "
                                "path such as / or /search?q=lamp", kind="bad_url")
        path = parts.path if parts.path.startswith("/") else "/" + parts.path
        return path + (f"?{parts.query}" if parts.query else "")

    # ---- progress and verification --------------------------------------------------------

    def _progress(self) -> None:
        """Record milestones after an action; end the episode once something was placed."""
        state = self._session()
        goal = read_goal(self.task.expected) if self.task and self.task.expected else None
        if goal is not None:
            if self._located(goal):
                self.reach("locate")
            if self._filled(goal, state):
                self.reach("fill")
        placed = len(state.orders) + len(state.bookings)
        if placed > self.placed_count:
            self.placed_count = placed
            self.reach("submit")
            self.done = True

    def _located(self, goal: OrderGoal | BookingGoal) -> bool:
        path = self._page().url.split("?", 1)[0]
        if isinstance(goal, BookingGoal):
            return path == f"/classes/{goal.workshop}"
        return any(path == f"/product/{item.product}" for item in goal.items)

    def _filled(self, goal: OrderGoal | BookingGoal, state: SessionState) -> bool:
        if isinstance(goal, BookingGoal):
            if not self._page().url.startswith(f"/classes/{goal.workshop}"):
                return False
            want = {"session": goal.session, "seats": str(goal.seats), "name": goal.name,
                    "email": goal.email}
            return all(same_text(self._field(k) or "", v) for k, v in want.items())
        if not self._page().url.startswith("/checkout") or not _cart_fits(goal, state):
            return False
        want = {"shipping": goal.shipping}
        if goal.ship_to is not None:
            want |= {"full_name": goal.ship_to.name, "address": goal.ship_to.address,
                     "city": goal.ship_to.city}
        return all(same_text(self._field(k) or "", v) for k, v in want.items())

    def _field(self, name: str) -> str | None:
        """The current value of the named field on this page (typed, else the page's own)."""
        el = next((e for e in self._page().elements if e.name == name and e.kind != "button"),
                  None)
        return None if el is None else self.values.get(el.id, el.value)

    def _session(self) -> SessionState:
        if self._sid is not None and self._server is not None:
            try:
                return self._server.session_state(self._sid)
            except KeyError:  # the server lost it (restarted, or the session was closed under us)
                raise InfraError("the shop server no longer has this episode's session",
                                 kind="web_session_lost") from None
        if self._final is not None:
            return self._final
        raise InfraError("WebEnv has no session: call reset(task) first")

    def _page(self) -> Page:
        if self.page is None:
            raise InfraError("WebEnv used before reset(task)")  # caller bug -> env_fault
        return self.page

    def _require_server(self) -> ShopServer:
        if self._server is None or self._sid is None:
            raise InfraError("WebEnv has no open session: call reset(task) first")
        return self._server


@functools.cache
def _tls_context() -> ssl.SSLContext:
    """One TLS context for every client: the site is plain http, but httpx builds a context per
    client otherwise, and loading the CA bundle (~50 ms) would dominate a short episode."""
    return ssl.create_default_context()


def _cart_fits(goal: OrderGoal, state: SessionState) -> bool:
    for item in goal.items:
        got = sum(c.quantity for c in state.cart
                  if item_matches(item, c.product, c.color, c.size))
        if got != item.quantity:
            return False
    return sum(c.quantity for c in state.cart) == sum(i.quantity for i in goal.items)


def _pick_option(el: Element, text: str) -> str:
    """The option value ``text`` names: its value or text exactly, else one unique prefix."""
    wanted = " ".join(text.split()).casefold()
    for value, label in el.options:
        if wanted in (value.casefold(), label.casefold()):
            return value
    hits = [v for v, label in el.options if label.casefold().startswith(wanted)] if wanted else []
    if len(hits) == 1:
        return hits[0]
    opts = ", ".join(label for _, label in el.options)
    raise ToolError(f"{short(text)} is not an option of [{el.id}] \"{el.name}\"; options: {opts}",
                    kind="bad_value")


def _listing(page: Page, kinds: tuple[str, ...]) -> str:
    """``links and buttons on this page: [1] "Home", [2] "Cart (0)", ...`` (fields by name, with a
    dropdown's options), at most SHOWN_ELEMENTS of them: what the model could have named."""
    fields = "textbox" in kinds
    pool = [e for e in page.elements if e.kind in kinds]
    if not pool:
        return f"this page has no {'form fields' if fields else 'links or buttons'}"

    def one(e: Element) -> str:
        if not fields:
            return f'[{e.id}] "{clip(e.label, 40)}"'
        opts = f" (options: {clip(', '.join(t for _, t in e.options), 60)})" if e.options else ""
        return f'[{e.id}] "{e.name}"{opts}'

    shown = ", ".join(one(e) for e in pool[:SHOWN_ELEMENTS])
    more = f", ... {len(pool) - SHOWN_ELEMENTS} more (read() or find() shows them)" \
        if len(pool) > SHOWN_ELEMENTS else ""
    return f"{'form fields' if fields else 'links and buttons'} on this page: {shown}{more}"
