"""The data-sheet table: lookups by NVML name, dense figures from printed ones, MFU's arithmetic."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from jupyter_gpu.measure.peaks import (
    DTYPES,
    TABLE,
    dtype_key,
    find_gpu,
    markdown_table,
    mfu,
    peak_for,
)

# Each NVML/CUDA name, the board it must find, and its dense bf16 peak (fp16 for the T4), from
# the figures the documents print: sparse ones halved, dense ones as printed.
NAMES = [
    ("NVIDIA H200", "H200 SXM", "bf16", 989.5),
    ("NVIDIA H200 NVL", "H200 NVL", "bf16", 835.5),
    ("NVIDIA H100 80GB HBM3", "H100 SXM", "bf16", 989.5),
    ("NVIDIA H100 PCIe", "H100 PCIe", "bf16", 756.5),
    ("NVIDIA H100 NVL", "H100 NVL", "bf16", 835.5),
    ("NVIDIA A100-SXM4-80GB", "A100 (SXM4 and PCIe, 40 and 80 GB)", "bf16", 312.0),
    ("NVIDIA A100-SXM4-40GB", "A100 (SXM4 and PCIe, 40 and 80 GB)", "bf16", 312.0),
    ("NVIDIA A100 80GB PCIe", "A100 (SXM4 and PCIe, 40 and 80 GB)", "bf16", 312.0),
    ("NVIDIA A100-PCIE-40GB", "A100 (SXM4 and PCIe, 40 and 80 GB)", "bf16", 312.0),
    ("NVIDIA A10", "A10", "bf16", 125.0),
    ("NVIDIA L4", "L4", "bf16", 121.0),
    ("Tesla T4", "T4", "fp16", 65.0),
    ("NVIDIA GeForce RTX 4090", "GeForce RTX 4090", "bf16", 165.2),
    ("NVIDIA GeForce RTX 4080", "GeForce RTX 4080", "bf16", 97.5),
    ("NVIDIA GeForce RTX 5090", "GeForce RTX 5090", "bf16", 209.5),
    ("NVIDIA GeForce RTX 5080", "GeForce RTX 5080", "bf16", 112.6),
]


@pytest.mark.parametrize(("name", "model", "dtype", "dense"), NAMES)
def test_each_name_finds_its_board_and_dense_peak(
    name: str, model: str, dtype: str, dense: float
) -> None:
    peak = peak_for(name, dtype)
    assert peak.gpu is not None
    assert peak.gpu.model == model
    assert peak.dense_tflops == pytest.approx(dense)
    assert peak.why_none == ""
    assert f"{dense:g} TFLOP/s dense {dtype}" in peak.describe()


def test_names_match_whatever_the_case_and_spacing() -> None:
    assert peak_for("  nvidia   h200 ", "bf16").dense_tflops == pytest.approx(989.5)


def test_the_h200_name_is_the_sxm_board_and_the_lookup_says_so() -> None:
    text = peak_for("NVIDIA H200", "bf16").describe()
    assert "H200 SXM" in text
    assert "'NVIDIA H200 NVL'" in text  # the assumption is stated where the figure is


@pytest.mark.parametrize(
    "name",
    [
        "NVIDIA H100 80GB HBM3 MIG 1g.10gb",
        "NVIDIA A100-SXM4-40GB MIG 3g.20gb",
        "NVIDIA H200 MIG 7g.141gb",
        "NVIDIA A100-PCIE-40GB MIG 3G.20GB",
    ],
)
def test_a_mig_slice_gets_no_peak_and_a_reason(name: str) -> None:
    peak = peak_for(name, "bf16")
    assert peak.dense_tflops is None
    assert peak.gpu is None
    assert "MIG slice" in peak.why_none
    assert "share of the GPU's SMs" in peak.why_none


@pytest.mark.parametrize(
    "name",
    [
        "NVIDIA GeForce RTX 4090 Laptop GPU",  # a laptop part must not borrow the desktop peak
        "NVIDIA H100",  # which H100? not a name the table can place
        "NVIDIA A10G",  # AWS's part: no NVIDIA data sheet
        "NVIDIA B200",
        "CPU",
        "",
    ],
)
def test_an_unknown_name_gets_no_peak_and_a_reason(name: str) -> None:
    gpu, why = find_gpu(name)
    assert gpu is None
    assert "not in the data-sheet table" in why
    result = mfu(500e12, name, "bf16")
    assert result.fraction is None
    assert result.percent_text() == "n/a"
    assert "not in the data-sheet table" in result.describe("6 N + 12 L d T")


def test_a_dtype_the_document_does_not_print_gets_no_peak() -> None:
    peak = peak_for("Tesla T4", "bf16")  # Turing has no bf16
    assert peak.gpu is not None
    assert peak.dense_tflops is None
    assert "prints no bf16 rate for the T4" in peak.why_none
    assert peak_for("NVIDIA A100-SXM4-80GB", "fp8").dense_tflops is None  # Ampere: no FP8


def test_dense_is_half_the_sparse_figure_where_the_document_prints_sparse() -> None:
    checked = 0
    for gpu in TABLE:
        for printed in gpu.peaks:
            sparse, dense = printed.printed_sparse_tflops, printed.printed_dense_tflops
            if sparse is None:
                continue
            checked += 1
            if dense is None:  # only the sparse figure printed: the dense one is its half
                assert printed.dense_tflops == sparse / 2
            else:  # both printed (rounded to one decimal): they agree within the rounding
                assert dense == pytest.approx(sparse / 2, abs=0.06), (gpu.model, printed)
                assert printed.dense_tflops == dense
    assert checked > 30


def test_every_record_names_its_document_and_only_known_dtypes() -> None:
    names: list[str] = []
    for gpu in TABLE:
        assert gpu.source.title.startswith("NVIDIA ")
        assert gpu.source.url.startswith("https://")
        assert gpu.peaks
        assert all(p.dtype in DTYPES for p in gpu.peaks)
        assert all(p.dense_tflops > 0 for p in gpu.peaks)
        assert len({p.dtype for p in gpu.peaks}) == len(gpu.peaks)
        names += gpu.nvml_names
    assert len(names) == len(set(names))  # one board per name


def test_mfu_is_model_flops_over_the_dense_peak() -> None:
    # The capstone's "MFU 73 %" of a measured burst: 576 model TFLOP/s on the H200 is 58 % of
    # the data-sheet dense bf16 peak.
    result = mfu(576e12, "NVIDIA H200", "bf16")
    assert result.fraction == pytest.approx(576 / 989.5)
    assert result.percent_text() == "58%"
    text = result.describe("6 N + 12 L d T per token")
    assert text.startswith("MFU 58%: 576.0 model TFLOP/s over the H200 SXM's data-sheet dense bf16")
    assert text.endswith("model FLOPs: 6 N + 12 L d T per token")
    assert mfu(0.0, "NVIDIA A10", "fp16").fraction == 0.0
    # fp32 is the non-tensor rate, tf32 the tensor-core one
    assert mfu(67e12, "NVIDIA H100 80GB HBM3", "fp32").fraction == pytest.approx(1.0)
    assert mfu(494.5e12, "NVIDIA H100 80GB HBM3", "tf32").fraction == pytest.approx(1.0)


@pytest.mark.parametrize("bad", [-1.0, math.inf, math.nan])
def test_mfu_refuses_a_rate_that_is_not_one(bad: float) -> None:
    with pytest.raises(ValueError, match="finite rate"):
        mfu(bad, "NVIDIA H200", "bf16")


def test_dtype_names() -> None:
    assert dtype_key("torch.bfloat16") == "bf16"
    assert dtype_key("float16") == "fp16"
    assert dtype_key("torch.float8_e4m3fn") == "fp8"
    assert dtype_key("TF32") == "tf32"
    with pytest.raises(ValueError, match="no data-sheet peak for dtype"):
        dtype_key("int8")


def test_the_docs_show_the_table_as_the_code_holds_it() -> None:
    docs = Path(__file__).resolve().parents[3] / "docs" / "measuring.md"
    assert markdown_table() in docs.read_text()
