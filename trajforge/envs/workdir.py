"""The code sandbox's work directory, seen from the host: safe writes, snapshots, cleanup.

Sandboxed code can put anything in its work directory, including symlinks to ``/etc/shadow`` or
to the host's home. The host process (often root) must therefore never follow a link there: every
path is opened component by component with ``O_NOFOLLOW`` relative to the directory's fd, so a
write through a planted link fails instead of overwriting a host file, and a snapshot records a
link as a link instead of reading its target.

When the harness runs as root, sandboxed code runs as ``SANDBOX_UID`` (see ``sandbox.py``), so the
directory and every file the host writes into it are handed to that uid.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import stat
import sys
import tempfile
from pathlib import Path
from typing import NamedTuple

SANDBOX_UID = 65534
"""The unprivileged uid ("nobody") sandboxed code runs as when the harness is root."""

MAX_PATH_CHARS = 200
MAX_DEPTH = 8
_SAFE_PART = re.compile(r"^[A-Za-z0-9_.\-]+$")


class Tree(NamedTuple):
    """The contents of a work directory: regular files and symlinks, by relative path."""

    files: dict[str, bytes]
    links: dict[str, str]


def sandbox_owner() -> int | None:
    """The uid host-written files must belong to, or None when no change of owner is needed."""
    return SANDBOX_UID if os.geteuid() == 0 else None


def make_workdir(prefix: str = "trajforge-code-") -> Path:
    """A fresh private directory the sandboxed uid can write to."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    owner = sandbox_owner()
    if owner is not None:
        os.chown(path, owner, owner)
    return path


def check_relpath(path: str) -> str:
    """Normalise a model-given path inside the work dir; ValueError says what is wrong with it."""
    if not isinstance(path, str) or not path.strip():
        raise ValueError("the path is empty")
    text = path.strip()
    text = text.removeprefix("./")
    if text.startswith(("/", "~")):
        raise ValueError(f"{path!r} is absolute; use a path relative to the work directory, "
                         "e.g. 'solution.py'")
    if len(text) > MAX_PATH_CHARS:
        raise ValueError(f"the path is longer than {MAX_PATH_CHARS} characters")
    parts = [p for p in text.split("/") if p not in ("", ".")]
    if not parts:
        raise ValueError(f"{path!r} names the work directory itself, not a file")
    if ".." in parts:
        raise ValueError(f"{path!r} leaves the work directory ('..' is not allowed)")
    if len(parts) > MAX_DEPTH:
        raise ValueError(f"{path!r} is nested deeper than {MAX_DEPTH} directories")
    bad = [p for p in parts if not _SAFE_PART.match(p)]
    if bad:
        raise ValueError(f"{path!r}: use only letters, digits, '_', '-' and '.' in file names "
                         f"(not {bad[0]!r})")
    return "/".join(parts)


def write_file(root: Path, rel: str, data: bytes) -> None:
    """Create or replace ``root/rel`` without following any symlink; parents are created.

    Raises ``IsADirectoryError``/``NotADirectoryError``/``OSError(ELOOP)`` when the path runs into
    a directory, a file or a link where the caller expects the other.
    """
    parts = check_relpath(rel).split("/")
    owner = sandbox_owner()
    dir_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        for part in parts[:-1]:
            try:
                os.mkdir(part, 0o755, dir_fd=dir_fd)
                if owner is not None:
                    os.chown(part, owner, owner, dir_fd=dir_fd, follow_symlinks=False)
            except FileExistsError:
                pass
            try:
                next_fd = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW,
                                  dir_fd=dir_fd)
            except NotADirectoryError:
                # O_NOFOLLOW|O_DIRECTORY reports a link as "not a directory": say what it is.
                if stat.S_ISLNK(os.stat(part, dir_fd=dir_fd, follow_symlinks=False).st_mode):
                    raise OSError(errno.ELOOP, "a symbolic link", part) from None
                raise
            os.close(dir_fd)
            dir_fd = next_fd
        fd = os.open(parts[-1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644,
                     dir_fd=dir_fd)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise IsADirectoryError(f"{rel} is not a regular file")
            if owner is not None:
                os.fchown(fd, owner, owner)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)
    finally:
        os.close(dir_fd)


def read_tree(root: Path, max_bytes: int | None = None) -> Tree:
    """Every regular file and symlink under ``root`` (links recorded, never followed).

    Other file types (fifos, sockets) are skipped. ``max_bytes`` stops reading once the total
    passes it (the caller asked for a bounded copy) and raises ``ValueError``.
    """
    files: dict[str, bytes] = {}
    links: dict[str, str] = {}
    total = 0
    for rel, kind in _walk(root):
        if kind == "link":
            links[rel] = os.readlink(root / rel)
            continue
        if kind != "file":
            continue
        fd = os.open(root / rel, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                continue
            with os.fdopen(os.dup(fd), "rb") as f:
                data = f.read() if max_bytes is None else f.read(max_bytes - total + 1)
        finally:
            os.close(fd)
        total += len(data)
        if max_bytes is not None and total > max_bytes:
            raise ValueError(f"the work directory holds more than {max_bytes} bytes")
        files[rel] = data
    return Tree(files, links)


def usage(root: Path) -> tuple[int, int]:
    """(bytes in regular files, number of entries) under ``root``, links not followed."""
    size = count = 0
    for rel, kind in _walk(root):
        count += 1
        if kind == "file":
            size += os.lstat(root / rel).st_size
    return size, count


def replace_tree(root: Path, tree: Tree) -> None:
    """Make ``root`` hold exactly ``tree`` (everything else in it is removed)."""
    for entry in os.scandir(root):
        _remove(Path(entry.path))
    for rel, data in tree.files.items():
        write_file(root, rel, data)
    owner = sandbox_owner()
    for rel, target in tree.links.items():
        parent = rel.rpartition("/")[0]
        if parent:
            # A parent directory that held only links has no file to create it.
            write_file(root, f"{parent}/.keep", b"")
            os.unlink(root / parent / ".keep")
        os.symlink(target, root / rel)
        if owner is not None:
            os.chown(root / rel, owner, owner, follow_symlinks=False)


def remove_workdir(root: Path) -> None:
    """Delete the work directory, even where sandboxed code removed its own permissions."""
    if root.exists() or root.is_symlink():
        _remove(root)


def _remove(path: Path) -> None:
    def fix_and_retry(func, target, _exc):  # a directory chmod 000 by the sandboxed code
        os.chmod(os.path.dirname(target), 0o700)
        if os.path.isdir(target) and not os.path.islink(target):
            os.chmod(target, 0o700)
        func(target)

    if path.is_symlink() or not path.is_dir():
        path.unlink()
    elif sys.version_info >= (3, 12):
        shutil.rmtree(path, onexc=fix_and_retry)
    else:
        shutil.rmtree(path, onerror=fix_and_retry)


def _walk(root: Path):
    """(relative path, "file" | "link" | "other") for everything under root, depth first."""
    stack = [""]
    while stack:
        prefix = stack.pop()
        try:
            entries = sorted(os.scandir(root / prefix if prefix else root), key=lambda e: e.name)
        except PermissionError:
            os.chmod(root / prefix, 0o700)  # sandboxed code may chmod 000 its own directories
            entries = sorted(os.scandir(root / prefix), key=lambda e: e.name)
        for entry in entries:
            rel = f"{prefix}/{entry.name}" if prefix else entry.name
            if entry.is_symlink():
                yield rel, "link"
            elif entry.is_dir(follow_symlinks=False):
                stack.append(rel)
            elif entry.is_file(follow_symlinks=False):
                yield rel, "file"
            else:
                yield rel, "other"
