"""Text and HTML for ``%gpu``: one line per GPU, the interconnect matrix, the live view's HTML.

The flow (the backend, the reads, the watch's thread) is in ``magic.py`` and ``watch.py``;
everything here renders what they read.
"""

from __future__ import annotations

import html
import time
from typing import TYPE_CHECKING, Any

from jupyter_gpu.magics.output.render import (
    Table,
    fmt_bytes,
    html_block,
    html_note,
    html_text,
    publish,
    show_note,
)

if TYPE_CHECKING:
    from jupyter_gpu.readings import Sample

#: {NVML index: (allocated, reserved)}: this kernel's torch memory on each GPU it uses.
TorchMemory = dict[int, tuple[int, int]]

# ---------------------------------------------------------------------- %gpu


def show_sample(sample: Any, torch_memory: TorchMemory, *, pid: int, cuda_in_use: bool) -> None:
    """Display a ``jupyter_gpu.sampling`` sample as one line per GPU.

    ``torch_memory``: what this kernel's torch holds (empty for a simulated sample, or when
    the kernel does not use CUDA); ``pid``: this kernel's process; ``cuda_in_use``: whether
    this kernel's torch initialised CUDA (said when NVML sees no GPU).
    """
    if not sample.devices:
        from jupyter_gpu.backends import plain_no_gpu

        reason = sample.reason or "NVML reports no GPU"
        text = f"No GPU: {reason}. {plain_no_gpu(sample.reason)}"
        if cuda_in_use:
            text += " (torch in this kernel does use CUDA: NVML is what is missing.)"
        show_note(text, warn=True)
        return
    label = " (simulated)" if sample.simulated else ""
    table = Table(
        headers=["GPU", "name", "util", "memory used", "this kernel"],
        numeric=[True, False, True, True, False],
        title=f"GPUs{label}",
    )
    lines = []
    for d in sample.devices:
        name = (d.name or "unknown") + label
        if d.state != "ok":
            row = [str(d.index), name, d.state, "", d.error or ""]
        else:
            util = "n/a" if d.util_pct is None else f"{d.util_pct:.0f}%"
            used = f"{fmt_bytes(d.mem_used_bytes)} of {fmt_bytes(d.mem_total_bytes)}"
            mine = (
                _simulated_kernel_cell(d, pid, cuda_in_use=cuda_in_use)
                if sample.simulated
                else _kernel_cell(d, torch_memory, pid)
            )
            row = [str(d.index), name, util, used, mine]
        table.rows.append(list(row))
        lines.append(
            f"GPU {row[0]}  {row[1]}  util {row[2]}  memory {row[3]}  this kernel: {row[4]}"
            if d.state == "ok"
            else f"GPU {row[0]}  {row[1]}  {row[2]}: {row[4]}"
        )
    publish("\n".join(lines), html_block([table.html()]))


def _simulated_kernel_cell(device: Any, pid: int, *, cuda_in_use: bool) -> str:
    """What a simulated GPU says this kernel holds (as the sidebar shows it), never torch's.

    The figure is made up by the demo backend, which puts a job on each of its server's
    kernels: said so, beside what this kernel's torch really holds (nothing on a GPU unless
    it initialised CUDA, and then not on these made-up GPUs).
    """
    held = next((p.used_mem_bytes for p in device.processes if p.pid == pid), None)
    if held is None:
        return "not using this GPU"
    real = (
        "this kernel's torch uses a real GPU, not shown here"
        if cuda_in_use
        else "this kernel's torch holds no GPU memory"
    )
    return f"{fmt_bytes(held)} simulated (made up by the demo backend; {real})"


