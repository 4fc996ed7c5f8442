"""Process-wide settings that user code can change, read before repeated runs and put back after.

A training step can switch a setting that outlives it: anomaly detection, autocast entered and
never left, ``torch.use_deterministic_algorithms``, TF32, the thread count, a logger's level.
The repeated-runs helper (``runs.py``) saves each of these before the first run, sets back the
ones the runs changed, then reads them again to check. Each is one :class:`Setting`: a name as
the report says it, a reader and a writer. The writers are torch's, logging's and NumPy's own
setters, so nothing here reaches into private state except where torch has no setter
(``PRINT_OPTS``, the global module hook dicts, the default-device context).

``os.environ`` and ``sys.path`` are saved only where the code reaches them (``reach.py`` says
so): torch's own machinery adds to both while it compiles (``TORCHINDUCTOR_CACHE_DIR``, the
folder that ``import setuptools`` puts on ``sys.path``), and later compiles rely on those; a
step that touches neither has them left as torch leaves them.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from jupyter_gpu.magics.probes.precision import Tf32Settings
from jupyter_gpu.magics.shell.lazy_torch import cuda_in_use, torch_module

from .equality import same_value

#: The device types autocast keeps a state for (those the running torch knows are kept).
_AUTOCAST_DEVICES = ("cpu", "cuda", "xpu", "mps", "hpu", "xla", "ipu", "mtia")
_ENVIRON = "os.environ"
_SYS_PATH = "sys.path"
#: Where the code reaches them, these are saved too (``Reached.process``).
ON_REACH = (_ENVIRON, _SYS_PATH)


@dataclass(frozen=True)
class Setting:
    """One process-wide setting, as the report names it.

    ``read(saved)`` returns its value now (``saved`` is the value read before the runs, or None
    then: a reader may read only what was there before); ``write(value)`` sets it (what it
    returns is dropped: ``torch.set_grad_enabled`` returns a context manager).
    """

    name: str
    read: Callable[[Any], Any]
    write: Callable[[Any], object]


class SavedSettings:
    """The process-wide settings as they were before the runs (see the module doc).

    Args:
        reached: which of :data:`ON_REACH` the code reaches (saved as well).
    """

    def __init__(self, reached: set[str] | frozenset[str] = frozenset()) -> None:
        self.settings = _settings(reached)
        self.saved = {s.name: s.read(None) for s in self.settings}
        #: Settings whose writer raised while putting them back (name -> the error).
        self.failed: dict[str, str] = {}

    @property
    def names(self) -> list[str]:
        return [s.name for s in self.settings]

    def restore(self) -> list[str]:
        """Set back what the runs changed; the names of those settings."""
        changed = []
        for setting in self.settings:
            saved = self.saved[setting.name]
            if same_value(setting.read(saved), saved, identity=True):
                continue
            changed.append(setting.name)
            try:
                setting.write(saved)
            except Exception as exc:  # noqa: BLE001  # said in the report, never hides the runs' error
                self.failed[setting.name] = f"{type(exc).__name__}: {exc}"
        return changed

    def mismatches(self) -> list[str]:
        """The settings that differ from their saved value now (names)."""
        return [
            s.name
            for s in self.settings
            if not same_value(s.read(self.saved[s.name]), self.saved[s.name], identity=True)
        ]


# ------------------------------------------------------------------------------ the settings


def _settings(reached: set[str] | frozenset[str]) -> list[Setting]:
    torch_module()  # the UsageError that says how to install torch, where it is missing
    import torch

    out = [
        Setting("grad mode", lambda _: torch.is_grad_enabled(), torch.set_grad_enabled),
        Setting(
            "anomaly mode",
            lambda _: (torch.is_anomaly_enabled(), torch.is_anomaly_check_nan_enabled()),
            lambda v: torch.set_anomaly_enabled(*v),
        ),
        *_autocast(),
        Setting("deterministic algorithms", lambda _: _deterministic(), _set_deterministic),
        Setting("cuDNN flags", lambda _: _cudnn(), _set_cudnn),
        Setting("TF32 and float32 matmul precision", lambda _: Tf32Settings.read(), _apply_tf32),
        Setting("reduced-precision reductions", lambda _: _reductions(), _set_reductions),
        Setting("threads", lambda _: torch.get_num_threads(), torch.set_num_threads),
        Setting("default dtype", lambda _: torch.get_default_dtype(), torch.set_default_dtype),
        Setting("torch print options", lambda _: _print_options(), _set_print_options),
        Setting("logging levels", _logging_levels, _set_logging_levels),
        Setting("global module hooks", lambda _: _global_hooks(), _set_global_hooks),
    ]
    if _sdpa_readable():
        out.append(Setting("SDPA backends", lambda _: _sdpa(), _set_sdpa))
    if hasattr(torch, "_GLOBAL_DEVICE_CONTEXT") and hasattr(torch, "set_default_device"):
        out.append(Setting("default device", lambda _: _default_device(), _set_device))
    if cuda_in_use():
        out.append(Setting("current CUDA device", lambda _: torch.cuda.current_device(), _set_cuda))
    np = sys.modules.get("numpy")
    if np is not None:
        out.append(
            Setting(
                "NumPy print options",
                lambda _: np.get_printoptions(),
                lambda v: np.set_printoptions(**v),
            )
        )
        out.append(Setting("NumPy error handling", lambda _: np.geterr(), lambda v: np.seterr(**v)))
    if _ENVIRON in reached:
        out.append(Setting(_ENVIRON, lambda _: dict(os.environ), _set_environ))
    if _SYS_PATH in reached:
        out.append(Setting(_SYS_PATH, lambda _: list(sys.path), _set_sys_path))
    return out


def _autocast() -> list[Setting]:
    import torch

    devices = []
    for device in _AUTOCAST_DEVICES:
        try:
            torch.is_autocast_enabled(device)
            torch.get_autocast_dtype(device)
        except (RuntimeError, ValueError, TypeError):  # a device type this torch does not know
            continue
        devices.append(device)

    def read(_: Any) -> dict[str, tuple[bool, Any]]:
        return {d: (torch.is_autocast_enabled(d), torch.get_autocast_dtype(d)) for d in devices}

    def write(value: dict[str, tuple[bool, Any]]) -> None:
        for device, (enabled, dtype) in value.items():
            torch.set_autocast_dtype(device, dtype)
            torch.set_autocast_enabled(device, enabled)

    return [
        Setting("autocast", read, write),
        Setting(
            "autocast cache",
            lambda _: torch.is_autocast_cache_enabled(),
            torch.set_autocast_cache_enabled,
        ),
        Setting("autocast nesting", lambda _: _autocast_nesting(), _set_autocast_nesting),
    ]


def _autocast_nesting() -> int:
    """How many autocast contexts are open (torch has no reader: one step up and back down)."""
    import torch

    depth = int(torch.autocast_increment_nesting()) - 1
    torch.autocast_decrement_nesting()
    return depth


def _set_autocast_nesting(depth: int) -> None:
    """Close (or open) autocast levels down to ``depth``, as leaving a context does.

    Leaving the outermost context empties autocast's cache of cast weights (torch's
    ``autocast.__exit__`` does the same): a context entered in a run and never left would
    otherwise keep stale casts of weights that later steps update in place.
    """
    import torch

    now = _autocast_nesting()
    while now > depth:
        now = int(torch.autocast_decrement_nesting())
        if now == 0:
            torch.clear_autocast_cache()
    while now < depth:
        now = int(torch.autocast_increment_nesting())


def _deterministic() -> tuple[bool, bool, Any]:
    import torch

    fill = getattr(getattr(torch.utils, "deterministic", None), "fill_uninitialized_memory", None)
    return (
        bool(torch.are_deterministic_algorithms_enabled()),
        bool(torch.is_deterministic_algorithms_warn_only_enabled()),
        fill,
    )


def _set_deterministic(value: tuple[bool, bool, Any]) -> None:
    import torch

    mode, warn_only, fill = value
    torch.use_deterministic_algorithms(mode, warn_only=warn_only)
    if fill is not None:
        # a property of the module's class (torch/utils/deterministic.py), unseen by mypy
        torch.utils.deterministic.fill_uninitialized_memory = fill  # type: ignore[attr-defined]


_CUDNN = ("enabled", "benchmark", "deterministic", "benchmark_limit")


def _cudnn() -> dict[str, Any]:
    import torch

    cudnn = torch.backends.cudnn
    return {name: getattr(cudnn, name) for name in _CUDNN if hasattr(cudnn, name)}


def _set_cudnn(value: dict[str, Any]) -> None:
    import torch

    cudnn = torch.backends.cudnn
    for name, flag in value.items():
        if getattr(cudnn, name) != flag:
            setattr(cudnn, name, flag)


def _apply_tf32(value: Tf32Settings) -> None:
    value.apply()


_REDUCTIONS = (
    "allow_fp16_reduced_precision_reduction",
    "allow_bf16_reduced_precision_reduction",
    "allow_fp16_accumulation",
)


def _reductions() -> dict[str, Any]:
    import torch

    matmul = torch.backends.cuda.matmul
    return {name: getattr(matmul, name) for name in _REDUCTIONS if hasattr(matmul, name)}


def _set_reductions(value: dict[str, Any]) -> None:
    import torch

    matmul = torch.backends.cuda.matmul
    for name, flag in value.items():
        if getattr(matmul, name) != flag:
            setattr(matmul, name, flag)


_SDPA = ("flash", "mem_efficient", "math", "cudnn")


def _sdpa_readable() -> bool:
    import torch

    cuda = torch.backends.cuda
    return all(hasattr(cuda, f"{kind}_sdp_enabled") for kind in _SDPA)


def _sdpa() -> dict[str, bool]:
    import torch

    cuda = torch.backends.cuda
    return {kind: bool(getattr(cuda, f"{kind}_sdp_enabled")()) for kind in _SDPA}


def _set_sdpa(value: dict[str, bool]) -> None:
    import torch

    cuda = torch.backends.cuda
    for kind, enabled in value.items():
        getattr(cuda, f"enable_{kind}_sdp")(enabled)


def _default_device() -> Any:
    """The device ``torch.set_default_device`` set, or None (torch's own default)."""
    import torch

    context = getattr(torch._GLOBAL_DEVICE_CONTEXT, "device_context", None)
    return None if context is None else context.device


def _set_device(device: Any) -> None:
    import torch

    torch.set_default_device(device)


def _set_cuda(index: int) -> None:
    import torch

    torch.cuda.set_device(index)


def _print_options() -> dict[str, Any]:
    import torch

    return dict(vars(torch._tensor_str.PRINT_OPTS))


def _set_print_options(value: dict[str, Any]) -> None:
    import torch

    options = torch._tensor_str.PRINT_OPTS
    for key in [k for k in vars(options) if k not in value]:
        delattr(options, key)
    for key, item in value.items():
        setattr(options, key, item)


def _loggers() -> dict[str, logging.Logger]:
    found = {"": logging.getLogger()}
    for name, logger in list(logging.Logger.manager.loggerDict.items()):
        if isinstance(logger, logging.Logger):  # not a PlaceHolder
            found[name] = logger
    return found


def _logging_levels(saved: Any) -> tuple[int, dict[str, tuple[int, bool]]]:
    """``logging.disable``'s level, and each logger's (level, disabled); "" is the root.

    With ``saved``: only the loggers that existed then (the runs may create new ones, torch's
    compiler does by the hundred, and those are left).
    """
    loggers = _loggers()
    names = loggers if saved is None else [n for n in saved[1] if n in loggers]
    return (
        logging.root.manager.disable,
        {n: (loggers[n].level, loggers[n].disabled) for n in names},
    )


def _set_logging_levels(value: tuple[int, dict[str, tuple[int, bool]]]) -> None:
    disable, levels = value
    if logging.root.manager.disable != disable:
        logging.disable(disable)
    loggers = _loggers()
    for name, (level, disabled) in levels.items():
        logger = loggers.get(name)
        if logger is None:
            continue
        if logger.level != level:
            logger.setLevel(level)  # also clears logging's cache of effective levels
        logger.disabled = disabled


def _hook_module() -> Any:
    torch_module()
    return sys.modules["torch.nn.modules.module"]


def _global_hooks() -> dict[str, Any]:
    """The entries of torch's global module hook tables (``register_module_forward_hook``...)."""
    module = _hook_module()
    return {
        name: dict(value) if isinstance(value, dict) else value
        for name, value in vars(module).items()
        if name.startswith("_global_")
    }


def _set_global_hooks(value: dict[str, Any]) -> None:
    module = _hook_module()
    for name, saved in value.items():
        live = getattr(module, name, None)
        if isinstance(saved, dict) and isinstance(live, dict):
            live.clear()  # in place: torch's handles hold these very dicts
            live.update(saved)
        else:
            setattr(module, name, saved)


def _set_environ(value: dict[str, str]) -> None:
    for key in [k for k in os.environ if k not in value]:
        del os.environ[key]
    for key, item in value.items():
        if os.environ.get(key) != item:
            os.environ[key] = item


def _set_sys_path(value: list[str]) -> None:
    sys.path[:] = value
