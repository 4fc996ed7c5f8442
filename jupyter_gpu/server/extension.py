"""Wire the sampler and the handlers into a running Jupyter server."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from jupyter_server.serverapp import ServerApp


def load_server_extension(server_app: ServerApp) -> None:
    """Placeholder until the API lands: say that the extension is loaded."""
    server_app.log.info("jupyter_gpu server extension loaded")
