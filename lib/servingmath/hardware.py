"""Accelerators: peak dense FLOP/s per data type, HBM bandwidth and capacity, interconnect.

The catalog lives in ``servingmath/data/accelerators.csv``: one row per
accelerator, figures as printed on the spec sheet (GB, TB/s, TFLOPS), each row
with its source, its date and how well it was verified. :func:`get_accelerator`
turns a row into an :class:`Accelerator` in SI units.

Conventions
-----------
* **Dense** tensor-core FLOP/s only. Datasheets headline 2:4-sparse figures,
  twice the dense ones; rooflines and utilisation (MFU, MBU) use dense.
* Capacity: the sheet's "80 GB" read as decimal (80e9 bytes). NVIDIA's
  80 GB parts actually carry 80 GiB; using the decimal figure is 7 % conservative.
* Interconnect: sheets quote *bidirectional* totals (NVLink 4: 900 GB/s);
  :attr:`Accelerator.interconnect_bandwidth` is the one-way figure (450 GB/s),
  the one a ring all-reduce sees.
* FP4: the ``fp4`` columns are the tensor-core peak for 4-bit floats; NVIDIA
  Blackwell runs NVFP4 and MXFP4 at that rate, so both data types get it.
* Blackwell (B200, GB200) sheets headline *sparse* figures and give totals per
  8-GPU board or per 72-GPU rack; the catalog holds dense figures per GPU
  (total / GPUs / 2) and keeps the sparse ones (:attr:`Accelerator.sparse_flops`)
  only as a check.
* One row is one device as the runtime counts GPUs: a multi-die package that
  presents as one GPU (MI300X, Gaudi 3, B200) is one row; an MI250X module is two
  GPUs to ROCm, so its row ``MI250X-GCD`` (and the alias ``"MI250X"``) is one GCD.
* One source: this CSV is the book's only copy of these facts. The evidence they
  were checked against is the project's collected ``shared/data/hardware-specs.csv``
  (``tests/test_hardware_catalog.py`` compares the two).

Names resolve exactly, then through the aliases benchmarks and ``nvidia-smi`` use
(``"NVIDIA H100 80GB HBM3"``, ``"AMD Instinct MI300X"``, ``"v5litepod"``, ``"B200"``),
then case-insensitively.

Examples
--------
>>> h100 = get_accelerator("H100")
>>> h100.name, h100.memory_bandwidth
('H100-SXM5-80GB', 3350000000000.0)
>>> h100.peak_flops("bf16")
989400000000000.0
>>> round(h100.ridge_point("bf16"), 1)
295.3
>>> get_accelerator("NVIDIA H100 80GB HBM3").name      # the name nvidia-smi prints
'H100-SXM5-80GB'
>>> b200 = get_accelerator("B200")
>>> b200.peak_flops("nvfp4") / 1e12, b200.sparse_flops["nvfp4"] / 1e12   # dense, and the headline
(9000.0, 18000.0)
>>> mine = Accelerator.from_numbers("my-gpu", memory_bytes=48e9,
...     memory_bandwidth=1e12, peak_flops={"bf16": 200e12})
>>> mine.ridge_point("bf16")
200.0
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass, field
from functools import cache
from importlib import resources

from ._validation import check_positive, unknown_name, UnknownNameError
from .datatypes import check_dtype
from .units import GB, TB

__all__ = ["Accelerator", "get_accelerator", "list_accelerators", "accelerator_catalog"]

# data types that share a tensor-core peak with another
_SAME_PEAK = {"fp16": "bf16"}


@dataclass(frozen=True)
class Accelerator:
    """One accelerator (GPU or TPU chip), in SI units.

    Derived in the chapter "Rooflines: why decoding is bandwidth-bound" (notebooks/02_rooflines.ipynb).

    Attributes
    ----------
    name : str
        Catalog name, e.g. ``"H100-SXM5-80GB"``.
    memory_bytes : float
        HBM (or GDDR) capacity in bytes.
    memory_bandwidth : float
        Peak memory bandwidth in bytes/s.
    dense_flops : dict
        Peak dense FLOP/s (or OP/s for int8) per data type, e.g. ``{"bf16": 989.4e12}``.
    interconnect_bandwidth : float or None
        One-way GPU-to-GPU bandwidth in bytes/s (half the sheet's bidirectional figure).
    interconnect : str
        What the link is ("NVLink 4", "PCIe Gen4 x16 (no NVLink)").
    vendor, memory_type, source, as_of, verified, notes : str
        Provenance: every figure's source, its date and how it was checked.
    sparse_flops : dict
        The sheet's 2:4-sparse peaks per data type (twice the dense ones), kept
        as a check on the dense figures; never used by the models.
    tdp : float or None
        Board power in watts (maximum TDP/TGP or typical board power, as the
        vendor states it; see ``notes``).
    host_link : str
        The link to the host CPU ("PCIe Gen5 x16 (128 GB/s)", "NVLink-C2C").
    """

    name: str
    memory_bytes: float
    memory_bandwidth: float
    dense_flops: dict = field(default_factory=dict)
    interconnect_bandwidth: float | None = None
    interconnect: str = ""
    vendor: str = ""
    memory_type: str = ""
    source: str = "user-defined"
    as_of: str = ""
    verified: str = ""
    notes: str = ""
    sparse_flops: dict = field(default_factory=dict)
    tdp: float | None = None
    host_link: str = ""

    @classmethod
    def from_numbers(
        cls,
        name: str,
        memory_bytes: float,
        memory_bandwidth: float,
        peak_flops: dict,
        interconnect_bandwidth: float | None = None,
        **provenance,
    ) -> "Accelerator":
        """Define your own accelerator from raw numbers in SI units.

        ``peak_flops`` maps a data type to its *dense* peak FLOP/s.
        """
        if not isinstance(name, str) or not name:
            raise ValueError(f"name must be a non-empty string, got {name!r}")
        check_positive("memory_bytes", memory_bytes)
        check_positive("memory_bandwidth", memory_bandwidth)
        if not isinstance(peak_flops, dict):
            raise ValueError(f"peak_flops must be a dict such as {{'bf16': 989e12}}, got {peak_flops!r}")
        flops = {}
        for dtype, value in peak_flops.items():
            check_dtype(dtype, "peak_flops key")
            check_positive(f"peak_flops[{dtype!r}]", value)
            flops[dtype] = float(value)
        if interconnect_bandwidth is not None:
            check_positive("interconnect_bandwidth", interconnect_bandwidth)
            interconnect_bandwidth = float(interconnect_bandwidth)
        return cls(name=name, memory_bytes=float(memory_bytes),
                   memory_bandwidth=float(memory_bandwidth), dense_flops=flops,
                   interconnect_bandwidth=interconnect_bandwidth, **provenance)

    def peak_flops(self, dtype: str = "bf16") -> float:
        """Dense peak FLOP/s for math in ``dtype`` (``fp16`` shares ``bf16``'s peak)."""
        check_dtype(dtype)
        key = dtype if dtype in self.dense_flops else _SAME_PEAK.get(dtype, dtype)
        if key not in self.dense_flops:
            have = ", ".join(sorted(self.dense_flops)) or "none"
            raise ValueError(
                f"dtype {dtype!r} has no tensor-core peak on {self.name} "
                f"(published peaks: {have}). Weight-only int4/int8 still computes in bf16: "
                "pass the math dtype, not the storage dtype."
            )
        return self.dense_flops[key]

    def ridge_point(self, dtype: str = "bf16") -> float:
        """Peak FLOP/s divided by memory bandwidth, in FLOP per byte."""
        return self.peak_flops(dtype) / self.memory_bandwidth

    @property
    def compute_dtypes(self) -> tuple[str, ...]:
        """Data types with a published dense tensor-core peak."""
        return tuple(self.dense_flops)


def _float_or_none(text: str, scale: float) -> float | None:
    text = (text or "").strip()
    return float(text) * scale if text else None


#: catalog column prefix -> the data types whose tensor-core peak it is
_PEAK_COLUMNS = [("bf16", ("bf16",), "TFLOPS"), ("fp8", ("fp8",), "TFLOPS"),
                 ("int8", ("int8",), "TOPS"), ("fp4", ("nvfp4", "mxfp4"), "TFLOPS")]


def _peaks(row: dict, kind: str) -> dict:
    flops = {}
    for prefix, dtypes, unit in _PEAK_COLUMNS:
        value = _float_or_none(row.get(f"{prefix}_{kind}_{unit}", ""), 1e12)
        if value is not None:
            for dtype in dtypes:
                flops[dtype] = value
    return flops


@cache
def _load_catalog() -> dict[str, Accelerator]:
    catalog: dict[str, Accelerator] = {}
    path = resources.files("servingmath") / "data" / "accelerators.csv"
    with path.open(newline="", encoding="utf-8") as handle:
        for row in csv.DictReader(handle):
            flops = _peaks(row, "dense")
            link = _float_or_none(row["interconnect_bidirectional_GBps"], GB)
            catalog[row["name"]] = Accelerator(
                name=row["name"],
                memory_bytes=float(row["memory_GB"]) * GB,
                memory_bandwidth=float(row["memory_bandwidth_TBps"]) * TB,
                dense_flops=flops,
                interconnect_bandwidth=None if link is None else link / 2,
                interconnect=row["interconnect"],
                vendor=row["vendor"],
                memory_type=row["memory_type"],
                source=row["source"],
                as_of=row["as_of"],
                verified=row["verified"],
                notes=row["notes"],
                sparse_flops=_peaks(row, "sparse"),
                tdp=_float_or_none(row.get("tdp_W", ""), 1.0),
                host_link=row.get("host_link", ""),
            )
    return catalog


@cache
def _aliases() -> dict[str, str]:
    table = {}
    path = resources.files("servingmath") / "data" / "accelerators.csv"
    with path.open(newline="", encoding="utf-8") as handle:
        for row in csv.DictReader(handle):
            for alias in filter(None, row["aliases"].split("|")):
                if alias in table and table[alias] != row["name"]:
                    raise ValueError(f"accelerators.csv: alias {alias!r} names both "
                                     f"{table[alias]!r} and {row['name']!r}")
                table[alias] = row["name"]
    return table


def list_accelerators() -> list[str]:
    """Names of every accelerator in the catalog, in catalog order.

    Derived in the chapter "Rooflines: why decoding is bandwidth-bound" (notebooks/02_rooflines.ipynb).

    Examples
    --------
    >>> "H100-SXM5-80GB" in list_accelerators()
    True
    """
    return list(_load_catalog())


def accelerator_catalog() -> dict[str, Accelerator]:
    """A copy of the catalog: name -> :class:`Accelerator`.

    Derived in the chapter "Rooflines: why decoding is bandwidth-bound" (notebooks/02_rooflines.ipynb).

    Examples
    --------
    >>> accelerator_catalog()["H100-SXM5-80GB"].memory_bytes / 1e9
    80.0
    """
    return dict(_load_catalog())


def get_accelerator(name) -> Accelerator:
    """Look up an accelerator by catalog name or alias (``"H100"``, ``"A100-80GB"``).

    Derived in the chapter "How to use this book" (notebooks/00_how_to_use_this_book.ipynb).

    Exact names first, then the catalog's aliases (the spellings benchmarks and
    ``nvidia-smi`` print), then either of those case-insensitively.

    An :class:`Accelerator` passes through unchanged, so every function can
    take either a name or an object.

    Raises
    ------
    KeyError
        For an unknown name, with the closest catalog names.

    Examples
    --------
    >>> acc = get_accelerator("H100")
    >>> acc.name, acc.memory_bytes / 1e9
    ('H100-SXM5-80GB', 80.0)
    """
    if isinstance(name, Accelerator):
        return name
    catalog = _load_catalog()
    if isinstance(name, str):
        if name in catalog:
            return catalog[name]
        if name in _aliases():
            return catalog[_aliases()[name]]
        folded = _folded_names().get(name.strip().casefold())
        if folded is not None:
            return catalog[folded]
    raise unknown_name("accelerator", name, list(catalog) + list(_aliases()))


@cache
def _folded_names() -> dict[str, str]:
    """Case-folded catalog names and aliases -> catalog name."""
    table = {alias.casefold(): target for alias, target in _aliases().items()}
    table.update({name.casefold(): name for name in _load_catalog()})
    return table
