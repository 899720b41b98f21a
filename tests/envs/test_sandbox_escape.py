"""Hostile programs against the code sandbox: every escape attempt must fail, nothing may linger.

Each program prints ``ESCAPED: <what>`` if an attempt succeeds; the test also checks from the host
side what the program cannot see (host files untouched, the loopback server got no connection,
the harness's secret never appears). Every program carries a unique marker in its argv, which
forked children inherit and exec'd children are given, so after each call the host scans /proc
for any process still carrying it.

The programs run concurrently in one module fixture (most of them wait on a deadline), so the
suite takes a few seconds; this test process usually runs as root, which is exactly the case the
process limit has to survive.
"""

from __future__ import annotations

import json
import os
import socket
import textwrap
import threading
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import require_system
from trajforge.envs.code.env import CodeEnv
from trajforge.envs.sandbox import RunResult, Sandbox, SandboxLimits
from trajforge.envs.workdir import make_workdir, remove_workdir
from trajforge.schema import Task, ToolCall

LIMITS = SandboxLimits(wall_s=2, cpu_s=1, memory_mb=256, file_mb=1, open_files=32,
                       processes=16, tmp_mb=8, output_bytes=4000)
SECRET_NAME = "TRAJFORGE_TEST_SECRET"
SECRET_VALUE = f"sk-{uuid.uuid4().hex}"

PRELUDE = """\
import ctypes, errno, json, os, resource, signal, socket, subprocess, sys, time
MARK = sys.argv[1]
CFG = json.loads(sys.argv[2])
libc = ctypes.CDLL(None, use_errno=True)
def escaped(what):
    print("ESCAPED:", what, flush=True)
def attempt(what, fn):
    try:
        fn()
    except Exception as e:
        print("blocked:", what, type(e).__name__, e, flush=True)
    else:
        escaped(what)
def sys_ok(what, ret):
    if ret == 0 or (what.startswith("fd:") and ret >= 0):
        escaped(what)
    else:
        print("blocked:", what, os.strerror(ctypes.get_errno()), flush=True)
"""


@dataclass
class Outcome:
    result: RunResult
    workdir: Path
    leftovers: list[int]

    @property
    def output(self) -> str:
        return self.result.stdout + self.result.stderr


def _w(path: str) -> str:
    return f"open({path!r}, 'w').write('x')"


