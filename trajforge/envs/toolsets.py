"""Toolsets by fingerprint: the tool schema travels with the data that was made with it.

A trajectory records only the fingerprint of the toolset it was shown; the toolset itself is
kept once, as ``<fingerprint>.json`` in a ``toolsets/`` folder beside the records (a store's, a
task pool's). Every consumer (training, export, serving, migration) looks the toolset up by the
fingerprint it holds instead of rebuilding it from an environment class as that class is *now*.

    toolsets = Toolsets("store/toolsets")   # a folder, read lazily, written on add
    fp = toolsets.add(toolset)               # writes store/toolsets/<fp>.json once
    toolsets.get(fp)                         # the very Toolset object, cached
    toolset_for(fp)                          # any toolset this process has built, shown or read
    env_toolset("sql")                       # the sql environment's current toolset (built once)

``KNOWN`` is the process-wide cache every folder feeds. Fingerprints are content hashes, so a
fingerprint can only ever name one toolset and sharing the cache is safe. Handing out one object
per fingerprint also lets the parser's per-toolset indexes be built once.
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
from pathlib import Path

from trajforge.schema import Toolset

SUFFIX = ".json"


class Toolsets:
    """Toolsets by fingerprint, in memory and, with a ``folder``, as one JSON file each."""

    def __init__(self, folder: str | Path | None = None, parent: "Toolsets | None" = None):
        self.folder = Path(folder) if folder is not None else None
        self.parent = parent
        """Where a toolset this folder lacks is looked up next (``KNOWN`` for folders)."""
        self._by_fp: dict[str, Toolset] = {}
        self._lock = threading.Lock()

    def add(self, toolset: Toolset) -> str:
        """Keep ``toolset`` (and write its file once); returns its fingerprint."""
        fp = toolset.fingerprint
        if fp in self._by_fp:  # kept (and written) already: the per-record fast path
            return fp
        with self._lock:
            toolset = self._by_fp.setdefault(fp, toolset)
        if self.parent is not None:
            self.parent.add(toolset)
        if self.folder is not None and not self._path(fp).exists():
            self._write(fp, toolset)
        return fp

    def canonical(self, toolset: Toolset) -> Toolset:
        """The one object kept for ``toolset``'s fingerprint (adding it if new)."""
        return self.get(self.add(toolset))

    def get(self, fingerprint: str) -> Toolset:
        """The toolset with ``fingerprint``; KeyError naming where it was looked for."""
        found = self._by_fp.get(fingerprint)
        if found is not None:
            return found
        path = self._path(fingerprint) if self.folder is not None else None
        if path is not None and path.is_file():
            toolset = read_toolset(path)
            with self._lock:
                toolset = self._by_fp.setdefault(fingerprint, toolset)
            if self.parent is not None:
                self.parent.add(toolset)
            return toolset
        if self.parent is not None:
            return self.parent.get(fingerprint)
        where = f" (not in {self.folder})" if self.folder is not None else ""
        raise KeyError(f"no toolset with fingerprint {fingerprint!r}{where}; records made before toolsets "
                       "were stored need `trajforge migrate`")

    def __contains__(self, fingerprint: object) -> bool:
        try:
            self.get(str(fingerprint))
        except KeyError:
            return False
        return True

    def fingerprints(self) -> list[str]:
        """Fingerprints held here (in memory and in the folder), sorted."""
        on_disk = {p.name[: -len(SUFFIX)] for p in self.folder.glob(f"*{SUFFIX}")} if self.folder and self.folder.is_dir() else set()
        return sorted(on_disk | set(self._by_fp))

    def load(self) -> "Toolsets":
        """Read every file of the folder now (so ``toolset_for`` finds them); returns self."""
        for fp in self.fingerprints():
            self.get(fp)
        return self

    def _path(self, fingerprint: str) -> Path:
        if not fingerprint or not all(c in "0123456789abcdef" for c in fingerprint):
            raise KeyError(f"{fingerprint!r} is not a toolset fingerprint (hex digits)")
        return self.folder / f"{fingerprint}{SUFFIX}"

    def _write(self, fp: str, toolset: Toolset) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.folder, prefix=f".{fp}", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(toolset.model_dump_json(indent=1) + "\n")
            os.replace(tmp, self._path(fp))  # atomic: a reader never sees half a file
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)


def read_toolset(path: str | Path) -> Toolset:
    """One ``<fingerprint>.json`` file; ValueError if it is not the toolset its name says."""
    path = Path(path)
    try:
        toolset = Toolset.model_validate(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError) as e:
        raise ValueError(f"{path}: not a toolset file ({e})") from None
    if path.name != f"{toolset.fingerprint}{SUFFIX}":
        raise ValueError(f"{path}: holds the toolset {toolset.fingerprint}, not the one its name says "
                         "(edited by hand? a toolset file must not change)")
    return toolset


KNOWN = Toolsets()
"""Every toolset this process has built (``env_toolset``), shown (the harness) or read."""

_by_env: dict[type, Toolset] = {}


def toolset_for(fingerprint: str) -> Toolset:
    """The toolset with ``fingerprint`` among those this process has built, shown or read."""
    return KNOWN.get(fingerprint)


def env_toolset(name: str) -> Toolset:
    """The current toolset of environment ``name``, built once per environment class."""
    from trajforge.envs.registry import env_class

    return class_toolset(env_class(name))


def class_toolset(cls: type) -> Toolset:
    """``cls.toolset()``, built once per class and kept in ``KNOWN``."""
    if cls not in _by_env:
        _by_env[cls] = KNOWN.canonical(cls.toolset())
    return _by_env[cls]


__all__ = ["KNOWN", "Toolsets", "class_toolset", "env_toolset", "read_toolset", "toolset_for"]
