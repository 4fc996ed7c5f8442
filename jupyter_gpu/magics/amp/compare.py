"""``%amp compare``: one training step under fp32, tf32, bf16 and fp16, side by side.

Each mode starts from the same state (model, optimizer, gradients, RNG), so the losses are
comparable; the first step's loss is the one compared, then more runs give a steady-state time.
Afterwards the state is put back, so the comparison leaves training where it was.
"""

from __future__ import annotations

import argparse
import copy
import math
from dataclasses import dataclass, field
from typing import Any

from IPython.core.error import UsageError

from jupyter_gpu.magics.common.args import compile_expression, lookup, type_name
from jupyter_gpu.magics.common.lazy_torch import describe_device, loss_value, torch_module
from jupyter_gpu.magics.common.render import Cell, Table, fmt_bytes, html_block, html_note, publish
from jupyter_gpu.measure import Timing, fmt_seconds, time_steady

from . import precision as prec

MODES = ("fp32", "tf32", "bf16", "fp16")


@dataclass(frozen=True)
class AmpModeResult:
    """One mode's figures for ``%amp compare``.

    Median step time (s), step peak memory (bytes above the memory allocated before the step;
    ``None`` on CPU), the first step's loss and its distance from fp32's.
    """

    mode: str
    time_s: float | None
    runs: int
    peak_bytes: int | None
    loss: float | None
    loss_diff: float | None
    error: str | None = None


@dataclass
class AmpComparison:
    """What ``%amp compare -o`` returns."""

    expr: str
    device: str
    results: list[AmpModeResult] = field(default_factory=list)
    restored: list[str] = field(default_factory=list)

    def __repr__(self) -> str:
        times = ", ".join(f"{r.mode} {fmt_seconds(r.time_s)}" for r in self.results)
        return f"<AmpComparison {self.expr} on {self.device}: {times}>"

    def speedup(self, mode: str) -> float | None:
        """fp32 time divided by ``mode``'s time (``None`` if either is missing)."""
        times = {r.mode: r.time_s for r in self.results}
        base, this = times.get("fp32"), times.get(mode)
        if base is None or this is None or this <= 0:
            return None
        return base / this


class TrainingState:
    """A copy of the model's and optimizer's state, their gradients and the RNG state."""

    def __init__(self, model: Any, optimizer: Any) -> None:
        torch = torch_module()
        self.model = model
        self.optimizer = optimizer
        self.model_state = copy.deepcopy(model.state_dict()) if model is not None else None
        self.grads = (
            [None if p.grad is None else p.grad.detach().clone() for p in model.parameters()]
            if model is not None
            else None
        )
        self.optim_state = copy.deepcopy(optimizer.state_dict()) if optimizer is not None else None
        self.cpu_rng = torch.get_rng_state()
        self.cuda_rng = (
            torch.cuda.get_rng_state_all()
            if torch.cuda.is_available() and torch.cuda.is_initialized()
            else None
        )

    def restore(self) -> None:
        torch = torch_module()
        with torch.no_grad():
            if self.model is not None and self.model_state is not None:
                self.model.load_state_dict(self.model_state)
                for p, g in zip(self.model.parameters(), self.grads or [], strict=False):
                    p.grad = None if g is None else g.clone()
            if self.optimizer is not None and self.optim_state is not None:
                # A copy each time: load_state_dict may adopt our tensors (the step counts),
                # which the next steps would then update in place.
                self.optimizer.load_state_dict(copy.deepcopy(self.optim_state))
        torch.set_rng_state(self.cpu_rng)
        if self.cuda_rng is not None:
            torch.cuda.set_rng_state_all(self.cuda_rng)


def _parse_modes(text: str) -> list[str]:
    modes = [m.strip().lower() for m in text.split(",") if m.strip()]
    bad = [m for m in modes if m not in MODES]
    if bad or not modes:
        raise UsageError(
            f"--modes {text}: use a comma-separated subset of {','.join(MODES)}, "
            "e.g. --modes fp32,bf16."
        )
    if "fp32" in modes:  # fp32 first: it is the reference for the loss difference
        modes.remove("fp32")
    return ["fp32", *modes]


