"""GPU and host sampling: the only package that talks to NVML."""
