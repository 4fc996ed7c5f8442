"""The server extension's settings: one traitlets ``Configurable`` named ``JupyterGpu``.

Set them in ``jupyter_server_config.py`` (``c.JupyterGpu.interval_s = 0.5``) or on the command
line (``jupyter lab --JupyterGpu.backend=simulated``). Each option has help text and bounds; a
value out of bounds stops the extension at start-up with a message naming the option.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from traitlets import (
    Bool,
    Enum,
    Float,
    Int,
    List,
    TraitError,
    TraitType,
    Unicode,
    default,
    validate,
)
from traitlets.config import Configurable
from traitlets.traitlets import MetaHasTraits

from jupyter_gpu.options import (
    MAX_BUCKETS,
    MAX_HISTORY_SAMPLES,
    MIN_METRICS_TOKEN,
    Option,
    settings,
)
from jupyter_gpu.simulated.faults import parse_faults

__all__ = ["MAX_BUCKETS", "MAX_HISTORY_SAMPLES", "MIN_METRICS_TOKEN", "JupyterGpu", "trait"]


def trait(option: Option) -> TraitType[Any, Any]:
    """The configurable trait of one declared option: its type, default, bounds and help."""
    made: TraitType[Any, Any]
    if option.choices:
        made = Enum(list(option.choices), default_value=option.default, help=option.help)
    elif option.kind == "bool":
        made = Bool(option.default, help=option.help)
    elif option.kind == "int":
        made = Int(option.default, min=option.minimum, max=option.maximum, help=option.help)
    elif option.kind == "float":
        made = Float(option.default, min=option.minimum, max=option.maximum, help=option.help)
    elif option.kind == "str_list":
        made = List(Unicode(), default_value=list(option.default), help=option.help)
    else:
        made = Unicode(option.default, help=option.help)
    return made.tag(config=True)


class _DeclaredTraits(MetaHasTraits):
    """Gives the class a trait per setting of ``jupyter_gpu.options`` (``options=`` keyword).

    Traitlets reads a class's traits when the class is made, so they go into its namespace
    then (``__new__``) and are named from it (``__init__``); a trait the class body defines
    itself wins.
    """

    def __new__(
        mcls,
        name: str,
        bases: tuple[type, ...],
        classdict: dict[str, Any],
        options: tuple[Option, ...] = (),
        **kwds: Any,
    ) -> _DeclaredTraits:
        namespace = {option.name: trait(option) for option in options}
        namespace.update(classdict)
        made: _DeclaredTraits = super().__new__(mcls, name, bases, namespace, **kwds)  # type: ignore[assignment]  # traitlets annotates its own metaclass
        return made

    def __init__(
        cls,
        name: str,
        bases: tuple[type, ...],
        classdict: dict[str, Any],
        options: tuple[Option, ...] = (),
        **kwds: Any,
    ) -> None:
        # traitlets names each trait from the class's dict: the one with the declared traits
        super().__init__(name, bases, dict(cls.__dict__), **kwds)


# Its traits are the settings declared in jupyter_gpu/options.py (name, type, default, bounds,
# help); the class adds what a declaration cannot say: checks across options, and
# metrics_token's default from the environment. (Its docstring is the generated config's.)
class JupyterGpu(Configurable, metaclass=_DeclaredTraits, options=settings()):
    """GPU monitoring for Jupyter: which backend, how often to sample, how much to keep."""

    if TYPE_CHECKING:  # the traits are made from the declarations, so mypy cannot list them

        def __getattr__(self, name: str) -> Any: ...

    @default("metrics_token")
    def _metrics_token_from_env(self) -> str:
        return os.environ.get("JUPYTER_GPU_METRICS_TOKEN", "")

    @validate("metrics_token")
    def _valid_metrics_token(self, proposal: Any) -> str:
        token: str = proposal["value"]
        if token and (len(token) < MIN_METRICS_TOKEN or token != token.strip()):
            raise TraitError(
                f"JupyterGpu.metrics_token must be at least {MIN_METRICS_TOKEN} characters, "
                "without surrounding spaces (e.g. from `openssl rand -hex 32`)"
            )
        return token

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        # Checked once every value is loaded: per-trait validators would see the other option
        # still at its default, and so depend on the order the options were given in.
        self._check_samples(self.history_s, self.interval_s)
        if self.long_history_s / self.history_bucket_s > MAX_BUCKETS:
            raise TraitError(
                f"JupyterGpu.long_history_s / JupyterGpu.history_bucket_s must be at most "
                f"{MAX_BUCKETS:,} buckets; got {self.long_history_s:g} s / "
                f"{self.history_bucket_s:g} s. Keep less long history or use wider buckets."
            )
        self._check_fault_devices()

    @validate("simulated_faults")
    def _valid_faults(self, proposal: Any) -> list[str]:
        specs: list[str] = list(proposal["value"])
        try:
            parse_faults(specs)
        except ValueError as err:
            raise TraitError(f"JupyterGpu.simulated_faults: {err}") from None
        return specs

    def _check_fault_devices(self) -> None:
        for fault in parse_faults(self.simulated_faults):
            if fault.gpu is not None and fault.gpu >= self.simulated_devices:
                raise TraitError(
                    f"JupyterGpu.simulated_faults: {fault.spec!r} is on GPU {fault.gpu}, but "
                    f"JupyterGpu.simulated_devices is {self.simulated_devices} (GPUs 0 to "
                    f"{self.simulated_devices - 1})"
                )

    @staticmethod
    def _check_samples(history_s: float, interval_s: float) -> None:
        if history_s / interval_s > MAX_HISTORY_SAMPLES:
            raise TraitError(
                f"JupyterGpu.history_s / JupyterGpu.interval_s must be at most "
                f"{MAX_HISTORY_SAMPLES:,} samples; got {history_s:g} s / {interval_s:g} s = "
                f"{history_s / interval_s:,.0f}. Keep less history or sample less often."
            )
