"""What torch.compile did during a stretch of code: graphs, graph breaks, recompiles, caches.

``torch._dynamo.explain`` would answer some of this, but it resets dynamo and so throws away
every other compiled model in the notebook. Instead a :class:`DynamoWatch` diffs dynamo's own
records around the code:

- ``torch._dynamo.utils.counters``: ``stats.unique_graphs``, ``graph_break`` (reason -> count),
  ``inductor.fxgraph_cache_hit/miss``, ``aot_autograd.autograd_cache_hit/miss``;
- ``torch._dynamo.utils.get_compilation_metrics()``: one record per compiled frame, with its
  compile time, ``recompile_reason`` and ``fail_reason``;
- the ``graph_breaks`` artifact log, which names the user's file and line of each break, and
  the ``cudagraphs`` one, which says why CUDA graphs were skipped ("skipping cudagraphs due to
  mutated inputs"; off by default, it still reaches stderr through logging's last-resort
  handler). Their loggers are switched to DEBUG for the stretch, with their output kept to us
  (unless the user turned them on with ``TORCH_LOGS``), and put back afterwards.
"""

from __future__ import annotations

import linecache
import logging
import re
import time
from dataclasses import dataclass, field, replace
from typing import Any

_GRAPH_BREAK_LOGGERS = (
    "torch._dynamo.symbolic_convert.__graph_breaks",
    "torch._dynamo.convert_frame.__graph_breaks",
    "torch._dynamo.exc.__graph_breaks",
)
_CUDAGRAPH_LOGGERS = ("torch._inductor.cudagraph_utils.__cudagraphs",)
_CUDAGRAPH_SKIP = re.compile(r"skipping cudagraphs due to (?P<reason>.*)", re.DOTALL)
_BREAK_RE = re.compile(
    r"in user code at (?P<file>.+?):(?P<line>\d+)\s*\nGraph Break Reason: (?P<reason>.*?)"
    r"(?:\n\s*\nUser code traceback:|\Z)",
    re.DOTALL,
)
_URL_RE = re.compile(r"https://\S+\.html")


@dataclass(frozen=True)
class GraphBreak:
    """One graph break: why, and where in the user's code (``where`` reads "cell [7] line 3")."""

    reason: str
    explanation: str
    filename: str
    lineno: int
    where: str
    source: str
    count: int = 1
    url: str | None = None


@dataclass(frozen=True)
class Recompile:
    """A frame compiled again: which function, and the guard that failed."""

    function: str
    reason: str


@dataclass
class CompileReport:
    """What torch.compile did in one stretch (a cell, or ``--bench``'s first call)."""

    compile_time_s: float
    wall_s: float
    frames: int
    graphs: int
    graph_break_count: int
    graph_breaks: list[GraphBreak] = field(default_factory=list)
    recompiles: list[Recompile] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    cache_hits: dict[str, int] = field(default_factory=dict)
    cache_misses: dict[str, int] = field(default_factory=dict)
    #: Bytes the stretch added to the on-disk caches; ``None`` while being measured (the
    #: walk ends after the cell when the cache is large: cache_walk.py) or when unknown.
    cache_bytes_added: int | None = None
    cache_pending: bool = False
    cell: int | None = None
    #: Why CUDA graphs were skipped, torch's words ("mutated inputs (1 instances)").
    cudagraph_skips: list[str] = field(default_factory=list)
    #: The compiled frames: (file, first line, function), to tell whose code compiled.
    frame_codes: list[tuple[str, int, str]] = field(default_factory=list)


def summarize_reason(reason: str) -> tuple[str, str, str | None]:
    """(headline, explanation, documentation URL) from dynamo's graph-break reason text."""
    url_match = _URL_RE.search(reason)
    lines = [line.strip() for line in reason.splitlines() if line.strip()]
    headline, explanation = "", ""
    for line in lines:
        if line.startswith("Encountered graph break when attempting"):
            continue
        if line.startswith("Explanation:") and not explanation:
            explanation = line.removeprefix("Explanation:").strip()
        elif not headline and not line.startswith(("Hint:", "Developer debug", "For more")):
            headline = line
    return (
        headline or (lines[0] if lines else "unknown"),
        explanation,
        (url_match.group(0) if url_match else None),
    )


