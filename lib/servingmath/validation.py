"""Validation: the model against published measurements, its calibration, and implied MBU/MFU.

How far can the book's arithmetic be trusted? This module turns each row of a
table of published measurements (``data/published-measurements.csv``: one
number a row, with its source and configuration) into a configuration the
model understands -- a model from the catalog or a ``config.json``, an
accelerator from the catalog, GPU count, tensor parallelism, data types,
batch, prompt and output lengths -- plus the measured value with its metric
in SI units (:func:`load_published_measurements`). Rows the model cannot
express are kept, each with the reason.

For every expressible row :func:`physical_bound` evaluates the model at
efficiency 1.0. A measured time must lie at or above its bound and a measured
throughput at or below it (:func:`bound_holds`); a row that beats its bound
means that the row or the model is wrong. :func:`calibrate` then fits a few
efficiencies per accelerator family (memory-bandwidth utilisation MBU,
model FLOP utilisation MFU, and a fixed cost per layer and step for
tensor-parallel communication) on part of the rows, and
:func:`percentage_errors` measures the result on the rest.

What each metric means to the model
-----------------------------------
* ``ttft``: one prefill of ``batch_size`` prompts of ``prompt_len`` tokens
  (the first token comes out of the prefill's last pass).
* ``itl`` (median inter-token latency) and ``tpot``: one decode step of
  ``batch_size`` sequences at the median context of the run,
  ``prompt_len + 1 + (output_len - 2) // 2`` tokens (step times grow with the
  context, so the median step is the one at the median context).
* ``e2e`` and every static-batch throughput: the whole static batch,
  :func:`static_batch_time` = one prefill of B prompts + (L_o - 1) decode
  steps at contexts L_p + 1, ..., L_p + L_o - 1. Throughput is
  B x L_o / T (tokens/s) or B / T (requests/s), divided by the GPU count
  when the source reports it per GPU.

Implied efficiency of your own numbers
--------------------------------------
:func:`implied_efficiency` takes one measured step time (a decode step or a
prefill) and reports the MBU and MFU it implies, as Databricks defines them:
achieved bytes/s (or FLOP/s) over the peak, with the bytes and FLOPs the
model says the step must move and compute. MBU <= 1 exactly when the
measured time is at least the time the bytes take at peak bandwidth.

Examples
--------
>>> data = load_published_measurements()
>>> len(data.measurements) + len(data.unexpressible)
138
>>> row = data.by_row(48)      # LMDeploy, Llama-2-7B fp16, batch 1, one A100-80GB
>>> row.metric, round(row.value * 1e3, 1), row.scenario
('itl_ms', 9.0, 'decode_step')
>>> round(physical_bound(row) * 1e3, 2)          # ms: 13.5 GB of weights / 2.039 TB/s
6.5
>>> bound_holds(row), round(achieved_fraction(row), 3)
(True, 0.722)
"""

from __future__ import annotations

import csv
import math
from collections import defaultdict
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from ._validation import (check_choice, check_fraction, check_integer, check_nonnegative,
                          check_positive, scalar_or_array)
from .datatypes import check_dtype
from .decode import decode_step_parts, decode_step_time
from .deployment import Deployment, deployment_function
from .hardware import Accelerator, get_accelerator
from .memory import fits
from .models import ModelConfig, get_model, load_model_config
from .prefill import prefill_step_parts, prefill_time
from .units import GB, GiB

__all__ = [
    "Measurement",
    "Unexpressible",
    "PublishedData",
    "Efficiency",
    "ImpliedEfficiency",
    "HARDWARE_MAP",
    "MODEL_MAP",
    "METRICS",
    "SOURCES",
    "FAMILIES",
    "default_data_path",
    "load_published_measurements",
    "accelerator_family",
    "static_batch_time",
    "predict",
    "physical_bound",
    "bound_holds",
    "achieved_fraction",
    "split_measurements",
    "calibrate",
    "PARAMETERS",
    "percentage_errors",
    "error_summary",
    "implied_efficiency",
    "implied_mbu",
    "implied_mfu",
]

_ROOT = Path(__file__).resolve().parents[2]

#: Short names of the sources: the start of the CSV's ``source_title`` -> key.
SOURCES = {
    "Performance of TensorRT-LLM": "TensorRT-LLM doc",
    "LMDeploy": "LMDeploy",
    "LLM Inference Performance Engineering": "Databricks",
    "vLLM Performance Benchmark": "vLLM CI",
    "Transformer Inference Arithmetic": "kipply/FasterTransformer",
}

#: The CSV's hardware strings -> (catalog name, the assumption made).
HARDWARE_MAP = {
    "H100-SXM-80GB": ("H100-SXM5-80GB", "stated: H100 SXM, 80 GB"),
    "H100 (table says '8xH100' node)": (
        "H100-SXM5-80GB", "form factor not stated; an 8-GPU NVLink node is SXM (the PCIe part, "
        "2.0 TB/s and 756 TFLOP/s, would give a higher time bound)"),
    "H200": ("H200-SXM-141GB", "form factor not stated; SXM (H200 NVL has the same 4.8 TB/s but a "
                               "lower FLOP/s peak, so SXM gives the lower, safer time bound)"),
    "A100-SXM-80GB": ("A100-SXM4-80GB", "stated: A100 SXM, 80 GB"),
    "A100-SXM4-80GB": ("A100-SXM4-80GB", "stated"),
    "A100-80GB (form factor not stated)": (
        "A100-SXM4-80GB", "form factor not stated; SXM4 (2.039 TB/s) rather than PCIe (1.935 TB/s, "
        "same 312 TFLOP/s): the higher bandwidth gives the bound that holds for either"),
    "A100-SXM-40GB": ("A100-SXM4-40GB", "stated: A100 SXM, 40 GB"),
    "A100 (40GB per rest of blog)": (
        "A100-SXM4-40GB", "not stated in the table; 40 GB as in the blog's other tables (an 80 GB "
        "part, 2.039 TB/s, would raise the memory-bound throughput bounds by 31 %)"),
    "A100-40GB": ("A100-SXM4-40GB", "A100 40 GB; SXM as in llm-analysis' reproduction (a100-sxm-40gb)"),
    "L40S": ("L40S", "stated"),
    "A10": ("A10", "stated: A10, not A10G"),
}

