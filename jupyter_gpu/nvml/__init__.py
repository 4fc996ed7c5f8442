"""The real GPUs through NVML (NVIDIA's ``nvidia-ml-py``): the only package that imports pynvml.

- ``backend.py``: ``NvmlBackend``, each group of readings of every GPU (utilization, memory,
  power, temperature, clocks, processes, PCIe, MIG instances...), each NVML error a value.
- ``gpm.py``: SM, tensor-core and DRAM activity from GPU Performance Monitoring (Hopper+).
- ``nvlink.py``: NVLink data throughput from NVML's field values.
- ``per_gpu.py``: what the GPM and NVLink readers share (a lock per GPU, a refusal decided once).
- ``topology.py``: NVLink and PCIe paths between the GPUs and whether P2P works, read on
  demand (``NvmlBackend.topology()``); and how many GPUs NVML sees.
- ``session.py``: one NVML session, ``nvmlInit`` to ``nvmlShutdown``, with the calls out on
  each GPU counted, so that a hung GPU never hangs the process.

``pynvml`` is imported only when a backend or a reading is opened, never at import.
"""
