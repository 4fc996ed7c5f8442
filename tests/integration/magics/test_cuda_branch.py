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
