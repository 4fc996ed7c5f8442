"""``%gpu``: one line per GPU (name, utilization, memory, this kernel's torch memory).

``%gpu --watch`` shows a live ipywidgets view instead (``watch.py``); ``%gpu --topology`` the
interconnect. What they show is drawn by ``report.py``.
"""

from __future__ import annotations

import os
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import line_magic, magics_class

from jupyter_gpu.magics.shell.args import ShellMagics, argument, magic_arguments, parse
from jupyter_gpu.magics.shell.lazy_torch import cuda_in_use, torch_if_imported

from .report import TorchMemory, show_sample, show_stopped, show_topology


def _torch_memory(devices: Any) -> TorchMemory:
    """{NVML index: (allocated, reserved)} for the GPUs this kernel's torch uses.

    Empty unless this kernel already initialised CUDA: ``%gpu`` never creates a CUDA context
    (that alone takes hundreds of MB of GPU memory).
    """
    if not cuda_in_use():
        return {}
    from jupyter_gpu.magics.probes.allocator import match_nvml_device

    torch = torch_if_imported()
    assert torch is not None
    out = {}
    for i in range(torch.cuda.device_count()):
        match = match_nvml_device(devices, i)
        if match is not None:
            out[match.index] = (
                int(torch.cuda.memory_allocated(i)),
                int(torch.cuda.memory_reserved(i)),
            )
    return out


@magics_class
class GpuMagics(ShellMagics):
    """``%gpu``."""

    @magic_arguments()
    @argument(
        "--backend",
        default=None,
        help=(
            "auto (NVML if it works), nvml, simulated (labelled demo GPUs) or none; default: "
            "$JUPYTER_GPU_BACKEND, which a server with the simulated backend sets for its "
            "kernels, else auto"
        ),
    )
    @argument(
        "--watch",
        nargs="?",
        const="on",
        choices=["on", "off"],
        help=(
            "show a live view in this cell's output, updated from a kernel thread while other "
            "cells run (ipywidgets: Notebook 7, VS Code, Colab); '--watch off' stops every view"
        ),
    )
    @argument(
        "--interval",
        type=float,
        default=1.0,
        help="seconds between updates of --watch (0.1 to 60, default 1)",
    )
    @argument(
        "-o",
        "--output",
        action="store_true",
        help="return the sample that was read (with --watch: the GpuWatch)",
    )
    @argument(
        "--topology",
        action="store_true",
        help="how the GPUs are connected (NVLink or PCIe) and whether P2P works, from NVML",
    )
    @argument("-q", "--quiet", action="store_true", help="print nothing")
    @line_magic
    def gpu(self, line: str) -> Any:
        """The GPUs at a glance, one line per GPU.

        Each line: name, utilization, memory used of total, and this kernel's torch memory
        (only if it already uses CUDA). Says plainly why when there is no GPU. Reads NVML once
        (0.13 to 0.16 s on an H200, 2026-12-01 and 02); never imports torch.

        ``%gpu --topology`` shows instead how the GPUs are connected, as ``nvidia-smi topo -m``
        does: NVLink or PCIe between each pair, whether P2P works, each GPU's links, and what
        that means for NCCL (``-o`` returns the ``Topology``).
        """
        args = parse(GpuMagics.gpu, line)
        from jupyter_gpu.backends import BACKEND_CHOICES, backend_from_env
        from jupyter_gpu.sampling import read_once

        backend = args.backend if args.backend is not None else backend_from_env()
        if backend not in BACKEND_CHOICES:
            choices = ", ".join(BACKEND_CHOICES)
            raise UsageError(f"--backend {backend}: use one of {choices}.")
        if args.topology:
            return self._topology(backend, quiet=args.quiet, output=args.output)
        if args.watch is not None:
            watch = _watch(args.watch, backend, args.interval, quiet=args.quiet)
            return watch if args.output else None
        sample = read_once(backend)
        if not args.quiet:
            own = {} if sample.simulated or not sample.devices else _torch_memory(sample.devices)
            show_sample(sample, own, pid=os.getpid(), cuda_in_use=cuda_in_use())
        return sample if args.output else None

    def _topology(self, backend: str, *, quiet: bool, output: bool) -> Any:
        from jupyter_gpu.sampling import topology_once

        topology = topology_once(backend)  # the backend's own: NVML's, or the simulated board
        if not quiet:
            show_topology(topology)
        return topology if output else None


def _watch(mode: str, backend: str, interval_s: float, *, quiet: bool) -> Any:
    from . import watch

    if mode == "off":
        stopped = watch.stop_all()
        if not quiet:
            show_stopped(stopped)
        return None
    if not 0.1 <= interval_s <= 60.0:
        raise UsageError(f"--interval {interval_s:g}: use 0.1 to 60 seconds.")
    try:
        import ipywidgets  # noqa: F401 (only to say plainly that it is missing)
    except ImportError as err:
        raise UsageError(
            "%gpu --watch needs ipywidgets in this kernel's environment: pip install ipywidgets."
        ) from err
    return watch.start_watch(backend, interval_s)
