"""Notebook 04's exercise checks reject the known wrong answers and accept the solutions."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest
import torch
from torch.profiler import ProfilerActivity, profile, record_function, schedule

from jupyter_gpu.tutorials.checks_04 import check_top_kernel, check_worker_choice, top_kernel


@pytest.fixture(scope="module")
def cpu_profile() -> list[object]:
    """A real CPU profile shaped like the notebook's: two annotated ranges around real ops."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(1, 8, 3), torch.nn.ReLU(), torch.nn.Flatten())
    x = torch.randn(32, 1, 24, 24)
    model(x).sum().backward()  # first calls pick their kernels: keep them out of the profile
    with profile(
        activities=[ProfilerActivity.CPU], schedule=schedule(wait=1, warmup=1, active=3)
    ) as prof:
        for _ in range(5):
            with record_function("next batch"):
                time.sleep(0.3)  # time in the range that runs no op, as a DataLoader's Python
            with record_function("train step"):
                model(x).sum().backward()
            prof.step()
    return list(prof.key_averages())


def test_cpu_top_op_is_accepted_and_the_annotation_at_the_top_is_not(
    cpu_profile: list[object],
) -> None:
    naive = max(cpu_profile, key=lambda e: e.self_cpu_time_total)  # the old solution
    assert naive.key == "next batch"  # the Python loop: an annotation tops the table
    assert naive.is_user_annotation
    wrong = check_top_kernel(cpu_profile, naive.key, gpu=False)
    assert not wrong
    assert "user annotation" in wrong.message
    top = top_kernel(cpu_profile, gpu=False)
    assert top.key.startswith("aten::")
    assert check_top_kernel(cpu_profile, top.key, gpu=False)
    assert not check_top_kernel(cpu_profile, None, gpu=False)
    other = next(e.key for e in cpu_profile if e.key.startswith("aten::") and e.key != top.key)
    assert "not the one with the most" in check_top_kernel(cpu_profile, other, gpu=False).message


def _entry(key: str, device: str, self_gpu_us: float, annotation: bool = False) -> object:
    # What key_averages() holds on a GPU run (no GPU here: stand-ins with the fields read).
    return SimpleNamespace(
        key=key,
        device_type=f"DeviceType.{device}",
        is_user_annotation=annotation,
        self_device_time_total=self_gpu_us,
        self_cpu_time_total=0.0 if device == "CUDA" else 100.0,
    )


H200_RUN = [  # the top of issue 21's H200 table: the range tops it at 115.68% Self CUDA
    _entry("train step", "CUDA", 10_420.0, annotation=True),
    _entry("train step", "CPU", 0.0, annotation=True),
    _entry("aten::native_batch_norm", "CPU", 1_578.0),
    _entry("Memcpy HtoD (Pageable -> Device)", "CUDA", 1_387.0),
    _entry("void at::native::max_pool_backward_nhwc<c10::BFloat16>", "CUDA", 1_282.0),
    _entry("void at::native::batch_norm_collect_statistics_channels_last_kernel", "CUDA", 900.0),
]


def test_gpu_check_rejects_the_range_the_op_and_the_copy_and_accepts_the_kernel() -> None:
    range_answer = check_top_kernel(H200_RUN, "train step", gpu=True)
    assert not range_answer
    assert "exceed 100%" in range_answer.message
    assert "op on the CPU" in check_top_kernel(H200_RUN, "aten::native_batch_norm", True).message
    copy = check_top_kernel(H200_RUN, "Memcpy HtoD (Pageable -> Device)", gpu=True)
    assert "not a kernel" in copy.message
    kernel = "void at::native::max_pool_backward_nhwc<c10::BFloat16>"
    assert top_kernel(H200_RUN, gpu=True).key == kernel
    assert check_top_kernel(H200_RUN, kernel, gpu=True)


def test_worker_choice_needs_the_smallest_good_count_and_evidence_past_it() -> None:
    rates = {0: 1_000.0, 1: 2_000.0, 2: 3_900.0, 4: 4_000.0, 8: 4_100.0}
    calls: list[int] = []

    def judge(r: dict[int, float], chosen: object, limit: int = 16) -> object:
        def remeasure(w: int) -> float:  # the same rate again
            calls.append(w)
            return r[w]

        return check_worker_choice(r, chosen, limit=limit, remeasure=remeasure, keep=0.75)

    assert judge(rates, 2)
    assert calls == [2]
    best_not_smallest = judge(rates, 8)
    assert not best_not_smallest
    assert "2 is the smallest" in best_not_smallest.message
    # The old exercise: rates that still grow, and the largest count tried as the answer.
    growing = {0: 1_000.0, 1: 2_000.0, 2: 4_000.0, 8: 16_000.0}
    no_evidence = judge(growing, 8)
    assert not no_evidence
    assert "largest count you measured" in no_evidence.message
    assert judge(growing, 8, limit=8)  # unless it reaches the most workers that make sense
    assert not judge({0: 1.0, 2: 2.0}, 2)  # fewer than three counts
    assert not judge({1: 1.0, 2: 2.0, 4: 3.0}, 4)  # no 0
    assert not judge(rates, 3)  # not measured
    assert not judge({0: 1.0, 1: float("nan"), 2: 2.0}, 2)
    assert not judge({0: 1.0, 1: 2.0, 2: 2.0}, None)


def test_worker_choice_rejects_a_choice_the_remeasurement_does_not_support() -> None:
    rates = {0: 1_000.0, 2: 4_000.0, 4: 4_100.0}
    slower: list[int] = []

    def remeasure(w: int) -> float:
        slower.append(w)
        return 1_000.0

    feedback = check_worker_choice(rates, 2, limit=16, remeasure=remeasure, keep=0.75)
    assert not feedback
    assert slower == [2, 2, 2]  # the best of three tries
    assert "measure again" in feedback.message
