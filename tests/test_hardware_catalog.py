"""The accelerator catalog: one source for each fact, aliases benchmarks use, and a check
against the project's collected evidence (shared/data/hardware-specs.csv)."""

from __future__ import annotations

import csv
import os
import re
from pathlib import Path

import pytest

from servingmath import datatypes, hardware
from servingmath.units import GB, TB

ROOT = Path(__file__).resolve().parents[1]


def _evidence_file() -> Path | None:
    """The collected evidence lives outside the repository (read-only shared data)."""
    candidates = [os.environ.get("SERVINGMATH_EVIDENCE", ""), ROOT / "shared" / "data" / "hardware-specs.csv",
                  ROOT.parent / "shared" / "data" / "hardware-specs.csv",
                  ROOT.parent.parent / "shared" / "data" / "hardware-specs.csv"]
    for candidate in candidates:
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    return None


# ---- aliases ---------------------------------------------------------------------------------
#: spellings seen in benchmark files, nvidia-smi, rocm-smi and cloud consoles -> catalog name
BENCHMARK_SPELLINGS = {
    "NVIDIA H100 80GB HBM3": "H100-SXM5-80GB",      # nvidia-smi on an H100 SXM
    "H100-SXM": "H100-SXM5-80GB",
    "H100 80GB": "H100-SXM5-80GB",
    "H100-SXM-80GB": "H100-SXM5-80GB",              # data/published-measurements.csv
    "NVIDIA H100 PCIe": "H100-PCIe-80GB",
    "A100-SXM4-80GB": "A100-SXM4-80GB",
    "NVIDIA A100-SXM4-80GB": "A100-SXM4-80GB",      # nvidia-smi on an A100 SXM 80 GB
    "A100-SXM-80GB": "A100-SXM4-80GB",
    "A100-SXM-40GB": "A100-SXM4-40GB",
    "NVIDIA A100 80GB PCIe": "A100-PCIe-80GB",
    "NVIDIA A10G": "A10G",
    "NVIDIA A10": "A10",
    "NVIDIA H200": "H200-SXM-141GB",
    "NVIDIA L40S": "L40S",
    "MI300X": "MI300X",
    "AMD Instinct MI300X": "MI300X",                # rocm-smi / rocminfo marketing name
    "AMD Instinct MI325X": "MI325X",
    "TPU v5e": "TPU-v5e",
    "v5litepod": "TPU-v5e",                         # Cloud TPU accelerator type v5litepod-N
    "tpu-v5-lite-podslice": "TPU-v5e",              # GKE node label
    "B200": "B200-SXM-180GB",
    "NVIDIA B200": "B200-SXM-180GB",
    "GB200": "GB200",
    "GB200 NVL72": "GB200",
    "AMD Instinct MI355X": "MI355X",                # rocm-smi marketing name
    "HGX B300": "B300-SXM-288GB",
    "NVIDIA B300 SXM6 AC": "B300-SXM-288GB",        # nvidia-smi on a B300
    "NVIDIA H20": "H20-96GB",
    "H800": "H800-SXM5-80GB",
    "NVIDIA L40": "L40",
    "RTX 6000 Ada Generation": "RTX-6000-Ada",
    "RTX PRO 6000 Blackwell Server Edition": "RTX-PRO-6000-Blackwell-Server",   # not the Ada card
    "NVIDIA RTX A6000": "RTX-A6000",
    "GeForce RTX 4090": "RTX-4090",
    "Tesla V100-SXM2-32GB": "V100-SXM2-32GB",       # nvidia-smi on a V100 SXM2 32 GB
    "Tesla V100-SXM2-16GB": "V100-SXM2-16GB",
    "Tesla T4": "T4",
    "TPU v4": "TPU-v4",
    "Intel Gaudi 3": "Gaudi3",
    "NVIDIA A100-PCIE-40GB": "A100-PCIe-40GB",      # nvidia-smi on an A100 PCIe 40 GB
    "A100 40GB PCIe": "A100-PCIe-40GB",
    "NVIDIA H200 NVL": "H200-NVL-141GB",            # nvidia-smi on an H200 NVL
    "H200 NVL": "H200-NVL-141GB",
    "GB300 NVL72": "GB300",
    "NVIDIA A40": "A40",
    "A800-SXM4-80GB": "A800-SXM4-80GB",
    "NVIDIA L20": "L20",
    "AMD Instinct MI250X": "MI250X-GCD",            # rocm-smi names each GCD
    "MI250X GCD": "MI250X-GCD",
    "AMD Instinct MI210": "MI210",
    "AMD Instinct MI300A": "MI300A",
    "Intel Gaudi 2": "Gaudi2",
    "NVIDIA GeForce RTX 5090": "RTX-5090",
}

