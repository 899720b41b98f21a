"""The sandbox model-written code runs in: bubblewrap namespaces, seccomp, rlimits, a deadline.

    sandbox = Sandbox(make_workdir())            # self-tests once per process, or refuses
    result = sandbox.run([sandbox.python, "-c", "print(6 * 7)"])
    result.stdout, result.describe(sandbox.limits)   # "42\\n", "[exit code 0]"

Each ``run`` starts a fresh ``bwrap`` (bubblewrap) sandbox; each layer is there for a reason:

* Namespaces (user, pid, net, ipc, uts, cgroup): no network at all (only a downed loopback, so a
  server the host runs on 127.0.0.1 is unreachable too), no view of host processes, and when the
  sandbox's pid 1 exits the kernel kills everything left in the namespace — a double-forked,
  ``setsid`` or ``nohup`` daemon cannot outlive the call.
* Filesystem: ``/usr`` (and the ``/bin``, ``/lib*`` links or dirs) read-only, the few ``/etc``
  files the dynamic loader reads, a private size-capped tmpfs at ``/tmp``, fresh ``/proc`` and
  minimal ``/dev``, and the work directory at ``/work`` — the only writable place that persists.
  Nothing else of the host exists inside: not ``/root``, ``/home``, ``/etc/shadow`` or the repo.
* Identity: ``--clearenv`` plus a minimal PATH/HOME/LANG, so the harness's environment (API keys)
  is invisible; all capabilities dropped; no further user namespaces; a seccomp filter
  (``seccomp.py``) denies ptrace, mount, unshare, bpf, io_uring and similar calls.
* Unprivileged uid: RLIMIT_NPROC is not enforced for uid 0, and the harness often runs as root (CI,
  containers). So as root, bwrap is started as ``SANDBOX_UID`` (nobody) and the user namespace maps
  the sandbox's uid to it; the fork-bomb test proves the limit holds.
* rlimits (CPU seconds, address space, file size, open files, processes, no core files) are set
  by ``prlimit`` *inside* the user namespace: the kernel counts RLIMIT_NPROC per user namespace,
  so concurrent sandboxes don't eat each other's process budget, and a non-root user's own
  processes outside don't count against the sandbox.
* Memory of the whole call: ``call_memory_mb`` bounds all its processes together (RLIMIT_AS only
  bounds each one), with a memory cgroup for the call where one can be made and otherwise a
  supervisor that sums the call's memory and kills it (``memlimit.py``). To be inside the cgroup
  before it can fork, the started process is a ``sh`` that waits for one line on stdin, which the
  host sends only once it has moved that process in; then it execs bwrap.
* Deadline: past ``wall_s`` the whole process group is SIGKILLed; bwrap's ``--die-with-parent``
  makes the namespace's pid 1 die with it, which takes down every process inside.
* Output: stdout and stderr are each kept as head + tail with a ``[... N bytes cut ...]`` marker,
  read as they arrive, so a program printing gigabytes costs bounded memory.

Not bounded: the total bytes written into the work directory during one call (each file is capped
by RLIMIT_FSIZE and time by the deadline); ``CodeEnv`` checks the directory's size after each call.

The self-test (``check_sandbox``, once per process, cached) runs a probe inside a real sandbox and
checks all of the above that a program can observe. If it fails, ``Sandbox`` raises
``SandboxUnavailable`` naming what failed and how to fix it, unless the caller allows unsandboxed
execution (``allow_unsandboxed=True`` or ``TRAJFORGE_UNSAFE_NO_SANDBOX=1``): then code runs as a
plain subprocess with the same rlimits and deadline, after a loud warning.
"""

from __future__ import annotations

import errno
import functools
import json
import logging
import os
import resource
import select
import selectors
import shutil
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from trajforge.envs.base import InfraError
from trajforge.envs.memlimit import Cgroup, MemoryWatch
from trajforge.envs.seccomp import filter_program
from trajforge.envs.workdir import (
    SANDBOX_UID,
    make_workdir,
    remove_workdir,
    sandbox_owner,
)

UNSAFE_ENV = "TRAJFORGE_UNSAFE_NO_SANDBOX"
"""Set to 1 to let code run without the sandbox when the self-test fails (rlimits still hold)."""
PYTHON_ENV = "TRAJFORGE_SANDBOX_PYTHON"
"""Override the interpreter sandboxed code runs with (default: /usr/bin/python3)."""
WORK = "/work"
"""Where the work directory appears inside the sandbox."""
_SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# Files the dynamic loader and the time module read; nothing secret.
_ETC_FILES = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime",
              "/etc/alternatives")
