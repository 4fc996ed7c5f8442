"""The one way a magic runs user code again and again and leaves the notebook as it was.

``%compile --bench``, ``%amp compare`` and ``%%profile --warmup`` run the user's expression or
cell many times. :class:`RepeatedRuns` is what each of them goes through:

1. before anything runs, it reads what the code reaches (``reach.py``); if the runs would
   change something it cannot put back (an optimizer that is not named, a file, an object it
   cannot look into), it raises a ``UsageError`` that names each one and the option that fixes
   it, or ``--allow-side-effects``;
2. it saves the named models (with their hooks and submodules) and optimizers (with every
   parameter they step), the tensors, gradients and other state the code reaches, objects with
   a ``state_dict`` (schedulers, scalers), the RNG, the process-wide settings and the CUDA peak
   counters (``state.py``);
3. the magic runs the code through :meth:`RepeatedRuns.call` (counted), inside
   :meth:`RepeatedRuns.recording`, which keeps each warning the user's code raises to be said
   once, in the magic's words, and drops those the magic's own machinery raises;
4. :meth:`RepeatedRuns.finish` puts everything back, compares it with the saved copy and
   returns what it put back, part by part (:class:`Restored`), with the one line the report
   prints: that line names only what was compared, and says what was put back but could not be
   compared.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from types import CodeType
from typing import Any

from IPython.core.error import UsageError

from jupyter_gpu.magics.output.render import fmt_bytes
from jupyter_gpu.magics.shell.cell import cell_filenames

from .reach import Named, Problem, reach
from .state import RestoredPart, SavedState

__all__ = ["RepeatedRuns", "Restored", "RestoredPart", "refusal", "restored_line"]

#: Warnings raised by these files are the magic's own doing (its profiler), never the user's.
_OWN_WARNING_FILES = ("/torch/profiler/", "/torch/autograd/profiler", "\\torch\\profiler\\")


@dataclass
class Restored:
    """What :meth:`RepeatedRuns.finish` put back, and the report's line for it.

    ``parts`` lists each thing saved and put back (a model, an optimizer, a scheduler's
    state_dict, a tensor, a gradient, the RNG, each process-wide setting) and whether it was
    compared with its saved copy afterwards; ``line`` says the same in words.
    """

    runs: int
    parts: list[RestoredPart] = field(default_factory=list)
    #: What differs from its saved copy after restoring (labels); empty when all match.
    mismatched: list[str] = field(default_factory=list)
    #: What the runs had changed in the models' and optimizers' tables and in the process-wide
    #: settings (words: "model's hooks", "anomaly mode"); all of it was put back.
    changed: list[str] = field(default_factory=list)
    #: CUDA device -> (peak before, peak now) where a run raised torch's peak counter.
    peaks_raised: dict[int, tuple[int, int]] = field(default_factory=dict)
    #: What was not put back (``--allow-side-effects``).
    not_restored: list[str] = field(default_factory=list)
    line: str = ""
    #: Whether CUDA was in use (the peak counters exist).
    cuda: bool = False

    @property
    def names(self) -> list[str]:
        """The labels of what was compared after putting it back (settings included)."""
        return [p.label for p in self.parts if p.compared]

    @property
    def uncompared(self) -> list[RestoredPart]:
        """What was put back but could not be compared with its saved copy."""
        return [p for p in self.parts if not p.compared]

    @property
    def exact(self) -> bool:
        """Everything saved was compared and is back; nothing was left out; peaks unmoved.

        Left out: what ``--allow-side-effects`` ran without saving.
        """
        return (
            not self.mismatched
            and not self.peaks_raised
            and not self.not_restored
            and not self.uncompared
        )


@dataclass
class UserWarnings:
    """The warnings the user's code raised during the runs: each once, with its count."""

    seen: dict[tuple[str, type[Warning]], tuple[warnings.WarningMessage, int]] = field(
        default_factory=dict
    )

    def add(self, caught: Iterable[warnings.WarningMessage]) -> None:
        for w in caught:
            filename = str(w.filename).replace("\\", "/")
            if any(part.replace("\\", "/") in filename for part in _OWN_WARNING_FILES):
                continue  # the magic's own profiler, not the user's code
            key = (str(w.message), w.category)
            first, count = self.seen.get(key, (w, 0))
            self.seen[key] = (first, count + 1)

    def pop(self, phrase: str) -> bool:
        """Drop the warnings whose text holds ``phrase``; whether there was one.

        For the warnings a magic turns into an explanation of its own (CUDA graphs' slow
        path in ``%compile --bench``).
        """
        found = [key for key in self.seen if phrase in key[0]]
        for key in found:
            del self.seen[key]
        return bool(found)

    def notes(self, what: str) -> list[str]:
        """One sentence per distinct warning, in the order they first came.

        A warning the extension knows (shell/quiet.py: TF32 off, a FakeTensor's data
        pointer...) gets its note, once per kernel as everywhere else; any other is quoted,
        with how often it came and where from.
        """
        from jupyter_gpu.magics.shell.quiet import ACTIVE

        out = []
        for (message, category), (w, count) in self.seen.items():
            known = ACTIVE[-1].note_for(message) if ACTIVE else None
            if known is not None:
                key, note = known
                if key not in ACTIVE[-1].shown:
                    ACTIVE[-1].shown.add(key)
                    out.append(note)
                continue
            first = message.strip().splitlines()[0][:300] if message.strip() else category.__name__
            times = f" ({count:,} times)" if count > 1 else ""
            where = f"{str(w.filename).rsplit('/', 1)[-1]}:{w.lineno}"
            out.append(f"{what} warned{times}: {first} (from {where})")
        return out


