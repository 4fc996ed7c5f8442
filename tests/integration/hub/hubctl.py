"""A real JupyterHub for the multi-user tests: its package, npm's configurable-http-proxy, a
dummy authenticator and SimpleLocalProcessSpawner, two users on one (fake) shared GPU.

Used by ``test_hub_two_users.py`` and, as a command, by the browser test
(``ui-tests/tests/hub.spec.ts``)::

    python -m tests.integration.hub.hubctl STATE_FILE    # starts, writes STATE_FILE, waits

It starts both users' servers and a kernel for each (notebook ``<user>-train.ipynb``), writes
``{"url", "users", "password"}`` to ``STATE_FILE``, and stops the hub (the proxy and the
single-user servers with it) on SIGTERM or SIGINT.

Why SimpleLocalProcessSpawner (every server as the hub's unix user) rather than
LocalProcessSpawner with two real unix users: on this machine kind the Python interpreter lives
in root's home (mode 700), so a server running as another user could not even start Python
without the test loosening the permissions of root's home. So both servers run as root, where
a uid says nothing about whose a process is (``ProcessAnnotator`` ignores root's uid), and the
privacy rule under test is the process tree: a process is a user's own only if it runs under
that user's server. The uid rule is tested with a real second uid in
``tests/unit/sampling/test_attribution_privacy.py``.

Each server loads the real extension over ``shared_gpu_extension``'s fake NVML, which lists
every Jupyter kernel on this machine as a process on GPU 0, as a real GPU shared by the two
users would.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import psutil

from tests.helpers import free_port, wait_for

ROOT = Path(__file__).resolve().parents[3]
PROXY_DIR = Path(__file__).with_name("proxy")
PROXY_BIN = PROXY_DIR / "node_modules" / ".bin" / "configurable-http-proxy"
USERS = ("alice", "bob")
PASSWORD = "gpu-test-password"  # the dummy authenticator's shared password: tests only
SERVICE_TOKEN = "hub-test-service-token-0123456789"  # the test driver's admin token
START_TIMEOUT_S = 180.0


def proxy_command() -> str | None:
    """configurable-http-proxy from ``proxy/node_modules`` (``.ci/setup``), else on PATH."""
    if PROXY_BIN.exists():
        return str(PROXY_BIN)
    return shutil.which("configurable-http-proxy")


def hub_config(work: Path, port: int, hub_port: int, api_port: int, proxy: str) -> str:
    """The hub's ``jupyterhub_config.py``."""
    singleuser_args = [
        "--allow-root",
        "--ServerApp.jpserver_extensions="
        "{'jupyter_gpu': False, 'tests.integration.hub.shared_gpu_extension': True}",
        "--JupyterGpu.backend=nvml",
        "--JupyterGpu.interval_s=0.5",
        "--JupyterGpu.kernel_map_interval_s=1",
        # The browser test waits for the restored layout (window.jupyterapp), in a workspace
        # of this run only: every user here is root, whose own workspaces other runs wrote.
        "--LabApp.expose_app_in_browser=True",
        f"--LabApp.workspaces_dir={work / 'workspaces'}",
    ]
    return f"""
c = get_config()  # noqa: F821 (jupyterhub's config loader provides it)
c.JupyterHub.ip = "127.0.0.1"
c.JupyterHub.port = {port}
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = {hub_port}
c.JupyterHub.db_url = "sqlite:///{work / "hub.sqlite"}"
c.JupyterHub.cookie_secret_file = "{work / "cookie_secret"}"
c.JupyterHub.pid_file = "{work / "hub.pid"}"
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{api_port}"
c.ConfigurableHTTPProxy.command = [{proxy!r}]
c.ConfigurableHTTPProxy.pid_file = "{work / "proxy.pid"}"
c.JupyterHub.authenticator_class = "dummy"
c.DummyAuthenticator.password = {PASSWORD!r}
c.Authenticator.allowed_users = {set(USERS)!r}
c.JupyterHub.spawner_class = "simple"
c.Spawner.cmd = [{sys.executable!r}, "-m", "jupyterhub.singleuser"]
c.Spawner.args = {singleuser_args!r}
c.Spawner.default_url = "/lab"
c.Spawner.notebook_dir = "{work}/home/{{username}}"
c.Spawner.environment = {{"PYTHONPATH": {str(ROOT)!r}, "JUPYTER_GPU_METRICS_TOKEN": ""}}
c.Spawner.start_timeout = {int(START_TIMEOUT_S)}
c.Spawner.http_timeout = {int(START_TIMEOUT_S)}
c.JupyterHub.services = [{{"name": "gpu-tests", "api_token": {SERVICE_TOKEN!r}}}]
c.JupyterHub.load_roles = [
    {{
        "name": "gpu-tests",
        "scopes": ["admin:users", "admin:servers", "tokens", "read:users"],
        "services": ["gpu-tests"],
    }}
]
c.JupyterHub.log_level = "INFO"
"""


