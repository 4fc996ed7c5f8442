"""A notebook name rebound to a fix's object for a block of steps, then put back."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .fixes import TuneSession


@contextlib.contextmanager
def rebound(s: TuneSession, name: str, value: Any) -> Iterator[None]:
    """``name`` holds ``value`` inside; after, what it held before ``%tune`` rebound it."""
    s.bind(name, value)
    try:
        yield
    finally:
        s.user_ns[name] = s.original(name)
