"""Hostile programs against the code environment's host side: no hang, no total past the cap,
no forged verdict, no lost file.

Every case runs under a time budget (``within``): the body runs in a thread and the test fails,
instead of hanging the suite, if it is not done in time — a host that blocks on a FIFO must show
up as a failure, not as a CI timeout. Each class of issue 15 that this file covers:

* deadlines that hold (host-side operations on what the program made): FIFOs and sockets where
  the host writes, snapshots, undoes and removes; directory chains deeper than PATH_MAX and
  than Python's recursion limit; a program that makes thousands of files;
* caps per call: several processes that each stay under RLIMIT_AS but together pass
  ``call_memory_mb``, with the call's cgroup and with the supervisor that replaces it;
* grading the judge can trust: forged, deep, huge or ill-typed result lines;
* recovery that loses nothing: restore and undo with names the program created (spaces,
  accents, newlines, bytes that are not UTF-8, depth), and trees that cannot be restored.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from tests.conftest import require_system
from trajforge.envs import memlimit, workdir
from trajforge.envs.code import MAX_WORKDIR_ENTRIES, CodeEnv, HiddenTests, judge
from trajforge.envs.judge import MAX_DEPTH, Unreadable, nesting_depth, read_report
from trajforge.envs.sandbox import RunResult, Sandbox, SandboxLimits
from trajforge.schema import Task, ToolCall

MARK = "@@trajforge-results@@ "
GOOD = "def f(x):\n    return x + 1\n"


def within(budget_s: float, fn, *args, **kwargs):
    """``fn(*args, **kwargs)``, failing the test if it takes longer than ``budget_s``."""
    box: dict = {}

    def run():
        try:
            box["value"] = fn(*args, **kwargs)
        except BaseException as e:  # noqa: BLE001 - re-raised in the test's thread
            box["error"] = e

    thread = threading.Thread(target=run, daemon=True)
    start = time.monotonic()
    thread.start()
    thread.join(budget_s)
    if thread.is_alive():
        pytest.fail(f"{getattr(fn, '__name__', fn)} still running after {budget_s} s (a hang)")
    if "error" in box:
        raise box["error"]
    box["elapsed"] = time.monotonic() - start
    return box.get("value")


def _task() -> Task:
    tests = {"function": "f", "cases": [{"args": [1], "expected": 2}, {"args": [5], "expected": 6}]}
    return Task(id="hostile", env="code", prompt="f", tier="easy", split="train", template="t",
                reference=(), expected=tests)


@pytest.fixture
def env():
    require_system("bwrap", "bubblewrap")
    e = CodeEnv(limits=SandboxLimits(wall_s=8))
    e.reset(_task())
    yield e
    within(10, e.close)


def call(env: CodeEnv, name: str, **arguments):
    return env.execute(ToolCall(name=name, arguments=arguments))


def python(env: CodeEnv, code: str):
    result = call(env, "run_python", code=code)
    assert result.ok, result.content
    return result


# ---- deadlines that hold: host-side operations on what the program made -------------------------

def test_a_fifo_where_the_host_writes_is_an_error_not_a_hang(env):
    python(env, "import os; os.mkfifo('solution.py'); os.makedirs('pkg'); os.mkfifo('pkg/m.py')")
    for path in ("solution.py", "pkg/m.py"):
        result = within(5, call, env, "write_file", path=path, content=GOOD)
        assert not result.ok and not result.fault and result.error == "bad_path"
    # The tests see no solution (a FIFO is not a file), snapshot and restore skip it.
    assert not within(5, call, env, "run_tests").ok
    snap = within(5, env.snapshot)
    assert "solution.py" not in snap["tree"].files and "pkg" in snap["tree"].dirs
    within(5, env.restore, snap)


def test_sockets_and_fifos_do_not_block_snapshot_undo_or_cleanup(env):
    call(env, "write_file", path="solution.py", content=GOOD)
    chunk = 12 * 1024 * 1024
    result = within(20, call, env, "run_python", code=(
        "import os, socket\n"
        "os.mkfifo('pipe')\n"
        "s = socket.socket(socket.AF_UNIX); s.bind('sock')\n"
        f"for i in range(3):\n    open(f'blob{{i}}', 'wb').write(b'x' * {chunk})\n"))
    assert "its file changes were undone" in result.content
    tree = within(5, env.snapshot)["tree"]
    assert set(tree.files) == {"solution.py"} and not tree.links


# Snapshot, restore and removal each walk ~1,260 nested directories: ~1-5 s alone, but past 20 s
# while `make test`'s other worker trains (a fresh-clone run failed so). A hang never ends, so
# 60 s still tells one apart from a loaded machine.
DEEP_TREE_S = 60


def test_directory_chains_deeper_than_path_max_and_the_recursion_limit(env):
    # 60 levels of 100-character names (> 6,000 characters of path) and 1,200 levels of short
    # ones (past Python's recursion limit, where shutil.rmtree raised RecursionError).
    python(env, (
        "import os\n"
        "for top, name, depth in (('long', 'x' * 100, 60), ('deep', 'd', 1200)):\n"
        "    os.mkdir(top); os.chdir(top)\n"
        "    for _ in range(depth):\n"
        "        os.mkdir(name); os.chdir(name)\n"
        "    open('leaf.txt', 'w').write(top)\n"
        "    os.chdir('/work')\n"))
    snap = within(DEEP_TREE_S, env.snapshot)
    leaves = {rel: data for rel, data in snap["tree"].files.items() if rel.endswith("leaf.txt")}
    assert sorted(leaves.values()) == [b"deep", b"long"]
    assert max(len(rel) for rel in leaves) > 6000
    python(env, "import shutil; shutil.rmtree('long')")
    within(DEEP_TREE_S, env.restore, snap)
    assert within(DEEP_TREE_S, env.snapshot)["tree"] == snap["tree"]
    root = env._workdir
    within(DEEP_TREE_S, env.close)
    assert root is not None and not root.exists()


def test_thousands_of_files_cost_the_host_only_the_entry_cap(env):
    call(env, "write_file", path="solution.py", content=GOOD)
    result = within(30, call, env, "run_python", code=(
        "import os\nfor i in range(6000):\n    open(f'f{i}', 'w').close()\n"))
    assert f"more than {MAX_WORKDIR_ENTRIES} files" in result.content
    assert "its file changes were undone" in result.content
    assert set(within(5, env.snapshot)["tree"].files) == {"solution.py"}


# ---- caps per call: all processes together ----------------------------------------------------

# Eight children of ~150 MB each: every one under RLIMIT_AS (512 MB), together 1.2 GB.
_FORK_HOGS = r"""
import os, time
kids = []
for i in range(8):
    pid = os.fork()
    if pid == 0:
        b = bytearray(150 * 1024 * 1024)
        for j in range(0, len(b), 4096):
            b[j] = 1
        time.sleep(6)
        os._exit(0)
    kids.append(pid)
