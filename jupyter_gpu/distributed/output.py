r"""Stream every rank's output into the cell as it comes, each line prefixed by its rank.

Each rank writes its stdout and stderr to ``rank-<RANK>.log`` in the run folder (see
``rank_main.py``); :class:`RankOutput` reads what is new in each file a few times a second and
writes it to the cell.

Progress bars (tqdm) redraw one line with a carriage return: ``"\\r 40%|####  |"``. A
notebook's output area, like a terminal, overwrites the current line after a ``"\\r"``, char
by char. So one line at a time may stay *open* at the bottom: the progress line of the lowest
rank that has one (rank 0's bar, as a rule). Its updates are written as ``"\\r" + prefix +
text``, padded with spaces over a longer previous text. A complete line of another rank
overwrites the open line, ends with ``"\\n"``, and the open line is written again below it.
Partial lines of other ranks wait until they end. Nothing is lost: a rank's text is only
dropped when a later ``"\\r"`` on the same line replaced it, as on a terminal.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

# Foreground colours that read on light and dark themes (no red: red means error).
_COLORS = ("36", "35", "33", "32", "34", "96", "95", "93", "92", "94")
_LOG_NAME = re.compile(r"rank-(\d+)\.log$")
_READ_CHUNK = 1 << 20


def rank_prefix(rank: int, world_size: int, *, color: bool) -> str:
    """``[rank 3] `` with the rank number padded to the width of the largest rank."""
    width = len(str(max(world_size - 1, rank, 0)))
    text = f"[rank {rank:>{width}}]"
    if color:
        text = f"\x1b[{_COLORS[rank % len(_COLORS)]}m{text}\x1b[0m"
    return text + " "


def _visible(segment: str) -> str:
    """What a terminal shows of one line's text: the part after its last carriage return."""
    segment = segment.rstrip("\r")
    return segment.rsplit("\r", 1)[-1]


@dataclass
class _Rank:
    path: Path
    offset: int = 0
    decoder: codecs.IncrementalDecoder = field(
        default_factory=lambda: codecs.getincrementaldecoder("utf-8")(errors="replace")
    )
    pending: str = ""  # text after the last newline


class RankOutput:
    """Reads the ranks' log files in ``run_dir`` and writes their lines, prefixed, to ``write``.

    Args:
        run_dir: the run folder the ranks write ``rank-<RANK>.log`` files into.
        world_size: ranks in the job (for the width of the prefixes).
        write: where the text goes (the cell's stdout); called with whole pieces of text.
        color: colour each rank's prefix (ANSI), as notebooks and terminals show it.
    """

    def __init__(
        self, run_dir: Path, world_size: int, write: Callable[[str], None], *, color: bool
    ) -> None:
        self._dir = run_dir
        self._world = world_size
        self._write = write
        self._color = color
        self._ranks: dict[int, _Rank] = {}
        self._open: tuple[int, str] | None = None  # (rank, text on screen) of the open line
        self.lines: dict[int, list[str]] = {}  # every complete line per rank, without prefix

    def _prefix(self, rank: int) -> str:
        return rank_prefix(rank, self._world, color=self._color)

    def _discover(self) -> None:
        try:
            names = [p.name for p in self._dir.iterdir()]
        except OSError:
            return
        for name in names:
            match = _LOG_NAME.match(name)
            if match and int(match.group(1)) not in self._ranks:
                self._ranks[int(match.group(1))] = _Rank(self._dir / name)

    def _read_new(self, state: _Rank) -> str:
        try:
            with state.path.open("rb") as f:
                f.seek(state.offset)
                data = f.read(_READ_CHUNK)
        except OSError:
            return ""
        state.offset += len(data)
        return state.decoder.decode(data)

    def poll(self) -> None:
        """Write what the ranks printed since the last call."""
        self._discover()
        for rank in sorted(self._ranks):
            state = self._ranks[rank]
            while True:
                text = self._read_new(state)
                if not text:
                    break
                self._take(rank, state, text)
        self._refresh_open()

    def finish(self) -> None:
        """Write everything left, ending partial lines (call once every rank has exited)."""
        self.poll()
        for rank in sorted(self._ranks):
            state = self._ranks[rank]
            tail = state.pending + state.decoder.decode(b"", final=True)
            state.pending = ""
            if _visible(tail):
                self._line(rank, _visible(tail))
        if self._open is not None:
            self._write("\n")
            self._open = None

    def _take(self, rank: int, state: _Rank, text: str) -> None:
        *complete, state.pending = (state.pending + text).split("\n")
        for line in complete:
            self._line(rank, _visible(line))

    def _pad(self, new: str) -> str:
        assert self._open is not None
        return " " * max(0, len(self._open[1]) - len(new))

    def _line(self, rank: int, text: str) -> None:
        self.lines.setdefault(rank, []).append(text)
        line = self._prefix(rank) + text
        if self._open is None:
            self._write(line + "\n")
            return
        out = "\r" + line + self._pad(line) + "\n"
        if self._open[0] == rank:  # this line ends the open one (tqdm's last update)
            self._open = None
        else:
            out += self._open[1]  # the other rank's progress line goes below again
        self._write(out)

    def _refresh_open(self) -> None:
        """Show the partial line of the lowest rank that has one, if it changed."""
        for rank in sorted(self._ranks):
            shown = _visible(self._ranks[rank].pending)
            if not shown:
                continue
            text = self._prefix(rank) + shown
            if self._open is None:
                self._write(text)
            elif self._open != (rank, text):
                self._write("\r" + text + self._pad(text))
            self._open = (rank, text)
            return
