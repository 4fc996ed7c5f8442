"""The compile fixes: ``torch.compile`` of the model, in the modes that fit what was measured.

- ``default``: inductor fuses the elementwise chains between the matmuls (torch.compile's docs).
- ``reduce-overhead``: CUDA graphs as well, which replay a compiled graph's kernels without
  launching each one; tried only where the profile says the step is launch-bound (the GPU idle
  30 % or more with kernels under 20 µs on average: ``%%profile``'s own rule).
- ``max-autotune-no-cudagraphs``: inductor times candidate kernels (Triton templates against
  cuBLAS) for every matmul; its compile takes several times the default's, so it is tried only
  where the budget left holds :data:`AUTOTUNE_FACTOR` times the default's measured compile.

The modes are alternatives: each is timed on top of the fixes kept before it (``kept.py``), none
on top of another, and the best kept one is stacked. The compile happens at the first call,
timed apart (its own figure, "compiled in 21.3 s"), with ``%compile``'s watch on it (graphs,
graph breaks with their lines, recompiles), and with the kept fixes on: the program compiled is
the one the rounds time (autocast, channels_last weights), not the step as it was. The speedup
is the steady one, from the interleaved rounds after it. While tried, the notebook's model name is
bound to the compiled wrapper, so a step that calls the model by its name runs compiled; the
eager model is put back afterwards, and the wrapper's hooks with the rest
(``RepeatedRuns.save_also``).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from jupyter_gpu.magics.compile.dynamo_watch import CompileReport, DynamoWatch
from jupyter_gpu.magics.shell.cell import cell_filenames
from jupyter_gpu.measure import fmt_seconds, synchronize

from .fixes import Fix

if TYPE_CHECKING:
    from .evidence import Evidence
    from .fixes import TuneSession

#: max-autotune-no-cudagraphs is tried when the budget left is this many default compiles:
#: notebook 07's final shape took 184.4 s to its first max-autotune step against 5.8 s in the
#: default mode on the H200 at the emulated 16gb tier, about 32 times as long
#: (benchmarks/RESULTS.md, "Capstone at the 16gb tier, emulated on one H200", 2026-12-03). The
#: factor was set after GPU run 22 of 2026-12-02 at full size (187.3 s against 7.1 s, 26 times,
#: in RESULTS.md as of commit 8b0e53f, which a later run replaced): 30 lies between the two.
AUTOTUNE_FACTOR = 30
#: The budget left below which no compile is started (seconds): on the H200 a first compiled
#: step took 15.6 s (notebook 01's GPT, 2026-12-04) to 41.5 s (%tune's ResNet-50 target,
#: 2026-12-05, eleventh session): benchmarks/RESULTS.md.
MIN_COMPILE_S = 20.0


class Compile(Fix):
    """``torch.compile(model, mode=...)`` (see the module doc)."""

    family = "compile"
    order = 90
    alternative = True
    warmup = 3  # CUDA graphs record on the second or third call

    def __init__(self, mode: str = "default") -> None:
        self.mode = mode
        self.key = "compile"
        self.name = "torch.compile" if mode == "default" else f"torch.compile {mode}"
        self.needs_gpu = mode != "default"
        self.compiled: Any = None
        self.compile_s: float | None = None
        self.report: CompileReport | None = None

    def why_not(self, ev: Evidence) -> str | None:
        if self.mode == "reduce-overhead":
            if not ev.cuda:
                return "CUDA graphs replay GPU kernels: reduce-overhead needs a GPU"
            if not ev.launch_bound:
                idle, mean = ev.gpu_idle, ev.mean_kernel_s
                return (
                    "the step is not launch-bound (GPU idle "
                    f"{'n/a' if idle is None else f'{idle:.0%}'}, kernels "
                    f"{'n/a' if mean is None else fmt_seconds(mean)} on average; the rule: "
                    "idle 30 % or more with kernels under 20 µs)"
                )
        if self.mode == "max-autotune-no-cudagraphs" and not ev.cuda:
            return "max-autotune times GPU kernels (Triton templates against cuBLAS): needs a GPU"
        return None

    def expected_compile_s(self, default_compile_s: float | None) -> float | None:
        """About how long its compile takes (seconds; ``None``: it cannot be sized yet).

        A default compile measured already sizes the others; max-autotune's is
        ``AUTOTUNE_FACTOR`` times the default's, and unsized until that is measured.
        """
        measured = default_compile_s is not None and default_compile_s > MIN_COMPILE_S
        if self.mode == "max-autotune-no-cudagraphs":
            return AUTOTUNE_FACTOR * default_compile_s if default_compile_s is not None else None
        return default_compile_s if measured else MIN_COMPILE_S

    def budget_note(
        self, left_s: float, default_compile_s: float | None, comparison_s: float = 0.0
    ) -> str | None:
        """Why the budget left does not allow this compile and its comparison (``None``: it does).

        ``comparison_s``: what its rounds need once compiled, estimated as for any fix (on top of
        a kept loader, blocks of whole epochs); a compile that fits but whose rounds do not would
        overrun the budget. A default compile measured already sizes the other modes' compiles.
        """
        then = f" and the {comparison_s:.0f} s its comparison needs" if comparison_s >= 1 else ""
        if default_compile_s is not None and default_compile_s > MIN_COMPILE_S:
            compile_s, what = default_compile_s, "the default compile took"
        else:
            compile_s, what = MIN_COMPILE_S, "a compile needs"
        if left_s < compile_s + comparison_s:
            return (
                f"not reached: {max(0.0, left_s):.0f} s of the budget left, under the "
                f"{compile_s:.0f} s {what}{then}"
            )
        if self.mode == "max-autotune-no-cudagraphs":
            need = self.expected_compile_s(default_compile_s)
            if need is None:
                return "the default compile was not measured, so its autotuning cannot be sized"
            if left_s < need + comparison_s:
                return (
                    f"not reached: {left_s:.0f} s of the budget left, under {AUTOTUNE_FACTOR}x "
                    f"the default compile's {default_compile_s:.1f} s{then}; --budget longer "
                    "tries it"
                )
        return None

    def prepare(self, s: TuneSession) -> None:
        if self.compiled is not None:
            return
        import torch  # loaded already: the magic imported it

        options: dict[str, Any] = {} if self.mode == "default" else {"mode": self.mode}
        self.compiled = torch.compile(s.target.model, **options)
        assert s.runs is not None
        s.runs.save_also(s.target.model_name, self.compiled)

    def measure_more(self, s: TuneSession) -> list[str]:
        """The first call with the kept fixes on, timed apart, with the compile watched."""
        if self.compile_s is not None:
            return []
        variant = s.variant([*s.kept.fixes, self])
        watch = DynamoWatch()
        device = s.target.device
        with variant.entered():
            synchronize(device)
            watch.start()
            started = time.perf_counter()
            try:
                variant.run()
                synchronize(device)
            finally:
                self.compile_s = time.perf_counter() - started
                self.report = watch.stop(cell_filenames(s.shell))
        report = self.report
        detail = ""
        if report is not None:
            detail = (
                f": {report.graphs} graph(s), {report.graph_break_count} graph break(s), "
                f"{len(report.recompiles)} recompile(s)"
            )
        without = s.kept.first or s.base_first
        beside = (
            f" (a first step without it: {fmt_seconds(without.first_s)})"
            if without is not None
            else ""
        )
        return [
            f"compile time, apart from the steady gain: the first compiled step took "
            f"{fmt_seconds(self.compile_s)}{beside}{detail}"
        ]

    @contextlib.contextmanager
    def applied(self, s: TuneSession) -> Iterator[None]:
        with s.rebound(s.target.model_name, self.compiled):
            yield

    def code(self, s: TuneSession) -> list[str]:
        mode = "" if self.mode == "default" else f" --mode {self.mode}"
        return [f"%compile {s.target.model_name}{mode}  # model = torch.compile(model) in a script"]

    def apply(self, s: TuneSession) -> str:
        name = s.target.model_name
        mode = "" if self.mode == "default" else f" --mode {self.mode}"
        s.shell.run_line_magic("compile", f"{name}{mode} -q")
        return f"%compile {name}{mode}: {name} is the compiled model (the first call compiles)"

    def release(self, s: TuneSession) -> None:
        self.compiled = None
