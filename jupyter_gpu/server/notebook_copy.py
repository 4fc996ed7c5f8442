"""``POST tutorials``: copy the tutorial notebooks into the user's files (the launcher item).

The copy goes through Jupyter's own contents manager, so it honours whatever stores the user's
files (a local folder, or a JupyterHub deployment's remote contents) and Jupyter's
authorization for *writing contents*; a file that already exists is never overwritten. The
folder is relative to the server's root; absolute paths and ``..`` are refused.
"""

from __future__ import annotations

import json
from pathlib import PurePosixPath
from typing import Any

import nbformat
from jupyter_server.auth.decorator import authorized
from jupyter_server.base.handlers import APIHandler
from jupyter_server.utils import ensure_async
from tornado import web

from jupyter_gpu.server.handlers import json_body
from jupyter_gpu.tutorials.copy_notebooks import (
    DEFAULT_FOLDER,
    CopyReport,
    shipped_files,
    shipped_notebooks_dir,
)


def checked_folder(value: object) -> str:
    """A relative folder under the server's root, ``/``-separated.

    Raises:
        tornado.web.HTTPError: 400 for anything else (absolute, ``..``, not a string).
    """
    if value is None:
        return DEFAULT_FOLDER
    if not isinstance(value, str) or not value.strip("/ "):
        raise web.HTTPError(400, "path must be a folder name relative to the server's root")
    path = PurePosixPath(value.strip())
    if path.is_absolute() or ".." in path.parts or "\\" in value:
        raise web.HTTPError(400, "path must stay inside the server's root (no '/…', no '..')")
    return path.as_posix()


def _notebook(text: str) -> Any:
    """A notebook's JSON text as nbformat's node (what the contents manager saves and gets)."""
    return nbformat.reads(text, 4)  # type: ignore[no-untyped-call]  # nbformat has no hints


class TutorialsHandler(APIHandler):
    """Copy the shipped notebooks into a folder (``{"path": "gpu-tutorials"}``), keeping edits."""

    auth_resource = "contents"  # writing files: the same permission as saving a notebook

    @web.authenticated
    @authorized
    async def post(self) -> None:
        example = '{"path": "gpu-tutorials"}'
        body: Any = json_body(self, example) if self.request.body.strip() else {}
        if not isinstance(body, dict):
            raise web.HTTPError(400, f"send a JSON object, e.g. {example}")
        folder = checked_folder(body.get("path"))
        cm: Any = self.contents_manager  # jupyter_server's contents API has no type hints
        source = shipped_notebooks_dir()
        report = CopyReport(folder)
        for relative in shipped_files(source):
            await self._ensure_folders(folder, relative)
            dest = f"{folder}/{relative}"
            text = (source / relative).read_text(encoding="utf-8")
            notebook = relative.endswith(".ipynb")
            if await ensure_async(cm.file_exists(dest)):
                (report.unchanged if await self._same(dest, text) else report.kept).append(relative)
                continue
            if notebook:
                model = {"type": "notebook", "format": "json", "content": _notebook(text)}
            else:
                model = {"type": "file", "format": "text", "content": text}
            await ensure_async(cm.save(model, dest))
            report.copied.append(relative)
        self.set_status(201 if report.copied else 200)
        await self.finish(json.dumps(report.as_dict()))

    async def _same(self, path: str, text: str) -> bool:
        """Whether the file at ``path`` holds ``text`` (a notebook: the same notebook)."""
        cm: Any = self.contents_manager  # jupyter_server's contents API has no type hints
        try:
            if path.endswith(".ipynb"):
                model = await ensure_async(cm.get(path, content=True, type="notebook"))
                for cell in model["content"].get("cells", []):
                    cell.get("metadata", {}).pop("trusted", None)  # added by get(), not stored
                return bool(model["content"] == _notebook(text))
            model = await ensure_async(cm.get(path, content=True, type="file", format="text"))
        except web.HTTPError:  # not readable as a notebook (an edit broke it): the user's
            return False
        return bool(model.get("content") == text)

    async def _ensure_folders(self, folder: str, relative: str) -> None:
        cm: Any = self.contents_manager  # jupyter_server's contents API has no type hints
        parts = PurePosixPath(f"{folder}/{relative}").parent.parts
        for i in range(1, len(parts) + 1):
            path = "/".join(parts[:i])
            if await ensure_async(cm.file_exists(path)):
                raise web.HTTPError(409, f"{path} is a file, not a folder")
            if not await ensure_async(cm.dir_exists(path)):
                await ensure_async(cm.save({"type": "directory"}, path))
