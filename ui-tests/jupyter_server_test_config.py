"""Jupyter server configuration for the browser tests.

Each Playwright project starts its own server from this file, choosing the port, the base URL,
the token and the jupyter-gpu backend on the command line (see playwright.config.js). Settings,
workspaces and files live in fresh temporary folders, so a run never touches the user's own.
"""

import atexit
import json
from pathlib import Path
from tempfile import mkdtemp

from jupyter_gpu.compile_cache import remove_folder_made_here


def _scratch(prefix: str) -> str:
    """A fresh folder, removed when the server exits.

    Playwright stops the server with SIGTERM, which Jupyter turns into a clean exit, so the
    ``atexit`` hook runs; every run left three such folders in /tmp before.
    """
    folder = mkdtemp(prefix=prefix)
    made = Path(folder).stat()
    atexit.register(remove_folder_made_here, folder, (made.st_dev, made.st_ino))
    return folder


c.ServerApp.open_browser = False  # noqa: F821 (c is the config object Jupyter passes in)
c.ServerApp.port_retries = 0  # noqa: F821
c.ServerApp.root_dir = _scratch("jupyter-gpu-ui-root-")  # noqa: F821
c.LabApp.user_settings_dir = _scratch("jupyter-gpu-ui-settings-")  # noqa: F821
c.LabApp.workspaces_dir = _scratch("jupyter-gpu-ui-workspaces-")  # noqa: F821
c.LabApp.news_url = None  # noqa: F821
c.LabApp.check_for_updates_class = "jupyterlab.NeverCheckForUpdate"  # noqa: F821

# No "get notified about Jupyter news?" toast over the screenshots.
_notification = Path(c.LabApp.user_settings_dir) / "@jupyterlab" / "apputils-extension"  # noqa: F821
_notification.mkdir(parents=True)
(_notification / "notification.jupyterlab-settings").write_text(
    json.dumps({"fetchNews": "false", "checkForUpdates": False})
)
c.LabApp.expose_app_in_browser = True  # noqa: F821 (the tests drive commands through it)
