"""Sandbox start-up overhead: a trivial program sandboxed vs a plain subprocess, in one run.

    .venv/bin/python benchmarks/sandbox.py [--calls 100] [--code "print(1)"]

Times ``--calls`` runs of a trivial Python program three ways, interleaved call by call so load
on the machine hits all of them alike:

* ``subprocess``: ``subprocess.run([python, "-c", code])`` — the unsandboxed baseline;
* ``Sandbox.run``: the same program through bubblewrap (namespaces, seccomp, prlimit, the
  deadline and output capture), i.e. the cost of isolation;
* ``CodeEnv.run_python``: the tool call the model makes (adds the work-dir quota check and
  formatting on top of ``Sandbox.run``).

Prints median and p90 wall time per call and each row's median over the baseline's.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import time

from trajforge.envs.code.env import CodeEnv
from trajforge.envs.sandbox import Sandbox, check_sandbox
from trajforge.envs.workdir import make_workdir, remove_workdir
from trajforge.schema import Task, ToolCall


def _p90(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--code", default="print(1)")
    args = parser.parse_args()

    started = time.perf_counter()
    check = check_sandbox()
    self_test_s = time.perf_counter() - started
    if not check.ok:
        raise SystemExit(check.message())
    workdir = make_workdir()
    sandbox = Sandbox(workdir)
    task = Task(id="bench", env="code", prompt="", tier="easy", split="train", template="bench",
                reference=(), expected={"function": "f", "cases": [{"args": [], "expected": 1}]})
    env = CodeEnv()
    env.reset(task)
    call = ToolCall(name="run_python", arguments={"code": args.code})
    runners = {
        "subprocess (no sandbox)": lambda: subprocess.run([sandbox.python, "-c", args.code],
                                                          capture_output=True, check=True),
        "Sandbox.run": lambda: sandbox.run([sandbox.python, "-c", args.code]),
        "CodeEnv.run_python": lambda: env.execute(call),
    }
    times: dict[str, list[float]] = {name: [] for name in runners}
    try:
        for name, fn in runners.items():  # warm-up: page cache, first-call imports
            fn()
        for _ in range(args.calls):
            for name, fn in runners.items():
                t0 = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - t0)
    finally:
        env.close()
        remove_workdir(workdir)

    base = statistics.median(times["subprocess (no sandbox)"])
    print(f"python: {sandbox.python}   calls: {args.calls}   code: {args.code!r}   "
          f"self-test (once per process): {self_test_s * 1000:.0f} ms")
    print(f"{'':26s} {'median ms':>10s} {'p90 ms':>8s} {'x baseline':>11s} {'+ms':>7s}")
    for name, values in times.items():
        med = statistics.median(values)
        print(f"{name:26s} {med * 1000:10.1f} {_p90(values) * 1000:8.1f} {med / base:11.2f} "
              f"{(med - base) * 1000:7.1f}")


if __name__ == "__main__":
    main()
