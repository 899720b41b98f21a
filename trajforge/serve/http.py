"""The HTTP server: ``GET /v1/models`` and ``POST /v1/chat/completions`` on the stdlib's
``ThreadingHTTPServer`` (no web framework: two routes, and the backend serializes generation anyway).

    with start_server(model="smollm2-135m", adapters={"sql": "runs/adapter"}) as server:
        OpenAI(base_url=server.url, api_key="none").chat.completions.create(model="sql", ...)

Keep-alive HTTP/1.1; streamed answers are server-sent events over chunked transfer encoding, ending
with ``data: [DONE]``. Every answer that is not a completion is an OpenAI-style
``{"error": {"message", "type", "param", "code"}}`` body, the stdlib's own refusals (a bad request
line, a URI or header too long) included: 400 for a bad request (bad JSON, a wrong field, a prompt
past the context), 404 for an unknown model or path, 405 for another method, 408 for a body that
stops arriving, 411 without a Content-Length, 413 for a body over ``MAX_BODY``, and 500 with the
exception's type only when generation itself fails (a bug, not the request). After an error the
connection closes; what the client is still sending is read and dropped first (for at most
``LINGER_S``), so the close does not reset the connection before the client has read the answer.
"""

from __future__ import annotations

import json
import re
import socket
import sys
import threading
import time
import traceback
from contextlib import closing
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from trajforge.serve.protocol import ServeError, load_json
from trajforge.serve.service import ChatService

