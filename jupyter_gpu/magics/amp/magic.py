"""``%amp`` / ``%%amp``: mixed precision for one cell or from a line on (``%amp on``), and TF32."""

from __future__ import annotations

import argparse
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import line_cell_magic, magics_class, needs_local_scope

from jupyter_gpu.magics.probes.precision import (
    has_fp32_precision_api,
    set_tf32,
    tf32_enabled,
    tf32_supported,
)
from jupyter_gpu.magics.shell.args import (
    ShellMagics,
    allow_side_effects_option,
    argument,
    check_identifier,
    dtype_choice,
    magic_arguments,
    output_options,
    parse,
    positive_int,
)
from jupyter_gpu.magics.shell.cell import CellCode
from jupyter_gpu.magics.shell.lazy_torch import torch_module

from . import autocast as prec
from .hooks import AmpHooks, check_nesting
from .report import show_autocast_off, show_autocast_on, show_scaler, show_status, show_tf32
from .results import AmpRun, AmpStatus


@magics_class
class AmpMagics(ShellMagics):
    """The ``%amp`` magics; they keep the autocast of ``%amp on`` until ``%amp off``."""

    def __init__(self, shell: Any) -> None:
        super().__init__(shell)
        self.hooks: AmpHooks | None = None
        """The autocast of ``%amp on`` and its hooks; ``None`` when off."""

    @magic_arguments()
    @argument(
        "command",
        nargs="?",
        help="on | off | tf32 | compare; none: show the current settings. Omit for %%%%amp.",
    )
    @argument(
        "args", nargs="*", help='for tf32: on|off; for compare: the step, e.g. "train_step()"'
    )
    @argument("--dtype", type=dtype_choice, help="bf16 or fp16 (default: bf16 where supported)")
    @argument(
        "--device", choices=["cuda", "cpu"], help="autocast device (default: cuda if present)"
    )
    @argument(
        "--scaler", default="scaler", help="variable for the fp16 GradScaler (default scaler)"
    )
    @argument("--model", help="compare: the model's variable name, restored afterwards")
    @argument("--optimizer", help="compare: the optimizer's variable name, restored afterwards")
    @argument("--modes", default="fp32,tf32,bf16,fp16", help="compare: modes, comma-separated")
    @argument("--batch", metavar="NAME", help="compare: the batch variable, the same in every mode")
    @argument("--runs", type=positive_int, help="compare: timed runs per mode (default: ~1 s)")
    @allow_side_effects_option("compare", "the step")
    @output_options()
    @needs_local_scope
    @line_cell_magic
    def amp(
        self, line: str, cell: str | None = None, local_ns: dict[str, Any] | None = None
    ) -> Any:
        """Mixed precision: autocast for one cell (%%amp) or from a line on (%amp on).

        %%amp [--dtype bf16|fp16] [--device cuda|cpu]  runs the cell under torch.autocast.
        %amp on [--dtype ...] [--device ...]  autocasts from its own line: the rest of its cell
        and every following cell. %amp off stops it, from its own line too. Neither may sit
        inside a `with torch.autocast(...)` block or a %%amp cell.
        %amp  shows what is on.  %amp tf32 on|off  switches TF32 for float32 matmuls/convs.
        %amp compare "train_step()" --model model --optimizer opt  runs the step under fp32,
        tf32, bf16 and fp16 from the same state and shows time, peak memory and loss side by
        side, and why reduced precision is no faster when it is not; the model, the optimizer,
        the tensors the step uses and the RNG are put back afterwards, bit for bit. A step
        that changes what cannot be put back (a model or optimizer not named, a file) is
        refused before it runs: name it, or pass --allow-side-effects. --batch NAME keeps the
        batch in NAME the same in every mode. The saved state stays on the GPU only when it
        has room for it beside the steps; otherwise it is kept in (pinned) host memory.

        The default dtype is bf16 where supported, else fp16. With fp16 a torch.amp.GradScaler
        is put in the notebook as `scaler` and the recipe is printed.
        """
        args = parse(AmpMagics.amp, line)
        if cell is not None:
            if args.command is not None:
                raise UsageError(
                    f"%%amp takes only options (--dtype, --device), not {args.command!r}: "
                    "use %amp on|off|tf32|compare on a line of its own."
                )
            return self._amp_cell(args, cell, local_ns)
        command = args.command
        if command is None:
            return self._status(args)
        if command == "on":
            return self._on(args)
        if command == "off":
            return self._off(args)
        if command == "tf32":
            return self._tf32(args)
        if command == "compare":
            from .compare import compare_from_args

            return compare_from_args(self.shell, args)
        raise UsageError(
            f"%amp {command}: unknown command; use %amp on, %amp off, %amp tf32 on|off, "
            '%amp compare "step()", or %%amp at the top of a cell.'
        )

    # -------------------------------------------------------------------------- cell

    def _amp_cell(self, args: argparse.Namespace, cell: str, local_ns: Any) -> Any:
        self._no_extra_args(args, "%%amp")
        device = prec.resolve_device(args.device)
        dtype = prec.resolve_dtype(args.dtype, device)
        ctx = prec.make_autocast(device, dtype)
        if dtype == "fp16":
            self._ensure_scaler(args.scaler, device, quiet=args.quiet)
        code = CellCode(self.shell, cell)
        with ctx:
            value = code.run(local_ns)
        return AmpRun(device, dtype, value) if args.output else value

    # -------------------------------------------------------------------------- on / off

    def _on(self, args: argparse.Namespace) -> AmpStatus | None:
        self._no_extra_args(args, "%amp on")
        device = prec.resolve_device(args.device)
        dtype = prec.resolve_dtype(args.dtype, device)
        prec.make_autocast(device, dtype)  # raises UsageError before anything changes
        hooks = self.hooks
        unchanged = (
            hooks is not None
            and hooks.is_open
            and (hooks.device, hooks.dtype)
            == (
                device,
                dtype,
            )
        )
        if not unchanged:  # it opens (or reopens) autocast at this line
            check_nesting("%amp on", 0 if hooks is None else hooks.open_level)
        if dtype == "fp16":
            self._ensure_scaler(args.scaler, device, quiet=args.quiet)
        if hooks is None:
            self.hooks = AmpHooks(self.shell, device, dtype)
            self.hooks.start()
        elif not unchanged:
            hooks.switch(device, dtype)
        if not args.quiet:
            show_autocast_on(device, dtype)
        return self._status_value() if args.output else None

    def _off(self, args: argparse.Namespace) -> AmpStatus | None:
        self._no_extra_args(args, "%amp off")
        hooks = self.hooks
        if hooks is not None:
            check_nesting("%amp off", hooks.open_level)
            hooks.stop()
            self.hooks = None
        if not args.quiet:
            show_autocast_off(was_on=hooks is not None)
        return self._status_value() if args.output else None

    def unload(self) -> None:
        """Close autocast and remove the hooks now (``%unload_ext``)."""
        if self.hooks is not None:
            self.hooks.stop()
            self.hooks = None

    # -------------------------------------------------------------------------- status, tf32

    def _status_value(self) -> AmpStatus:
        hooks = self.hooks
        matmul, conv = tf32_enabled()
        return AmpStatus(
            autocast_on=hooks is not None,
            device=hooks.device if hooks is not None else None,
            dtype=hooks.dtype if hooks is not None else None,
            tf32_matmul=matmul,
            tf32_conv=conv,
            tf32_hardware=tf32_supported(),
        )

    def _status(self, args: argparse.Namespace) -> AmpStatus | None:
        self._no_extra_args(args, "%amp")
        status = self._status_value()
        if not args.quiet:
            show_status(status, self._tf32_note())
        return status if args.output else None

    def _tf32(self, args: argparse.Namespace) -> AmpStatus | None:
        if len(args.args) != 1 or args.args[0] not in ("on", "off"):
            raise UsageError("%amp tf32 takes on or off, e.g. %amp tf32 on.")
        enabled = args.args[0] == "on"
        set_tf32(enabled)
        if not args.quiet:
            show_tf32(enabled, new_api=has_fp32_precision_api(), note=self._tf32_note())
        return self._status_value() if args.output else None

    @staticmethod
    def _tf32_note() -> str:
        torch_module()  # the UsageError that says how to install torch, where it is missing
        import torch

        if not torch.cuda.is_available():
            return "No CUDA GPU: TF32 only changes CUDA matmuls and convolutions, not CPU ones."
        if not tf32_supported():
            return "This GPU has no TF32 tensor cores (they start with Ampere): no effect here."
        return ""

    # -------------------------------------------------------------------------- helpers

    @staticmethod
    def _no_extra_args(args: argparse.Namespace, what: str) -> None:
        if args.args:
            raise UsageError(f"{what} takes no further words ({' '.join(args.args)}).")
        if args.model or args.optimizer or args.runs or args.batch or args.allow_side_effects:
            raise UsageError(
                "--model, --optimizer, --runs, --batch and --allow-side-effects belong to "
                f"%amp compare, not {what}."
            )

    def _ensure_scaler(self, name: str, device: str, *, quiet: bool) -> None:
        """Put a GradScaler in the notebook under ``name`` (unless one is there) and say how."""
        torch_module()  # the UsageError that says how to install torch, where it is missing
        import torch

        check_identifier(name, "--scaler")
        user_ns = self.shell.user_ns
        existing = user_ns.get(name)
        if isinstance(existing, torch.amp.GradScaler):
            return
        if name in user_ns:
            raise UsageError(
                f"fp16 needs a GradScaler, but {name} already holds a {type(existing).__name__}: "
                "pass --scaler OTHER_NAME to put it under another name."
            )
        user_ns[name] = torch.amp.GradScaler(device)
        if not quiet:
            show_scaler(name, device)