PROGRAMS: dict[str, str] = {
    "write_outside_workdir": """
for p in [CFG["host_dir"] + "/pwned", "/work/../pwned", "/pwned", "/usr/pwned", "/etc/pwned",
          "/var/tmp/pwned", "/root/pwned", "/home/pwned", "/bin/pwned", "/proc/pwned"]:
    attempt("write " + p, lambda p=p: open(p, "w").write("x"))
""",
    "private_tmp": """
open("/tmp/" + MARK, "w").write("x")  # allowed: /tmp is the sandbox's own tmpfs
print("wrote private tmp")
""",
    "read_root_home": """
attempt("list /root", lambda: os.listdir("/root"))
attempt("read /root/.bashrc", lambda: open("/root/.bashrc").read())
attempt("list /home", lambda: os.listdir("/home"))
attempt("list host home", lambda: os.listdir(CFG["home"]))
""",
    "read_etc_shadow": """
for p in ["/etc/shadow", "/etc/passwd", "/etc/sudoers", "/etc/ssh", "/etc/hostname"]:
    attempt("read " + p, lambda p=p: os.listdir(p) if os.path.isdir(p) else open(p).read())
""",
    "read_repo": """
attempt("list repo", lambda: os.listdir(CFG["repo"]))
attempt("read repo file", lambda: open(CFG["repo"] + "/pyproject.toml").read())
""",
    "harness_env_vars": """
print(dict(os.environ))
if CFG["secret_name"] in os.environ:
    escaped("secret env var visible")
for p in ["/proc/self/environ", "/proc/1/environ"]:
    try:
        data = open(p, "rb").read()
        print(p, data)
        if CFG["secret_name"].encode() in data:
            escaped("secret in " + p)
    except OSError as e:
        print("blocked:", p, e)
""",
    "proc_environ_of_others": """
for pid in os.listdir("/proc"):
    if pid.isdigit():
        try:
            data = open("/proc/%s/environ" % pid, "rb").read()
        except OSError:
            continue
        if CFG["secret_name"].encode() in data:
            escaped("secret via /proc/%s/environ" % pid)
attempt("see harness pid", lambda: open("/proc/%d/environ" % CFG["host_pid"], "rb").read())
print("pids visible:", sorted(int(p) for p in os.listdir("/proc") if p.isdigit()))
""",
    "internet_socket": """
for host in [("1.1.1.1", 53), ("8.8.8.8", 443), ("93.184.216.34", 80)]:
    attempt("connect %s" % (host,), lambda host=host: socket.create_connection(host, timeout=1))
attempt("dns lookup", lambda: socket.getaddrinfo("example.com", 80))
attempt("udp send", lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"x", ("8.8.8.8", 53)))
""",
    "loopback_server": """
attempt("connect host loopback", lambda: socket.create_connection(("127.0.0.1", CFG["port"]), timeout=1))
attempt("connect localhost", lambda: socket.create_connection(("localhost", CFG["port"]), timeout=1))
attempt("connect ipv6 loopback", lambda: socket.create_connection(("::1", CFG["port"]), timeout=1))
""",
    "raw_sockets": """
attempt("raw icmp socket", lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP))
attempt("packet socket", lambda: socket.socket(socket.AF_PACKET, socket.SOCK_RAW))
import fcntl, struct
up = struct.pack("16sH", b"lo", 0x1 | 0x40)  # IFF_UP | IFF_RUNNING
attempt("bring loopback up", lambda: fcntl.ioctl(socket.socket(), 0x8914, up))  # SIOCSIFFLAGS
""",
    "fork_bomb": """
count = 0
for _ in range(1000):
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        time.sleep(60)
        os._exit(0)
    count += 1
print("forks:", count, flush=True)
if count >= 1000:
    escaped("unlimited forks")
""",
    "exponential_fork_bomb": """
start = time.time()
while time.time() - start < 30:
    try:
        os.fork()
    except OSError:
        time.sleep(0.01)
""",
    "thread_bomb": """
import threading
# Small stacks, so the process-count limit is what stops us rather than the
# address-space limit (a thread whose bootstrap hits MemoryError leaves
# Thread.start() waiting forever; the deadline then kills the run).
threading.stack_size(256 * 1024)
n = 0
try:
    for _ in range(1000):
        threading.Thread(target=time.sleep, args=(60,), daemon=True).start()
        n += 1
except RuntimeError as e:
    print("threads:", n, e)
if n >= 1000:
    escaped("unlimited threads")
os._exit(0)
""",
    "memory_bomb": """
attempt("allocate 10 GB", lambda: bytearray(10 * 1024 ** 3))
chunks = []
try:
    while len(chunks) < 100:
        chunks.append(bytearray(50 * 1024 ** 2))
    escaped("allocated 5 GB")
except MemoryError:
    print("MemoryError after", len(chunks) * 50, "MB")
""",
    "huge_file": """
with open("/work/big", "wb") as f:
    try:
        for _ in range(100):
            f.write(b"x" * 1024 ** 2)
            f.flush()
        escaped("wrote 100 MB")
    except OSError as e:
        print("blocked:", e)
""",
    "fill_tmp": """
n = 0
try:
    with open("/tmp/fill", "wb") as f:
        for _ in range(500):
            f.write(b"x" * 1024 ** 2)
            f.flush()
            n += 1
        escaped("wrote 500 MB to /tmp")
except OSError as e:
    print("tmp full after", n, "MB:", e)
files = 0
for i in range(500):  # many files below the size limit: still bounded by the tmpfs size
    try:
        with open("/tmp/f%d" % i, "wb") as f:
            f.write(b"y" * 900 * 1024)
        files += 1
    except OSError as e:
        print("tmp files:", files, e)
        break
else:
    escaped("450 MB in /tmp")
""",
    "sleep_past_deadline": """
time.sleep(60)
escaped("slept past the deadline")
""",
    "cpu_burn": """
while True:
    pass
""",
    "double_fork_daemon": """
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.closerange(0, 64)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        time.sleep(60)
    os._exit(0)
os.wait()
print("daemon started")
""",
    "nohup_background": """
subprocess.Popen(["nohup", sys.executable, "-c", "import time; time.sleep(60)", MARK],
                 start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
subprocess.Popen("setsid sh -c 'sleep 60' %s &" % MARK, shell=True)
print("background started")
""",
    "daemon_then_timeout": """
if os.fork() == 0:
    os.setsid()
    time.sleep(60)
    os._exit(0)
time.sleep(60)
""",
    "ptrace": """
pid = os.fork()
if pid == 0:
    time.sleep(5)
    os._exit(0)
sys_ok("ptrace attach init", libc.ptrace(16, 1, 0, 0))
sys_ok("ptrace attach child", libc.ptrace(16, pid, 0, 0))
sys_ok("ptrace traceme", libc.ptrace(0, 0, 0, 0))
os.kill(pid, 9)
""",
    "mount": """
sys_ok("mount tmpfs", libc.mount(b"tmpfs", b"/tmp", b"tmpfs", 0, None))
sys_ok("bind mount root", libc.mount(b"/", b"/work", None, 4096, None))
sys_ok("remount /usr rw", libc.mount(None, b"/usr", None, 32 | 1 << 12, None))
sys_ok("umount /work", libc.umount2(b"/work", 2))
sys_ok("umount /usr", libc.umount2(b"/usr", 2))
""",
    "chroot_pivot": """
attempt("chroot", lambda: os.chroot("/tmp"))
sys_ok("pivot_root", libc.syscall(155, b"/tmp", b"/tmp"))
""",
    "setuid_setgid": """
attempt("setuid 0", lambda: os.setuid(0))
attempt("seteuid 0", lambda: os.seteuid(0))
attempt("setgid 0", lambda: os.setgid(0))
attempt("setgroups", lambda: os.setgroups([0]))
attempt("setresuid", lambda: os.setresuid(0, 0, 0))
if os.getuid() == 0 or os.geteuid() == 0:
    escaped("uid 0")
""",
    "kill_parent": """
for target in [os.getppid(), 1, -1]:
    try:
        os.kill(target, signal.SIGKILL)
    except OSError as e:
        print("blocked: kill", target, e)
attempt("signal harness", lambda: os.kill(CFG["host_pid"], 0))
""",
    "write_proc_sys": """
for p in ["/proc/sys/kernel/hostname", "/proc/sys/vm/drop_caches", "/proc/sysrq-trigger",
          "/proc/sys/kernel/core_pattern", "/proc/sys/user/max_user_namespaces"]:
    attempt("write " + p, lambda p=p: open(p, "w").write("1"))
""",
    "raise_rlimits": """
for name in ["RLIMIT_NPROC", "RLIMIT_AS", "RLIMIT_CPU", "RLIMIT_FSIZE", "RLIMIT_NOFILE"]:
    which = getattr(resource, name)
    soft, hard = resource.getrlimit(which)
    attempt("raise " + name, lambda which=which, hard=hard: resource.setrlimit(which, (hard + 1, hard + 1)))
    attempt("unlimit " + name, lambda which=which: resource.setrlimit(which, (resource.RLIM_INFINITY, resource.RLIM_INFINITY)))
child = os.fork()
if child == 0:
    time.sleep(5)
    os._exit(0)
hard = resource.getrlimit(resource.RLIMIT_NPROC)[1]
attempt("prlimit raise on a child", lambda: resource.prlimit(child, resource.RLIMIT_NPROC, (hard + 1, hard + 1)))
os.kill(child, 9)
""",
    "modify_system_dirs": """
attempt("append to python", lambda: open(sys.executable, "ab"))
attempt("remove env", lambda: os.remove("/usr/bin/env"))
attempt("chmod python", lambda: os.chmod(sys.executable, 0o777))
attempt("rename", lambda: os.rename("/usr/bin/env", "/usr/bin/env2"))
attempt("write stdlib", lambda: open(os.path.dirname(os.__file__) + "/evil.py", "w"))
attempt("write ld cache", lambda: open("/etc/ld.so.cache", "ab"))
""",
    "symlink_escape": """
os.symlink("/etc/shadow", "/work/s1")
os.symlink("/", "/work/rootlink")
os.symlink(CFG["host_dir"], "/work/hostdir")
attempt("read via link", lambda: open("/work/s1").read())
attempt("read /root via link", lambda: os.listdir("/work/rootlink/root"))
attempt("write host dir via link", lambda: open("/work/hostdir/pwned", "w").write("x"))
attempt("proc root", lambda: os.listdir("/proc/1/root/root"))
attempt("proc cwd", lambda: open("/proc/1/cwd/../etc/shadow").read())
""",
    "hardlink_escape": """
attempt("hardlink python", lambda: os.link(sys.executable, "/work/py"))
attempt("hardlink ld cache", lambda: os.link("/etc/ld.so.cache", "/work/cache"))
""",
    "dev_access": """
for p in ["/dev/sda", "/dev/vda", "/dev/mem", "/dev/kmem", "/dev/port", "/dev/kmsg",
          "/dev/console", "/dev/tty", "/dev/fuse", "/dev/kvm", "/dev/net/tun", "/dev/nvidia0"]:
    attempt("open " + p, lambda p=p: os.close(os.open(p, os.O_RDWR)))
attempt("mknod block device", lambda: os.mknod("/work/sda", 0o600 | 0o060000, os.makedev(8, 0)))
import fcntl, termios
attempt("TIOCSTI", lambda: fcntl.ioctl(0, termios.TIOCSTI, b"x"))
attempt("list /sys", lambda: os.listdir("/sys/class/net"))
attempt("cgroup fs", lambda: os.listdir("/sys/fs/cgroup"))
""",
    "new_namespaces": """
for name, flag in [("user", 0x10000000), ("mount", 0x00020000), ("net", 0x40000000),
                   ("pid", 0x20000000), ("uts", 0x04000000)]:
    sys_ok("unshare " + name, libc.unshare(flag))
for ns in ["user", "mnt", "net", "pid"]:
    try:
        fd = os.open("/proc/1/ns/" + ns, os.O_RDONLY)
    except OSError as e:
        print("blocked: open ns", ns, e)
        continue
    sys_ok("setns " + ns, libc.setns(fd, 0))
attempt("unshare binary", lambda: subprocess.run(["unshare", "-r", "true"], check=True))
""",
    "kernel_surfaces": """
sys_ok("fd:bpf", libc.syscall(321, 0, 0, 0))
sys_ok("fd:perf_event_open", libc.syscall(298, 0, 0, -1, -1, 0))
sys_ok("fd:io_uring_setup", libc.syscall(425, 8, ctypes.create_string_buffer(120)))
sys_ok("fd:userfaultfd", libc.syscall(323, 0))
sys_ok("keyctl", libc.syscall(250, 0, -3, 0))
sys_ok("reboot", libc.syscall(169, 0xfee1dead, 0x28121969, 0x01234567, 0))
sys_ok("kexec", libc.syscall(246, 0, 0, 0, 0))
sys_ok("init_module", libc.syscall(175, 0, 0, b""))
""",
    "inherited_fds": """
for fd in range(3, 1024):
    try:
        os.lseek(fd, 0, 0)
        data = os.read(fd, 4096)
    except OSError:
        continue
    print("fd", fd, data[:60])
    if CFG["fd_secret"].encode() in data:
        escaped("read the harness's file through fd %d" % fd)
""",
    "output_flood": """
chunk = "z" * 65536
for _ in range(800):
    sys.stdout.write(chunk)
sys.stderr.write("e" * 10_000_000)
""",
    "too_many_files": """
fds = []
try:
    for _ in range(10000):
        fds.append(os.open("/dev/null", os.O_RDONLY))
    escaped("10000 fds")
except OSError as e:
    print("fds capped at", len(fds), e)
""",
}


