"""NVIDIA's printed peak FLOP rates per GPU model and dtype, each with the document it is from.

The records and the table only; looking a GPU up and MFU are :mod:`.peaks`, which says how the
figures are read (dense against "with sparsity", FP32 accumulate, which dtype is which). A row
holds what its document prints, as it prints it: ``(dense, sparse)`` in TFLOP/s, ``None`` where the
document prints no such figure. A new GPU is a new row with its document's title and URL, and a
test that looks its NVML name up (``tests/unit/measure/test_peaks.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

#: The dtypes the table holds, by the names the project uses.
DTYPES = ("fp32", "tf32", "bf16", "fp16", "fp8")

_DTYPE_ALIASES = {
    "fp32": "fp32",
    "float32": "fp32",
    "float": "fp32",
    "tf32": "tf32",
    "bf16": "bf16",
    "bfloat16": "bf16",
    "fp16": "fp16",
    "float16": "fp16",
    "half": "fp16",
    "fp8": "fp8",
    "float8_e4m3fn": "fp8",
    "float8_e5m2": "fp8",
}


def dtype_key(dtype: object) -> str:
    """The table's name for a dtype: ``"bf16"`` for ``torch.bfloat16``, ``"bfloat16"``, ``"bf16"``.

    Raises:
        ValueError: a dtype the table has no column for.
    """
    text = str(dtype).strip().lower().removeprefix("torch.")
    if text not in _DTYPE_ALIASES:
        raise ValueError(f"no data-sheet peak for dtype {dtype!r}: use one of {', '.join(DTYPES)}")
    return _DTYPE_ALIASES[text]


@dataclass(frozen=True)
class DataSheet:
    """The NVIDIA document a GPU's figures come from."""

    title: str
    url: str


@dataclass(frozen=True)
class PrintedPeak:
    """One dtype's peak as the document prints it, in TFLOP/s (10^12 FLOP/s).

    Attributes:
        dtype: one of :data:`DTYPES`.
        printed_dense_tflops: the dense figure where the document prints one, else ``None``.
        printed_sparse_tflops: the "with sparsity" figure where the document prints one.
    """

    dtype: str
    printed_dense_tflops: float | None = None
    printed_sparse_tflops: float | None = None

    def __post_init__(self) -> None:
        if self.dtype not in DTYPES:
            raise ValueError(f"unknown dtype {self.dtype!r}")
        if self.printed_dense_tflops is None and self.printed_sparse_tflops is None:
            raise ValueError(f"{self.dtype}: the document prints no figure")

    @property
    def dense_tflops(self) -> float:
        """The dense rate: the printed dense figure, else half the sparse one."""
        if self.printed_dense_tflops is not None:
            return self.printed_dense_tflops
        assert self.printed_sparse_tflops is not None  # __post_init__ holds one of them
        return self.printed_sparse_tflops / 2


@dataclass(frozen=True)
class GpuPeaks:
    """One GPU model's data-sheet peaks, the names NVML gives it, and where the figures are from.

    Attributes:
        model: the board, as NVIDIA names it (``"H200 SXM"``).
        nvml_names: the names NVML and CUDA report for it, exactly.
        peaks: the dtypes the document prints (a dtype it does not print is absent).
        source: the document.
        note: what a reader of the figure should know (accumulation, assumptions).
    """

    model: str
    nvml_names: tuple[str, ...]
    peaks: tuple[PrintedPeak, ...]
    source: DataSheet
    note: str = ""

    def printed(self, dtype: str) -> PrintedPeak | None:
        """The printed peak for ``dtype`` (any name :func:`dtype_key` reads), or ``None``."""
        key = dtype_key(dtype)
        return next((p for p in self.peaks if p.dtype == key), None)

    def dense_tflops(self, dtype: str) -> float | None:
        """Dense TFLOP/s for ``dtype``, or ``None`` where the document prints none."""
        found = self.printed(dtype)
        return None if found is None else found.dense_tflops


#: ``(dense, sparse)`` TFLOP/s as a document prints them, ``None`` where it prints no such figure.
_Printed = tuple[float | None, float | None]


def _peaks(**figures: _Printed) -> tuple[PrintedPeak, ...]:
    """``bf16=(dense, sparse)``, as printed (``None`` where the document prints no such figure)."""
    return tuple(PrintedPeak(k, dense, sparse) for k, (dense, sparse) in figures.items())


_H100 = DataSheet(
    "NVIDIA H100 Tensor Core GPU Datasheet",
    "https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet",
)
_H100_PAGE = DataSheet(
    "NVIDIA H100 Tensor Core GPU, product page (specifications)",
    "https://www.nvidia.com/en-us/data-center/h100/",
)
_H200 = DataSheet(
    "NVIDIA H200 Tensor Core GPU, product page (specifications)",
    "https://www.nvidia.com/en-us/data-center/h200/",
)
_A100 = DataSheet(
    "NVIDIA A100 Tensor Core GPU Datasheet",
    "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/"
    "nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf",
)
_A10 = DataSheet(
    "NVIDIA A10 Tensor Core GPU Datasheet",
    "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a10/pdf/a10-datasheet.pdf",
)
_L4 = DataSheet(
    "NVIDIA L4 Tensor Core GPU Datasheet",
    "https://resources.nvidia.com/en-us-data-center-overview/l4-gpu-datasheet",
)
_T4 = DataSheet(
    "NVIDIA T4 Tensor Core GPU Datasheet",
    "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/tesla-t4/"
    "t4-tensor-core-datasheet-951643.pdf",
)
_ADA = DataSheet(
    "NVIDIA Ada GPU Architecture whitepaper (v2.01), appendix A",
    "https://images.nvidia.com/aem-dam/Solutions/geforce/ada/nvidia-ada-gpu-architecture.pdf",
)
_RTX_BLACKWELL = DataSheet(
    "NVIDIA RTX Blackwell GPU Architecture whitepaper, appendix A",
    "https://images.nvidia.com/aem-dam/Solutions/geforce/blackwell/"
    "nvidia-rtx-blackwell-gpu-architecture.pdf",
)

