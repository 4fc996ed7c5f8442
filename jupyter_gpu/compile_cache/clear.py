"""Clearing a torch.compile cache: the only code in the project that deletes files.

It deletes only what ``recognise.walk`` saw and recognised as torch's, and only through file
descriptors, so that what is deleted is what was checked:

- the cache directory is opened once (``O_DIRECTORY | O_NOFOLLOW``) and, for the server, must be
  the directory its last scan recognised (same ``st_dev``/``st_ino``);
- the tree is walked and recognised through that descriptor; anything torch does not write
  refuses the whole cache (``CacheRefused``) before anything is deleted;
- each folder is opened again with ``dir_fd`` and ``O_NOFOLLOW`` and must still be the folder
  the walk saw (device and inode): a folder or symlink swapped in is never entered, only
  reported; a file must still have the device, inode *and* change time the walk saw
  (``Node.same_as``: a reused inode number has another); files and folders are removed with
  ``unlink``/``rmdir`` by name in their parent's descriptor, so no path is resolved twice;
- a mount point inside (another device, or a bind mount the mount table lists) is never
  crossed; files and folders of another owner are left; a file replaced or changed since the
  walk, or written after it, is left. All of these are listed in ``failed``.

``freed_bytes`` counts a file's bytes only when its last link goes (``st_nlink`` 1 when it is
unlinked): removing one name of a hard-linked file frees nothing.

``remove_folder_made_here`` deletes, the same way, a scratch folder another part of jupyter-gpu
made (``%%torchrun``'s run folder), identified by the device and inode it had when made;
``remove_file_made_here`` one file's name (the tutorials copy's temporary name).

It refuses to start while a compile holds one of the cache's lock files (torch's ``FileLock``
is an ``flock``); the lock files are opened ``O_NONBLOCK | O_NOFOLLOW`` and must still be the
regular files the walk saw, so a FIFO or device swapped in never blocks it. It is slow on a big
cache: call it from a worker thread, never the event loop.
"""

from __future__ import annotations

import errno
import os
import stat
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field

from jupyter_gpu.compile_cache.mounts import Mounts, mounts_under_fd
from jupyter_gpu.compile_cache.recognise import (
    DIR_FLAGS,
    FILE_FLAGS,
    CacheRefused,
    Node,
    open_root,
    walk,
)
from jupyter_gpu.compile_cache.records import CacheKind
from jupyter_gpu.compile_cache.shapes import FOLDERS

if sys.platform != "win32":  # where nothing is recognised anyway (recognise.FD_WALKS)
    import fcntl

# A handle on a file that reads nothing and opens nothing (O_PATH): only for fstat.
_PIN_FLAGS = getattr(os, "O_PATH", 0) | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


def _pin(parent: int, name: str) -> int | None:
    """A descriptor of the file ``name`` (Linux's ``O_PATH``), or None where there is none."""
    if not hasattr(os, "O_PATH"):
        return None  # then another name of it is left, and listed, as changed
    try:
        return os.open(name, _PIN_FLAGS, dir_fd=parent)
    except OSError:
        return None


class CompileRunning(CacheRefused):
    """A process holds one of the cache's lock files (a compile in progress): try again later."""


@dataclass(frozen=True, slots=True)
class ClearResult:
    """What a clear did: bytes and files removed, and what it left, each with why."""

    freed_bytes: int
    files_removed: int
    failed: tuple[str, ...] = ()


