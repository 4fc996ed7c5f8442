"""Text and HTML for ``%amp``: its settings, TF32, the GradScaler recipe and ``%amp compare``.

The flow is ``magic.py`` (the commands) and ``compare.py`` (``%amp compare``'s runs); the
records shown are ``results.py``'s.
"""

from __future__ import annotations

import math

from jupyter_gpu.magics.output.render import (
    Cell,
    Table,
    fmt_bytes,
    html_block,
    html_note,
    html_pre,
    publish,
    show_note,
)
from jupyter_gpu.magics.shell.lazy_torch import describe_device
from jupyter_gpu.measure import Ratio, fmt_ratio, fmt_seconds

from .results import AmpComparison, AmpStatus

#: The fp16 training step with a GradScaler named ``scaler``.
RECIPE = "scaler.scale(loss).backward()\nscaler.step(optimizer)\nscaler.update()"


def show_autocast_on(device: str, dtype: str) -> None:
    """Say that ``%amp on`` autocasts from its own line on, and what stays in float32."""
    show_note(
        f"autocast on from this line, in this cell and every following one: {device}, {dtype} "
        f"(matmuls and convolutions run in {dtype}; reductions, softmax and losses stay in "
        "float32). %amp off stops it."
    )


def show_autocast_off(*, was_on: bool) -> None:
    """Say what ``%amp off`` did."""
    show_note(
        "autocast off from this line, in this cell and every following one."
        if was_on
        else "autocast was not on."
    )


def show_status(status: AmpStatus, tf32_note: str) -> None:
    """``%amp``: autocast for every cell or not, TF32 for matmuls and convolutions."""
    lines = [
        (
            f"autocast: on for every cell ({status.device}, {status.dtype}); %amp off stops"
            if status.autocast_on
            else "autocast: off (%amp on, or %%amp for one cell)"
        ),
        f"TF32 on CUDA: matmul {'on' if status.tf32_matmul else 'off'}, "
        f"cuDNN convolutions {'on' if status.tf32_conv else 'off'} (%amp tf32 on|off)",
        tf32_note,
    ]
    text = "\n".join(line for line in lines if line)
    publish(text, html_block([html_pre(text)]))


def show_tf32(enabled: bool, *, new_api: bool, note: str) -> None:
    """``%amp tf32 on|off``: what was set, in torch's own words (``new_api``: fp32_precision)."""
    api = (
        "torch.backends.cuda.matmul.fp32_precision and torch.backends.cudnn.conv.fp32_precision = "
        if new_api
        else "torch.backends.cuda.matmul.allow_tf32 and torch.backends.cudnn.allow_tf32 = "
    )
    value = repr("tf32" if enabled else "ieee") if new_api else str(enabled)
    state = "on" if enabled else "off"
    text = f"TF32 {state} for float32 matmuls and convolutions ({api}{value})."
    publish(
        "\n".join(filter(None, [text, note])),
        html_block([html_note(text), html_note(note, warn=True) if note else ""]),
    )


def show_scaler(name: str, device: str) -> None:
    """Say that fp16 put a GradScaler in the notebook as ``name``, and the step that uses it."""
    recipe = RECIPE.replace("scaler", name)
    text = (
        f"fp16 needs loss scaling: {name} = torch.amp.GradScaler({device!r}) is in the "
        f"notebook. In the training step, instead of loss.backward(); optimizer.step():\n"
        f"{recipe}"
    )
    publish(text, html_block([html_note(text.split("\n", 1)[0]), html_pre(recipe)]))


def comparison_table(comparison: AmpComparison) -> Table:
    """One row per mode: time, speedup over fp32, step peak memory, loss and its distance."""
    table = Table(
        headers=["mode", "time", "vs fp32", "step peak memory", "loss", "|loss - fp32|"],
        numeric=[False, True, True, True, True, True],
        title=f"amp compare {comparison.expr}  ({describe_device(comparison.device)})",
    )
    for r in comparison.results:
        if r.error is not None:
            table.rows.append([r.mode, "failed", "", "", r.error[:60], ""])
            continue
        same = comparison.same_as.get(r.mode)
        if same is not None:
            table.rows.append([r.mode, f"= {same} here (not timed apart)", "", "", "", ""])
            continue
        ratio = comparison.ratio(r.mode)
        loss = "n/a" if r.loss is None else f"{r.loss:.6g}"
        diff = "-" if r.mode == "fp32" else ("n/a" if r.loss_diff is None else f"{r.loss_diff:.2g}")
        table.rows.append(
            [
                r.mode,
                Cell(fmt_seconds(r.time_s), r.time_s),
                _versus(r.mode, ratio),
                Cell(fmt_bytes(r.peak_bytes), r.peak_bytes),
                Cell(loss, r.loss),
                Cell(diff, r.loss_diff),
            ]
        )
    return table


def _versus(mode: str, ratio: Ratio | None) -> Cell:
    """The "vs fp32" cell: ``1.32x (1.28-1.36x)``, or ``no difference (0.970-1.04x)``."""
    if mode == "fp32":
        return Cell("1x (baseline)", 1.0)
    if ratio is None:
        return Cell("n/a", None)
    if not ratio.measurable:
        return Cell(f"no difference ({ratio.span()})", ratio.value)
    return Cell(f"{fmt_ratio(ratio.value)}x ({ratio.span()})", ratio.value)


def comparison_notes(comparison: AmpComparison) -> list[str]:
    """The lines under the table: how it was measured, why no faster, what was put back."""
    timing = comparison.timing
    how = timing.method() if timing is not None else "not timed"
    notes = [
        f"time: a step's median; {how}. loss: that of the first step, from the same starting "
        "state in every mode."
    ]
    if timing is not None:
        notes += [f"Not steady: {n}." for n in timing.machine.notes]
    if "tf32" in comparison.same_as:
        notes.append(
            "tf32 = fp32 here: TF32 changes float32 matmuls and convolutions on CUDA GPUs with "
            "TF32 tensor cores (compute capability 8.0 and later) only."
        )
    if comparison.device == "cpu":
        notes.append("CPU: no peak-memory figure (torch tracks it for CUDA only).")
    else:
        notes.append(
            "step peak memory: the most the mode's first step held above what was allocated "
            "before it, from the allocator's trace (the bytes the tensors requested); torch's "
            "peak counter is never reset."
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
    if any(r.loss is not None and not math.isfinite(r.loss) for r in comparison.results):
        notes.append("A loss is inf/nan: that mode overflowed (fp16 needs a GradScaler).")
    notes += [f"Why: {e.text}" for e in comparison.explanations]
    if comparison.restore is not None:
        notes.append(comparison.restore.line)
    return notes


def show_comparison(comparison: AmpComparison) -> None:
    """Display ``%amp compare``'s table and notes."""
    table = comparison_table(comparison)
    notes = comparison_notes(comparison)
    text = table.text() + "\n" + "\n".join(notes)
    warn = ("Why", "A loss", "Note", "Not steady", "Put back")
    publish(
        text, html_block([table.html(), *(html_note(n, warn=n.startswith(warn)) for n in notes)])
    )
