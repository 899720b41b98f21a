"""The shop's loopback HTTP server: one per process, shared by every WebEnv, state per session.

Why one shared server rather than one per environment: the harness builds an environment per
episode, so a server per environment would open and close a listening socket and a thread
hundreds of times in one collection run. A shared server costs one port and one thread for the
whole process; sessions (a cookie, as on any real site) keep episodes apart, and each session's
state is a ``SessionState`` the environment exports and imports in-process for snapshot/restore.
A forked child notices it is not the process that started the server and starts its own.

The handler speaks HTTP/1.0 (one request per connection), so no handler thread waits on an idle
keep-alive connection after a client goes away; on loopback a fresh connection costs well under a
millisecond.
"""

from __future__ import annotations

import logging
import os
import secrets
import threading
from http.cookies import CookieError, SimpleCookie
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit

from trajforge.envs.web.shop.catalog import build_catalog
from trajforge.envs.web.shop.site import Response, handle
from trajforge.envs.web.shop.state import SessionState

log = logging.getLogger(__name__)

COOKIE = "shop_session"
NO_SESSION = 403
"""The status of a request whose session cookie the server does not know (the only 403)."""
MAX_BODY = 64 * 1024
"""Form posts are a few hundred bytes; anything bigger is refused before it is read."""


class ShopServer:
    """A running shop site on 127.0.0.1 with an ephemeral port."""

    def __init__(self, host: str = "127.0.0.1"):
        self._lock = threading.Lock()
        self._sessions: dict[str, SessionState] = {}
        self._httpd = ThreadingHTTPServer((host, 0), _Handler)
        self._httpd.shop = self  # type: ignore[attr-defined]  # the handler finds us here
        self._thread = threading.Thread(target=self._httpd.serve_forever,
                                        kwargs={"poll_interval": 0.2},
                                        name="trajforge-webshop", daemon=True)
        self._thread.start()

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    # ---- sessions -----------------------------------------------------------------------------

    def open_session(self, seed: int, world: int = 0) -> str:
        """A new, empty session shopping in the catalog for ``seed`` (in ``world``); returns its
        cookie value."""
        build_catalog(seed, world)  # build outside the lock: the first build of a seed takes a moment
        sid = secrets.token_urlsafe(16)
        with self._lock:
            self._sessions[sid] = SessionState(seed=seed, world=world)
        return sid

    def close_session(self, sid: str) -> None:
        with self._lock:
            self._sessions.pop(sid, None)

    def export_session(self, sid: str) -> dict:
        """The session's full state as plain data (for snapshots)."""
        with self._lock:
            return self._get(sid).model_dump()

    def import_session(self, sid: str, data: dict) -> None:
        """Replace the session's state with an exported one."""
        state = SessionState.model_validate(data)
        with self._lock:
            self._get(sid)  # only live sessions can be restored into
            self._sessions[sid] = state

    def session_state(self, sid: str) -> SessionState:
        """A copy of the session's state (what verifiers read)."""
        with self._lock:
            return self._get(sid).model_copy(deep=True)

    @property
    def session_count(self) -> int:
        with self._lock:
            return len(self._sessions)

    def _get(self, sid: str) -> SessionState:
        try:
            return self._sessions[sid]
        except KeyError:
            raise KeyError(f"no shop session {sid!r} (closed or never opened)") from None

    # ---- requests -----------------------------------------------------------------------------

    def respond(self, method: str, target: str, sid: str | None, form: dict[str, str]) -> Response:
        parts = urlsplit(target)
        query = _first_values(parts.query)
        with self._lock:
            state = self._sessions.get(sid or "")
            if state is None:
                return Response(NO_SESSION, "<!doctype html><title>No session</title><p>No shop session: "
                                     "this site is only reachable through its browser.</p>")
            return handle(build_catalog(state.seed, state.world), state, method, unquote(parts.path) or "/",
                          query, form)

    def shutdown(self) -> None:
        """Stop serving and free the port (tests; the shared server lives as long as the process)."""
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)


class _Handler(BaseHTTPRequestHandler):
    server_version = "TrailheadShop/1.0"
    protocol_version = "HTTP/1.0"

    def do_GET(self) -> None:  # http.server's naming
        self._serve("GET", {})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            self._send(Response(413, "<p>Request too large.</p>"))
            return
        ctype = self.headers.get("Content-Type", "").split(";")[0].strip()
        body = self.rfile.read(length).decode("utf-8", errors="replace")
        if body and ctype != "application/x-www-form-urlencoded":
            self._send(Response(415, "<p>Forms must be sent as application/x-www-form-urlencoded."
                                     "</p>"))
            return
        self._serve("POST", _first_values(body))

    def _serve(self, method: str, form: dict[str, str]) -> None:
        shop: ShopServer = self.server.shop  # type: ignore[attr-defined]
        try:
            resp = shop.respond(method, self.path, self._session_id(), form)
        except Exception:  # noqa: BLE001 - a page that fails on this request answers 500, as a
            # real site does; dropping the connection would read as the server being down.
            log.exception("the shop failed on %s %s", method, self.path[:200])
            resp = Response(500, "<!doctype html><title>Server error</title><p class=\"error\">"
                                 "The shop could not handle this request.</p>")
        self._send(resp)

    def _session_id(self) -> str | None:
        try:
            morsel = SimpleCookie(self.headers.get("Cookie", "")).get(COOKIE)
        except CookieError:
            return None
        return morsel.value if morsel else None

    def _send(self, resp: Response) -> None:
        data = resp.body.encode("utf-8")
        self.send_response(resp.status)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        if resp.location:
            self.send_header("Location", resp.location)
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:
        pass  # one line per request on stderr would drown the harness's own output


def _first_values(qs: str) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(qs, keep_blank_values=True).items()}


_shared: ShopServer | None = None
_shared_pid: int | None = None
_shared_lock = threading.Lock()


def shared_server() -> ShopServer:
    """The process's shop server, started on first use (and again in a forked child)."""
    global _shared, _shared_pid
    with _shared_lock:
        if _shared is None or _shared_pid != os.getpid() or not _shared.running:
            _shared = ShopServer()
            _shared_pid = os.getpid()
        return _shared