for pid in kids:
    os.waitpid(pid, 0)
print("all children survived")
"""
_CAP = SandboxLimits(wall_s=8, memory_mb=512, call_memory_mb=300, processes=16)


def _hogs() -> RunResult:
    require_system("bwrap", "bubblewrap")
    root = workdir.make_workdir()  # in $TMPDIR: pytest's tmp_path is closed to the sandbox uid
    try:
        sandbox = Sandbox(root, _CAP)
        return within(10, sandbox.run, [sandbox.python, "-c", _FORK_HOGS])
    finally:
        workdir.remove_workdir(root)


def test_memory_of_the_whole_call_is_capped_by_its_cgroup():
    parent = memlimit.cgroup_parent()
    if parent is None:
        pytest.skip("no memory cgroup can be made here (not root, nothing delegated)")
    result = _hogs()
    assert result.memory_exceeded and "all children survived" not in result.stdout
    assert "memory limit of 300 MB" in result.describe(_CAP)
    assert result.memory_peak_mb <= 300 + 1  # the kernel's count: never past the limit
    # This process's call cgroups are all removed (others may belong to runs killed elsewhere).
    assert not [p for p in parent.path.iterdir() if p.name.startswith(f"trajforge-{os.getpid()}-")]


def test_without_a_cgroup_the_supervisor_caps_the_call(monkeypatch):
    monkeypatch.setenv(memlimit.CGROUP_ENV, "off")
    memlimit.cgroup_parent.cache_clear()
    try:
        result = _hogs()
    finally:
        memlimit.cgroup_parent.cache_clear()
    assert result.memory_exceeded and "all children survived" not in result.stdout
    # Polled every 50 ms: it may overshoot by what the call allocates in between (the children
    # would reach 1.2 GB), and the call ends long before the children's 6 s of sleep.
    assert 300 < result.memory_peak_mb < 700
    assert result.wall_s < 5


# Memory that no process maps: a memfd filled with write(), a SysV segment after shmdt. It is in
# nobody's RSS, so the supervisor cannot see it, and RLIMIT_AS does not bound it.
_UNMAPPED_HOGS = r"""
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
try:
    fd = os.memfd_create("hog")
    for _ in range(400):
        os.write(fd, b"x" * 2**20)
    print("memfd held 400 MB")
except OSError as e:
    print("memfd refused:", e)
sid = libc.shmget(0, 400 * 2**20, 0o1600)
if sid >= 0:
    addr = libc.shmat(sid, None, 0)
    ctypes.memset(addr, 1, 400 * 2**20)
    libc.shmdt(ctypes.c_void_p(addr))
    print("shm held 400 MB")
