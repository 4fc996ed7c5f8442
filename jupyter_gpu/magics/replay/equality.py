"""Whether a value is back as it was: tensors bit for bit, other values as far as they can say.

The repeated-runs helper (``runs.py``) compares what it put back with what it saved, and lists
only what it compared. :func:`same_value` answers ``True``, ``False``, or ``None`` where the
value cannot be compared (an object of a class that has no ``__eq__`` of its own, met where a
copy stands in for it): such a thing is named as put back but not compared, never as checked.
"""

from __future__ import annotations

import math
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

_MAX_DEPTH = 20


def bitwise_equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether two tensors hold the same bits (NaNs included), wherever they live.

    One ``torch.equal`` on the device of ``a`` (the saved copy is moved there if it was kept on
    the host): no Python loop over elements.
    """
    import torch  # loaded already: a and b are its tensors

    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.device != b.device:
        b = b.to(a.device)
    if a.dtype == torch.bool or not (a.is_floating_point() or a.is_complex()):
        return bool(torch.equal(a, b))
    if a.is_complex():
        a, b = torch.view_as_real(a), torch.view_as_real(b)
    ints = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[a.element_size()]
    return bool(torch.equal(a.contiguous().view(ints), b.contiguous().view(ints)))


def _has_own_eq(value: Any) -> bool:
    eq: Any = type(value).__eq__
    return eq is not object.__eq__


def same_value(a: Any, b: Any, *, identity: bool = False, _depth: int = 0) -> bool | None:
    """Whether ``a`` (live) is back as ``b`` (saved): True, False, or None (cannot tell).

    Tensors and NumPy arrays compare bit for bit, floats by value with NaN equal to NaN, dicts,
    lists and tuples item by item, anything else with its own ``__eq__``. An object without one
    is the same only when it is the same object; where it is not (``identity`` False: ``b`` is
    a copy), the answer is None.
    """
    if a is b:
        return True
    if _depth > _MAX_DEPTH:
        return None
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and bitwise_equal(a, b)
    np = sys.modules.get("numpy")
    if np is not None and isinstance(a, np.ndarray):
        return (
            isinstance(b, np.ndarray)
            and a.shape == b.shape
            and a.dtype == b.dtype
            and a.tobytes() == b.tobytes()
        )
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(a, dict):
        if a.keys() != b.keys():
            return False
        return _all_same(((a[k], b[k]) for k in a), identity, _depth)
    if isinstance(a, list | tuple):
        if len(a) != len(b):
            return False
        return _all_same(zip(a, b, strict=True), identity, _depth)
    if not _has_own_eq(a):
        return False if identity else None
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001  # an __eq__ that raises cannot say
        return None


def _all_same(pairs: Any, identity: bool, depth: int) -> bool | None:
    unknown = False
    for x, y in pairs:
        same = same_value(x, y, identity=identity, _depth=depth + 1)
        if same is False:
            return False
        unknown = unknown or same is None
    return None if unknown else True
