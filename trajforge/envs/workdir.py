"""The code sandbox's work directory, seen from the host: safe writes, snapshots, cleanup.

Sandboxed code can put anything in its work directory: symlinks to ``/etc/shadow`` or the host's
home, FIFOs where the host will later write a file, names with spaces, newlines or bytes that are
not UTF-8, directory chains deeper than ``PATH_MAX``, directories it chmod-ed to 000. So the host
(often root) touches it only through ``_Cursor``: one directory fd that moves by name (down, with
``O_NOFOLLOW``) and by ``..`` (up). That way

* no symlink is ever followed (a write through a planted link fails, a snapshot records a link as
  a link instead of reading its target);
* no open can block: files are opened ``O_NONBLOCK`` and kept only when ``fstat`` says they are
  regular, so a FIFO or socket is an error (write) or skipped (read), never a hang;
* any depth works with one descriptor open, and no walk or removal recurses in Python.

Restoring a snapshot or undoing an over-quota run (``replace_tree``) checks the tree, builds it in a
sibling directory and only then swaps it in, so a failure leaves the work directory as it was.
Model-given paths (``check_relpath``) stay restricted to a plain charset; trees the program made
are taken as they are.

When the harness runs as root, sandboxed code runs as ``SANDBOX_UID`` (see ``sandbox.py``), so the
directory and every file the host writes into it are handed to that uid.
"""

from __future__ import annotations

import errno
import os
import re
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

SANDBOX_UID = 65534
"""The unprivileged uid ("nobody") sandboxed code runs as when the harness is root."""

MAX_PATH_CHARS = 200
MAX_DEPTH = 8
_SAFE_PART = re.compile(r"^[A-Za-z0-9_.\-]+$")


class Tree(NamedTuple):
    """The contents of a work directory by relative path ("/"-joined names, as the OS gives them).

    FIFOs, sockets and device nodes are not recorded (nothing to copy)."""

    files: dict[str, bytes]
    """Regular files and their bytes."""
    links: dict[str, str]
    """Symbolic links and their targets (never followed)."""
    dirs: tuple[str, ...] = ()
    """Every directory, so that empty ones come back too."""


def sandbox_owner() -> int | None:
    """The uid host-written files must belong to, or None when no change of owner is needed."""
    return SANDBOX_UID if os.geteuid() == 0 else None


def make_workdir(prefix: str = "trajforge-code-", parent: str | Path | None = None) -> Path:
    """A fresh private directory the sandboxed uid can write to (in ``parent``, default $TMPDIR)."""
    path = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
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


_NAME_MAX = 255
"""Longest file name (bytes) Linux file systems take."""
_SHOWN_REFUSALS = 5
_OPEN_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW


def write_file(root: Path, rel: str, data: bytes) -> None:
    """Create or replace ``root/rel`` without following any symlink; parents are created.

    Raises ``IsADirectoryError``/``NotADirectoryError``/``OSError(ELOOP)`` when the path runs into
    a directory, a file or a link where the caller expects the other, and ``OSError(ENXIO)`` for a
    FIFO or socket (opened non-blocking: a FIFO the program left there cannot hang the host).
    """
    parts = check_relpath(rel).split("/")
    with _Cursor(root) as cur:
        cur.goto(parts[:-1], create=True)
        _put_file(cur.fd, parts[-1], data, exclusive=False)


def has_file(root: Path, rel: str) -> bool:
    """Whether ``root/rel`` is a regular file or a symlink, found without following any link.

    A link counts without being resolved here: only inside the sandbox does it mean anything
    (``solution.py -> impl.py`` works there; a link to a host path leads nowhere there). Resolving
    it on the host would tell the program which host files exist.
    """
    parts = [p for p in rel.split("/") if p]
    if not parts:
        return False
    try:
        with _Cursor(root) as cur:
            cur.goto(parts[:-1])
            mode = os.stat(parts[-1], dir_fd=cur.fd, follow_symlinks=False).st_mode
    except OSError:
        return False
    return stat.S_ISREG(mode) or stat.S_ISLNK(mode)