else:
    print("shmget refused:", os.strerror(ctypes.get_errno()))
"""


def test_memory_no_process_maps_cannot_be_held_past_the_supervisor(monkeypatch):
    require_system("bwrap", "bubblewrap")
    monkeypatch.setenv(memlimit.CGROUP_ENV, "off")
    memlimit.cgroup_parent.cache_clear()
    root = workdir.make_workdir()
    try:
        sandbox = Sandbox(root, _CAP.model_copy(update={"file_mb": 512}))
        result = within(10, sandbox.run, [sandbox.python, "-c", _UNMAPPED_HOGS])
    finally:
        memlimit.cgroup_parent.cache_clear()
        workdir.remove_workdir(root)
    assert "memfd refused: [Errno 1]" in result.stdout, result.stdout + result.stderr
    assert "shmget refused: Operation not permitted" in result.stdout, result.stdout


def test_an_honest_call_is_measured_and_untouched():
    require_system("bwrap", "bubblewrap")
    root = workdir.make_workdir()
    try:
        sandbox = Sandbox(root, _CAP)
        result = within(10, sandbox.run, [sandbox.python, "-c", (
            "import time; b = bytearray(100 * 1024 * 1024); b[::4096] = b'1' * len(b[::4096]);"
            " time.sleep(0.3); print(input())")], stdin=b"stdin still arrives\n")
    finally:
        workdir.remove_workdir(root)
    assert result.returncode == 0 and result.stdout == "stdin still arrives\n"
    assert not result.memory_exceeded and 100 <= result.memory_peak_mb < 300


def test_cgroup_directories_are_found_for_v1_and_v2():
    v1 = ("35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
          "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n")
    assert memlimit.own_cgroups(v1, "4:memory:/process_api/abc\n0::/\n") == [
        memlimit.CgroupParent(Path("/sys/fs/cgroup/unified"), 2),
        memlimit.CgroupParent(Path("/sys/fs/cgroup/memory/process_api/abc"), 1)]
    v2 = "29 23 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n"
    assert memlimit.own_cgroups(v2, "0::/user.slice/user-1000.slice/session-2.scope\n") == [
        memlimit.CgroupParent(Path("/sys/fs/cgroup/user.slice/user-1000.slice/session-2.scope"),
                              2)]
    # A container whose cgroup namespace root is its own cgroup (mount root /, path /).
    assert memlimit.own_cgroups(v2, "0::/\n") == [memlimit.CgroupParent(Path("/sys/fs/cgroup"),
                                                                        2)]
    # A v1 mount that shows another subtree does not hold ours.
    other = "35 31 0:32 /docker/xyz /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n"
    assert memlimit.own_cgroups(other, "4:memory:/process_api/abc\n") == []


# ---- grading the judge can trust --------------------------------------------------------------

def _forging_solution(line_expr: str) -> str:
    """A solution that writes ``eval(line_expr)`` as a report line to the runner's results pipe
    (a dup of the original stdout, whichever fd that is) and exits before the real report."""
    return (
        "import os, stat\n"
        f"MARK = {MARK!r}\n"
        "def f(x):\n"
        f"    line = ({line_expr}).encode('utf-8', 'surrogatepass')\n"
        "    mine = os.fstat(2).st_ino\n"
        "    for fd in range(3, 64):\n"
        "        try:\n"
        "            st = os.fstat(fd)\n"
        "        except OSError:\n"
        "            continue\n"
        "        if stat.S_ISFIFO(st.st_mode) and st.st_ino != mine:\n"
        "            os.write(fd, b'\\n' + line + b'\\n')\n"
        "    os._exit(0)\n")


@pytest.mark.parametrize("forged", [
    "MARK + '[' * 200_000",                                  # deeper than json.loads can recurse
    "MARK + '{\"cases\": [{\"value\": ' + '9' * 5000 + '}]}'",  # past the int-string limit
    "MARK + '{\"error\": {\"not\": \"a string\"}}'",
    "MARK + '{\"cases\": 7}'",
    "MARK + '{\"cases\": [{\"value\": 2}, {\"error\": [1, 2]}]}'",
    "MARK + '{\"cases\": [{\"value\": 2}, \"six\"]}'",
    f"MARK + '{{\"cases\": [' + '[' * {MAX_DEPTH + 1} + ']' * {MAX_DEPTH + 1} + ']}}'",
], ids=["deep", "huge-int", "error-not-str", "cases-not-list", "case-error-not-str",
        "case-not-object", "past-max-depth"])
def test_a_forged_result_line_fails_the_solution_and_is_not_a_fault(env, forged):
    call(env, "write_file", path="solution.py", content=_forging_solution(forged))
    result = within(15, call, env, "submit")
    assert result.ok and not result.fault and "0/2 tests passed" in result.content
    verdict = env.verify()
    assert verdict.submitted and not verdict.correct
    assert "could not be read" in verdict.detail


def test_forged_strings_reach_the_model_cut_and_valid_utf8(env):
    forged = ("MARK + '{\"cases\": [{\"error\": \"\\\\ud800' + 'x' * 50_000"
              " + '\"}, {\"value\": 6}]}'")
    call(env, "write_file", path="solution.py", content=_forging_solution(forged))
    report = within(15, call, env, "run_tests")
    assert "1/2 tests passed" in report.content and len(report.content) < 10_000
    report.content.encode("utf-8")  # no lone surrogate survives


def test_reading_pathological_reports_is_bounded_in_time():
    tests = HiddenTests(function="f", cases=[{"args": [1], "expected": 2}])
    for line in ("[" * 1_000_000, '"' + "\\" * 999_999, "{" * 500_000 + "}" * 500_000):
        start = time.monotonic()
        verdict = judge(tests, RunResult(returncode=0, stdout=MARK + line, stderr=""),
                        SandboxLimits())
        # ~0.1 s alone; the bound is against quadratic or unbounded reading, with room for a
        # contended 2-core CI machine (2.03 s seen under a parallel suite).
        assert time.monotonic() - start < 10.0
        assert not verdict.all_passed and "could not be read" in verdict.error
    assert isinstance(read_report(MARK + "x" * 2_000_000, MARK), Unreadable)
    assert read_report("no mark here", MARK) is None
    assert nesting_depth('{"a": "[[[[", "b": [[1]]}') == 3


# ---- recovery that loses nothing --------------------------------------------------------------

_ODD_NAMES = (
    "import os\n"
    "open('with space.py', 'w').write('a')\n"
    "open('accént ünïcode.txt', 'w').write('b')\n"
    "open('new\\nline', 'w').write('c')\n"
    "open(b'not-utf8-\\xff\\xfe', 'wb').write(b'd')\n"
    "os.makedirs('a/b/c/d/e/f/g/h/i/j/k/l')\n"
    "open('a/b/c/d/e/f/g/h/i/j/k/l/deep file.txt', 'w').write('e')\n"
    "os.makedirs('empty/inside')\n"
    "os.symlink('with space.py', 'link to it')\n")


def test_restore_brings_back_every_name_the_program_made(env):
    python(env, _ODD_NAMES)
    snap = within(5, env.snapshot)
    names = set(snap["tree"].files) | set(snap["tree"].links) | set(snap["tree"].dirs)
    assert {"with space.py", "accént ünïcode.txt", "new\nline", "not-utf8-\udcff\udcfe",
            "link to it", "empty/inside", "a/b/c/d/e/f/g/h/i/j/k/l/deep file.txt"} <= names
    python(env, "import os, shutil\nfor n in os.listdir(b'.'):\n"
                "    shutil.rmtree(n) if os.path.isdir(n) and not os.path.islink(n) "
                "else os.unlink(n)\nopen('junk', 'w').write('junk')")
    within(5, env.restore, snap)
    assert within(5, env.snapshot)["tree"] == snap["tree"]
    # ... and the program sees them again, byte for byte.
    shown = python(env, "import os; print(sorted(os.listdir(b'.')))").content
    assert "b'not-utf8-\\xff\\xfe'" in shown and "b'junk'" not in shown


def test_undoing_an_over_quota_run_keeps_the_files_from_before(env):
    python(env, _ODD_NAMES)
    before = within(5, env.snapshot)["tree"]
    result = within(20, call, env, "run_python", code=(
        "import os\nos.unlink('with space.py')\n"
        "for i in range(3):\n    open(f'blob{i}', 'wb').write(b'x' * (12 * 1024 * 1024))\n"))
    assert "its file changes were undone" in result.content
    assert within(5, env.snapshot)["tree"] == before


def test_a_tree_that_cannot_be_restored_leaves_the_work_dir_as_it_was(env):
    python(env, _ODD_NAMES)
    before = within(5, env.snapshot)["tree"]
    root = env._workdir
    assert root is not None
    bad = workdir.Tree({"../outside": b"x", "ok.txt": b"y", "a/./b": b"z"}, {})
    with pytest.raises(ValueError, match="cannot restore 2 entries: '../outside', 'a/./b'"):
        workdir.replace_tree(root, bad)
    # A file and a directory of the same name: fails while being built, aside.
    clash = workdir.Tree({"x": b"file", "x/y": b"under a file"}, {})
    with pytest.raises(OSError):
        workdir.replace_tree(root, clash)
    assert workdir.read_tree(root) == before
    assert not [p for p in root.parent.iterdir() if p.name.startswith(f".{root.name}.")]
