"""%compile's explanations: torch's CUDA-graph skip reason, recompiles, launch-bound steps."""

from __future__ import annotations

import logging

from jupyter_gpu.magics.compile.dynamo_watch import CompileReport, DynamoWatch, Recompile
from jupyter_gpu.magics.compile.explain import GpuTime, from_report, launch_bound


def test_the_cudagraph_skip_log_is_caught_and_kept_off_stderr(capsys: object) -> None:
    logger = logging.getLogger("torch._inductor.cudagraph_utils.__cudagraphs")
    watch = DynamoWatch()
    watch.start()
    try:
        logger.warning(
            "skipping cudagraphs due to mutated inputs (1 instances). Found from : \n"
            '   File "/tmp/x.py", line 3, in step'
        )
    finally:
        report = watch.stop({})
    assert report is not None
    assert report.cudagraph_skips == ["mutated inputs (1 instances)"]
    assert logger.propagate is False or logger.level != logging.DEBUG  # put back


def test_report_explanations_name_the_fix() -> None:
    report = CompileReport(
        compile_time_s=1.0,
        wall_s=1.2,
        frames=2,
        graphs=2,
        graph_break_count=1,
        recompiles=[Recompile("step", "tensor 'x' size mismatch at index 0. expected 4, actual 8")],
        cudagraph_skips=["mutated inputs (1 instances)"],
    )
    kinds = {e.kind: e.text for e in from_report(report)}
    assert set(kinds) == {"cudagraphs", "recompiles", "graph_breaks"}
    assert "mutated inputs (1 instances) (torch's reason)" in kinds["cudagraphs"]
    assert "in-place update" in kinds["cudagraphs"]
    assert "size mismatch" in kinds["recompiles"]
    assert "--dynamic" in kinds["recompiles"]
    assert "--fullgraph" in kinds["graph_breaks"]


def test_launch_bound_says_what_reduce_overhead_would_give() -> None:
    text = launch_bound(GpuTime(kernels=120, busy_s=0.2e-3), 2e-3, None)
    assert text is not None
    assert "busy 200 µs of the 2 ms step" in text.text
    assert "reduce-overhead" in text.text
    assert "10.0x" in text.text
    assert launch_bound(GpuTime(kernels=120, busy_s=1.5e-3), 2e-3, None) is None  # busy enough
    assert launch_bound(GpuTime(kernels=3, busy_s=0.1e-3), 2e-3, None) is None  # few kernels
    graphs_on = launch_bound(GpuTime(kernels=120, busy_s=0.2e-3), 2e-3, "reduce-overhead")
    assert graphs_on is not None
    assert "larger batch" in graphs_on.text


def test_the_pending_backward_warning_becomes_an_explanation() -> None:
    import warnings

    from jupyter_gpu.magics.compile.magic import _replay_warnings

    message = (
        "Unable to hit fast path of CUDAGraphs because of pending, uninvoked backwards. "
        "Consider running with torch.no_grad() or using "
        "torch.compiler.cudagraph_mark_step_begin() before each model invocation"
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            warnings.warn(message, UserWarning, stacklevel=1)
    shown: list[str] = []
    with warnings.catch_warnings():
        warnings.showwarning = lambda m, *a, **k: shown.append(str(m))
        out = _replay_warnings(caught)
    assert [e.kind for e in out] == ["cudagraphs"]
    assert "torch.no_grad()" in out[0].text
    assert shown == []  # it became the explanation, not a raw warning
