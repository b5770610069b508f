"""The peak table: names as traces carry them, dense figures only, refusals instead of guesses."""

from __future__ import annotations

import gzip
import json
import sqlite3

import pytest
from conftest import SHARED_TRACES, needs_shared

from traceread.errors import MissingInputError, UsageError
from traceread.metrics.peaks import PEAK_TABLE, match_gpu, resolve_peak
from traceread.render.notes import text as words  # notes are data; the reports word them

# Every device name seen in ../shared/traces, plus the examples, and the row it must match.
KNOWN_NAMES = {
    "NVIDIA H100 80GB HBM3": "H100-SXM",
    "NVIDIA A100-PG509-200": "A100-SXM4-40GB",
    "NVIDIA A100-SXM4-40GB": "A100-SXM4-40GB",
    "NVIDIA A100-SXM4-80GB": "A100-SXM4-80GB",
    "NVIDIA A100 80GB PCIe": "A100-PCIE-80GB",
    "NVIDIA A100-PCIE-40GB": "A100-PCIE-40GB",
    "Tesla V100-DGXS-32GB": "V100-SXM2",
    "Tesla V100-SXM2-16GB": "V100-SXM2",
    "Tesla V100-PCIE-32GB": "V100-PCIE",
    "Tesla V100S-PCIE-32GB": "V100S-PCIE",
    "AMD Instinct MI300X": "MI300X",
    "AMD Instinct MI210": "MI210",
    "AMD Instinct MI250X": "MI250X",
    "AMD Instinct MI250": "MI250",
    "AMD Instinct MI325X": "MI325X",
    "AMD Instinct MI355X": "MI355X",
    "Quadro GP100": "GP100",
    "NVIDIA GeForce RTX 2080 Ti": "RTX-2080-TI",
    "NVIDIA GeForce RTX 3080": "RTX-3080",
    "NVIDIA GeForce RTX 3090": "RTX-3090",
    "NVIDIA A10": "A10",
    "NVIDIA L4": "L4",
    "NVIDIA L40S": "L40S",
    "NVIDIA H100 PCIe": "H100-PCIE",
    "NVIDIA H100 NVL": "H100-NVL",
    "NVIDIA H800": "H800-SXM",
    "NVIDIA H200": "H200-SXM",
    "NVIDIA H200 NVL": "H200-NVL",
    "NVIDIA B200": "B200",
    "NVIDIA GH200 480GB": "GH200",
    "NVIDIA GH200 144G HBM3e": "GH200-HBM3E",
    "NVIDIA GB200": "GB200",
}
# Names that must never be guessed: ambiguous, empty, or not a GPU in the table.
UNKNOWN_NAMES = ["", "AMD Radeon Graphics", "ARTEMIS", "NVIDIA H100", "AMD Instinct MI250X / MI250",
                 "NVIDIA A10G", "NVIDIA GeForce RTX 3080 Ti", "NVIDIA L40",
                 # a Windows laptop export (extrap): its CUDA GPU, the integrated GPU and the render driver
                 "GeForce GTX 1060 with Max-Q Design", "Intel(R) HD Graphics 630", "Microsoft Basic Render Driver"]


@pytest.mark.parametrize(("name", "key"), sorted(KNOWN_NAMES.items()))
def test_real_names_match_their_row(name: str, key: str) -> None:
    row = match_gpu(name)
    assert row is not None and row.key == key


@pytest.mark.parametrize("name", UNKNOWN_NAMES)
def test_unknown_names_are_refused_with_the_way_out(name: str) -> None:
    assert match_gpu(name) is None
    with pytest.raises(MissingInputError) as err:
        resolve_peak([name], "bf16")
    msg = str(err.value)
    assert "--gpu NAME" in msg and "--peak-tflops" in msg and "--peak-bandwidth" in msg


def test_table_keys_are_accepted_by_gpu_flag() -> None:
    for row in PEAK_TABLE:
        assert match_gpu(row.key) is row
        assert match_gpu(row.key.lower()) is row


