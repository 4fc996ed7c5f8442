"""``%gpu --topology``: the GPUs' interconnect as a matrix, like ``nvidia-smi topo -m``."""

from __future__ import annotations

from typing import Any

from jupyter_gpu.magics.common.render import Table, html_block, html_note, publish

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
            "Every pair talks over NVLink: NCCL's all-reduce runs at NVLink speed (hundreds of "
            "GB/s). With NCCL_P2P_DISABLE=1 it falls back to copies through host memory."
        )
    no_p2p = [p for p in pairs if p.p2p is False]
    if no_p2p:
        return (
            f"{len(no_p2p)} pair(s) cannot use P2P ({no_p2p[0].p2p_reason}): NCCL copies "
            "through host memory there, so expect all-reduce at a fraction of PCIe speed."
        )
    return (
        "The GPUs talk over PCIe: NCCL's all-reduce runs at PCIe speed (tens of GB/s at best); "
        "pairs through the CPU (PHB, NODE, SYS) are slower than pairs under one switch."
    )


def show_topology(topology: Any) -> None:
    """Display a :class:`jupyter_gpu.nvml.topology.Topology`."""
    if not topology.gpus:
        text = f"No GPU: {topology.reason or 'NVML reports no GPU'}."
        publish(text, html_block([html_note(text, warn=True)]))
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
