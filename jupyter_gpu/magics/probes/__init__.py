"""What a magic reads of this kernel process, for its reports and its "Why" lines.

- ``evidence.py``: a profile of a few calls, read into plain figures (GPU busy time, kernels,
  torch.compile's own steps, the matmuls by dtype) that the causes quote;
- ``peak.py``: the CUDA allocator's peak over a stretch of code, without resetting torch's
  counter;
- ``allocator.py``: the caching allocator's counters and NVML's view of this process;
- ``process_memory.py``: this process's resident memory and its peak (``%%memsummary`` on CPU);
- ``precision.py``: TF32 and autocast as torch has them set now; TF32 set and put back exactly.

Timing is not here: every duration and speedup comes from the one timing method in
:mod:`jupyter_gpu.measure`, which the tutorials and ``benchmarks/`` share; these probes need a
magic's shell (torch on demand, a ``UsageError`` without it). It stands on ``shell/`` and
never imports a magic (``tests/unit/test_layers.py``).
"""
