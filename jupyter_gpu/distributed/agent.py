"""torchrun's agent as ``%%torchrun`` starts it: tied to the kernel, ended without finalizing.

The launcher starts ``python -c <bootstrap> PACKAGE_ROOT KERNEL_PID TORCHRUN_ARGS...``; the
bootstrap puts this package on the import path (last: an installed jupyter_gpu comes first) and
calls :func:`main`, which

1. sets ``PR_SET_PDEATHSIG`` to ``SIGTERM`` (Linux): if the kernel dies (a restart kills it with
   ``SIGKILL``), torchrun gets ``SIGTERM`` and stops its ranks; then checks that the kernel is
   still its parent, which closes the race of a kernel that died before the ``prctl``;
2. runs ``torch.distributed.run`` as ``python -m torch.distributed.run TORCHRUN_ARGS...`` would;
3. when torchrun ends (done, or exiting with a status), ends the process through
   :func:`~jupyter_gpu.distributed.process_end.end_process`: finalizing an interpreter that
   holds torch takes most of a second of CPU, which the cell would wait for. An exception that
   torchrun lets out takes the normal way, so that its traceback reaches ``torchrun.log``.
"""

from __future__ import annotations

import os
import runpy
import signal
import sys
from typing import NoReturn

from jupyter_gpu.distributed.process import die_with_parent
from jupyter_gpu.distributed.process_end import end_process

#: What the launcher runs with ``python -c`` (arguments: the package's root, the kernel's pid,
#: then torchrun's own).
BOOTSTRAP = """\
import sys
sys.path.append(sys.argv.pop(1))
from jupyter_gpu.distributed.agent import main
main()
"""


def _tie_to_kernel(kernel_pid: int) -> None:
    die_with_parent(signal.SIGTERM)
    # Linux: the kernel is gone already (before the prctl), so nobody would stop torchrun.
    if sys.platform.startswith("linux") and os.getppid() != kernel_pid:
        sys.exit(1)


def main() -> NoReturn:
    """Run torchrun with ``sys.argv[2:]`` for the kernel ``sys.argv[1]`` (the module says how)."""
    _tie_to_kernel(int(sys.argv[1]))
    del sys.argv[1]
    try:
        runpy.run_module("torch.distributed.run", run_name="__main__", alter_sys=True)
    except SystemExit as stop:
        if stop.code is None or isinstance(stop.code, int):
            end_process(stop.code or 0)
        raise  # a message as the status: Python prints it and exits 1
    end_process(0)