SHM_MB = 16
"""Size of the private tmpfs at /dev/shm."""
_DRAIN_S = 2.0
"""After the kill, how long to wait for the pipes to close before giving up on them."""
_MB = 1024 * 1024
# Holds the started process until the host has moved it into the call's cgroup (see _execute).
_GATE = ["/bin/sh", "-c", 'read -r _ && exec "$@"', "trajforge-gate"]

log = logging.getLogger("trajforge.sandbox")


class SandboxLimits(BaseModel):
    """Resource limits for one sandboxed call."""

    model_config = ConfigDict(frozen=True)

    wall_s: float = 10.0
    """Wall-clock deadline; past it every process of the call is killed."""
    cpu_s: int = 10
    """CPU seconds per process (RLIMIT_CPU): SIGXCPU, then SIGKILL a second later."""
    memory_mb: int = 1024
    """Address space per process (RLIMIT_AS); allocations past it raise MemoryError."""
    call_memory_mb: int = 2048
    """Memory of the whole call, all its processes together; past it the call is killed."""
    file_mb: int = 16
    """Largest file a process may write (RLIMIT_FSIZE); writes past it fail (SIGXFSZ)."""
    open_files: int = 64
    """Open file descriptors per process (RLIMIT_NOFILE)."""
    processes: int = 32
    """Processes and threads in the sandbox (RLIMIT_NPROC, counted per user namespace)."""
    tmp_mb: int = 64
    """Size of the private tmpfs at /tmp."""
    output_bytes: int = 8000
    """Bytes kept per stream (first half + last half); the middle is cut with a marker."""


class RunResult(BaseModel):
    """What one sandboxed call did."""

    returncode: int | None
    """Exit status; None when the call was killed at the deadline."""
    signal: str | None = None
    """Name of the signal that ended the program (SIGXCPU, SIGKILL...), if one did."""
    stdout: str
    """Standard output, capped (head + tail)."""
    stderr: str
    """Standard error, capped (head + tail)."""
    timed_out: bool = False
    """Killed at the wall-clock deadline."""
    memory_exceeded: bool = False
    """Killed because the call's processes together passed ``call_memory_mb``."""
    memory_peak_mb: float = 0.0
    """Most memory the call held at once, as its cgroup or the supervisor measured it."""
    cut_bytes: int = 0
    """Output bytes dropped by the cap, both streams together."""
    wall_s: float = 0.0
    """Seconds from start to the last process gone."""
    sandboxed: bool = True
    """False when it ran unsandboxed (explicitly allowed after a failed self-test)."""

    def describe(self, limits: SandboxLimits) -> str:
        """One status line for a model: how the program ended, naming the limit it hit."""
        if self.memory_exceeded:
            return (f"[killed: memory limit of {limits.call_memory_mb} MB reached (all processes "
                    "of the run together)]")
        if self.timed_out:
            return f"[killed: time limit of {limits.wall_s:g} s reached]"
        if self.signal == "SIGXCPU":
            return f"[killed by SIGXCPU: CPU time limit of {limits.cpu_s} s reached]"
        if self.signal == "SIGXFSZ":
            return f"[killed by SIGXFSZ: file size limit of {limits.file_mb} MB reached]"
        if self.signal:
            return f"[killed by {self.signal}]"
        return f"[exit code {self.returncode}]"


class SandboxUnavailable(InfraError, RuntimeError):
    """The sandbox self-test failed; the message says what failed and how to fix it (missing
    bubblewrap, usually). Infrastructure: raised inside a tool it is an ``env_fault``."""

    kind = "sandbox_unavailable"


class UnsafeSandboxWarning(UserWarning):
    """Model-written code is about to run without the sandbox (explicitly allowed)."""


class SandboxCheck(BaseModel):
    """Outcome of the start-up self-test."""

    ok: bool
    failures: list[str] = []
    """What failed, each with how to fix it."""
    notes: list[str] = []
    """Hardening that is missing on this machine but does not fail the test."""

    def message(self) -> str:
        lines = ["the code sandbox failed its self-test, so model-written code will not run:"]
        lines += [f"  - {f}" for f in self.failures]
        lines.append(f"(to run it anyway without isolation, set {UNSAFE_ENV}=1; never do that "
                     "with code you don't trust)")
        return "\n".join(lines)


