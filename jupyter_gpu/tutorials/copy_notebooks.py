"""Copy the tutorial notebooks into a folder of the user's, never over their edits.

``jupyter gpu-tutorials [DIR]`` (the ``jupyter-gpu-tutorials`` console script) and the
JupyterLab launcher's *GPU tutorials* item both use :func:`plan_copy`. A file that is missing in
``DIR`` is copied; one that is there and the same as the shipped one is left alone; one that is
there and differs (the user edited or ran it) is **kept**: nothing is ever overwritten. To get a
fresh copy of an edited notebook, rename or delete yours and run the command again.

The notebooks ship inside the package (``jupyter_gpu/tutorials/notebooks/``, put there by the
wheel build); in a source checkout they are read from the repository's ``notebooks/``.
Imports only the standard library: the Jupyter server uses this module too.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from pathlib import Path

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
    """What a copy did, by relative path."""

    folder: str
    copied: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, object]:
        """JSON-ready fields."""
        return {
            "path": self.folder,
            "copied": self.copied,
            "unchanged": self.unchanged,
            "kept": self.kept,
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
        lines.append("Open 00-start-here.ipynb first.")
        return "\n".join(lines)


def copy_tutorials(destination: str | Path, source: Path | None = None) -> CopyReport:
    """Copy the shipped notebooks into ``destination`` (created if missing), keeping edits.

    Raises:
        FileNotFoundError: no shipped notebooks (see :func:`shipped_notebooks_dir`).
        NotADirectoryError: ``destination`` exists and is not a folder.
    """
    root = shipped_notebooks_dir() if source is None else source
    target = Path(destination)
    if target.exists() and not target.is_dir():
        raise NotADirectoryError(f"{target} exists and is not a folder")
    report = CopyReport(str(target))
    for relative in shipped_files(root):
        data = (root / relative).read_bytes()
        dest = target / relative
        if dest.exists():
            (report.unchanged if dest.read_bytes() == data else report.kept).append(relative)
            continue
        dest.parent.mkdir(parents=True, exist_ok=True)
        partial = dest.with_name(dest.name + ".partial")
        partial.write_bytes(data)
        partial.replace(dest)  # never a half-written notebook
        report.copied.append(relative)
    return report


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
    except (FileNotFoundError, NotADirectoryError) as error:
        print(f"jupyter gpu-tutorials: {error}", file=sys.stderr)  # noqa: T201  # a CLI
        return 1
    print(report.describe())  # noqa: T201  # a CLI
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
