"""Moved to ``jupyter_gpu.compile_cache``: kept for notebook 06, which imports these two names.

Import from ``jupyter_gpu.compile_cache`` instead; this module goes once the notebook does.
"""

from __future__ import annotations

from jupyter_gpu.compile_cache.locate import inductor_cache_dir, triton_cache_dir

__all__ = ["inductor_cache_dir", "triton_cache_dir"]
