"""``%compile``: torch.compile in place, its per-cell report and ``--bench`` (docs/magics.md)."""

from .magic import CompileMagics
from .results import BenchResult, CompileResult

__all__ = ["BenchResult", "CompileMagics", "CompileResult"]
