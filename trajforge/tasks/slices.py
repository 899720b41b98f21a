"""Slices of a task pool: ``--shard I/N`` runs the I-th of N disjoint parts of a pool.

A task belongs to slice ``I`` of ``N`` when its position in the pool (after ``--split``) is
``I`` modulo ``N``. Positions, not a hash of the task id: the slices differ in size by at most
one task (a hash leaves 39 tasks split 23/16 as easily as 20/19, and the largest slice sets the
wall time), and a stride spreads every tier over every slice. Rerunning the same command on the
same pool gives each slice the same tasks; which slice ran an episode never enters its
idempotency key, so a resume (any slicing) skips what is stored.

Slices nest: slice ``r`` of ``P`` inside slice ``I`` of ``N`` is slice ``I + N*r`` of ``N*P``, so
a cluster job that takes ``--shard I/N`` can spread its slice over its own GPUs with
``--processes P``.
"""

from __future__ import annotations

from typing import NamedTuple, Sequence, TypeVar

T = TypeVar("T")


class Slice(NamedTuple):
    """The ``index``-th of ``count`` disjoint parts of a pool (``--shard index/count``)."""

    index: int
    """Which part, from 0."""
    count: int
    """How many parts the pool is cut into."""

    @classmethod
    def parse(cls, text: str) -> "Slice":
        """``"1/4"`` → ``Slice(1, 4)``; ValueError saying what is expected otherwise."""
        index, sep, count = text.strip().partition("/")
        if not (sep and index.isdigit() and count.isdigit()) or not int(index) < int(count):
            raise ValueError(f"--shard {text!r}: expected I/N with 0 <= I < N, e.g. 0/4")
        return cls(int(index), int(count))

    def of(self, tasks: Sequence[T]) -> list[T]:
        """The tasks of this slice, in pool order."""
        return list(tasks[self.index::self.count])

    def split(self, parts: int) -> list["Slice"]:
        """This slice cut into ``parts`` slices (of the whole pool) that cover it exactly."""
        return [Slice(self.index + self.count * r, self.count * parts) for r in range(parts)]

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


WHOLE = Slice(0, 1)
"""The whole pool."""
