"""The table of causes: each cause fires when its evidence is there and stays quiet when not.

Where the evidence exists on a CPU (profiler op names and dtypes, torch.compile's own profiler
ranges, dynamo's records), it is measured here with real torch: a tiny elementwise function,
a float32 matmul MLP and a bfloat16 one, compiled with the eager backend (no C++ compiler
needed). Where it is CUDA-only (GPU busy time, TF32, kernels), the measurement records are
built by hand; tests/gpu/test_measure_gpu.py measures the same three cases on a real GPU.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import pytest
import torch

from jupyter_gpu.magics import causes as C
from jupyter_gpu.magics.probes.evidence import CallProfile, MatmulOp, profile_calls
from jupyter_gpu.measure import fmt_seconds

# One xdist worker runs the whole file, in order (.ci/test's --dist loadgroup): the last test
# checks what the others saw.
pytestmark = pytest.mark.xdist_group("causes_table")

US = 1e-6
FIRED: set[int] = set()  # which rows of the table these tests saw fire
RAN: set[str] = set()  # which of this file's tests ran in this process


@pytest.fixture(autouse=True)
def _ran_here(request: pytest.FixtureRequest) -> None:
    RAN.add(request.node.originalname)


def kinds(ev: C.Evidence) -> list[str]:
    for i, cause in enumerate(C.CAUSES):
        if ev.question in cause.questions and cause.trigger(ev):
            FIRED.add(i)
    return [e.kind for e in C.explain(ev)]


def texts(ev: C.Evidence) -> str:
    return "\n".join(e.text for e in C.explain(ev))


# ---------------------------------------------------------------------- real CPU evidence


@pytest.fixture(scope="module")
def dynamo() -> Iterator[None]:
    yield
    torch._dynamo.reset()


def tiny(a: torch.Tensor) -> torch.Tensor:
    return a + 1


def mlp(width: int = 512, depth: int = 3) -> torch.nn.Module:
    torch.manual_seed(0)
    layers: list[torch.nn.Module] = []
    for _ in range(depth):
        layers += [torch.nn.Linear(width, width), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers)


def compiled_profile(fn: Callable[[], Any]) -> CallProfile:
    for _ in range(3):
        fn()  # compiled and warm
    profile = profile_calls(fn, calls=3)
    assert profile is not None
    return profile


def bench(profile: CallProfile, eager_s: float, compiled_s: float, **kw: Any) -> C.Evidence:
    return C.Evidence(
        "bench",
        cuda=profile.cuda,
        eager_s=eager_s,
        compiled_s=compiled_s,
        profile=profile,
        compile=C.CompileFacts(graphs=1),
        **kw,
    )


def least_disturbed_profile(fn: Callable[[], Any], tries: int = 3) -> CallProfile:
    """Of ``tries`` profiles of ``fn``, the one whose compiled graph took least.

    Another process taking the core in the middle of an op only adds to that op's time: on a
    busy machine one profile of a call of microseconds can show its one tiny op as most of the
    call (342 µs once, under a load of 13 on 2 cores). The least disturbed profile is the
    closest to the code's own shape.
    """
    profiles = [compiled_profile(fn) for _ in range(tries)]
    return min(profiles, key=lambda p: p.graph_s if p.graph_s is not None else p.work_s)


def test_tiny_elementwise_function_is_overhead_not_matmuls(dynamo: None) -> None:
    t = torch.randn(8)
    f = torch.compile(tiny, backend="eager")
    p = least_disturbed_profile(lambda: f(t))
    assert p.matmul == []  # no matmul ran: nothing may blame one
    assert p.guard_s is not None  # torch.compile's own steps are in the profile
    assert p.region_s is not None
    ev = bench(p, eager_s=4 * US, compiled_s=26 * US)
    found = kinds(ev)
    assert found == ["launch_bound"], texts(ev)
    text = texts(ev)
    assert "compiled graph's own work took" in text
    assert "matmul" not in text.lower()
    assert "tf32" not in text.lower()
    # The same profile with a CUDA-only TF32 setting off: still no TF32 line (no matmul ran).
    off = C.Precision(tf32_matmul=False, tf32_conv=False, tf32_hardware=True)
    assert "tf32" not in kinds(replace(ev, precision=off))


def compiled_fp32_mlp() -> tuple[Callable[[], torch.Tensor], CallProfile]:
    """A 3-layer fp32 MLP compiled (eager backend), one no-grad call of it, and its profile.

    512 x 1024 x 1024 matmuls dominate it on a CPU.
    """
    model = mlp(width=1024, depth=3)
    x = torch.randn(512, 1024)
    compiled = torch.compile(model, backend="eager")

    def call() -> torch.Tensor:
        with torch.no_grad():
            return compiled(x)

    return call, compiled_profile(call)


def test_fp32_mlp_on_cpu_counts_float32_matmuls_and_names_no_tf32(dynamo: None) -> None:
    _, p = compiled_fp32_mlp()
    assert {m.dtype for m in p.matmul} == {"float32"}
    assert sum(m.calls for m in p.matmul) == 3  # one innermost matmul per layer, per call
    assert all(not m.conv for m in p.matmul)
    ev = bench(p, eager_s=p.wall_s, compiled_s=p.wall_s)
    assert "tf32" not in kinds(ev)  # a CPU: TF32 does not exist here
    # 512 x 1024 x 1024 matmuls dominate the profile of this MLP (about 80 % on a 2-vCPU VM)
    assert p.matmul_s() / p.busy_s >= C.MATMUL_SHARE
    assert kinds(ev) == ["matmuls"]
    assert "aten::addmm x3" in texts(ev)
    assert "the CPU's BLAS" in texts(ev)


def test_the_rest_of_a_matmul_bound_cpu_call_is_a_share_of_the_timed_call(dynamo: None) -> None:
    # A few profiled calls are slower than the timed median (the profiler's cost per op, other
    # work on the cores: "the rest (4.09 ms a call)" beside a compiled call timed at 253 µs):
    # the figure is the profile's share of the call as timed.
    call_once, p = compiled_fp32_mlp()
    timed = []
    for _ in range(5):
        start = time.perf_counter()
        call_once()
        timed.append(time.perf_counter() - start)
    call = min(timed)
    ev = bench(p, eager_s=call, compiled_s=call)
    assert kinds(ev) == ["matmuls"]
    share = p.matmul_s() / p.busy_s
    rest = fmt_seconds((1.0 - share) * call)
    assert f"about {rest} of the {fmt_seconds(call)} a compiled call takes" in texts(ev)
    # Profiled calls 16 times slower than the timed one (as in that report): the same rest.
    stretched = replace(
        p,
        work_s=p.work_s * 16,
        wall_s=p.wall_s * 16,
        matmul=[replace(m, time_s=m.time_s * 16) for m in p.matmul],
    )
    assert texts(bench(stretched, call, call)) == texts(ev)


def test_the_eager_backends_compile_nothing_and_no_matmul_or_tf32_is_blamed(
    dynamo: None,
) -> None:
    model = mlp(width=1024, depth=3)
    x = torch.randn(512, 1024)
    compiled = torch.compile(model, backend="eager")
    with torch.no_grad():
        p = compiled_profile(lambda: compiled(x))
    assert p.matmul_s() / p.busy_s >= C.MATMUL_SHARE  # matmul-bound: "matmuls" without a backend
    for backend, what in (("eager", "op by op"), ("aot_eager", "AOTAutograd")):
        ev = bench(p, eager_s=p.wall_s, compiled_s=p.wall_s * 1.2, backend=backend)
        assert kinds(ev) == ["no_compiler"], texts(ev)
        text = texts(ev)
        assert f"The {backend} backend compiles nothing: " in text
        assert what in text
        assert "--backend inductor" in text
        assert "Matmuls" not in text
    # A GPU with TF32 off and float32 matmuls: still no TF32 line, nothing was compiled.
    gpu = bench(cuda_profile(1e-3, kernels=12, matmul=FP32_MM), 1e-3, 1.1e-3, backend="eager")
    assert kinds(replace(gpu, precision=TF32_OFF)) == ["no_compiler"]
    assert kinds(replace(gpu, backend="inductor", precision=TF32_OFF)) == ["tf32"]


def test_a_cpu_call_in_a_process_that_used_cuda_is_measured_as_a_cpu_call() -> None:
    # On a GPU machine CUDA is often initialised before a CPU function is benched: the profile
    # then asks for CUDA activity too, but nothing ran there (GPU run 3 of 2026-12-01: "the GPU
    # was busy 0 µs" for a CPU function). What the call costs is its CPU time.
    from jupyter_gpu.magics.probes.evidence import read_profile

    net, x = mlp(), torch.randn(64, 512)
    with torch.no_grad(), torch.profiler.profile(record_shapes=True, acc_events=True) as prof:
        net(x)
    figures = read_profile(prof, calls=1, cuda=True, wall_s=1e-3)
    assert figures.cuda is False
    assert figures.gpu_busy_s is None
    assert figures.matmul_s() > 0


def test_bf16_mlp_counts_bfloat16_matmuls(dynamo: None) -> None:
    model = mlp(width=256, depth=2)
    x = torch.randn(64, 256)

    def step() -> torch.Tensor:
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
            return model(x)

    p = compiled_profile(step)
    assert {m.dtype for m in p.matmul} == {"bfloat16"}  # autocast's outer linear not counted
    assert p.casts_s > 0  # autocast's casts were measured
    # Even on a GPU with TF32 off, bf16 matmuls are no reason to name TF32.
    gpu = replace(p, cuda=True, gpu_busy_s=p.work_s, kernels=6.0)
    off = C.Precision(tf32_matmul=False, tf32_conv=False, tf32_hardware=True)
    ev = bench(gpu, eager_s=1e-3, compiled_s=1e-3, precision=off)
    assert "tf32" not in kinds(ev)


# ---------------------------------------------------------------------- CUDA-only evidence


def cuda_profile(
    busy: float, *, kernels: float = 1, matmul: list[MatmulOp] | None = None
) -> CallProfile:
    return CallProfile(
        calls=3,
        cuda=True,
        wall_s=busy * 2,
        work_s=busy,
        gpu_busy_s=busy,
        kernels=kernels,
        guard_s=10 * US,
        region_s=60 * US,
        matmul=matmul or [],
    )


FP32_MM = [MatmulOp("aten::addmm", "float32", False, 3, 800 * US)]
BF16_MM = [MatmulOp("aten::addmm", "bfloat16", False, 3, 200 * US)]
TF32_OFF = C.Precision(tf32_matmul=False, tf32_conv=True, tf32_hardware=True)


def test_gpu_busy_a_small_part_of_the_call_is_launch_bound_with_the_figures() -> None:
    # The H200's figures for a + 1 on 8 floats: eager 38 µs, compiled 117 µs.
    ev = bench(cuda_profile(3 * US), eager_s=38 * US, compiled_s=117 * US)
    assert kinds(ev) == ["launch_bound"]
    text = texts(ev)
    assert "busy 3.00 µs of the 117 µs a compiled call takes" in text
    assert "eager 38.0 µs" in text
    assert "TF32" not in text
    ev = bench(cuda_profile(110 * US, kernels=40), eager_s=120 * US, compiled_s=117 * US)
    assert "launch_bound" not in kinds(ev)  # busy enough: quiet
    many = bench(cuda_profile(200 * US, kernels=96), eager_s=2e-3, compiled_s=2.1e-3)
    assert "--mode reduce-overhead" in texts(many)
    graphs = bench(cuda_profile(200 * US, kernels=96), 2e-3, 2.1e-3, mode="reduce-overhead")
    assert "larger batch" in texts(graphs)


def test_the_cuda_graph_hint_says_what_the_graphs_cover() -> None:
    # One CUDA graph per compiled graph: forward and backward apart, one more per graph break;
    # the loss and optimizer.step() outside the compiled code still launch kernel by kernel.
    many = bench(cuda_profile(200 * US, kernels=96), eager_s=2e-3, compiled_s=2.1e-3)
    on = bench(cuda_profile(200 * US, kernels=96), 2e-3, 2.1e-3, mode="reduce-overhead")
    for ev in (many, on):
        text = texts(ev)
        assert "one CUDA graph" not in text
        assert "the backward are separate graphs" in text
        assert "each graph break adds more" in text
        assert "optimizer.step() unless compiled too" in text
    assert "only as far as those graphs cover its 96 kernels" in texts(many)


def test_tf32_only_when_float32_matmuls_ran_with_tf32_off() -> None:
    p = cuda_profile(1e-3, kernels=12, matmul=FP32_MM)
    ev = bench(p, eager_s=1.1e-3, compiled_s=1.05e-3, precision=TF32_OFF)
    assert "tf32" in kinds(ev)
    assert "aten::addmm x3" in texts(ev)
    assert "80%" in texts(ev)  # 800 µs of the GPU's 1 ms
    on = replace(TF32_OFF, tf32_matmul=True)
    assert "tf32" not in kinds(replace(ev, precision=on))
    pre_ampere = replace(TF32_OFF, tf32_hardware=False)
    assert "tf32" not in kinds(replace(ev, precision=pre_ampere))
    bf16 = replace(ev, profile=cuda_profile(1e-3, kernels=12, matmul=BF16_MM))
    assert "tf32" not in kinds(bf16)
    few = [MatmulOp("aten::mm", "float32", False, 1, 50 * US)]  # 5 % of the GPU's time
    assert "tf32" not in kinds(replace(ev, profile=cuda_profile(1e-3, kernels=12, matmul=few)))
    conv = [MatmulOp("aten::cudnn_convolution", "float32", True, 2, 600 * US)]
    conv_off = replace(TF32_OFF, tf32_matmul=True, tf32_conv=False)
    conv_ev = replace(ev, profile=cuda_profile(1e-3, kernels=12, matmul=conv), precision=conv_off)
    assert "tf32" in kinds(conv_ev)
    assert "convolutions" in texts(conv_ev)


def test_matmul_bound_when_library_matmuls_take_most_of_the_gpu() -> None:
    bf16 = [MatmulOp("aten::addmm", "bfloat16", False, 3, 800 * US)]
    ev = bench(cuda_profile(1e-3, kernels=12, matmul=bf16), eager_s=1.0e-3, compiled_s=0.98e-3)
    assert kinds(ev) == ["matmuls"]
    assert "cuBLAS" in texts(ev)
    light = [MatmulOp("aten::addmm", "bfloat16", False, 3, 100 * US)]
    quiet = replace(ev, profile=cuda_profile(1e-3, kernels=12, matmul=light))
    assert kinds(quiet) == ["none"]


def test_no_cause_found_says_so_with_the_figures() -> None:
    ev = bench(cuda_profile(90 * US, kernels=4), eager_s=100 * US, compiled_s=117 * US)
    assert kinds(ev) == ["none"]
    text = texts(ev)
    assert text.startswith("no cause found: the GPU was busy 90.0 µs of the 117 µs")
    no_profile = C.Evidence("bench", eager_s=4 * US, compiled_s=26 * US)
    assert "eager 4.00 µs, compiled 26.0 µs a call" in texts(no_profile)


# ---------------------------------------------------------------------- what the compile recorded


BREAK = C.GraphBreakFact("cell [7] line 4", "s = t.sum().item()", "Tensor.item() call")


@pytest.mark.parametrize("question", ["bench", "report"])
def test_compile_facts_fire_when_recorded_and_are_quiet_otherwise(question: str) -> None:
    recorded = C.CompileFacts(
        graphs=2,
        graph_break_count=1,
        graph_breaks=(BREAK,),
        recompiles=(("step", "tensor 'x' size mismatch at index 0. expected 4, actual 8"),),
        cudagraph_skips=("mutated inputs (1 instances)",),
    )
    ev = C.Evidence(question, eager_s=1e-3, compiled_s=1e-3, compile=recorded)
    found = kinds(ev)
    assert {"cudagraphs", "recompiles", "graph_breaks"} <= set(found)
    text = texts(ev)
    assert "cell [7] line 4: s = t.sum().item()" in text  # the break, with its line
    assert "size mismatch at index 0" in text  # the recompile, with its guard
    assert "mutated inputs (1 instances) (torch's reason)" in text
    assert "in-place update" in text
    clean = C.Evidence(question, eager_s=1e-3, compiled_s=1e-3, compile=C.CompileFacts(graphs=1))
    assert not {"cudagraphs", "recompiles", "graph_breaks"} & set(kinds(clean))


@pytest.mark.parametrize(
    ("guard", "advice", "not_advice"),
    [
        ("tensor 'x' size mismatch at index 0. expected 4, actual 8", "--dynamic", "num_threads"),
        # notebook 07 on an H200: a checkpointed block re-run in autograd's backward thread,
        # as benchmarks/checkpoint_threads.py measured it
        (
            "GLOBAL_STATE changed: num_threads ",
            "torch.set_num_threads(torch.get_num_threads())",
            "--dynamic",
        ),
        ("GLOBAL_STATE changed: grad_mode ", "autograd on or off", "--dynamic"),
    ],
)
def test_a_recompile_s_advice_follows_the_guard_that_failed(
    guard: str, advice: str, not_advice: str
) -> None:
    recorded = C.CompileFacts(graphs=1, recompiles=(("forward", guard),))
    text = texts(C.Evidence("report", compile=recorded))
    assert guard.strip() in text
    assert advice in text
    assert not_advice not in text


def test_the_cuda_graph_slow_path_fires_only_when_torch_warned_it() -> None:
    ev = C.Evidence("bench", eager_s=1e-3, compiled_s=1e-3, pending_backward=True)
    assert "cudagraphs" in kinds(ev)
    assert "torch.no_grad()" in texts(ev)
    assert "cudagraphs" not in kinds(replace(ev, pending_backward=False))


# ---------------------------------------------------------------------- %amp compare


def amp(ref: CallProfile | None, red: CallProfile | None, times: tuple[float, float]) -> C.Evidence:
    return C.Evidence(
        "amp",
        cuda=bool(ref and ref.cuda),
        modes={"fp32": C.ModeFacts(times[0], ref), "bf16": C.ModeFacts(times[1], red)},
    )


def test_amp_launch_bound_and_few_matmuls() -> None:
    small_mm = [MatmulOp("aten::mm", "float32", False, 9, 40 * US)]
    ref = cuda_profile(400 * US, kernels=300, matmul=small_mm)
    red = cuda_profile(
        380 * US, kernels=320, matmul=[MatmulOp("aten::mm", "bfloat16", False, 9, 20 * US)]
    )
    ev = amp(ref, red, (2.1e-3, 2.2e-3))
    found = kinds(ev)
    assert "launch_bound" in found
    assert "few_matmuls" in found
    text = texts(ev)
    assert "In bf16 the GPU was busy 380 µs of the 2.20 ms a step takes" in text
    assert "10% of the GPU's busy time in fp32" in text
    busy = amp(cuda_profile(2e-3, matmul=small_mm), cuda_profile(2e-3), (2.1e-3, 2.1e-3))
    assert "launch_bound" not in kinds(busy)


def test_amp_slow_matmuls_and_casts_from_real_cpu_profiles() -> None:
    model = mlp(width=256, depth=2)
    x = torch.randn(64, 256)

    def step(dtype: torch.dtype | None) -> Callable[[], Any]:
        def run() -> torch.Tensor:
            with (
                torch.no_grad(),
                torch.autocast("cpu", dtype=dtype or torch.bfloat16, enabled=dtype is not None),
            ):
                return model(x)

        return run

    ref = profile_calls(step(None), calls=3)
    red = profile_calls(step(torch.bfloat16), calls=3)
    assert ref is not None
    assert red is not None
    assert {m.dtype for m in ref.matmul} == {"float32"}
    assert {m.dtype for m in red.matmul} == {"bfloat16"}
    ev = amp(ref, red, (ref.wall_s, red.wall_s))
    found = kinds(ev)
    if red.matmul_s() >= ref.matmul_s():  # this CPU runs bf16 matmuls no faster
        assert "slow_matmuls" in found
        assert "on this CPU they ran no faster" in texts(ev)
    # Built from figures: fires when bf16's matmuls take longer, quiet when they are faster.
    slow = amp(
        cuda_profile(1e-3, matmul=FP32_MM),
        cuda_profile(1.2e-3, matmul=[MatmulOp("aten::addmm", "bfloat16", False, 3, 900 * US)]),
        (1e-3, 1.2e-3),
    )
    assert "slow_matmuls" in kinds(slow)
    fast = amp(cuda_profile(1e-3, matmul=FP32_MM), cuda_profile(1e-3, matmul=BF16_MM), (1e-3, 1e-3))
    assert "slow_matmuls" not in kinds(fast)
    casts = amp(
        cuda_profile(1e-3, matmul=FP32_MM),
        replace(cuda_profile(1e-3, matmul=BF16_MM), casts_s=400 * US),
        (1e-3, 1e-3),
    )
    assert "casts" in kinds(casts)
    assert "casts" not in kinds(fast)


def test_amp_no_cause_found_gives_the_figures() -> None:
    ev = amp(
        cuda_profile(1e-3, matmul=FP32_MM), cuda_profile(1e-3, matmul=BF16_MM), (1e-3, 0.98e-3)
    )
    assert kinds(ev) == ["none"]
    assert texts(ev).startswith("no cause found: bf16 980 µs against fp32 1.00 ms a step")


# ---------------------------------------------------------------------- %%profile


def cell(**kw: Any) -> C.Evidence:
    base: dict[str, Any] = {
        "cuda": True,
        "window_s": 1e-3,
        "kernel_count": 10,
        "gpu_busy_s": 200 * US,
    }
    base.update(kw)
    return C.Evidence("profile", cuda=base["cuda"], cell=C.ProfileFacts(**base))


IDLE = {"gpu_idle_fraction": 0.8}


def test_profile_hints_follow_the_largest_idle_share() -> None:
    assert kinds(cell(**IDLE, idle_s={"host": 7e-4, "kernels": 1e-4})) == ["host"]
    assert "on the CPU the largest item was enumerate(DataLoader)" in texts(
        cell(
            **IDLE,
            idle_s={"host": 7e-4},
            biggest_cpu_item=("enumerate(DataLoader)#_SingleProcessDataLoaderIter", 1e-4),
        )
    )
    blocked = {"syncs": 25, "syncs_text": "25 syncs at cell [4] line 3 (x25)"}
    assert kinds(cell(**IDLE, idle_s={"host": 7e-4}, **blocked, sync_blocked_s=3e-4)) == [
        "host_syncs"
    ]
    # syncs, but little time blocked in them: not the cause
    assert kinds(cell(**IDLE, idle_s={"host": 7e-4}, **blocked, sync_blocked_s=1e-5)) == ["host"]
    assert kinds(cell(**IDLE, idle_s={"host": 7e-4}, kernel_count=4100, gpu_busy_s=2e-2)) == [
        "launch_bound"
    ]
    assert kinds(cell(**IDLE, idle_s={"kernels": 7e-4})) == ["between_kernels"]
    # The wait at each launch is the measured one: 700 µs of gaps between 10 kernels.
    assert "10 kernels of 20.0 µs on average, 77.8 µs idle from one to the next" in texts(
        cell(**IDLE, idle_s={"kernels": 7e-4})
    )
    assert kinds(cell(**IDLE, idle_s={"copies": 7e-4})) == ["copies"]
    assert kinds(cell(**IDLE, idle_s={"other": 7e-4})) == ["other_wait"]
    assert kinds(cell(gpu_idle_fraction=0.1, idle_s={"host": 1e-4})) == []  # busy: quiet


STARVED = {  # notebook 04's starved pipeline as measured on the H200 (seconds)
    "window_s": 2.32,
    "gpu_busy_s": 0.05,
    "gpu_idle_fraction": 0.98,
    "idle_s": {"host": 2.2, "copies": 0.07},
    "syncs": 20,
    "syncs_text": "20 device sync(s) (cudaStreamSynchronize x20) at cell [9] line 5 (x10)",
    "sync_blocked_s": 0.04,
    "loader_s": 2.23,
    "loader_range": "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__",
    "loader_seen": "slow_batches (loader) (num_workers=0, pin_memory=False, "
    "persistent_workers=False)",
    "loader_fix": "DataLoader(..., num_workers=3, pin_memory=True, persistent_workers=True) "
    "(3 = the 4 CPUs this kernel may use, less one for the training loop)",
    "steps": 10,
}


def test_a_starved_loader_gets_the_loader_fix_not_the_sync_advice() -> None:
    ev = cell(**STARVED)
    assert kinds(ev) == ["dataloader"]
    text = texts(ev)
    assert "GPU idle 98% of 10 steps" in text
    assert "(_SingleProcessDataLoaderIter) took 2.23 s of the 2.32 s measured (96%)" in text
    assert "slow_batches (loader) (num_workers=0" in text
    assert "Try DataLoader(..., num_workers=3, pin_memory=True, persistent_workers=True)" in text
    assert "read losses" not in text
    assert "every N steps" not in text
    # the same run, where the CPU was blocked in its syncs longer than in the loader
    syncs_won = cell(**{**STARVED, "loader_s": 0.3, "sync_blocked_s": 1.5})
    assert kinds(syncs_won) == ["host_syncs"]
    assert "blocked in syncs for 1.50 s of the 2.32 s measured (65%)" in texts(syncs_won)
    assert "cell [9] line 5" in texts(syncs_won)
    # on CPU the loader's share is said too (there is no GPU idle time to split)
    cpu = cell(cuda=False, window_s=2.0, loader_s=1.8, loader_fix="DataLoader(..., num_workers=3)")
    assert kinds(cpu) == ["dataloader"]
    assert texts(cpu).startswith("the DataLoader's __next__ (its iterator) took 1.80 s")


def test_profile_hints_on_syncs_matmuls_no_kernel_and_cpu() -> None:
    assert kinds(cell(kernel_count=0, gpu_busy_s=0.0)) == ["no_kernel"]
    many = {"syncs": 12, "syncs_text": "12 device sync(s)"}
    assert kinds(cell(**many, sync_blocked_s=5e-4)) == ["syncs"]
    assert "blocked in syncs for 500 µs of the 1.00 ms measured (50%)" in texts(
        cell(**many, sync_blocked_s=5e-4)
    )
    assert kinds(cell(**many, sync_blocked_s=1e-5)) == []  # counted, but hardly blocked
    assert kinds(cell(syncs=3, syncs_text="3 device sync(s)")) == []
    mm = {"gpu_total_s": 1e-3, "matmul_gpu_s": 8e-4, "matmul_names": "sm90_gemm"}
    assert kinds(cell(**mm)) == ["matmuls"]
    assert "%amp compare" in texts(cell(**mm))
    assert kinds(cell(**mm, autocast_on=True)) == []
    cpu = {"cuda": False, "cpu_total_s": 1e-2}
    assert kinds(cell(**cpu, top_cpu=("aten::addmm", 6e-3))) == ["top_op"]
    assert kinds(cell(**cpu, top_cpu=("aten::addmm", 1e-3))) == []
    assert kinds(cell(**cpu, op_calls=5000, top_cpu=None)) == ["per_op"]
    assert kinds(cell(**cpu, op_calls=50, top_cpu=None)) == []


def test_every_row_of_the_table_was_seen_firing(request: pytest.FixtureRequest) -> None:
    # Runs last in this file: every cause has a test above that makes it fire. FIRED is this
    # process's own, so the check needs every other test of the file to have run here first:
    # pytest-xdist keeps the file on one worker only with --dist loadgroup (the file's
    # xdist_group; with plain -n, on the H200 at -n 12, the worker that ran this check had not
    # seen at least 6 of the 22 rows fire), and -k may leave some out.
    others = {name for name in dir(request.module) if name.startswith("test_")}
    others.discard(request.node.originalname)
    if not others <= RAN:
        left = len(others - RAN)
        pytest.skip(
            f"{left} of this file's other tests ran in another process (run pytest-xdist with "
            "--dist loadgroup), or not at all"
        )
    missing = [f"{i}: {c.kind}" for i, c in enumerate(C.CAUSES) if i not in FIRED]
    assert not missing, missing
