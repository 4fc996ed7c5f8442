"""Multi-GPU from a notebook cell: the launcher behind ``%%torchrun``.

- :func:`launch` runs a cell on every rank with ``python -m torch.distributed.run`` (torchrun)
  in fresh processes, streams each rank's output with a rank prefix, stops every process on an
  interrupt, and explains a failure with the failing rank's own traceback
  (:class:`TorchrunError`).
- :func:`torchrun_result` (also ``jupyter_gpu.torchrun_result``) sends an object from rank 0
  back to the notebook.

Importing this package imports neither torch nor NVML. See docs/distributed.md.
"""

from __future__ import annotations

from jupyter_gpu.distributed.launcher import RunOutcome, TorchrunError, launch
from jupyter_gpu.distributed.rendezvous import Endpoint, EndpointError, parse_endpoint
from jupyter_gpu.distributed.result import (
    DEFAULT_LIMIT_BYTES,
    ResultTooLargeError,
    parse_size,
    torchrun_result,
)
from jupyter_gpu.distributed.script import LaunchSpec

__all__ = [
    "DEFAULT_LIMIT_BYTES",
    "Endpoint",
    "EndpointError",
    "LaunchSpec",
    "ResultTooLargeError",
    "RunOutcome",
    "TorchrunError",
    "launch",
    "parse_endpoint",
    "parse_size",
    "torchrun_result",
]
