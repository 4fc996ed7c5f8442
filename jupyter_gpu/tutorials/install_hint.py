"""The pip command that adds an extra (``[tutorials]``, ``[torch]``) the way jupyter-gpu came in.

jupyter-gpu is on no package index: ``pip install "jupyter-gpu[tutorials]"`` fails for most
users. pip records where a distribution came from in its ``direct_url.json`` (PEP 610): a
checkout installed in editable mode (``.ci/setup``), a folder, a wheel file, a VCS URL. The
hint names that same source, so it works where it is shown. Only an install from an index
(no ``direct_url.json``) gets the plain name.

Imports only the standard library: the first cell of every notebook uses it, torch or not.
"""

from __future__ import annotations

import importlib.metadata
import json
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

DISTRIBUTION = "jupyter-gpu"


def _file_path(url: str) -> Path | None:
    parsed = urlparse(url)
    return Path(unquote(parsed.path)) if parsed.scheme == "file" else None


def pip_command(extra: str, direct_url: dict[str, Any] | None) -> str:
    """``pip install ...`` for jupyter-gpu with ``extra``, from the source ``direct_url`` names.

    Args:
        extra: the extra to add (``tutorials``).
        direct_url: the distribution's ``direct_url.json`` (PEP 610), ``None`` if it has none.
    """
    name = f"{DISTRIBUTION}[{extra}]"
    if not direct_url or not isinstance(direct_url.get("url"), str):
        return f'pip install "{name}"'
    url: str = direct_url["url"]
    path = _file_path(url)
    vcs = direct_url.get("vcs_info")
    if isinstance(vcs, dict) and vcs.get("vcs"):
        commit = f"@{vcs['commit_id']}" if vcs.get("commit_id") else ""
        return f'pip install "{name} @ {vcs["vcs"]}+{url}{commit}"'
    if path is None:  # an archive on a web server
        return f'pip install "{name} @ {url}"'
    dir_info = direct_url.get("dir_info")
    editable = isinstance(dir_info, dict) and dir_info.get("editable") is True
    return f'pip install {"-e " if editable else ""}"{path}[{extra}]"'


def installed_direct_url(
    distribution: importlib.metadata.Distribution | None = None,
) -> dict[str, Any] | None:
    """The ``direct_url.json`` of jupyter-gpu (default: this environment's).

    ``None`` when it came from an index. Not installed at all, but imported from a checkout:
    that checkout, as if installed from it in editable mode.
    """
    try:
        dist = distribution or importlib.metadata.distribution(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return _checkout_on_path()
    text = dist.read_text("direct_url.json")
    if not text:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _checkout_on_path() -> dict[str, Any] | None:
    """Not installed, imported from a checkout (``PYTHONPATH``): that checkout, as if editable."""
    root = Path(__file__).resolve().parents[2]
    if (root / "pyproject.toml").is_file() and (root / "jupyter_gpu").is_dir():
        return {"url": root.as_uri(), "dir_info": {"editable": True}}
    return None


def install_hint(
    extra: str = "tutorials", distribution: importlib.metadata.Distribution | None = None
) -> tuple[str, str]:
    """The pip command that adds jupyter-gpu's ``extra`` to this environment, and a note.

    The note is empty, or says that the source pip recorded is gone (a wheel deleted after
    installing it, as an image build does): the command then needs that file back.
    """
    direct_url = installed_direct_url(distribution)
    command = pip_command(extra, direct_url)
    url = direct_url.get("url") if direct_url else None
    path = _file_path(url) if isinstance(url, str) else None
    if path is not None and not path.exists():
        return command, f"jupyter-gpu was installed from {path}, which is no longer there."
    return command, ""