#: spellings that resolved before the 2026-12 rows were added, pinned so the new aliases cannot take them
PINNED_SPELLINGS = {
    "A100 40GB": "A100-SXM4-40GB", "A100-40GB": "A100-SXM4-40GB", "A100": "A100-SXM4-80GB",
    "A100-PCIe": "A100-PCIe-80GB", "NVIDIA A100-PCIE-80GB": "A100-PCIe-80GB",
    "H200": "H200-SXM-141GB", "NVIDIA H200": "H200-SXM-141GB", "H100 NVL": "H100-NVL-94GB",
    "RTX PRO 6000": "RTX-PRO-6000-Blackwell-Server", "RTX 6000 Ada": "RTX-6000-Ada", "A6000": "RTX-A6000",
    "GB200": "GB200", "GB200 NVL72": "GB200", "B300": "B300-SXM-288GB", "Blackwell Ultra B300": "B300-SXM-288GB",
    "L40": "L40", "L4": "L4", "L40S": "L40S", "4090": "RTX-4090", "RTX 4090": "RTX-4090",
    "MI300X": "MI300X", "MI325X": "MI325X", "MI355X": "MI355X", "Gaudi3": "Gaudi3", "Gaudi 3": "Gaudi3",
    "H800": "H800-SXM5-80GB", "H20": "H20-96GB", "TPU v5p": "TPU-v5p", "v5p": "TPU-v5p",
}


@pytest.mark.parametrize("spelling, name", sorted(PINNED_SPELLINGS.items()))
def test_existing_spellings_still_resolve_to_the_same_part(spelling, name):
    assert hardware.get_accelerator(spelling).name == name
    assert hardware.get_accelerator(spelling.lower()).name == name
    from servingmath.validation import resolve_accelerator
    assert resolve_accelerator(spelling)[0].name == name


@pytest.mark.parametrize("spelling, name", sorted(BENCHMARK_SPELLINGS.items()))
def test_benchmark_spellings_resolve(spelling, name):
    assert hardware.get_accelerator(spelling).name == name


def _catalog_rows():
    """The catalog CSV's rows, as written."""
    path = ROOT / "lib" / "servingmath" / "data" / "accelerators.csv"
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def test_every_alias_resolves_to_its_own_row():
    rows = _catalog_rows()
    seen = {}
    for row in rows:
        assert hardware.get_accelerator(row["name"]).name == row["name"]
        for alias in filter(None, row["aliases"].split("|")):
            assert alias not in seen, f"alias {alias!r} on {seen.get(alias)} and {row['name']}"
            seen[alias] = row["name"]
            assert hardware.get_accelerator(alias).name == row["name"]
            assert hardware.get_accelerator(alias.upper()).name == row["name"]   # case-insensitive


def test_no_alias_names_two_parts_even_case_blind_and_the_resolver_agrees():
    from servingmath.validation import resolve_accelerator
    rows = _catalog_rows()
    owner = {}
    for row in rows:
        for spelling in [row["name"]] + [a for a in row["aliases"].split("|") if a]:
            key = spelling.casefold()
            assert owner.setdefault(key, row["name"]) == row["name"], (spelling, owner[key], row["name"])
            assert resolve_accelerator(spelling)[0].name == row["name"], spelling


def test_unknown_spelling_still_fails_with_suggestions():
    with pytest.raises(KeyError, match="B200"):
        hardware.get_accelerator("NVIDIA B2000")


# ---- the Blackwell and AMD rows -------------------------------------------------------------------
def test_blackwell_dense_fp8_and_fp4_are_half_the_headline():
    b200, gb200 = hardware.get_accelerator("B200"), hardware.get_accelerator("GB200")
    # HGX B200: 144 PFLOPS FP4 and 72 PFLOPS FP8 with sparsity for 8 GPUs -> dense per GPU / 2
    assert b200.peak_flops("nvfp4") == pytest.approx(144e15 / 8 / 2)
    assert b200.peak_flops("fp8") == pytest.approx(72e15 / 8 / 2)
    # GB200 NVL72: 1,440 PFLOPS FP4 and 720 PFLOPS FP8 with sparsity for 72 GPUs
    assert gb200.peak_flops("mxfp4") == pytest.approx(1440e15 / 72 / 2)
    assert gb200.peak_flops("fp8") == pytest.approx(720e15 / 72 / 2)
    assert gb200.memory_bytes == 186 * GB and b200.memory_bandwidth == 8.0 * TB
    assert b200.interconnect_bandwidth == 900 * GB                       # NVLink 5: 1.8 TB/s both ways


