"""``torchrun_result(obj)``: hand an object from rank 0 back to the notebook (``%%torchrun -o``).

Rank 0 saves the object with ``torch.save`` into the run folder; the notebook loads it with
``torch.load(map_location="cpu")`` once every rank has finished, so tensors come back on the CPU
and the kernel never creates a CUDA context for them. The saved size is checked against the
cell's ``--max-result`` (default :data:`DEFAULT_LIMIT_BYTES`) in rank 0, where the error can
say what was too big.
"""

from __future__ import annotations

import io
import json
import os
import warnings
from pathlib import Path
from typing import Any, TypeVar

from jupyter_gpu.distributed.script import RUN_DIR_ENV

RESULT_FILE = "result.pt"
DEFAULT_LIMIT_BYTES = 512 * 2**20

T = TypeVar("T")


class ResultTooLargeError(ValueError):
    """The object given to ``torchrun_result`` saves to more bytes than ``--max-result``."""


def format_size(n: float) -> str:
    """``1.5 GiB``, ``12.0 KiB``, ``300 B``."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"  # pragma: no cover  # the loop always returns


def parse_size(text: str) -> int:
    """``"512MB"``, ``"2 GiB"``, ``"100k"``, ``"4096"`` -> bytes (K, M, G are powers of 1024).

    Raises:
        ValueError: not a size.
    """
    units = {"": 1, "b": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}
    cleaned = text.strip().lower().replace(" ", "").removesuffix("ib").removesuffix("b")
    number = cleaned.rstrip("kmgt")
    unit = cleaned[len(number) :]
    try:
        value = float(number)
    except ValueError:
        raise ValueError(f"{text!r} is not a size: write e.g. 512MB or 2GB") from None
    if unit not in units or value <= 0:
        raise ValueError(f"{text!r} is not a positive size: write e.g. 512MB or 2GB")
    return int(value * units[unit])


def torchrun_result(obj: T) -> T:
    """Send ``obj`` from rank 0 back to the notebook; returns ``obj`` unchanged.

    Call it in a ``%%torchrun -o NAME`` cell: after every rank has finished, ``NAME`` holds a copy
    of what rank 0 passed (without ``-o``, it is the cell's value). Calls on other ranks do
    nothing, so every rank may call it. Each call on rank 0 replaces the previous object.

    The object must be picklable (``torch.save``): numbers, lists, dicts, tensors (they come back
    on the CPU), a ``state_dict``. Instances of classes defined inside the cell cannot be loaded
    by the notebook; define such classes in a module both import.

    Raises:
        ResultTooLargeError: the object saves to more than the cell's ``--max-result``.
    """
    run_dir = os.environ.get(RUN_DIR_ENV)
    if not run_dir:
        warnings.warn(
            "torchrun_result() only sends results from a %%torchrun cell; here it does nothing",
            stacklevel=2,
        )
        return obj
    if os.environ.get("RANK", "0") != "0":
        return obj
    import torch

    folder = Path(run_dir)
    limit = int(json.loads((folder / "run.json").read_text())["result_limit_bytes"])
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    size = buffer.getbuffer().nbytes
    if size > limit:
        raise ResultTooLargeError(
            f"torchrun_result: the object saves to {format_size(size)}, more than the limit of "
            f"{format_size(limit)}. Return less (metrics, a few tensors), save big things to a "
            f"file and load that in the notebook, or raise the limit with "
            f"%%torchrun --max-result {format_size(size * 2).replace(' ', '')}."
        )
    _send(folder, buffer.getbuffer())
    return obj


_SENT: dict[Path, tuple[int, int, int]] = {}
"""The result file this process wrote last, by run folder: its device, inode and ctime."""


def _send(folder: Path, data: memoryview) -> None:
    """Put ``data`` in ``folder/RESULT_FILE`` whole, in place of this process's last one.

    No rename over the name (that would delete what held it: only jupyter_gpu.compile_cache
    deletes): the previous result this process wrote is removed through that package, only
    while it is still that file, then the new one is written (``jupyter_gpu.new_files``).
    """
    from jupyter_gpu.compile_cache import remove_file_made_here
    from jupyter_gpu.new_files import write_new

    fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        previous = _SENT.pop(folder, None)
        if previous is not None:
            remove_file_made_here(fd, RESULT_FILE, previous)
        written = write_new(fd, RESULT_FILE, data)
        if not written.created:
            raise FileExistsError(
                f"torchrun_result: {RESULT_FILE} in the run folder is not the one this rank wrote"
            )
        if written.identity is not None:
            _SENT[folder] = written.identity
    finally:
        os.close(fd)


def load_result(run_dir: Path) -> tuple[bool, Any]:
    """``(True, obj)`` if rank 0 of the run in ``run_dir`` sent one, else ``(False, None)``.

    Raises:
        RuntimeError: the object cannot be loaded in this process (e.g. its class was defined
            inside the cell); the message says what to do.
    """
    path = run_dir / RESULT_FILE
    if not path.exists():
        return False, None
    import torch

    try:
        return True, torch.load(path, map_location="cpu", weights_only=False)
    except (AttributeError, ImportError, ModuleNotFoundError) as err:
        raise RuntimeError(
            f"rank 0's result cannot be loaded in the notebook ({err}). Objects of classes "
            "defined inside the %%torchrun cell exist only in the ranks: return plain data "
            "(numbers, lists, dicts, tensors, a state_dict), or define the class in a module "
            "that both the notebook and the cell import."
        ) from err