def _no_escape(o: Outcome) -> None:
    assert "ESCAPED" not in o.output, o.output[-2000:]


def _check_host_dir_untouched(o: Outcome, cfg: dict) -> None:
    assert os.listdir(cfg["host_dir"]) == ["victim.txt"]
    assert Path(cfg["host_dir"], "victim.txt").read_text() == "original"
    assert not os.path.exists("/pwned")


CHECKS: dict[str, Callable[[Outcome, dict], None]] = {
    "write_outside_workdir": lambda o, cfg: (_check_host_dir_untouched(o, cfg),
                                             _assert("blocked: write /pwned" in o.output, o)),
    "private_tmp": lambda o, cfg: (_assert("wrote private tmp" in o.output, o),
                                   _assert(not os.path.exists(f"/tmp/{cfg['marks']['private_tmp']}"), o)),
    "harness_env_vars": lambda o, cfg: _assert(SECRET_VALUE not in o.output, o),
    "proc_environ_of_others": lambda o, cfg: _assert(SECRET_VALUE not in o.output, o),
    "loopback_server": lambda o, cfg: _assert(cfg["accepted"] == [], o),
    "fork_bomb": lambda o, cfg: _assert(_count(o, "forks:") < LIMITS.processes, o),
    "exponential_fork_bomb": lambda o, cfg: _assert(o.result.timed_out, o),
    # Stopped by the process limit, or (where the memory limit bites first) by the deadline.
    "thread_bomb": lambda o, cfg: _assert("threads:" in o.output or o.result.timed_out, o),
    # Stopped by the memory limit; on a loaded machine the 2 s deadline may come first, after the
    # 10 GB attempt already met the limit (CI saw 2.15 s with the suite running beside it).
    "memory_bomb": lambda o, cfg: _assert("MemoryError after" in o.output or (
        o.result.timed_out and "blocked: allocate 10 GB MemoryError" in o.output), o),
    "huge_file": lambda o, cfg: _assert((o.workdir / "big").stat().st_size <= LIMITS.file_mb * 2 ** 20, o),
    "fill_tmp": lambda o, cfg: _assert("tmp full after" in o.output
                                       and _count(o, "tmp files:") * 0.9 <= LIMITS.tmp_mb, o),
    "sleep_past_deadline": lambda o, cfg: _assert(o.result.timed_out
                                                  and o.result.wall_s < LIMITS.wall_s + 2.5, o),
    "cpu_burn": lambda o, cfg: _assert(o.result.signal == "SIGXCPU" or o.result.timed_out, o),
    "daemon_then_timeout": lambda o, cfg: _assert(o.result.timed_out, o),
    "symlink_escape": lambda o, cfg: _check_host_dir_untouched(o, cfg),
    "output_flood": lambda o, cfg: _assert(o.result.cut_bytes > 50_000_000 and
                                           len(o.output) < 3 * LIMITS.output_bytes, o),
    "too_many_files": lambda o, cfg: _assert("fds capped at" in o.output, o),
    "kill_parent": lambda o, cfg: _assert(o.result.returncode is not None, o),
}