_MODEL_CONFIGS = "data/model-configs"
#: The CSV's model strings -> (catalog name or config file under the repository root, the assumption).
MODEL_MAP = {
    "GPT-J-6B": ("GPT-J-6B", "catalog"),
    "Llama-2-7B": ("Llama-2-7B", "catalog ('LLaMA 7B' in the TensorRT-LLM doc = Llama-2-7b per its methodology)"),
    "Llama-2-13B": ("Llama-2-13B", "catalog"),
    "Llama-2-70B": ("Llama-2-70B", "catalog"),
    "Llama-3.1-8B": ("Llama-3.1-8B", "catalog"),
    "Llama-3-70B": ("Llama-3.1-70B", "Llama-3.1-70B's shapes: Llama-3-70B has the same layers, widths, "
                                     "heads and vocabulary; only its context (8k) and RoPE scaling differ, "
                                     "which the arithmetic does not use"),
    "InternLM-20B": (f"{_MODEL_CONFIGS}/internlm-20b.json", "config.json added for this chapter"),
    "MPT-7B": (f"{_MODEL_CONFIGS}/mpt-7b.json", "config.json added for this chapter"),
    "FT-13B-test (d=5120,L=40,H=40)": (f"{_MODEL_CONFIGS}/ft-13b-test.json",
                                       "llm-analysis' test-13b config, added for this chapter"),
}

#: CSV metric -> (kind, scale to SI, SI unit, what the model computes).
METRICS = {
    "ttft_ms": ("time", 1e-3, "s", "prefill"),
    "itl_ms": ("time", 1e-3, "s", "decode_step"),
    "tpot_ms": ("time", 1e-3, "s", "decode_step"),
    "e2e_ms": ("time", 1e-3, "s", "static_run"),
    "throughput_tok_s": ("throughput", 1.0, "tok/s", "static_run"),
    "throughput_tok_s_per_gpu": ("throughput", 1.0, "tok/s", "static_run"),
    "throughput_req_s": ("throughput", 1.0, "req/s", "static_run"),
}

#: Accelerator families that share calibrated efficiencies (same chip generation and memory type).
FAMILIES = {
    "A100-SXM4-40GB": "A100", "A100-SXM4-80GB": "A100", "A100-PCIe-80GB": "A100",
    "H100-SXM5-80GB": "Hopper", "H100-PCIe-80GB": "Hopper", "H100-NVL-94GB": "Hopper",
    "H200-SXM-141GB": "Hopper", "GH200-144GB": "Hopper",
    "L40S": "L40S", "A10": "A10", "A10G": "A10",
}

_BASES = ("total", "per_gpu")


def default_data_path() -> Path:
    """The book's ``data/published-measurements.csv`` (the repository's data folder)."""
    return _ROOT / "data" / "published-measurements.csv"


def accelerator_family(accelerator) -> str:
    """The family whose calibrated efficiencies an accelerator shares (``"A100"``, ``"Hopper"``...).

    >>> accelerator_family("H200")
    'Hopper'
    """
    acc = get_accelerator(accelerator)
    return FAMILIES.get(acc.name, acc.name)


# ------------------------------------------------------------------------------- records

@dataclass(frozen=True)
class _Steps:
    """The parts (seconds at the peaks, :func:`servingmath.step.time_parts`) of every forward step of a
    measured workload, and how many times each step counts: the step model's numbers, kept so that
    the calibration can rescale them by MBU and MFU without recomputing them."""

    weight: np.ndarray
    linear: np.ndarray
    kv: np.ndarray
    attention: np.ndarray
    communication: np.ndarray
    layers_with_allreduce: np.ndarray
    count: np.ndarray


