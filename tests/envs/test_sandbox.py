"""The code sandbox: self-test, limits, output cap, deadline, and the explicit unsafe fallback.

Escape attempts live in ``test_sandbox_escape.py``; this file checks that the mechanisms work
and that a machine without a working sandbox refuses clearly (or warns loudly when allowed).
"""

from __future__ import annotations

import os
import subprocess
import textwrap
import threading
import time
import warnings

import pytest

from tests.conftest import require_system
from trajforge.envs import make_env
from trajforge.envs.sandbox import (
    UNSAFE_ENV,
    Sandbox,
    SandboxLimits,
    SandboxUnavailable,
    UnsafeSandboxWarning,
    bwrap_argv,
    check_sandbox,
)
from trajforge.envs.seccomp import filter_program
from trajforge.envs.workdir import check_relpath, make_workdir, remove_workdir
from trajforge.schema import Task

FAST = SandboxLimits(wall_s=5, cpu_s=5, memory_mb=256, file_mb=1, processes=16, tmp_mb=8,
                     output_bytes=1000)


@pytest.fixture
def workdir():
    path = make_workdir()
    yield path
    remove_workdir(path)


@pytest.fixture
def sandbox(workdir):
    require_system("bwrap", "bubblewrap")
    return Sandbox(workdir, FAST)


def run(sandbox: Sandbox, code: str, **kw):
    return sandbox.run([sandbox.python, "-c", textwrap.dedent(code)], **kw)


# ---- self-test ------------------------------------------------------------------------------

def test_self_test_passes_on_this_machine():
    require_system("bwrap", "bubblewrap")
    check = check_sandbox()
    assert check.ok, check.message()
    assert check.failures == []


def test_self_test_names_a_missing_bwrap_and_how_to_install_it(tmp_path):
    check = check_sandbox(str(tmp_path / "no-bwrap"))
    assert not check.ok
    assert "bubblewrap (bwrap) not found" in check.failures[0]
    assert "apt-get install bubblewrap" in check.failures[0]
    assert UNSAFE_ENV in check.message()


def test_self_test_reports_a_bwrap_that_cannot_start_a_sandbox():
    # Outside pytest's private tmp dir: as root, bwrap is started as an unprivileged uid.
    fake_dir = make_workdir(prefix="trajforge-fake-bwrap-")
    try:
        os.chmod(fake_dir, 0o755)
        fake = fake_dir / "bwrap"
        fake.write_text("#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\n"
                        "exit 1\n")
        fake.chmod(0o755)
        check = check_sandbox(str(fake))
    finally:
        remove_workdir(fake_dir)
    assert not check.ok
    assert "could not run a trivial program" in check.failures[0]
    assert "user namespace" in check.failures[0]


@pytest.mark.skipif(os.geteuid() != 0, reason="only root switches to an unprivileged uid")
def test_self_test_reports_a_bwrap_the_sandbox_uid_cannot_execute(tmp_path):
    fake = tmp_path / "bwrap"  # pytest's tmp dir is private to root
    fake.write_text("#!/bin/sh\nexit 0\n")
    fake.chmod(0o755)
    check = check_sandbox(str(fake))
    assert not check.ok and "could not start" in check.failures[0]
    assert "as uid 65534" in check.failures[0]


def test_sandbox_refuses_to_run_when_the_self_test_fails(workdir, tmp_path, monkeypatch):
    monkeypatch.delenv(UNSAFE_ENV, raising=False)
    with pytest.raises(SandboxUnavailable, match="bubblewrap"):
        Sandbox(workdir, FAST, bwrap=str(tmp_path / "no-bwrap"))
    with pytest.raises(SandboxUnavailable):
        Sandbox(workdir, FAST, bwrap=str(tmp_path / "no-bwrap"), allow_unsandboxed=False)