def read_tree(root: Path, max_bytes: int | None = None) -> Tree:
    """Every directory, regular file and symlink under ``root`` (links recorded, never followed).

    Other file types (fifos, sockets) are skipped. ``max_bytes`` stops reading once the total
    passes it (the caller asked for a bounded copy) and raises ``ValueError``.
    """
    files: dict[str, bytes] = {}
    links: dict[str, str] = {}
    dirs: list[str] = []
    total = 0
    for entry in _walk(root):
        if entry.kind == "dir":
            dirs.append(entry.rel)
        elif entry.kind == "link":
            links[entry.rel] = os.readlink(entry.name, dir_fd=entry.dir_fd)
        elif entry.kind == "file":
            budget = None if max_bytes is None else max_bytes - total + 1
            data = _read_file(entry.dir_fd, entry.name, budget)
            if data is None:
                continue  # not a regular file after all
            total += len(data)
            if max_bytes is not None and total > max_bytes:
                raise ValueError(f"the work directory holds more than {max_bytes} bytes")
            files[entry.rel] = data
    return Tree(files, links, tuple(dirs))


def usage(root: Path, max_entries: int | None = None) -> tuple[int, int]:
    """(bytes in regular files, number of entries) under ``root``, links not followed.

    With ``max_entries`` the walk stops at the first entry past it (the count is then
    ``max_entries + 1``): a program that made a million files costs the host no more than that.
    """
    size = count = 0
    walk = _walk(root)
    try:
        for entry in walk:
            count += 1
            size += entry.size
            if max_entries is not None and count > max_entries:
                break
    finally:
        walk.close()  # closes the walk's directory fd now, not at garbage collection
    return size, count


def list_files(root: Path, limit: int = 20, max_entries: int = 5000) -> tuple[list[str], bool]:
    """Up to ``limit`` paths of regular files and links under ``root`` (walk order, links not
    followed), and whether there are more; the walk stops after ``max_entries`` entries. What a
    "no such file" message shows, so the model sees which files do exist."""
    found: list[str] = []
    more = False
    walk = _walk(root)
    try:
        for seen, entry in enumerate(walk):
            if seen >= max_entries:
                more = True
                break
            if entry.kind in ("file", "link"):
                if len(found) == limit:
                    more = True
                    break
                found.append(entry.rel)
    finally:
        walk.close()
    return found, more


def replace_tree(root: Path, tree: Tree) -> None:
    """Make ``root`` hold exactly ``tree``; on any failure ``root`` is left as it was.

    The tree is checked first (``ValueError`` names the entries refused: empty, ``.``/``..`` or
    over-long names, names the OS cannot encode), then built in a sibling directory, which is then
    swapped in for ``root``; only after that is the old content removed.
    """
    refused = refused_paths(tree)
    if refused:
        shown = ", ".join(repr(r) for r in refused[:_SHOWN_REFUSALS])
        extra = len(refused) - _SHOWN_REFUSALS
        more = f" and {extra} more" if extra > 0 else ""
        raise ValueError(f"cannot restore {len(refused)} entries: {shown}{more}; the work "
                         "directory was left unchanged")
    staging = make_workdir(prefix=f".{root.name}.new-", parent=root.parent)
    try:
        _build(staging, tree)
    except BaseException:
        _remove(staging)
        raise
    # Two renames in one directory: the old content moves into a private holder, the new one
    # takes its name. Linux has no portable atomic exchange in the stdlib, and nothing runs in
    # the work directory between calls, so the instant without a ``root`` harms no one.
    holder = Path(tempfile.mkdtemp(prefix=f".{root.name}.old-", dir=root.parent))
    try:
        os.rename(root, holder / "old")
    except BaseException:
        os.rmdir(holder)
        _remove(staging)
        raise
    try:
        os.rename(staging, root)
    except BaseException:
        os.rename(holder / "old", root)  # put the old content back
        os.rmdir(holder)
        _remove(staging)
        raise
    _remove(holder)


def refused_paths(tree: Tree) -> list[str]:
    """Entries of ``tree`` no directory can hold under that name (an empty result: all fine)."""
    return [rel for rel in (*tree.dirs, *tree.files, *tree.links) if not _valid_parts(rel)]