@dataclass(frozen=True, eq=False)
class Measurement:
    """One published measurement, as a configuration the model understands plus the measured value.

    Attributes
    ----------
    row : int
        0-based index of the data row in the CSV.
    source : str
        Short source name (:data:`SOURCES`).
    model : ModelConfig
    accelerator : Accelerator
    n_gpus, tensor_parallel : int
    weight_dtype, kv_dtype, compute_dtype : str
        fp8 engines compute in fp8 (their peak is the fp8 one); all else in fp16/bf16.
    batch_size, prompt_len, output_len : int
    metric : str
        The CSV's metric (``"ttft_ms"``, ``"throughput_tok_s_per_gpu"``, ...).
    kind : {"time", "throughput"}
    scenario : {"prefill", "decode_step", "static_run"}
        What the model computes for it.
    value : float
        The measured value in SI: seconds, tokens/s or requests/s.
    unit : str
        ``"s"``, ``"tok/s"`` or ``"req/s"``.
    basis : {"total", "per_gpu", "ambiguous"}
        Throughput of the whole instance or per GPU; ``"ambiguous"`` where the
        source does not say (then :func:`predict` takes ``basis=``).
    fits : bool
        Whether the weights and the KV cache of the whole batch at its final
        context fit, reading the accelerator's memory generously (the sheet's
        GB as GiB, all of it usable).
    assumptions : tuple of str
        Every assumption made in turning the row into this configuration.
    raw : dict
        The CSV row, unchanged.
    """

    row: int
    source: str
    model: ModelConfig
    accelerator: Accelerator
    n_gpus: int
    tensor_parallel: int
    weight_dtype: str
    kv_dtype: str
    compute_dtype: str
    batch_size: int
    prompt_len: int
    output_len: int
    metric: str
    kind: str
    scenario: str
    value: float
    unit: str
    basis: str
    fits: bool
    assumptions: tuple = ()
    raw: dict = field(default_factory=dict, repr=False)
    steps: _Steps | None = field(default=None, repr=False)

    @property
    def family(self) -> str:
        return accelerator_family(self.accelerator)

    @property
    def published_value(self) -> float:
        """The value back in the CSV's units (ms, tok/s, req/s)."""
        return self.value / METRICS[self.metric][1]

    def with_changes(self, **changes) -> "Measurement":
        """A copy with some configuration fields changed (``model``, ``accelerator``, ``batch_size``,
        dtypes, lengths...) and its steps recomputed: to test what-ifs against the measured value.

        >>> row = load_published_measurements().by_row(48)
        >>> round(physical_bound(row.with_changes(accelerator=get_accelerator("A100-PCIe-80GB"))) * 1e3, 2)
        6.85
        """
        allowed = {"model", "accelerator", "tensor_parallel", "weight_dtype", "kv_dtype", "compute_dtype",
                   "batch_size", "prompt_len", "output_len", "value"}
        for name in changes:
            check_choice("field", name, allowed)
        new = replace(self, **changes)
        model, acc = get_model(new.model), get_accelerator(new.accelerator)
        steps = _steps(model, acc, new.scenario, new.batch_size, new.prompt_len, new.output_len,
                       new.weight_dtype, new.kv_dtype, new.compute_dtype, new.tensor_parallel)
        return replace(new, model=model, accelerator=acc, steps=steps)

    def describe(self) -> str:
        """One line: source, model, accelerator x N, batch, lengths, metric."""
        tp = f" x{self.tensor_parallel}" if self.tensor_parallel > 1 else ""
        return (f"{self.source}: {self.model.name} {self.weight_dtype} on {self.accelerator.name}{tp}, "
                f"B={self.batch_size}, {self.prompt_len}->{self.output_len} tok, {self.metric}")


@dataclass(frozen=True)
class Unexpressible:
    """A row the model cannot express, with the reason."""

    row: int
    source: str
    model: str
    hardware: str
    metric: str
    reason: str
    raw: dict = field(default_factory=dict, repr=False)


@dataclass(frozen=True)
class PublishedData:
    """What :func:`load_published_measurements` returns."""

    measurements: tuple
    unexpressible: tuple

    def by_row(self, row: int):
        """The Measurement (or Unexpressible) made from data row ``row``."""
        for item in self.measurements + self.unexpressible:
            if item.row == row:
                return item
        raise KeyError(f"row {row!r} is not in the data (rows 0..{len(self) - 1})")

    def __len__(self) -> int:
        return len(self.measurements) + len(self.unexpressible)


# ------------------------------------------------------------------------------- loading

def _source_key(title: str) -> str:
    for prefix, key in SOURCES.items():
        if title.startswith(prefix):
            return key
    raise ValueError(f"source_title {title!r} is not one of the known sources: {', '.join(SOURCES)}")


def _load_model(name: str, root: Path) -> tuple[ModelConfig, str]:
    target, note = MODEL_MAP[name]
    if not target.endswith(".json"):
        return get_model(target), note
    path = root / target
    return load_model_config(path), f"{note}: {target}"  # load_model_config reads servingmath.ffn_gated


def _integer(text: str):
    text = (text or "").strip()
    return int(text) if text.isdigit() else None


def _check_shape(model: ModelConfig, raw: dict, row: int) -> None:
    """The CSV states each model's size and shape; they must agree with the config used."""
    from .models import parameter_count

    stated = {"n_layers": model.n_layers, "n_kv_heads": model.n_kv_heads, "head_dim": model.head_dim}
    for column, have in stated.items():
        if int(raw[column]) != have:
            raise ValueError(f"row {row}: the CSV gives {column} = {raw[column]} for {raw['model']}, "
                             f"but {model.name} has {have}")
    params = parameter_count(model) / 1e9
    if abs(params / float(raw["params_B"]) - 1) > 0.01:
        raise ValueError(f"row {row}: the CSV gives {raw['params_B']} B parameters for {raw['model']}, "
                         f"{model.name} has {params:.2f} B")