def test_fp4_has_a_peak_only_where_the_sheet_gives_one():
    for acc in hardware.accelerator_catalog().values():
        has_fp4 = "nvfp4" in acc.dense_flops
        assert has_fp4 == acc.name.startswith(("B200", "GB200", "GB300", "RTX-PRO-6000-Blackwell", "MI355X", "MI350X")), acc.name
        if has_fp4:
            ratio = 3 if acc.name == "GB300" else 2          # Blackwell Ultra: dense FP4 = 3x FP8 (15 vs 5 PFLOPS)
            assert acc.dense_flops["nvfp4"] == acc.dense_flops["mxfp4"] == ratio * acc.dense_flops["fp8"]
    with pytest.raises(ValueError, match="no tensor-core peak"):
        hardware.get_accelerator("H100").peak_flops("nvfp4")


def test_fp4_bytes_include_their_block_scales():
    assert datatypes.bytes_per_element("nvfp4") == 0.5 + 1 / 16
    assert datatypes.bytes_per_element("mxfp4") == 0.5 + 1 / 32
    for name, scale in datatypes.BLOCK_SCALE_BYTES.items():
        assert datatypes.bytes_per_element(name) - scale == datatypes.bytes_per_element("int4")


def test_mi300x_dense_peaks_follow_from_cus_and_clock():
    # ROCm: 2048 FP16 FLOP/clock/CU (4096 for FP8) x 304 CUs x 2.1 GHz
    mi300x, mi325x = hardware.get_accelerator("MI300X"), hardware.get_accelerator("MI325X")
    assert mi300x.peak_flops("bf16") == pytest.approx(2048 * 304 * 2.1e9, rel=1e-4)
    assert mi300x.peak_flops("fp8") == pytest.approx(4096 * 304 * 2.1e9, rel=1e-4)
    assert mi325x.peak_flops("bf16") == mi300x.peak_flops("bf16")
    assert mi325x.memory_bandwidth > mi300x.memory_bandwidth


#: the one sheet whose dense and sparse figures are not 2:1 (as printed; see the row's notes)
SHEET_INCONSISTENCIES = {("L40S", "bf16"): (362.05e12, 733e12)}


def test_sparse_figures_are_twice_the_dense_ones():
    for acc in hardware.accelerator_catalog().values():
        for dtype, sparse in acc.sparse_flops.items():
            if (acc.name, dtype) in SHEET_INCONSISTENCIES:
                assert (acc.dense_flops[dtype], sparse) == SHEET_INCONSISTENCIES[(acc.name, dtype)]
                assert "362.05" in acc.notes
                continue
            assert sparse == pytest.approx(2 * acc.dense_flops[dtype], rel=2e-3), (acc.name, dtype)


def test_a10g_still_has_no_tensor_peak_and_says_why():
    a10g = hardware.get_accelerator("NVIDIA A10G")
    assert a10g.dense_flops == {}
    assert "datasheet" in a10g.verified
    with pytest.raises(ValueError, match="no tensor-core peak on A10G"):
        a10g.peak_flops("fp16")


def test_every_row_has_provenance_and_power_is_plausible():
    for acc in hardware.accelerator_catalog().values():
        assert acc.source and acc.as_of and acc.verified, acc.name
        assert acc.tdp is None or 70 <= acc.tdp <= 1500, acc.name


def test_the_catalog_is_the_only_copy():
    assert not (ROOT / "data" / "hardware-specs.csv").exists()