@dataclass
class _Deleter:
    """Removes nodes of a recognised tree, each only if it is still the one the walk saw."""

    dev: int
    uid: int = field(default_factory=os.geteuid)
    freed_bytes: int = 0
    removed_bytes: int = 0  # what the cache's size went down by (a name's bytes, linked or not)
    files_removed: int = 0
    failed: list[str] = field(default_factory=list)
    # (st_dev, st_ino) -> st_ctime_ns after this clear unlinked one name of a hard-linked file:
    # an unlink changes the file's ctime, and another of its names is still the file walked.
    unlinked: dict[tuple[int, int], int] = field(default_factory=dict)

    def result(self) -> ClearResult:
        return ClearResult(self.freed_bytes, self.files_removed, tuple(self.failed))

    def leave(self, rel: str, why: str) -> bool:
        self.failed.append(f"`{rel}`: {why}")
        return False

    def empty(self, fd: int, node: Node, rel: str) -> bool:
        """Remove every child of ``node`` (open as ``fd``); whether all of them went."""
        done = True
        for child in node.children.values():
            done = self.remove(fd, child, rel) and done
        return done

    def unlink(self, parent: int, name: str, st: os.stat_result, rel: str) -> bool:
        """Remove the name of a file checked as ``st``; its bytes count if it was the last."""
        pin = _pin(parent, name) if st.st_nlink > 1 else None  # to read its ctime afterwards
        try:
            try:
                os.unlink(name, dir_fd=parent)  # removes the name; never follows a link
            except FileNotFoundError:
                return True
            except OSError as err:
                return self.leave(rel, err.strerror or "cannot be removed")
            after = os.fstat(pin) if pin is not None else None
            if after is not None and (after.st_dev, after.st_ino) == (st.st_dev, st.st_ino):
                self.unlinked[(st.st_dev, st.st_ino)] = after.st_ctime_ns
        finally:
            if pin is not None:
                os.close(pin)
        if st.st_nlink <= 1:  # another name still holds the data: nothing was freed
            self.freed_bytes += st.st_size
        self.removed_bytes += st.st_size
        self.files_removed += 1
        return True

    def remove(self, parent: int, node: Node, rel: str) -> bool:
        """Remove ``node`` from the folder open as ``parent``; whether it went."""
        rel = f"{rel}{node.name}" + ("/" if node.folder is not None else "")
        try:
            st = os.stat(node.name, dir_fd=parent, follow_symlinks=False)
        except FileNotFoundError:
            return True  # gone already (torch cleaning up): nothing to do
        except OSError as err:
            return self.leave(rel, f"cannot be read ({err.strerror})")
        ours = self.unlinked.get((st.st_dev, st.st_ino)) == st.st_ctime_ns
        if not node.same_as(st) and not (ours and node.identity == (st.st_dev, st.st_ino)):
            return self.leave(rel, "replaced or changed since it was checked: left alone")
        if node.mount or st.st_dev != self.dev:
            return self.leave(rel, "a mount point: not crossed")
        if st.st_uid != self.uid:
            return self.leave(rel, f"owned by uid {st.st_uid}, not this server's user: left")
        if node.folder is None:
            return self.unlink(parent, node.name, st, rel)
        try:
            fd = os.open(node.name, DIR_FLAGS, dir_fd=parent)
        except OSError:  # ENOTDIR, ELOOP: swapped for a link or a file since the check
            return self.leave(rel, "replaced since it was checked: not followed")
        try:
            opened = os.fstat(fd)
            if (opened.st_dev, opened.st_ino) != node.identity:
                return self.leave(rel, "replaced since it was checked: not followed")
            done = self.empty(fd, node, rel)
        finally:
            os.close(fd)
        if not done:
            return False  # what was left is listed already
        try:
            os.rmdir(node.name, dir_fd=parent)
        except FileNotFoundError:
            return True
        except OSError as err:
            if err.errno in (errno.ENOTEMPTY, errno.EEXIST):
                return self.leave(rel, "files were written into it after the check: left")
            return self.leave(rel, err.strerror or "cannot be removed")
        return True


def _probe_lock(fd: int, lock: Node, rel: str) -> bool:
    """Whether a process holds ``lock`` (a file in the folder open as ``fd``).

    Raises:
        CacheRefused: it is no longer the regular file the walk saw (a FIFO, a device, a link
            or another file swapped in, or torch re-created it): the clear starts again later.
    """
    changed = CacheRefused(
        f"`{rel}{lock.name}` was replaced or changed since it was checked (a compile may have "
        "started): try again"
    )
    try:  # first by name, so that what is no longer a regular file is not even opened
        st = os.stat(lock.name, dir_fd=fd, follow_symlinks=False)
    except FileNotFoundError:
        return False  # gone: nobody holds it
    except OSError:
        raise changed from None
    if not stat.S_ISREG(st.st_mode) or not lock.same_as(st):
        raise changed
    try:
        held = os.open(lock.name, FILE_FLAGS, dir_fd=fd)
    except FileNotFoundError:
        return False
    except OSError:  # ELOOP: a link swapped in since the stat
        raise changed from None
    try:
        opened = os.fstat(held)
        if not stat.S_ISREG(opened.st_mode) or not lock.same_as(opened):
            raise changed  # swapped between the stat and the open
        try:
            fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        except OSError:
            return False  # no flock on this filesystem (ENOLCK): torch's FileLock has none either
        fcntl.flock(held, fcntl.LOCK_UN)
        return False
    finally:
        os.close(held)


def _lock_held(fd: int, node: Node, rel: str) -> str | None:
    """The first lock file under ``node`` that a process holds (a compile in progress).

    Raises:
        CacheRefused: a lock file changed since the walk (``_probe_lock``).
    """
    if sys.platform == "win32":
        return None
    for child in node.children.values():
        if child.folder is None:
            if child.name.endswith(".lock") and _probe_lock(fd, child, rel):
                return f"{rel}{child.name}"
        elif not child.mount and any(f.name.endswith(".lock") for f in child.files()):
            try:
                sub = os.open(child.name, DIR_FLAGS, dir_fd=fd)
            except OSError:
                continue  # gone or swapped: the deletion finds it so and leaves it
            try:
                if not child.same_as(os.fstat(sub)):
                    continue  # another folder swapped in: not probed (nor ever entered)
                held = _lock_held(sub, child, f"{rel}{child.name}/")
            finally:
                os.close(sub)
            if held is not None:
                return held
    return None