def _kernel_cell(device: Any, torch_memory: TorchMemory, pid: int) -> str:
    nvml = next((p.used_mem_bytes for p in device.processes if p.pid == pid), None)
    nvml_text = f" (NVML {fmt_bytes(nvml)})" if nvml is not None else ""
    if device.index in torch_memory:
        allocated, reserved = torch_memory[device.index]
        return f"torch {fmt_bytes(allocated)} allocated, {fmt_bytes(reserved)} reserved{nvml_text}"
    if nvml is not None:
        return f"NVML {fmt_bytes(nvml)} (torch not using this GPU)"
    return "not using this GPU"


# ---------------------------------------------------------------------- %gpu --topology

LEGEND = (
    "NV<n>: n NVLinks (direct or through NVSwitch); PIX: one PCIe switch; PXB: several PCIe "
    "switches; PHB: through the CPU's PCIe host bridge; NODE: host bridges of one NUMA node; "
    "SYS: across CPU sockets"
)


def _pcie(gpu: Any) -> str:
    if gpu.pcie_gen is None:
        return "PCIe n/a"
    text = f"PCIe gen {gpu.pcie_gen} x{gpu.pcie_width}"
    if (gpu.pcie_max_gen, gpu.pcie_max_width) != (gpu.pcie_gen, gpu.pcie_width):
        text += f" (max gen {gpu.pcie_max_gen} x{gpu.pcie_max_width}: idle GPUs slow their link)"
    return text


def _nvlink(gpu: Any) -> str:
    if gpu.nvlinks is None:
        return "NVLink n/a"
    if not gpu.nvlinks:
        return "no active NVLink"
    switch = f", {gpu.nvswitch_links} to NVSwitch" if gpu.nvswitch_links else ""
    return f"{gpu.nvlinks} active NVLink{'s' if gpu.nvlinks > 1 else ''}{switch}"


def _meaning(topology: Any) -> str:
    pairs = topology.pairs
    if not pairs:
        return (
            "One GPU: there is no GPU-to-GPU path. DDP and FSDP need 2 or more GPUs to scale; "
            "NCCL still runs (a world of 1)."
        )
    if all(p.over_nvlink for p in pairs):
        return (
            "Every pair talks over NVLink: NCCL's all-reduce runs over those links (the lines "
            "above count them). With NCCL_P2P_DISABLE=1 it falls back to copies through host "
            "memory."
        )
    no_p2p = [p for p in pairs if p.p2p is False]
    if no_p2p:
        return (
            f"{len(no_p2p)} pair(s) cannot use P2P ({no_p2p[0].p2p_reason}): NCCL copies "
            "through host memory there, so expect all-reduce at a fraction of PCIe speed."
        )
    return (
        "The GPUs talk over PCIe: NCCL's all-reduce runs at what the links above allow "
        "(generation and width); pairs through the CPU (PHB, NODE, SYS) are slower than pairs "
        "under one switch."
    )


def show_topology(topology: Any) -> None:
    """Display a :class:`jupyter_gpu.nvml.topology.Topology`, as ``nvidia-smi topo -m``."""
    if not topology.gpus:
        show_note(f"No GPU: {topology.reason or 'NVML reports no GPU'}.", warn=True)
        return
    n = len(topology.gpus)
    label = " (simulated)" if topology.simulated else ""
    source = "simulated: an HGX H200 board" if topology.simulated else "NVML"
    headers = ["", *(f"GPU{i}" for i in range(n))]
    matrix = Table(headers=headers, title=f"GPU interconnect ({source}, as nvidia-smi topo -m)")
    p2p = Table(headers=headers, title=f"P2P reads possible{label}")
    for a in range(n):
        row: list[Any] = [f"GPU{a}"]
        p2p_row: list[Any] = [f"GPU{a}"]
        for b in range(n):
            pair = topology.pair(a, b) if a != b else None
            row.append("X" if a == b else (pair.path if pair else "?"))
            if a == b:
                p2p_row.append("X")
            elif pair is None or pair.p2p is None:
                p2p_row.append("?")
            else:
                p2p_row.append("yes" if pair.p2p else "no")
        matrix.rows.append(row)
        p2p.rows.append(p2p_row)
    links = [
        f"GPU{g.index}: {g.error}"
        if g.error
        else f"GPU{g.index} {g.name or 'unknown'}: {_nvlink(g)}; {_pcie(g)}{label}"
        for g in topology.gpus
    ]
    reasons = [
        f"GPU{p.a}-GPU{p.b}: no P2P, {p.p2p_reason}" for p in topology.pairs if p.p2p is False
    ]
    meaning = _meaning(topology)
    if topology.simulated:
        meaning = f"Simulated: this is what it would mean on such a board. {meaning}"
    parts = [matrix.text()]
    if n > 1:
        parts.append(p2p.text())
    text = "\n\n".join(parts) + "\n\n" + "\n".join([*links, *reasons, LEGEND, meaning])
    html_parts = [matrix.html()]
    if n > 1:
        html_parts.append(p2p.html())
    html_parts += [html_note(line) for line in [*links, *reasons]]
    html_parts += [html_note(meaning), html_note(LEGEND)]
    publish(text, html_block(html_parts))


