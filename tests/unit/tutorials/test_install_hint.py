"""Install hints name the source jupyter-gpu was installed from, never a package index it is not on.

pip's own record (``direct_url.json``, PEP 610) is read: this environment's real one (an editable
install of the checkout, as ``.ci/setup`` makes), and one that pip writes here for a wheel file.
"""

from __future__ import annotations

import importlib.metadata
import json
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from jupyter_gpu.tutorials.install_hint import install_hint, installed_direct_url, pip_command
from jupyter_gpu.tutorials.requirements import MissingRequirementsError, check_requirements

REGISTRY_HINT = 'pip install "jupyter-gpu[tutorials]"'


@pytest.mark.parametrize(
    ("direct_url", "command"),
    [
        (
            {"url": "file:///home/me/jupyter-gpu", "dir_info": {"editable": True}},
            'pip install -e "/home/me/jupyter-gpu[tutorials]"',
        ),
        (
            {"url": "file:///home/me/jupyter%20gpu", "dir_info": {}},
            'pip install "/home/me/jupyter gpu[tutorials]"',
        ),
        (
            {
                "url": "file:///tmp/dist/jupyter_gpu-0.1.0-py3-none-any.whl",
                "archive_info": {"hashes": {"sha256": "00"}},
            },
            'pip install "/tmp/dist/jupyter_gpu-0.1.0-py3-none-any.whl[tutorials]"',
        ),
        (
            {"url": "https://example.org/jupyter_gpu-0.1.0-py3-none-any.whl", "archive_info": {}},
            'pip install "jupyter-gpu[tutorials] @ '
            'https://example.org/jupyter_gpu-0.1.0-py3-none-any.whl"',
        ),
        (
            {
                "url": "https://example.org/team/jupyter-gpu.git",
                "vcs_info": {"vcs": "git", "commit_id": "abc123"},
            },
            'pip install "jupyter-gpu[tutorials] @ git+https://example.org/team/jupyter-gpu.git@abc123"',
        ),
        (None, REGISTRY_HINT),  # from an index: the name is then right
    ],
)
def test_the_command_follows_pips_record(
    direct_url: dict[str, object] | None, command: str
) -> None:
    assert pip_command("tutorials", direct_url) == command


def test_this_environments_install_gets_its_own_command() -> None:
    recorded = installed_direct_url()
    command, note = install_hint("tutorials")
    assert command == pip_command("tutorials", recorded)
    dir_info = (recorded or {}).get("dir_info")
    if not (isinstance(dir_info, dict) and dir_info.get("editable")):
        return  # installed another way (a GPU machine's wheels): the cases above cover it
    # .ci/setup's `pip install -e .`: the checkout's own command, as pip recorded it.
    assert command.startswith('pip install -e "')
    assert command.endswith('[tutorials]"')
    checkout = Path(command.removeprefix('pip install -e "').removesuffix('[tutorials]"'))
    assert 'name = "jupyter-gpu"' in (checkout / "pyproject.toml").read_text()
    assert note == ""


def _tiny_wheel(folder: Path) -> Path:
    """A wheel of a distribution named jupyter-gpu that holds only its metadata."""
    wheel = folder / "jupyter_gpu-0.0.1-py3-none-any.whl"
    info = "jupyter_gpu-0.0.1.dist-info"
    files = {
        f"{info}/METADATA": "Metadata-Version: 2.1\nName: jupyter-gpu\nVersion: 0.0.1\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n",
    }
    with zipfile.ZipFile(wheel, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
        archive.writestr(f"{info}/RECORD", "".join(f"{n},,\n" for n in [*files, f"{info}/RECORD"]))
    return wheel


@pytest.mark.slow
def test_a_wheel_install_gets_the_wheels_name_and_a_note_once_it_is_gone(tmp_path: Path) -> None:
    wheel = _tiny_wheel(tmp_path)
    target = tmp_path / "site"
    pip = [sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--quiet"]
    subprocess.run([*pip, "--target", str(target), str(wheel)], check=True, capture_output=True)
    (dist,) = importlib.metadata.distributions(path=[str(target)])
    assert json.loads(dist.read_text("direct_url.json") or "{}")["url"] == wheel.as_uri()
    assert install_hint("tutorials", dist) == (f'pip install "{wheel}[tutorials]"', "")
    wheel.unlink()  # as an image build does after installing it
    command, note = install_hint("tutorials", dist)
    assert command == f'pip install "{wheel}[tutorials]"'
    assert note == f"jupyter-gpu was installed from {wheel}, which is no longer there."


def test_the_notebooks_first_cell_says_the_command_for_this_install() -> None:
    with pytest.raises(MissingRequirementsError) as missing:
        check_requirements("IPython", "a_module_nobody_has")
    message = str(missing.value)
    command, _ = install_hint("tutorials")
    assert f"Run `%{command}` in a cell" in message
    assert REGISTRY_HINT not in message  # the package is on no index


ROOT = Path(__file__).resolve().parents[3]


def _documents() -> list[str]:
    """What a user reads: the Markdown files and the notebooks (git-tracked), not the history."""
    listed = subprocess.run(
        ["git", "ls-files", "*.md", "*.ipynb"], cwd=ROOT, capture_output=True, text=True
    )
    if listed.returncode != 0:
        pytest.skip("not a git checkout")
    return [name for name in listed.stdout.split() if name != "CHANGELOG.md"]


def test_no_document_installs_jupyter_gpu_from_a_package_index() -> None:
    # `pip install "jupyter-gpu[tutorials]"` looks the name up on an index, where it is not.
    # (In a notebook's JSON the quote is escaped: \".)
    index_install = re.compile(r"pip install (?:-U |--upgrade )?\\?[\"']?jupyter[-_]gpu\b")
    named = [
        f"{name}: {match.group(0)}"
        for name in _documents()
        for match in index_install.finditer((ROOT / name).read_text(encoding="utf-8"))
    ]
    assert named == []