def compare_from_args(shell: Any, args: argparse.Namespace) -> AmpComparison | None:
    """Run ``%amp compare`` from parsed magic arguments (see ``AmpMagics.amp``)."""
    if len(args.args) != 1:
        raise UsageError(
            '%amp compare takes one expression in quotes, e.g. %amp compare "train_step()" '
            "--model model --optimizer opt."
        )
    torch = torch_module()
    expr = args.args[0]
    code = compile_expression(shell, expr, "compare")
    modes = _parse_modes(args.modes)
    model = lookup(shell.user_ns, args.model, "--model") if args.model else None
    if model is not None and not isinstance(model, torch.nn.Module):
        raise UsageError(f"--model {args.model} is a {type_name(model)}, not a torch.nn.Module.")
    optimizer = lookup(shell.user_ns, args.optimizer, "--optimizer") if args.optimizer else None
    if optimizer is not None and not isinstance(optimizer, torch.optim.Optimizer):
        raise UsageError(
            f"--optimizer {args.optimizer} is a {type_name(optimizer)}, "
            "not a torch.optim.Optimizer."
        )
    device = prec.resolve_device(args.device)
    for mode in modes:
        if mode in ("bf16", "fp16"):
            prec.make_autocast(device, mode)  # UsageError now rather than halfway through

    comparison = AmpComparison(expr, device)
    state = TrainingState(model, optimizer)
    comparison.restored = [n for n in (args.model, args.optimizer) if n]

    def step() -> Any:
        return eval(code, shell.user_ns)  # noqa: S307  # the user's own expression

    try:
        _warm_up(step, device)
        for mode in modes:
            result = _run_mode(mode, device, step, state, args.runs, comparison.results)
            if mode == "fp32" and result.error is not None:
                raise UsageError(
                    f"{expr} failed in fp32, before any mixed precision ({result.error}): "
                    "fix the step (run it in a cell to see the traceback), then compare."
                )
            comparison.results.append(result)
    finally:
        state.restore()
    if not args.quiet:
        _show(comparison)
    return comparison if args.output else None


def _warm_up(step: Any, device: str) -> None:
    """Run one step before any timing; its state is restored by the first mode.

    First-call costs (allocator growth, cuBLAS handles, kernel selection) would otherwise land
    on whichever mode runs first.
    """
    torch = torch_module()
    try:
        with prec.precision_mode("fp32", device):
            step()
        if device == "cuda":
            torch.cuda.synchronize()
    except Exception:  # noqa: BLE001, S110  # the fp32 run reports the step's error properly
        pass


def _run_mode(
    mode: str,
    device: str,
    step: Any,
    state: TrainingState,
    runs: int | None,
    previous: list[AmpModeResult],
) -> AmpModeResult:
    torch = torch_module()
    cuda = device == "cuda"
    state.restore()
    run = prec.step_in_mode(step, mode, device)
    try:
        with prec.precision_mode(mode, device):
            if cuda:
                torch.cuda.synchronize()
                base = torch.cuda.memory_allocated()
                torch.cuda.reset_peak_memory_stats()
            first = run()
            loss = loss_value(first)
            if cuda:
                torch.cuda.synchronize()
                peak: int | None = int(torch.cuda.max_memory_allocated() - base)
            else:
                peak = None
            timing: Timing = time_steady(run, warmup=1, runs=runs, min_runs=3, max_runs=50)
    except Exception as exc:  # noqa: BLE001  # one mode failing (fp16 on CPU, say) is a result
        return AmpModeResult(mode, None, 0, None, None, None, f"{type(exc).__name__}: {exc}")
    reference = next((r.loss for r in previous if r.mode == "fp32"), None)
    diff = None
    if loss is not None and reference is not None and mode != "fp32":
        diff = abs(loss - reference)
    return AmpModeResult(mode, timing.median_s, timing.runs, peak, loss, diff)


