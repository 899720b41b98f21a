"""A scripted OpenAI-compatible ``/v1/chat/completions`` server on 127.0.0.1, for tests and benchmarks.

The "model" follows each task's verified reference solution (found by the user prompt in the
request), one call per turn, as native ``tool_calls``; the server can add latency and inject
faults: HTTP 429 / 500 and connection resets at a given rate, or accept requests and never answer.

    with OpenAIServer(tasks, latency_s=0.2, fault_rate=0.1) as srv:
        policy = make_policy(f"openai:{srv.url}#m")

    python -m tests.openai_server --tasks tasks.jsonl --latency 0.2   # prints the URL, serves until killed
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import socket
import struct
import sys
import threading
from typing import Callable, Sequence

FAULTS = ("429", "500", "reset")


def reference_script(tasks: Sequence) -> Callable[[dict], dict]:
    """Answer each request with the next call of its task's reference (found by the user prompt);
    after the reference, a plain text answer."""
    by_prompt = {t.prompt: t for t in tasks}

    def reply(body: dict) -> dict:
        prompt = next(m["content"] for m in body["messages"] if m["role"] == "user")
        task = by_prompt[prompt]
        turn = sum(1 for m in body["messages"] if m["role"] == "assistant")
        if turn >= len(task.reference):
            return {"role": "assistant", "content": "I am done."}
        call = task.reference[turn]
        return {"role": "assistant", "content": None, "tool_calls": [
            {"id": f"call_{turn}", "type": "function",
             "function": {"name": call.name, "arguments": json.dumps(call.arguments)}}]}

    return reply


class OpenAIServer:
    """See the module docstring. ``hang=True``: read each request, never answer.

    An asyncio server on its own thread and loop (a thread per connection would make 128
    concurrent requests queue on the GIL and the server, not the harness, would be measured).
    HTTP/1.1 with keep-alive, as real servers do; only what chat completions need is parsed."""

    def __init__(self, tasks: Sequence = (), script: Callable[[dict], dict] | None = None,
                 latency_s: float = 0.0, fault_rate: float = 0.0, faults: Sequence[str] = FAULTS,
                 hang: bool = False, seed: int = 0):
        self.script = script or reference_script(tasks)
        self.latency_s, self.fault_rate, self.faults, self.hang = latency_s, fault_rate, faults, hang
        self.rng = random.Random(seed)
        self.requests = 0
        self.injected: dict[str, int] = {}
        self.loop = asyncio.new_event_loop()
        started = threading.Event()
        self.thread = threading.Thread(target=self._serve, args=(started,), daemon=True)
        self.thread.start()
        started.wait()
        self.url = f"http://127.0.0.1:{self.port}/v1"

    def _serve(self, started: threading.Event) -> None:
        asyncio.set_event_loop(self.loop)
        self.stop = asyncio.Event()
        self.server = self.loop.run_until_complete(
            asyncio.start_server(self._connection, "127.0.0.1", 0, backlog=1024))
        self.port = self.server.sockets[0].getsockname()[1]
        started.set()
        self.loop.run_forever()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), 0)
                body = json.loads(await reader.readexactly(length))
                if not await self._answer(body, writer):
                    return
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    async def _answer(self, body: dict, writer: asyncio.StreamWriter) -> bool:
        """Answer one request; False when the connection was dropped."""
        fault = self._draw()
        if self.hang:
            await self.stop.wait()
            return False
        if self.latency_s:
            await asyncio.sleep(self.latency_s)
        if fault == "reset":  # RST instead of an answer: the client sees a reset connection
            sock = writer.get_extra_info("socket")
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.transport.abort()
            return False
        if fault in ("429", "500"):
            status, payload = int(fault), {"error": {"message": f"injected {fault}"}}
        else:
            status, payload = 200, {"id": "x", "object": "chat.completion", "model": body.get("model"),
                                    "choices": [{"index": 0, "message": self.script(body),
                                                 "finish_reason": "stop"}]}
        data = json.dumps(payload).encode()
        reason = {200: "OK", 429: "Too Many Requests", 500: "Internal Server Error"}[status]
        writer.write(f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\n"
                     f"Content-Length: {len(data)}\r\n\r\n".encode() + data)
        await writer.drain()
        return True

    def _draw(self) -> str | None:
        self.requests += 1
        if self.fault_rate and self.rng.random() < self.fault_rate:
            kind = self.rng.choice(list(self.faults))
            self.injected[kind] = self.injected.get(kind, 0) + 1
            return kind
        return None

    def close(self) -> None:
        async def shutdown() -> None:
            self.stop.set()
            self.server.close()
            for task in asyncio.all_tasks():
                if task is not asyncio.current_task():
                    task.cancel()

        asyncio.run_coroutine_threadsafe(shutdown(), self.loop).result(timeout=5)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=5)

    def __enter__(self) -> "OpenAIServer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def main() -> None:
    ap = argparse.ArgumentParser(description="scripted OpenAI-compatible server (tests, benchmarks)")
    ap.add_argument("--tasks", required=True, help="task pool JSONL whose references the model follows")
    ap.add_argument("--latency", type=float, default=0.0)
    ap.add_argument("--fault-rate", type=float, default=0.0)
    args = ap.parse_args()
    from trajforge.tasks.pool import read_tasks

    srv = OpenAIServer(read_tasks(args.tasks), latency_s=args.latency, fault_rate=args.fault_rate)
    print(srv.url, flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        srv.close()
        sys.exit(0)


if __name__ == "__main__":
    main()