def default_python() -> str:
    """The interpreter sandboxed code runs with: $TRAJFORGE_SANDBOX_PYTHON, /usr/bin/python3, or
    the harness's own (its install prefix is then bound read-only into the sandbox)."""
    if os.environ.get(PYTHON_ENV):
        return os.environ[PYTHON_ENV]
    if os.path.exists("/usr/bin/python3"):
        return "/usr/bin/python3"
    return os.path.realpath(sys.executable)


def unsafe_allowed(flag: bool | None = None) -> bool:
    """An explicit flag wins; otherwise TRAJFORGE_UNSAFE_NO_SANDBOX=1 allows it."""
    if flag is not None:
        return flag
    return os.environ.get(UNSAFE_ENV, "").strip().lower() in ("1", "true", "yes")


class Sandbox:
    """Runs commands for one work directory; see the module docstring for what it enforces."""

    def __init__(self, workdir: str | Path, limits: SandboxLimits | None = None,
                 allow_unsandboxed: bool | None = None, bwrap: str | None = None,
                 python: str | None = None):
        self.workdir = Path(workdir)
        self.limits = limits or SandboxLimits()
        self.python = python or default_python()
        self.bwrap = bwrap if bwrap is not None else (shutil.which("bwrap") or "bwrap")
        check = check_sandbox(self.bwrap, self.python)
        self.sandboxed = check.ok
        if not check.ok:
            if not unsafe_allowed(allow_unsandboxed):
                raise SandboxUnavailable(check.message())
            text = ("RUNNING MODEL-WRITTEN CODE WITHOUT A SANDBOX (allowed explicitly): no "
                    "filesystem, network or process isolation, only rlimits and a deadline. "
                    + check.message())
            warnings.warn(text, UnsafeSandboxWarning, stacklevel=2)
            log.warning(text)

    def run(self, argv: list[str], stdin: bytes = b"", output_bytes: int | None = None,
            wall_s: float | None = None) -> RunResult:
        """Run ``argv`` in the sandbox with ``/work`` as its directory; never raises for what
        the program does (crash, timeout, limits): that is all in the result."""
        limits = self.limits
        if wall_s is not None or output_bytes is not None:
            limits = limits.model_copy(update={k: v for k, v in (
                ("wall_s", wall_s), ("output_bytes", output_bytes)) if v is not None})
        if self.sandboxed:
            return _run_bwrap(self.bwrap, self.python, self.workdir, argv, stdin, limits)
        return _run_unsandboxed(self.workdir, argv, stdin, limits)


# ---- running --------------------------------------------------------------------------------

@functools.cache
def _bwrap_features(bwrap: str) -> frozenset[str]:
    """Options this bwrap knows (``--disable-userns`` and ``--size`` came in 0.8.0)."""
    try:
        text = subprocess.run([bwrap, "--help"], capture_output=True, text=True, timeout=10,
                              check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return frozenset()
    return frozenset(opt for opt in ("--disable-userns", "--size") if opt in text)


def _system_binds(python: str) -> list[str]:
    args: list[str] = []
    for path in _SYSTEM_DIRS:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]  # merged /usr: /lib -> usr/lib
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    for path in _ETC_FILES:
        args += ["--ro-bind-try", path, path]
    prefix = _python_prefix(python)
    if prefix:
        args += ["--ro-bind", prefix, prefix]
    return args


def _python_prefix(python: str) -> str | None:
    """The install prefix to bind when the interpreter lives outside the system dirs."""
    real = os.path.realpath(python)
    if any(real.startswith(d + "/") for d in _SYSTEM_DIRS):
        return None
    return str(Path(real).parent.parent)


def _inside_env() -> list[str]:
    env = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "LANG": "C.UTF-8",
           "PYTHONHASHSEED": "0",  # set iteration order, and so output, is reproducible
           "PYTHONDONTWRITEBYTECODE": "1", "PYTHONIOENCODING": "utf-8",
           "PYTHONUNBUFFERED": "1"}  # a program killed at the deadline still shows its output
    return [a for k, v in env.items() for a in ("--setenv", k, v)]


ALLOWED_ENV = frozenset({"PATH", "HOME", "LANG", "PYTHONHASHSEED", "PYTHONDONTWRITEBYTECODE",
                         "PYTHONIOENCODING", "PYTHONUNBUFFERED", "PWD", "LC_CTYPE"})
