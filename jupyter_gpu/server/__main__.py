"""``python -m jupyter_gpu.server``: a Jupyter server with this extension, launched by itself.

Mostly useful as ``python -m jupyter_gpu.server --help-all``, which lists the ``JupyterGpu``
options with their help (``jupyter server --help-all`` prints its help before it loads any
extension, so it cannot).
"""

from jupyter_gpu.server.app import JupyterGpuApp

if __name__ == "__main__":
    JupyterGpuApp.launch_instance()  # type: ignore[no-untyped-call]  # jupyter_server leaves it unannotated