def small_step_note(comparison: AmpComparison) -> str | None:
    """A sentence for when autocast was no faster than float32 on CUDA (``None`` otherwise).

    Reduced precision speeds up matmul arithmetic; in a step too small for that to dominate,
    per-op costs decide, and the table alone would suggest bf16 is slow in general.
    """
    if comparison.device != "cuda":
        return None  # on CPU, bf16 speed depends on the processor's support for it
    timed = {r.mode: r.time_s for r in comparison.results if r.error is None and r.time_s}
    reference = min(
        (m for m in ("fp32", "tf32") if m in timed), key=timed.__getitem__, default=None
    )
    fastest = min((m for m in ("bf16", "fp16") if m in timed), key=timed.__getitem__, default=None)
    if reference is None or fastest is None or timed[fastest] < 0.9 * timed[reference]:
        return None
    return (
        f"{fastest} is not faster than {reference} here ({fmt_seconds(timed[fastest])} vs "
        f"{fmt_seconds(timed[reference])} a step): at this size the step's time goes to per-op "
        "costs (kernel launches, autocast's casts) more than to the matmul arithmetic that "
        "reduced precision speeds up. Larger batches or layers usually change that; %%profile "
        "shows where the step's time goes."
    )


def _show(comparison: AmpComparison) -> None:
    table = Table(
        headers=["mode", "time", "vs fp32", "step peak memory", "loss", "|loss - fp32|"],
        numeric=[False, True, True, True, True, True],
        title=f"amp compare {comparison.expr}  ({describe_device(comparison.device)})",
    )
    for r in comparison.results:
        if r.error is not None:
            table.rows.append([r.mode, "failed", "", "", r.error[:60], ""])
            continue
        speed = comparison.speedup(r.mode)
        loss = "n/a" if r.loss is None else f"{r.loss:.6g}"
        diff = "-" if r.mode == "fp32" else ("n/a" if r.loss_diff is None else f"{r.loss_diff:.2g}")
        table.rows.append(
            [
                r.mode,
                Cell(f"{fmt_seconds(r.time_s)} ({r.runs} runs)", r.time_s),
                Cell("n/a" if speed is None else f"{speed:.2f}x", speed),
                Cell(fmt_bytes(r.peak_bytes), r.peak_bytes),
                Cell(loss, r.loss),
                Cell(diff, r.loss_diff),
            ]
        )
    synced = ", CUDA synchronised" if comparison.device == "cuda" else ""
    notes = [
        f"time: median of the runs after two warm-up steps{synced}; loss: that of the first "
        "step, from the same starting state in every mode."
    ]
    if comparison.device == "cpu":
        notes.append(
            "CPU: no peak-memory figure (torch tracks it for CUDA only); TF32 = fp32 here."
        )
    fp32 = next((r for r in comparison.results if r.mode == "fp32"), None)
    if fp32 is not None and fp32.loss is None:
        notes.append("The step returned no loss: make it return the loss to compare losses.")
    small = small_step_note(comparison)
    if small is not None:
        notes.append(small)
    if any(r.loss is not None and not math.isfinite(r.loss) for r in comparison.results):
        notes.append("A loss is inf/nan: that mode overflowed (fp16 needs a GradScaler).")
    if comparison.restored:
        notes.append(f"Restored afterwards: {', '.join(comparison.restored)} (and the RNG state).")
    else:
        notes.append(
            "Nothing named with --model/--optimizer: if the step trains, its weights moved "
            f"{sum(r.runs + 2 for r in comparison.results)} steps. Pass --model and --optimizer "
            "to have them restored."
        )
    text = table.text() + "\n" + "\n".join(notes)
    warn = ("Nothing", "A loss")
    publish(
        text, html_block([table.html(), *(html_note(n, warn=n.startswith(warn)) for n in notes)])
    )