"""Environment variable names a sandboxed program may see (the self-test checks it)."""


def _prlimit_argv(limits: SandboxLimits) -> list[str]:
    mb = 1024 * 1024
    return [_prlimit(), f"--cpu={limits.cpu_s}:{limits.cpu_s + 1}",
            f"--as={limits.memory_mb * mb}", f"--fsize={limits.file_mb * mb}",
            f"--nofile={limits.open_files}", f"--nproc={limits.processes}", "--core=0", "--"]


@functools.cache
def _prlimit() -> str:
    return shutil.which("prlimit", path="/usr/bin:/bin") or "/usr/bin/prlimit"


def bwrap_argv(bwrap: str, python: str, workdir: Path, argv: list[str], limits: SandboxLimits,
               seccomp_fd: int | None) -> list[str]:
    """The full bwrap command line for one call."""
    features = _bwrap_features(bwrap)
    out = [bwrap, "--unshare-user", "--unshare-ipc", "--unshare-pid", "--unshare-net",
           "--unshare-uts", "--unshare-cgroup-try", "--die-with-parent", "--new-session",
           "--cap-drop", "ALL", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID),
           "--hostname", "sandbox"]
    if "--disable-userns" in features:
        out.append("--disable-userns")
    out += _system_binds(python)
    out += ["--proc", "/proc", "--dev", "/dev"]
    if "--size" in features:
        out += ["--size", str(limits.tmp_mb * 1024 * 1024)]
    out += ["--tmpfs", "/tmp", "--bind", str(workdir), WORK, "--chdir", WORK]
    # /dev/shm (multiprocessing's semaphores) gets its own small tmpfs; then the root tmpfs and
    # /dev are made read-only: bwrap creates them owned by the sandbox's uid, and an uncapped
    # tmpfs would let a program fill the host's memory.
    if "--size" in features:
        out += ["--size", str(SHM_MB * 1024 * 1024)]
    out += ["--tmpfs", "/dev/shm", "--remount-ro", "/dev", "--remount-ro", "/",
            "--clearenv", *_inside_env()]
    if seccomp_fd is not None:
        out += ["--seccomp", str(seccomp_fd)]
    return out + ["--", *_prlimit_argv(limits), *argv]


def _run_bwrap(bwrap: str, python: str, workdir: Path, argv: list[str], stdin: bytes,
               limits: SandboxLimits) -> RunResult:
    fds: list[int] = []
    try:
        seccomp_fd = None
        program = filter_program()
        if program is not None:
            # The filter travels on a pipe: bwrap reads it to EOF before starting the program.
            seccomp_fd, write_fd = os.pipe()
            os.write(write_fd, program)
            os.close(write_fd)
            fds.append(seccomp_fd)
        # bwrap writes {"child-pid": N} here: the host pid of the sandbox's pid 1. The write
        # end is _execute's to close (right after the start); closing an fd twice is a bug
        # with threads, where the number may already name another thread's file.
        info_read, info_write = os.pipe()
        fds.append(info_read)
        cmd = bwrap_argv(bwrap, python, workdir, argv, limits, seccomp_fd)
        cmd[1:1] = ["--info-fd", str(info_write)]
        kwargs: dict[str, Any] = {}
        if sandbox_owner() is not None:
            kwargs.update(user=SANDBOX_UID, group=SANDBOX_UID, extra_groups=[])
        return _execute(cmd, stdin, limits, sandboxed=True, info_fds=(info_read, info_write),
                        cwd="/", env={"PATH": "/usr/bin:/bin"},
                        pass_fds=tuple(fd for fd in (seccomp_fd, info_write) if fd is not None),
                        **kwargs)
    finally:
        for fd in fds:
            os.close(fd)


def _run_unsandboxed(workdir: Path, argv: list[str], stdin: bytes,
                     limits: SandboxLimits) -> RunResult:
    kwargs: dict[str, Any] = {}
    if sandbox_owner() is not None:  # as root, RLIMIT_NPROC only holds for another uid
        kwargs.update(user=SANDBOX_UID, group=SANDBOX_UID, extra_groups=[])
    env = {"PATH": "/usr/bin:/bin", "HOME": str(workdir), "LANG": "C.UTF-8",
           "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1", "PYTHONIOENCODING": "utf-8",
           "PYTHONUNBUFFERED": "1"}
    return _execute(argv, stdin, limits, sandboxed=False, cwd=str(workdir), env=env,
                    preexec_fn=functools.partial(_set_rlimits, limits), **kwargs)