def test_rows_are_dense_and_sourced() -> None:
    for row in PEAK_TABLE:
        assert row.source and row.bandwidth_tbs > 0
        assert all(v > 0 for v in row.tflops.values())
        # Dense fp8 is twice dense bf16, TF32 half of it: a sparse figure slipping in breaks this.
        if "fp8" in row.tflops and "bf16" in row.tflops:
            assert row.tflops["fp8"] / row.tflops["bf16"] == pytest.approx(2, rel=0.03), row.key
        if "tf32" in row.tflops and "bf16" in row.tflops:
            assert row.tflops["tf32"] / row.tflops["bf16"] == pytest.approx(0.5, rel=0.03), row.key


def test_lesson_numbers() -> None:
    h100 = match_gpu("NVIDIA H100 80GB HBM3")
    assert h100.tflops["bf16"] == pytest.approx(989, rel=0.01)
    assert h100.tflops["fp8"] == pytest.approx(1979, rel=0.01)
    assert h100.ridge("bf16") == pytest.approx(295, rel=0.01)


def test_mi250_rows_are_per_device_not_per_package() -> None:
    # PyTorch sees each MI250/MI250X GCD as one device; the package's 383 TFLOP/s is two devices.
    assert match_gpu("AMD Instinct MI250X").tflops["bf16"] == pytest.approx(383 / 2, rel=0.01)


def test_sparse_peak_is_refused() -> None:
    with pytest.raises(UsageError, match="sparse"):
        resolve_peak(["NVIDIA H100 80GB HBM3"], "bf16", peak_tflops=1979)


def test_other_precisions_peak_is_warned() -> None:
    choice = resolve_peak(["NVIDIA H100 80GB HBM3"], "fp8", peak_tflops=989.5)
    assert any("bf16" in w and "2x" in w for w in map(words, choice.warnings))
    assert choice.peak_flops == pytest.approx(989.5e12)


def test_user_peak_works_for_unknown_gpu() -> None:
    choice = resolve_peak(["AMD Radeon Graphics"], "bf16", peak_tflops=181, peak_bandwidth_tbs=1.6)
    assert choice.gpu_key is None and choice.ridge == pytest.approx(181 / 1.6)


def test_no_such_precision_on_the_chip() -> None:
    with pytest.raises(MissingInputError, match="fp8"):
        resolve_peak(["NVIDIA A100-SXM4-80GB"], "fp8")


def test_gpu_flag_overrides_and_mixed_models_refused() -> None:
    assert resolve_peak(["AMD Radeon Graphics"], "bf16", gpu="MI250").gpu_key == "MI250"
    with pytest.raises(UsageError):
        resolve_peak([], "bf16", gpu="no-such-gpu")
    with pytest.raises(MissingInputError, match="several"):
        resolve_peak(["NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB"], "bf16")


def _shared_device_names() -> set[str]:
    names: set[str] = set()
    for path in sorted((SHARED_TRACES / "kineto").iterdir()):
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt") as fh:
            text = fh.read()
        # Decode only the device list (wherever the key sits), not the whole event list.
        for key in ('"deviceProperties"', '"computeProperties"'):
            at = text.find(key)
            if at >= 0:
                start = text.index("[", at)
                devices, _ = json.JSONDecoder().raw_decode(text, start)
                names |= {dev.get("name", "") for dev in devices}
    for path in sorted((SHARED_TRACES / "nsys").glob("*.sqlite")):
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            names |= {r[0] for r in con.execute("SELECT name FROM TARGET_INFO_GPU")}
        except sqlite3.OperationalError:  # exports without the table
            pass
        finally:
            con.close()
    return names


@needs_shared
def test_every_device_name_in_shared_traces_is_matched_or_refused() -> None:
    names = _shared_device_names()
    assert "NVIDIA A100-PG509-200" in names and "AMD Radeon Graphics" in names
    for name in names:
        if name in KNOWN_NAMES:
            assert match_gpu(name).key == KNOWN_NAMES[name], name
        else:
            assert name in UNKNOWN_NAMES, f"new device name {name!r}: add it to the peak table or UNKNOWN_NAMES"
            assert match_gpu(name) is None
