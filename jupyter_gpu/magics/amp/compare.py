"""``%amp compare``: one training step under fp32, tf32, bf16 and fp16, side by side.

Each mode starts from the same state (model, optimizer, gradients, RNG, the tensors the step
uses), so the losses are comparable: its first step's loss is the one compared, and one profiled
step after it gives the evidence for the "Why" lines. Then the modes are timed together, in
interleaved rounds, with fp32 as the baseline (``jupyter_gpu.measure.compare``): each speedup
carries its interval. A mode that computes exactly as another on this device (tf32 on a CPU) is
not timed apart. All of it goes through the repeated-runs helper (``replay/runs.py``): it
refuses before running when the step would change what it cannot put back, and afterwards
everything is as it was.
"""

from __future__ import annotations

import argparse
import functools
from dataclasses import replace
from typing import Any

from IPython.core.error import UsageError

from jupyter_gpu.magics.causes import Evidence, Explanation, ModeFacts, explain
from jupyter_gpu.magics.probes.evidence import profile_one_call
from jupyter_gpu.magics.probes.peak import PeakWatch
from jupyter_gpu.magics.probes.precision import tf32_supported
from jupyter_gpu.magics.replay.reach import Named
from jupyter_gpu.magics.replay.runs import RepeatedRuns
from jupyter_gpu.magics.shell.args import compile_expression, lookup
from jupyter_gpu.magics.shell.lazy_torch import loss_value, torch_module
from jupyter_gpu.measure import Comparison, Variant, compare

from . import autocast as prec
from .report import show_comparison
from .results import AmpComparison, AmpModeResult

MODES = ("fp32", "tf32", "bf16", "fp16")
#: Reduced precision is "no faster" below this speedup over the faster of fp32 and tf32.
NO_FASTER = 1.1
#: About how long each timed mode takes, in interleaved rounds (seconds).
_SECONDS_PER_MODE = 1.0


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
    torch_module()  # the UsageError that says how to install torch, where it is missing
    expr = args.args[0]
    code = compile_expression(shell, expr, "%amp compare")
    modes = _parse_modes(args.modes)
    named = Named.from_options(shell.user_ns, args.model, args.optimizer)
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
    runs = RepeatedRuns(  # UsageError here if the step's changes cannot all be put back
        shell,
        [code],
        what=f'%amp compare "{expr}"',
        named=named,
        allow_side_effects=getattr(args, "allow_side_effects", False),
        expected_runs=f"in {len(modes)} modes (a first step for the loss, then about a "
        "second of timed runs each)",
    )
    comparison = AmpComparison(expr, device, batch=batch_name)
    comparison.state_on = runs.state.where
    comparison.restored = [*named.models, *named.optimizers]
    if runs.state.describe_place():
        comparison.notes.append(runs.state.describe_place())
    step = runs.call(lambda: eval(code, shell.user_ns))  # noqa: S307  # the user's own expression

    def start() -> None:
        """Back to the same start before each mode: state, RNG and (--batch) the batch."""
        runs.reset()
        if batch_name:
            shell.user_ns[batch_name] = batch

    try:
        with runs.recording():
            _warm_up(step, device)
            for mode in modes:
                same = same_as(mode, device)
                if same is not None:
                    comparison.results.append(AmpModeResult(mode, None, 0, None, None, None))
                    comparison.same_as[mode] = same
                    continue
                start()
                result = _first_step(mode, device, step, comparison.results)
                if mode == "fp32" and result.error is not None:
                    raise UsageError(
                        f"{expr} failed in fp32, before any mixed precision ({result.error}): "
                        "fix the step (run it in a cell to see the traceback), then compare."
                    )
                comparison.results.append(result)
            start()
            comparison.timing = _time_modes(comparison, step, device, args.runs)
    finally:
        if batch_name:
            shell.user_ns[batch_name] = batch
        comparison.restore = runs.finish()
    comparison.notes += [f"Note: {w}" for w in runs.warning_notes()]
    comparison.explanations = why_no_faster(comparison)
    if not args.quiet:
        show_comparison(comparison)
    return comparison if args.output else None


