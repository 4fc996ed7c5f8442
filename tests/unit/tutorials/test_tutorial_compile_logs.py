"""Reading TORCH_LOGS="output_code" and a TORCH_TRACE folder (notebook 01).

The log lines below have the shape torch 2.13 writes (``torch/_inductor/graph.py`` logs the
``__output_code`` artifact; the C++ kernel is the head of a real CPU compile's code, the Triton
one follows ``torch/_inductor/codegen/triton.py``'s ``async_compile.triton(name, '''...''')``
wrapper). The last test compiles for real in a fresh process.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from jupyter_gpu.tutorials.compile_logs import (
    compile_with_logs,
    first_kernel,
    kernel_names,
    output_code_lines,
    summarize_trace,
)

PREFIX = "V1203 20:12:46.237000 27809 torch/_inductor/graph.py:2722] [0/0] [__output_code] "

CPP = [
    "Output code: ",
    "# AOT ID: ['0_inference']",
    "from ctypes import c_void_p, c_long, c_int",
    "import torch",
    "",
    "cpp_fused_gelu_0 = async_compile.cpp_pybinding(['float*'], r'''",
    "#include <torch/csrc/inductor/cpp_prefix.h>",
    'extern "C"  void  kernel(float* in_out_ptr0)',
    "{",
    "    #pragma omp parallel",
    "''')",
    "",
    "cpp_fused_native_layer_norm_1 = async_compile.cpp_pybinding(['float*', 'float*'], r'''",
    'extern "C"  void  kernel(float* in_out_ptr0, float* out_ptr0)',
    "''')",
    "def call(self, args):",
    "    extern_kernels.addmm(arg1_1, arg2_1, arg0_1, alpha=1, beta=1, out=buf0)",
    "    cpp_fused_gelu_0(buf1)",
]

TRITON = [
    "triton_poi_fused_gelu_0 = async_compile.triton('triton_poi_fused_gelu_0', '''",
    "import triton",
    "import triton.language as tl",
    "",
    "@triton_heuristics.pointwise(",
    "    size_hints={'x': 16384},",
    ")",
    "@triton.jit",
    "def triton_poi_fused_gelu_0(in_out_ptr0, in_ptr0, xnumel, XBLOCK : tl.constexpr):",
    "    xnumel = 16384",
    "    xoffset = tl.program_id(0) * XBLOCK",
    "''', device_str='cuda')",
]


def _log(code: list[str]) -> str:
    other = "I1203 20:12:46.300000 27809 torch/_dynamo/eval_frame.py:1] [0/0] something else"
    return "\n".join([other, *(PREFIX + line for line in code), other])


def test_the_output_code_loses_its_prefix_and_nothing_else_is_kept() -> None:
    code = output_code_lines(_log(CPP))
    assert code == CPP


def test_the_generated_kernels_are_named_in_order() -> None:
    assert kernel_names(CPP) == ["cpp_fused_gelu_0", "cpp_fused_native_layer_norm_1"]
    assert kernel_names(TRITON) == ["triton_poi_fused_gelu_0"]
    assert kernel_names(["def call(self, args):", "    extern_kernels.mm(a, b, out=c)"]) == []


def test_the_first_kernel_starts_at_its_definition() -> None:
    head = first_kernel(CPP, lines=3)
    assert head[0].startswith("cpp_fused_gelu_0 = async_compile.cpp_pybinding(")
    assert len(head) == 3
    triton = first_kernel(TRITON, lines=2)
    assert triton == ["@triton.jit", TRITON[8]]
    assert first_kernel(["def call(self, args):"]) == []


def _record(envelope: dict[str, object], payload: list[str] | None = None) -> str:
    line = f"V1203 20:12:04.411000 27809 torch/_dynamo/utils.py:2350] {json.dumps(envelope)}\n"
    return line + "".join(f"\t{p}\n" for p in payload or [])


def test_a_trace_folder_is_counted_by_record_kind(tmp_path: Path) -> None:
    log = tmp_path / "dedicated_log_torch_trace_abc.log"
    log.write_text(
        _record({"chromium_event": {}, "frame_id": 0, "has_payload": "1"}, ["{", '"ph": "B"', "}"])
        + _record({"chromium_event": {}, "frame_id": 0, "has_payload": "2"}, ["{}"])
        + _record({"artifact": {"name": "torch_version", "encoding": "json"}}, ["{}"])
        + _record({"dynamo_start": {"stack": []}, "frame_id": 0})
        + _record({"inductor_output_code": {"filename": "x.py"}, "frame_id": 0}, ["code"])
        + "V1203 20:12:04.411000 27809 x.py:1] not json\n"
    )
    summary = summarize_trace(tmp_path)
    assert summary.files == ((log.name, log.stat().st_size),)
    kinds = dict(summary.kinds)
    assert kinds == {
        "chromium_event": 2,
        "artifact: torch_version": 1,
        "dynamo_start": 1,
        "inductor_output_code": 1,
        "unreadable": 1,
    }
    assert summary.kinds[0] == ("chromium_event", 2)
    assert summary.records == 6
    assert summary.size_bytes == log.stat().st_size


def test_a_missing_trace_folder_is_empty(tmp_path: Path) -> None:
    summary = summarize_trace(tmp_path / "nothing")
    assert (summary.files, summary.kinds, summary.records) == ((), (), 0)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_one_real_compile_logs_its_code_and_traces_it(tmp_path: Path) -> None:
    logs = compile_with_logs("cpu", width=32, batch=8, parent=str(tmp_path))
    assert logs.kernels, "Inductor generates at least the GELU's C++ kernel"
    assert all(k.startswith("cpp_") for k in logs.kernels)
    assert first_kernel(list(logs.code))[0].startswith(logs.kernels[0])
    assert logs.written_to is not None
    assert Path(logs.written_to).is_file()
    kinds = dict(logs.trace.kinds)
    assert kinds.get("dynamo_start") == 1
    assert kinds.get("inductor_output_code") == 1
    assert Path(logs.folder).parent == tmp_path
