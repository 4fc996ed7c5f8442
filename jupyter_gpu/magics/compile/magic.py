"""``%compile NAME``: torch.compile a notebook's model or function in place, and report on it."""

from __future__ import annotations

import argparse
import contextlib
import inspect
from collections.abc import Callable, Iterator
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import line_magic, magics_class

from jupyter_gpu.magics.output.render import show_note
from jupyter_gpu.magics.probes.evidence import profile_one_call
from jupyter_gpu.magics.replay.reach import Named
from jupyter_gpu.magics.replay.runs import RepeatedRuns
from jupyter_gpu.magics.shell.args import (
    ShellMagics,
    allow_side_effects_option,
    argument,
    compile_expression,
    is_attribute,
    lookup,
    lookup_optimizer,
    magic_arguments,
    output_options,
    parse,
    type_name,
)
from jupyter_gpu.magics.shell.cell import cell_filenames, running_cell
from jupyter_gpu.magics.shell.lazy_torch import cuda_in_use, torch_module
from jupyter_gpu.measure import Ratio, Variant, compare

from .cache_walk import SIZER, WAIT_S
from .dynamo_watch import CompileReport, DynamoWatch
from .explain import bench_explanations, from_report, precision_now
from .report import show_bench, show_compiled, show_report
from .results import BenchResult, CompileResult

_PENDING_BACKWARD = "Unable to hit fast path of CUDAGraphs because of pending, uninvoked"

#: Below this speedup, compiled is "no faster" and --bench says why.
_NO_FASTER = 1.1
#: About how long the interleaved eager/compiled rounds take (seconds), both together.
_BENCH_S = 2.0


def _clearly_faster(ratio: Ratio) -> bool:
    """Compiled is measurably faster, by 10 % or more: no "why no faster" is owed."""
    return ratio.faster and ratio.value >= _NO_FASTER


def measure_cache(report: CompileReport) -> None:
    """Bytes the compile added on disk: at once for a small cache, else when the walk ends.

    The difference between the walk before (the last finished one) and a walk now; a walk
    that outlasts ``WAIT_S`` leaves the figure to the background thread and the report says
    it is being measured.
    """
    before = SIZER.latest
    walk = SIZER.refresh()
    done, now = walk.wait(WAIT_S)
    if done:
        if before is not None and now is not None:
            report.cache_bytes_added = max(0, now - before)
        return
    report.cache_pending = True

    def fill(after: int | None) -> None:
        report.cache_pending = False
        if before is not None and after is not None:
            report.cache_bytes_added = max(0, after - before)

    walk.then(fill)


def bound(
    namespace: dict[str, Any], name: str, value: Any
) -> Callable[[], contextlib.AbstractContextManager[None]]:
    """A context that binds ``name`` to ``value`` in ``namespace``: one variant of the bench.

    Not put back on exit: the bench binds the next variant's model, and the name ends as the
    compiled one (tests/gpu/test_magics_gpu.py runs ``compare()`` with it, outside the magic).
    """

    @contextlib.contextmanager
    def binding() -> Iterator[None]:
        namespace[name] = value
        yield

    return binding


def eager_original(value: Any) -> Any | None:
    """The eager object behind a ``torch.compile`` result, or ``None`` if it is not compiled."""
    torch_module()
    from torch._dynamo.eval_frame import OptimizedModule

    if isinstance(value, OptimizedModule):
        return value._orig_mod
    return getattr(value, "_torchdynamo_orig_callable", None)


