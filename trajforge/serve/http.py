"""The HTTP server: ``GET /v1/models`` and ``POST /v1/chat/completions`` on the stdlib's
``ThreadingHTTPServer`` (no web framework: two routes, and the backend serializes generation anyway).

    with start_server(model="smollm2-135m", adapters={"sql": "runs/adapter"}) as server:
        OpenAI(base_url=server.url, api_key="none").chat.completions.create(model="sql", ...)

Keep-alive HTTP/1.1; streamed answers are server-sent events over chunked transfer encoding, ending
with ``data: [DONE]``. Errors are OpenAI-style ``{"error": {...}}`` bodies: 400 for a bad request
(bad JSON, a wrong field, a prompt past the context), 404 for an unknown model or path, 500 with the
exception's type when generation itself fails.
"""

from __future__ import annotations

import json
import sys
import threading
import traceback
from contextlib import closing
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from trajforge.serve.protocol import ServeError
from trajforge.serve.service import ChatService

MAX_BODY = 32 * 1024 * 1024
"""Largest request body read (bytes)."""


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: "_HTTPServer"

    def log_message(self, format: str, *args: Any) -> None:
        if self.server.verbose:
            super().log_message(format, *args)

    def do_GET(self) -> None:
        path = self.path.split("?")[0].rstrip("/")
        if path == "/v1/models":
            self._json(200, self.server.service.models_list())
        elif path == "/health":
            self._json(200, {"status": "ok"})
        else:
            self._error(ServeError(404, f"no route GET {path}", code="not_found"))

    def do_POST(self) -> None:
        path = self.path.split("?")[0].rstrip("/")
        if path in ("/v1/load_lora_adapter", "/v1/unload_lora_adapter"):
            self._lora(path)
            return
        if path != "/v1/chat/completions":
            self._drain()
            self._error(ServeError(404, f"no route POST {path}", code="not_found"))
            return
        try:
            prep = self.server.service.prepare(self._body())
        except ServeError as e:
            self._error(e)
            return
        try:
            if prep.request.stream:
                self._sse(self.server.service.stream(prep))
            else:
                self._json(200, self.server.service.complete(prep))
        except Exception as e:  # noqa: BLE001 - a failed generation is answered, not a dead socket
            traceback.print_exc(file=sys.stderr)
            self._error(ServeError(500, f"generation failed: {type(e).__name__}: {e}",
                                   kind="server_error"))

    def _lora(self, path: str) -> None:
        """vLLM's runtime adapter routes, only when the server was started allowing them."""
        if not self.server.allow_adapter_updates:
            self._drain()
            self._error(ServeError(404, f"no route POST {path}: start the server with "
                                   "--allow-adapter-updates to load adapters at runtime",
                                   code="not_found"))
            return
        service = self.server.service
        try:
            body = self._body()
            text = (service.load_adapter(body) if path.endswith("/load_lora_adapter")
                    else service.unload_adapter(body))
        except ServeError as e:
            self._error(e)
            return
        data = text.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _body(self) -> Any:
        size = self.headers.get("Content-Length")
        if size is None or not size.isdigit():
            raise ServeError(400, "a request body with a Content-Length header is required")
        if int(size) > MAX_BODY:
            raise ServeError(400, f"request body is {size} bytes; at most {MAX_BODY}")
        raw = self.rfile.read(int(size))
        try:
            return json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise ServeError(400, f"request body is not valid JSON: {e}") from None

    def _drain(self) -> None:
        size = self.headers.get("Content-Length")
        if size and size.isdigit():
            self.rfile.read(min(int(size), MAX_BODY))

    def _json(self, status: int, obj: Any, close: bool = False) -> None:
        data = json.dumps(obj, ensure_ascii=False).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if close:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        self.wfile.write(data)

    def _error(self, e: ServeError) -> None:
        # Close after an error: the request body may not have been read to its end.
        self._json(e.status, e.body(), close=True)

    def _sse(self, events) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        # closing(): a client that hangs up mid-stream must not leave generation (and its lock) open.
        with closing(events):
            try:
                for event in events:
                    self._chunk(f"data: {json.dumps(event, ensure_ascii=False)}\n\n".encode())
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True
                return
            except Exception as e:  # noqa: BLE001 - headers are sent: report in-band, as vLLM does
                traceback.print_exc(file=sys.stderr)
                err = ServeError(500, f"generation failed: {type(e).__name__}: {e}", kind="server_error")
                self._chunk(f"data: {json.dumps(err.body())}\n\n".encode())
        self._chunk(b"data: [DONE]\n\n")
        self._chunk(b"")

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):X}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address, service: ChatService, verbose: bool, allow_adapter_updates: bool = False):
        self.service = service
        self.verbose = verbose
        self.allow_adapter_updates = allow_adapter_updates
        super().__init__(address, _Handler)


class Server:
    """A running (or ready) server; ``url`` is the OpenAI ``base_url`` (ends in ``/v1``)."""

    def __init__(self, service: ChatService, host: str = "127.0.0.1", port: int = 0, verbose: bool = False,
                 allow_adapter_updates: bool = False):
        self.service = service
        self.httpd = _HTTPServer((host, port), service, verbose, allow_adapter_updates)
        self.host, self.port = self.httpd.server_address[:2]
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def start(self) -> "Server":
        """Serve from a background thread (tests, notebooks)."""
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True, name="trajforge-serve")
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        self.httpd.serve_forever()

    def close(self) -> None:
        if self._thread is not None:
            self.httpd.shutdown()
            self._thread.join()
        self.httpd.server_close()

    def __enter__(self) -> "Server":
        return self if self._thread else self.start()

    def __exit__(self, *exc) -> None:
        self.close()


def build_server(model: str, adapters: dict[str, str] | None = None, dialect: str | None = None,
                 host: str = "127.0.0.1", port: int = 0, dtype: str = "auto", verbose: bool = False,
                 allow_adapter_updates: bool = False) -> Server:
    """Load the model and adapters and bind the socket (``port=0``: a free port); not started.

    ``allow_adapter_updates`` opens vLLM's ``POST /v1/load_lora_adapter`` and
    ``/v1/unload_lora_adapter`` (what ``VLLM_ALLOW_RUNTIME_LORA_UPDATING`` does there): anyone who
    can reach the port can then make the server read a folder, so it is off by default."""
    from trajforge.serve.adapters import served_models
    from trajforge.serve.backend import HFBackend

    adapters = adapters or {}
    models = served_models(model, adapters, dialect)  # refuse bad adapters before loading weights
    service = ChatService(HFBackend(model, adapters, dtype), models)
    return Server(service, host, port, verbose, allow_adapter_updates)


def start_server(*args: Any, **kwargs: Any) -> Server:
    """``build_server`` and start it in a background thread."""
    return build_server(*args, **kwargs).start()