def _checked(
    kind: CacheKind, path: str, configured: bool, expect: tuple[int, int] | None
) -> tuple[int, Node]:
    """Open, check and walk a cache (the caller closes the descriptor)."""
    fd, st = open_root(kind, path, configured)
    try:
        if expect is not None and (st.st_dev, st.st_ino) != expect:
            raise CacheRefused("it was replaced since the last scan: wait for the next scan")
        tree = walk(fd, kind)
        held = _lock_held(fd, tree, "")
        if held is not None:
            raise CompileRunning(
                f"a compile is running (a process holds `{held}`): try again when it is done"
            )
    except BaseException:
        os.close(fd)
        raise
    return fd, tree


def clear_cache(
    kind: CacheKind,
    path: str,
    configured: bool = False,
    *,
    expect: tuple[int, int] | None = None,
    remove_root: bool = False,
) -> ClearResult:
    """Delete everything inside a recognised cache directory (the directory itself stays).

    Args:
        kind: ``"inductor"`` or ``"triton"``.
        path: the cache directory.
        configured: an environment variable chose ``path`` (torch's name for it not needed).
        expect: ``(st_dev, st_ino)`` the directory must have (the scan that recognised it).
        remove_root: also remove the directory itself once it is empty.

    Raises:
        CacheRefused: the directory is not a cache, or holds something torch does not write
            (nothing is deleted then); its ``reason`` says what was found.
    """
    fd, tree = _checked(kind, path, configured, expect)
    deleter = _Deleter(tree.dev)
    try:
        emptied = deleter.empty(fd, tree, "")
    finally:
        os.close(fd)
    if remove_root and emptied:
        _remove_root(path, tree, deleter)
    return deleter.result()


