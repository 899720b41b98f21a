"""``trajforge view STORE``: a local web viewer of a store's episodes, on 127.0.0.1 only.

    trajforge view runs/demo/eval_store --port 8765     # then open http://127.0.0.1:8765/

    from trajforge.eval.viewer import make_server
    server = make_server("store/", port=0)              # port 0: any free port
    threading.Thread(target=server.serve_forever, daemon=True).start()

One static page (``static/viewer.html`` + ``viewer.js`` + CSS; no CDN, works offline) over a small
JSON API answered by ``Catalog`` (DuckDB over the store):

    GET /api/facets                       filter values with counts, total episodes
    GET /api/episodes?policy=..&page=2    one page of matching episodes (filters: task_id substring,
                                          outcome_tier, fail_reason, env, tier, policy, split;
                                          page, per_page)
    GET /api/episode?task_id=..&policy=..&sample=0
                                          the episode as conversation HTML (``conversation.py``, all
                                          model text escaped there) plus its metadata and the other
                                          episodes of the same task, to put side by side

Model output is untrusted. Defences, each enough on its own for what it covers: the server escapes
every text it renders; the page builds lists with ``textContent``; a Content-Security-Policy allows
only this origin's script and styles (an injected ``<script>`` or ``onerror=`` would not run); the
Host header must name the loopback address, so a web page in the user's browser cannot reach the
API through DNS rebinding. Bad parameters get a 400 with a JSON ``error`` naming the parameter.

A store is data someone else may have written: a line the catalog cannot read (torn, invalid
UTF-8, nested past what the parsers take) is left out of the table and counted in
``/api/facets``'s ``unreadable``; an episode whose record is too large or invalid to show answers a
422 naming why; every other episode is served as usual.
"""

from __future__ import annotations

import json
import sys
import traceback
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from trajforge.eval.catalog import FILTERS, Catalog, UnreadableEpisode
from trajforge.eval.conversation import conversation_html, static_text

HOST = "127.0.0.1"
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
STATIC = {
    "/": ("viewer.html", "text/html; charset=utf-8"),
    "/viewer.js": ("viewer.js", "text/javascript; charset=utf-8"),
    "/viewer.css": ("viewer.css", "text/css; charset=utf-8"),
    "/conversation.css": ("conversation.css", "text/css; charset=utf-8"),
}


class ApiError(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


def _one(params: dict[str, list[str]], name: str, default: str | None = None) -> str:
    values = params.get(name)
    if not values:
        if default is None:
            raise ApiError(400, f"missing parameter {name!r}")
        return default
    return values[-1]


def _int(params: dict[str, list[str]], name: str, default: int) -> int:
    raw = _one(params, name, str(default))
    try:
        return int(raw)
    except ValueError:
        raise ApiError(400, f"parameter {name!r} must be an integer, got {raw!r}") from None


def api(catalog: Catalog, path: str, params: dict[str, list[str]]) -> dict[str, Any]:
    """Answer one API call (pure function of the catalog, so it is testable without HTTP)."""
    try:
        if path == "/api/facets":
            return catalog.facets()
        if path == "/api/episodes":
            unknown = set(params) - {"page", "per_page", "task_id", *FILTERS}
            if unknown:
                raise ApiError(400, f"unknown parameter {min(unknown)!r}; filters are task_id, "
                                    f"{', '.join(FILTERS)} (plus page, per_page)")
            filters = {k: _one(params, k) for k in params if k not in ("page", "per_page")}
            return catalog.page(filters, _int(params, "page", 1), _int(params, "per_page", 50))
        if path == "/api/episode":
            task_id, policy, sample = _one(params, "task_id"), _one(params, "policy"), _int(params, "sample", 0)
            try:
                traj = catalog.episode(task_id, policy, sample)
            except UnreadableEpisode as e:  # the record is in the store but cannot be shown
                raise ApiError(422, str(e)) from None
            if traj is None:
                raise ApiError(404, f"no episode task_id={task_id!r} policy={policy!r} sample={sample} in the store")
            meta = {k: getattr(traj, k) for k in ("task_id", "policy", "sample", "env", "tier", "split")}
            meta["outcome_tier"] = traj.outcome.tier if traj.outcome else None
            return {"episode": meta, "html": conversation_html(traj), "siblings": catalog.siblings(task_id)}
    except ValueError as e:
        raise ApiError(400, str(e)) from e
    raise ApiError(404, f"no API endpoint {path!r}")


class Handler(BaseHTTPRequestHandler):
    server: "ViewerServer"
    protocol_version = "HTTP/1.1"
    # Headers and body go out in two writes; with Nagle on, the body waits for the client's
    # delayed ACK of the headers (~40 ms per request on keep-alive connections).
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:
        if self.server.verbose:
            super().log_message(format, *args)

    def _send(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Content-Security-Policy", CSP)
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(body)

    def _json(self, status: int, obj: Any) -> None:
        self._send(status, json.dumps(obj, default=str).encode(), "application/json")

    def _host_ok(self) -> bool:
        port = self.server.server_address[1]
        return self.headers.get("Host", "") in (f"{HOST}:{port}", f"localhost:{port}")

    def do_GET(self) -> None:
        if not self._host_ok():
            self._json(403, {"error": f"Host {self.headers.get('Host')!r} is not this loopback viewer"})
            return
        url = urlsplit(self.path)
        try:
            if url.path in STATIC:
                name, ctype = STATIC[url.path]
                self._send(200, static_text(name).encode(), ctype)
            elif url.path.startswith("/api/"):
                self._json(200, api(self.server.catalog, url.path, parse_qs(url.query, keep_blank_values=True)))
            else:
                self._json(404, {"error": f"not found: {url.path}"})
        except ApiError as e:
            self._json(e.status, {"error": str(e)})
        except Exception as e:  # a bug must reach the page as a message, not a dropped connection
            traceback.print_exc(file=sys.stderr)
            self._json(500, {"error": f"{type(e).__name__}: {e}"})


class ViewerServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, catalog: Catalog, port: int, verbose: bool = False):
        self.catalog = catalog
        self.verbose = verbose
        super().__init__((HOST, port), Handler)

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.server_address[1]}/"

    def server_close(self) -> None:
        super().server_close()
        self.catalog.close()


def make_server(store: str | Path, port: int = 0, verbose: bool = False) -> ViewerServer:
    """A viewer bound to 127.0.0.1:``port`` (0 picks a free port); call ``serve_forever``."""
    return ViewerServer(Catalog(store), port, verbose)