# ---------------------------------------------------------------------- %gpu --watch


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.0f}%"


def _bar(value: float | None) -> str:
    width = 0.0 if value is None else max(0.0, min(100.0, value))
    return (
        '<span style="display:inline-block;width:60px;height:8px;'
        'background:var(--jp-layout-color3,#ddd);vertical-align:middle">'
        f'<span style="display:block;width:{width:.0f}%;height:8px;'
        'background:var(--jp-brand-color1,#1976d2)"></span></span>'
    )


def watch_html(sample: Sample, *, stopped: str | None = None) -> str:
    """The live view's HTML for one sample (every string escaped)."""
    from jupyter_gpu.backends import plain_no_gpu

    label = " (simulated)" if sample.simulated else ""
    when = time.strftime("%H:%M:%S", time.localtime(sample.ts))
    state = f"stopped: {html.escape(stopped)}" if stopped else f"live, updated {when}"
    head = f"<div><b>GPUs{label}</b> <span style='opacity:0.7'>{state}</span></div>"
    if not sample.devices:
        text = html_text(plain_no_gpu(sample.reason))
        return f"{head}<div>No GPU: {text}</div>"
    rows = []
    for d in sample.devices:
        name = html.escape((d.name or "unknown GPU") + label)
        if d.state != "ok":
            rows.append(
                f"<tr><td>{d.index}</td><td>{name}</td>"
                f"<td colspan='6'>{html.escape(d.state)}: {html.escape(d.error or '')}</td></tr>"
            )
            continue
        memory = f"{fmt_bytes(d.mem_used_bytes)} / {fmt_bytes(d.mem_total_bytes)}"
        power = "n/a" if d.power_w is None else f"{d.power_w:.0f} W"
        temp = "n/a" if d.temperature_c is None else f"{d.temperature_c:.0f} °C"
        gpm = (
            f"SM {_pct(d.sm_active_pct)} · tensor {_pct(d.tensor_active_pct)}"
            if d.sm_active_pct is not None or d.tensor_active_pct is not None
            else "SM/tensor n/a"
        )
        rows.append(
            f"<tr><td>{d.index}</td><td>{name}</td>"
            f"<td>{_bar(d.util_pct)} util {_pct(d.util_pct)}</td><td>{gpm}</td>"
            f"<td>{memory}</td><td>{power}</td><td>{temp}</td></tr>"
        )
    table = (
        "<table style='border-collapse:collapse'><tr><th>GPU</th><th>name</th><th>util</th>"
        "<th>activity</th><th>memory</th><th>power</th><th>temp</th></tr>"
        + "".join(rows)
        + "</table>"
    )
    return head + table


def show_stopped(count: int) -> None:
    """Say how many live views ``%gpu --watch off`` stopped."""
    show_note(f"Stopped {count} GPU view{'s' if count != 1 else ''}.")
