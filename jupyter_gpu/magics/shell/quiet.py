"""Torch's warnings, turned into one short note each that says what to do.

While the extension is loaded, the warnings that the magics provoke or that students meet in
these notebooks are caught and shown once per kernel as a note instead of a raw ``UserWarning``
or a ``W1201 ...`` log line:

- Python warnings whose text is known here (TF32 off, the old TF32 API, a profiler restarted
  without ``acc_events``, a FakeTensor's data pointer); any other warning passes untouched;
- torch.compile's WARNING log records (``torch._dynamo``, ``torch._inductor``): a filter on
  torch's own log handlers (``torch._logging._internal.handlers``) drops the record and shows
  the note, a known one with its fix, any other with its first line;
- the "skipping cudagraphs due to ..." record of the off-by-default ``cudagraphs`` artifact
  log, which would otherwise reach stderr through logging's last-resort handler.

A user who turned a log on with ``TORCH_LOGS`` keeps it: torch then sets that logger's level,
and records below WARNING are never touched. Nothing here imports torch.
"""

from __future__ import annotations

import logging
import re
import sys
import warnings
from collections.abc import Callable
from typing import Any

from jupyter_gpu.magics.output.render import show_note

_CUDAGRAPH_LOGGER = "torch._inductor.cudagraph_utils.__cudagraphs"
_COMPILE_LOGGERS = ("torch._dynamo", "torch._inductor", "torch.fx", "torch._functorch")

#: The note (and %compile's explanation) for CUDA graphs that replay on their slow path.
PENDING_BACKWARD = (
    "CUDA graphs ran on their slow path: a forward ran whose backward never did (an inference "
    "call on a model whose parameters require grad), so each call re-checks the graph's memory. "
    "Run inference under torch.no_grad() or torch.inference_mode(), or call "
    "torch.compiler.cudagraph_mark_step_begin() before each step."
)

#: (pattern, key, note). The key makes a note show once per kernel; ``{0}``... are the
#: pattern's groups.
KNOWN: tuple[tuple[re.Pattern[str], str, str], ...] = (
    (
        re.compile(r"TensorFloat32 tensor cores for float32 matrix multiplication available"),
        "tf32-off",
        "TF32 is off: float32 matmuls run in full precision on this GPU, not on the tensor "
        "cores TF32 uses (%amp compare measures the difference on your step). %amp tf32 on "
        "turns TF32 on (a 10-bit mantissa, as PyTorch's TF32 note says; fine for training); "
        "%amp on (bf16 autocast) runs the matmuls in 16 bits.",
    ),
    (
        re.compile(r"Please use the new API settings to control TF32|allow_tf32.*deprecat"),
        "tf32-api",
        "torch 2.9 and later set TF32 with torch.backends.cuda.matmul.fp32_precision = 'tf32' "
        "(and torch.backends.cudnn.conv.fp32_precision); allow_tf32 is the old API. "
        "%amp tf32 on uses the right one.",
    ),
    (
        re.compile(r"Profiler clears events at the end of each cycle"),
        "acc-events",
        "torch.profiler says a profiler clears its events at the end of each cycle: a "
        "torch.profiler.profile object started more than once reports only its last run (pass "
        "acc_events=True to keep every run, or use %%profile). torch 2.10 and 2.11 say this of "
        "every new profiler made without acc_events (pytorch#180348): for one started once, "
        "nothing is lost.",
    ),
    (
        re.compile(r"data pointer of FakeTensor"),
        "fake-tensor",
        "Code inspected torch.compile's stand-in tensors (FakeTensors), which hold no memory: "
        "harmless. Skip them with isinstance(t, torch._subclasses.FakeTensor).",
    ),
    (
        re.compile(
            r"torch._dynamo hit config\.(?:recompile_limit|cache_size_limit) \((\d+)\)"
            r"(?:.*?function: '([^']+)')?",
            re.DOTALL,
        ),
        "recompile-limit",
        "torch.compile stopped recompiling after {0} recompiles and runs that code eagerly "
        "from now on: its inputs change from call to call (shapes, Python numbers). Pass "
        "--dynamic to %compile for changing shapes, or keep changing values out of the "
        "compiled function; %compile's reports name each recompile's reason.",
    ),
    (
        re.compile(r"Profiler (?:record )?function .* will be ignored"),
        "profiler-label",
        "torch.compile leaves torch.profiler.record_function labels out of the code it "
        "compiles (torch.optim labels each optimizer.step() this way, as Optimizer.step#...): "
        "a profile of compiled code lacks those labels' ranges (no Optimizer.step row among "
        "%%profile's ranges) and still holds every op and kernel. Harmless.",
    ),
    (
        re.compile(r"not enough SMs to use max_autotune_gemm"),
        "few-sms",
        "max-autotune skipped its matmul search (this GPU has too few SMs for it) and used the "
        "default kernels: harmless; --mode max-autotune-no-cudagraphs or default does the same.",
    ),
    (
        re.compile(r"Unable to hit fast path of CUDAGraphs because of pending, uninvoked"),
        "cudagraphs-pending-backward",
        PENDING_BACKWARD,
    ),
    (
        re.compile(r"skipping cudagraphs due to ([^\n]*)"),
        "cudagraphs-skip",
        "CUDA graphs were skipped: {0}. Without them reduce-overhead launches every kernel as "
        "eager code does; %compile NAME --bench says why and how to fix it.",
    ),
)


