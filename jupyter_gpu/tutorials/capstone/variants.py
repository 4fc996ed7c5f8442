"""The configuration a climb row is measured against, set back for the time of its runs.

Every row of the climb is timed against the row before it, interleaved
(:func:`.steps.compare_steps`): the step as it is now, and the step as it was before the fix. The
fix has been applied by then (TF32 switched on, the attention fused, the blocks compiled...), so
the row before is the step run inside a context that undoes that one change for the time of its
runs and puts it back after them. These are those contexts; each changes one thing:

- :func:`tf32_off` and :func:`autocast_off`: the precision of the row before;
- :func:`attributes`: an object's attributes (``model.checkpointing``, an attention's backend);
- :func:`rebound`: names in the notebook (the optimizer, the loader, the model the step reads);
- :func:`together`: several of these as one context.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, MutableMapping
from typing import Any

import torch

from jupyter_gpu.magics.probes.precision import Tf32Settings, set_tf32

_MISSING = object()


@contextlib.contextmanager
def tf32_off() -> Iterator[None]:
    """Strict fp32 matrix products inside (TF32 off), the settings found put back after."""
    saved = Tf32Settings.read()
    set_tf32(False)
    try:
        yield
    finally:
        saved.apply()


@contextlib.contextmanager
def autocast_off(device: str) -> Iterator[None]:
    """No autocast inside, on ``device``'s type (``%amp on``'s autocast stays open outside)."""
    with torch.autocast(torch.device(device).type, enabled=False):
        yield


@contextlib.contextmanager
def attributes(obj: Any, **values: Any) -> Iterator[None]:
    """Set ``obj``'s attributes to ``values`` inside; the values found are put back after.

    Raises:
        AttributeError: ``obj`` has no such attribute (a typo would otherwise add one).
    """
    saved = {}
    for name in values:
        saved[name] = getattr(obj, name)  # raises for a name the object does not have
    try:
        for name, value in values.items():
            setattr(obj, name, value)
        yield
    finally:
        for name, value in saved.items():
            setattr(obj, name, value)


@contextlib.contextmanager
def rebound(namespace: MutableMapping[str, Any], **names: Any) -> Iterator[None]:
    """Bind ``names`` in ``namespace`` (a notebook's ``globals()``) inside; put them back after.

    A step that reads the notebook's names (``optimizer``, ``batches``, ``model``) then runs
    with the objects of the row before. A name that was not bound before is removed after.
    """
    saved = {name: namespace.get(name, _MISSING) for name in names}
    try:
        namespace.update(names)
        yield
    finally:
        for name, value in saved.items():
            if value is _MISSING:
                namespace.pop(name, None)
            else:
                namespace[name] = value


@contextlib.contextmanager
def together(*contexts: contextlib.AbstractContextManager[Any]) -> Iterator[None]:
    """Enter ``contexts`` in order, leave them in reverse (one context for a ``Variant``)."""
    with contextlib.ExitStack() as stack:
        for context in contexts:
            stack.enter_context(context)
        yield
