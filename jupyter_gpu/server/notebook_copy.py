"""``POST tutorials``: copy the tutorial notebooks into the user's files (the launcher item).

Where the user's files are a local folder (Jupyter's ``FileContentsManager`` and its
subclasses, the default), the copy writes into it through file descriptors
(``jupyter_gpu.tutorials.copy_notebooks.copy_into``): the folder may be shared, and the contents
manager's save would write through a symbolic link planted at a notebook's name (it follows the
file's own link on purpose). Nothing there is followed: a link where a notebook or a folder
should be is left and reported in ``skipped``. Elsewhere (a JupyterHub deployment's remote
contents) the copy goes through Jupyter's contents manager, which has no links to follow.
Either way a file that already exists is never overwritten, and writing needs Jupyter's
authorization for *writing contents*. The folder is relative to the server's root; absolute
paths, ``..`` and names longer than a filesystem allows are refused (400).
"""

from __future__ import annotations

import asyncio
import errno
import json
import os
from pathlib import PurePosixPath
from typing import Any

import nbformat
from jupyter_server.auth.decorator import authorized
from jupyter_server.base.handlers import APIHandler
from jupyter_server.services.contents.fileio import FileManagerMixin
from jupyter_server.utils import ensure_async
from tornado import web

from jupyter_gpu.new_files import open_folder
from jupyter_gpu.server.handlers import json_body
from jupyter_gpu.tutorials.copy_notebooks import (
    DEFAULT_FOLDER,
    CopyReport,
    copy_into,
    shipped_files,
    shipped_notebooks_dir,
)

NAME_MAX_BYTES = 255
"""The longest file or folder name Linux filesystems take (``NAME_MAX``), in bytes of UTF-8."""


def checked_folder(value: object) -> str:
    """A relative folder under the server's root, ``/``-separated.

    Raises:
        tornado.web.HTTPError: 400 for anything else (absolute, ``..``, not a string, a NUL,
            a lone surrogate, a name longer than ``NAME_MAX_BYTES``), with the reason.
    """
    if value is None:
        return DEFAULT_FOLDER
    if not isinstance(value, str) or not value.strip("/ "):
        raise web.HTTPError(400, "path must be a folder name relative to the server's root")
    path = PurePosixPath(value.strip())
    if path.is_absolute() or ".." in path.parts or "\\" in value:
        raise web.HTTPError(400, "path must stay inside the server's root (no '/…', no '..')")
    if "\0" in value or any(0xD800 <= ord(c) <= 0xDFFF for c in value):
        raise web.HTTPError(400, "path must be text: no NUL, no lone UTF-16 surrogate")
    for part in path.parts:
        size = len(part.encode("utf-8"))
        if size > NAME_MAX_BYTES:
            raise web.HTTPError(
                400,
                f"a folder name is at most {NAME_MAX_BYTES} bytes; {part[:24]!r}… has {size}: "
                "choose a shorter one",
            )
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
        if isinstance(cm, FileManagerMixin):
            report = await self._copy_to_disk(str(self.contents_manager.root_dir), folder)
            self.set_status(201 if report.copied else 200)
            await self.finish(json.dumps(report.as_dict()))
            return
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

    async def _copy_to_disk(self, root: str, folder: str) -> CopyReport:
        """Copy into ``folder`` under the local ``root`` (in a worker thread: it syncs files).

        Raises:
            tornado.web.HTTPError: 409 a part of ``folder`` is a file or a link; 403 no
                permission to write there; 400 a name the filesystem refuses as too long.
        """

        def copy() -> CopyReport:
            top = os.open(root, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
            try:
                target = open_folder(top, folder.split("/"))
            finally:
                os.close(top)
            try:
                return copy_into(target, folder)
            finally:
                os.close(target)

        try:
            return await asyncio.get_running_loop().run_in_executor(None, copy)
        except NotADirectoryError as error:
            raise web.HTTPError(409, str(error)) from None
        except PermissionError as error:
            raise web.HTTPError(
                403, f"no permission to write in {folder}: {error.strerror}"
            ) from None
        except OSError as error:
            if error.errno == errno.ENAMETOOLONG:
                raise web.HTTPError(
                    400, f"{folder}: a name is too long for this filesystem"
                ) from None
            raise

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