def _steps(model, acc, scenario, batch, prompt, output, wd, kd, cd, tp) -> _Steps:
    """The forward steps of a workload, each split into its parts at the peaks (mfu = mbu = 1).

    The L_o - 1 decode steps of a static run are summed into one aggregate step. That is exact
    for the hybrid overlap at any efficiencies: within the run the weight and matmul terms are
    the same at every step, and the KV and attention terms are both proportional to the context,
    so sum_j max(kv_j / u, att_j / m) = max(sum_j kv_j / u, sum_j att_j / m).
    """
    keys = ("weight_memory", "linear_compute", "kv_memory", "attention_compute", "communication")
    dep = Deployment.build(model, acc, weight_dtype=wd, kv_dtype=kd, compute_dtype=cd, tensor_parallel=tp)
    rows = []   # (parts, steps it stands for)
    if scenario in ("prefill", "static_run"):
        rows.append((prefill_step_parts(dep, prompt, batch_size=batch), 1))
    if scenario == "static_run" and output > 1:
        contexts = prompt + 1 + np.arange(output - 1)
        parts = decode_step_parts(dep, batch, contexts)
        rows.append(({k: np.sum(np.broadcast_to(np.asarray(parts[k], dtype=float), contexts.shape))
                      for k in keys}, output - 1))
    if scenario == "decode_step":
        rows.append((decode_step_parts(dep, batch, prompt + 1 + (output - 2) // 2), 1))
    arrays = [np.array([float(parts[k]) for parts, _ in rows]) for k in keys]
    count = np.array([float(n) for _, n in rows])
    layers = count * float(model.n_layers if tp > 1 else 0)
    return _Steps(*arrays, layers, count)


def _unexpressible_reason(raw: dict) -> str | None:
    metric = raw["metric"]
    if metric == "mbu":
        return ("a utilisation derived by the source, not a time or a throughput: nothing to bound "
                "(it is compared with the calibrated MBU instead)")
    if metric not in METRICS:
        return f"metric {metric!r} is not one the model computes ({', '.join(METRICS)})"
    if _integer(raw["prompt_len"]) is None or (METRICS[metric][3] != "prefill"
                                               and _integer(raw["output_len"]) is None):
        return (f"request lengths not given (prompt {raw['prompt_len']!r}, output {raw['output_len']!r}): "
                "a dataset's mix of lengths under continuous batching, which the step model does not "
                "simulate")
    if _integer(raw["batch_size_or_concurrency"]) is None:
        return f"batch size {raw['batch_size_or_concurrency']!r} is not a number"
    return None


def _basis(metric: str, notes: str, n_gpus: int) -> str:
    if metric.endswith("_per_gpu"):
        return "per_gpu"
    if metric.startswith("throughput") and n_gpus > 1 and "per-GPU vs total not restated" in notes:
        return "ambiguous"
    return "total"


def load_published_measurements(path=None, root=None) -> PublishedData:
    """Read the published-measurements CSV into Measurements, and list the rows the model cannot express.

    Parameters
    ----------
    path : str or Path, optional
        The CSV (default: :func:`default_data_path`).
    root : str or Path, optional
        Folder against which the model config files of :data:`MODEL_MAP` are
        found (default: the repository root).

    Returns
    -------
    PublishedData
        ``measurements`` (one :class:`Measurement` per expressible row) and
        ``unexpressible`` (one :class:`Unexpressible` per other row, with the
        reason); together they hold every row exactly once.

    Raises
    ------
    KeyError
        A hardware or model string that :data:`HARDWARE_MAP` or :data:`MODEL_MAP` does not map.
    ValueError
        A row whose stated layers, KV heads, head size or parameter count
        disagree with the model config it maps to.

    Notes
    -----
    fp8 rows compute in fp8 (TensorRT-LLM's ``--enable_fp8`` engines). A row
    whose prompt plus output exceeds the model's maximum context (GPT-J at
    2048 + 2048 tokens) is modelled with the maximum lifted to the benchmark's
    length, an assumption recorded in ``assumptions``: the arithmetic does not
    depend on the limit.

    Examples
    --------
    >>> data = load_published_measurements()
    >>> len(data.measurements), len(data.unexpressible)
    (129, 9)
    """
    path = default_data_path() if path is None else Path(path)
    root = _ROOT if root is None else Path(root)
    with path.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    measurements, skipped = [], []
    models_cache: dict = {}
    for index, raw in enumerate(rows):
        source = _source_key(raw["source_title"])
        reason = _unexpressible_reason(raw)
        if reason is not None:
            skipped.append(Unexpressible(index, source, raw["model"], raw["hardware"], raw["metric"],
                                         reason, dict(raw)))
            continue
        if raw["hardware"] not in HARDWARE_MAP:
            raise KeyError(f"hardware {raw['hardware']!r} (row {index}) is not in HARDWARE_MAP")
        if raw["model"] not in MODEL_MAP:
            raise KeyError(f"model {raw['model']!r} (row {index}) is not in MODEL_MAP")
        acc_name, acc_note = HARDWARE_MAP[raw["hardware"]]
        acc = get_accelerator(acc_name)
        if raw["model"] not in models_cache:
            models_cache[raw["model"]] = _load_model(raw["model"], root)
        model, model_note = models_cache[raw["model"]]
        _check_shape(model, raw, index)
        kind, scale, unit, scenario = METRICS[raw["metric"]]
        batch = _integer(raw["batch_size_or_concurrency"])
        prompt = _integer(raw["prompt_len"])
        output = _integer(raw["output_len"]) if scenario != "prefill" else 1
        output = 1 if output is None else output
        n_gpus, tp = int(raw["n_gpus"]), int(raw["tp"])
        wd, kd = raw["dtype_weights"], raw["dtype_kv"]
        cd = "fp8" if wd == "fp8" else wd
        assumptions = [f"{raw['hardware']} -> {acc.name}: {acc_note}", f"{raw['model']} -> {model.name}: "
                       f"{model_note}"]
        if cd == "fp8":
            assumptions.append("fp8 engine: matmuls at the fp8 peak")
        final = prompt + output
        if final > model.max_context_len:
            assumptions.append(f"{model.name}'s maximum context lifted from {model.max_context_len} to "
                               f"{final} tokens, the benchmark's")
            model = replace(model, max_context_len=final)
        fit = fits(model, acc, final, batch, weight_dtype=wd, kv_dtype=kd, tensor_parallel=tp,
                   gpu_memory_utilization=1.0, memory_bytes=acc.memory_bytes * GiB / GB)
        steps = _steps(model, acc, scenario, batch, prompt, output, wd, kd, cd, tp)
        measurements.append(Measurement(
            row=index, source=source, model=model, accelerator=acc, n_gpus=n_gpus, tensor_parallel=tp,
            weight_dtype=wd, kv_dtype=kd, compute_dtype=cd, batch_size=batch, prompt_len=prompt,
            output_len=output, metric=raw["metric"], kind=kind, scenario=scenario,
            value=float(raw["value"]) * scale, unit=unit, basis=_basis(raw["metric"], raw["notes"], n_gpus),
            fits=bool(fit), assumptions=tuple(assumptions), raw=dict(raw), steps=steps))
    return PublishedData(tuple(measurements), tuple(skipped))


# ------------------------------------------------------------------------------- the model

@dataclass(frozen=True)
class Efficiency:
    """Calibrated efficiencies of one accelerator family.

    Attributes
    ----------
    mbu : float in (0, 1]
        Memory-bandwidth utilisation: achieved / peak bytes/s.
    mfu : float in (0, 1]
        Model FLOP utilisation: achieved / peak FLOP/s.
    comm_per_layer : float >= 0
        Seconds added per layer and forward step when the model is split over
        N > 1 GPUs: the latency of its two all-reduces (the bandwidth part is
        in the physical bound already).
    step_overhead : float >= 0
        Seconds added to every forward step (prefill or decode): kernel
        launches, the scheduler, sampling, whatever does not scale with the
        bytes and FLOPs. 0 in the book's model.
    """

    mbu: float = 1.0
    mfu: float = 1.0
    comm_per_layer: float = 0.0
    step_overhead: float = 0.0

    def __post_init__(self):
        check_fraction("mbu", self.mbu)
        check_fraction("mfu", self.mfu)
        check_nonnegative("comm_per_layer", self.comm_per_layer)
        check_nonnegative("step_overhead", self.step_overhead)


_PHYSICAL = Efficiency()   # the physical bound: every efficiency 1.0, no latency

#: The parameters :func:`calibrate` can fit, and their starting values.
PARAMETERS = {"mbu": 0.7, "mfu": 0.5, "comm_per_layer": 10e-6, "step_overhead": 1e-3}


def _step_times(steps: _Steps, mbu, mfu, comm_per_layer, step_overhead=0.0):
    """Hybrid overlap, as decode.decode_step_time: max(weights, matmuls) + max(KV, attention) + comm,
    plus the latencies of the calibrated model."""
    return (np.maximum(steps.weight / mbu, steps.linear / mfu)
            + np.maximum(steps.kv / mbu, steps.attention / mfu)
            + steps.communication + comm_per_layer * steps.layers_with_allreduce
            + step_overhead * steps.count)


def _work(m: Measurement) -> float:
    """What a throughput counts per run: output tokens (B x L_o) or requests (B)."""
    return m.batch_size * (m.output_len if m.unit == "tok/s" else 1)


def _to_metric(m: Measurement, seconds, basis: str):
    """A modelled run time -> the measurement's metric (time, or throughput on its basis)."""
    if m.kind == "time":
        return seconds
    per_gpu = m.basis == "per_gpu" or (m.basis == "ambiguous" and basis == "per_gpu")
    return _work(m) / np.asarray(seconds) / (m.tensor_parallel if per_gpu else 1)


def _check_basis(basis):
    return check_choice("basis", basis, _BASES)


def predict(measurement: Measurement, efficiency: Efficiency | None = None, basis: str = "total") -> float:
    """The model's value for a measurement's metric, in SI (seconds, tok/s or req/s).

    Parameters
    ----------
    measurement : Measurement
    efficiency : Efficiency, optional
        Default: all 1.0 and no communication latency, the physical bound.
    basis : {"total", "per_gpu"}
        How to read a throughput whose source does not say (``basis ==
        "ambiguous"``); ignored for the others.

    Examples
    --------
    >>> data = load_published_measurements()
    >>> row = data.by_row(48)   # LMDeploy Llama-2-7B ITL at batch 1: 9.0 ms measured
    >>> round(predict(row, Efficiency(mbu=0.7)) * 1e3, 2)
    9.28
    """
    if not isinstance(measurement, Measurement):
        raise ValueError(f"measurement must be a Measurement from load_published_measurements, "
                         f"got {type(measurement).__name__}")
    _check_basis(basis)
    e = _PHYSICAL if efficiency is None else efficiency
    total = float(np.sum(_step_times(measurement.steps, e.mbu, e.mfu, e.comm_per_layer, e.step_overhead)))
    return float(_to_metric(measurement, total, basis))


def physical_bound(measurement: Measurement, basis: str = "total") -> float:
    """The model at efficiency 1.0: a lower bound on any time, an upper bound on any throughput."""
    return predict(measurement, None, basis)


def achieved_fraction(measurement: Measurement, basis: str = "total") -> float:
    """How close the measurement came to its physical bound: bound / measured for a time,
    measured / bound for a throughput. In (0, 1] exactly when the bound holds."""
    bound = physical_bound(measurement, basis)
    if measurement.kind == "time":
        return bound / measurement.value
    return measurement.value / bound


def bound_holds(measurement: Measurement, basis: str = "total") -> bool:
    """True when a measured time is >= its bound, or a measured throughput <= its bound."""
    return bool(achieved_fraction(measurement, basis) <= 1.0)


@deployment_function
def static_batch_time(dep: Deployment, batch_size, prompt_len, output_len, *, comm_per_layer=0.0,
                      part="total"):
    """Seconds for a static batch: B prompts prefilled together, then decoded together to L_o tokens each.

    Parameters
    ----------
    model, accelerator : or one Deployment (scalar settings; hybrid overlap)
    batch_size, prompt_len, output_len : int
        B, L_p and L_o (L_o >= 1 output tokens per sequence).
    comm_per_layer : float
        Seconds added per layer and step when ``tensor_parallel > 1``.
    part : {"total", "prefill", "decode"}
    Deployment settings as keyword options (``mfu``, ``mbu``, ``step_overhead``: seconds
    added to every forward step, ...).

    Returns
    -------
    float

    Notes
    -----
    T = T_prefill(B, L_p) + sum_{j=1}^{L_o - 1} T_decode(B, S = L_p + j):
    the prefill's last pass yields token 1, each decode step one more, and step
    j attends to the L_p + j tokens up to its own (hybrid overlap).
    Static-batch throughput is B L_o / T (divide by N for per GPU), the
    quantity TensorRT-LLM's gptSessionBenchmark and LMDeploy's
    profile_generation report.

    Examples
    --------
    >>> t = static_batch_time("Llama-2-7B", "A100-SXM4-80GB", 1, 128, 128)
    >>> round(t * 1e3, 1)            # ms: one 128-token prefill + 127 weight reads
    835.9
    >>> round(64 * 128 / static_batch_time("Llama-2-7B", "A100-SXM4-80GB", 64, 128, 128))  # tok/s
    5229
    """
    check_choice("part", part, ("total", "prefill", "decode"))
    for name, value in [("batch_size", batch_size), ("prompt_len", prompt_len), ("output_len", output_len)]:
        if np.ndim(value) != 0:
            raise ValueError(f"{name} must be a single number here, got {np.shape(value)} values")
        check_integer(name, value, minimum=1)
    if not dep.is_scalar:
        raise ValueError("static_batch_time takes scalar deployment settings")
    check_nonnegative("comm_per_layer", comm_per_layer)
    b, lp, lo, n = int(batch_size), int(prompt_len), int(output_len), int(dep.tensor_parallel)
    steps = _steps(dep.model, dep.accelerator, "static_run", b, lp, lo, dep.weight_dtype, dep.kv_dtype,
                   dep.compute_dtype, n)
    times = _step_times(steps, float(dep.mbu), float(dep.mfu), comm_per_layer, float(dep.step_overhead))
    total_prefill, total_decode = float(times[0]), float(np.sum(times[1:]))
    return {"total": total_prefill + total_decode, "prefill": total_prefill, "decode": total_decode}[part]


# ------------------------------------------------------------------------------- calibration

def split_measurements(measurements, test_fraction=0.5, seed=0):
    """A seeded split into (train, test), stratified by accelerator family and metric kind.

    Within each (family, kind) group the rows are shuffled with
    ``numpy.random.default_rng(seed)`` and the first ceil((1 - test_fraction) n)
    go to training, the rest to test; every group keeps at least one training row.

    >>> data = load_published_measurements()
    >>> train, test = split_measurements(data.measurements)
    >>> len(train) + len(test) == len(data.measurements)
    True
    """
    f = check_fraction("test_fraction", test_fraction)
    if float(f) >= 1.0:
        raise ValueError(f"test_fraction must be < 1 (some rows must train), got {float(f):g}")
    check_integer("seed", seed, minimum=0)
    rng = np.random.default_rng(int(seed))
    groups = defaultdict(list)
    for m in measurements:
        groups[(m.family, m.kind)].append(m)
    train, test = [], []
    for key in sorted(groups):
        items = groups[key]
        order = rng.permutation(len(items))
        n_train = max(1, int(np.ceil((1 - float(f)) * len(items))))
        train += [items[i] for i in order[:n_train]]
        test += [items[i] for i in order[n_train:]]
    return sorted(train, key=lambda m: m.row), sorted(test, key=lambda m: m.row)


def _stack(measurements, basis):
    """Concatenate the steps of many rows, with each step's row index, for vectorised predictions."""
    steps = [m.steps for m in measurements]
    index = np.concatenate([np.full(s.weight.size, i) for i, s in enumerate(steps)])
    stacked = _Steps(*(np.concatenate([getattr(s, k) for s in steps]) for k in _Steps.__dataclass_fields__))
    work = np.array([_work(m) if m.kind == "throughput" else np.nan for m in measurements])
    per_gpu = np.array([m.basis == "per_gpu" or (m.basis == "ambiguous" and basis == "per_gpu")
                        for m in measurements])
    divide = np.where(per_gpu, [m.tensor_parallel for m in measurements], 1)
    is_time = np.array([m.kind == "time" for m in measurements])
    measured = np.array([m.value for m in measurements])
    return stacked, index, work / divide, is_time, measured


def _predict_many(stacked, index, work, is_time, n, values: dict):
    """Predictions for many rows at once; ``values`` holds Efficiency fields (missing: defaults)."""
    seconds = np.bincount(index, weights=_step_times(
        stacked, values.get("mbu", 1.0), values.get("mfu", 1.0), values.get("comm_per_layer", 0.0),
        values.get("step_overhead", 0.0)), minlength=n)
    return np.where(is_time, seconds, work / seconds)


def _nelder_mead(f, x0, scale=0.5, iterations=300, tolerance=1e-7):
    """Minimise f over R^k from x0: a small deterministic Nelder-Mead (no SciPy needed)."""
    x0 = np.asarray(x0, dtype=float)
    steps = np.maximum(scale, 0.2 * np.abs(x0))          # a relative step for the latencies' large values
    simplex = np.array([x0] + [x0 + steps[i] * np.eye(len(x0))[i] for i in range(len(x0))])
    values = np.array([f(x) for x in simplex])
    for _ in range(iterations):
        order = np.argsort(values)
        simplex, values = simplex[order], values[order]
        if values[-1] - values[0] < tolerance:
            break
        centroid = simplex[:-1].mean(axis=0)
        reflected = centroid + (centroid - simplex[-1])
        fr = f(reflected)
        if fr < values[0]:
            expanded = centroid + 2 * (centroid - simplex[-1])
            fe = f(expanded)
            simplex[-1], values[-1] = (expanded, fe) if fe < fr else (reflected, fr)
        elif fr < values[-2]:
            simplex[-1], values[-1] = reflected, fr
        else:
            contracted = centroid + 0.5 * (simplex[-1] - centroid)
            fc = f(contracted)
            if fc < values[-1]:
                simplex[-1], values[-1] = contracted, fc
            else:
                simplex = simplex[0] + 0.5 * (simplex - simplex[0])
                values = np.array([f(x) for x in simplex])
    best = int(np.argmin(values))
    return simplex[best].copy(), float(values[best])


# free variables: efficiencies through a logistic (kept in (0, 1)), latencies as squares (kept >= 0)
def _to_free(name, value):
    if name in ("mbu", "mfu"):
        return float(np.log(value / (1 - value)))
    return float(np.sqrt(value / 1e-6))


def _from_free(name, x):
    if name in ("mbu", "mfu"):
        return 1 / (1 + math.exp(-x))
    return x * x * 1e-6


def _loss_function(names, stacked, index, work, is_time, log_measured, n):
    """The calibration loss, mean |ln(predicted / measured)|, as a function of the free variables.

    The same arithmetic as :func:`_predict_many` with the fitted values, with the terms of the
    latencies that are not fitted (exactly 0) left out, which leaves every sum unchanged."""
    weight, linear, kv, attention = stacked.weight, stacked.linear, stacked.kv, stacked.attention
    communication, layers, count = stacked.communication, stacked.layers_with_allreduce, stacked.count
    fit_comm, fit_overhead = "comm_per_layer" in names, "step_overhead" in names
    names = tuple(names)

    def loss(x):
        values = dict(zip(names, (_from_free(k, v) for k, v in zip(names, x))))
        mbu, mfu = values.get("mbu", 1.0), values.get("mfu", 1.0)
        seconds = (np.maximum(weight / mbu, linear / mfu) + np.maximum(kv / mbu, attention / mfu)
                   + communication)
        if fit_comm:
            seconds = seconds + values["comm_per_layer"] * layers
        if fit_overhead:
            seconds = seconds + values["step_overhead"] * count
        seconds = np.bincount(index, weights=seconds, minlength=n)
        predicted = np.where(is_time, seconds, work / seconds)
        return float(np.abs(np.log(predicted) - log_measured).sum()) / n

    return loss


def calibrate(measurements, basis="total", parameters=("mbu", "mfu", "comm_per_layer")):
    """Fit a few efficiencies per accelerator family to measured rows.

    Parameters
    ----------
    measurements : sequence of Measurement
        The training rows. Rows that beat their physical bound or whose batch
        does not fit are left out (no efficiency <= 1 can explain them).
    basis : {"total", "per_gpu"}
        Reading of ambiguous throughputs.
    parameters : tuple of str
        Which :class:`Efficiency` fields to fit (:data:`PARAMETERS`); the others
        keep their defaults (1.0, or no latency). ``comm_per_layer`` is fitted
        only for a family with a tensor-parallel training row.

    Returns
    -------
    dict
        family -> :class:`Efficiency`.

    Notes
    -----
    Minimises the mean absolute log error, mean |ln(predicted / measured)|,
    which treats 10 % too high and 10 % too low alike and is robust to a few
    odd rows, by a deterministic Nelder-Mead search (MBU and MFU kept in
    (0, 1), latencies >= 0, by a change of variables).

    Examples
    --------
    >>> data = load_published_measurements()
    >>> fitted = calibrate(data.measurements, basis="per_gpu")
    >>> sorted(fitted)
    ['A10', 'A100', 'Hopper', 'L40S']
    >>> 0 < fitted["A100"].mbu <= 1 and fitted["L40S"].comm_per_layer == 0.0
    True
    """
    _check_basis(basis)
    if isinstance(parameters, str) or not parameters:
        raise ValueError(f"parameters must be a non-empty tuple of names from {', '.join(PARAMETERS)}, "
                         f"got {parameters!r}")
    for name in parameters:
        check_choice("parameters", name, PARAMETERS)
    usable = [m for m in measurements if isinstance(m, Measurement) and m.fits and bound_holds(m, basis)]
    if not usable:
        raise ValueError("calibrate needs at least one Measurement that fits and respects its bound")
    families = defaultdict(list)
    for m in usable:
        families[m.family].append(m)
    result = {}
    for family in sorted(families):
        rows = families[family]
        names = [p for p in parameters
                 if p != "comm_per_layer" or any(m.tensor_parallel > 1 for m in rows)]
        stacked, index, work, is_time, measured = _stack(rows, basis)

        loss = _loss_function(names, stacked, index, work, is_time, np.log(measured), len(rows))
        x = [_to_free(k, PARAMETERS[k]) for k in names]
        for _ in range(2):   # restart from the best point: Nelder-Mead can stall on a flat face
            x, _ = _nelder_mead(loss, x)
        result[family] = Efficiency(**{k: float(_from_free(k, v)) for k, v in zip(names, x)})
    return result


def percentage_errors(measurements, efficiencies=None, basis="total"):
    """Signed errors (predicted - measured) / measured of each row, as an array.

    ``efficiencies``: family -> :class:`Efficiency` (from :func:`calibrate`),
    or ``None`` for the physical bound. A family without an entry raises.
    """
    _check_basis(basis)
    errors = []
    for m in measurements:
        if efficiencies is not None and m.family not in efficiencies:
            raise KeyError(f"no calibrated efficiency for family {m.family!r} "
                           f"(have: {', '.join(sorted(efficiencies))})")
        e = None if efficiencies is None else efficiencies[m.family]
        errors.append(predict(m, e, basis) / m.value - 1)
    return np.array(errors, dtype=float)


def error_summary(measurements, efficiencies=None, basis="total") -> dict:
    """Per metric: (rows, median and worst absolute percentage error, as fractions).

    >>> data = load_published_measurements()
    >>> summary = error_summary(data.measurements[:4])
    >>> sorted(summary)
    ['throughput_tok_s_per_gpu']
    """
    errors = np.abs(percentage_errors(measurements, efficiencies, basis))
    metrics = np.array([m.metric for m in measurements])
    return {str(metric): (int(np.sum(metrics == metric)), float(np.median(errors[metrics == metric])),
                     float(np.max(errors[metrics == metric])))
            for metric in sorted(set(metrics))}


# ------------------------------------------------------------------------------- implied efficiency

@dataclass(frozen=True)
class ImpliedEfficiency:
    """What one measured step time implies (floats, or arrays when inputs were arrays).

    Attributes
    ----------
    measured_time : seconds
    bound : seconds
        The physical bound (hybrid overlap, communication at full link bandwidth).
    memory_time, compute_time : seconds
        Bytes at peak bandwidth; FLOPs at peak FLOP/s (per GPU).
    mbu, mfu : float
        memory_time / measured_time and compute_time / measured_time.
    fraction_of_bound : float
        bound / measured_time (<= 1 unless the measurement beats the model).
    limited_by : str or ndarray of str
        ``"memory"`` or ``"compute"``: the larger of the two times.
    """

    measured_time: object
    bound: object
    memory_time: object
    compute_time: object
    mbu: object
    mfu: object
    fraction_of_bound: object
    limited_by: object


_PHASES = ("decode", "prefill")


@deployment_function
def implied_efficiency(dep: Deployment, measured_time, *, batch_size=1, context_len=0, phase="decode",
                       prompt_len=1) -> ImpliedEfficiency:
    """The MBU and MFU a measured step time implies: place your own benchmark on the roofline.

    Parameters
    ----------
    model, accelerator : or one Deployment (its mfu and mbu are not used: the result is what they are)
    measured_time : float or array
        Seconds of one decode step (a TPOT or ITL) or one prefill.
    batch_size : int or array
        Sequences in the step (decode) or prompts prefilled together (prefill).
    context_len : int or array
        Decode: tokens in each sequence's KV cache. Prefill: tokens already
        cached before the prompt (0 for a fresh prompt).
    phase : {"decode", "prefill"}
    prompt_len : int or array
        Prefill only: new tokens per prompt.
    weight_dtype, kv_dtype, compute_dtype, tensor_parallel : deployment settings (keyword options)
        The times are per GPU.

    Returns
    -------
    ImpliedEfficiency

    Notes
    -----
    MBU = (W_bytes + B S k) / (N x t x W_peak) and MFU = FLOPs / (N x t x F_peak),
    Databricks' definitions (achieved / peak) with the bytes and FLOPs of
    :func:`servingmath.decode.decode_step_parts` (or
    :func:`servingmath.prefill.prefill_step_parts`). Hence MBU <= 1 exactly when
    t >= the memory time, MFU <= 1 exactly when t >= the compute time, and
    ``fraction_of_bound`` <= 1 exactly when t >= the physical bound, which is at
    least the larger of the two. Time spent outside the GPU's memory and
    tensor cores (kernel launches, the scheduler, sampling) lowers both.

    References
    ----------
    Databricks, "LLM Inference Performance Engineering: Best Practices" (blog, 2023-10): MBU and MFU.

    Examples
    --------
    >>> e = implied_efficiency("Llama-3.1-8B", "H200", 0.00563411, batch_size=1, context_len=512)
    >>> round(e.mbu, 3), round(e.mfu, 4), e.limited_by    # our H200, CUDA graphs
    (0.558, 0.0027, 'memory')
    >>> e = implied_efficiency("Llama-3.1-8B", "H200", 0.227165, phase="prefill", prompt_len=8192)
    >>> round(e.mfu, 3), e.limited_by
    (0.587, 'compute')
    """
    check_choice("phase", phase, _PHASES)
    t = check_positive("measured_time", measured_time)
    dep = dep.replace(mfu=1.0, mbu=1.0, overlap="hybrid", step_overhead=0.0)
    if phase == "decode":
        parts = decode_step_parts(dep, batch_size, context_len)
        bound = decode_step_time(dep, batch_size, context_len)
    else:
        parts = prefill_step_parts(dep, prompt_len, batch_size=batch_size, cached_len=context_len)
        bound = prefill_time(dep, prompt_len, batch_size=batch_size, cached_len=context_len)
    memory = np.asarray(parts["weight_memory"]) + np.asarray(parts["kv_memory"])
    compute = np.asarray(parts["linear_compute"]) + np.asarray(parts["attention_compute"])
    memory, compute, bound, t = np.broadcast_arrays(memory, compute, np.asarray(bound), t)
    limited = np.where(memory >= compute, "memory", "compute")
    return ImpliedEfficiency(
        measured_time=scalar_or_array(t),
        bound=scalar_or_array(bound),
        memory_time=scalar_or_array(memory),
        compute_time=scalar_or_array(compute),
        mbu=scalar_or_array(memory / t),
        mfu=scalar_or_array(compute / t),
        fraction_of_bound=scalar_or_array(bound / t),
        limited_by=str(limited) if limited.ndim == 0 else limited,
    )


def implied_mbu(model, accelerator=None, measured_time=None, **kwargs):
    """MBU a measured decode step implies: (weight + KV bytes) / (t x N x peak bandwidth).

    Keyword arguments as in :func:`implied_efficiency`.

    >>> round(implied_mbu("Llama-2-7B", "A100-SXM4-80GB", 0.009, context_len=64, weight_dtype="fp16",
    ...                   kv_dtype="fp16"), 3)   # LMDeploy, batch 1: 9 ms per token
    0.722
    """
    args = (model,) if isinstance(model, Deployment) else (model, accelerator)
    return implied_efficiency(*args, measured_time if measured_time is not None else accelerator, **kwargs).mbu


def implied_mfu(model, accelerator=None, measured_time=None, **kwargs):
    """MFU a measured step implies: FLOPs / (t x N x peak FLOP/s). Keyword arguments as in
    :func:`implied_efficiency` (``phase="prefill"`` with ``prompt_len`` for a prefill).

    >>> round(implied_mfu("Llama-2-7B", "A100-SXM4-80GB", 0.133, phase="prefill", prompt_len=2048,
    ...                   weight_dtype="fp16", compute_dtype="fp16"), 3)   # TensorRT-LLM TTFT
    0.666
    """
    args = (model,) if isinstance(model, Deployment) else (model, accelerator)
    return implied_efficiency(*args, measured_time if measured_time is not None else accelerator, **kwargs).mfu
