"""Fakes for tests: only the GPU is ever faked (a fake NVML), always labelled as such."""