def remove_workdir(root: Path) -> None:
    """Delete the work directory, even where sandboxed code removed its own permissions."""
    if root.exists() or root.is_symlink():
        _remove(root)


# ---- internals ----------------------------------------------------------------------------------

class _Entry(NamedTuple):
    """One thing under the walked root; ``dir_fd`` is its parent's fd, valid only until the walk
    moves on."""

    rel: str
    name: str
    kind: str
    """"dir", "file", "link" or "other" (fifo, socket, device)."""
    size: int
    """Bytes, for regular files (0 otherwise)."""
    dir_fd: int


class _Cursor:
    """One open directory that moves by name (down, never through a link) and by ``..`` (up).

    Paths of any depth work with a single descriptor, since no path string is ever resolved
    whole. The sandboxed program is not running while the host walks (its pid namespace is gone),
    so ``..`` is the directory the cursor came from.
    """

    def __init__(self, root: Path):
        self.fd = _open_dir(str(root), None)
        self.parts: list[str] = []

    def __enter__(self) -> _Cursor:
        return self

    def __exit__(self, *exc) -> None:
        os.close(self.fd)

    def down(self, name: str, create: bool = False) -> None:
        if create:
            try:
                os.mkdir(name, 0o755, dir_fd=self.fd)
                owner = sandbox_owner()
                if owner is not None:
                    os.chown(name, owner, owner, dir_fd=self.fd, follow_symlinks=False)
            except FileExistsError:
                pass
        self._move(_open_dir(name, self.fd))
        self.parts.append(name)

    def up(self) -> None:
        try:
            fd = os.open("..", os.O_RDONLY | os.O_DIRECTORY, dir_fd=self.fd)
        except PermissionError:  # no search permission here (the program's chmod)
            os.fchmod(self.fd, 0o700)
            fd = os.open("..", os.O_RDONLY | os.O_DIRECTORY, dir_fd=self.fd)
        self._move(fd)
        self.parts.pop()

    def goto(self, parts: list[str], create: bool = False) -> None:
        """Move to the directory ``parts`` below the root (creating what is missing if asked)."""
        same = 0
        while same < min(len(parts), len(self.parts)) and parts[same] == self.parts[same]:
            same += 1
        while len(self.parts) > same:
            self.up()
        for name in parts[same:]:
            self.down(name, create)

    def listing(self) -> list[tuple[str, str, int]]:
        """(name, kind, size) of every entry here, sorted by name."""
        try:
            it = os.scandir(self.fd)
        except PermissionError:
            os.fchmod(self.fd, 0o700)
            it = os.scandir(self.fd)
        with it:
            return sorted((e.name, *_kind_and_size(e)) for e in it)

    def _move(self, fd: int) -> None:
        os.close(self.fd)
        self.fd = fd


def _kind_and_size(entry: os.DirEntry) -> tuple[str, int]:
    if entry.is_symlink():
        return "link", 0
    if entry.is_dir(follow_symlinks=False):
        return "dir", 0
    if entry.is_file(follow_symlinks=False):
        return "file", entry.stat(follow_symlinks=False).st_size
    return "other", 0


def _open_dir(name: str, dir_fd: int | None) -> int:
    """Open a directory without following a link; one the program made unreadable is chmod-ed
    back (the host owns or may change it), a link is reported as ``ELOOP``."""
    try:
        return os.open(name, _OPEN_DIR, dir_fd=dir_fd)
    except PermissionError:
        os.chmod(name, 0o700, dir_fd=dir_fd)
        return os.open(name, _OPEN_DIR, dir_fd=dir_fd)
    except NotADirectoryError:
        # O_NOFOLLOW|O_DIRECTORY reports a link as "not a directory": say what it is.
        if stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode):
            raise OSError(errno.ELOOP, "a symbolic link", name) from None
        raise