class Quiet:
    """The note-once hooks of one shell: :meth:`install` on load, :meth:`uninstall` on unload."""

    def __init__(self, shell: Any, show: Callable[[str], None] | None = None) -> None:
        self.shell = shell
        self.shown: set[str] = set()
        self._show = show or _publish_note
        self._original_showwarning: Any = None
        self._filter = _TorchLogFilter(self)
        self._handler = _CudagraphHandler(self)
        self._filtered: list[logging.Handler] = []
        self._cudagraph_logger: logging.Logger | None = None
        self.paused = 0  # >0 while a magic collects these records itself (DynamoWatch)

    # ------------------------------------------------------------------ hooks

    def install(self) -> None:
        self._original_showwarning = warnings.showwarning
        warnings.showwarning = self._showwarning
        self.shell.events.register("pre_run_cell", self.attach)
        self.attach()

    def uninstall(self) -> None:
        if warnings.showwarning == self._showwarning:
            warnings.showwarning = self._original_showwarning
        if self.attach in self.shell.events.callbacks["pre_run_cell"]:
            self.shell.events.unregister("pre_run_cell", self.attach)
        for handler in self._filtered:
            handler.removeFilter(self._filter)
        self._filtered.clear()
        if self._cudagraph_logger is not None:
            self._cudagraph_logger.removeHandler(self._handler)
            self._cudagraph_logger = None

    def attach(self, info: Any = None) -> None:
        """Put the filter on torch's log handlers (new ones appear when torch sets its logs)."""
        internal = sys.modules.get("torch._logging._internal")
        if internal is None:  # torch not imported yet: nothing logs
            return
        for handler in list(getattr(internal, "handlers", ())):
            if self._filter not in handler.filters:
                handler.addFilter(self._filter)
                self._filtered.append(handler)
        if self._cudagraph_logger is None:
            logger = logging.getLogger(_CUDAGRAPH_LOGGER)
            if not logger.propagate:  # off (the default): records would go to last resort
                logger.addHandler(self._handler)
                self._cudagraph_logger = logger

    # ------------------------------------------------------------------ notes

    def note_for(self, message: str) -> tuple[str, str] | None:
        """(key, note) for a known message, else ``None``."""
        for pattern, key, note in KNOWN:
            match = pattern.search(message)
            if match:
                groups = [g or "" for g in match.groups()]
                return key, note.format(*groups)
        return None

    def note(self, key: str, text: str) -> None:
        if key in self.shown:
            return
        self.shown.add(key)
        self._show(text)

    def _showwarning(self, message: Any, category: Any, *args: Any, **kwargs: Any) -> None:
        found = self.note_for(str(message))
        if found is None:
            self._original_showwarning(message, category, *args, **kwargs)
            return
        self.note(*found)

    def log_record(self, record: logging.LogRecord) -> None:
        """A torch.compile WARNING record: its note (known, or its first line)."""
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001  # a malformed record must never break the user's code
            return
        found = self.note_for(message)
        if found is None:
            first = message.strip().splitlines()[0][:200] if message.strip() else record.name
            found = (
                f"log:{first}",
                f"torch.compile warned: {first} (it keeps running; TORCH_LOGS shows the full log).",
            )
        self.note(*found)


class _TorchLogFilter(logging.Filter):
    """On torch's handlers: WARNING records of torch.compile become notes, not log lines."""

    def __init__(self, quiet: Quiet) -> None:
        super().__init__()
        self.quiet = quiet

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING or record.levelno >= logging.ERROR:
            return True
        if not record.name.startswith(_COMPILE_LOGGERS):
            return True
        self.quiet.log_record(record)
        return False


class _CudagraphHandler(logging.Handler):
    """On the cudagraphs artifact logger, while it is off: its skip warnings become a note."""

    def __init__(self, quiet: Quiet) -> None:
        super().__init__(logging.WARNING)
        self.quiet = quiet

    def emit(self, record: logging.LogRecord) -> None:
        if self.quiet.paused:  # %compile's watch reports the skip itself
            return
        self.quiet.log_record(record)


def _publish_note(text: str) -> None:
    show_note(f"Note: {text}", warn=True)


#: The ``Quiet`` of each loaded shell (one kernel has one), for the magics that pause it.
ACTIVE: list[Quiet] = []
