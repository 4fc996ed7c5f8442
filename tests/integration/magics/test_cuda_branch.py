"""The magics' CUDA branch, where CUDA exists (skipped elsewhere; the other files hide CUDA).

On a GPU machine the whole suite runs with CUDA visible: the other magics tests check the CPU
branch with CUDA hidden on purpose (``conftest.hide_cuda``), these check what a GPU user gets.
"""

from __future__ import annotations

import pytest
import torch

from .conftest import Shell

pytestmark = [pytest.mark.cuda_visible, pytest.mark.gpu]

MATMUL = "a = torch.ones(64, 64, device='cuda')\nz = a @ a\ntorch.cuda.synchronize()"


def test_amp_picks_cuda_autocast_when_cuda_exists(shell: Shell) -> None:
    shell.ok("%%amp\n" + MATMUL)
    assert shell["z"].device.type == "cuda"
    assert shell["z"].dtype in (torch.bfloat16, torch.float16)
    assert not torch.is_autocast_enabled("cuda")  # off again after the cell
    shell.ok("%%amp --device cuda\n" + MATMUL)  # no "use --device cpu" UsageError here
    assert shell["z"].dtype in (torch.bfloat16, torch.float16)


def test_profile_measures_gpu_time_and_sorts_by_it(shell: Shell) -> None:
    ran = shell.ok("%%profile\n" + MATMUL)
    assert "No CUDA GPU" not in ran.text
    ran = shell.ok("%%profile --sort self_gpu\n" + MATMUL)  # a UsageError only without CUDA
    assert "No CUDA GPU" not in ran.text


def test_memsummary_reports_the_cuda_allocator(shell: Shell) -> None:
    shell.ok("kept = torch.zeros(1024, 1024, device='cuda')")
    ran = shell.ok("%memsummary")
    assert "No CUDA device" not in ran.text


def test_memsummary_measures_a_bare_context_once_and_it_fits_in_the_gap(shell: Shell) -> None:
    """The gap (NVML's figure minus reserved) holds this kernel's context: a bare one fits."""
    from jupyter_gpu.magics.memory import context

    shell.ok("kept = torch.zeros(1024, 1024, device='cuda')\nkept @ kept")
    ran = shell.ok("s = %memsummary -o")
    s = shell["s"]
    if s.nvml_used_bytes is None:
        pytest.skip(f"NVML gives no figure for this process here: {s.nvml_reason}")
    assert s.context_bytes is not None, s.context_reason
    gap = s.nvml_used_bytes - s.reserved_bytes
    assert 16 * 2**20 < s.context_bytes <= gap + 64 * 2**20, (s.context_bytes, gap)
    assert "A bare CUDA context on this GPU takes" in ran.text
    assert "workspaces are not in it" in ran.text
    measured = dict(context._measured)
    shell.ok("%memsummary -q")
    assert context._measured == measured  # read once per GPU and kernel
