"""``--processes N`` for ``collect`` and ``eval``: the command runs again as N ``--shard`` workers.

    trajforge collect --tasks tasks.jsonl --policy hf:Qwen/Qwen2.5-7B-Instruct --out store/ --processes 8
    trajforge collect ... --shard 3/8            # one slice by hand (a cluster scheduler's array job)
    trajforge eval --tasks tasks.jsonl --policy hf:m --policy hf:m@adapter/ --processes 4 --json eval.json

Worker ``r`` of N runs the same command line with ``--shard`` set to its slice of the pool
(``trajforge.tasks.slices``; slices nest, so ``--shard I/N --processes P`` works too) and
``LOCAL_RANK=r``, which puts its model on ``cuda:r`` when there are GPUs (``policies.devices``;
``--device`` still wins) and on the CPU otherwise, with the CPU's threads divided between the
workers. Each worker claims a store shard of its own, as every collection does
(``store.jsonl``), and writes a short JSON report (its slice, device, new episodes by tier, the
policy names). Its output goes to ``STORE/logs/worker-I-of-N.log``. The parent loads no model:
it waits for every worker, prints one line per worker and, for ``eval``, computes the metrics
from the store exactly as a one-process run does.

Why plain subprocesses of the CLI rather than ``train/distributed.py``'s launcher (torch's
elastic agent) or ``torch.multiprocessing.spawn``: the workers share nothing but the store — no
collectives, so no process group and no rendezvous port — and both of those stop every process
as soon as one fails, whereas here the others finish their slices, so a rerun redoes only the
failed slice. And each worker is exactly the ``--shard`` run a user can start by hand, one code
path for both. What is shared with training is the division of CPU threads
(``devices.threads_per_process``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import typer
from pydantic import BaseModel
from rich.console import Console

from trajforge.schema import SamplingConfig
from trajforge.tasks.slices import Slice

console = Console()

PROCESSES = typer.Option(1, min=1, help="worker processes, each on its own slice of the pool and its own "
                                 "device (cuda:RANK with GPUs, else the CPU); the parent loads no model")
SHARD = typer.Option("0/1", help="run only slice I/N of the pool (tasks whose position is I mod N)")
DEVICE = typer.Option(None, help="device for hf: policies (auto | cuda | cuda:N | mps | cpu; "
                                 "default: $TRAJFORGE_DEVICE, else this worker's GPU, else MPS/CPU)")
REPORT = typer.Option(None, hidden=True, help="(set by --processes) where a worker writes its report")
SPREAD_OPTIONS = ("--processes", "--shard", "--report")
"""The options a worker's command line is given afresh (the parent's are left out)."""


class WorkerReport(BaseModel):
    """What one worker ran: written by the worker as its last act, read by the parent."""

    slice: str
    """Its ``--shard`` slice, ``I/N``."""
    device: str
    """Where its model ran (``cpu``, ``cuda:1``; ``-`` for policies without a local model)."""
    new: int
    """Episodes it stored (all policies together)."""
    tiers: dict[str, int]
    """Those episodes by outcome tier."""
    policies: list[str]
    """The names of the policies it ran, in command-line order."""
    sampling: dict[str, SamplingConfig] = {}
    """Their sampling settings by name (``eval``: the run whose metrics the parent computes)."""


@dataclass
class WorkerResult:
    """One worker after it ended: its report, or the error it ended with."""

    rank: int
    slice: Slice
    log: Path
    report: Optional[WorkerReport] = None
    error: Optional[str] = None


def parse_slice(text: str) -> Slice:
    try:
        return Slice.parse(text)
    except ValueError as e:
        console.print(f"[red]error:[/red] {e}", highlight=False)
        raise typer.Exit(2) from None


def write_report(path: Path, report: WorkerReport) -> None:
    path.write_text(report.model_dump_json())


def tally(trajs) -> dict[str, int]:
    """Episodes by outcome tier."""
    tiers: dict[str, int] = {}
    for t in trajs:
        tiers[t.outcome.tier] = tiers.get(t.outcome.tier, 0) + 1
    return tiers


def device_of(policies) -> str:
    """Where the policies' local models are (``-`` when none has one)."""
    found = sorted({str(p.model.device) for p in policies if hasattr(getattr(p, "model", None), "device")})
    return ",".join(found) or "-"


def without_options(argv: list[str], valued: tuple[str, ...] = (), flags: tuple[str, ...] = ()) -> list[str]:
    """``argv`` less the options ``valued`` (with their values, ``--x V`` or ``--x=V``) and ``flags``."""
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a in valued:
            skip = True
        elif a in flags or a.split("=", 1)[0] in valued:
            continue
        else:
            out.append(a)
    return out