class CompileWatcher:
    """Pre/post-run-cell hooks: after a cell in which torch.compile compiled, report it.

    torch.compile compiles at the first call, so the report of ``%compile NAME`` (without
    ``--bench``) comes after the cell that first calls ``NAME``; recompiles later show the same
    way. The on-disk caches are walked in a background thread (cache_walk.py) after a cell that
    compiled: the cell waits for the walk a few milliseconds at most.
    """

    def __init__(self, magics: CompileMagics) -> None:
        self.magics = magics
        self.shell = magics.shell
        self.watch: DynamoWatch | None = None
        #: Names of the compiled modules called in this cell (their forward pre-hooks add them).
        self.called: set[str] = set()

    def start(self) -> None:
        self.shell.events.register("pre_run_cell", self.pre_run_cell)
        self.shell.events.register("post_run_cell", self.post_run_cell)

    def stop(self) -> None:
        for event, fn in (
            ("pre_run_cell", self.pre_run_cell),
            ("post_run_cell", self.post_run_cell),
        ):
            if fn in self.shell.events.callbacks[event]:
                self.shell.events.unregister(event, fn)
        if self.watch is not None:
            self.watch.stop({})
            self.watch = None

    def rebaseline(self) -> None:
        """Forget what happened so far in this cell (``--bench`` reported it already)."""
        self.pre_run_cell()  # it drops the running watch and starts a fresh one

    def pre_run_cell(self, info: Any = None) -> None:
        if self.watch is not None:
            self.watch.stop({})
        self.called.clear()
        self.watch = DynamoWatch()
        self.watch.start()

    def post_run_cell(self, result: Any = None) -> None:
        watch, self.watch = self.watch, None
        if watch is None:
            return
        report = watch.stop(cell_filenames(self.shell))
        if report is None:
            return
        report.cell = getattr(result, "execution_count", None)
        measure_cache(report)
        owners = [r for r in self.magics.results.values() if r.owns(report, self.called)]
        explanations = from_report(report)
        for result in owners:
            result.reports.append(report)
            result.explanations.extend(explanations)
        # Quiet when every result it belongs to asked for -q; a compile none of them made (a
        # plain torch.compile in the cell) is reported unless every result is quiet.
        voices = owners or list(self.magics.results.values())
        if not voices or any(not r.quiet for r in voices):
            show_report(report, "in this cell", explanations)