def _set_rlimits(limits: SandboxLimits) -> None:
    mb = 1024 * 1024
    for which, value in ((resource.RLIMIT_CPU, (limits.cpu_s, limits.cpu_s + 1)),
                         (resource.RLIMIT_AS, (limits.memory_mb * mb,) * 2),
                         (resource.RLIMIT_FSIZE, (limits.file_mb * mb,) * 2),
                         (resource.RLIMIT_NOFILE, (limits.open_files,) * 2),
                         (resource.RLIMIT_NPROC, (limits.processes,) * 2),
                         (resource.RLIMIT_CORE, (0, 0))):
        resource.setrlimit(which, value)


class _Child:
    """The started process and how to kill — and wait out — everything it spawned.

    bwrap's outer process exits as soon as the sandboxed command does, while the sandbox's pid 1
    may still be reaping daemons; ``--die-with-parent`` then kills pid 1 and with it the pid
    namespace. So "bwrap exited" is not yet "nothing is left": ``wait_gone`` waits on a pidfd of
    pid 1, which becomes readable only once the namespace is empty.
    """

    def __init__(self, proc: subprocess.Popen, info_read: int | None):
        self.proc = proc
        self.info_read = info_read
        self.info = bytearray()
        self.init_pidfd: int | None = None
        self.may_kill = False
        """Whether the pidfd surely names the sandbox's pid 1 (opened while bwrap, its parent,
        was alive and so had not reaped it), so signalling it can't hit a reused pid."""

    def feed_info(self, data: bytes) -> None:
        """bwrap's ``--info-fd`` JSON, ``{"child-pid": N, ...}``, as it arrives."""
        if self.init_pidfd is not None or len(self.info) > 4096:
            return
        self.info += data
        try:
            pid = int(json.loads(bytes(self.info))["child-pid"])
        except (ValueError, KeyError, TypeError):
            return  # not complete yet
        alive = self.proc.poll() is None
        try:
            self.init_pidfd = os.pidfd_open(pid)
        except (OSError, AttributeError):
            return  # already gone, or no pidfd support: the process group kill remains
        self.may_kill = alive

    def kill(self) -> None:
        """SIGKILL the sandbox's pid 1 — the kernel then kills every process in its pid
        namespace, daemons included — and bwrap's process group."""
        if self.init_pidfd is not None and self.may_kill:
            try:
                signal.pidfd_send_signal(self.init_pidfd, signal.SIGKILL)
            except OSError:
                pass
            try:
                self.proc.wait(timeout=_DRAIN_S)
            except subprocess.TimeoutExpired:
                pass
        if self.proc.poll() is None:
            # Only before proc is reaped: afterwards its pid (= the group id) may be reused.
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    def wait_gone(self) -> None:
        """After bwrap exited: wait until the sandbox's pid 1, and so its namespace, is gone."""
        if self.init_pidfd is None:
            return
        ready, _, _ = select.select([self.init_pidfd], [], [], _DRAIN_S)
        if not ready:
            log.warning("sandbox pid 1 still alive %.0f s after bwrap exited", _DRAIN_S)

    def close(self) -> None:
        if self.init_pidfd is not None:
            os.close(self.init_pidfd)
            self.init_pidfd = None