class RepeatedRuns:
    """Run user code again and again, then put back what it changed (see the module doc).

    Args:
        shell: the IPython shell (the code runs in its namespace).
        codes: the compiled code objects that will run (an expression, a cell's body).
        what: how the magic names the runs in messages (``--bench "train_step()"``).
        named: the models and optimizers the user named, and the options that name more.
        allow_side_effects: run even if something cannot be put back (it is then listed).
        expected_runs: about how many runs there will be, for the refusal's sentence.

    Raises:
        UsageError: before anything runs, when the runs would change what cannot be put back,
            or when there is no room to save the state.
    """

    def __init__(
        self,
        shell: Any,
        codes: Iterable[CodeType],
        *,
        what: str,
        named: Named,
        allow_side_effects: bool = False,
        expected_runs: str = "many times",
    ) -> None:
        self.what = what
        self.named = named
        reached = reach(list(codes), shell.user_ns, named, cell_filenames(shell))
        self.problems: list[Problem] = reached.problems
        if self.problems and not allow_side_effects:
            raise UsageError(refusal(what, self.problems, expected_runs))
        self.state = SavedState(named.models, named.optimizers, reached, what=what)
        if self.state.unsaved:  # a state_dict that cannot be copied, found while saving
            self.problems += self.state.unsaved
            if not allow_side_effects:
                self.state.release()
                raise UsageError(refusal(what, self.state.unsaved, expected_runs))
        self.reached = reached
        self.runs = 0
        self.warnings = UserWarnings()

    def save_also(self, label: str, obj: Any) -> None:
        """Save, as it is now, a module the magic made after the others were saved.

        ``%compile`` wraps the named model (torch.compile's ``OptimizedModule``) after the
        check and the save, and binds the name to the wrapper for the compiled runs: a hook the
        step registers then lands on the wrapper. Its tables are saved here and put back with
        the rest; the model inside it was saved already. Anything but a module: nothing to do.
        """
        self.state.save_also(label, obj)

    def call(self, fn: Callable[[], Any]) -> Callable[[], Any]:
        """``fn``, counted as one run each time it is called."""

        def counted() -> Any:
            self.runs += 1
            return fn()

        return counted

    @contextlib.contextmanager
    def recording(self) -> Iterator[None]:
        """Keep the warnings raised in the block (each shown once by :meth:`warning_notes`)."""
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                yield
            finally:
                self.warnings.add(caught)

    def reset(self) -> None:
        """Back to the saved state (between the modes of ``%amp compare``)."""
        self.state.restore()

    def finish(self) -> Restored:
        """Put everything back, check it, and say so (the saved copy is released)."""
        state = self.state
        try:
            state.restore()
            check = state.check()
            parts = state.parts(check)
            peaks = state.peak_changes()
        finally:
            state.release()
        restored = Restored(
            runs=self.runs,
            parts=parts,
            mismatched=check.mismatched,
            changed=list(state.changed),
            peaks_raised=peaks,
            not_restored=[p.sentence() for p in self.problems],
            cuda=bool(state.cuda_devices),
        )
        restored.line = restored_line(restored)
        return restored

    def warning_notes(self) -> list[str]:
        return self.warnings.notes(self.what)


