"""The memory cap of one sandboxed call: all its processes together, not each one.

RLIMIT_AS holds per process, so 32 processes of 1 GiB each could take 32 GiB. A call therefore
also gets a total, enforced by the best means the machine offers:

* **A memory cgroup** for the call (``Cgroup``), v2 (``memory.max``, ``memory.oom.group``) or v1
  (``memory.limit_in_bytes`` and, with swap accounting, ``memory.memsw.limit_in_bytes``). The
  kernel charges every page of every process in it (tmpfs pages included) and OOM-kills inside it
  when the total is reached. Call cgroups are made under the harness's own cgroup when that can
  hold children: v1 where the memory controller is mounted and writable (root), v2 where the own
  cgroup delegates ``memory`` to its children (``cgroup.subtree_control``). ``TRAJFORGE_CGROUP``
  names another parent (a delegated directory), or ``off`` to never use one.
* **Otherwise a supervisor** (``MemoryWatch`` without a cgroup) sums the memory of the call's
  processes every ``POLL_S``: the descendants of the started process (a pid namespace re-parents
  orphans to its pid 1, which is one of them, so daemons are counted too). It counts anonymous and
  shared-memory pages (``RssAnon + RssShmem``; file pages of shared libraries are shared and
  reclaimable) and, once that sum passes the cap, confirms with the proportional share
  (``Pss_Anon + Pss_Shmem`` from ``smaps_rollup``), which does not count copy-on-write pages twice
  after a fork, before it kills the call. Between two polls a call can overshoot by what it
  allocates in ``POLL_S``; RLIMIT_AS still bounds each process.

Either way ``MemoryWatch`` runs beside the call, kills all of it when the cap is hit (so a worker
killed by the OOM killer does not leave its pool waiting until the deadline) and reports the peak.
"""

from __future__ import annotations

import functools
import logging
import os
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

CGROUP_ENV = "TRAJFORGE_CGROUP"
"""A cgroup directory to create call cgroups in, or ``off``; unset: the harness's own cgroup."""
POLL_S = 0.05
"""How often the supervisor looks at the call's memory."""
_REMOVE_S = 2.0
"""How long a call cgroup may take to empty before it is left behind (with a warning)."""

log = logging.getLogger("trajforge.sandbox")


class CgroupParent(NamedTuple):
    """Where call cgroups can be made."""

    path: Path
    version: int
    """1 (the v1 memory controller) or 2 (the unified hierarchy)."""


