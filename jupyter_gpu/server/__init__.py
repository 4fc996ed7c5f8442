"""The Jupyter server extension: API handlers over the one background sampler.

The server never imports torch and never talks to NVML itself: it reads ``jupyter_gpu.sampling``'s
sampler, whose records are ``jupyter_gpu.readings``'.
"""