# Notes on single boards (what a reader of the figure should know).
_H100_NVL = "per GPU of the 94 GB NVL board (an earlier data sheet printed a pair of them together)"
_H200_SXM = "the name 'NVIDIA H200' is the SXM board's; the NVL board reports 'NVIDIA H200 NVL'"
_GEFORCE = (
    "GeForce: 16-bit and FP8 rates with FP32 accumulate, half the FP16-accumulate rate; the "
    "card's clock often runs above the rated boost clock, so a measured rate can exceed it"
)


def _hopper(
    model: str,
    nvml_name: str,
    fp32: float,
    tf32_sparse: float,
    fp16_bf16_sparse: float,
    fp8_sparse: float,
    source: DataSheet,
    note: str = "",
) -> GpuPeaks:
    """An H100 or H200 board's row: sparse tensor rates only, one figure for BF16 and FP16.

    Its document prints the tensor-core rates "with sparsity" only, and the same figure for
    BF16 and FP16; the dense rate is read from them (:attr:`PrintedPeak.dense_tflops`).
    """
    return GpuPeaks(
        model,
        (nvml_name,),
        _peaks(
            fp32=(fp32, None),
            tf32=(None, tf32_sparse),
            bf16=(None, fp16_bf16_sparse),
            fp16=(None, fp16_bf16_sparse),
            fp8=(None, fp8_sparse),
        ),
        source,
        note,
    )


def _geforce(
    number: str,
    fp32: float,
    tf32: _Printed,
    fp16_bf16: _Printed,
    fp8: _Printed,
    source: DataSheet,
) -> GpuPeaks:
    """A GeForce RTX card's row: the whitepaper prints one "FP16/BF16" figure for both dtypes."""
    return GpuPeaks(
        f"GeForce RTX {number}",
        (f"NVIDIA GeForce RTX {number}",),
        _peaks(fp32=(fp32, None), tf32=tf32, bf16=fp16_bf16, fp16=fp16_bf16, fp8=fp8),
        source,
        _GEFORCE,
    )


#: The table: every figure as its document prints it (TFLOP/s; ``(dense, sparse)``).
TABLE: tuple[GpuPeaks, ...] = (
    # _hopper: FP32 dense, then TF32, FP16 and BF16, FP8 with sparsity.
    _hopper("H100 SXM", "NVIDIA H100 80GB HBM3", 67, 989, 1979, 3958, _H100),
    _hopper("H100 PCIe", "NVIDIA H100 PCIe", 51, 756, 1513, 3026, _H100),
    _hopper("H100 NVL", "NVIDIA H100 NVL", 60, 835, 1671, 3341, _H100_PAGE, _H100_NVL),
    _hopper("H200 SXM", "NVIDIA H200", 67, 989, 1979, 3958, _H200, _H200_SXM),
    _hopper("H200 NVL", "NVIDIA H200 NVL", 60, 835, 1671, 3341, _H200),
    GpuPeaks(
        "A100 (SXM4 and PCIe, 40 and 80 GB)",
        (
            "NVIDIA A100-SXM4-40GB",
            "NVIDIA A100-SXM4-80GB",
            "NVIDIA A100-PCIE-40GB",
            "NVIDIA A100 80GB PCIe",
        ),
        _peaks(fp32=(19.5, None), tf32=(156, 312), bf16=(312, 624), fp16=(312, 624)),
        _A100,
        "the data sheet prints the same rates for the SXM4 and PCIe boards, 40 and 80 GB",
    ),
    GpuPeaks(
        "A10",
        ("NVIDIA A10",),
        _peaks(fp32=(31.2, None), tf32=(62.5, 125), bf16=(125, 250), fp16=(125, 250)),
        _A10,
    ),
    GpuPeaks(
        "L4",
        ("NVIDIA L4",),
        _peaks(
            fp32=(30.3, None), tf32=(None, 120), bf16=(None, 242), fp16=(None, 242), fp8=(None, 485)
        ),
        _L4,
    ),
    GpuPeaks(
        "T4",
        ("Tesla T4",),
        # "Mixed Precision (FP16/FP32)": FP16 products, FP32 accumulate; Turing has no bf16, no
        # TF32 and no sparsity.
        _peaks(fp32=(8.1, None), fp16=(65, None)),
        _T4,
    ),
    # _geforce: FP32, then TF32, FP16 and BF16, FP8 as (dense, sparse).
    _geforce("4090", 82.6, (82.6, 165.2), (165.2, 330.4), (330.3, 660.6), _ADA),
    _geforce("4080", 48.7, (48.7, 97.5), (97.5, 194.9), (194.9, 389.9), _ADA),
    _geforce("5090", 104.8, (104.8, 209.5), (209.5, 419), (419, 838), _RTX_BLACKWELL),
    _geforce("5080", 56.3, (56.3, 112.6), (112.6, 225.1), (225.1, 450.2), _RTX_BLACKWELL),
)
