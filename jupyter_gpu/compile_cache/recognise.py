"""Whether a directory is a torch.compile cache: it holds only what torch writes (``shapes.py``).

``open_root`` opens the directory itself (``O_NOFOLLOW``: a symlink is refused, never followed)
and checks what a cache location must be: a real directory owned by this user, not ``/``, a home
or a temporary root, named as torch names it unless an environment variable chose it. ``walk``
then reads the tree through that descriptor (``os.scandir(fd)``, each folder opened with
``dir_fd`` and ``O_NOFOLLOW``, its device and inode checked against what the listing said) and
returns what it saw, or raises ``CacheRefused`` with the first thing torch does not write, named
by its path in the cache: "`db/data.bin`: torch does not write this". It never crosses a mount:
a folder on another device, or one the mount table lists as a mount point (a bind mount of the
same filesystem has the same device number: ``mounts.py``), is recorded, not read.

The deletion (``clear.py``) works from the same tree, so that what is deleted is what was checked.
"""

from __future__ import annotations

import os
import stat
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from jupyter_gpu.compile_cache.mounts import Mounts, mounts_under_fd
from jupyter_gpu.compile_cache.records import CacheKind
from jupyter_gpu.compile_cache.shapes import file_allowed, subfolder

DIR_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_DIRECTORY", 0)
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_CLOEXEC", 0)
)
"""How every folder is opened: itself, never a symlink's target."""

FILE_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_NOCTTY", 0)
    | getattr(os, "O_CLOEXEC", 0)
)
"""How a name that should be a regular file is opened: never through a link, and never waiting
(a FIFO swapped in would block a plain open until a writer came; O_NOCTTY: a terminal device
neither). The lock files' flock probe and ``new_files``' reads open this way."""

FD_WALKS = hasattr(os, "O_DIRECTORY") and hasattr(os, "O_NOFOLLOW") and os.scandir in os.supports_fd
"""Whether this platform can walk and delete by file descriptor (Linux, macOS); elsewhere no
directory is recognised, so nothing is ever cleared."""

_MAX_DEPTH = 24  # torch's deepest folders are 5 levels down; nested fresh caches add a few


class CacheRefused(PermissionError):
    """A directory that clearing must not touch now; ``reason`` says why, naming what was found."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass
class Node:
    """One file or folder as the walk saw it (``lstat``: a link is never followed)."""

    name: str
    folder: str | None  # the kind of folder (``shapes.FOLDERS``); None for a file
    dev: int
    ino: int
    uid: int
    size_bytes: int
    mtime: float
    ctime_ns: int = 0  # a file's inode change time, part of its identity (``same_as``)
    mount: bool = False  # a mount point (another device, or in the mount table): never entered
    children: dict[str, Node] = field(default_factory=dict)

    @property
    def identity(self) -> tuple[int, int]:
        return (self.dev, self.ino)

    def same_as(self, st: os.stat_result) -> bool:
        """Whether ``st`` is still this node: device and inode, and for a file its ctime too.

        An inode number is reused once its file is gone, so a file deleted and another made in
        its place can have the same ``(st_dev, st_ino)``; the new one has another change time
        (``st_ctime_ns``, which nobody can set back), as has this file if it was written,
        renamed or re-linked since the walk. A folder's ctime moves whenever an entry comes or
        goes in it (torch writing, the clear itself deleting), so a folder is matched by device
        and inode: nothing is deleted in it unless each file matches by ctime too, and a folder
        is only ever removed empty (``rmdir``).
        """
        if (st.st_dev, st.st_ino) != self.identity:
            return False
        return self.folder is not None or st.st_ctime_ns == self.ctime_ns

    def files(self) -> Iterator[Node]:
        """Every file at or under this node."""
        if self.folder is None:
            yield self
        for child in self.children.values():
            yield from child.files()


def _protected(path: str) -> bool:
    norm = os.path.normpath(path)
    roots = {
        "/",
        os.path.normpath(str(Path("~").expanduser())),
        os.path.normpath(tempfile.gettempdir()),
        "/tmp",  # noqa: S108 (a path we refuse to clear, not one we write to)
        "/var/tmp",  # noqa: S108 (as above)
        "/root",
        "/home",
        "/usr",
        "/etc",
        "/var",
    }
    return norm in roots or len(Path(norm).parts) < 3


def _named_as_torch_names_it(kind: CacheKind, path: str) -> bool:
    norm = os.path.normpath(path)
    if kind == "inductor":
        return Path(norm).name.startswith("torchinductor")
    return Path(norm).parts[-2:] == (".triton", "cache")


def open_root(kind: CacheKind, path: str, configured: bool = False) -> tuple[int, os.stat_result]:
    """Open a cache location as a directory descriptor, checking what a location must be.

    The caller closes the descriptor. ``configured``: an environment variable chose the path
    (``TORCHINDUCTOR_CACHE_DIR``, ``TRITON_CACHE_DIR``), so torch's name for it is not needed.

    Raises:
        CacheRefused: it is missing, a symlink, not a directory, another user's, a top-level or
            home directory, or (unless configured) not named as torch names that cache.
    """
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        raise CacheRefused("it does not exist (nothing to clear)") from None
    except OSError as err:
        raise CacheRefused(f"it cannot be read ({err.strerror})") from None
    if stat.S_ISLNK(st.st_mode):
        raise CacheRefused("it is a symlink (the target is never cleared through a link)")
    if not stat.S_ISDIR(st.st_mode):
        raise CacheRefused("it is not a directory")
    if st.st_uid != os.geteuid():
        raise CacheRefused("it belongs to another user")
    if _protected(path):
        raise CacheRefused("it is a top-level or home directory, not a cache")
    if not configured and not _named_as_torch_names_it(kind, path):
        which = "an Inductor" if kind == "inductor" else "a Triton"
        raise CacheRefused(f"its name is not the one torch gives {which} cache")
    if not FD_WALKS:
        raise CacheRefused("this platform cannot walk folders by file descriptor")
    try:
        fd = os.open(path, DIR_FLAGS)
    except OSError as err:  # ELOOP, ENOTDIR: swapped for a link or a file since the lstat
        raise CacheRefused(f"it cannot be opened as itself ({err.strerror})") from None
    opened = os.fstat(fd)
    if (opened.st_dev, opened.st_ino) != (st.st_dev, st.st_ino):
        os.close(fd)
        raise CacheRefused("it was replaced while it was opened")
    return fd, opened


class _Budget:
    """Gives up the GIL now and then during a long walk, and stops it when asked to."""

    def __init__(self, stop: threading.Event | None, every: int) -> None:
        self.stop, self.every, self.seen = stop, every, 0

    def tick(self) -> None:
        self.seen += 1
        if self.seen % self.every == 0:
            if self.stop is not None and self.stop.is_set():
                raise CacheRefused("the check was stopped before it finished")
            time.sleep(0)  # let the sampler's tick and the server run


def walk(
    fd: int, kind: CacheKind, stop: threading.Event | None = None, yield_every: int = 2000
) -> Node:
    """The tree under an open cache directory, if it holds only what torch writes.

    Raises:
        CacheRefused: the first entry torch does not write (its path in the message), a symlink,
            a folder that cannot be read, or ``stop`` was set.
    """
    st = os.fstat(fd)
    root = Node("", kind, st.st_dev, st.st_ino, st.st_uid, 0, st.st_mtime, st.st_ctime_ns)
    _fill(fd, root, "", _Walk(st.st_dev, mounts_under_fd(fd), _Budget(stop, yield_every)), 0)
    return root


@dataclass(frozen=True)
class _Walk:
    """What every level of one walk shares: the root's device, the mount points, the budget."""

    dev: int
    mounts: Mounts
    budget: _Budget


