"""Where a device sync is placed: the user's cell line, through torch's warning machinery.

torch's sync debug mode reports ``.item()`` on a CUDA tensor as a ``UserWarning`` raised inside
torch; ``SyncSpy`` catches it in ``warnings.showwarning``, whose caller is the standard
library's ``warnings.py``. The place must skip that frame as it skips torch's: on the H200, 10
``.item()`` syncs were placed at "warnings.py:… in _showwarnmsg" instead of the cell's line.
"""

from __future__ import annotations

import sys
import warnings
from typing import Any

from jupyter_gpu.magics.profile.syncs import user_place

CELL = "<ipython-input-3-abc>"


def test_a_warned_sync_is_placed_at_the_cells_line() -> None:
    places: list[str] = []

    def show(message: Any, category: Any, *args: Any, **kwargs: Any) -> None:
        places.append(user_place(sys._getframe(1), {CELL: 3}))

    warn = "warnings.warn('called a synchronizing CUDA operation')"
    source = f"x = 1\nfor _ in range(2):\n    {warn}\n"
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = show
        exec(compile(source, CELL, "exec"), {"warnings": warnings})  # a fake cell
    assert places == ["cell [3] line 3", "cell [3] line 3"]


def test_code_outside_cells_and_libraries_is_named_by_file() -> None:
    def here() -> str:
        return user_place(sys._getframe(0), {})

    assert here().startswith("test_sync_place.py:")