class Hub:
    """A running JupyterHub (subprocess) and helpers to drive it through its REST API.

    Args:
        work: a directory for its database, secrets, logs and the users' homes.
    """

    def __init__(self, work: Path) -> None:
        self.work = work
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = work / "jupyterhub.log"
        self.process: subprocess.Popen[bytes] | None = None

    # -- lifecycle

    def start(self) -> None:
        """Write the config, start the hub, wait until its API answers (or raise, with the log)."""
        proxy = proxy_command()
        if proxy is None:
            raise RuntimeError(
                "configurable-http-proxy is not installed: run .ci/setup (npm ci in "
                f"{PROXY_DIR.relative_to(ROOT)})"
            )
        for user in USERS:
            (self.work / "home" / user).mkdir(parents=True, exist_ok=True)
        config = self.work / "jupyterhub_config.py"
        config.write_text(hub_config(self.work, self.port, free_port(), free_port(), proxy))
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "jupyterhub", "-f", str(config)],
                cwd=self.work,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,  # its own process group: stopped as one
            )
        # (HTTPError is an OSError: a hub that answers but is not ready yet.)
        wait_for(
            lambda: self.api("GET", "") or True,
            lambda: "JupyterHub did not start:\n" + self.log(),
            timeout_s=START_TIMEOUT_S,
            poll_s=0.5,
            retry_on=(OSError,),
            process=self.process,
        )

    def stop(self) -> None:
        """SIGTERM the hub (it stops the proxy and servers), then end any of its leftovers."""
        process = self.process
        if process is None:
            return
        self.process = None
        try:
            tree = psutil.Process(process.pid).children(recursive=True)
        except psutil.Error:
            tree = []
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        _gone, alive = psutil.wait_procs(tree, timeout=20)
        for leftover in alive:  # only processes this hub started
            with contextlib.suppress(psutil.Error):
                leftover.kill()

    def log(self) -> str:
        """The hub's log (its last 6000 characters)."""
        try:
            return self.log_path.read_text(errors="replace")[-6000:]
        except OSError:
            return ""

    # -- HTTP

    def request(
        self,
        method: str,
        path: str,
        token: str | None = None,
        body: dict[str, Any] | None = None,
        timeout: float = 60.0,
    ) -> tuple[int, bytes]:
        """``method`` on ``self.url + path``: the status and body (HTTP errors included)."""
        headers = {"Content-Type": "application/json"}
        if token:
            headers["Authorization"] = f"token {token}"
        data = json.dumps(body).encode() if body is not None else None
        if data is None and method in ("POST", "PUT", "PATCH"):
            data = b"{}"
        req = urllib.request.Request(self.url + path, data=data, headers=headers, method=method)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as err:
            return err.code, err.read()

    def api(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        """The hub's REST API as the test service (raises ``HTTPError`` on an error status).

        The error carries the hub's log: its body says only "Internal Server Error" on a 500 (a
        spawn that failed under load, once, in the browser tests), and the log goes with the
        hub's folder when it stops.
        """
        status, data = self.request(method, "/hub/api/" + path, SERVICE_TOKEN, body)
        if status >= 400:
            raise urllib.error.HTTPError(
                self.url + path,
                status,
                f"{data.decode(errors='replace')}\nthe hub's log:\n{self.log()}",
                None,
                None,  # type: ignore[arg-type]  # urllib's hdrs
            )
        return json.loads(data) if data else None

    def start_server(self, user: str) -> str:
        """Start ``user``'s server (if not running) and wait until it is ready; its URL path."""
        self.api("POST", f"users/{user}/server")

        def ready_url() -> str | None:
            server = self.api("GET", f"users/{user}").get("servers", {}).get("")
            return str(server["url"]) if server and server.get("ready") else None

        return wait_for(
            ready_url,
            lambda: f"{user}'s server did not start:\n" + self.log(),
            timeout_s=START_TIMEOUT_S,
            poll_s=0.5,
        )

    def start_kernel(self, user: str, prefix: str, token: str) -> dict[str, Any]:
        """A session (and its kernel) for notebook ``<user>-train.ipynb`` on ``user``'s server."""
        status, body = self.request(
            "POST",
            f"{prefix}api/sessions",
            token,
            {"path": f"{user}-train.ipynb", "type": "notebook", "kernel": {"name": "python3"}},
            timeout=120,
        )
        if status != 201:
            raise RuntimeError(f"{user}'s kernel did not start ({status}): {body[:500]!r}")
        session: dict[str, Any] = json.loads(body)
        return session

    def user_token(self, user: str) -> str:
        """A new API token of ``user`` (the user's own permissions: its own server only)."""
        model = self.api("POST", f"users/{user}/tokens", {"note": "gpu tests"})
        return str(model["token"])


def main() -> None:
    """Start a hub with both users' servers, write the state file, wait for SIGTERM."""
    state = Path(sys.argv[1])
    work = Path(tempfile.mkdtemp(prefix="jupyter-gpu-hub-"))
    hub = Hub(work)
    stop = False

    def on_signal(_signum: int, _frame: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        hub.start()
        for user in USERS:
            hub.start_kernel(user, hub.start_server(user), hub.user_token(user))
        state.write_text(json.dumps({"url": hub.url, "users": USERS, "password": PASSWORD}))
        while not stop:
            time.sleep(0.2)
    finally:
        hub.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