def command_line(command: str) -> list[str]:
    """This process's ``trajforge COMMAND ...`` arguments, which the workers rerun."""
    argv = sys.argv[1:]
    if argv[:1] != [command]:
        console.print(f"[red]error:[/red] --processes reruns the command line, which is not a "
                      f"`trajforge {command}` one here ({argv[:1]}); run `trajforge {command} ...`, "
                      "or start the --shard I/N runs yourself")
        raise typer.Exit(2)
    return argv


def worker_slices(part: Slice, processes: int, tasks: int) -> list[Slice]:
    """``part`` cut for ``processes`` workers, never more workers than tasks."""
    n = max(1, min(processes, tasks))
    if n < processes:
        console.print(f"{tasks} task{'' if tasks == 1 else 's'}: starting {n} worker"
                      f"{'' if n == 1 else 's'}, not {processes}")
    return part.split(n)


def spread(argv: list[str], slices: list[Slice], store_dir: Path) -> list[WorkerReport]:
    """Run ``trajforge ARGV --shard S`` for each slice at once; wait for all; print a line per
    worker. Returns their reports, or exits with status 1 naming every worker that failed (what
    the others stored stays stored: rerunning the command runs only what is missing)."""
    results = run_workers(argv, slices, store_dir)
    failed = [r for r in results if r.report is None]
    for r in results:
        if r.report is not None:
            rep = r.report
            console.print(f"worker {r.rank} (shard {rep.slice}, {rep.device}): {rep.new} new episodes "
                          f"{rep.tiers}", highlight=False)
        else:
            console.print(f"[red]error:[/red] worker {r.rank} (shard {r.slice}) failed: {r.error} "
                          f"(its output: {r.log})", highlight=False, soft_wrap=True)
    if failed:
        kept = sum(r.report.new for r in results if r.report is not None)
        console.print(f"{len(failed)} of {len(results)} workers failed; the {kept} new episodes the "
                      f"others collected are in {store_dir}, and rerunning the same command runs only "
                      "the missing ones", highlight=False, soft_wrap=True)
        raise typer.Exit(1)
    return [r.report for r in results]


def run_workers(argv: list[str], slices: list[Slice], store_dir: Path) -> list[WorkerResult]:
    """Start one worker per slice, wait for every one, and say how each ended."""
    from trajforge.policies.devices import threads_per_process

    logs = Path(store_dir) / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    reports = Path(tempfile.mkdtemp(prefix="trajforge-workers-"))
    threads = str(threads_per_process(len(slices)))
    running: list[tuple[WorkerResult, subprocess.Popen, Path]] = []
    console.print(f"starting {len(slices)} workers (shards {', '.join(map(str, slices))}); "
                  f"their output: {logs}/worker-*.log", highlight=False, soft_wrap=True)
    try:
        for rank, part in enumerate(slices):
            result = WorkerResult(rank, part, logs / f"worker-{part.index}-of-{part.count}.log")
            report = reports / f"worker-{rank}.json"
            # Plain one-line errors in the log: a wide console, standard tracebacks.
            env = {"OMP_NUM_THREADS": threads, **os.environ, "LOCAL_RANK": str(rank),
                   "COLUMNS": "1000", "_TYPER_STANDARD_TRACEBACK": "1"}
            cmd = [sys.executable, "-m", "trajforge.cli.main", *argv, "--shard", str(part), "--report", str(report)]
            with open(result.log, "wb") as log:
                proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT,
                                        stdin=subprocess.DEVNULL)
            running.append((result, proc, report))
        for result, proc, report in running:
            code = proc.wait()
            if code == 0 and report.exists():
                result.report = WorkerReport.model_validate_json(report.read_text())
            else:
                result.error = _ending(code, result.log)
    finally:
        for _, proc, _ in running:  # interrupted (Ctrl-C): stop the workers we started
            if proc.poll() is None:
                proc.terminate()
                proc.wait()
        for f in reports.glob("*"):
            f.unlink()
        reports.rmdir()
    return [r for r, _, _ in running]


def _ending(code: int, log: Path) -> str:
    """How a worker ended, in a line: its signal or exit status and the last line it printed
    (a traceback's last line is the exception; ``error: ...`` is a command's own message)."""
    if code < 0:
        try:
            how = f"killed by {signal.Signals(-code).name}"
        except ValueError:
            how = f"killed by signal {-code}"
    else:
        how = f"exit status {code}"
    try:
        lines = [ln.strip() for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        lines = []
    return f"{how}: {lines[-1]}" if lines else how


__all__ = ["DEVICE", "PROCESSES", "REPORT", "SHARD", "SPREAD_OPTIONS", "WorkerReport", "command_line", "device_of",
           "parse_slice", "spread", "tally", "without_options", "worker_slices", "write_report"]