def refusal(what: str, problems: list[Problem], expected_runs: str) -> str:
    """The ``UsageError`` sentence: what cannot be put back, and how to go on."""
    listed = "; ".join(p.sentence() for p in problems[:4])
    more = f"; and {len(problems) - 4} more" if len(problems) > 4 else ""
    return (
        f"{what} runs {expected_runs}, and afterwards the magic puts back what the runs "
        f"changed, but it could not put back: {listed}{more}. Name what the runs change with "
        "the options shown, or pass --allow-side-effects to run anyway (those changes then "
        "stay)."
    )


def _short(names: list[str], limit: int = 6) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def _named_part(p: RestoredPart) -> str:
    """A compared part as the line names it: ``opt (and its 3 parameter(s) outside model)``."""
    return f"{p.label} ({p.detail})" if p.detail else p.label


def restored_line(r: Restored) -> str:
    """One line: what was compared after putting it back, what was not, what stays changed.

    Its format: ``Restored after N runs, checked bit for bit: model, opt (and its N parameter(s)
    outside model), sched (state_dict), x, x.grad, the RNG, N process-wide settings; the runs
    had changed model's hooks, anomaly mode (put back); the CUDA peak counters as they were.``
    Only compared parts are named as checked; the structured list is ``r.parts``.
    """
    compared = [p for p in r.parts if p.compared]
    objects = [_named_part(p) for p in compared if p.kind not in ("rng", "setting")]
    tail = [p.label for p in compared if p.kind == "rng"]
    settings = sum(1 for p in compared if p.kind == "setting")
    if settings:
        tail.append(f"{settings} process-wide settings")
    what = ", ".join(x for x in (_short(objects, 8), *tail) if x) or "nothing"
    if r.mismatched:
        head = (
            f"Put back after {r.runs:,} runs: {what}; but {len(r.mismatched)} differ "
            f"from their saved copy ({_short(r.mismatched, 3)})"
        )
    else:
        head = f"Restored after {r.runs:,} runs, checked bit for bit: {what}"
    if r.changed:
        head += f"; the runs had changed {_short(r.changed, 4)} (put back)"
    if r.uncompared:
        listed = "; ".join(f"{p.label}: {p.detail}" for p in r.uncompared[:3])
        head += f"; put back but not compared: {listed}"
    if r.peaks_raised:
        peaks = ", ".join(
            f"cuda:{d} {fmt_bytes(now)} (was {fmt_bytes(was)})"
            for d, (was, now) in r.peaks_raised.items()
        )
        head += (
            f"; torch's peak counter now holds the runs' peak ({peaks}): torch cannot set it "
            "back, and the magic never resets it"
        )
    elif r.cuda:
        head += "; the CUDA peak counters as they were"
    if r.not_restored:
        head += f". Not put back (--allow-side-effects): {_short(r.not_restored, 3)}"
    return head + "."
