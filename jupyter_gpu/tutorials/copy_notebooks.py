"""Copy the tutorial notebooks into a folder of the user's, never over their edits.

``jupyter gpu-tutorials [DIR]`` (the ``jupyter-gpu-tutorials`` console script) and the
JupyterLab launcher's *GPU tutorials* item both use :func:`plan_copy`. A file that is missing in
``DIR`` is copied; one that is there and the same as the shipped one is left alone; one that is
there and differs (the user edited or ran it) is **kept**: nothing is ever overwritten. To get a
fresh copy of an edited notebook, rename or delete yours and run the command again.

The folder may be shared with other users, so nothing in it is trusted
(``jupyter_gpu.new_files``): each file is written under a fresh temporary name and linked into
place, never through a name that a file or link already holds, and a link or anything but a
file where a notebook or a folder should be is left as it is and reported (``skipped``).

The notebooks ship inside the package (``jupyter_gpu/tutorials/notebooks/``, put there by the
wheel build); in a source checkout they are read from the repository's ``notebooks/``.
The Jupyter server uses this module too: it imports neither torch nor the magics.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from jupyter_gpu.new_files import (
    WORKS,
    Occupied,
    open_folder,
    read_existing,
    write_new,
)

DEFAULT_FOLDER = "gpu-tutorials"
_SHIPPED_SUFFIXES = frozenset({".ipynb", ".md"})


def shipped_notebooks_dir() -> Path:
    """The folder of the shipped notebooks (package data, or the source checkout's).

    Raises:
        FileNotFoundError: neither exists (a broken install).
    """
    packaged = Path(__file__).with_name("notebooks")
    if packaged.is_dir():
        return packaged
    source = Path(__file__).resolve().parents[2] / "notebooks"
    if source.is_dir():
        return source
    raise FileNotFoundError(
        f"no tutorial notebooks at {packaged} or {source}: reinstall jupyter-gpu"
    )


def shipped_files(source: Path | None = None) -> list[str]:
    """Relative paths (``/``-separated) of the files to copy, sorted."""
    root = shipped_notebooks_dir() if source is None else source
    return sorted(
        p.relative_to(root).as_posix()
        for p in root.rglob("*")
        if p.is_file() and p.suffix in _SHIPPED_SUFFIXES and ".ipynb_checkpoints" not in p.parts
    )


@dataclass
class CopyReport:
    """What a copy did, by relative path.

    ``skipped``: ``"<path>: why"`` for what was left alone because its name held a link or
    something else than a file, or a folder on its way was a link.
    """

    folder: str
    copied: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, object]:
        """JSON-ready fields."""
        return {
            "path": self.folder,
            "copied": self.copied,
            "unchanged": self.unchanged,
            "kept": self.kept,
            "skipped": self.skipped,
        }

    def describe(self) -> str:
        """A few lines for a terminal."""
        lines = [f"{self.folder}: {len(self.copied)} copied, {len(self.unchanged)} already there"]
        if self.kept:
            copies, which = ("copy", "it") if len(self.kept) == 1 else ("copies", "one")
            lines.append(
                f"kept your edited {copies} of {', '.join(self.kept)} (nothing is overwritten: "
                f"rename or delete {which} and run this again for a fresh copy)"
            )
        lines.extend(f"left alone: {why}" for why in self.skipped)
        lines.append("Open 00-start-here.ipynb first.")
        return "\n".join(lines)


def copy_tutorials(destination: str | Path, source: Path | None = None) -> CopyReport:
    """Copy the shipped notebooks into ``destination`` (created if missing), keeping edits.

    ``destination`` itself is the folder the user named (a link to a folder is followed, as
    ``cp`` would); nothing inside it is (``copy_into``).

    Raises:
        FileNotFoundError: no shipped notebooks (see :func:`shipped_notebooks_dir`).
        NotADirectoryError: ``destination`` exists and is not a folder.
        OSError: it cannot be made or written (permissions, a name too long, no space), or this
            platform cannot write through a folder's descriptor (Windows).
    """
    target = Path(destination)
    if target.exists() and not target.is_dir():
        raise NotADirectoryError(f"{target} exists and is not a folder")
    target.mkdir(parents=True, exist_ok=True)
    folder = os.open(target, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        return copy_into(folder, str(target), source)
    finally:
        os.close(folder)


def copy_into(folder: int, label: str, source: Path | None = None) -> CopyReport:
    """Copy the shipped notebooks into the folder open as ``folder`` (``label`` names it).

    Raises:
        FileNotFoundError: no shipped notebooks.
        OSError: the folder cannot be written, or this platform has no ``dir_fd`` writes.
    """
    if not WORKS:
        raise OSError(
            "this platform cannot create files through a folder's descriptor without following "
            "links: copy the notebooks from the package's tutorials/notebooks by hand"
        )
    root = shipped_notebooks_dir() if source is None else source
    report = CopyReport(label)
    for relative in shipped_files(root):
        *parts, name = relative.split("/")
        try:
            sub = open_folder(folder, parts)
        except NotADirectoryError as error:
            report.skipped.append(f"{relative}: {error}")
            continue
        try:
            _copy_one(sub, name, relative, (root / relative).read_bytes(), report)
        finally:
            os.close(sub)
    return report


def _copy_one(folder: int, name: str, relative: str, data: bytes, report: CopyReport) -> None:
    try:
        there = read_existing(folder, name)
        if there is None:
            written = write_new(folder, name, data)
            report.skipped.extend(f"{relative}: its temporary name {why}" for why in written.left)
            if written.created:
                report.copied.append(relative)
                return
            there = read_existing(folder, name)  # made by someone else meanwhile: compared
    except Occupied as error:
        report.skipped.append(f"{relative}: {error.reason}")
        return
    if there is None:
        report.skipped.append(f"{relative}: made and removed by someone else meanwhile")
        return
    (report.unchanged if _same(there, data, relative) else report.kept).append(relative)


def _same(there: bytes, shipped: bytes, relative: str) -> bool:
    """Whether a file holds the shipped one: the same bytes, or for a notebook the same JSON.

    The launcher once saved the notebooks through Jupyter, which writes one of them a little
    differently: such a copy is the same notebook, not the user's edit.
    """
    if there == shipped:
        return True
    if not relative.endswith(".ipynb"):
        return False
    try:
        return bool(json.loads(there) == json.loads(shipped))
    except ValueError:  # not JSON (an edit broke it): the user's
        return False


def main(argv: list[str] | None = None) -> int:
    """``jupyter gpu-tutorials [DIR]``: copy the notebooks into DIR (default gpu-tutorials)."""
    parser = argparse.ArgumentParser(
        prog="jupyter gpu-tutorials",
        description="Copy the jupyter-gpu tutorial notebooks into a folder; files you have "
        "edited there are kept, never overwritten.",
    )
    parser.add_argument("folder", nargs="?", default=DEFAULT_FOLDER, help="(default: %(default)s)")
    args = parser.parse_args(argv)
    try:
        report = copy_tutorials(args.folder)
    except OSError as error:  # no notebooks, not a folder, a name too long, no permission
        print(f"jupyter gpu-tutorials: {error}", file=sys.stderr)  # noqa: T201  # a CLI
        return 1
    print(report.describe())  # noqa: T201  # a CLI
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
