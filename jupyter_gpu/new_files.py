"""New files in a folder that others may write in too: nothing followed, nothing replaced.

The tutorials copy (``tutorials/copy_notebooks``) writes into a folder the user names, which can
be a shared one. Another user who can write there could plant a symbolic link at a name the copy
uses (``00-start-here.ipynb.partial`` pointing at one of the user's files): a copy that opened
that name would write through the link. ``%%torchrun``'s ranks write their error reports and
results the same way (``distributed/``), so that no file is written in two steps by a rename
that would replace, i.e. delete, what held the name: only ``jupyter_gpu.compile_cache`` deletes.
Everything here works through the descriptor of the open folder (``dir_fd``) and never opens a
name that something already holds:

- folders are opened with ``O_DIRECTORY | O_NOFOLLOW``: a link where a folder should be is
  refused, never entered;
- a file is written under a fresh random temporary name opened ``O_CREAT | O_EXCL |
  O_NOFOLLOW`` (a name already taken, by a file or a link, fails, and another is drawn), then
  put in place with ``link()``, which never replaces what holds the name (``EEXIST``); the
  temporary name is then removed by ``jupyter_gpu.compile_cache`` (the one package that
  deletes), only while it is still that file;
- an existing file is read with ``O_NOFOLLOW | O_NONBLOCK`` after ``lstat`` says it is a
  regular file: a link, FIFO or device at a name is reported, never opened.

A process killed between writing and linking leaves a hidden ``.<name>.<random>.partial``.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Sequence
from dataclasses import dataclass

from jupyter_gpu.compile_cache import remove_file_made_here
from jupyter_gpu.compile_cache.recognise import DIR_FLAGS, FILE_FLAGS

# Folders and existing files open with the deleting package's flags (DIR_FLAGS, FILE_FLAGS):
# nothing followed, nothing waited on, the same here as there.
_NEW_FILE = (
    os.O_WRONLY
    | os.O_CREAT
    | os.O_EXCL
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_CLOEXEC", 0)
)
# link() fails so on filesystems without hard links (FAT, some network and FUSE filesystems).
_NO_HARD_LINKS = frozenset({errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.ENOSYS})
_TEMPORARY_TRIES = 16

Data = bytes | bytearray | memoryview

WORKS = (
    hasattr(os, "O_NOFOLLOW")
    and os.open in os.supports_dir_fd
    and os.link in os.supports_dir_fd
    and os.link in os.supports_follow_symlinks
)
"""Whether this platform can do all of the above (Linux, macOS); not Windows."""


@dataclass(frozen=True)
class NewFile:
    """What ``write_new`` did.

    ``created``: the name now holds the data (``False``: something took the name meanwhile and
    is untouched). ``identity``: the new file's ``(st_dev, st_ino, st_ctime_ns)`` once in place
    (what ``compile_cache.remove_file_made_here`` needs to remove it later), ``None`` if not
    created. ``left``: what of the temporary name could not be removed (normally nothing).
    """

    created: bool
    identity: tuple[int, int, int] | None
    left: tuple[str, ...] = ()


class Occupied(Exception):
    """A name holds something that is not a regular file (a link, a FIFO...): left as it is."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def open_folder(parent: int, parts: Sequence[str]) -> int:
    """Open the folder ``parts`` under the folder open as ``parent``, making what is missing.

    No link is followed on the way. The caller closes the descriptor returned.

    Raises:
        NotADirectoryError: a part is a file or a symbolic link (the message names it).
        OSError: a folder cannot be made or opened (permissions, a name too long).
    """
    fd = os.dup(parent)
    walked: list[str] = []
    try:
        for part in parts:
            walked.append(part)
            with contextlib.suppress(FileExistsError):  # there already: checked as it opens
                os.mkdir(part, 0o777, dir_fd=fd)
            try:
                sub = os.open(part, DIR_FLAGS, dir_fd=fd)
            except OSError as err:
                if err.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise NotADirectoryError(
                        f"{'/'.join(walked)} is {_what(fd, part)}, not a folder (never followed)"
                    ) from None
                raise
            os.close(fd)
            fd = sub
    except BaseException:
        os.close(fd)
        raise
    return fd


