r"""Mount points under a folder, from the kernel's mount table, so that no walk ever crosses one.

A different device number finds most mounts, but not a bind mount of a folder of the same
filesystem: its files have the device number of the folder it sits in, and a walk that trusted
the number alone went in (and the clear deleted torch-named files in the mount's source). So the
walks also ask the mount table, ``/proc/self/mountinfo`` (its fifth field is each mount point,
as this process sees it, with space, tab, newline and backslash written as ``\040``, ``\011``,
``\012`` and ``\134``; ``proc_pid_mountinfo(5)``). Where there is no such table (not Linux) the
device number is the only test, as before.

The table is read when a walk starts: a mount made during a walk by someone who may mount
(root) is only caught by its device number.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

MOUNTINFO = "/proc/self/mountinfo"
"""Where the mount table is read (a module attribute so that a test can point it at a fixture)."""

_ESCAPED = re.compile(rb"\\([0-7]{3})")


def parse_mountinfo(table: bytes) -> frozenset[str]:
    """The mount points listed in a ``mountinfo`` table, as absolute paths (``os.fsdecode``)."""
    points: set[str] = set()
    for line in table.splitlines():
        fields = line.split(b" ")
        if len(fields) > 4:
            raw = _ESCAPED.sub(lambda m: bytes([int(m.group(1), 8)]), fields[4])
            points.add(os.fsdecode(raw))
    return frozenset(points)


def read_mount_points() -> frozenset[str] | None:
    """This process's mount points, or ``None`` where the table cannot be read."""
    try:
        with open(MOUNTINFO, "rb") as table:  # noqa: PTH123 (bytes: a path need not be UTF-8)
            return parse_mountinfo(table.read())
    except OSError:
        return None


@dataclass(frozen=True)
class Mounts:
    """The mount points strictly under one folder, by their path relative to it (``"a/b"``).

    ``known``: the table and the folder's own path could be read; when not, ``at`` is always
    false and the device number is the walks' only test.
    """

    inside: frozenset[str] = frozenset()
    known: bool = False

    def at(self, rel: str) -> bool:
        """Whether the folder at ``rel`` (``"a/b"`` or ``"a/b/"``) is a mount point."""
        return rel.rstrip("/") in self.inside


NO_TABLE = Mounts()


def mounts_under(top: str) -> Mounts:
    """The mount points under the folder whose real (symlink-free) absolute path is ``top``."""
    points = read_mount_points()
    if points is None or not top.startswith("/"):
        return NO_TABLE
    prefix = top.rstrip("/") + "/"
    return Mounts(frozenset(p[len(prefix) :] for p in points if p.startswith(prefix)), True)


def folder_path(fd: int) -> str | None:
    """The absolute path of an open folder as this process sees it (``/proc/self/fd``), or None.

    ``None`` where there is no ``/proc`` or the folder was removed (the kernel then adds
    `` (deleted)``, which is no path).
    """
    try:
        path = str(Path(f"/proc/self/fd/{fd}").readlink())
    except OSError:
        return None
    return path if path.startswith("/") and not path.endswith(" (deleted)") else None


def mounts_under_fd(fd: int) -> Mounts:
    """``mounts_under`` the folder open as ``fd``."""
    top = folder_path(fd)
    return NO_TABLE if top is None else mounts_under(top)