# ---- against the collected evidence ---------------------------------------------------------------
_COLUMNS = [  # (evidence column, how to read the catalog, scale of the evidence column)
    ("mem_capacity_GB", lambda a: a.memory_bytes / GB),
    ("mem_bandwidth_TBps", lambda a: a.memory_bandwidth / TB),
    ("bf16_dense_TFLOPS", lambda a: a.dense_flops.get("bf16", 0) / 1e12),
    ("fp8_dense_TFLOPS", lambda a: a.dense_flops.get("fp8", 0) / 1e12),
    ("int8_dense_TOPS", lambda a: a.dense_flops.get("int8", 0) / 1e12),
    ("bf16_sparse_TFLOPS", lambda a: a.sparse_flops.get("bf16", 0) / 1e12),
    ("fp8_sparse_TFLOPS", lambda a: a.sparse_flops.get("fp8", 0) / 1e12),
    ("int8_sparse_TOPS", lambda a: a.sparse_flops.get("int8", 0) / 1e12),
    ("interconnect_bw_GBps", lambda a: 2 * a.interconnect_bandwidth / GB if a.interconnect_bandwidth else 0),
    ("tdp_W", lambda a: a.tdp or 0),
]


def _numbers(cell: str) -> list[float]:
    return [float(x) for x in re.findall(r"\d+(?:\.\d+)?", cell.replace(",", ""))]


def test_every_figure_agrees_with_the_collected_evidence():
    path = _evidence_file()
    if path is None:
        pytest.skip("the collected evidence (shared/data/hardware-specs.csv) is not on this machine")
    with path.open(newline="", encoding="utf-8") as handle:
        evidence = list(csv.DictReader(handle))
    assert len(evidence) >= 13
    compared, disagreements = 0, []
    for row in evidence:
        name = row["hardware"].split(" (")[0]
        acc = hardware.get_accelerator(name)
        for column, read in _COLUMNS:
            cell = row[column].strip()
            if not _numbers(cell):
                continue                        # blank or "none" in the evidence
            ours = read(acc)
            values = _numbers(cell)
            if "-" in cell and len(values) == 2 and cell.count("-") == 1 and "(" not in cell:
                ok = values[0] <= ours <= values[1]        # a range such as "300-350"
            elif cell.startswith("up to"):
                ok = ours == 0 or ours <= values[0]       # a module figure we do not carry
            else:
                ok = any(ours == pytest.approx(v, rel=1e-3) for v in values)
            compared += 1
            if not ok:
                disagreements.append((name, column, cell, ours))
    assert compared > 100
    assert disagreements == []


# ---- the 2026-12 rows: each figure as its source writes it ----------------------------------------
#: name -> (memory as the source writes it, bandwidth as written, {dtype: dense peak as written}, bf16 ridge in FLOP/byte)
#: a part without a tensor peak in any source read has {} and ridge None (asking for either raises)
NEW_ROWS = {
    "A100-PCIe-40GB": (40 * GB, 1555e9, {"bf16": 312e12, "int8": 624e12}, 312 / 1.555),   # "1,555GB/s", 250 W
    "H200-NVL-141GB": (141 * GB, 4.8 * TB, {}, None),
    "GB300": (279 * GB, 8 * TB, {"bf16": 2.5e15, "fp8": 5e15, "nvfp4": 15e15}, 312.5),    # verda: "2.5 PFLOPS", "279 GB"
    "A40": (48 * GB, 696e9, {"bf16": 149.67e12, "int8": 299.34e12}, 149.67 / 0.696),       # "696 GB/s"
    "A800-SXM4-80GB": (80 * GB, 2.039 * TB, {"bf16": 312e12, "int8": 624e12}, 312 / 2.039),
    "L20": (48 * GB, 864e9, {}, None),
    "MI250X-GCD": (128 * GB / 2, 3.2 * TB / 2, {"bf16": 383.0e12 / 2, "int8": 383.0e12 / 2}, 191.5 / 1.6),
    "MI210": (64 * GB, 1.6 * TB, {"bf16": 181e12, "int8": 181e12}, 181 / 1.6),
    "MI300A": (128 * GB, 5.3 * TB, {}, None),
    "Gaudi2": (96 * GB, 2.46 * TB, {"bf16": 432e12, "fp8": 865e12}, 432 / 2.46),
    "RTX-5090": (32 * GB, 1792e9, {}, None),
}


@pytest.mark.parametrize("name", sorted(NEW_ROWS))
def test_new_row_figures_match_their_sources(name):
    memory, bandwidth, peaks, ridge = NEW_ROWS[name]
    acc = hardware.get_accelerator(name)
    assert acc.memory_bytes == pytest.approx(memory, rel=1e-9)
    assert acc.memory_bandwidth == pytest.approx(bandwidth, rel=1e-9)
    assert set(acc.dense_flops) - {"mxfp4"} == set(peaks)          # no peak the sources do not give
    for dtype, value in peaks.items():
        assert acc.peak_flops(dtype) == pytest.approx(value, rel=1e-3), dtype
    if ridge is None:
        with pytest.raises(ValueError, match="no tensor-core peak"):
            acc.ridge_point("bf16")
        assert "blank" in acc.notes
    else:
        assert acc.ridge_point("bf16") == pytest.approx(ridge, rel=1e-3)
    assert "read 2026-12-01" in acc.source and acc.verified