class Cgroup:
    """One call's memory cgroup: made with its limit, joined by the call, removed after it."""

    _serial = 0
    _serial_lock = threading.Lock()

    def __init__(self, parent: CgroupParent, limit_bytes: int):
        with Cgroup._serial_lock:
            Cgroup._serial += 1
            serial = Cgroup._serial
        self.version = parent.version
        self.path = parent.path / f"trajforge-{os.getpid()}-{serial}"
        os.mkdir(self.path)
        try:
            if self.version == 2:
                self._write("memory.max", limit_bytes)
                self._write("memory.swap.max", 0, optional=True)
                self._write("memory.oom.group", 1, optional=True)  # OOM kills the whole call
            else:
                self._write("memory.limit_in_bytes", limit_bytes)
                self._write("memory.memsw.limit_in_bytes", limit_bytes, optional=True)  # no swap
        except OSError:
            self.remove()
            raise

    @classmethod
    def create(cls, limit_bytes: int) -> Cgroup | None:
        """A fresh call cgroup, or None where none can be made (the caller then supervises)."""
        parent = cgroup_parent()
        if parent is None:
            return None
        try:
            return cls(parent, limit_bytes)
        except OSError as e:
            log.warning("could not create a memory cgroup under %s (%s); falling back to "
                        "summing the call's memory", parent.path, e)
            return None

    def add(self, pid: int) -> None:
        """Move a process (all its threads) into the cgroup; its later children are born there."""
        self._write("cgroup.procs", pid)

    def oom_kills(self) -> int:
        """How many processes the kernel killed here for want of memory."""
        name = "memory.events" if self.version == 2 else "memory.oom_control"
        try:
            text = (self.path / name).read_text()
        except OSError:
            return 0
        fields = dict(line.split()[:2] for line in text.splitlines() if len(line.split()) >= 2)
        return int(fields.get("oom_kill", 0))

    def peak_bytes(self) -> int | None:
        name = "memory.peak" if self.version == 2 else "memory.max_usage_in_bytes"
        try:
            return int((self.path / name).read_text())
        except (OSError, ValueError):
            return None

    def kill_all(self) -> None:
        if self.version == 2 and (self.path / "cgroup.kill").exists():
            self._write("cgroup.kill", 1, optional=True)
            return
        for pid in self._pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def remove(self) -> None:
        """Delete the cgroup once its processes are gone (killing stragglers)."""
        deadline = time.monotonic() + _REMOVE_S
        while True:
            try:
                os.rmdir(self.path)
                return
            except FileNotFoundError:
                return
            except OSError as e:
                if time.monotonic() > deadline:
                    log.warning("memory cgroup %s is still busy (%s); leaving it", self.path, e)
                    return
            self.kill_all()
            time.sleep(0.01)

    def _pids(self) -> list[int]:
        try:
            return [int(p) for p in (self.path / "cgroup.procs").read_text().split()]
        except (OSError, ValueError):
            return []

    def _write(self, name: str, value: int, optional: bool = False) -> None:
        try:
            with open(self.path / name, "w") as f:
                f.write(str(value))
        except OSError:
            if not optional:
                raise


