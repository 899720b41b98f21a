"""A real headless Chromium driven over the Chrome DevTools Protocol, for report and viewer tests.

No extra dependency: Chromium's ``--remote-debugging-pipe`` speaks CDP as NUL-terminated JSON over
file descriptors 3 (commands in) and 4 (replies and events out), which is what Puppeteer's
``pipe: true`` uses. One page target is attached with a flat session; every console call, uncaught
exception and browser log entry is collected so a test can assert the page stayed clean.

    with Browser(require_system("chromium", "chromium")) as b:
        b.goto("http://127.0.0.1:8765/")
        b.wait_for("document.querySelectorAll('tr').length > 1")
        b.screenshot(tmp_path / "page.png")
        assert b.problems() == []

Made for a loaded 2-core CI box: generous timeouts, no sandbox as root, no GPU, a private profile
directory, and the browser process group killed on exit whatever happened.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import queue
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

TIMEOUT_S = 60.0


class BrowserError(RuntimeError):
    pass


def _high(fd: int) -> int:
    """The same pipe end under a number >= 10 (the original number is closed)."""
    high = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
    os.close(fd)
    return high


class Browser:
    def __init__(self, binary: str, width: int = 1400, height: int = 1000):
        self.binary = binary
        self.size = (width, height)
        self.events: list[dict[str, Any]] = []
        self._replies: dict[int, queue.Queue] = {}
        self._next_id = 0
        self._lock = threading.Lock()
        self.session: str | None = None

    # ---- process -------------------------------------------------------------------------------

    def __enter__(self) -> "Browser":
        self.profile = tempfile.mkdtemp(prefix="trajforge-chromium-")
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()
        # Chromium's ends get numbers >= 10 so that moving them to 3 and 4 cannot clobber each other.
        to_browser_r, from_browser_w = _high(to_browser_r), _high(from_browser_w)

        args = [self.binary, "--headless", "--remote-debugging-pipe", "--disable-gpu", "--no-first-run",
                "--no-default-browser-check", "--disable-extensions", "--disable-background-networking",
                "--disable-dev-shm-usage", "--mute-audio", "--hide-scrollbars", f"--user-data-dir={self.profile}",
                f"--window-size={self.size[0]},{self.size[1]}", "about:blank"]
        if os.geteuid() == 0:
            args.insert(1, "--no-sandbox")  # Chromium refuses to run its sandbox as root
        # The pipe ends must be fds 3 and 4 in Chromium: bash's exec redirections put them there
        # (dash cannot name fds above 9; preexec_fn is unsafe in a process with threads, such as a
        # test's server). Its own session, so killing the group takes Chromium's children too.
        wire = f'exec "$0" "$@" 3<&{to_browser_r} 4>&{from_browser_w} {to_browser_r}<&- {from_browser_w}>&-'
        # Chromium keeps its singleton socket in an org.chromium.Chromium.* folder of $TMPDIR, and
        # a SIGKILLed browser (see __exit__) never removes it: inside the profile, rmtree does.
        own_tmp = Path(self.profile) / "t"
        own_tmp.mkdir()
        self.proc = subprocess.Popen([shutil.which("bash") or "/bin/bash", "-c", wire, *args], pass_fds=(to_browser_r, from_browser_w),
                                     env={**os.environ, "TMPDIR": str(own_tmp)}, start_new_session=True, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._stderr: list[bytes] = []
        threading.Thread(target=self._drain_stderr, daemon=True).start()
        threading.Thread(target=self._read, daemon=True).start()
        try:
            target = self.call("Target.createTarget", {"url": "about:blank"}, session=False)["targetId"]
            self.session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True},
                                     session=False)["sessionId"]
            for domain in ("Page", "Runtime", "Log"):
                self.call(f"{domain}.enable")
            self.call("Emulation.setDeviceMetricsOverride",
                      {"width": self.size[0], "height": self.size[1], "deviceScaleFactor": 1, "mobile": False})
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(timeout=30)
        for fd in (self._to_browser, self._from_browser):
            try:
                os.close(fd)
            except OSError:
                pass
        shutil.rmtree(self.profile, ignore_errors=True)

    def _drain_stderr(self) -> None:
        for line in self.proc.stderr:
            self._stderr.append(line)

    def _read(self) -> None:
        buf = b""
        while True:
            try:
                chunk = os.read(self._from_browser, 1 << 16)
            except OSError:
                chunk = b""
            if not chunk:
                for q in list(self._replies.values()):
                    q.put({"error": {"message": "browser closed the pipe"}})
                return
            buf += chunk
            while b"\0" in buf:
                raw, _, buf = buf.partition(b"\0")
                msg = json.loads(raw)
                if "id" in msg and msg["id"] in self._replies:
                    self._replies[msg["id"]].put(msg)
                elif "method" in msg:
                    self.events.append(msg)

    # ---- protocol ------------------------------------------------------------------------------

    def call(self, method: str, params: dict[str, Any] | None = None, session: bool = True,
             timeout: float = TIMEOUT_S) -> dict[str, Any]:
        with self._lock:
            self._next_id += 1
            msg_id = self._next_id
            self._replies[msg_id] = q = queue.Queue()
        msg: dict[str, Any] = {"id": msg_id, "method": method, "params": params or {}}
        if session and self.session:
            msg["sessionId"] = self.session
        os.write(self._to_browser, json.dumps(msg).encode() + b"\0")
        try:
            reply = q.get(timeout=timeout)
        except queue.Empty:
            raise BrowserError(f"{method}: no reply in {timeout:.0f}s; chromium stderr: "
                               f"{b''.join(self._stderr[-20:]).decode(errors='replace')}") from None
        finally:
            self._replies.pop(msg_id, None)
        if "error" in reply:
            raise BrowserError(f"{method}: {reply['error'].get('message')}")
        return reply["result"]

    def evaluate(self, expression: str, timeout: float = TIMEOUT_S) -> Any:
        """Value of a JS expression in the page (promises awaited)."""
        res = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                             "awaitPromise": True}, timeout=timeout)
        if "exceptionDetails" in res:
            raise BrowserError(f"{expression!r} threw: {res['exceptionDetails'].get('exception', {}).get('description')}")
        return res["result"].get("value")

    def wait_for(self, expression: str, timeout: float = TIMEOUT_S) -> Any:
        """Poll until a JS expression is truthy; returns its value."""
        deadline = time.monotonic() + timeout
        while True:
            value = self.evaluate(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise BrowserError(f"timed out after {timeout:.0f}s waiting for {expression!r}")
            time.sleep(0.05)

    def goto(self, url: str, timeout: float = TIMEOUT_S) -> None:
        res = self.call("Page.navigate", {"url": url}, timeout=timeout)
        if res.get("errorText"):
            raise BrowserError(f"navigating to {url}: {res['errorText']}")
        self.wait_for("document.readyState === 'complete'", timeout)

    def click(self, selector: str) -> None:
        ok = self.evaluate(f"(() => {{ const e = document.querySelector({json.dumps(selector)}); "
                           f"if (!e) return false; e.click(); return true; }})()")
        if not ok:
            raise BrowserError(f"nothing matches {selector!r} to click")

    def screenshot(self, path: Path) -> Path:
        """A PNG of the whole page (not just the viewport)."""
        metrics = self.call("Page.getLayoutMetrics")["cssContentSize"]
        clip = {"x": 0, "y": 0, "width": metrics["width"], "height": min(metrics["height"], 12000), "scale": 1}
        data = self.call("Page.captureScreenshot", {"format": "png", "clip": clip, "captureBeyondViewport": True})
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data["data"]))
        return path

    def problems(self) -> list[str]:
        """Console errors/warnings, uncaught exceptions and error log entries seen so far."""
        out = []
        for e in self.events:
            method, p = e["method"], e.get("params", {})
            if method == "Runtime.exceptionThrown":
                d = p["exceptionDetails"]
                out.append(f"exception: {d.get('exception', {}).get('description') or d.get('text')}")
            elif method == "Runtime.consoleAPICalled" and p.get("type") in ("error", "warning", "assert"):
                out.append(f"console.{p['type']}: {[a.get('value', a.get('description')) for a in p.get('args', [])]}")
            elif method == "Log.entryAdded" and p["entry"].get("level") in ("error", "warning"):
                out.append(f"log {p['entry']['level']}: {p['entry'].get('text')} ({p['entry'].get('url', '')})")
        return out