def test_mi200_peaks_follow_from_rocm_cus_and_clock():
    # ROCm: CDNA2 matrix FP16/BF16/INT8 = 1024 FLOP/clock/CU at 1.7 GHz; MI250X 110 CUs per GCD, MI210 104 CUs
    gcd, mi210 = hardware.get_accelerator("MI250X"), hardware.get_accelerator("MI210")
    assert gcd.name == "MI250X-GCD"
    assert gcd.peak_flops("bf16") == pytest.approx(1024 * 110 * 1.7e9, rel=1e-3)
    assert mi210.peak_flops("bf16") == pytest.approx(1024 * 104 * 1.7e9, rel=1e-3)
    # one module = two GCDs: AMD's per-module 383 TFLOPS, 128 GB and 3.2 TB/s
    assert 2 * gcd.peak_flops("bf16") == pytest.approx(383.0e12, rel=1e-3)
    assert (2 * gcd.memory_bytes, 2 * gcd.memory_bandwidth) == (128 * GB, 3.2 * TB)
    assert "PER GCD" in gcd.notes
    for dtype in ("fp8", "nvfp4"):
        with pytest.raises(ValueError):
            gcd.peak_flops(dtype)                                   # CDNA2 has no fp8


def test_mi250x_resolution_says_it_counts_gcds():
    from servingmath.validation import resolve_accelerator
    acc, note = resolve_accelerator("8x MI250X")
    assert acc.name == "MI250X-GCD" and "per GCD" in note
    assert resolve_accelerator("MI250X GCD")[1].startswith("stated")


def test_gb300_per_gpu_figures_are_the_rack_totals_over_72():
    gb300 = hardware.get_accelerator("GB300 NVL72")
    assert gb300.peak_flops("fp8") == pytest.approx(360e15 / 72)      # 360 PF FP8 dense per rack
    assert gb300.peak_flops("nvfp4") == pytest.approx(1080e15 / 72)   # 1080 PF FP4 dense per rack
    assert gb300.memory_bandwidth == pytest.approx(576e12 / 72)       # 576 TB/s per rack
    assert gb300.interconnect_bandwidth == pytest.approx(130e12 / 72 / 2, rel=0.01)   # 130 TB/s NVLink, one way
    assert gb300.tdp == 1400
    with pytest.raises(ValueError):
        gb300.peak_flops("int8")                                      # sources disagree: left blank


def test_gaudi2_bf16_peak_follows_from_its_mme():
    # 2 MMEs x 256x256 MACs x 2 FLOP x 1.65 GHz = 432.5 TFLOPS (Intel: 432); fp8 twice that
    gaudi2 = hardware.get_accelerator("Intel Gaudi 2")
    assert gaudi2.peak_flops("bf16") == pytest.approx(2 * 256 * 256 * 2 * 1.65e9, rel=2e-3)
    assert gaudi2.peak_flops("fp8") == pytest.approx(2 * gaudi2.peak_flops("bf16"), rel=2e-3)
    assert gaudi2.interconnect_bandwidth == pytest.approx(4.8e12 / 8 / 2)   # 4.8 Tb/s bidirectional


def test_a800_is_an_a100_with_a_slower_nvlink():
    a800, a100 = hardware.get_accelerator("A800"), hardware.get_accelerator("A100-SXM4-80GB")
    assert a800.dense_flops == a100.dense_flops and a800.memory_bandwidth == a100.memory_bandwidth
    assert a800.interconnect_bandwidth == 200 * GB and a100.interconnect_bandwidth == 300 * GB


def test_tpu_v5p_matches_googles_newer_table():
    # docs.cloud.google.com/tpu/docs/v5p: 459 TFLOPs bf16 and FP8, 2765 GBps, ICI 1200 GBps bidirectional per chip
    v5p = hardware.get_accelerator("TPU v5p")
    assert v5p.peak_flops("bf16") == v5p.peak_flops("fp8") == 459e12
    assert v5p.memory_bandwidth == 2765e9
    assert v5p.interconnect_bandwidth == 600 * GB                # one way: half of 1200 (= the older doc's 4800 Gbps)
