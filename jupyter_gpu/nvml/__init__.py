"""The real GPUs through NVML (NVIDIA's ``nvidia-ml-py``): the only package that imports pynvml.

- ``backend.py``: ``NvmlBackend``, the readings of every GPU (utilization, memory, power,
  temperature, clocks, processes, PCIe, MIG instances), each NVML error a value.
- ``gpm.py``: SM, tensor-core and DRAM activity from GPU Performance Monitoring (Hopper+).
- ``topology.py``: NVLink and PCIe paths between the GPUs and whether P2P works, read on
  demand; and how many GPUs NVML sees.
- ``session.py``: one NVML session, ``nvmlInit`` to ``nvmlShutdown``, with the calls out on
  each GPU counted, so that a hung GPU never hangs the process.

``pynvml`` is imported only when a backend or a reading is opened, never at import.
"""
