"""Append-only JSONL store of trajectories, crash-safe, one writer per shard.

A store is a directory of ``*.jsonl`` shards. Each running collection claims its own shard
(``shard-<n>.jsonl``, the lowest number no live process holds: an exclusive ``flock`` marks a
shard taken and the kernel drops it when the process dies, so a killed run's shard is reused by
the next run). A writer appends whole lines and flushes + fsyncs after each episode, so a crash
loses at most the line being written. On read, a torn line (a crash mid-write: invalid JSON) is
skipped and reported in ``torn``; a writer that finds its shard ending without a newline starts a
fresh line, so the next append never glues onto a torn one. Every append writes a line that reads
back: a record that cannot be stored as it is is stored degraded, with a note saying what changed
(``trajforge.store.lines``), never lost.

Every episode has an idempotency key, (task, policy, sample index, sampling config): a resumed
collection runs only keys the store lacks. Readers merge all shards and collapse records with the
same key (a crash between the write and the run's own bookkeeping, or two runs racing), keeping
the first record that is not an ``env_fault`` — a fault that a later run retried successfully is
superseded — or else the first record.

The store also carries the toolsets its records were shown: ``toolsets/<fingerprint>.json``, one
per fingerprint, written with the first record that names it (``TrajectoryStore.toolsets``;
reading a store makes them known to ``trajforge.envs.toolset_for``). Records are read through
``trajforge.schema.records``: an older format is upgraded, a newer one stops the read with
``NewerFormatError`` rather than being skipped as unreadable.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
from pathlib import Path
from typing import Iterator

from trajforge.envs.toolsets import KNOWN, Toolsets
from trajforge.harness.events import LineSink
from trajforge.schema import NewerFormatError, SamplingConfig, Trajectory
from trajforge.store.lines import read_line, write_line


def sampling_digest(sampling: SamplingConfig) -> str:
    """Short stable hash of the settings that change what a policy samples.

    Under greedy decoding (temperature 0) the seed changes nothing, so it is left out."""
    fields = sampling.model_dump()
    if sampling.temperature == 0:
        fields["seed"] = None
    return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:12]


def episode_key(task_id: str, policy: str, sample: int, sampling: SamplingConfig | None = None) -> str:
    """Idempotency key of one episode.

    Without ``sampling`` it is the key records written before sampling was recorded carry."""
    base = f"{task_id}|{policy}|{sample}"
    return base if sampling is None else f"{base}|{sampling_digest(sampling)}"


def resume_keys(task_id: str, policy: str, sample: int, sampling: SamplingConfig) -> tuple[str, ...]:
    """Keys that count as "this episode is already in the store".

    Old records carry no sampling config; they stand for a greedy run (temperature 0, top_p 1,
    the default of every policy here), so a greedy run also accepts the old-style key."""
    key = episode_key(task_id, policy, sample, sampling)
    if sampling.temperature == 0 and sampling.top_p == 1.0:
        return key, episode_key(task_id, policy, sample)
    return (key,)


def key_of(traj: Trajectory) -> str:
    return episode_key(traj.task_id, traj.policy, traj.sample, traj.sampling)


def is_fault(traj: Trajectory) -> bool:
    """An episode the infrastructure ended (never a training negative; a resume may redo it)."""
    return traj.end == "env_fault" or (traj.outcome is not None and traj.outcome.tier == "env_fault")


class ShardBusy(RuntimeError):
    """A shard is held by a running writer."""


class ShardWriter:
    """The one writer of one shard: holds an exclusive lock on it while open.

    By default ``append`` returns once the line is fsynced. With ``background=True`` (the async
    harness) lines are queued and a thread writes and fsyncs them in batches every ~20 ms, so the
    event loop never blocks on the disk; a kill loses only queued lines, whose episodes a resumed
    run redoes. ``close`` writes everything queued."""

    def __init__(self, path: Path, background: bool = False, toolsets: Toolsets | None = None):
        self.path = path
        self.toolsets = toolsets if toolsets is not None else Toolsets(path.parent / "toolsets", parent=KNOWN)
        self._sink: LineSink | None = None
        self._f = open(path, "ab+")
        try:
            fcntl.flock(self._f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._f.close()
            raise ShardBusy(f"shard {path} is held by another running collection") from None
        self._f.seek(0, os.SEEK_END)
        if self._f.tell() > 0:
            self._f.seek(-1, os.SEEK_END)
            if self._f.read(1) != b"\n":  # torn tail from a crash: start a fresh line
                self._f.write(b"\n")
                self._f.flush()
        if background:
            self._sink = LineSink(self._f, fsync=True, interval_s=0.02)

    @property
    def name(self) -> str:
        return self.path.stem

    def append(self, traj: Trajectory) -> None:
        """Append one record: as it is, or degraded when it could not be read back as it is
        (``trajforge.store.lines``); only an I/O error raises."""
        keep_toolset(self.toolsets, traj)
        line = write_line(traj).encode()
        if self._sink is not None:
            self._sink.put(line)
            return
        self._f.write(line)
        self._f.flush()
        os.fsync(self._f.fileno())

    def close(self) -> None:
        try:
            if self._sink is not None:
                sink, self._sink = self._sink, None
                sink.close()
        finally:
            if not self._f.closed:
                self._f.close()  # closing drops the lock

    def __enter__(self) -> "ShardWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def keep_toolset(toolsets: Toolsets, traj: Trajectory) -> None:
    """Write the toolset ``traj`` names into the store, once (a fingerprint this process does not
    know, such as an old record's, is left for ``trajforge migrate``)."""
    fp = traj.toolset_fingerprint
    if fp and fp in KNOWN:
        toolsets.add(KNOWN.get(fp))


class TrajectoryStore:
    """A directory of ``*.jsonl`` shards (or a single ``.jsonl`` file, read-only use), with the
    toolsets they use in ``toolsets/``."""

    def __init__(self, root: str | Path, shard: str = "trajectories"):
        self.root = Path(root)
        self.shard = shard
        folder = self.root.parent / "toolsets" if self.root.is_file() else self.root / "toolsets"
        self.toolsets = Toolsets(folder, parent=KNOWN)
        """The toolsets the records use, by fingerprint (``toolsets/<fingerprint>.json``)."""
        self.torn: list[str] = []
        """``shard:line`` of each unreadable line (torn, too deeply nested, a lone surrogate escape)
        met by the last read."""
        self.duplicates = 0
        """Records the last read collapsed because their key was already seen."""
        self._seen: dict[Path, int] | None = None
        """Each shard's size when the last read opened it (``rewrite`` refuses a store that grew since)."""

    @property
    def path(self) -> Path:
        return self.root / f"{self.shard}.jsonl"

    def append(self, traj: Trajectory) -> None:
        """Append one record to this store's named shard (single-writer use; collections use
        ``writer()``, which claims a shard of their own)."""
        self.root.mkdir(parents=True, exist_ok=True)
        keep_toolset(self.toolsets, traj)
        line = write_line(traj)
        with open(self.path, "ab+") as f:
            f.seek(0, os.SEEK_END)
            if f.tell() > 0:
                f.seek(-1, os.SEEK_END)
                if f.read(1) != b"\n":  # torn tail from a crash: start a fresh line
                    f.write(b"\n")
            f.write(line.encode())
            f.flush()
            os.fsync(f.fileno())
            if self._seen is not None and self.path in self._seen:  # this store's own append is known
                self._seen[self.path] = f.tell()

    def writer(self, background: bool = False, first: int = 0) -> ShardWriter:
        """Claim the lowest-numbered ``shard-<n>.jsonl``, from ``first`` on, that no live writer
        holds. A ``--shard I/N`` worker starts at I, so its episodes land in ``shard-I`` whatever
        the other workers' timing (from 0, a worker that finished early leaves its shard free for
        the next to append to)."""
        self.root.mkdir(parents=True, exist_ok=True)
        n = first
        while True:
            path = self.root / f"shard-{n}.jsonl"
            created = not path.exists()
            try:
                w = ShardWriter(path, background, self.toolsets)
            except ShardBusy:
                n += 1
                continue
            if created:  # make the new directory entry durable too
                fd = os.open(self.root, os.O_RDONLY)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
            return w

    def shards(self) -> list[Path]:
        if self.root.is_file():
            return [self.root]
        return sorted(self.root.glob("*.jsonl"))

    def records(self) -> Iterator[Trajectory]:
        """Every readable record of every shard, duplicates included, in shard order.

        A line that cannot be read is skipped and listed in ``torn``; a record in a newer format
        raises ``NewerFormatError`` (naming the shard and line)."""
        self.torn = []
        self._seen = {}
        self.toolsets.load()
        for shard in self.shards():
            with open(shard, encoding="utf-8", errors="replace") as f:
                self._seen[shard] = os.fstat(f.fileno()).st_size  # before reading: a later append shows
                for lineno, line in enumerate(f, 1):
                    if not line.strip():
                        continue
                    try:
                        yield read_line(line)
                    except (ValueError, RecursionError):  # torn, past the int-string limit, too deep
                        self.torn.append(f"{shard.name}:{lineno}")
                    except NewerFormatError as e:
                        raise NewerFormatError(f"{shard}:{lineno}: {e}") from None

    def __iter__(self) -> Iterator[Trajectory]:
        """One record per key: the first non-fault one, else the first fault (yielded last)."""
        self.duplicates = 0
        seen: set[str] = set()
        faults: dict[str, Trajectory] = {}
        for t in self.records():
            key = key_of(t)
            if key in seen:
                self.duplicates += 1
            elif is_fault(t):
                if key in faults:
                    self.duplicates += 1
                else:
                    faults[key] = t
            else:
                if faults.pop(key, None) is not None:
                    self.duplicates += 1
                seen.add(key)
                yield t
        yield from faults.values()

    def read(self) -> list[Trajectory]:
        return list(self)

    def keys(self, faults: bool = True) -> set[str]:
        """Keys of the episodes in the store; ``faults=False`` leaves out env_fault episodes (so a
        resume runs them again)."""
        return {key_of(t) for t in self if faults or not is_fault(t)}

    def stored(self, policy: str, sampling: SamplingConfig, faults: bool = True):
        """``(task, sample) -> bool``: is that episode of ``policy`` at ``sampling`` already here
        (``resume_keys``)? The skip rule of every resumable run, read from the store once."""
        have = self.keys(faults=faults)

        def already(task, sample: int) -> bool:
            return any(k in have for k in resume_keys(task.id, policy, sample, sampling))
        return already

    def rewrite(self, trajs: list[Trajectory]) -> None:
        """Replace the store's content atomically (used by ``grade`` to add outcomes).

        Refuses while a collection is writing to any shard, or when a shard changed since this
        store last read it (a collection appended and finished in between): those lines would be
        lost. Only the shards it locked are replaced; one a writer claims meanwhile is kept."""
        self.root.mkdir(parents=True, exist_ok=True)
        held, locked = [], self.shards()
        try:
            for shard in locked:
                f = open(shard, "ab")
                held.append(f)
                try:
                    fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    raise ShardBusy(f"cannot rewrite {self.root}: shard {shard.name} is being "
                                    "written by a running collection") from None
            if self._seen is not None and {s: s.stat().st_size for s in locked} != self._seen:
                raise ShardBusy(f"cannot rewrite {self.root}: its shards changed since they were read "
                                "(a collection wrote to it); read it again")
            tmp = self.path.with_suffix(".jsonl.tmp")
            with open(tmp, "w", encoding="utf-8") as f:
                for t in trajs:
                    keep_toolset(self.toolsets, t)
                    f.write(write_line(t))
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)  # first: killed before the unlinks, the old copies only duplicate
            for shard in locked:
                if shard != self.path:
                    shard.unlink()
            self._seen = {self.path: self.path.stat().st_size}
        finally:
            for f in held:
                f.close()