class _BreakCollector(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.messages.append(record.getMessage())
        except Exception:  # noqa: BLE001  # a malformed record must never break the user's code
            return


def _counter_snapshot() -> dict[str, dict[str, int]]:
    from torch._dynamo.utils import counters

    return {group: dict(values) for group, values in counters.items()}


def _metrics() -> list[Any]:
    try:
        from torch._dynamo.utils import get_compilation_metrics
    except ImportError:  # older torch: no per-frame records
        return []
    return list(get_compilation_metrics())


class DynamoWatch:
    """Record what torch.compile does between :meth:`start` and :meth:`stop`."""

    def __init__(self) -> None:
        self._collector = _BreakCollector()
        self._cudagraphs = _BreakCollector()
        self._saved: list[tuple[logging.Logger, int, bool, _BreakCollector]] = []
        self._counters: dict[str, dict[str, int]] = {}
        self._metric_ids: set[int] = set()
        self._paused: list[Any] = []
        self._start = 0.0

    def start(self) -> None:
        self._counters = _counter_snapshot()
        self._metric_ids = {id(m) for m in _metrics()}
        loggers = [(name, self._collector) for name in _GRAPH_BREAK_LOGGERS]
        loggers += [(name, self._cudagraphs) for name in _CUDAGRAPH_LOGGERS]
        for name, collector in loggers:
            logger = logging.getLogger(name)
            self._saved.append((logger, logger.level, logger.propagate, collector))
            user_enabled = logger.level != logging.NOTSET and logger.level <= logging.DEBUG
            logger.addHandler(collector)
            if not user_enabled:  # keep the records to ourselves: nothing printed
                logger.setLevel(logging.DEBUG)
                logger.propagate = False
        from jupyter_gpu.magics.shell.quiet import ACTIVE

        self._paused = list(ACTIVE)
        for quiet in self._paused:  # the skip reasons are ours to report now
            quiet.paused += 1
        self._start = time.perf_counter()

    def stop(self, cell_names: dict[str, int]) -> CompileReport | None:
        """The report, or ``None`` if nothing was compiled; always detaches from the loggers."""
        wall = time.perf_counter() - self._start
        for logger, level, propagate, collector in self._saved:
            logger.removeHandler(collector)
            logger.setLevel(level)
            logger.propagate = propagate
        self._saved.clear()
        for quiet in self._paused:
            quiet.paused -= 1
        self._paused = []
        new = [m for m in _metrics() if id(m) not in self._metric_ids]
        after = _counter_snapshot()

        def delta(group: str, key: str) -> int:
            return int(after.get(group, {}).get(key, 0) - self._counters.get(group, {}).get(key, 0))

        breaks = sum(
            count - self._counters.get("graph_break", {}).get(reason, 0)
            for reason, count in after.get("graph_break", {}).items()
        )
        graphs = delta("stats", "unique_graphs")
        skips = self._cudagraph_skips(new)
        if not new and graphs == 0 and breaks == 0 and not skips:
            return None
        report = CompileReport(
            compile_time_s=sum(
                float(getattr(m, "entire_frame_compile_time_s", 0) or 0) for m in new
            ),
            wall_s=wall,
            frames=len(new),
            graphs=graphs,
            graph_break_count=breaks,
            graph_breaks=self._graph_breaks(cell_names),
            recompiles=[
                Recompile(str(getattr(m, "co_name", "?")), str(m.recompile_reason))
                for m in new
                if getattr(m, "recompile_reason", None)
            ],
            failures=[str(m.fail_reason) for m in new if getattr(m, "fail_reason", None)],
            cache_hits={
                "FX graph": delta("inductor", "fxgraph_cache_hit"),
                "AOTAutograd": delta("aot_autograd", "autograd_cache_hit"),
            },
            cache_misses={
                "FX graph": delta("inductor", "fxgraph_cache_miss"),
                "AOTAutograd": delta("aot_autograd", "autograd_cache_miss"),
            },
            cudagraph_skips=skips,
            frame_codes=[
                (str(m.co_filename), int(m.co_firstlineno or 0), str(m.co_name))
                for m in new
                if getattr(m, "co_filename", None)
            ],
        )
        return report

    def _cudagraph_skips(self, new_metrics: list[Any]) -> list[str]:
        """The reasons torch gave for skipping CUDA graphs in the stretch, each once, in order."""
        found: list[str] = []
        texts = [str(getattr(m, "cudagraph_skip_reason", None) or "") for m in new_metrics]
        for text in [*self._cudagraphs.messages, *texts]:
            match = _CUDAGRAPH_SKIP.search(text)
            if match is None:
                continue
            reason = match["reason"].strip().splitlines()[0].split("Found from")[0].strip(" .")
            if reason and reason not in found:
                found.append(reason)
        return found

    def _graph_breaks(self, cell_names: dict[str, int]) -> list[GraphBreak]:
        found: dict[tuple[str, int, str], GraphBreak] = {}
        for message in self._collector.messages:
            match = _BREAK_RE.search(message)
            if match is None:
                continue
            filename, lineno = match["file"], int(match["line"])
            headline, explanation, url = summarize_reason(match["reason"])
            key = (filename, lineno, headline)
            if key in found:
                found[key] = replace(found[key], count=found[key].count + 1)
                continue
            where = (
                f"cell [{cell_names[filename]}] line {lineno}"
                if filename in cell_names
                else f"{filename}:{lineno}"
            )
            source = linecache.getline(filename, lineno).strip()
            found[key] = GraphBreak(headline, explanation, filename, lineno, where, source, 1, url)
        return list(found.values())