MAX_BODY = 32 * 1024 * 1024
"""Largest request body read (bytes)."""
REQUEST_TIMEOUT_S = 30.0
"""Longest wait for the next bytes of a request (or for a client to take the answer's bytes)."""
LINGER_S = 2.0
"""After an error, how long to keep reading (and dropping) what the client still sends."""
_DIGITS = re.compile(r"[0-9]{1,18}")


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: "_HTTPServer"

    def setup(self) -> None:
        self.timeout = self.server.request_timeout_s  # StreamRequestHandler applies it to the socket
        self._unread = False  # a body is (maybe) still coming: linger before closing
        super().setup()

    def log_message(self, format: str, *args: Any) -> None:
        if self.server.verbose:
            super().log_message(format, *args)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """The stdlib's own refusals (bad request line, URI or headers too long, unknown method)
        as JSON like every other error; an unknown method is the client's error, 405."""
        code = 405 if code == 501 else code
        message = message or self.responses.get(code, ("request refused",))[0]
        if self.request_version == "HTTP/0.9":  # a garbled request line: still answer with a status line
            self.request_version = "HTTP/1.0"
        headers = getattr(self, "headers", None)  # unset when the request line itself was refused
        self._unread = bool(headers and headers.get("Content-Length"))
        self._error(ServeError(code, message, code="method_not_allowed" if code == 405 else None))

    def do_GET(self) -> None:
        self._route(self._get)

    def do_POST(self) -> None:
        self._route(self._post)

    def _route(self, handler) -> None:
        """Run one route; whatever escapes it is still answered (and printed here, not sent)."""
        try:
            handler(self.path.split("?")[0].rstrip("/"))
        except ServeError as e:
            self._error(e)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        except Exception as e:  # noqa: BLE001 - a bug must reach the client as an answer, not a dead socket
            traceback.print_exc(file=sys.stderr)
            self._error(ServeError(500, f"internal error: {type(e).__name__}", kind="server_error"))

    def _get(self, path: str) -> None:
        if self.headers.get("Content-Length", "0") != "0" or self.headers.get("Transfer-Encoding"):
            self._unread = True  # a GET with a body: answer, then close rather than parse the body
            self.close_connection = True
        if path == "/v1/models":
            self._json(200, self.server.service.models_list())
        elif path == "/health":
            self._json(200, {"status": "ok"})
        else:
            raise ServeError(404, f"no route GET {path[:200]}", code="not_found")

    def _post(self, path: str) -> None:
        if path in ("/v1/load_lora_adapter", "/v1/unload_lora_adapter"):
            self._lora(path)
            return
        if path != "/v1/chat/completions":
            self._unread = True
            raise ServeError(404, f"no route POST {path[:200]}", code="not_found")
        prep = self.server.service.prepare(self._body())
        try:
            if prep.request.stream:
                self._sse(self.server.service.stream(prep))
            else:
                self._json(200, self.server.service.complete(prep))
        except (BrokenPipeError, ConnectionResetError):
            raise
        except Exception as e:  # noqa: BLE001 - a failed generation is answered, not a dead socket
            traceback.print_exc(file=sys.stderr)
            raise ServeError(500, f"generation failed: {type(e).__name__}: {e}", kind="server_error") from None

    def _lora(self, path: str) -> None:
        """vLLM's runtime adapter routes, only when the server was started allowing them."""
        if not self.server.allow_adapter_updates:
            self._unread = True
            raise ServeError(404, f"no route POST {path}: start the server with "
                             "--allow-adapter-updates to load adapters at runtime", code="not_found")
        service = self.server.service
        body = self._body()
        text = (service.load_adapter(body) if path.endswith("/load_lora_adapter")
                else service.unload_adapter(body))
        data = _utf8(text)
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _body(self) -> Any:
        """The request body as JSON; every way it can be wrong is a ServeError."""
        self._unread = True
        if self.headers.get("Transfer-Encoding"):
            raise ServeError(411, "chunked request bodies are not supported: send a Content-Length",
                             code="length_required")
        sizes = self.headers.get_all("Content-Length") or []
        if not sizes:
            raise ServeError(411, "a request body with a Content-Length header is required",
                             code="length_required")
        if len(set(sizes)) > 1 or not _DIGITS.fullmatch(sizes[0]):
            raise ServeError(400, "Content-Length must be one decimal number of bytes")
        size = int(sizes[0])
        if size > MAX_BODY:
            raise ServeError(413, f"request body is {size} bytes; at most {MAX_BODY}", code="body_too_large")
        try:
            raw = self.rfile.read(size)
        except TimeoutError:
            raise ServeError(408, f"the request body stopped arriving before its {size} bytes "
                             f"(Content-Length); waited {self.server.request_timeout_s:g} s",
                             code="request_timeout") from None
        if len(raw) < size:
            raise ServeError(400, f"the request body ended after {len(raw)} of its {size} bytes (Content-Length)")
        self._unread = False
        return load_json(raw, "request body")

    def _json(self, status: int, obj: Any, close: bool = False) -> None:
        data = _utf8(json.dumps(obj, ensure_ascii=False))
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
        try:
            self._json(e.status, e.body(), close=True)
            self.wfile.flush()
            if self._unread:
                self._linger()
        except OSError:  # the client is gone (or stopped reading): nothing left to answer
            self.close_connection = True

    def _linger(self) -> None:
        """Drop what the client still sends, until it closes, ``LINGER_S`` passes or ``MAX_BODY``
        bytes were dropped: closing with unread bytes would reset the connection and could take
        the answer down with it."""
        self.connection.shutdown(socket.SHUT_WR)
        deadline, dropped = time.monotonic() + LINGER_S, 0
        while dropped <= MAX_BODY:
            left = deadline - time.monotonic()
            if left <= 0:
                return
            self.connection.settimeout(left)
            try:
                data = self.rfile.read1(65536)
            except (TimeoutError, OSError):
                return
            if not data:
                return
            dropped += len(data)

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
                    self._chunk(f"data: {json.dumps(event, ensure_ascii=False)}\n\n")
            except (BrokenPipeError, ConnectionResetError, TimeoutError):
                self.close_connection = True
                return
            except Exception as e:  # noqa: BLE001 - headers are sent: report in-band, as vLLM does
                traceback.print_exc(file=sys.stderr)
                err = ServeError(500, f"generation failed: {type(e).__name__}: {e}", kind="server_error")
                self._chunk(f"data: {json.dumps(err.body())}\n\n")
        self._chunk("data: [DONE]\n\n")
        self._chunk("")

    def _chunk(self, text: str) -> None:
        data = _utf8(text)
        self.wfile.write(f"{len(data):X}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()


def _utf8(text: str) -> bytes:
    """UTF-8 for the wire. A lone surrogate (model output can decode to one) becomes ``?`` rather
    than an exception after the status line was chosen."""
    return text.encode("utf-8", "replace")


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address, service: ChatService, verbose: bool, allow_adapter_updates: bool = False,
                 request_timeout_s: float = REQUEST_TIMEOUT_S):
        self.service = service
        self.verbose = verbose
        self.allow_adapter_updates = allow_adapter_updates
        self.request_timeout_s = request_timeout_s
        super().__init__(address, _Handler)