def _execute(cmd: list[str], stdin: bytes, limits: SandboxLimits, sandboxed: bool,
             info_fds: tuple[int, int] | None = None, **popen: Any) -> RunResult:
    start = time.monotonic()
    # Moving a process into a cgroup waits for an RCU grace period (~10-30 ms here): skip it
    # where the rlimits alone already keep the call under its cap.
    cgroup = None if _rlimits_bound_call(limits) else Cgroup.create(limits.call_memory_mb * _MB)
    gated = cgroup is not None
    if gated:
        # A child forked before its parent joins a cgroup stays outside it, so the process
        # waits (in _GATE) for the line that _pump sends first, once it has been moved in.
        cmd, stdin = [*_GATE, *cmd], b"\n" + stdin
    try:
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, start_new_session=True, close_fds=True,
                                **popen)
    except BaseException:
        if cgroup is not None:
            cgroup.remove()
        raise
    finally:
        if info_fds:
            os.close(info_fds[1])  # bwrap holds the write end now; EOF comes when it closes it
    child = _Child(proc, info_fds[0] if info_fds else None)
    cgroup = _join(cgroup, proc.pid)
    watch = MemoryWatch(proc.pid, limits.call_memory_mb * _MB, child.kill, cgroup)
    out, err = _Capture(limits.output_bytes), _Capture(limits.output_bytes)
    try:
        timed_out = _pump(child, stdin, start + limits.wall_s, out, err)
        if not timed_out:
            try:
                proc.wait(timeout=max(0.0, start + limits.wall_s - time.monotonic()))
            except subprocess.TimeoutExpired:  # closed its pipes, then kept running
                child.kill()
                timed_out = True
        if timed_out:
            proc.wait()
    finally:
        if proc.poll() is None:
            child.kill()
            proc.wait()
        watch.stop()  # before child.close(): the watch may still use the pidfd to kill
        child.wait_gone()
        child.close()
        if cgroup is not None:
            cgroup.remove()
    rc = proc.returncode
    if gated and info_fds and not child.info and rc in (126, 127):
        # The gate's exec of bwrap failed (bwrap writes its info before it runs anything, so a
        # sandboxed program cannot fake this): the same error Popen raises without the gate.
        raise (PermissionError if rc == 126 else FileNotFoundError)(
            errno.EACCES if rc == 126 else errno.ENOENT, err.text().strip() or "exec failed",
            cmd[len(_GATE)])
    return RunResult(returncode=None if timed_out else rc,
                     signal=None if timed_out else _signal_name(rc, sandboxed),
                     stdout=out.text(), stderr=err.text(), timed_out=timed_out,
                     memory_exceeded=watch.exceeded, memory_peak_mb=watch.peak_mb,
                     cut_bytes=out.cut + err.cut, wall_s=round(time.monotonic() - start, 4),
                     sandboxed=sandboxed)


def _rlimits_bound_call(limits: SandboxLimits) -> bool:
    """Whether every process at its RLIMIT_AS, plus both tmpfs full, fits in ``call_memory_mb``."""
    return (limits.processes * limits.memory_mb + limits.tmp_mb + SHM_MB
            <= limits.call_memory_mb)


def _join(cgroup: Cgroup | None, pid: int) -> Cgroup | None:
    """Move the gated process into the call's cgroup; None (the supervisor sums memory instead)
    when that fails."""
    if cgroup is None:
        return None
    try:
        cgroup.add(pid)
    except OSError as e:
        log.warning("could not move the sandbox into %s (%s); summing its memory instead",
                    cgroup.path, e)
        cgroup.remove()
        return None
    return cgroup


def _signal_name(rc: int | None, sandboxed: bool) -> str | None:
    # Popen reports a signal as -N; bwrap reports its child's signal as 128 + N, like a shell.
    if rc is None:
        return None
    num = -rc if rc < 0 else (rc - 128 if sandboxed and 128 < rc < 128 + 65 else 0)
    if num <= 0:
        return None
    try:
        return signal.Signals(num).name
    except ValueError:
        return f"signal {num}"


class _Capture:
    """Keeps the first and last ``limit/2`` bytes of a stream and counts what falls between."""

    def __init__(self, limit: int):
        self.head_max = limit // 2
        self.tail_max = limit - self.head_max
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def feed(self, data: bytes) -> None:
        self.total += len(data)
        room = self.head_max - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail += data
            if len(self.tail) > self.tail_max:
                del self.tail[:len(self.tail) - self.tail_max]

    @property
    def cut(self) -> int:
        return self.total - len(self.head) - len(self.tail)

    def text(self) -> str:
        head = self.head.decode("utf-8", "replace")
        tail = self.tail.decode("utf-8", "replace")
        if not self.cut:
            return head + tail
        return f"{head}\n[... {self.cut} bytes cut ...]\n{tail}"


