"""``%profile``/``%%profile``: torch.profiler around a statement or a cell, and what it shows."""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import line_cell_magic, magics_class, needs_local_scope

from jupyter_gpu.magics.common.args import (
    ShellMagics,
    allow_side_effects_option,
    argument,
    lookup,
    magic_arguments,
    non_negative_int,
    output_options,
    parse,
    positive_int,
    type_name,
)
from jupyter_gpu.magics.common.cell import CellCode, cell_filenames
from jupyter_gpu.magics.common.lazy_torch import torch_module
from jupyter_gpu.magics.common.reach import Named
from jupyter_gpu.magics.common.render import show_note
from jupyter_gpu.magics.common.runs import RepeatedRuns, Restored
from jupyter_gpu.measure import synchronize

from .analysis import analyse
from .report import show_profile
from .results import ProfileResult
from .rows import OWN_RANGE
from .syncs import SyncSpy

#: --sort keys: ours, then torch's own names for the same columns.
SORT_KEYS = {
    "self_gpu": "self_gpu_s",
    "gpu": "gpu_s",
    "self_cpu": "self_cpu_s",
    "cpu": "cpu_s",
    "calls": "calls",
    "memory": "memory",
    "name": "name",
    "self_cuda_time_total": "self_gpu_s",
    "self_device_time_total": "self_gpu_s",
    "cuda_time_total": "gpu_s",
    "device_time_total": "gpu_s",
    "self_cpu_time_total": "self_cpu_s",
    "cpu_time_total": "cpu_s",
    "count": "calls",
    "self_cpu_memory_usage": "memory",
    "self_cuda_memory_usage": "memory",
    "self_device_memory_usage": "memory",
}


def _export_trace(prof: Any, path: str) -> str | None:
    """Write the Chrome trace to ``path``: ``None`` once written, else why it was not.

    Never raises: the cell has run, and its value and report must not be lost to a file that
    could not be written. torch's exporter only logs some failures (a folder removed by the
    cell, say), so the file's presence is checked too.
    """
    try:
        prof.export_chrome_trace(path)
    except (OSError, RuntimeError) as exc:
        return f"{type(exc).__name__}: {exc}"
    if not Path(path).is_file():
        return "torch's profiler could not create the file"
    return None


#: Options of %profile that take a value (the statement starts after the options).
_VALUED = ("--sort", "--row-limit", "--trace", "--warmup", "--model", "--optimizer")


def split_statement(line: str) -> tuple[str, str]:
    """``%profile``'s line: (its options, the statement after them).

    Options come first, as with ``%timeit``: ``%profile --sort calls -q step()``.
    """
    rest = line.lstrip()
    options: list[str] = []
    while rest.startswith("-") and not rest.startswith(("-(", "- ")):
        token, _, tail = rest.partition(" ")
        option = token.split("=", 1)[0]
        options.append(token)
        rest = tail.lstrip()
        if option in _VALUED and "=" not in token:
            value, _, tail = rest.partition(" ")
            options.append(value)
            rest = tail.lstrip()
    return " ".join(options), rest