def _walk(root: Path) -> Iterator[_Entry]:
    """Everything under ``root``, depth first in name order; directories come before their
    contents. Iterative, one directory fd at a time, so depth costs neither recursion nor fds."""
    with _Cursor(root) as cur:
        stack = [iter(cur.listing())]
        while stack:
            item = next(stack[-1], None)
            if item is None:
                stack.pop()
                if stack:
                    cur.up()
                continue
            name, kind, size = item
            yield _Entry("/".join([*cur.parts, name]), name, kind, size, cur.fd)
            if kind == "dir":
                cur.down(name)
                stack.append(iter(cur.listing()))


def _read_file(dir_fd: int, name: str, limit: int | None) -> bytes | None:
    """The bytes of a regular file (at most ``limit``), or None when it is not one."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dir_fd)
    except PermissionError:  # chmod 000 by the program, seen by a non-root host
        os.chmod(name, 0o600, dir_fd=dir_fd)
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dir_fd)
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return f.read() if limit is None else f.read(limit)


def _put_file(dir_fd: int, name: str, data: bytes, exclusive: bool) -> None:
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK
    flags |= os.O_EXCL if exclusive else os.O_TRUNC
    fd = os.open(name, flags, 0o644, dir_fd=dir_fd)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise IsADirectoryError(f"{name} is not a regular file")
        owner = sandbox_owner()
        if owner is not None:
            os.fchown(fd, owner, owner)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)


def _valid_parts(rel: str) -> bool:
    if not isinstance(rel, str):
        return False
    parts = rel.split("/")
    try:
        return all(p not in ("", ".", "..") and "\0" not in p and len(os.fsencode(p)) <= _NAME_MAX
                   for p in parts)
    except UnicodeEncodeError:  # a surrogate that no byte name decodes to
        return False


def _build(root: Path, tree: Tree) -> None:
    """Write ``tree`` into the empty dir ``root``, in path order (so the cursor walks it once)."""
    owner = sandbox_owner()
    entries = [(rel.split("/"), "dir", None) for rel in tree.dirs]
    entries += [(rel.split("/"), "file", data) for rel, data in tree.files.items()]
    entries += [(rel.split("/"), "link", target) for rel, target in tree.links.items()]
    entries.sort(key=lambda e: e[0])
    with _Cursor(root) as cur:
        for parts, kind, payload in entries:
            if kind == "dir":
                cur.goto(parts, create=True)
                continue
            cur.goto(parts[:-1], create=True)
            if kind == "file":
                _put_file(cur.fd, parts[-1], payload, exclusive=True)
            else:
                os.symlink(payload, parts[-1], dir_fd=cur.fd)
                if owner is not None:
                    os.chown(parts[-1], owner, owner, dir_fd=cur.fd, follow_symlinks=False)


def _remove(path: Path) -> None:
    """Delete ``path`` and everything under it, however deep, without recursion or following links.

    Every subdirectory is first renamed up to ``path`` itself (an O(1) rename on one file system),
    so each directory is emptied with just two fds open: ``path``'s and its own.
    """
    if not stat.S_ISDIR(os.lstat(path).st_mode):
        os.unlink(path)
        return
    top = _open_dir(str(path), None)
    try:
        os.fchmod(top, 0o700)
        pending: list[str | None] = [None]  # None: path itself
        serial = 0
        while pending:
            name = pending.pop()
            fd = top if name is None else _open_dir(name, top)
            try:
                if fd != top:
                    os.fchmod(fd, 0o700)
                with os.scandir(fd) as it:
                    children = [(e.name, e.is_dir(follow_symlinks=False)) for e in it]
                for child, is_dir in children:
                    if not is_dir:
                        os.unlink(child, dir_fd=fd)
                    elif fd == top:
                        pending.append(child)
                    else:
                        os.chmod(child, 0o700, dir_fd=fd)  # moving a dir needs write access to it
                        while True:
                            serial += 1
                            flat = f".rm-{serial}"
                            try:
                                os.stat(flat, dir_fd=top, follow_symlinks=False)
                            except FileNotFoundError:
                                break
                        os.rename(child, flat, src_dir_fd=fd, dst_dir_fd=top)
                        pending.append(flat)
            finally:
                if fd != top:
                    os.close(fd)
            if name is not None:
                os.rmdir(name, dir_fd=top)
    finally:
        os.close(top)
    os.rmdir(path)