def _pump(child: _Child, stdin: bytes, deadline: float, out: _Capture, err: _Capture) -> bool:
    """Feed stdin, read both pipes (and bwrap's info fd) until they close or the deadline;
    True if the deadline was hit (everything is killed then)."""
    proc = child.proc
    sel = selectors.DefaultSelector()
    assert proc.stdin and proc.stdout and proc.stderr
    pending = memoryview(stdin)
    if pending:
        os.set_blocking(proc.stdin.fileno(), False)
        sel.register(proc.stdin, selectors.EVENT_WRITE)
    else:
        proc.stdin.close()
    for stream, capture in ((proc.stdout, out), (proc.stderr, err)):
        os.set_blocking(stream.fileno(), False)
        sel.register(stream, selectors.EVENT_READ, capture)
    if child.info_read is not None:
        sel.register(child.info_read, selectors.EVENT_READ, child.info)
    outputs = {proc.stdout.fileno(), proc.stderr.fileno()}
    timed_out = False
    try:
        # Done when stdout and stderr are closed; the info fd and stdin don't keep us waiting.
        while outputs & {key.fd for key in sel.get_map().values()}:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                if timed_out:
                    break  # killed, yet a pipe stays open: stop reading it
                child.kill()
                timed_out = True
                deadline = time.monotonic() + _DRAIN_S
                continue
            for key, _ in sel.select(remaining):
                if key.fileobj is proc.stdin:
                    try:
                        pending = pending[os.write(key.fd, pending[:65536]):]
                    except BlockingIOError:
                        continue
                    except BrokenPipeError:
                        pending = pending[:0]
                    if not pending:
                        sel.unregister(key.fileobj)
                        proc.stdin.close()
                    continue
                try:
                    data = os.read(key.fd, 65536)
                except BlockingIOError:
                    continue
                if key.data is child.info:
                    if data:
                        child.feed_info(data)
                    else:
                        sel.unregister(key.fileobj)
                elif data:
                    key.data.feed(data)
                else:
                    sel.unregister(key.fileobj)
    finally:
        sel.close()
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            stream.close()
    return timed_out


# ---- self-test ------------------------------------------------------------------------------

_PROBE = r"""
import json, os, resource, socket, sys
cfg = json.loads(sys.argv[1])
r = {}
r["uid"] = os.getuid()
status = dict(l.split(":", 1) for l in open("/proc/self/status") if ":" in l)
r["cap_eff"] = status["CapEff"].strip()
r["seccomp"] = status.get("Seccomp", "").strip()
r["nproc"] = list(resource.getrlimit(resource.RLIMIT_NPROC))
r["interfaces"] = sorted(l.split(":")[0].strip() for l in open("/proc/net/dev").readlines()[2:])
s = socket.socket()
s.settimeout(1)
try:
    s.connect(("10.255.255.1", 9))
    r["network"] = "connected"
except OSError as e:
    r["network"] = str(e)
finally:
    s.close()
writable = []
for d in ["/", "/usr", "/etc", "/bin", "/lib", "/dev", "/proc/sys/kernel", "/work", "/tmp",
          "/dev/shm"]:
    p = os.path.join(d, ".trajforge-probe")
    try:
        with open(p, "w") as f:
            f.write("x")
        os.unlink(p)
        writable.append(d)
    except OSError:
        pass
r["writable"] = writable
r["visible"] = [p for p in cfg["hidden"] if os.path.lexists(p)]
r["env"] = sorted(os.environ)
rd, wr = os.pipe()
forks = 0
for _ in range(cfg["processes"] + 8):
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        os.close(wr)
        os.read(rd, 1)
        os._exit(0)
    forks += 1
os.close(wr)
for _ in range(forks):
    os.wait()
r["forks"] = forks
print(json.dumps(r))
"""

_INSTALL_HINT = ("install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf "
                 "install bubblewrap; `make sysdeps` does it as root)")
_USERNS_HINT = ("bwrap could not create a user namespace: enable unprivileged user namespaces "
                "(sysctl kernel.unprivileged_userns_clone=1 on Debian, user.max_user_namespaces "
                "> 0; on Ubuntu 24.04 allow bwrap in AppArmor), or run in a container that "
                "permits them")