@magics_class
class CompileMagics(ShellMagics):
    """``%compile``; keeps the results of earlier ``%compile`` calls for their later reports."""

    def __init__(self, shell: Any) -> None:
        super().__init__(shell)
        self.results: dict[str, CompileResult] = {}
        self.watcher: CompileWatcher | None = None

    @magic_arguments()
    @argument("name", help="variable holding a torch.nn.Module or a function")
    @argument("--mode", help="inductor mode: default, reduce-overhead, max-autotune, ...")
    @argument("--fullgraph", action="store_true", help="a graph break is an error")
    @argument("--dynamic", action="store_true", default=None, help="compile for dynamic shapes")
    @argument("--backend", help="registered backend (inductor, eager, aot_eager, ...) or a name")
    @argument(
        "--bench", metavar="EXPR", help='compile now and time eager vs compiled, e.g. "model(x)"'
    )
    @argument(
        "--optimizer", metavar="NAME", help="--bench: the optimizer EXPR steps (put back after)"
    )
    @allow_side_effects_option("--bench", "EXPR")
    @argument("--undo", action="store_true", help="bind NAME to its eager original again")
    @output_options()
    @line_magic
    def compile(self, line: str) -> CompileResult | None:
        """torch.compile the module or function bound to NAME, and rebind NAME to the result.

        The eager original stays reachable (NAME._orig_mod for a module, the result's .eager,
        %compile NAME --undo). torch.compile works at the first call: the report (compile time,
        graphs, graph breaks with their reason and source line, recompiles, cache hits and
        misses, bytes added to the on-disk caches) follows the cell that first calls NAME.
        --bench "model(x)" compiles now and times eager vs compiled in interleaved rounds (the
        speedup with its interval; CUDA events on a GPU). EXPR runs many times; afterwards
        NAME's model, the optimizer given with --optimizer, the tensors EXPR uses, the RNG and
        the gradients are put back bit for bit. If EXPR would change what cannot be put back (an
        optimizer not named, a file, an object the magic cannot look into), it refuses before
        running: name it, or pass --allow-side-effects. Never calls torch._dynamo.explain, which
        would reset every other compiled model.
        """
        args = parse(CompileMagics.compile, line)
        torch_module()  # the UsageError that says how to install torch, where it is missing
        import torch

        name = args.name
        if is_attribute(name):
            # %compile rebinds a notebook name; an attribute is the user's to assign.
            raise UsageError(
                f"%compile rebinds a notebook name, and {name} is an attribute: compile it in "
                f"place with {name} = torch.compile({name}), or bind it to a name and compile "
                "that (what holds the attribute keeps the eager one)."
            )
        value = lookup(self.shell.user_ns, name)
        original = eager_original(value)
        if args.undo:
            return self._undo(name, value, original, args)
        eager = value if original is None else original
        self._check_target(name, eager)
        options = self._options(args)
        bench_code = compile_expression(self.shell, args.bench, "--bench") if args.bench else None
        runs = self._runs(name, eager, bench_code, args)  # refuses before anything runs
        try:
            compiled = torch.compile(eager, **options)
        except (RuntimeError, ValueError, TypeError) as exc:
            raise UsageError(f"torch.compile refused these options: {exc}") from None
        result = CompileResult(name, eager, compiled, options, quiet=args.quiet)
        if runs is not None:
            runs.save_also(name, compiled)  # NAME is the compiled wrapper in half of the runs
        self.shell.user_ns[name] = compiled
        try:
            if bench_code is not None and runs is not None:
                self._bench(result, bench_code, args.bench, args.quiet, runs)
        except BaseException:
            self.shell.user_ns[name] = value  # a failure leaves NAME as it was
            raise
        self.results[name] = result
        self._ensure_watcher()
        self._track_calls(result)
        if not args.quiet and bench_code is None:
            show_compiled(result.name, eager, options)
        return result if args.output else None

    # -------------------------------------------------------------------------- checks

    @staticmethod
    def _check_target(name: str, eager: object) -> None:
        import torch  # loaded already: the magic imported it

        if isinstance(eager, torch.nn.Module):
            return
        if inspect.isclass(eager):
            raise UsageError(
                f"{name} is a class: compile an instance or a function, e.g. "
                f"model = {name}(); %compile model."
            )
        if isinstance(eager, torch.Tensor) or not callable(eager):
            raise UsageError(
                f"{name} is a {type_name(eager)}, not a torch.nn.Module or a function: "
                "%compile takes the name of a model or of a function that runs tensors."
            )

    def _runs(
        self, name: str, eager: Any, code: Any, args: argparse.Namespace
    ) -> RepeatedRuns | None:
        """The repeated runs of ``--bench`` (``None`` without it), checked before any runs.

        Raises:
            UsageError: ``--optimizer``/``--allow-side-effects`` without ``--bench``, an
                ``--optimizer`` that is not one, or an expression whose changes cannot all be
                put back (unless ``--allow-side-effects``).
        """
        if code is None:
            if args.optimizer or args.allow_side_effects:
                raise UsageError(
                    "--optimizer and --allow-side-effects go with --bench, e.g. %compile model "
                    '--bench "train_step()" --optimizer opt.'
                )
            return None
        import torch  # loaded already: the magic imported it

        optimizers = {}
        if args.optimizer:
            optimizers[args.optimizer] = lookup_optimizer(self.shell.user_ns, args.optimizer)
        models = {name: eager} if isinstance(eager, torch.nn.Module) else {}
        runs = RepeatedRuns(
            self.shell,
            [code],
            what=f'--bench "{args.bench}"',
            named=Named(models, optimizers, model_option="", optimizer_option="--optimizer"),
            allow_side_effects=args.allow_side_effects,
            expected_runs="many times (warm-up, then interleaved rounds of eager and compiled, "
            "about a second of timed runs each)",
        )
        routes = runs.reached.named_routes.get(name, [])
        if models and name not in runs.reached.loaded_names:
            # The bench binds the name to each model in turn: held another way (a closure,
            # trainer.model), the compiled one would never run, and eager be timed twice.
            how = f"holds {name} as {', '.join(routes[:2])}" if routes else f"does not use {name}"
            raise UsageError(
                f'--bench "{args.bench}" never loads the name {name} (it {how}), and the bench '
                f"binds {name} to the eager and the compiled model in turn: both would time "
                f'the eager one. Bench an expression that uses {name}, e.g. --bench "{name}(x)".'
            )
        return runs

    def _options(self, args: argparse.Namespace) -> dict[str, Any]:
        import torch  # loaded already: the magic imported it

        options: dict[str, Any] = {"fullgraph": args.fullgraph, "dynamic": args.dynamic}
        backend: Any = args.backend or "inductor"
        if args.backend is not None:
            backend = self._backend(args.backend)
        options["backend"] = backend
        if args.mode is not None:
            if backend != "inductor":
                raise UsageError(
                    f"--mode {args.mode} applies to the inductor backend only: drop --mode or "
                    "drop --backend."
                )
            modes = list(getattr(torch._inductor, "list_mode_options", dict)() or {})
            if modes and args.mode not in modes:
                raise UsageError(f"--mode {args.mode}: unknown; use one of {', '.join(modes)}.")
            options["mode"] = args.mode
        return options

    def _backend(self, name: str) -> Any:
        from torch._dynamo import list_backends

        try:
            known = list(list_backends(exclude_tags=()))
        except TypeError:  # older torch: no exclude_tags
            known = list(list_backends())
        known += ["eager", "aot_eager", "inductor"]
        if name in known:
            return name
        candidate = self.shell.user_ns.get(name)
        if callable(candidate):
            return candidate
        raise UsageError(
            f"--backend {name}: not a registered backend nor a function in the notebook; "
            f"registered: {', '.join(sorted(set(known)))}."
        )

    # -------------------------------------------------------------------------- actions

    def _undo(
        self, name: str, value: Any, original: Any, args: argparse.Namespace
    ) -> CompileResult | None:
        if original is None:
            raise UsageError(f"{name} is not a torch.compile result: there is nothing to undo.")
        self.shell.user_ns[name] = original
        result = self.results.pop(name, None)
        if not args.quiet:
            show_note(
                f"{name} is the eager {type_name(original)} again (the compiled one is dropped)."
            )
        return result if args.output else None

    def _bench(
        self, result: CompileResult, code: Any, expr: str, quiet: bool, runs: RepeatedRuns
    ) -> None:
        user_ns = self.shell.user_ns
        run = runs.call(lambda: eval(code, user_ns))  # noqa: S307  # the user's own expression
        report: CompileReport | None = None
        profile = None

        try:
            with runs.recording():
                user_ns[result.name] = result.compiled
                watch = DynamoWatch()
                watch.start()
                try:
                    run()  # the first call compiles (timed apart: it is not the steady state)
                finally:
                    report = watch.stop(cell_filenames(self.shell))
                if report is not None:
                    report.cell = running_cell(self.shell)
                    measure_cache(report)
                    result.reports.append(report)
                    if not quiet:
                        show_report(report, f"at the first call of {expr}")
                # Three warm-up calls: CUDA graphs (reduce-overhead) record on the second or
                # third call. Eager and compiled then take turns, round after round.
                comparison = compare(
                    {
                        "eager": Variant(run, bound(user_ns, result.name, result.eager)),
                        "compiled": Variant(run, bound(user_ns, result.name, result.compiled)),
                    },
                    warmup=3,
                    target_s=_BENCH_S,
                )
                ratio = comparison.ratio("compiled")
                if not _clearly_faster(ratio):
                    user_ns[result.name] = result.compiled
                    profile = profile_one_call(run)  # the evidence for "why no faster"
        finally:
            user_ns[result.name] = result.compiled
            restored = runs.finish()
        pending = runs.warnings.pop(_PENDING_BACKWARD)
        bench = result.bench = BenchResult(
            expr,
            comparison["eager"],
            comparison["compiled"],
            cuda=cuda_in_use(),
            restored=restored,
            warnings=tuple(runs.warning_notes()),
            ratio=ratio,
            machine=comparison.machine,
            method=comparison.method(),
        )
        slow = not _clearly_faster(ratio)
        if slow:
            explanations = bench_explanations(
                eager_s=bench.eager_s,
                compiled_s=bench.compiled_s,
                cuda=bench.cuda,
                options=result.options,
                report=report,
                profile=profile,
                pending_backward=pending,
                precision=precision_now(),
            )
        else:
            explanations = from_report(report) if report is not None else []
        result.explanations.extend(explanations)
        if self.watcher is not None:
            self.watcher.rebaseline()
        if not quiet:
            show_bench(bench, explanations if slow else [])

    def _track_calls(self, result: CompileResult) -> None:
        """A compiled module tells the watcher when a cell calls it (its reports are its own)."""
        import torch  # loaded already: the magic imported it

        if self.watcher is None or not isinstance(result.compiled, torch.nn.Module):
            return
        called, name = self.watcher.called, result.name

        def mark(module: Any, args: Any) -> None:
            called.add(name)

        result.compiled.register_forward_pre_hook(mark)

    def _ensure_watcher(self) -> None:
        if self.watcher is None:
            self.watcher = CompileWatcher(self)
            if SIZER.latest is None:
                SIZER.refresh()  # the baseline, walked in the background
            self.watcher.start()
            self.watcher.pre_run_cell()  # this cell's compiles (none yet) count from now

    def unload(self) -> None:
        """Remove the reporter hooks (``%unload_ext``)."""
        if self.watcher is not None:
            self.watcher.stop()
            self.watcher = None