def _assert(condition: bool, o: Outcome) -> None:
    assert condition, (o.result.describe(LIMITS), o.output[-2000:])


def _count(o: Outcome, label: str) -> int:
    line = next(line for line in o.output.splitlines() if line.startswith(label))
    return int(line[len(label):].split()[0])


def leftovers(marker: str) -> list[int]:
    """Host pids whose command line carries ``marker`` (this process excluded)."""
    found = []
    needle = marker.encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                if needle in f.read():
                    found.append(int(entry))
        except OSError:
            pass  # exited while we looked
    return found


@pytest.fixture(scope="module")
def escape_runs(tmp_path_factory):
    require_system("bwrap", "bubblewrap")
    host_dir = tmp_path_factory.mktemp("host")
    (host_dir / "victim.txt").write_text("original")
    # A file only the harness opened, left inheritable: close_fds must keep it out.
    fd_secret = f"fd-secret-{uuid.uuid4().hex}"
    secret_file = host_dir.parent / "fd-secret.txt"
    secret_file.write_text(fd_secret)
    secret_fd = os.open(secret_file, os.O_RDONLY)
    os.set_inheritable(secret_fd, True)
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    accepted: list = []
    stop = threading.Event()

    def serve():
        while not stop.is_set():
            try:
                accepted.append(server.accept()[1])
            except OSError:
                pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    os.environ[SECRET_NAME] = SECRET_VALUE
    marks = {name: f"TFMARK{uuid.uuid4().hex}" for name in PROGRAMS}
    cfg = {"host_dir": str(host_dir), "home": str(Path.home()), "repo": str(Path.cwd()),
           "secret_name": SECRET_NAME, "host_pid": os.getpid(),
           "port": server.getsockname()[1], "fd_secret": fd_secret}

    def run(name: str) -> Outcome:
        workdir = make_workdir()
        sandbox = Sandbox(workdir, LIMITS)
        code = PRELUDE + textwrap.dedent(PROGRAMS[name])
        result = sandbox.run([sandbox.python, "-c", code, marks[name], json.dumps(cfg)])
        return Outcome(result, workdir, leftovers(marks[name]))

    try:
        with ThreadPoolExecutor(max_workers=8) as pool:
            outcomes = dict(zip(PROGRAMS, pool.map(run, PROGRAMS)))
    finally:
        del os.environ[SECRET_NAME]
        stop.set()
        thread.join()
        server.close()
        os.close(secret_fd)
    yield outcomes, {**cfg, "accepted": accepted, "marks": marks}
    for o in outcomes.values():
        remove_workdir(o.workdir)