def _what(folder: int, name: str) -> str:
    """What holds ``name`` where a folder was expected, in a few words."""
    try:
        st = os.stat(name, dir_fd=folder, follow_symlinks=False)
    except OSError:
        return "not a folder any more"
    return "a symbolic link" if stat.S_ISLNK(st.st_mode) else "a file"


def read_existing(folder: int, name: str) -> bytes | None:
    """What the regular file ``name`` holds, or ``None`` when nothing has that name.

    Raises:
        Occupied: the name holds a link, a folder or anything else but a regular file.
    """
    try:
        st = os.stat(name, dir_fd=folder, follow_symlinks=False)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(st.st_mode):
        raise Occupied("a symbolic link is there (never followed): left as it is")
    if not stat.S_ISREG(st.st_mode):
        raise Occupied("something that is not a file is there: left as it is")
    try:
        fd = os.open(name, FILE_FLAGS, dir_fd=folder)
    except FileNotFoundError:
        return None
    except OSError as err:  # ELOOP: a link swapped in since the stat
        raise Occupied(f"it cannot be opened as a file ({err.strerror}): left as it is") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise Occupied("something that is not a file is there: left as it is")
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _write_all(fd: int, data: Data) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    os.fsync(fd)  # on disk before its name is: never a half-written file under the name


def _new_temporary(folder: int, name: str) -> tuple[str, int]:
    """A fresh hidden name beside ``name``, created here and now, with its descriptor."""
    for _ in range(_TEMPORARY_TRIES):
        temporary = f".{name}.{secrets.token_hex(6)}.partial"
        try:
            return temporary, os.open(temporary, _NEW_FILE, 0o666, dir_fd=folder)
        except FileExistsError:  # a file or a link holds it (planted?): never opened; next
            continue
    raise FileExistsError(f"no free temporary name beside {name} in {_TEMPORARY_TRIES} tries")


def write_new(folder: int, name: str, data: Data) -> NewFile:
    """Create ``name`` holding ``data`` in the folder open as ``folder``, if nothing holds it.

    Raises:
        OSError: the folder cannot be written (permissions, no space).
    """
    temporary, fd = _new_temporary(folder, name)
    try:
        _write_all(fd, data)
        created = _put_in_place(folder, temporary, name, data)
        st = os.fstat(fd)  # after the link, which changed its ctime
        left = remove_file_made_here(folder, temporary, _identity(st)).failed
    except BaseException:
        remove_file_made_here(folder, temporary, _identity(os.fstat(fd)))
        raise
    finally:
        os.close(fd)
    if not created:
        return NewFile(False, None, left)
    try:  # its identity now, after the temporary name went (that unlink changed its ctime)
        placed = os.stat(name, dir_fd=folder, follow_symlinks=False)
    except OSError:
        return NewFile(True, None, left)
    same = (placed.st_dev, placed.st_ino) == (st.st_dev, st.st_ino)
    return NewFile(True, _identity(placed) if same else None, left)


def _identity(st: os.stat_result) -> tuple[int, int, int]:
    return (st.st_dev, st.st_ino, st.st_ctime_ns)


def _put_in_place(folder: int, temporary: str, name: str, data: Data) -> bool:
    """Give the written file its name, unless something holds it: ``link()`` never replaces."""
    try:
        os.link(temporary, name, src_dir_fd=folder, dst_dir_fd=folder, follow_symlinks=False)
    except FileExistsError:
        return False
    except OSError as err:
        if err.errno not in _NO_HARD_LINKS:
            raise
        return _write_in_place(folder, name, data)
    return True


def _write_in_place(folder: int, name: str, data: Data) -> bool:
    """Without hard links: write ``name`` itself, created ``O_EXCL | O_NOFOLLOW``.

    Never a link's target, never over a file; but a crash mid-write can leave it short, which
    the temporary name avoids where there are hard links.
    """
    try:
        fd = os.open(name, _NEW_FILE, 0o666, dir_fd=folder)
    except FileExistsError:
        return False
    try:
        _write_all(fd, data)
    finally:
        os.close(fd)
    return True