class Server:
    """A running (or ready) server; ``url`` is the OpenAI ``base_url`` (ends in ``/v1``).

    ``close()`` stops ``serve_forever`` whichever thread runs it: ``start()``'s own or a caller's
    (``threading.Thread(target=server.serve_forever)``). Closing only the socket under a running
    ``serve_forever`` leaves its loop polling a dead descriptor at 100% of a core for the rest of
    the process (the test suite lost ~90 s a run to eight such threads)."""

    def __init__(self, service: ChatService, host: str = "127.0.0.1", port: int = 0, verbose: bool = False,
                 allow_adapter_updates: bool = False, request_timeout_s: float = REQUEST_TIMEOUT_S):
        self.service = service
        self.httpd = _HTTPServer((host, port), service, verbose, allow_adapter_updates, request_timeout_s)
        self.host, self.port = self.httpd.server_address[:2]
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._serving = False  # serve_forever entered: close() must shut it down
        self._closed = False

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def start(self) -> "Server":
        """Serve from a background thread (tests, notebooks)."""
        self._thread = threading.Thread(target=self.serve_forever, daemon=True, name="trajforge-serve")
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        with self._lock:
            if self._closed:
                return  # closed before this thread got here: the socket is gone
            self._serving = True
        # socketserver's shutdown() waits for a serve_forever that has not begun yet, so a close()
        # between the flag and the loop still ends it.
        self.httpd.serve_forever()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            serving = self._serving
        if serving:
            self.httpd.shutdown()  # returns at once when the loop has already ended
        if self._thread is not None:
            self._thread.join()
        self.httpd.server_close()

    def __enter__(self) -> "Server":
        return self if self._thread else self.start()

    def __exit__(self, *exc) -> None:
        self.close()


def build_server(model: str, adapters: dict[str, str] | None = None, dialect: str | None = None,
                 host: str = "127.0.0.1", port: int = 0, dtype: str = "auto", verbose: bool = False,
                 allow_adapter_updates: bool = False, chat_template: str | None = None) -> Server:
    """Load the model and adapters and bind the socket (``port=0``: a free port); not started.
    ``chat_template``: template text for the base model (``--chat-template FILE``); an adapter
    renders with the one its meta records.

    ``allow_adapter_updates`` opens vLLM's ``POST /v1/load_lora_adapter`` and
    ``/v1/unload_lora_adapter`` (what ``VLLM_ALLOW_RUNTIME_LORA_UPDATING`` does there): anyone who
    can reach the port can then make the server read a folder, so it is off by default."""
    from trajforge.serve.adapters import served_models
    from trajforge.serve.backend import HFBackend

    adapters = adapters or {}
    models = served_models(model, adapters, dialect)  # refuse bad adapters before loading weights
    service = ChatService(HFBackend(model, adapters, dtype, chat_template=chat_template), models)
    return Server(service, host, port, verbose, allow_adapter_updates)


def start_server(*args: Any, **kwargs: Any) -> Server:
    """``build_server`` and start it in a background thread."""
    return build_server(*args, **kwargs).start()