def test_suite_is_big_enough():
    assert len(PROGRAMS) >= 25


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_hostile_program_fails_and_leaves_nothing(name, escape_runs):
    outcomes, cfg = escape_runs
    o = outcomes[name]
    assert o.result.sandboxed
    _no_escape(o)
    assert o.leftovers == [], f"processes left behind: {o.leftovers}"
    # The program did run (an import error would make every "blocked" vacuous).
    assert "Traceback" not in o.result.stderr, o.output[-2000:]
    if name in CHECKS:
        CHECKS[name](o, cfg)


def test_every_attempt_in_a_program_was_made(escape_runs):
    """Programs print ``blocked:`` per failed attempt; a missing line would mean a crash."""
    outcomes, _ = escape_runs
    assert outcomes["write_outside_workdir"].output.count("blocked:") == 10
    assert outcomes["mount"].output.count("blocked:") == 5
    assert outcomes["new_namespaces"].output.count("blocked:") >= 6
    assert outcomes["kernel_surfaces"].output.count("blocked:") == 8


# ---- hostile code against the host side of the code environment -----------------------------

def _code_task() -> Task:
    tests = {"function": "f", "cases": [{"args": [1], "expected": 2}, {"args": [2], "expected": 3}]}
    return Task(id="escape", env="code", prompt="f", tier="easy", split="train", template="t",
                reference=(), expected=tests)


