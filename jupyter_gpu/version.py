"""The package's version: the build writes ``_version.py`` (from ``package.json``).

Its own module, on the ground floor, so that the server can say its version without importing
the package's face (``jupyter_gpu/__init__.py``), which loads the server on demand.
"""

from __future__ import annotations

try:
    from ._version import __version__
except ImportError:  # a source tree that was never built
    __version__ = "0.0.0+unknown"

__all__ = ["__version__"]
