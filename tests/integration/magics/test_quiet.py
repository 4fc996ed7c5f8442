"""Torch's warnings show once, as a short note that says what to do (a real IPython shell)."""

from __future__ import annotations

import logging
import warnings

import pytest

from .conftest import Ran, Shell

TF32 = (
    "TensorFloat32 tensor cores for float32 matrix multiplication available but not enabled. "
    "Consider setting `torch.set_float32_matmul_precision('high')` for better performance."
)


def test_a_known_python_warning_becomes_one_note(
    recwarn: pytest.WarningsRecorder, shell: Shell
) -> None:
    shell.ok("import warnings")
    first = shell.ok(f"warnings.warn({TF32!r})")
    assert "Note: TF32 is off" in first.text
    assert "%amp tf32 on" in first.text
    assert "UserWarning" not in first.text
    again = shell.ok(f"warnings.warn({TF32!r}, stacklevel=1); 1")
    assert "TF32" not in again.text  # once per kernel
    assert not [w for w in recwarn if "TensorFloat32" in str(w.message)]


def test_other_warnings_pass_untouched(recwarn: pytest.WarningsRecorder, shell: Shell) -> None:
    # recwarn is set up before the shell: the shell's hook hands other warnings on to it
    shell.ok("import warnings")
    ran = shell.ok("warnings.warn('my own warning')")
    assert [w for w in recwarn if str(w.message) == "my own warning"]
    assert "Note:" not in ran.text


def test_a_restarted_profiler_gets_the_acc_events_note_not_the_warning(shell: Shell) -> None:
    ran = shell.ok(
        "p = torch.profiler.profile()\n"
        "for _ in range(2):\n"
        "    p.start()\n"
        "    torch.ones(4).sum()\n"
        "    p.stop()\n"
    )
    assert "Profiler clears events" not in ran.text  # torch warns once per process, if at all
    shell.ok("import warnings")
    noted = shell.ok(
        "warnings.warn('Warning: Profiler clears events at the end of each cycle. Only events "
        "from the current cycle will be reported. To keep events across cycles, set "
        "acc_events=True.')"
    )
    both = ran.text + noted.text  # the real restart warns once per process, if not earlier
    assert both.count("Note: torch.profiler says a profiler clears its events") == 1
    assert "for one started once, nothing is lost" in both  # never a false "started again"


def test_a_compiled_optimizer_step_under_the_profiler_gets_the_label_note(shell: Shell) -> None:
    # Notebook 07 profiles a compiled AdamW step: dynamo drops torch.optim's record_function
    # label and logs "Profiler record function ... will be ignored" (the eager backend traces
    # the same way, without compiling code).
    ran = shell.ok(
        "m = torch.nn.Linear(4, 4)\n"
        "opt = torch.optim.AdamW(m.parameters())\n"
        "m(torch.randn(2, 4)).sum().backward()\n"
        "step = torch.compile(opt.step, backend='eager')\n"
        "with torch.profiler.profile():\n"
        "    step()\n"
    )
    assert "Note: torch.compile leaves torch.profiler.record_function labels out" in ran.text
    assert "will be ignored" not in ran.text


#: Warnings torch logs (the logger, the message) and what the note about each must say.
LOGGED_WARNINGS = {
    "recompile_limit": (
        "torch._dynamo.convert_frame",
        "torch._dynamo hit config.recompile_limit (8)\n   function: 'f' (x.py:1)",
        ["Note: torch.compile stopped recompiling after 8 recompiles", "--dynamic"],
    ),
    "inductor_warning": (
        "torch._inductor.utils",
        "Online softmax is disabled",
        ["Note: torch.compile warned: Online softmax is disabled"],
    ),
    "cudagraph_skip": (
        "torch._inductor.cudagraph_utils.__cudagraphs",
        "skipping cudagraphs due to mutated inputs (2 instances). Found from :",
        ["Note: CUDA graphs were skipped: mutated inputs (2 instances)"],
    ),
}


@pytest.mark.parametrize("case", LOGGED_WARNINGS)
def test_a_logged_torch_warning_becomes_a_note(shell: Shell, case: str) -> None:
    logger, message, notes = LOGGED_WARNINGS[case]
    ran = _log_warning(shell, logger, message)
    for note in notes:
        assert note in ran.text


def test_torchs_own_handlers_drop_the_raw_line(shell: Shell) -> None:
    import torch._logging._internal as internal

    _log_warning(shell, *LOGGED_WARNINGS["recompile_limit"][:2])  # the filter goes on as it runs
    filtered = [h for h in internal.handlers if h.filters]
    assert filtered  # on torch's own handlers: the raw line is dropped there
    assert all(not f.filter(_record("torch._inductor.utils")) for h in filtered for f in h.filters)


def test_unload_puts_everything_back(shell: Shell) -> None:
    import torch._logging._internal as internal

    ours = warnings.showwarning
    shell.ok("%unload_ext jupyter_gpu")
    assert warnings.showwarning is not ours
    assert not any(h.filters for h in internal.handlers)
    logger = logging.getLogger("torch._inductor.cudagraph_utils.__cudagraphs")
    assert not logger.handlers


def _log_warning(shell: Shell, logger: str, message: str) -> Ran:
    """A cell that logs ``message`` as a warning on the logger named ``logger``: what it showed."""
    return shell.ok(f"import logging\nlogging.getLogger({logger!r}).warning({message!r})")


def _record(name: str) -> logging.LogRecord:
    return logging.LogRecord(name, logging.WARNING, __file__, 1, "a warning", None, None)
