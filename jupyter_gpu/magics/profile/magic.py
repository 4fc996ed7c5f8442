"""``%profile``/``%%profile``: torch.profiler around a statement or a cell, and what it shows."""

from __future__ import annotations

import argparse
import os
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import line_cell_magic, magics_class, needs_local_scope

from jupyter_gpu.magics.output.render import show_note
from jupyter_gpu.magics.replay.reach import Named
from jupyter_gpu.magics.replay.runs import RepeatedRuns, Restored
from jupyter_gpu.magics.shell.args import (
    ShellMagics,
    allow_side_effects_option,
    argument,
    magic_arguments,
    non_negative_int,
    output_options,
    parse,
    positive_int,
    with_call,
)
from jupyter_gpu.magics.shell.cell import CellCode, cell_filenames
from jupyter_gpu.magics.shell.lazy_torch import torch_module
from jupyter_gpu.measure import synchronize

from .analysis import analyse, hints
from .cupti import after_profile_note
from .loaders import find_loaders, loader_fix
from .report import show_profile
from .results import ProfileResult
from .steps import UnreadableTrace, profiled_pass, step_profiler
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
_VALUED = ("--sort", "--row-limit", "--trace", "--warmup", "--steps", "--model", "--optimizer")


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


@dataclass
class Passes:
    """What the runs of the code were, for the report: which pass each figure comes from."""

    #: Put back after the warm-up and measured runs (``--warmup``/``--steps``), else ``None``.
    repeated: Restored | None = None
    #: Put back after the sync pass, where it was a run of its own (one measured run).
    sync_pass: Restored | None = None
    #: Why the syncs' lines were not looked for, if they were not ("" otherwise).
    sync_note: str = ""
    #: The cell's value: from its last real run.
    value: Any = None


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
        "--steps",
        type=positive_int,
        default=1,
        metavar="N",
        help="the code is one step: measure N runs of it, each a step (1)",
    )
    @argument(
        "--warmup",
        type=non_negative_int,
        default=0,
        metavar="N",
        help="run the code N times first, unmeasured (0)",
    )
    @argument("--model", metavar="NAME", help="the model the code trains (put back after runs)")
    @argument("--optimizer", metavar="NAME", help="the optimizer it steps (put back after runs)")
    @allow_side_effects_option("--warmup/--steps", "the code")
    @output_options()
    @needs_local_scope
    @line_cell_magic
    def profile(
        self, line: str, cell: str | None = None, local_ns: dict[str, Any] | None = None
    ) -> Any:
        """Profile a statement (%profile [options] STATEMENT) or the cell (%%profile).

        Runs it under torch.profiler and shows what took the time over the measured steps: a
        sortable table of the top ops (self/total CPU and GPU time, calls); the user's
        record_function ranges (e.g. Optimizer.step#AdamW.step) apart from the ops; the device
        synchronisations (cudaStreamSynchronize, cudaDeviceSynchronize, blocking copies: what
        .item(), .cpu() or print of a CUDA tensor do), the time the CPU was blocked in them and
        the lines that made them; a timeline of the steps, CPU ops and GPU kernels; the share of
        the steps the GPU was idle, split as Holistic Trace Analysis does (waiting on the host,
        between kernels, on copies); and one or two hints.

        Steps: the code is one step. --steps N runs it N times (torch.profiler's schedule, one
        ProfilerStep range each) after --warmup W unmeasured runs; the last warm-up run starts
        the profiler (its start-up falls outside the steps). The idle share is over whole step
        periods: from the first measured step's start to the end of the last one's CPU range or
        GPU work, whichever is later; start-up and the profiler's closing synchronisation are
        outside. More than one run goes through the magics' repeated-runs helper: it puts back
        what the runs changed (the model and optimizer named with --model/--optimizer, the
        tensors the code uses, the RNG), then the code runs once more, unprofiled, as the
        cell's own run, so the cell's effect is that of one run; code whose changes cannot be put
        back is refused before it runs (or --allow-side-effects).

        Syncs' lines come from their own pass, with CUDA's sync debug mode on, never while the
        GPU is profiled: the cell's own run after --warmup/--steps runs, or (one run) one more
        run that is put back, when the profile counted syncs. --stack places them from the
        profile instead. --trace FILE writes a Chrome/Perfetto trace (open it in
        ui.perfetto.dev). The profiler stops even if the code raises.
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
        called = with_call(self.shell.user_ns, cell)
        if called is not None:
            where = "%profile's statement" if first_line == 1 else "The cell"
            raise UsageError(
                f"{where} names {called.what} without calling it: running it would only look the "
                f"name up, and the profile would hold nothing of it. Call it: {called.call}"
            )
        cuda = bool(torch.cuda.is_available())
        sort = self._sort_key(args.sort, cuda)
        trace = self._trace_path(args.trace)
        if torch.autograd._profiler_enabled():
            raise UsageError(
                "A torch profiler is already running in this kernel (another %%profile or a "
                "torch.profiler.profile block): stop it first, then run this cell again."
            )
        code = CellCode(self.shell, cell, first_line=first_line)
        named = Named.from_options(self.shell.user_ns, args.model, args.optimizer)
        total = args.warmup + args.steps
        runs = self._repeated(args, code, named, total)  # refuses before anything runs
        from jupyter_gpu.magics.probes.precision import autocast_enabled

        autocast_on = autocast_enabled("cuda" if cuda else "cpu")
        prof = step_profiler(
            warmup=args.warmup,
            steps=args.steps,
            cuda=cuda,
            memory=args.memory,
            stack=args.stack,
        )
        cell_names = cell_filenames(self.shell)
        passes = Passes()
        start = time.perf_counter()
        try:
            if runs is None:
                passes.value = profiled_pass(
                    prof, lambda: code.run(local_ns), args.warmup, args.steps
                )
            else:
                try:
                    with runs.recording():
                        profiled_pass(
                            prof, runs.call(lambda: code.run(local_ns)), args.warmup, args.steps
                        )
                finally:
                    passes.repeated = runs.finish()
        except UnreadableTrace as lost:  # at the end of the steps: every run had finished
            value = lost.value if runs is None else code.run(local_ns)  # the cell's own run
            _trace_lost(lost)
            return None if args.output else value
        wall = time.perf_counter() - start
        # Places syncs without --stack; only where CUDA is up already (never initialises it).
        traced = cuda and not args.stack and torch.cuda.is_initialized()
        places: Counter[str] = Counter()
        if runs is not None:  # the cell's own run: unprofiled, the sync pass where CUDA is up
            passes.value, places = _run_once(code, local_ns, cell_names, traced)
        try:
            analysis = analyse(
                prof,
                cuda=cuda,
                autocast_on=autocast_on,
                cell_names=cell_names,
                stack=args.stack,
                timeline=not args.quiet,  # the bars only feed the figure
            )
        except UnicodeDecodeError as err:
            _trace_lost(err)
            return None if args.output else passes.value
        if runs is None and traced and analysis.syncs.count and (args.output or not args.quiet):
            places = self._sync_pass(code, local_ns, named, cell_names, passes)
        places.pop("?", None)  # counted by the profile; no line to show
        if places:
            analysis.syncs.places.update(places)
            analysis.syncs.places_from = "pass"
        if analysis.loader_s > 0:
            seen = find_loaders(self.shell.user_ns, analysis.loader_range)
            analysis.loader_seen = "; ".join(s.describe() for s in seen[:2])
            analysis.loader_fix = loader_fix(seen[0] if len(seen) == 1 else None, cuda=cuda)
        analysis.hints = hints(analysis, cuda=cuda, autocast_on=autocast_on)
        trace_problem = _export_trace(prof, trace) if trace is not None else None
        result = ProfileResult(
            rows=analysis.rows,
            gpu_idle_fraction=analysis.gpu_idle_fraction,
            hints=analysis.hints,
            wall_s=wall,
            trace_file=trace if trace_problem is None else None,
            sort=sort,
            kernel_count=analysis.kernel_count,
            value=passes.value,
            profiler=prof,
            ranges=analysis.ranges,
            sync_count=analysis.syncs.count,
            sync_places=dict(analysis.syncs.places),
            idle_s=analysis.idle_s,
            warmup=passes.repeated,
            warmup_warnings=runs.warning_notes() if runs is not None else [],
            steps=analysis.steps if analysis.window is not None else 0,
            window_s=analysis.window_s,
            window=analysis.window.span_text() if analysis.window is not None else "",
            sync_blocked_s=analysis.syncs.blocked_s,
            sync_pass=passes.sync_pass,
            sync_note=passes.sync_note,
            loader_s=analysis.loader_s,
        )
        if not args.quiet:
            show_profile(result, analysis, cuda=cuda, args=args)
            after = after_profile_note(cuda=cuda)
            if after is not None:
                show_note(after, warn=True)
        if trace_problem is not None:  # said even with -q: it stands for an error not raised
            show_note(
                f"--trace {args.trace}: the trace was not written ({trace_problem}).", warn=True
            )
        return result if args.output else passes.value

    # -------------------------------------------------------------------------- runs

    def _repeated(
        self, args: argparse.Namespace, code: CellCode, named: Named, total: int
    ) -> RepeatedRuns | None:
        """The repeated-runs helper for ``--warmup``/``--steps`` runs, ``None`` for one run.

        Raises:
            UsageError: --allow-side-effects with one run, or code whose changes cannot all be
                put back (before anything runs).
        """
        if total == 1:
            if args.allow_side_effects:
                raise UsageError(
                    "--allow-side-effects goes with --warmup N or --steps N (more than one run), "
                    "e.g. %%profile --steps 5 --allow-side-effects."
                )
            return None
        return RepeatedRuns(
            self.shell,
            code.codes,
            what=f"%%profile --warmup {args.warmup} --steps {args.steps}",
            named=named,
            allow_side_effects=args.allow_side_effects,
            expected_runs=f"{total} time(s), then once more as the cell's own run",
        )

    def _sync_pass(
        self,
        code: CellCode,
        local_ns: Any,
        named: Named,
        cell_names: dict[str, int],
        passes: Passes,
    ) -> Counter[str]:
        """One more run, sync-debug mode on and no profiler, put back: the syncs' lines.

        Only for a single measured run that made syncs (with more runs, the cell's own run
        finds them). Code whose changes cannot be put back is not run again, and an error in
        this extra run is not the cell's (the profiled run stands): the report says either.
        """
        try:
            runs = RepeatedRuns(
                self.shell,
                code.codes,
                what="%%profile's sync pass",
                named=named,
                expected_runs="once more, after the profiled run, to find the syncs' lines",
            )
        except UsageError as refused:
            passes.sync_note = (
                f"their lines were not looked for: {refused} (or --stack finds them in the "
                "profile itself)"
            )
            return Counter()
        spy = SyncSpy(cell_names)
        try:
            with runs.recording():
                with spy:
                    runs.call(lambda: code.run(local_ns))()
                synchronize()  # its work done before the state is put back
        except Exception as err:  # noqa: BLE001  # our extra run: the profiled one stands
            passes.sync_note = (
                f"their lines were not found: the sync pass (one more run) raised "
                f"{type(err).__name__}: {str(err)[:200]}"
            )
            return Counter()
        finally:
            passes.sync_pass = runs.finish()
        return spy.places

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


def _trace_lost(err: UnicodeDecodeError) -> None:
    """Say that torch could not read back its trace: the cell ran and its value stands.

    torch's own parse of its trace (at the end of the steps, or in ``prof.events()``) now and
    then meets a garbled event name (torch 2.13 on the CPU: about 1 run in 4 of one script, and
    6 of 20 runs of a ``--stack`` test, 2026-12-08); only the profile is lost.
    """
    show_note(
        f"%%profile: torch's profiler returned a trace it cannot read ({err.reason} in an event "
        "name), so this run has no profile. The cell itself ran; run it again to profile it.",
        warn=True,
    )


def _run_once(
    code: CellCode, local_ns: Any, cell_names: dict[str, int], traced: bool
) -> tuple[Any, Counter[str]]:
    """The cell's own run after the repeated ones: no profiler; the sync pass where ``traced``."""
    if not traced:
        return code.run(local_ns), Counter()
    spy = SyncSpy(cell_names)
    with spy:
        value = code.run(local_ns)
    return value, spy.places
