"""The team image's Python environment can torch.compile, checked without docker (no engine here).

What is checked: the Dockerfile installs a C compiler (Triton and Inductor compile at run time),
and the wheel with the extras the image needs (JupyterLab for the entrypoint, the tutorials'
packages) beside docker/requirements.txt; this test environment meets every one of those
requirements, and the base image's torch meets the extras' torch requirement; and this
environment compiles a function on CPU with the image's Inductor cache setting (the session's
real compile, ``torch_caches``, with ``TORCHINDUCTOR_CACHE_DIR`` set). Not run here: docker
itself (building the image, its CUDA torch, a compile on a GPU inside it).
"""

from __future__ import annotations

import importlib.metadata
import re
import shlex
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from tests.compile_cache_reference import Reference

tomllib = pytest.importorskip("tomllib")  # Python 3.11+

ROOT = Path(__file__).resolve().parents[3]
DOCKERFILE = (ROOT / "Dockerfile").read_text()
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def _instructions(keyword: str) -> list[str]:
    """The Dockerfile's ``keyword`` instructions, continuation lines joined, comments dropped."""
    joined = re.sub(r"\\\n\s*", " ", DOCKERFILE)
    lines = [line.strip() for line in joined.splitlines() if not line.lstrip().startswith("#")]
    return [line[len(keyword) + 1 :] for line in lines if line.startswith(keyword + " ")]


def _pip_install_line() -> str:
    (line,) = [run for run in _instructions("RUN") if "pip install" in run]
    return line


def _image_extras() -> list[str]:
    match = re.search(r'"\$\{wheel\}\[([\w,]+)\]"', _pip_install_line())
    assert match, f"the wheel is installed without extras: {_pip_install_line()}"
    return match.group(1).split(",")


def _image_requirements() -> list[Requirement]:
    project = PYPROJECT["project"]
    texts = list(project["dependencies"])
    for extra in _image_extras():
        texts += project["optional-dependencies"][extra]
    requirements_file = ROOT / "docker" / "requirements.txt"
    texts += [
        line.split("#", 1)[0].strip()
        for line in requirements_file.read_text().splitlines()
        if line.split("#", 1)[0].strip()
    ]
    return [Requirement(text) for text in texts]


def test_the_image_installs_a_c_compiler() -> None:
    installs = [
        set(shlex.split(run.split("apt-get install", 1)[1].split("&&", 1)[0]))
        for run in _instructions("RUN")
        if "apt-get install" in run
    ]
    packages = set().union(*installs)
    assert {"gcc", "g++"} <= packages  # Triton's launchers (C), Inductor's CPU code (C++)


def test_the_image_installs_the_wheel_with_jupyterlab_and_the_tutorials_packages() -> None:
    line = _pip_install_line()
    assert "--requirement /tmp/requirements.txt" in line
    assert "COPY docker/requirements.txt /tmp/requirements.txt" in DOCKERFILE
    extras = _image_extras()
    assert set(extras) <= set(PYPROJECT["project"]["optional-dependencies"])
    names = {r.name for r in _image_requirements()}
    # The entrypoint runs `jupyter lab`; the notebooks import these.
    assert {"jupyterlab", "torch", "numpy", "scikit-learn", "tqdm", "jupyterhub"} <= names


def test_this_environment_meets_the_images_python_requirements() -> None:
    # Only the environment .ci/setup makes stands for the image's; a GPU machine's own Python
    # (its CUDA torch, the Jupyter stack carried as wheels) is not meant to.
    if Path(sys.prefix).resolve() != (ROOT / ".venv").resolve():
        pytest.skip(f"not the project's .venv (.ci/setup): {sys.prefix}")
    unmet = []
    for requirement in _image_requirements():
        if requirement.marker is not None and not requirement.marker.evaluate():
            continue
        try:
            installed = importlib.metadata.version(requirement.name)
        except importlib.metadata.PackageNotFoundError:
            unmet.append(f"{requirement} (not installed)")
            continue
        if not requirement.specifier.contains(installed, prereleases=True):
            unmet.append(f"{requirement} (installed {installed})")
    assert unmet == []


def test_the_base_images_torch_meets_the_extras() -> None:
    (arg,) = [a for a in _instructions("ARG") if a.startswith("BASE_IMAGE=")]
    tag = r"BASE_IMAGE=pytorch/pytorch:(\d+\.\d+\.\d+)-cuda[\d.]+-cudnn\d+-runtime"
    match = re.fullmatch(tag, arg)
    assert match, arg
    torch_requirements = [r for r in _image_requirements() if r.name == "torch"]
    assert torch_requirements
    for requirement in torch_requirements:
        assert requirement.specifier.contains(Version(match.group(1))), requirement


def _image_env() -> dict[str, str]:
    (env,) = _instructions("ENV")
    return dict(pair.split("=", 1) for pair in shlex.split(env))


def test_torch_compile_works_with_the_images_cache_settings(torch_caches: Reference) -> None:
    caches = {k: v for k, v in _image_env().items() if k.endswith("_CACHE_DIR")}
    assert set(caches) == {"TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR"}
    assert all(Path(v).is_absolute() for v in caches.values()), caches
    # The compile: torch_caches' "configured" build ran torch.compile (Inductor, C++ for the
    # CPU: it needs the compiler the image installs) in a fresh process of this environment with
    # TORCHINDUCTOR_CACHE_DIR set and TRITON_CACHE_DIR unset (the image's Triton dir matters
    # only on a GPU), and it wrote its cache where told.
    assert any(p.is_file() for p in torch_caches.configured.rglob("*")), "no cache where told"


@pytest.mark.parametrize("where", ["Dockerfile", "docs/deploy.md"])
def test_the_run_line_sizes_dev_shm(where: str) -> None:
    text = (ROOT / where).read_text()
    assert re.search(r"docker run [^\n]*--shm-size=\d+[gG]", text), where


def test_kubespawner_gets_a_memory_backed_dev_shm() -> None:
    text = (ROOT / "docs" / "deploy.md").read_text()
    assert re.search(r"emptyDir: \{medium: Memory, sizeLimit: \d+Gi\}", text)
    assert "mountPath: /dev/shm" in text
