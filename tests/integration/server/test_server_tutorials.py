"""POST tutorials (the launcher's "GPU tutorials" item) copies through the contents manager."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tornado.httpclient import HTTPClientError

from jupyter_gpu.tutorials.copy_notebooks import shipped_files
from tests.integration.server.api_helpers import API
from tests.integration.server.conftest import Fetch


async def _post(jp_fetch: Fetch, body: object) -> tuple[int, dict]:
    response = await jp_fetch(*API, "tutorials", method="POST", body=json.dumps(body))
    return response.code, json.loads(response.body)


async def test_copies_then_keeps_edits(jp_fetch: Fetch, jp_root_dir: Path) -> None:
    code, report = await _post(jp_fetch, {"path": "course/gpu"})
    assert code == 201
    assert report["copied"] == shipped_files()
    folder = jp_root_dir / "course" / "gpu"
    nb = json.loads((folder / "00-start-here.ipynb").read_text())
    assert nb["cells"][0]["cell_type"] == "markdown"

    (folder / "02-mixed-precision.ipynb").write_text('{"edited": true}')
    (folder / "README.md").unlink()
    code, report = await _post(jp_fetch, {"path": "course/gpu"})
    assert code == 201
    assert report["copied"] == ["README.md"]
    assert report["kept"] == ["02-mixed-precision.ipynb"]
    assert (folder / "02-mixed-precision.ipynb").read_text() == '{"edited": true}'


async def test_default_folder(jp_fetch: Fetch, jp_root_dir: Path) -> None:
    response = await jp_fetch(*API, "tutorials", method="POST", body="")
    assert response.code == 201
    assert (jp_root_dir / "gpu-tutorials" / "00-start-here.ipynb").is_file()


@pytest.mark.parametrize("path", ["/etc", "../outside", "a/../../b", 3, ""])
async def test_refuses_paths_outside_the_root(jp_fetch: Fetch, path: object) -> None:
    with pytest.raises(HTTPClientError) as error:
        await _post(jp_fetch, {"path": path})
    assert error.value.code == 400


async def test_needs_credentials(jp_fetch: Fetch) -> None:
    with pytest.raises(HTTPClientError) as error:
        await jp_fetch(*API, "tutorials", method="POST", body="{}", headers={"Authorization": ""})
    assert error.value.code == 403


async def test_a_planted_link_is_never_written_through(
    jp_fetch: Fetch, jp_root_dir: Path, tmp_path: Path
) -> None:
    # Another user who can write in the folder plants a link at a notebook's name, pointing
    # where the user's server may write (a file that does not exist yet).
    outside = tmp_path / "outside"
    outside.mkdir()
    folder = jp_root_dir / "shared" / "gpu"
    folder.mkdir(parents=True)
    (folder / "00-start-here.ipynb").symlink_to(outside / "written-through-a-link.ipynb")
    code, report = await _post(jp_fetch, {"path": "shared/gpu"})
    assert code == 201
    assert list(outside.iterdir()) == []
    assert report["skipped"] == [
        "00-start-here.ipynb: a symbolic link is there (never followed): left as it is"
    ]
    assert report["copied"] == [f for f in shipped_files() if f != "00-start-here.ipynb"]
    assert (folder / "00-start-here.ipynb").is_symlink()


async def test_a_folder_that_is_a_link_is_refused(
    jp_fetch: Fetch, jp_root_dir: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (jp_root_dir / "course").symlink_to(outside, target_is_directory=True)
    with pytest.raises(HTTPClientError) as error:
        await _post(jp_fetch, {"path": "course/gpu"})
    assert error.value.code == 409
    assert error.value.response is not None
    message = json.loads(error.value.response.body)["message"]
    assert message == "course is a symbolic link, not a folder (never followed)"
    assert list(outside.iterdir()) == []


async def test_a_folder_name_too_long_is_a_clear_400(jp_fetch: Fetch, jp_root_dir: Path) -> None:
    with pytest.raises(HTTPClientError) as error:
        await _post(jp_fetch, {"path": "t" * 300})
    assert error.value.code == 400
    assert error.value.response is not None
    message = json.loads(error.value.response.body)["message"]
    assert message.startswith("a folder name is at most 255 bytes; 'tttt")
    assert message.endswith("has 300: choose a shorter one")
    assert list(jp_root_dir.iterdir()) == []
