"""Progress bars for long stages (collection, training), with rate and ETA."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, Iterator

from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                           TimeRemainingColumn)


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