def test_write_file_never_follows_a_planted_symlink(tmp_path):
    require_system("bwrap", "bubblewrap")
    victim = tmp_path / "victim.txt"
    victim.write_text("original")
    env = CodeEnv()
    env.reset(_code_task())
    try:
        planted = env.execute(ToolCall(name="run_python", arguments={"code": (
            f"import os; os.symlink({str(victim)!r}, 'solution.py'); "
            f"os.symlink({str(tmp_path)!r}, 'pkg')")}))
        assert planted.ok
        for path in ("solution.py", "pkg/evil.py"):
            result = env.execute(ToolCall(name="write_file",
                                          arguments={"path": path, "content": "pwned"}))
            assert not result.ok and "symbolic link" in result.content
        assert victim.read_text() == "original"
        assert sorted(os.listdir(tmp_path)) == ["victim.txt"]
        # Inside the sandbox the link leads nowhere: the tests can't import the host file.
        report = env.execute(ToolCall(name="run_tests", arguments={}))
        assert "0/2 tests passed" in report.content
    finally:
        env.close()


def test_snapshot_records_links_without_reading_their_targets(tmp_path):
    require_system("bwrap", "bubblewrap")
    secret = tmp_path / "secret.txt"
    secret.write_text("host-only-secret")
    env = CodeEnv()
    env.reset(_code_task())
    try:
        env.execute(ToolCall(name="run_python", arguments={
            "code": f"import os; os.symlink({str(secret)!r}, 'leak')"}))
        snap = env.snapshot()
        assert snap["tree"].links == {"leak": str(secret)}
        assert b"host-only-secret" not in b"".join(snap["tree"].files.values())
        env.restore(snap)
        shown = env.execute(ToolCall(name="run_python", arguments={"code": "print(open('leak').read())"}))
        assert "host-only-secret" not in shown.content and "FileNotFoundError" in shown.content
    finally:
        env.close()
