"""A real IPython shell with the magics loaded, for the GPU tests of the magics.

Every cell's output is printed and kept in a log (written to ``$JUPYTER_GPU_OUT/<name>`` when
that is set); a cell that fails, or whose output holds a raw warning (``UserWarning``, dynamo's
``W`` log lines), fails the test, and so does any WARNING record torch's own log handlers
would have printed.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from typing import Any

from benchmarks.outputs import write_text

RAW_WARNING = re.compile(r"UserWarning|FutureWarning|^W\d{4} |\[W\d{4}|Warning: ", re.MULTILINE)


class _TorchLogs(logging.Handler):
    """Records WARNING lines torch's own log handlers would have printed."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(f"{record.name}: {record.getMessage()}")


class _Record(logging.Filter):
    """On torch's handlers: remember each WARNING record that is about to be printed."""

    def __init__(self, logs: _TorchLogs) -> None:
        super().__init__()
        self.logs = logs

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.WARNING:
            self.logs.emit(record)
        return True


class Shell:
    """Run cells; each returns IPython's result with ``.text`` (all it printed and showed)."""

    def __init__(self, ip: Any, log: list[str]) -> None:
        self.ip = ip
        self.log = log

    def run(self, source: str) -> Any:
        from IPython.utils.capture import capture_output

        with capture_output() as captured:
            result = self.ip.run_cell(source, store_history=True)
        text = "\n".join(
            [captured.stdout, captured.stderr]
            + [o.data.get("text/plain", "") for o in captured.outputs]
        ).strip()
        self.log.append(f"In [{result.execution_count}]: {source}\n{text}\n")
        print(self.log[-1], flush=True)
        error = result.error_before_exec or result.error_in_exec
        assert error is None, f"{source[:80]!r} failed: {error!r}\n{text}"
        assert not RAW_WARNING.search(text), f"raw warning in the output of {source[:60]!r}"
        result.text = text
        return result

    def __getitem__(self, name: str) -> Any:
        return self.ip.user_ns[name]


def magic_shell(log: list[str], log_name: str) -> Iterator[Shell]:
    """The body of a ``shell`` fixture: a fresh shell, torch seeded, the GPU freed after."""
    import torch
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    config = Config()
    config.HistoryManager.hist_file = ":memory:"
    InteractiveShell.clear_instance()
    ip = InteractiveShell.instance(config=config)
    logs = _TorchLogs()
    # torch's own handlers print what reaches them; whatever the magics did not catch shows here.
    torch_handlers = [
        h
        for name in ("torch", "torch._dynamo", "torch._inductor")
        for h in logging.getLogger(name).handlers
    ]
    for handler in torch_handlers:
        handler.addFilter(_Record(logs))
    sh = Shell(ip, log)
    sh.run("%load_ext jupyter_gpu")
    sh.run("import torch\ntorch.manual_seed(0)")
    try:
        yield sh
    finally:
        ip.run_line_magic("unload_ext", "jupyter_gpu")
        for handler in torch_handlers:
            handler.filters = [f for f in handler.filters if not isinstance(f, _Record)]
        import gc

        # dynamo first: its cleanup hooks delete the names it put in the cell's namespace, and
        # raise KeyError from a weakref callback if ip.reset() has cleared them already.
        torch._dynamo.reset()
        gc.collect()
        ip.reset(new_session=False)  # the next test (and test_magics_gpu) get the GPU back
        gc.collect()
        torch.cuda.empty_cache()
        write_text(log_name, "\n".join(log))
        assert not logs.lines, f"torch printed raw warnings: {logs.lines[:5]}"


def put_back_exactly(restored: Any) -> bool:
    """Everything compared is back bit for bit, nothing uncompared or left changed.

    ``Restored.exact`` also asks that torch's peak counter did not move, which a CUDA step's
    runs raise (a ResNet-50 step; %tune's batch doubled: 4.4 GiB against 1.7 GiB on the H200):
    torch cannot set it back and the restore line says so. That is not a restore failure.
    """
    return not restored.mismatched and not restored.not_restored and not restored.uncompared
