"""One way for the records to become the API's JSON: their fields, in order, made plain.

A record (a frozen dataclass) inherits ``JsonRecord``; its ``to_dict()`` is every field under its
own name, in the order the class declares them, each value made plain for ``json.dumps``: a
nested record becomes its dict, a tuple a list, a mapping a dict. The field map is the fields'
own metadata: ``field(..., metadata=NOT_IN_JSON)`` leaves one out (e.g. a directory's inode,
which the API never shows). A key worked out from the other fields (``BackendInfo.gpu_available``)
is a field of its own, set when the record is made, so that it takes its place in the order.

``dataclasses.asdict`` is not used as it is: it deep-copies every value, fails on a
``MappingProxyType`` and keeps tuples; this walks the same fields, with one getter per class
(``tests/unit/test_json_record.py`` holds its output to ``asdict``'s where both apply, and the
fields to the OpenAPI schema). It costs a little more than the hand-written dicts it replaced:
``encode_sample`` of 8 GPUs with 2 processes each took 161 to 175 us against 105 to 117 us (best
of 15 x 300 calls, a busy 2-core machine), once per sample, in the sampler thread.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from operator import attrgetter
from typing import Any

NOT_IN_JSON: Mapping[str, Any] = {"json": False}
"""``metadata`` of a field that stays out of ``to_dict()``."""


_FIELDS: dict[type, tuple[tuple[str, ...], Callable[[Any], tuple[Any, ...]]]] = {}


def json_fields(cls: type) -> tuple[str, ...]:
    """The keys ``cls``' ``to_dict()`` writes, in order (its fields, less those left out)."""
    if issubclass(cls, JsonRecord):
        return cls.json_names()
    return _plan(cls)[0]


def _plan(cls: type) -> tuple[tuple[str, ...], Callable[[Any], tuple[Any, ...]]]:
    """The names, and one getter of all their values (this runs for every record sent)."""
    plan = _FIELDS.get(cls)
    if plan is None:  # once per class (a race makes the same plan twice)
        names = tuple(f.name for f in dataclasses.fields(cls) if f.metadata.get("json", True))
        get = attrgetter(*names)
        plan = names, (get if len(names) > 1 else lambda record: (get(record),))
        _FIELDS[cls] = plan
    return plan


_SCALARS = frozenset({str, int, float, bool, type(None)})


def plain(value: Any) -> Any:
    """``value`` as ``json.dumps`` takes it: records and mappings as dicts, tuples as lists."""
    if type(value) in _SCALARS:  # most values: first, and fast (this runs once per sample)
        return value
    if isinstance(value, JsonRecord):
        return value.to_dict()
    if isinstance(value, (tuple, list)):
        return [plain(v) for v in value]
    if isinstance(value, Mapping):
        return {k: plain(v) for k, v in value.items()}
    return value


class JsonRecord:
    """Base of the records the API sends: ``to_dict()`` from the dataclass fields."""

    __slots__ = ()

    @classmethod
    def json_names(cls) -> tuple[str, ...]:
        """The keys of ``to_dict()``, in order (a record that writes its own says them too)."""
        return _plan(cls)[0]

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape of this record (``docs/api.md``)."""
        names, values = _plan(type(self))
        return {
            name: value if type(value) in _SCALARS else plain(value)
            for name, value in zip(names, values(self), strict=True)
        }