def _fill(fd: int, node: Node, rel: str, shared: _Walk, depth: int) -> None:
    assert node.folder is not None
    if depth > _MAX_DEPTH:
        raise CacheRefused(f"`{rel}`: deeper than any folder torch makes")
    with os.scandir(fd) as listing:
        entries = sorted(listing, key=lambda e: e.name)  # the same refusal every time
    for entry in entries:
        shared.budget.tick()
        path = f"{rel}{entry.name}"
        try:
            st = entry.stat(follow_symlinks=False)
        except FileNotFoundError:  # removed while we looked (a compile cleaning up)
            continue
        if stat.S_ISLNK(st.st_mode):
            raise CacheRefused(
                f"`{path}`: a symbolic link (torch writes none, and links are never followed)"
            )
        if stat.S_ISREG(st.st_mode):
            if not file_allowed(node.folder, entry.name):
                raise CacheRefused(f"`{path}`: torch does not write this")
            node.children[entry.name] = Node(
                entry.name,
                None,
                st.st_dev,
                st.st_ino,
                st.st_uid,
                st.st_size,
                st.st_mtime,
                st.st_ctime_ns,
            )
            continue
        if not stat.S_ISDIR(st.st_mode):
            raise CacheRefused(f"`{path}`: not a regular file or folder (torch writes none)")
        kind = subfolder(node.folder, entry.name)
        if kind is None:
            raise CacheRefused(f"`{path}/`: torch does not write this")
        child = Node(
            entry.name, kind, st.st_dev, st.st_ino, st.st_uid, 0, st.st_mtime, st.st_ctime_ns
        )
        node.children[entry.name] = child
        if st.st_dev != shared.dev or shared.mounts.at(path):
            child.mount = True  # another filesystem, or a bind mount: recorded, never entered
            continue
        try:
            sub = os.open(entry.name, DIR_FLAGS, dir_fd=fd)
        except FileNotFoundError:
            del node.children[entry.name]
            continue
        except OSError as err:
            raise CacheRefused(f"`{path}/`: cannot be read ({err.strerror})") from None
        try:
            opened = os.fstat(sub)
            if (opened.st_dev, opened.st_ino) != (st.st_dev, st.st_ino):
                raise CacheRefused(f"`{path}/`: replaced while it was checked")
            _fill(sub, child, f"{path}/", shared, depth + 1)
        finally:
            os.close(sub)


def recognise(
    kind: CacheKind, path: str, configured: bool = False, stop: threading.Event | None = None
) -> Node:
    """Open and walk a cache location; the tree, or ``CacheRefused`` saying why not."""
    fd, _ = open_root(kind, path, configured)
    try:
        return walk(fd, kind, stop)
    finally:
        os.close(fd)


def refusal(
    kind: CacheKind, path: str, configured: bool = False, stop: threading.Event | None = None
) -> tuple[str | None, tuple[int, int] | None]:
    """``(why it may not be cleared or None, (st_dev, st_ino) of the directory checked)``."""
    try:
        root = recognise(kind, path, configured, stop)
    except CacheRefused as err:
        return err.reason, None
    return None, root.identity