class MemoryWatch:
    """A supervisor thread for one call: kills it (through ``kill``) once its memory passes
    ``limit_bytes`` — seen as an OOM kill in its cgroup, or as the summed memory of the processes
    under ``root_pid`` when there is no cgroup — and records the peak it saw."""

    def __init__(self, root_pid: int, limit_bytes: int, kill: Callable[[], None],
                 cgroup: Cgroup | None):
        self.root_pid = root_pid
        self.limit_bytes = limit_bytes
        self.cgroup = cgroup
        self.exceeded = False
        self.peak = 0
        self._kill = kill
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="trajforge-memory-watch",
                                        daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop watching (after the call ended); takes a last look first."""
        self._stop.set()
        self._thread.join()
        if self.cgroup is not None:
            self.exceeded = self.exceeded or self.cgroup.oom_kills() > 0
            self.peak = max(self.peak, self.cgroup.peak_bytes() or 0)

    @property
    def peak_mb(self) -> float:
        return round(self.peak / 2**20, 1)

    def _run(self) -> None:
        while not self._stop.wait(POLL_S):
            if self._breached():
                self.exceeded = True
                self._kill()
                return

    def _breached(self) -> bool:
        if self.cgroup is not None:
            return self.cgroup.oom_kills() > 0
        pids = descendants(self.root_pid)
        total = sum(resident_bytes(pid) for pid in pids)
        if total > self.limit_bytes:
            # Confirm without counting copy-on-write pages twice (0: a kernel without Pss_Anon).
            total = sum(proportional_bytes(pid) for pid in pids) or total
        self.peak = max(self.peak, total)
        return total > self.limit_bytes


# ---- finding the cgroup parent ----------------------------------------------------------------

@functools.cache
def cgroup_parent() -> CgroupParent | None:
    """Where this process can make call cgroups (checked once per process by making one)."""
    setting = os.environ.get(CGROUP_ENV, "").strip()
    if setting.lower() in ("off", "none", "0", "false", "no"):
        return None
    if setting:
        path = Path(setting)
        candidates = [CgroupParent(path, 2 if (path / "cgroup.controllers").exists() else 1)]
    else:
        candidates = _own_cgroups()
    for parent in candidates:
        if _usable(parent):
            return parent
    return None


def _own_cgroups() -> list[CgroupParent]:
    try:
        mountinfo = Path("/proc/self/mountinfo").read_text()
        proc_cgroup = Path("/proc/self/cgroup").read_text()
    except OSError:
        return []
    return own_cgroups(mountinfo, proc_cgroup)


def own_cgroups(mountinfo: str, proc_cgroup: str) -> list[CgroupParent]:
    """A process's v2 and v1 memory cgroup directories (v2 first), from the text of its
    ``/proc/PID/mountinfo`` and ``/proc/PID/cgroup``."""
    mounts = parse_mountinfo(mountinfo)
    own = parse_proc_cgroup(proc_cgroup)
    out = []
    for version, controller in ((2, ""), (1, "memory")):
        if controller not in own:
            continue
        for mount in mounts:
            if version == 2 and mount.fstype != "cgroup2":
                continue
            if version == 1 and (mount.fstype != "cgroup" or "memory" not in mount.options):
                continue
            rel = os.path.relpath(own[controller], mount.root)
            if rel.startswith(".."):
                continue  # this mount does not show our cgroup
            out.append(CgroupParent(Path(os.path.normpath(Path(mount.point) / rel)), version))
            break
    return out


def _usable(parent: CgroupParent) -> bool:
    if parent.version == 2:
        try:
            delegated = (parent.path / "cgroup.subtree_control").read_text().split()
        except OSError:
            return False
        if "memory" not in delegated:
            return False
    elif not (parent.path / "memory.limit_in_bytes").exists():
        return False
    try:
        probe = Cgroup(parent, 2**30)
    except OSError:
        return False
    probe.remove()
    return True


class Mount(NamedTuple):
    root: str
    point: str
    fstype: str
    options: frozenset[str]
    """Super options (for a v1 cgroup mount: its controllers)."""


def parse_mountinfo(text: str) -> list[Mount]:
    """The fields of ``/proc/self/mountinfo`` a cgroup lookup needs."""
    out = []
    for line in text.splitlines():
        left, sep, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if not sep or len(fields) < 5 or len(tail) < 3:
            continue
        out.append(Mount(_unescape(fields[3]), _unescape(fields[4]), tail[0],
                         frozenset(tail[2].split(","))))
    return out


def parse_proc_cgroup(text: str) -> dict[str, str]:
    """``/proc/self/cgroup`` as controller -> path; the v2 hierarchy is the key ``""``."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        for controller in parts[1].split(","):
            out.setdefault(controller, parts[2])
    return out


def _unescape(field: str) -> str:
    # mountinfo writes space, tab, newline and backslash as octal escapes.
    for code in ("\\040", "\\011", "\\012", "\\134"):
        field = field.replace(code, chr(int(code[1:], 8)))
    return field


# ---- measuring processes ------------------------------------------------------------------------

def descendants(pid: int) -> list[int]:
    """``pid`` and every process below it (from each thread's ``children`` list)."""
    seen, todo = [], [pid]
    while todo:
        current = todo.pop()
        seen.append(current)
        try:
            tids = os.listdir(f"/proc/{current}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{current}/task/{tid}/children") as f:
                    todo += [int(c) for c in f.read().split()]
            except (OSError, ValueError):
                continue
    return seen


def resident_bytes(pid: int) -> int:
    """Anonymous + shared-memory resident bytes of one process (0 once it is gone)."""
    return _kb_sum(f"/proc/{pid}/status", ("RssAnon:", "RssShmem:"))


def proportional_bytes(pid: int) -> int:
    """Like ``resident_bytes``, but pages shared with other processes count by their share."""
    return _kb_sum(f"/proc/{pid}/smaps_rollup", ("Pss_Anon:", "Pss_Shmem:"))


def _kb_sum(path: str, keys: tuple[str, ...]) -> int:
    try:
        with open(path) as f:
            text = f.read()
    except OSError:
        return 0
    total = 0
    for line in text.splitlines():
        if line.startswith(keys):
            try:
                total += int(line.split()[1]) * 1024
            except (IndexError, ValueError):
                pass
    return total