def test_code_env_refuses_before_the_first_episode(tmp_path, monkeypatch):
    monkeypatch.delenv(UNSAFE_ENV, raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # no bwrap anywhere
    task = Task(id="t", env="code", prompt="p", tier="easy", split="train", template="t",
                reference=(), expected={"function": "f", "cases": [{"args": [], "expected": 1}]})
    env = make_env("code")
    with pytest.raises(SandboxUnavailable, match="install bubblewrap"):
        env.reset(task)
    env.close()


def test_unsafe_fallback_warns_and_still_enforces_deadline_and_rlimits(workdir, tmp_path,
                                                                       monkeypatch):
    monkeypatch.setenv(UNSAFE_ENV, "1")
    with pytest.warns(UnsafeSandboxWarning, match="WITHOUT A SANDBOX"):
        sandbox = Sandbox(workdir, FAST.model_copy(update={"wall_s": 1.5}),
                          bwrap=str(tmp_path / "no-bwrap"))
    assert not sandbox.sandboxed
    hello = run(sandbox, "print('hi')")
    assert hello.stdout == "hi\n" and not hello.sandboxed
    slow = run(sandbox, "import time; time.sleep(30)")
    assert slow.timed_out and slow.wall_s < 4
    memory = run(sandbox, """
        try:
            bytearray(2 * 1024 ** 3)
        except MemoryError:
            print("MemoryError")
    """)
    assert memory.stdout == "MemoryError\n"
    big = run(sandbox, """
        try:
            open("big", "wb").write(b"x" * 5 * 1024 ** 2)
        except OSError as e:
            print(e.errno)
    """)
    assert big.stdout == "27\n"  # EFBIG
    forks = run(sandbox, """
        import os, time
        n = 0
        for _ in range(200):
            try:
                if os.fork() == 0:
                    time.sleep(2); os._exit(0)
            except OSError:
                break
            n += 1
        print(n)
    """)
    assert int(forks.stdout) < FAST.processes


# ---- running ----------------------------------------------------------------------------------

def test_runs_in_the_work_directory_with_a_clean_environment(sandbox, workdir):
    (workdir / "data.txt").write_text("from host")
    result = run(sandbox, """
        import os
        print(os.getcwd(), open("data.txt").read(), sorted(os.environ))
        open("out.txt", "w").write("from sandbox")
    """)
    assert result.returncode == 0 and result.stdout.startswith("/work from host")
    assert "PYTHONHASHSEED" in result.stdout
    assert (workdir / "out.txt").read_text() == "from sandbox"


def test_output_is_capped_head_and_tail_with_a_marker(sandbox):
    result = run(sandbox, "print('A' * 100_000 + 'END')")
    assert result.stdout.startswith("A" * 500)
    assert result.stdout.endswith("END\n")
    assert f"[... {100_004 - 1000} bytes cut ...]" in result.stdout
    assert result.cut_bytes == 100_004 - 1000


def test_large_stdin_and_output_at_once_do_not_deadlock(sandbox):
    data = os.urandom(3_000_000).hex().encode()  # 6 MB: far more than a pipe buffer
    result = run(sandbox, """
        import sys, hashlib
        data = sys.stdin.buffer.read()
        sys.stdout.write("x" * 2_000_000)
        print(hashlib.sha256(data).hexdigest())
    """, stdin=data)
    import hashlib

    assert result.returncode == 0
    assert result.stdout.endswith(hashlib.sha256(data).hexdigest() + "\n")


def test_exit_codes_and_signals_are_reported(sandbox):
    assert run(sandbox, "import sys; sys.exit(3)").describe(FAST) == "[exit code 3]"
    killed = run(sandbox, "import os, signal; os.kill(os.getpid(), signal.SIGKILL)")
    assert killed.signal == "SIGKILL" and killed.describe(FAST) == "[killed by SIGKILL]"
    crash = run(sandbox, "1 / 0")
    assert crash.returncode == 1 and "ZeroDivisionError" in crash.stderr


def test_cpu_limit_sends_sigxcpu(workdir):
    require_system("bwrap", "bubblewrap")
    sandbox = Sandbox(workdir, FAST.model_copy(update={"cpu_s": 1, "wall_s": 20}))
    result = run(sandbox, "while True: pass")
    assert result.signal == "SIGXCPU"
    assert "CPU time limit of 1 s" in result.describe(sandbox.limits)


def test_deadline_kills_daemons_and_returns_promptly(sandbox):
    result = sandbox.run([sandbox.python, "-c", textwrap.dedent("""
        import os, time
        if os.fork() == 0:
            os.setsid()
            time.sleep(60)
        print("started", flush=True)
        time.sleep(60)
    """), "deadline-marker-7f3a"], wall_s=1)
    assert result.timed_out and result.stdout == "started\n"
    assert result.describe(FAST.model_copy(update={"wall_s": 1})) == \
        "[killed: time limit of 1 s reached]"
    assert result.wall_s < 3.5
    assert not _processes_with("deadline-marker-7f3a")


def test_process_limit_is_per_sandbox(workdir, tmp_path):
    """A fork bomb in one sandbox does not eat another's budget (the kernel counts RLIMIT_NPROC
    per user namespace, and prlimit sets it inside the namespace)."""
    require_system("bwrap", "bubblewrap")
    bomb = Sandbox(workdir, FAST)
    other_dir = make_workdir()
    try:
        other = Sandbox(other_dir, FAST)
        thread = threading.Thread(target=lambda: run(bomb, """
            import os, time
            while True:
                try:
                    if os.fork() == 0:
                        time.sleep(3); os._exit(0)
                except OSError:
                    print("full", flush=True)
                    time.sleep(3)
                    break
        """, wall_s=3))
        thread.start()
        time.sleep(1.0)  # let the bomb fill its budget
        result = run(other, """
            import os, time
            n = 0
            for _ in range(8):
                if os.fork() == 0:
                    time.sleep(1); os._exit(0)
                n += 1
            print(n)
        """)
        thread.join()
        assert result.stdout == "8\n", result.stderr
    finally:
        remove_workdir(other_dir)


@pytest.mark.skipif(os.geteuid() != 0, reason="shows why the uid switch exists; needs root")
def test_process_limit_needs_the_uid_switch_as_root(workdir):
    """Negative control: the same bwrap command run as root (no switch to an unprivileged uid)
    lets a fork loop pass RLIMIT_NPROC, because the kernel exempts uid 0."""
    require_system("bwrap", "bubblewrap")
    check_sandbox()  # the sandbox itself works here
    code = textwrap.dedent("""
        import os, time
        n = 0
        for _ in range(40):
            try:
                if os.fork() == 0:
                    time.sleep(1); os._exit(0)
            except OSError:
                break
            n += 1
        print(n)
    """)
    os.chmod(workdir, 0o777)  # the sandbox's uid maps to host root here, not to the dir's owner
    argv = bwrap_argv("bwrap", "/usr/bin/python3", workdir, ["/usr/bin/python3", "-c", code],
                      FAST, None)
    as_root = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    assert int(as_root.stdout) == 40  # limit 16, yet 40 forks: root ignores RLIMIT_NPROC
    sandboxed = Sandbox(workdir, FAST).run(["/usr/bin/python3", "-c", code])
    assert int(sandboxed.stdout) < FAST.processes


def test_seccomp_filter_is_well_formed():
    program = filter_program("x86_64")
    assert program is not None and len(program) % 8 == 0
    assert filter_program("aarch64") is not None
    assert filter_program("sparc64") is None


def test_bwrap_command_line_isolates(workdir):
    argv = bwrap_argv("bwrap", "/usr/bin/python3", workdir, ["python3"], FAST, 9)
    joined = " ".join(argv)
    for flag in ("--unshare-net", "--unshare-pid", "--unshare-user", "--clearenv",
                 "--cap-drop ALL", "--die-with-parent", "--new-session", "--seccomp 9",
                 f"--bind {workdir} /work", "--remount-ro /", f"--nproc={FAST.processes}"):
        assert flag in joined
    assert "--bind / " not in joined and "/root" not in joined and "/home" not in joined


@pytest.mark.parametrize("path, message", [
    ("/etc/passwd", "absolute"), ("../x.py", "leaves the work directory"),
    ("a/../../x", "leaves"), ("", "empty"), ("a b.py", "letters, digits"),
    ("/".join("d" * 10), "deeper"), (".", "work directory itself"),
])
def test_work_dir_paths_are_checked(path, message):
    with pytest.raises(ValueError, match=message):
        check_relpath(path)


def test_work_dir_paths_are_normalised():
    assert check_relpath("./pkg//mod.py") == "pkg/mod.py"


def _processes_with(marker: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    if marker.encode() in f.read():
                        found.append(int(entry))
            except OSError:
                pass
    return found


def test_unsafe_flag_is_ignored_when_the_sandbox_works(workdir, monkeypatch):
    require_system("bwrap", "bubblewrap")
    monkeypatch.setenv(UNSAFE_ENV, "1")
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnsafeSandboxWarning)
        sandbox = Sandbox(workdir, FAST)
    assert sandbox.sandboxed