@magics_class
class ProfileMagics(ShellMagics):
    """``%profile`` and ``%%profile``."""

    @magic_arguments()
    @argument(
        "--sort", help="self_gpu (default with CUDA), gpu, self_cpu, cpu, calls, memory, name"
    )
    @argument("--row-limit", type=positive_int, default=15, help="rows in the table (15)")
    @argument("--trace", metavar="FILE", help="also write a Chrome/Perfetto trace to FILE")
    @argument("--memory", action="store_true", help="record allocations (memory columns)")
    @argument("--stack", action="store_true", help="record Python stacks (calling source line)")
    @argument(
        "--warmup",
        type=non_negative_int,
        default=0,
        metavar="N",
        help="run the code N times first, put back what they changed, then profile (0)",
    )
    @argument("--model", metavar="NAME", help="--warmup: the model the code trains (put back)")
    @argument("--optimizer", metavar="NAME", help="--warmup: the optimizer it steps (put back)")
    @allow_side_effects_option("--warmup", "the code")
    @output_options()
    @needs_local_scope
    @line_cell_magic
    def profile(
        self, line: str, cell: str | None = None, local_ns: dict[str, Any] | None = None
    ) -> Any:
        """Profile a statement (%profile [options] STATEMENT) or the cell (%%profile).

        Runs it under torch.profiler and shows what took the time: a sortable table of
        the top ops (self/total CPU and GPU time, calls); the user's record_function ranges
        (e.g. Optimizer.step#AdamW.step) apart from the ops; the device synchronisations
        (cudaStreamSynchronize, cudaDeviceSynchronize, blocking copies: what .item(), .cpu()
        or print of a CUDA tensor do) with the lines that made them; a timeline of CPU ops and
        GPU kernels; the fraction of the time the GPU was idle, split as Holistic Trace
        Analysis does (waiting on the host, between kernels, on copies); and one or two hints.
        --trace FILE writes a Chrome/Perfetto trace (open it in ui.perfetto.dev). --warmup N
        runs the code N times before the profiled run (first-call costs, a compile) and puts
        back what they changed (the model and optimizer named with --model/--optimizer, the
        tensors the code uses, the RNG), so the cell's effect is that of one run; code whose
        changes cannot be put back is refused before it runs (or --allow-side-effects). The
        profiler stops even if the code raises.
        """
        first_line = 2  # a %%profile cell's body starts under its magic line
        if cell is None:
            first_line = 1
            line, cell = split_statement(line)
            if not cell.strip():
                raise UsageError(
                    "%profile needs a statement after its options, e.g. %profile train_step(); "
                    "use %%profile for a whole cell."
                )
        args = parse(ProfileMagics.profile, line)
        torch = torch_module()
        cuda = bool(torch.cuda.is_available())
        sort = self._sort_key(args.sort, cuda)
        trace = self._trace_path(args.trace)
        if torch.autograd._profiler_enabled():
            raise UsageError(
                "A torch profiler is already running in this kernel (another %%profile or a "
                "torch.profiler.profile block): stop it first, then run this cell again."
            )
        code = CellCode(self.shell, cell, first_line=first_line)
        warmup, warmup_warnings = self._warm_up(args, code, local_ns, torch)
        activities = [torch.profiler.ProfilerActivity.CPU]
        if cuda:
            activities.append(torch.profiler.ProfilerActivity.CUDA)
        from jupyter_gpu.magics.common.precision import autocast_enabled

        autocast_on = autocast_enabled("cuda" if cuda else "cpu")
        # acc_events: one run, so nothing to accumulate; without it torch 2.11 warns that the
        # profiler "clears events at the end of each cycle", about a cycle the user never ran.
        prof = torch.profiler.profile(
            activities=activities,
            profile_memory=args.memory,
            with_stack=args.stack,
            acc_events=True,
            experimental_config=_stack_config(torch) if args.stack else None,
        )
        cell_names = cell_filenames(self.shell)
        # Places syncs without --stack; only where CUDA is up already (never initialises it).
        traced = cuda and not args.stack and torch.cuda.is_initialized()
        spy = SyncSpy(torch, cell_names) if traced else None
        start = time.perf_counter()
        with prof:  # __exit__ stops the profiler whatever the cell does
            if spy is not None:
                with spy:
                    value = code.run(local_ns)
            else:
                value = code.run(local_ns)
            with torch.profiler.record_function(OWN_RANGE):  # not counted as the user's sync
                synchronize()
        wall = time.perf_counter() - start
        try:
            analysis = analyse(
                prof,
                cuda=cuda,
                autocast_on=autocast_on,
                cell_names=cell_names,
                stack=args.stack,
                timeline=not args.quiet,  # the bars only feed the figure
                sync_places=spy.places if spy is not None else None,
            )
        except UnicodeDecodeError as err:
            # torch's own parse of its trace (prof.events()) now and then meets a garbled event
            # name (torch 2.13 on CPU, about 1 run in 4 of one script here): the cell ran and
            # its value stands; only the profile is lost.
            text = (
                f"%%profile: torch's profiler returned a trace it cannot read ({err.reason} in "
                "an event name), so this run has no profile. The cell itself ran; run it again "
                "to profile it."
            )
            show_note(text, warn=True)
            return None if args.output else value
        trace_problem = _export_trace(prof, trace) if trace is not None else None
        result = ProfileResult(
            rows=analysis.rows,
            gpu_idle_fraction=analysis.gpu_idle_fraction,
            hints=analysis.hints,
            wall_s=wall,
            trace_file=trace if trace_problem is None else None,
            sort=sort,
            kernel_count=analysis.kernel_count,
            value=value,
            profiler=prof,
            ranges=analysis.ranges,
            sync_count=analysis.syncs.count,
            sync_places=dict(analysis.syncs.places),
            idle_s=analysis.idle_s,
            warmup=warmup,
            warmup_warnings=warmup_warnings,
        )
        if not args.quiet:
            show_profile(result, analysis, cuda=cuda, args=args)
        if trace_problem is not None:  # said even with -q: it stands for an error not raised
            show_note(
                f"--trace {args.trace}: the trace was not written ({trace_problem}).", warn=True
            )
        return result if args.output else value

    # -------------------------------------------------------------------------- warm-up

    def _warm_up(
        self, args: argparse.Namespace, code: CellCode, local_ns: Any, torch: Any
    ) -> tuple[Restored | None, list[str]]:
        """Run the code ``--warmup`` times, then put back what it changed (the one helper).

        Raises:
            UsageError: --model/--optimizer/--allow-side-effects without --warmup, names that
                are not a model or an optimizer, or code whose changes cannot all be put back.
        """
        if not args.warmup:
            if args.model or args.optimizer or args.allow_side_effects:
                raise UsageError(
                    "--model, --optimizer and --allow-side-effects go with --warmup N, e.g. "
                    "%%profile --warmup 2 --model model --optimizer opt."
                )
            return None, []
        models, optimizers = {}, {}
        if args.model:
            model = lookup(self.shell.user_ns, args.model, "--model")
            if not isinstance(model, torch.nn.Module):
                raise UsageError(f"--model {args.model} is a {type_name(model)}, not a model.")
            models[args.model] = model
        if args.optimizer:
            opt = lookup(self.shell.user_ns, args.optimizer, "--optimizer")
            if not isinstance(opt, torch.optim.Optimizer):
                raise UsageError(
                    f"--optimizer {args.optimizer} is a {type_name(opt)}, not an optimizer."
                )
            optimizers[args.optimizer] = opt
        runs = RepeatedRuns(
            self.shell,
            code.codes,
            what=f"%%profile --warmup {args.warmup}",
            named=Named(models, optimizers),
            allow_side_effects=args.allow_side_effects,
            expected_runs=f"{args.warmup} time(s) before the profiled run",
        )
        run = runs.call(lambda: code.run(local_ns))
        try:
            with runs.recording():
                for _ in range(args.warmup):
                    run()
                synchronize()
        finally:
            restored = runs.finish()
        return restored, runs.warning_notes()

    # -------------------------------------------------------------------------- checks

    @staticmethod
    def _sort_key(key: str | None, cuda: bool) -> str:
        if key is None:
            return "self_gpu_s" if cuda else "self_cpu_s"
        if key not in SORT_KEYS:
            raise UsageError(
                f"--sort {key}: unknown key; use one of self_gpu, gpu, self_cpu, cpu, calls, "
                "memory, name (or torch's own names, e.g. self_cuda_time_total)."
            )
        column = SORT_KEYS[key]
        if not cuda and column in ("self_gpu_s", "gpu_s"):
            raise UsageError(
                f"--sort {key}: there is no GPU time to sort by without CUDA; use self_cpu or cpu."
            )
        return column

    @staticmethod
    def _trace_path(trace: str | None) -> str | None:
        """The ``--trace`` file, checked before the cell runs (the trace is written after it).

        Raises:
            UsageError: the path is a folder, its folder is missing or not writable, or it is
                an existing file that is not writable.
        """
        if trace is None:
            return None
        path = Path(trace).expanduser()
        if path.is_dir():
            raise UsageError(f"--trace {trace} is a folder: give a file name, e.g. trace.json.")
        folder = path.parent
        if not folder.is_dir():
            raise UsageError(
                f"--trace {trace}: the folder {folder} does not exist; create it first."
            )
        if not os.access(folder, os.W_OK):
            raise UsageError(f"--trace {trace}: the folder {folder} is not writable here.")
        if path.exists() and not os.access(path, os.W_OK):
            raise UsageError(f"--trace {trace}: the file exists and is not writable here.")
        return str(path)


def _stack_config(torch: Any) -> Any:
    """The profiler's experimental config for ``--stack``: ``verbose`` on.

    torch 2.11 records no Python-function events with ``with_stack`` (on Python 3.11 and 3.12
    alike) and puts the Python stacks on its events only with ``verbose``; torch 2.13 records
    both either way. ``None`` (torch's default) where the option is missing.
    """
    try:
        return torch._C._profiler._ExperimentalConfig(verbose=True)
    except (AttributeError, TypeError):
        return None
