"""``%compile``: torch.compile in place, its per-cell report and ``--bench`` (docs/magics.md)."""

from .magic import BenchResult, CompileMagics, CompileResult

__all__ = ["BenchResult", "CompileMagics", "CompileResult"]
