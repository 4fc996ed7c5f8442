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
    #: Where the saved training state was kept: "cuda", "cpu" (host), or "same" (CPU run).
    state_on: str = "same"
    #: The variable held fixed with --batch (``None``: the expression draws its own).
    batch: str | None = None
    notes: list[str] = field(default_factory=list)

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


#: Keep the saved state on the GPU only while it takes at most this share of the memory the
#: GPU has left (the steps still need theirs); on the host, pinned up to this share of the
#: available RAM, pageable above it, and at most the last share.
_GPU_SHARE = 0.4
_PINNED_SHARE = 0.6
_HOST_SHARE = 0.85


def _tensors(value: Any, torch: Any) -> list[Any]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _tensors(v, torch)]
    return []


class TrainingState:
    """A copy of the model's and optimizer's state, their gradients and the RNG state.

    Where the copy lives is decided before copying: on the GPU when it fits well within the
    memory the GPU has left, else on the host (pinned while that fits), so a model sized to the
    GPU does not run out of memory in ``%amp compare``. ``restore`` copies the saved values
    back into the model's and optimizer's own tensors, in place: no second copy on the GPU.

    Raises:
        UsageError: neither the GPU nor the host has room for the copy.
    """

    def __init__(self, model: Any, optimizer: Any) -> None:
        torch = torch_module()
        self.torch = torch
        self.model = model
        self.optimizer = optimizer
        self.gpu_room = self.host_room = 0
        self.optim_devices: dict[tuple[int, str], Any] = {}
        live = self._live_tensors()
        self.saved_bytes = sum(int(t.numel() * t.element_size()) for t in live if t.is_cuda)
        self.where, self.pinned = self._place(self.saved_bytes)
        self.model_state = (
            {k: self._save(v) for k, v in model.state_dict().items()} if model is not None else None
        )
        self.grads = (
            [None if p.grad is None else self._save(p.grad) for p in model.parameters()]
            if model is not None
            else None
        )
        self.optim_state, self.optim_groups = self._save_optimizer()
        if self.where == "cpu":
            torch.cuda.synchronize()  # the non-blocking copies to pinned memory are done
        self.cpu_rng = torch.get_rng_state()
        self.cuda_rng = (
            torch.cuda.get_rng_state_all()
            if torch.cuda.is_available() and torch.cuda.is_initialized()
            else None
        )

    # ---------------------------------------------------------------- saving

    def _live_tensors(self) -> list[Any]:
        torch = self.torch
        out: list[Any] = []
        if self.model is not None:
            out += list(self.model.state_dict().values())
            out += [p.grad for p in self.model.parameters() if p.grad is not None]
        if self.optimizer is not None:
            for state in self.optimizer.state.values():
                out += _tensors(state, torch)
        return out

    def _place(self, nbytes: int) -> tuple[str, bool]:
        """("cuda" or "cpu", pinned): where a copy of ``nbytes`` of GPU tensors fits."""
        torch = self.torch
        if nbytes == 0 or not (torch.cuda.is_available() and torch.cuda.is_initialized()):
            return "same", False
        free, _ = torch.cuda.mem_get_info()
        cached = torch.cuda.memory_reserved() - torch.cuda.memory_allocated()
        self.gpu_room = int(free + cached)
        if nbytes <= _GPU_SHARE * self.gpu_room:
            return "cuda", False
        import psutil

        self.host_room = int(psutil.virtual_memory().available)
        if nbytes <= _PINNED_SHARE * self.host_room:
            return "cpu", True
        if nbytes <= _HOST_SHARE * self.host_room:
            return "cpu", False
        raise UsageError(
            f"%amp compare saves the training state ({fmt_bytes(nbytes)}) to put it back after "
            f"each mode, but neither the GPU ({fmt_bytes(self.gpu_room)} left) nor the host "
            f"({fmt_bytes(self.host_room)} available) has room for it: compare on a smaller "
            "model (fewer layers), then apply the winner to this one."
        )

    def _save(self, t: Any) -> Any:
        t = t.detach()
        if self.where == "cpu" and t.is_cuda:
            copy_ = self.torch.empty(t.shape, dtype=t.dtype, device="cpu", pin_memory=self.pinned)
            copy_.copy_(t, non_blocking=self.pinned)
            return copy_
        return t.clone()

    def _save_optimizer(self) -> tuple[dict[int, dict[str, Any]] | None, list[dict[str, Any]]]:
        opt = self.optimizer
        if opt is None:
            return None, []
        torch = self.torch
        state: dict[int, dict[str, Any]] = {}
        for i, param in enumerate(self._params()):
            if param in opt.state:
                state[i] = {}
                for k, v in opt.state[param].items():
                    if isinstance(v, torch.Tensor):
                        self.optim_devices[(i, k)] = v.device
                        state[i][k] = self._save(v)
                    else:
                        state[i][k] = copy.deepcopy(v)
        groups = [
            {k: copy.deepcopy(v) for k, v in g.items() if k != "params"} for g in opt.param_groups
        ]
        return state, groups

    def _params(self) -> list[Any]:
        return [p for g in self.optimizer.param_groups for p in g["params"]]

    # ---------------------------------------------------------------- restoring

    def restore(self) -> None:
        torch = self.torch
        with torch.no_grad():
            if self.model is not None and self.model_state is not None:
                self.model.load_state_dict(self.model_state)  # copies into the live tensors
                for p, g in zip(self.model.parameters(), self.grads or [], strict=False):
                    if g is None:
                        p.grad = None
                    elif p.grad is not None and p.grad.shape == g.shape:
                        p.grad.copy_(g)
                    else:
                        p.grad = g.to(p.device, copy=True)
            if self.optimizer is not None and self.optim_state is not None:
                self._restore_optimizer()
        torch.set_rng_state(self.cpu_rng)
        if self.cuda_rng is not None:
            torch.cuda.set_rng_state_all(self.cuda_rng)

    def _restore_optimizer(self) -> None:
        torch, opt = self.torch, self.optimizer
        saved = self.optim_state or {}
        for i, param in enumerate(self._params()):
            old = saved.get(i)
            if old is None:
                opt.state.pop(param, None)  # the optimizer had not stepped this parameter
                continue
            live = opt.state.get(param)
            same = live is not None and live.keys() == old.keys()
            new: dict[str, Any] = {}
            for key, value in old.items():
                current = live.get(key) if same and live is not None else None
                if isinstance(value, torch.Tensor):
                    if isinstance(current, torch.Tensor) and current.shape == value.shape:
                        current.copy_(value)  # in place: the optimizer keeps its own tensors
                        new[key] = current
                    else:
                        device = self.optim_devices.get((i, key), value.device)
                        new[key] = value.to(device, copy=True)
                else:
                    new[key] = copy.deepcopy(value)
            opt.state[param] = new
        for group, old_group in zip(opt.param_groups, self.optim_groups, strict=False):
            group.update(copy.deepcopy(old_group))

    def release(self) -> None:
        """Drop the saved copy (and the pinned host memory torch's allocator would keep)."""
        pinned = self.pinned
        self.model_state = self.grads = self.optim_state = None
        if pinned:
            empty = getattr(self.torch._C, "_host_emptyCache", None)
            if empty is not None:
                import gc

                gc.collect()
                empty()

    def describe(self) -> str:
        """Where the saved state was kept, for the report."""
        if self.where == "cpu":
            kind = "pinned host memory" if self.pinned else "host memory"
            return (
                f"The saved training state ({fmt_bytes(self.saved_bytes)}) was kept in {kind}: "
                f"the GPU had {fmt_bytes(self.gpu_room)} left, too little for a copy beside the "
                "steps. Restoring it after each mode costs a host-to-device copy."
            )
        return ""


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

    batch_name = getattr(args, "batch", None)
    batch = lookup(shell.user_ns, batch_name, "--batch") if batch_name else None
    if batch_name and batch_name not in expr:
        raise UsageError(
            f"--batch {batch_name}: the expression {expr} does not use {batch_name}; pass the "
            f'batch to the step, e.g. %amp compare "train_step({batch_name})" --batch '
            f"{batch_name}."
        )

    comparison = AmpComparison(expr, device, batch=batch_name)
    state = TrainingState(model, optimizer)  # UsageError here if there is no room for it
    comparison.state_on = state.where
    comparison.restored = [n for n in (args.model, args.optimizer) if n]
    if state.describe():
        comparison.notes.append(state.describe())

    def step() -> Any:
        return eval(code, shell.user_ns)  # noqa: S307  # the user's own expression

    class _Start:
        """Back to the same start before each mode: state, RNG and (--batch) the batch."""

        @staticmethod
        def restore() -> None:
            state.restore()
            if batch_name:
                shell.user_ns[batch_name] = batch

    try:
        _warm_up(step, device)
        for mode in modes:
            result = _run_mode(mode, device, step, _Start, args.runs, comparison.results)
            if mode == "fp32" and result.error is not None:
                raise UsageError(
                    f"{expr} failed in fp32, before any mixed precision ({result.error}): "
                    "fix the step (run it in a cell to see the traceback), then compare."
                )
            comparison.results.append(result)
    finally:
        _Start.restore()
        state.release()
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
    state: Any,
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
    if comparison.batch:
        notes.append(f"The same batch ({comparison.batch}) in every mode (--batch).")
    else:
        notes.append(
            "The loss column compares like with like only if the expression uses the same batch "
            "in every mode: the RNG is reset per mode, so torch.randn/randint batches repeat, but "
            "next(iterator) draws a new one. --batch NAME keeps the batch in NAME fixed."
        )
    notes += comparison.notes
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
