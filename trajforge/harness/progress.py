"""Progress bars for long stages (collection, training), with rate and ETA."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, Iterator

from rich.progress import (BarColumn, MofNCompleteColumn, Progress, ProgressColumn, Task, TaskID,
                           TextColumn, TimeElapsedColumn, TimeRemainingColumn)
from rich.text import Text


@contextmanager
def progress_bar(label: str, total: int, enabled: bool = True) -> Iterator[Callable[[int], None]]:
    if not enabled or total == 0:
        yield lambda n: None
        return
    cols = [TextColumn(f"[bold]{label}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            TextColumn("eta"), TimeRemainingColumn()]
    with Progress(*cols, transient=False) as bar:
        job = bar.add_task(label, total=total)
        yield lambda n: bar.advance(job, n)




class _CollectStats(ProgressColumn):
    """episodes/s, successes so far, env_fault episodes and retried faults (from the task fields)."""

    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        done = int(task.completed)
        ok, faults, retried = (task.fields.get(k, 0) for k in ("ok", "faults", "retried"))
        share = f" ({100 * ok / done:.0f}%)" if done else ""
        rate = f"{speed:.1f} ep/s" if speed else "- ep/s"
        return Text(f"{rate} ok {ok}{share} fault {faults} retry {retried}", no_wrap=True)


class CollectTally:
    """What the collection bar shows; ``done(tier, retried)`` after each graded episode."""

    def __init__(self, bar: Progress | None = None, job: TaskID | None = None):
        self.bar, self.job = bar, job
        self.ok = self.faults = self.retried = self.episodes = 0

    def done(self, tier: str, retried: int = 0) -> None:
        self.episodes += 1
        self.ok += tier in ("success", "recovered")
        self.faults += tier == "env_fault"
        self.retried += retried
        if self.bar is not None:
            self.bar.update(self.job, advance=1, ok=self.ok, faults=self.faults, retried=self.retried)


@contextmanager
def collect_progress(label: str, total: int, enabled: bool = True) -> Iterator[CollectTally]:
    """A collection bar: done/total, episodes/s, success so far, env faults, retried faults, ETA."""
    if not enabled or total == 0:
        yield CollectTally()
        return
    cols = [TextColumn(f"[bold]{label}"), BarColumn(bar_width=16), MofNCompleteColumn(), _CollectStats(),
            TextColumn("eta"), TimeRemainingColumn()]
    with Progress(*cols, transient=False) as bar:
        job = bar.add_task(label, total=total, ok=0, faults=0, retried=0)
        yield CollectTally(bar, job)