def _remove_root(path: str, tree: Node, deleter: _Deleter) -> None:
    parent_path, name = os.path.split(os.path.normpath(path))
    parent = os.open(parent_path or ".", os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        deleter.remove(parent, Node(name, tree.folder, *tree.identity, tree.uid, 0, 0.0), "")
    finally:
        os.close(parent)


@dataclass(frozen=True)
class _Entry:
    chain: tuple[Node, ...]  # from a child of the root down to the entry
    size_bytes: int
    newest_mtime: float


def _entries(node: Node, chain: tuple[Node, ...] = ()) -> Iterator[_Entry]:
    """The units a trim removes whole (``shapes.Folder.entry``/``file_entries``), lock files not."""
    assert node.folder is not None
    for child in node.children.values():
        here = (*chain, child)
        if child.folder is None:
            if FOLDERS[node.folder].file_entries and not child.name.endswith(".lock"):
                yield _Entry(here, child.size_bytes, child.mtime)
        elif child.mount:
            continue
        elif FOLDERS[child.folder].entry:
            files = list(child.files())
            newest = max((f.mtime for f in files), default=child.mtime)
            yield _Entry(here, sum(f.size_bytes for f in files), newest)
        else:
            yield from _entries(child, here)


def trim_cache(kind: CacheKind, path: str, max_bytes: int, configured: bool = False) -> ClearResult:
    """Remove whole entries (a kernel, a cached graph), oldest first, until at most ``max_bytes``.

    An entry's age is its newest file's. The next compile that needs a removed entry misses and
    rebuilds it; no entry is left half removed.

    Raises:
        CacheRefused: as ``clear_cache`` (nothing is deleted then).
    """
    fd, tree = _checked(kind, path, configured, None)
    deleter = _Deleter(tree.dev)
    try:
        total = sum(f.size_bytes for f in tree.files())
        for entry in sorted(_entries(tree), key=lambda e: e.newest_mtime):
            if total - deleter.removed_bytes <= max_bytes:  # the cache's size, as scanned
                break
            _remove_entry(fd, entry.chain, deleter)
    finally:
        os.close(fd)
    return deleter.result()


def _remove_entry(root: int, chain: tuple[Node, ...], deleter: _Deleter) -> None:
    """Open the entry's folders from the root down (each checked), then remove the entry."""
    fds: list[int] = []
    rel = ""
    try:
        parent = root
        for node in chain[:-1]:
            rel = f"{rel}{node.name}/"
            try:
                sub = os.open(node.name, DIR_FLAGS, dir_fd=parent)
            except OSError:
                deleter.leave(rel, "replaced since it was checked: not followed")
                return
            fds.append(sub)
            if not node.same_as(os.fstat(sub)):
                deleter.leave(rel, "replaced since it was checked: not followed")
                return
            parent = sub
        deleter.remove(parent, chain[-1], rel)
    finally:
        for sub in reversed(fds):
            os.close(sub)


_OWN_FOLDER = "made here"  # the ``Node.folder`` of a folder in a tree this process made
_OWN_MAX_DEPTH = 8  # a scratch folder is shallow; deeper folders are left, and listed


def remove_folder_made_here(path: str, made: tuple[int, int]) -> ClearResult:
    """Delete a folder this process made, and what is in it, by file descriptors.

    For the scratch folders other parts of jupyter-gpu make (``%%torchrun``'s run folder): not a
    cache, so nothing is recognised, but the folder must still be the one that was made
    (``made``: its ``(st_dev, st_ino)`` when it was made), a real folder of this user. What is
    inside is walked through descriptors as for a cache: a link inside is removed, never
    followed; a mount point is not crossed; another owner's file is left. A folder that is not
    the one made (a link or another folder put in its place) is left whole and named in
    ``failed``.
    """
    parent_path, name = os.path.split(os.path.normpath(path))
    parent = os.open(parent_path or ".", os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        try:
            st = os.stat(name, dir_fd=parent, follow_symlinks=False)
        except FileNotFoundError:
            return ClearResult(0, 0)  # gone already
        if (st.st_dev, st.st_ino) != made:
            return ClearResult(0, 0, (f"`{path}`: not the folder that was made here: left alone",))
        try:
            fd = os.open(name, DIR_FLAGS, dir_fd=parent)
        except OSError:  # ENOTDIR, ELOOP: swapped for a file or a link since the stat
            return ClearResult(0, 0, (f"`{path}`: replaced since it was made: not followed",))
        try:
            opened = os.fstat(fd)
            if (opened.st_dev, opened.st_ino) != made:
                return ClearResult(0, 0, (f"`{path}`: replaced since it was made: not followed",))
            root = Node(name, _OWN_FOLDER, *made, opened.st_uid, 0, 0.0)
            _fill_plain(fd, root, opened.st_dev, mounts_under_fd(fd), "", 0)
        finally:
            os.close(fd)
        deleter = _Deleter(made[0])
        deleter.remove(parent, root, "")
        return deleter.result()
    finally:
        os.close(parent)


def _fill_plain(fd: int, node: Node, dev: int, mounts: Mounts, rel: str, depth: int) -> None:
    """``node``'s children as ``lstat`` sees them (nothing recognised: every name is taken)."""
    with os.scandir(fd) as entries:
        for entry in entries:
            try:
                st = entry.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue
            is_dir = stat.S_ISDIR(st.st_mode)  # a link is a file here: unlink removes the name
            path = f"{rel}{entry.name}"
            child = Node(
                entry.name,
                _OWN_FOLDER if is_dir else None,
                st.st_dev,
                st.st_ino,
                st.st_uid,
                0 if is_dir else st.st_size,
                st.st_mtime,
                st.st_ctime_ns,
                mount=is_dir and (st.st_dev != dev or mounts.at(path)),
            )
            node.children[entry.name] = child
            if is_dir and not child.mount and depth < _OWN_MAX_DEPTH:
                try:
                    sub = os.open(entry.name, DIR_FLAGS, dir_fd=fd)
                except OSError:
                    continue  # swapped since the scan: the deleter finds it changed and leaves it
                try:
                    if child.same_as(os.fstat(sub)):
                        _fill_plain(sub, child, dev, mounts, f"{path}/", depth + 1)
                finally:
                    os.close(sub)


def remove_file_made_here(folder: int, name: str, made: tuple[int, int, int]) -> ClearResult:
    """Remove one name of a file this process made, in the folder open as ``folder``.

    For the tutorials copy, which writes each notebook under a temporary name and links it into
    place (``jupyter_gpu.tutorials.new_files``): the temporary name goes here. It must still
    name that file: ``made`` is its ``(st_dev, st_ino, st_ctime_ns)`` read from the open file
    after its last change (a link changes the ctime), and it must be this user's. Anything else
    at that name (another file, a link, a folder) is left and named in ``failed``. The name is
    removed with ``unlink(name, dir_fd=folder)``; while another name holds the file (the
    notebook linked into place), nothing is freed.
    """
    node = Node(name, None, made[0], made[1], os.geteuid(), 0, 0.0, made[2])
    deleter = _Deleter(made[0])
    deleter.remove(folder, node, "")
    return deleter.result()