@functools.cache
def check_sandbox(bwrap: str | None = None, python: str | None = None) -> SandboxCheck:
    """The start-up self-test: run a probe in a real sandbox and check what it observes.

    Cached per (bwrap, python), so a process pays for it once (~0.1 s).
    """
    python = python or default_python()
    bwrap = bwrap if bwrap is not None else shutil.which("bwrap")
    if not bwrap or not (os.path.isfile(bwrap) and os.access(bwrap, os.X_OK)):
        return SandboxCheck(ok=False, failures=[f"bubblewrap (bwrap) not found: {_INSTALL_HINT}"])
    if not os.path.exists(_prlimit()):
        return SandboxCheck(ok=False, failures=[
            "prlimit not found in /usr/bin or /bin: install util-linux"])
    if not os.path.exists(python):
        return SandboxCheck(ok=False, failures=[
            f"no python interpreter at {python}: install python3 or set {PYTHON_ENV}"])
    notes = []
    features = _bwrap_features(bwrap)
    for opt, why in (("--disable-userns", "nested user namespaces stay possible"),
                     ("--size", "/tmp is not size-capped")):
        if opt not in features:
            notes.append(f"bwrap lacks {opt} (needs bubblewrap >= 0.8): {why}")
    if filter_program() is None:
        notes.append(f"no seccomp filter for this architecture ({os.uname().machine})")
    limits = SandboxLimits(processes=16, wall_s=20)
    workdir = make_workdir(prefix="trajforge-selftest-")
    try:
        hidden = _hidden_paths(python, workdir)
        result = _run_bwrap(bwrap, python, workdir,
                            [python, "-c", _PROBE, json.dumps({"hidden": hidden,
                                                               "processes": limits.processes})],
                            b"", limits)
    except OSError as e:
        who = f" as uid {SANDBOX_UID}" if sandbox_owner() is not None else ""
        return SandboxCheck(ok=False, notes=notes, failures=[
            f"could not start {bwrap}{who}: {e}; {_INSTALL_HINT}"])
    finally:
        remove_workdir(workdir)
    failures = _judge_probe(result, limits)
    for line in notes:
        log.info("sandbox: %s", line)
    return SandboxCheck(ok=not failures, failures=failures, notes=notes)


def _hidden_paths(python: str, workdir: Path) -> list[str]:
    """Host paths that must not exist inside the sandbox (skipping ancestors of bound paths)."""
    candidates = {"/root", "/home", "/etc/shadow", "/etc/passwd", "/var", "/srv", "/opt",
                  str(Path.home()), os.getcwd(), str(Path(__file__).resolve().parents[2])}
    bound = [str(workdir)] + ([_python_prefix(python)] if _python_prefix(python) else [])
    keep = []
    for path in sorted(candidates):
        if path in ("/", "/tmp") or any(path == d or path.startswith(d + "/")
                                        for d in _SYSTEM_DIRS + ("/tmp",)):
            continue
        if any(b == path or b.startswith(path.rstrip("/") + "/") for b in bound):
            continue
        keep.append(path)
    return keep


def _judge_probe(result: RunResult, limits: SandboxLimits) -> list[str]:
    if result.returncode != 0:
        text = (result.stderr or result.stdout).strip()[-600:]
        if "source path" in text or "chdir" in text:
            hint = (f"the work directory must be reachable by uid {SANDBOX_UID}: point TMPDIR at "
                    "a world-traversable directory such as /tmp")
        elif any(s in text for s in ("namespace", "uid map", "Operation not permitted",
                                     "setting up")):
            hint = _USERNS_HINT
        else:
            hint = _INSTALL_HINT
        status = result.describe(limits)
        return [f"bwrap could not run a trivial program {status}: {text or '(no output)'}; {hint}"]
    try:
        probe = json.loads(result.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return [f"the sandbox probe printed no report: {result.stdout[-300:]!r}"]
    failures = []
    if probe["uid"] == 0:
        failures.append("sandboxed code runs as uid 0 inside the sandbox")
    if probe["cap_eff"].strip("0"):
        failures.append(f"sandboxed code kept capabilities ({probe['cap_eff']})")
    if filter_program() is not None and probe["seccomp"] != "2":
        failures.append("the seccomp filter is not active (bwrap --seccomp)")
    if probe["nproc"][0] != limits.processes or probe["forks"] >= limits.processes:
        # As root this means the sandbox kept host uid 0, for which the kernel never enforces
        # RLIMIT_NPROC.
        failures.append(f"the process limit does not hold (limit {probe['nproc']}, "
                        f"{probe['forks']} forks succeeded); bwrap must run unprivileged "
                        "(not setuid root)")
    if probe["interfaces"] != ["lo"] or probe["network"] == "connected":
        failures.append(f"the sandbox has network access (interfaces {probe['interfaces']})")
    if sorted(probe["writable"]) != sorted([WORK, "/tmp", "/dev/shm"]):
        failures.append(f"writable places in the sandbox are {probe['writable']}, expected only "
                        f"{WORK} and the private /tmp and /dev/shm")
    if probe["visible"]:
        failures.append(f"host paths are visible inside the sandbox: {probe['visible']}")
    extra = set(probe["env"]) - ALLOWED_ENV
    if extra:
        failures.append(f"host environment variables leak into the sandbox: {sorted(extra)}")
    return failures