def same_as(mode: str, device: str) -> str | None:
    """The mode that ``mode`` computes exactly as, on this device; ``None`` if none.

    TF32 changes float32 matmuls and convolutions on CUDA GPUs with TF32 tensor cores (compute
    capability 8.0 and later) only: on a CPU, or an older GPU, the tf32 mode runs fp32's
    kernels, so timing it apart would only measure noise as a difference.
    """
    if mode == "tf32" and (device != "cuda" or not tf32_supported()):
        return "fp32"
    return None


def _time_modes(
    comparison: AmpComparison, step: Any, device: str, rounds: int | None
) -> Comparison:
    """The modes whose first step worked, timed in interleaved rounds (fp32 the baseline)."""
    timed = [
        r.mode for r in comparison.results if r.error is None and r.mode not in comparison.same_as
    ]
    timing = compare(
        {
            mode: Variant(
                prec.step_in_mode(step, mode, device),
                functools.partial(prec.precision_mode, mode, device),
            )
            for mode in timed
        },
        baseline="fp32",
        device=device,
        warmup=1,
        rounds=rounds,
        target_s=_SECONDS_PER_MODE * len(timed),
    )
    comparison.results = [
        replace(r, time_s=timing[r.mode].median_s, runs=timing.rounds) if r.mode in timed else r
        for r in comparison.results
    ]
    return timing


def why_no_faster(comparison: AmpComparison) -> list[Explanation]:
    """The table's causes unless bf16/fp16 is measurably 10 % faster than fp32/tf32, else none.

    "Measurably": the interval of the reduced mode's ratio over the faster of fp32 and tf32
    excludes 1.0; a difference the rounds cannot tell from noise is no speedup.
    """
    ok = {r.mode: r.time_s for r in comparison.results if r.error is None and r.time_s}
    timing = comparison.timing
    ref = [m for m in ok if m in ("fp32", "tf32")]
    red = [m for m in ok if m in ("bf16", "fp16")]
    if timing is None or not ref or not red:
        return []
    best_ref = min(ref, key=lambda m: ok[m])
    if any(
        (ratio := timing.ratio(m, baseline=best_ref)).faster and ratio.value >= NO_FASTER
        for m in red
    ):
        return []
    profiles = {r.mode: r.profile for r in comparison.results}
    facts = {m: ModeFacts(t or 0.0, profiles.get(m)) for m, t in ok.items()}
    return explain(Evidence("amp", cuda=comparison.device == "cuda", modes=facts))


def _warm_up(step: Any, device: str) -> None:
    """Run one step before any timing; its state is restored by the first mode.

    First-call costs (allocator growth, cuBLAS handles, kernel selection) would otherwise land
    on whichever mode runs first.
    """
    torch_module()  # the UsageError that says how to install torch, where it is missing
    import torch

    try:
        with prec.precision_mode("fp32", device):
            step()
        if device == "cuda":
            torch.cuda.synchronize()
    except Exception:  # noqa: BLE001, S110  # the fp32 run reports the step's error properly
        pass


def _first_step(
    mode: str,
    device: str,
    step: Any,
    previous: list[AmpModeResult],
) -> AmpModeResult:
    """``mode``'s first step from the shared start: its loss and peak, then one profiled step.

    The time comes later, from all the modes' interleaved rounds (``_time_modes``).
    """
    torch_module()  # the UsageError that says how to install torch, where it is missing
    import torch

    cuda = device == "cuda"
    run = prec.step_in_mode(step, mode, device)
    try:
        with prec.precision_mode(mode, device):
            watch = PeakWatch(torch.cuda.current_device(), always_trace=True) if cuda else None
            if watch is not None:
                torch.cuda.synchronize()
                watch.start()
            try:
                first = run()
                if cuda:
                    torch.cuda.synchronize()
            finally:
                reading = watch.stop() if watch is not None else None
            loss = loss_value(first)
            profile = profile_one_call(run)
    except Exception as exc:  # noqa: BLE001  # one mode failing (fp16 on CPU, say) is a result
        return AmpModeResult(mode, None, 0, None, None, None, f"{type(exc).__name__}: {exc}")
    reference = next((r.loss for r in previous if r.mode == "fp32"), None)
    diff = None
    if loss is not None and reference is not None and mode != "fp32":
        diff = abs(loss - reference)
    peak = reading.above_start_bytes if reading is not None else None
    return AmpModeResult(mode, None, 0, peak, loss, diff, profile=profile)
