"""The database file a bring-your-own task was made on: its path and its content hash.

A task made from your own SQLite file records where it is (``Task.db``, absolute) and what it held
(``Task.db_sha256``). Its expected answer was read off that content, so a file that has changed
since would grade agents against stale answers: ``check_database`` refuses it, by name, before an
episode starts (``SqlEnv.reset``; ``check_databases`` for a whole pool, which the CLI runs before
collecting or evaluating).

Hashing a large database (BIRD's run to gigabytes) takes about a second per GB, so a digest is
computed once per process and file and reused while the file's size and modification time stay
the same.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from trajforge.schema import Task

_CHUNK = 1 << 20
_digests: dict[str, tuple[int, int, str]] = {}  # path -> (size, mtime_ns, sha256)
_lock = threading.Lock()


class DatabaseChanged(ValueError):
    """A task's database file no longer holds what the task was made on."""


def db_digest(path: str | Path) -> str:
    """SHA-256 of the file's bytes (cached while its size and mtime stay the same)."""
    key = str(Path(path).resolve())
    stat = os.stat(key)
    with _lock:
        known = _digests.get(key)
    if known is not None and known[:2] == (stat.st_size, stat.st_mtime_ns):
        return known[2]
    sha = hashlib.sha256()
    with open(key, "rb") as f:
        while chunk := f.read(_CHUNK):
            sha.update(chunk)
    digest = sha.hexdigest()
    with _lock:
        _digests[key] = (stat.st_size, stat.st_mtime_ns, digest)
    return digest


def check_database(task: Task) -> None:
    """Raise when ``task.db`` is missing (FileNotFoundError) or changed (DatabaseChanged)."""
    if task.db is None:
        return
    path = Path(task.db)
    if not path.is_file():
        raise FileNotFoundError(f"task {task.id}: database file {task.db} does not exist")
    if task.db_sha256 is not None and db_digest(path) != task.db_sha256:
        raise DatabaseChanged(_changed(path, task.db_sha256, 1))


def check_databases(tasks: Iterable[Task]) -> None:
    """``check_database`` for every database a pool uses, each file hashed once; one error naming
    every missing or changed file and how many tasks use it."""
    uses = Counter((t.db, t.db_sha256) for t in tasks if t.db is not None)
    problems = []
    for (db, recorded), n in sorted(uses.items()):
        path = Path(db)
        if not path.is_file():
            problems.append(f"database file {db} ({n} tasks) does not exist")
        elif recorded is not None and db_digest(path) != recorded:
            problems.append(_changed(path, recorded, n))
    if problems:
        raise DatabaseChanged("; ".join(problems))


def _changed(path: Path, recorded: str, n: int) -> str:
    return (f"database {path.name} ({path}) has changed since its {n} task{'s' if n != 1 else ''} "
            f"{'were' if n != 1 else 'was'} made: its content hash is {db_digest(path)[:12]}, the pool "
            f"recorded {recorded[:12]}; their answers would be stale, so make the tasks again "
            "(trajforge synth) or put the original file back")


__all__ = ["DatabaseChanged", "check_database", "check_databases", "db_digest"]
