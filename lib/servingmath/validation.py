"""Validation: the model against anyone's published measurements, each predicted the way it was measured.

How far can the book's arithmetic be trusted? This module reads a table of
published measurements (``data/published-measurements.csv`` and any other CSV
in the same schema: one measured number a row, with its source and
configuration) and turns each row into something the model can predict, or
says why it cannot (:func:`load_published_measurements`).

Reading a row (chapter "Validation")
------------------------------------
* **Sources** are identified by their ``source_title``; there is no fixed list.
* **Hardware** resolves through the accelerator catalog's aliases
  (``lib/servingmath/data/accelerators.csv``), after dropping what a benchmark
  adds around a part's name (a GPU count such as ``8x``, a parenthesis, a
  vendor prefix); a memory size written anywhere in the text picks the variant
  (``"A100 (40GB ...)"`` is the 40 GB part). Where the form factor is not
  stated the catalog's default part is taken and the row says why
  (:data:`FORM_FACTOR_NOTES`).
* **Models** resolve through the model catalog (organisation prefixes and
  suffixes such as ``-Instruct`` or ``-FP8`` dropped), a table of models with
  identical shapes (:data:`SAME_SHAPES`), or a folder of ``config.json`` files
  (``config_dir=``; default the CSV's sibling folder ``model-configs``).
* **Data types** left unstated are resolved by a stated policy
  (:data:`DTYPE_POLICIES`) recorded on the row; ``dtype_policy="reject"``
  refuses such rows instead.
* **Parallelism** ``tp`` may read ``4``, ``TP4``, ``4x2`` or ``TP4xDP2``
  (tensor x data parallel), name pipeline stages (``TP1,PP4``, ``TP2xPP2``)
  or expert parallelism (``TP8,EP8``, ``DP8xEP8``, ``EP8``; :func:`parallel_layout`).
  Pipeline stages are modelled for offline runs of fixed lengths (the memory
  wall, in P micro-batches); on other rows they are refused with that reason.
  Expert parallelism runs as the library's layout: experts dealt out EP ways,
  attention in EP / TP data-parallel groups, each with its own scheduler.
* **Metrics** are the schema's (:data:`METRICS`); other spellings of them
  (``ttft_s``, ``mean_ttft_ms``, ``output_throughput``...) are read, converted
  and recorded on the row.
* Every refused row is kept with its reason, and :meth:`PublishedData.reasons`
  counts the reasons.

Each row predicted the way it was measured
------------------------------------------
:attr:`Measurement.path` says which part of the library predicts a row:

* ``"step model"``: a static batch (``request_rate`` = ``static batch`` or
  ``single request``): one prefill of B prompts (TTFT), one decode step at the
  run's median context (ITL, TPOT), or the whole run (E2E, throughput);
* ``"memory wall"``: an offline run whose batch the runtime chose (``max``,
  ``vLLM-chosen``...) with fixed lengths: the static run at the largest batch
  the engine holds, min(its ``max_num_seqs``, the KV cache / tokens per
  sequence); with P pipeline stages, P micro-batches of that run, each stage
  paying the step overhead for every micro-batch (:func:`_steps`);
* ``"simulator"``: a closed-loop concurrency sweep, a Poisson request rate or
  an offline run over a dataset's lengths, run through
  :mod:`servingmath.simulate` with the engine's scheduler (chunked-prefill
  token budget, max sequences, KV capacity: :func:`engine_scheduler`, each
  default labelled with the engine, version and source) and the row's lengths
  (fixed, uniform, or a named dataset of :mod:`servingmath.workloads`).
  Simulated runs are small (a few hundred requests) and cached per configuration.

Calibration and its honest error
--------------------------------
:func:`calibrate` fits MBU, MFU and a tensor-parallel latency per accelerator
family (the catalog's ``family`` column) on the step-model rows.
:func:`leave_one_source_out` holds out each source in turn and predicts it
from the others, beside the fixed guess of the book's realistic setting
(:data:`BASELINE`, :mod:`servingmath.settings`); a family without training
rows falls back to that setting, explicitly (:func:`calibration_table`).

Examples
--------
>>> data = load_published_measurements()
>>> len(data.measurements) + len(data.unexpressible)
138
>>> row = data.by_row(48)      # LMDeploy, Llama-2-7B fp16, batch 1, one A100-80GB
>>> row.metric, round(row.value * 1e3, 1), row.scenario, row.path
('itl_ms', 9.0, 'decode_step', 'step model')
>>> round(physical_bound(row) * 1e3, 2)          # ms: 13.0 GB of weights / 2.039 TB/s
6.5
>>> bound_holds(row), round(achieved_fraction(row), 3)
(True, 0.722)
"""

from __future__ import annotations

import csv
import functools
import json
import math
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path

import numpy as np

from ._validation import (check_bool, check_choice, check_instance, check_fraction, check_integer, check_nonnegative, check_seeds,
                          check_positive, scalar_or_array)
from .datatypes import check_dtype
from .decode import decode_step_parts, decode_step_time
from .deployment import Deployment, deployment_function
from .hardware import Accelerator, accelerator_catalog, get_accelerator
from .memory import fits, kv_tokens_held, max_kv_tokens
from .models import ModelConfig, get_model, list_models, load_model_config, parameter_count
from .prefill import prefill_step_parts, prefill_time
from .sharding import check_expert_parallel, nccl_allreduce_time
from .settings import REALISTIC
from .units import GB, GiB

__all__ = [
    "Measurement",
    "Unexpressible",
    "PublishedData",
    "Efficiency",
    "ImpliedEfficiency",
    "SimulationSpec",
    "LosoResult",
    "HARDWARE_MAP",
    "MODEL_MAP",
    "FORM_FACTOR_NOTES",
    "SAME_SHAPES",
    "TENSOR_PEAK_FALLBACKS",
    "DTYPE_POLICIES",
    "METRICS",
    "METRIC_GROUPS",
    "SOURCES",
    "PARAMETERS",
    "WEIGHTINGS",
    "BASELINE",
    "PHYSICAL",
    "default_data_path",
    "open_data_path",
    "load_published_measurements",
    "resolve_accelerator",
    "resolve_model",
    "parallel_layout",
    "parse_parallelism",
    "accelerator_family",
    "catalog_families",
    "engine_scheduler",
    "source_month",
    "parse_dtype",
    "engine_memory_fraction",
    "expert_dtypes",
    "with_tensor_peak",
    "compute_dtype_for",
    "static_batch_time",
    "predict",
    "row_weights",
    "simulate_measurement",
    "simulation_result",
    "physical_bound",
    "bound_holds",
    "achieved_fraction",
    "split_measurements",
    "calibrate",
    "family_efficiency",
    "POOLED",
    "CLOUD_INSTANCES",
    "book_calibration",
    "calibration_table",
    "percentage_errors",
    "error_summary",
    "leave_one_source_out",
    "realistic_provenance",
    "littles_law_concurrency",
    "fit_knee",
    "concurrency_sweeps",
    "implied_efficiency",
    "implied_mbu",
    "implied_mfu",
]

_ROOT = Path(__file__).resolve().parents[2]

#: Short display names of the book's own five sources (the start of their ``source_title``);
#: any other title is shown by its text before the first parenthesis, colon or dash.
SOURCES = {
    "Performance of TensorRT-LLM": "TensorRT-LLM doc",
    "LMDeploy": "LMDeploy",
    "LLM Inference Performance Engineering": "Databricks",
    "vLLM Performance Benchmark": "vLLM CI",
    "Transformer Inference Arithmetic": "kipply/FasterTransformer",
}


def default_data_path() -> Path:
    """The book's ``data/published-measurements.csv`` (the repository's data folder).

    Derived in the chapter "Decode: TPOT(B), throughput and the knee" (notebooks/04_decode.ipynb).

    >>> default_data_path().name
    'published-measurements.csv'
    """
    return _ROOT / "data" / "published-measurements.csv"


def open_data_path() -> Path:
    """``data/open-measurements.csv``: rows transcribed from other engines' public benchmark pages
    (TensorRT-LLM 1.0, SGLang 0.3 vs vLLM 0.6, NIM 1.8, JetStream on TPU v5e, vLLM on MI300X,
    SGLang on H200), each with its source and date (``data/README.md``).

    Derived in the chapter "Validation: how good is the model?" (notebooks/14_validation.ipynb).

    >>> open_data_path().name
    'open-measurements.csv'
    """
    return _ROOT / "data" / "open-measurements.csv"


def _short_source(title: str) -> str:
    for prefix, key in SOURCES.items():
        if title.startswith(prefix):
            return key
    short = re.split(r"\s[(\[:]|:\s|\s[-\u2013\u2014]\s|,\s", title, maxsplit=1)[0].strip()
    return short[:48] or title[:48]


# ------------------------------------------------------------------------------- names

#: Why the catalog's default part is taken when a row leaves the form factor open.
FORM_FACTOR_NOTES = {
    "H100-SXM5-80GB": "form factor not stated; SXM: an 8-GPU NVLink node is SXM, and the PCIe part "
                      "(2.0 TB/s, 756 TFLOP/s) would give a higher time bound",
    "H200-SXM-141GB": "form factor not stated; SXM (H200 NVL has the same 4.8 TB/s but a lower FLOP/s "
                      "peak, so SXM gives the lower, safer time bound)",
    "A100-SXM4-80GB": "form factor not stated; SXM4 (2.039 TB/s) rather than PCIe (1.935 TB/s, same "
                      "312 TFLOP/s): the higher bandwidth gives the bound that holds for either",
    "A100-SXM4-40GB": "form factor not stated; SXM4 40 GB (1.555 TB/s)",
    "B200-SXM-180GB": "form factor not stated; the HGX/DGX B200 SXM part",
    "B300-SXM-288GB": "form factor not stated; the HGX/DGX B300 SXM part",
    "H800-SXM5-80GB": "form factor not stated; SXM (the H800 PCIe card has the H100 PCIe's lower peaks)",
    "V100-SXM2-32GB": "form factor not stated; SXM2 (the V100 PCIe card runs lower clocks: 112 tensor "
                      "TFLOP/s against 125, the same 900 GB/s)",
    "A800-SXM4-80GB": "form factor not stated; SXM4 80 GB (A100 SXM4's peaks and 2.039 TB/s, NVLink cut to "
                      "400 GB/s); the A800 PCIe cards are other parts",
    "MI250X-GCD": "counted per GCD, as ROCm and a tensor-parallel degree count GPUs: one MI250X module is two "
                  "GCDs (64 GB, 1.6 TB/s, 191.5 TFLOP/s each), so a count of modules needs doubling",
}

#: The book's own CSV spellings and the part each denotes, with the assumption; the general
#: resolver (:func:`resolve_accelerator`) reproduces every entry (tested): it is documentation,
#: not a lookup table the loader needs.
HARDWARE_MAP = {
    "H100-SXM-80GB": ("H100-SXM5-80GB", "stated: H100 SXM, 80 GB"),
    "H100 (table says '8xH100' node)": ("H100-SXM5-80GB", FORM_FACTOR_NOTES["H100-SXM5-80GB"]),
    "H200": ("H200-SXM-141GB", FORM_FACTOR_NOTES["H200-SXM-141GB"]),
    "A100-SXM-80GB": ("A100-SXM4-80GB", "stated: A100 SXM, 80 GB"),
    "A100-SXM4-80GB": ("A100-SXM4-80GB", "stated"),
    "A100-80GB (form factor not stated)": ("A100-SXM4-80GB", FORM_FACTOR_NOTES["A100-SXM4-80GB"]),
    "A100-SXM-40GB": ("A100-SXM4-40GB", "stated: A100 SXM, 40 GB"),
    "A100 (40GB per rest of blog)": (
        "A100-SXM4-40GB", "not stated in the table; 40 GB as in the blog's other tables (an 80 GB "
        "part, 2.039 TB/s, would raise the memory-bound throughput bounds by 31 %)"),
    "A100-40GB": ("A100-SXM4-40GB", "A100 40 GB; SXM as in llm-analysis' reproduction (a100-sxm-40gb)"),
    "L40S": ("L40S", "stated"),
    "A10": ("A10", "stated: A10, not A10G"),
}

_FORM_WORDS = re.compile(r"sxm|pcie|nvl|oam|hgx|dgx|nvlink|gh200|gb200|gcd", re.IGNORECASE)


@functools.cache
def _catalog_rows() -> dict:
    """The accelerator catalog's CSV rows (for the ``family`` column, which hardware.py does not carry)."""
    path = resources.files("servingmath") / "data" / "accelerators.csv"
    with path.open(newline="", encoding="utf-8") as handle:
        return {row["name"]: row for row in csv.DictReader(handle)}


@functools.cache
def _catalog_lookup() -> dict:
    """Catalog names and aliases (as written and case-folded) -> catalog name."""
    table = {}
    for name, row in _catalog_rows().items():
        for alias in [name] + [a for a in (row.get("aliases") or "").split("|") if a]:
            table.setdefault(alias, name)
            table.setdefault(alias.casefold(), name)
    return table


def _hardware_candidates(text: str):
    """Spellings to try for a hardware string, most literal first."""
    seen = []

    def add(s):
        s = " ".join(s.replace("_", " ").split()).strip(" ,;-")
        if s and s not in seen:
            seen.append(s)

    add(text)
    base = re.sub(r"\([^)]*\)|\[[^\]]*\]", " ", text)
    base = re.sub(r"^\s*\d+\s*[x\u00d7]\s*", "", base)                 # "8x H100", "8 x H100"
    base = re.sub(r"\s*[x\u00d7]\s*\d+\s*$", "", base)                 # "H100 x8"
    base = re.sub(r"\b\d+\s*(gpus?|chips?|cards?)\b", "", base, flags=re.IGNORECASE)
    add(base)
    for prefix in ("NVIDIA ", "AMD ", "Google ", "Instinct "):
        if base.strip().startswith(prefix):
            add(base.strip()[len(prefix):])
    add(base.replace(" ", "-"))
    bare = re.sub(r"[\s-]*\d+\s*G(?:B|iB)?\b", "", base, flags=re.IGNORECASE)
    add(bare)
    add(bare.strip().replace(" ", "-"))                              # "H100 80GB SXM5" -> "H100-SXM5"
    add(re.sub(r"-\d+$", "", bare))                                 # a TPU slice: "v5e-8" is 8 chips
    add(re.sub(r"[\s-]*\b(HBM\d?e?|GDDR\d\w?)\b", "", bare, flags=re.IGNORECASE))   # "H100-80GB-HBM3"
    # a cloud instance type: AWS "p5.48xlarge" -> "p5", GCP "a3-highgpu-8g" -> "a3-highgpu" (catalog aliases)
    add(re.sub(r"\.\d*x?large$|\.metal$", "", base.strip(), flags=re.IGNORECASE))
    add(re.sub(r"-\d+g$", "", base.strip(), flags=re.IGNORECASE))
    return seen


#: Cloud instance types benchmarks name instead of the GPU, and the part each provider lists for it
#: (AWS EC2 accelerated-computing instance types, Google Cloud GPU machine types, Azure ND-series
#: sizes; read 2026-12-01). Keys are the names with the size stripped (``p5.48xlarge`` -> ``p5``,
#: ``a3-highgpu-8g`` -> ``a3-highgpu``), compared case-blind.
CLOUD_INSTANCES = {
    "p5": ("H100-SXM5-80GB", "AWS"), "p5e": ("H200-SXM-141GB", "AWS"), "p5en": ("H200-SXM-141GB", "AWS"),
    "p4d": ("A100-SXM4-40GB", "AWS"), "p4de": ("A100-SXM4-80GB", "AWS"), "p6-b200": ("B200-SXM-180GB", "AWS"),
    "g5": ("A10G", "AWS"), "g6": ("L4", "AWS"), "g6e": ("L40S", "AWS"),
    "a2-highgpu": ("A100-SXM4-40GB", "Google Cloud"), "a2-ultragpu": ("A100-SXM4-80GB", "Google Cloud"),
    "a3-highgpu": ("H100-SXM5-80GB", "Google Cloud"), "a3-megagpu": ("H100-SXM5-80GB", "Google Cloud"),
    "a3-edgegpu": ("H100-SXM5-80GB", "Google Cloud"), "a3-ultragpu": ("H200-SXM-141GB", "Google Cloud"),
    "a4-highgpu": ("B200-SXM-180GB", "Google Cloud"), "g2-standard": ("L4", "Google Cloud"),
    "standard nd96isr h100 v5": ("H100-SXM5-80GB", "Azure"), "nd h100 v5": ("H100-SXM5-80GB", "Azure"),
    "standard nd96isr h200 v5": ("H200-SXM-141GB", "Azure"), "nd h200 v5": ("H200-SXM-141GB", "Azure"),
    "standard nd96amsr a100 v4": ("A100-SXM4-80GB", "Azure"),
    "standard nd96isr mi300x v5": ("MI300X", "Azure"), "nd mi300x v5": ("MI300X", "Azure"),
}


def resolve_accelerator(text, *, accelerators=None):
    """The catalog part a benchmark's hardware string names, and the assumption that took.

    Derived in the chapter "Validation: how good is the model?" (notebooks/14_validation.ipynb).

    Parameters
    ----------
    text : str
        As a benchmark writes it (``"H100-SXM-80GB"``, ``"8xH100"``, ``"AMD Instinct MI300X"``,
        ``"TPU v5e-8"``, ``"A100 (40GB per rest of blog)"``).
    accelerators : dict, optional
        Extra name -> :class:`~servingmath.hardware.Accelerator` (or catalog name) entries,
        tried first: for parts the catalog lacks, or a spelling of your own.

    Returns
    -------
    (Accelerator, str)
        The part and a note: ``"stated"``, or the assumption (form factor, memory size).

    Raises
    ------
    KeyError
        When no spelling resolves, naming the text and the closest catalog names.

    Examples
    --------
    >>> acc, note = resolve_accelerator("8xH100")
    >>> acc.name, note.split(";")[0]
    ('H100-SXM5-80GB', 'form factor not stated')
    >>> resolve_accelerator("A100 (40GB per rest of blog)")[0].name
    'A100-SXM4-40GB'
    """
    if not isinstance(text, str) or not text.strip():
        raise KeyError(f"text (the hardware) must be a non-empty string, got {text!r}")
    extra = dict(accelerators or {})
    if text in extra:
        return get_accelerator(extra[text]), "given in accelerators="
    found, via = None, None
    lookup = _catalog_lookup()
    for candidate in _hardware_candidates(text):
        if candidate in extra:
            return get_accelerator(extra[candidate]), f"'{candidate}' given in accelerators="
        name = lookup.get(candidate) or lookup.get(candidate.casefold())
        if name is not None:
            found, via = get_accelerator(name), candidate
            break
        instance = CLOUD_INSTANCES.get(candidate.casefold())
        if instance is not None:
            return get_accelerator(instance[0]), (f"cloud instance {text!r}: {instance[1]} lists it with "
                                                  f"{instance[0]} (CLOUD_INSTANCES)")
    if found is None:
        catalog = list(accelerator_catalog())
        raise KeyError(f"hardware {text!r} is not in the accelerator catalog (tried "
                       f"{', '.join(repr(c) for c in _hardware_candidates(text))}; catalog: "
                       f"{', '.join(catalog)}); pass accelerators={{{text!r}: Accelerator(...)}}")
    notes = []
    sizes = [int(s) for s in re.findall(r"(\d+)\s*G(?:B|iB)?\b", text, flags=re.IGNORECASE)]
    if sizes and all(abs(found.memory_bytes / GB - s) > 1 for s in sizes):
        for s in sizes:
            base = _hardware_candidates(text)[-1]
            for candidate in (f"{base}-{s}GB", f"{base} {s}GB", f"{base}-SXM4-{s}GB"):
                name = lookup.get(candidate) or lookup.get(candidate.casefold())
                if name is None:
                    continue
                other = get_accelerator(name)
                if abs(other.memory_bytes / GB - s) <= 1:
                    found = other
                    notes.append(f"{s} GB as the text says")
                    break
            if notes:
                break
    if found.name == text:
        return found, "stated"
    stated_form = _FORM_WORDS.search(text) is not None or found.name in ("L40S", "A10", "A10G", "MI300X",
                                                                          "MI325X", "TPU-v5e")
    if not stated_form and found.name in FORM_FACTOR_NOTES:
        notes.append(FORM_FACTOR_NOTES[found.name])
    if not notes:
        notes.append(f"stated ('{via}' is the catalog's spelling of {found.name})")
    return found, "; ".join(notes)


#: Models with identical shapes (layers, widths, heads, vocabulary): the arithmetic cannot tell
#: them apart, so a row naming the first is modelled with the second, and says so.
SAME_SHAPES = {
    "llama-3-8b": ("Llama-3.1-8B", "Llama-3-8B has Llama-3.1-8B's layers, widths, heads and vocabulary; "
                                   "only its context (8k) and RoPE scaling differ, which the arithmetic "
                                   "does not use"),
    "llama-3-70b": ("Llama-3.1-70B", "Llama-3.1-70B's shapes: Llama-3-70B has the same layers, widths, heads "
                                     "and vocabulary; only its context (8k) and RoPE scaling differ, which "
                                     "the arithmetic does not use"),
    "llama-3.3-70b": ("Llama-3.1-70B", "Llama-3.3-70B is a retrained Llama-3.1-70B with the same "
                                       "architecture (config.json identical in every shape)"),
    # reasoning models trained from a base the catalog has: the same architecture, other weights
    "deepseek-r1": ("DeepSeek-V3", "DeepSeek-R1 is trained from DeepSeek-V3-Base: V3's architecture in every "
                                   "shape (MLA, 256 routed experts, 8 active)"),
    "deepseek-r1-0528": ("DeepSeek-V3", "DeepSeek-R1-0528 is an update of DeepSeek-R1: V3's architecture"),
    "deepseek-v3-0324": ("DeepSeek-V3", "DeepSeek-V3-0324 is a later checkpoint of DeepSeek-V3: the same "
                                        "architecture"),
    "deepseek-r1-distill-llama-70b": ("Llama-3.1-70B", "DeepSeek-R1-Distill-Llama-70B is a fine-tune of "
                                                       "Llama-3.3-70B-Instruct: Llama-3.1-70B's shapes"),
    "deepseek-r1-distill-llama-8b": ("Llama-3.1-8B", "DeepSeek-R1-Distill-Llama-8B is a fine-tune of "
                                                     "Llama-3.1-8B: its shapes"),
    "deepseek-r1-distill-qwen-32b": ("Qwen2.5-32B", "DeepSeek-R1-Distill-Qwen-32B is a fine-tune of "
                                                    "Qwen2.5-32B: its shapes"),
    "deepseek-r1-distill-qwen-7b": ("Qwen2.5-7B", "DeepSeek-R1-Distill-Qwen-7B is a fine-tune of "
                                                  "Qwen2.5-Math-7B, which has Qwen2.5-7B's shapes (only its "
                                                  "RoPE base differs, which the arithmetic does not use)"),
    "qwq-32b": ("Qwen2.5-32B", "QwQ-32B is trained from Qwen2.5-32B: its shapes"),
    "qwen3-235b-a22b-instruct-2507": ("Qwen3-235B-A22B", "Qwen3-235B-A22B-Instruct-2507 is the July 2025 update of "
                                                         "Qwen3-235B-A22B (non-thinking): the same layers, heads "
                                                         "and experts (its model card); only its context differs"),
    "qwen3-235b-a22b-thinking-2507": ("Qwen3-235B-A22B", "Qwen3-235B-A22B-Thinking-2507 is the July 2025 thinking "
                                                         "update of Qwen3-235B-A22B: the same architecture"),
    "llama-3.1-nemotron-70b": ("Llama-3.1-70B", "Llama-3.1-Nemotron-70B-Instruct is NVIDIA's fine-tune of "
                                                "Llama-3.1-70B-Instruct: its shapes"),
    # Mistral checkpoints named by date, which the suffix rules do not reduce to the catalog name
    "mistral-nemo-instruct-2407": ("Mistral-Nemo-12B", "Mistral-Nemo-Instruct-2407 is Mistral-Nemo-Base-2407 "
                                                       "instruction-tuned: the same config.json shapes (its "
                                                       "max_position_embeddings, 1024000, is not used)"),
    "mistral-nemo-base-2407": ("Mistral-Nemo-12B", "Mistral-Nemo-Base-2407 is the catalog's Mistral-Nemo-12B"),
    "mistral-small-24b-instruct-2501": ("Mistral-Small-24B", "Mistral-Small-24B-Instruct-2501 is the catalog's "
                                                             "Mistral-Small-24B"),
    "mistral-small-24b-base-2501": ("Mistral-Small-24B", "Mistral-Small-24B-Base-2501: the same config.json "
                                                         "shapes as the Instruct checkpoint"),
    "mistral-small-3.1-24b-instruct-2503": ("Mistral-Small-24B", "Mistral-Small-3.1's text decoder has "
                                                                 "Mistral-Small-24B's shapes (only its context, "
                                                                 "128k, and RoPE base differ); its vision encoder "
                                                                 "is not modelled"),
    "mistral-large-instruct-2407": ("Mistral-Large-2", "Mistral-Large-Instruct-2407 is the catalog's "
                                                       "Mistral-Large-2"),
    "mistral-large-instruct-2411": ("Mistral-Large-2", "Mistral-Large-Instruct-2411 is a later checkpoint of "
                                                       "Mistral Large 2: config.json identical in every shape"),
    # Qwen2.5-Coder: the model cards state the same parameters, layers, heads and tying as Qwen2.5
    "qwen2.5-coder-14b": ("Qwen2.5-14B", "Qwen2.5-Coder-14B is trained from Qwen2.5-14B: its card states the same "
                                         "14.7B parameters, 48 layers and 40 / 8 heads"),
    "qwen2.5-coder-3b": ("Qwen2.5-3B", "Qwen2.5-Coder-3B is trained from Qwen2.5-3B: its card states the same "
                                       "3.09B parameters, 36 layers, 16 / 2 heads and tied embeddings"),
    "qwen2.5-coder-1.5b": ("Qwen2.5-1.5B", "Qwen2.5-Coder-1.5B is trained from Qwen2.5-1.5B: its card states the "
                                           "same 1.54B parameters, 28 layers, 12 / 2 heads and tied embeddings"),
    "qwen2.5-coder-0.5b": ("Qwen2.5-0.5B", "Qwen2.5-Coder-0.5B is trained from Qwen2.5-0.5B: its card states the "
                                           "same 0.49B parameters, 24 layers, 14 / 2 heads and tied embeddings"),
    "qwen3-4b-instruct-2507": ("Qwen3-4B", "Qwen3-4B-Instruct-2507 has Qwen3-4B's shapes (its card states the same "
                                           "4.0B parameters, 36 layers, 32 / 8 heads); only its context (256k) "
                                           "and RoPE base differ"),
    "qwen3-4b-thinking-2507": ("Qwen3-4B", "Qwen3-4B-Thinking-2507 has Qwen3-4B's shapes (its card states the same "
                                           "4.0B parameters, 36 layers, 32 / 8 heads); only its context differs"),
}

#: The book's own CSV model strings and where they resolve (documentation; the resolver reproduces it).
MODEL_MAP = {
    "GPT-J-6B": ("GPT-J-6B", "catalog"),
    "Llama-2-7B": ("Llama-2-7B", "catalog ('LLaMA 7B' in the TensorRT-LLM doc = Llama-2-7b per its methodology)"),
    "Llama-2-13B": ("Llama-2-13B", "catalog"),
    "Llama-2-70B": ("Llama-2-70B", "catalog"),
    "Llama-3.1-8B": ("Llama-3.1-8B", "catalog"),
    "Llama-3-70B": ("Llama-3.1-70B", SAME_SHAPES["llama-3-70b"][1]),
    "InternLM-20B": ("data/model-configs/internlm-20b.json", "config.json added for this chapter"),
    "MPT-7B": ("data/model-configs/mpt-7b.json", "config.json added for this chapter"),
    "FT-13B-test (d=5120,L=40,H=40)": ("data/model-configs/ft-13b-test.json",
                                       "llm-analysis' test-13b config, added for this chapter"),
}

# suffixes of checkpoint names that do not change the shapes; the dtype ones imply the weights' type
_MODEL_SUFFIXES = {"instruct": None, "chat": None, "hf": None, "it": None, "base": None, "fp8": "fp8",
                   "fp4": "nvfp4", "nvfp4": "nvfp4", "awq": "int4", "gptq": "int4", "int4": "int4",
                   "int8": "int8", "w8a8": "int8", "w8a16": "int8", "w4a16": "int4", "kv": None, "dynamic": None,
                   "quantized": None, "v0.1": None, "v0.2": None, "v0.3": None}


def _model_key(name: str) -> tuple[str, str | None]:
    """A name reduced to its architecture (lower case, organisation and checkpoint suffixes dropped),
    and the weight dtype a suffix implies."""
    s = re.sub(r"\([^)]*\)", " ", name).strip().lower()
    s = s.split("/")[-1]
    s = re.sub(r"[\s_]+", "-", s)
    if s.startswith("meta-llama-"):
        s = s[len("meta-"):]
    s = re.sub(r"-quantized\.(w\d+a\d+)$", r"-\1", s)     # RedHatAI / neuralmagic: -quantized.w8a8
    implied = None
    parts = s.split("-")
    while len(parts) > 1 and parts[-1] in _MODEL_SUFFIXES:
        implied = implied or _MODEL_SUFFIXES[parts[-1]]
        parts.pop()
    s = "-".join(parts)
    s = re.sub(r"(\d)b-?instruct$", r"\1b", s)
    return s, implied


def _flat(key: str) -> str:
    return re.sub(r"[^a-z0-9]", "", key)


def _config_files(folders) -> dict:
    """flat key -> path of every config.json in the folders (``name.json`` or ``name/config.json``)."""
    table = {}
    for folder in folders:
        folder = Path(folder)
        if not folder.is_dir():
            continue
        for path in sorted(folder.glob("*.json")) + sorted(folder.glob("*/config.json")):
            stem = path.parent.name if path.name == "config.json" else path.stem
            keys = {_flat(_model_key(stem)[0])}
            try:
                meta = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, json.JSONDecodeError):
                continue
            for k in ((meta.get("servingmath") or {}).get("name"), meta.get("_name_or_path")):
                if isinstance(k, str) and k:
                    keys.add(_flat(_model_key(k)[0]))
            for k in keys:
                table.setdefault(k, path)
    return table


def resolve_model(text, *, config_dir=None, models=None):
    """The model a benchmark's model string names, the note on how, and the weight dtype its name implies.

    Derived in the chapter "Validation: how good is the model?" (notebooks/14_validation.ipynb).

    Tried in order: ``models`` (name -> ModelConfig or catalog name), the catalog (exact, then
    with organisation and checkpoint suffixes such as ``-Instruct``, ``-FP8``, ``-hf`` dropped),
    :data:`SAME_SHAPES`, then the ``config.json`` files in ``config_dir`` (one folder or several),
    matched by file name, ``servingmath.name`` or ``_name_or_path``.

    Returns
    -------
    (ModelConfig, str, str or None)

    Raises
    ------
    KeyError
        Naming the text, the reduced name tried and the folders searched.

    Examples
    --------
    >>> m, note, dtype = resolve_model("meta-llama/Llama-3.1-8B-Instruct-FP8")
    >>> m.name, dtype
    ('Llama-3.1-8B', 'fp8')
    >>> resolve_model("Llama-3.3-70B-Instruct")[0].name
    'Llama-3.1-70B'
    """
    if not isinstance(text, str) or not text.strip():
        raise KeyError(f"model must be a non-empty string, got {text!r}")
    extra = dict(models or {})
    if text in extra:
        return get_model(extra[text]), "given in models=", None
    key, implied = _model_key(text)
    names = list_models()
    if text in names:
        return get_model(text), "catalog", implied
    version = re.search(r"-v(0\.\d)\b", text.lower())
    if version:   # a release the catalog holds apart (Mistral-7B v0.2 and v0.3 have no sliding window)
        for name in names:
            if name.lower().endswith(f"-v{version.group(1)}") and _flat(_model_key(name)[0]) == _flat(key):
                return get_model(name), f"catalog ('{text}' is {name})", implied
    catalog = {_flat(_model_key(n)[0]): n for n in names if not re.search(r"-v0\.\d$", n)}
    if _flat(key) in catalog:
        name = catalog[_flat(key)]
        return get_model(name), f"catalog ('{text}' is {name})", implied
    for alias, (target, why) in SAME_SHAPES.items():
        if _flat(key) == _flat(alias):
            return get_model(target), why, implied
    folders = [config_dir] if isinstance(config_dir, (str, Path)) else list(config_dir or [])
    files = _config_files(folders)
    if _flat(key) in files:
        path = files[_flat(key)]
        model = load_model_config(path)
        return model, f"config.json: {path.name}", implied
    raise KeyError(f"model {text!r} (read as {key!r}) is not in the model catalog ({', '.join(list_models())}), "
                   f"not a model with the same shapes ({', '.join(SAME_SHAPES)}), and has no config.json in "
                   f"{', '.join(str(Path(f).name) for f in folders) or 'no config_dir'}; "
                   "pass config_dir= (a folder of config.json files) or models=")


def catalog_families() -> dict:
    """Catalog accelerator name -> calibration family, from the catalog's ``family`` column.

    Derived in the chapter "Validation: how good is the model?" (notebooks/14_validation.ipynb).

    >>> catalog_families()["H200-SXM-141GB"], catalog_families()["MI300X"]
    ('Hopper', 'MI300')
    """
    return {name: (row.get("family") or name) for name, row in _catalog_rows().items()}


def accelerator_family(accelerator) -> str:
    """The family whose calibrated efficiencies an accelerator shares (the catalog's ``family`` column).

    Derived in the chapter "Validation: how good is the model?" (notebooks/14_validation.ipynb).

    An accelerator outside the catalog is its own family.

    >>> accelerator_family("H200")
    'Hopper'
    """
    acc = get_accelerator(accelerator)
    return catalog_families().get(acc.name, acc.name)


#: Parts whose tensor peak the catalog leaves blank because the vendor publishes none, and the
#: stated fallback used when a row needs it (the row records the assumption).
TENSOR_PEAK_FALLBACKS = {
    "A10G": ("A10", "NVIDIA publishes no A10G datasheet; its tensor peak is taken as the A10's published "
                    "125 TFLOP/s dense fp16/bf16 (same GA102 chip; unofficial figures range 62.5-140 "
                    "TFLOP/s, so compute-bound predictions on an A10G carry -50 %/+12 % on the peak)"),
}


def with_tensor_peak(acc, dtype: str):
    """``acc`` with a tensor peak for ``dtype``: itself, or the stated fallback of
    :data:`TENSOR_PEAK_FALLBACKS` (and its note; None when nothing was needed).

    Derived in the chapter "Validation: how good is the model?" (notebooks/14_validation.ipynb).

    >>> acc, note = with_tensor_peak(get_accelerator("A10G"), "bf16")
    >>> acc.peak_flops("bf16") / 1e12, note.split(":")[0]
    (125.0, 'A10G bf16 peak')
    """
    acc = get_accelerator(acc)
    if not isinstance(dtype, str):
        raise TypeError(f"dtype must be a data type's name (str), got {dtype!r}")
    key = "bf16" if dtype == "fp16" else dtype
    if key in acc.dense_flops:
        return acc, None
    if acc.name in TENSOR_PEAK_FALLBACKS:
        source, why = TENSOR_PEAK_FALLBACKS[acc.name]
        donor = get_accelerator(source)
        if key in donor.dense_flops:
            peaks = dict(acc.dense_flops)
            peaks[key] = donor.dense_flops[key]
            return replace(acc, dense_flops=peaks), f"{acc.name} {dtype} peak: {why}"
    return acc, None



# ------------------------------------------------------------------------------- parsing a row

_DTYPE_SPELLINGS = {
    "fp16": "fp16", "float16": "fp16", "half": "fp16", "f16": "fp16",
    "bf16": "bf16", "bfloat16": "bf16",
    "fp32": "fp32", "float32": "fp32",
    "fp8": "fp8", "fp8_e4m3": "fp8", "e4m3": "fp8", "fp8-e4m3": "fp8", "w8a8-fp8": "fp8", "float8": "fp8",
    "int8": "int8", "w8a16": "int8", "w8a8": "int8", "w8a8-int8": "int8", "int8 (weight-only)": "int8",
    "int4": "int4", "awq": "int4", "gptq": "int4", "w4a16": "int4", "int4 (awq)": "int4",
    "fp4": "nvfp4", "nvfp4": "nvfp4", "mxfp4": "mxfp4",
}
# the words of the longer spellings: every one-word spelling above, and the words benchmarks add
_DTYPE_WORDS = {**{k: v for k, v in _DTYPE_SPELLINGS.items() if re.fullmatch(r"[a-z0-9]+", k)},
                "e5m2": "fp8", "fp8e4m3": "fp8", "fp8e5m2": "fp8", "w4a8": "int4", "4bit": "int4", "8bit": "int8",
                "smoothquant": "int8"}
_UNSTATED = {"", "auto", "n/a", "na", "not stated", "default", "unknown", "?", "-", "none"}

#: How a data type the row leaves unstated is chosen: ``"engine-default"`` (what the engine's
#: ``dtype=auto`` / ``kv_cache_dtype=auto`` load, recorded on the row) or ``"reject"``.
DTYPE_POLICIES = {
    "engine-default": (
        "weights: the dtype the checkpoint's name implies (-FP8, -AWQ, ...), else 16-bit (vLLM, SGLang and "
        "TensorRT-LLM load a 16-bit checkpoint in its own dtype; fp16 and bf16 have the same bytes and "
        "peak). KV cache: the weights' dtype when 16-bit; fp8 for fp8/fp4 TensorRT-LLM or NIM engines "
        "(ModelOpt checkpoints quantise the KV cache to FP8, kv_cache_quant_algo); otherwise bf16 (vLLM's and "
        "SGLang's kv_cache_dtype 'auto' is the model's activation dtype)"),
    "reject": "a row that leaves a data type unstated is refused",
}


def parse_dtype(text):
    """(dtype, stated?) from a CSV cell (``"bfloat16"``, ``"FP8"``, ``"AWQ"``...); blank or ``"auto"``
    is (None, False); an unknown spelling raises ValueError naming it.

    Derived in the chapter "Validation: how good is the model?" (notebooks/14_validation.ipynb).

    >>> parse_dtype("bfloat16"), parse_dtype("AWQ"), parse_dtype("auto")
    (('bf16', True), ('int4', True), (None, False))
    """
    if text is not None and not isinstance(text, str):
        raise TypeError(f"text (a data type cell) must be a str or None, got {text!r}")
    t = (text or "").strip().lower()
    if t in _UNSTATED:
        return None, False
    if t in _DTYPE_SPELLINGS:
        return _DTYPE_SPELLINGS[t], True
    # the longer spellings benchmarks write ("FP8 (E4M3)", "INT4-AWQ", "GPTQ-int4", "fp8_e5m2"): the one
    # family of types every word of it names, else refused as ambiguous
    families = {_DTYPE_WORDS[w] for w in re.split(r"[^a-z0-9]+", t) if w in _DTYPE_WORDS}
    if families == {"bf16", "fp16"}:
        families = {"bf16"}                      # the same bytes and the same peak
    if len(families) == 1:
        return families.pop(), True
    if len(families) > 1:
        raise ValueError(f"text: data type {text!r} names several types ({', '.join(sorted(families))}): give "
                         "one cell its type (dtype_weights for the weights, dtype_kv for the KV cache)")
    raise ValueError(f"text: data type {text!r} is not one the library knows ({', '.join(sorted(set(_DTYPE_SPELLINGS)))})")


def _tp_unstated(text) -> bool:
    """Whether a ``tp`` cell leaves the parallelism unstated (blank, "not stated", "n/a"...)."""
    t = ("" if text is None else str(text)).strip().lower().replace(" ", "")
    return t in _UNSTATED or t in ("notstated", "unstated")


def parallel_layout(tp, n_gpus="", *, expert_parallel=False):
    """(tensor_parallel, pipeline_parallel, data_parallel) from a row's ``tp`` and ``n_gpus`` cells.

    Derived in the chapter "Validation: how good is the model?" (notebooks/14_validation.ipynb).

    ``tp`` may read ``"4"``, ``"TP4"``, ``"4x2"`` (TP x DP), ``"TP4xDP2"``, ``"tp=4,dp=2"``, or name
    pipeline stages: ``"TP1,PP2"``, ``"TP2xPP4"``, ``"tp=2,pp=2,dp=2"`` (every degree labelled).
    ``n_gpus`` (optional) must then equal TP x PP x DP; a layout with more GPUs than it names
    reads the rest as data parallel. A ``tp`` left unstated (blank, ``"not stated"``, ``"n/a"``...)
    with ``n_gpus`` given reads as one replica over all of them (the loader records that).

    ``expert_parallel=True`` also reads an expert-parallel degree (``"TP8,EP8"``, ``"DP8xEP8"``,
    ``"tp=2,ep=8"``, ``"EP8"``) and returns (TP, PP, replicas, EP), EP = 1 without one:

    * EP >= TP (a multiple): one instance of EP GPUs, the experts dealt out EP ways and attention
      run in EP / TP data-parallel groups of TP GPUs (the library's layout,
      :class:`~servingmath.deployment.Deployment` ``expert_parallel``); a DP degree equal to
      EP / TP is that attention data parallelism (SGLang's ``--enable-dp-attention``), any other
      DP counts replicas. ``EP8`` alone is TP 8 with EP 8 (vLLM's ``--enable-expert-parallel``).
    * EP < TP (TensorRT-LLM's ``--tp 8 --ep 4``): experts split EP ways and each over TP / EP GPUs,
      so every GPU holds 1/TP of them as under plain TP; read as TP (EP 1).

    Raises
    ------
    ValueError
        Naming the text and what is allowed.

    Examples
    --------
    >>> parallel_layout("TP1,PP2", "2"), parallel_layout("TP2xPP2", "8"), parallel_layout("TP4xDP2")
    ((1, 2, 1), (2, 2, 2), (4, 1, 2))
    >>> [parallel_layout(t, "8", expert_parallel=True) for t in ("DP8xEP8", "TP8,EP8", "TP8,EP4", "TP4")]
    [(1, 1, 1, 8), (8, 1, 1, 8), (8, 1, 1, 1), (4, 1, 2, 1)]
    """
    gpus_cell = "" if n_gpus is None else str(n_gpus).strip()
    if gpus_cell.isdigit() and int(gpus_cell) < 1:
        raise ValueError(f"n_gpus {n_gpus!r} must be a GPU count >= 1 (or blank)")
    if "ep" in str(tp or "").lower():
        if not expert_parallel:
            raise ValueError(f"tp {tp!r} names expert parallelism (EP): read it with "
                             "parallel_layout(..., expert_parallel=True)")
        return _expert_layout(tp, n_gpus)
    if expert_parallel:
        return parallel_layout(tp, n_gpus) + (1,)
    for name, value in (("tp", tp), ("n_gpus", n_gpus)):
        if isinstance(value, bool) or not isinstance(value, (str, int)) and value is not None:
            raise TypeError(f"{name} must be a CSV cell (str or int), got {value!r}")
    tp_text = "" if tp is None else str(tp)
    n_gpus_text = "" if n_gpus is None else str(n_gpus)
    t = tp_text.strip().lower().replace(" ", "")
    gpus_text = (n_gpus_text or "").strip()
    gpus = int(gpus_text) if gpus_text.isdigit() else None
    degrees = None
    if _tp_unstated(t):
        t = ""
    if "pp" in t:
        found = _labelled_degrees(tp, t, "tp|pp|dp", "TP2xPP2, TP1,PP4 or tp=2,pp=2,dp=2")
        degrees = (found.get("tp", 1), found.get("pp", 1), found.get("dp"))
    else:
        m = (re.fullmatch(r"(?:tp)?=?(\d+)", t) or re.fullmatch(r"(?:tp)?=?(\d+)[x\u00d7,*](?:dp)?=?(\d+)", t)
             or re.fullmatch(r"tp=?(\d+),?dp=?(\d+)", t) or re.fullmatch(r"(\d+)tp[x,](\d+)dp", t))
        if t == "" and gpus is not None:
            return gpus, 1, 1
        if t == "":
            raise ValueError(f"tp {tp_text!r} is not stated and n_gpus is blank: state either (4, TP4, TP4xDP2; "
                             "or the GPU count)")
        if not m:
            raise ValueError(f"tp {tp!r} is not a tensor-parallel degree: write 4, TP4, 4x2 or TP4xDP2")
        degrees = (int(m.group(1)), 1, int(m.group(2)) if m.lastindex and m.lastindex >= 2 else None)
    tp, pp, dp = degrees
    if tp < 1 or pp < 1 or (dp is not None and dp < 1):
        raise ValueError(f"tp {tp_text!r}: degrees must be >= 1")
    if dp is None:
        dp = 1
        if gpus is not None:
            if gpus % (tp * pp):
                raise ValueError(f"n_gpus {gpus} is not a multiple of tp x pp = {tp * pp}")
            dp = gpus // (tp * pp)
    if gpus is not None and gpus != tp * pp * dp:
        raise ValueError(f"n_gpus {gpus} is not tp x pp x dp = {tp} x {pp} x {dp}")
    return tp, pp, dp


def _labelled_degrees(tp, t, labels, example) -> dict:
    """{label: degree} of a layout whose every degree is labelled (``TP2xPP2``, ``tp=2,ep=8``), each once."""
    parts = re.split(r"[,x\u00d7*;/+]", t)
    labelled = [re.fullmatch(rf"({labels})=?(\d+)|(\d+)({labels})", part) for part in parts]
    if not all(labelled) or len({(m.group(1) or m.group(4)) for m in labelled}) != len(labelled):
        raise ValueError(f"tp {tp!r} is not a parallel layout: write {example} (each degree once, labelled)")
    return {(m.group(1) or m.group(4)): int(m.group(2) or m.group(3)) for m in labelled}


def _expert_layout(tp, n_gpus):
    """(TP, PP, replicas, EP) of a ``tp`` cell that names an expert-parallel degree (:func:`parallel_layout`)."""
    t = str(tp).strip().lower().replace(" ", "")
    found = _labelled_degrees(tp, t, "tp|pp|dp|ep", "TP8,EP8, DP8xEP8 or tp=2,ep=8")
    if min(found.values()) < 1:
        raise ValueError(f"tp {tp!r}: degrees must be >= 1")
    ep, dp = found["ep"], found.get("dp")
    if found.get("pp", 1) > 1:
        raise ValueError(f"tp {tp!r}: pipeline stages with expert parallelism are not modelled")
    tp_ = found.get("tp", 1 if dp is not None else ep)
    if ep < tp_:
        if tp_ % ep:
            raise ValueError(f"tp {tp!r}: EP {ep} must divide TP {tp_} (experts split EP ways, each over TP / EP)")
        tp_, ep = tp_, 1                      # every GPU holds 1/TP of the experts either way
    elif ep % tp_:
        raise ValueError(f"tp {tp!r}: EP {ep} must be a multiple of TP {tp_} (attention in EP / TP groups)")
    size = max(tp_, ep)
    groups = size // tp_
    replicas = 1 if dp is None or (ep > 1 and dp == groups) else dp
    gpus_text = "" if n_gpus is None else str(n_gpus).strip()
    if gpus_text.isdigit():
        gpus = int(gpus_text)
        if dp is None and gpus % size == 0:
            replicas = gpus // size
        if gpus != size * replicas:
            raise ValueError(f"n_gpus {gpus} is not the layout's {size * replicas} GPUs ({tp!r}: "
                             f"{replicas} x {size})")
    return tp_, 1, replicas, ep


def parse_parallelism(tp, n_gpus=""):
    """(tensor_parallel, data_parallel) from a row's ``tp`` and ``n_gpus`` cells.

    Derived in the chapter "Validation: how good is the model?" (notebooks/14_validation.ipynb).

    :func:`parallel_layout` without pipeline stages: ``"4"``, ``"TP4"``, ``"4x2"``, ``"TP4xDP2"``,
    ``"tp=4,dp=2"`` (and ``PP1``); ``n_gpus`` (optional) must then equal TP x DP, and a bare TP
    with more GPUs reads the rest as data parallel. A layout with pipeline stages is refused.

    Raises
    ------
    ValueError
        Naming the text and what is allowed.

    Examples
    --------
    >>> parse_parallelism("TP4xDP2"), parse_parallelism("4x2", "8"), parse_parallelism("2", "8")
    ((4, 2), (4, 2), (2, 4))
    """
    tensor, pipeline, data = parallel_layout(tp, n_gpus)
    if pipeline > 1:
        raise ValueError(f"tp {tp!r}: {pipeline} pipeline stages; parse_parallelism reads tensor x data parallel "
                         "only (parallel_layout reads pipeline stages too)")
    return tensor, data


def _integer(text):
    text = (text or "").strip()
    return int(text) if text.isdigit() else None


def _number(text):
    try:
        value = float(str(text).strip().replace(",", ""))
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


_RUNTIME_BATCH = re.compile(r"^(max|runtime|auto|chosen|dynamic|continuous|.*-chosen|max batch \d+|"
                            r"chosen by .*|engine max|slots? \d+)$", re.IGNORECASE)


def _load(raw):
    """What kind of run a row is: ('static', B), ('closed', C), ('poisson', rate), ('offline', cap),
    or ('unknown', reason)."""
    rate = (raw.get("request_rate") or "").strip()
    batch = (raw.get("batch_size_or_concurrency") or "").strip()
    r = rate.lower()
    b = batch.lower()
    number = _integer(batch)
    concurrency = (re.fullmatch(r"(?:--)?(?:max[-_ ]?)?(?:concurrency|clients?|users?|c)\s*[:=]?\s*(\d+)", b)
                   or re.fullmatch(r"(\d+)\s*(?:concurrent(?:\s+(?:users|clients|requests))?|clients|users|"
                                   r"parallel\s+requests|in\s+flight)", b))
    if r in ("static batch", "single request", "static", "fixed batch"):
        if number is None:
            return "unknown", f"a static batch needs a numeric batch size, got {batch!r}"
        return "static", number
    value = _number(rate)
    spelled = re.fullmatch(r"(?:poisson|rate|qps|rps)?\s*[:=(]?\s*(\d+(?:\.\d+)?)\s*\)?\s*"
                           r"(?:req(?:uests)?\s*/\s*s(?:ec)?|rps|qps|requests per second)?", r)
    if value is None and spelled and re.search(r"poisson|rate|qps|rps|req|per second", r):
        value = float(spelled.group(1))
    cap = int(concurrency.group(1)) if concurrency else number
    if value is not None and value > 0 and cap is not None:
        return "capped", (value, cap)     # --request-rate R --max-concurrency N: a semaphore over the stream
    if concurrency or r in ("closed loop", "closed-loop", "concurrency"):
        if cap is None:
            return "unknown", f"a closed-loop run needs a numeric concurrency, got {batch!r}"
        return "closed", cap
    if value is not None and value > 0:
        return "poisson", value
    if r.startswith("inf") or r == "\u221e" or "offline" in r or "all requests" in r or r in ("max", "saturation"):
        if number is not None and "offline" not in r and "all requests" not in r:
            return "closed", number       # vllm bench serve --request-rate inf --max-concurrency N
        cap = re.search(r"(\d+)", b)
        if b and not (_RUNTIME_BATCH.match(b) or cap):
            return "unknown", f"batch {batch!r} of an offline run is neither a number nor runtime-chosen"
        return "offline", int(cap.group(1)) if cap else None
    return "unknown", f"request_rate {rate!r} is not a static batch, a rate, a closed loop or an offline run"


#: ShareGPT as ``vllm bench serve`` and ``sglang bench_serving`` sample it (ShareGPT_V3, first turn, the
#: filter prompt <= 1024, prompt + output <= 2048, a Llama-3 tokenizer): mean prompt and output tokens
#: measured in published SGLang result files (DataCrunch h200-benchmarks, sglang/outputs @ c091ef53:
#: total_input_tokens / total_output_tokens of its three ShareGPT runs, 269081 / 226901 over 1200 prompts,
#: 540779 / 461874 over 2400, 448102 / 383064 over 2000). The shipped sharegpt4-vllm-filter (GPT-4 answers,
#: Llama-2 tokenizer) has means 378 and 419: its shape is kept and rescaled to these means.
SHAREGPT_BENCH_MEANS = ((269081 + 540779 + 448102) / 5600, (226901 + 461874 + 383064) / 5600)

_DATASET_SPELLINGS = {
    "sharegpt": ("sharegpt4-vllm-filter", "ShareGPT as vllm bench serve / sglang bench_serving sample it: "
                                          "sharegpt4-vllm-filter's shape rescaled to the published means "
                                          f"{SHAREGPT_BENCH_MEANS[0]:.0f} prompt and {SHAREGPT_BENCH_MEANS[1]:.0f} "
                                          "output tokens (SHAREGPT_BENCH_MEANS)", SHAREGPT_BENCH_MEANS),
    "sharegpt-like (not restated)": ("sharegpt4-vllm-filter", "ShareGPT-like: sharegpt4-vllm-filter's shape "
                                                              "rescaled to SHAREGPT_BENCH_MEANS",
                                     SHAREGPT_BENCH_MEANS),
}


def _lengths(raw):
    """('fixed', prompt, output) | ('uniform', (lo, hi), (lo, hi)) | ('dataset', name) | ('unknown', why)."""
    p, o = (raw.get("prompt_len") or "").strip(), (raw.get("output_len") or "").strip()
    if _integer(p) is not None and (_integer(o) is not None or o.lower() in ("n/a", "", "1")):
        if _integer(p) < 1 or (_integer(o) is not None and _integer(o) < 1):
            return "unknown", f"request lengths must be >= 1 token (prompt {p!r}, output {o!r})"
        return "fixed", _integer(p), _integer(o) or 1

    def uniform(text):
        m = re.fullmatch(r"(?:uniform|u)\s*[\[(]?\s*(\d+)\s*(?:-|\.\.|,|to)\s*(\d+)\s*[\])]?", text.lower())
        return (int(m.group(1)), int(m.group(2))) if m else None

    if uniform(p) and uniform(o):
        return "uniform", uniform(p), uniform(o)
    from .workloads import dataset_names

    names = {n.lower(): n for n in dataset_names()}
    key = p.lower()
    stated = re.search(r"mean lengths?:?\s*(\d+(?:\.\d+)?)\s*in,\s*(\d+(?:\.\d+)?)\s*out", raw.get("notes", ""))
    means = (float(stated.group(1)), float(stated.group(2))) if stated else None
    if key in names:
        return "dataset", names[key], "named dataset" + (f", rescaled to the stated means {means}" if means else ""), means
    if key in _DATASET_SPELLINGS:
        name, why, default = _DATASET_SPELLINGS[key]
        if means:
            why = f"{name}'s shape rescaled to the means the row states ({means[0]:g} in, {means[1]:g} out)"
        return "dataset", name, why, means or default
    if means and p and _integer(p) is None:
        # a dataset the library does not ship, whose mean lengths the row states: ShareGPT's shape
        # (the heavy-tailed chat mix most serving benchmarks sample) at those means
        return "dataset", "sharegpt4-vllm-filter", (
            f"{p!r} is not a dataset servingmath.workloads ships: sharegpt4-vllm-filter's shape rescaled to the "
            f"means the row states ({means[0]:g} in, {means[1]:g} out); the spread of its lengths is assumed"), means
    return "unknown", (f"request lengths not given (prompt {p!r}, output {o!r}): neither numbers, "
                       f"uniform ranges ('uniform 1-1024'), a dataset of servingmath.workloads, nor a dataset "
                       f"named with its mean lengths in the notes ('mean lengths: 219 in, 292 out')")


_TIME_METRICS = {"ttft": "ttft_ms", "time_to_first_token": "ttft_ms", "itl": "itl_ms",
                 "inter_token_latency": "itl_ms", "tpot": "tpot_ms", "time_per_output_token": "tpot_ms",
                 "e2e": "e2e_ms", "e2el": "e2e_ms", "e2e_latency": "e2e_ms", "request_latency": "e2e_ms",
                 "end_to_end_latency": "e2e_ms"}
_THROUGHPUT_METRICS = {"output_throughput": "throughput_tok_s", "output_token_throughput": "throughput_tok_s",
                       "output_tok_s": "throughput_tok_s", "tokens_per_s": "throughput_tok_s",
                       "throughput": "throughput_tok_s", "total_token_throughput": "throughput_total_tok_s",
                       "total_throughput": "throughput_total_tok_s", "total_tok_s": "throughput_total_tok_s",
                       "request_throughput": "throughput_req_s", "requests_per_s": "throughput_req_s",
                       "req_s": "throughput_req_s"}


def _metric_spelling(metric: str):
    """(metric, factor to its unit, statistic or None) for another spelling of a schema metric, else None.

    ``ttft_s``, ``mean_ttft_ms``, ``p99_itl_ms``, ``median_tpot_ms``, ``e2el_ms``, ``request_latency_s``;
    ``output_throughput``, ``output_tok_s``, ``total_token_throughput``, ``request_throughput``,
    ``..._per_gpu``. A time needs its unit (``_ms`` or ``_s``) in the name."""
    m = (metric or "").strip().lower()
    m = re.sub(r"[\s\-/]+", "_", m)
    stat = None
    found = re.match(r"(mean|median|avg|average|p50|p90|p95|p99)_(.+)", m) or re.match(
        r"(.+?)_(mean|median|avg|average|p50|p90|p95|p99)$", m)
    if found:
        word, m = (found.group(1), found.group(2)) if found.re.pattern.startswith("(mean") else (
            found.group(2), found.group(1))
        stat = {"avg": "mean", "average": "mean"}.get(word, word)
    unit = re.search(r"_(ms|s|sec|seconds)$", m)
    if unit:
        base = m[:unit.start()]
        if base in _TIME_METRICS:
            return _TIME_METRICS[base], 1.0 if unit.group(1) == "ms" else 1e3, stat
    per_gpu = m.endswith("_per_gpu")
    base = re.sub(r"_per_gpu$", "", m)
    base = re.sub(r"_(tok|tokens)_s$", "", base) if base not in _THROUGHPUT_METRICS else base
    if base in _THROUGHPUT_METRICS and stat is None:
        name = _THROUGHPUT_METRICS[base]
        if per_gpu:
            if name != "throughput_tok_s":
                return None
            name = "throughput_tok_s_per_gpu"
        return name, 1.0, None
    return None


def _statistic(units: str, metric: str) -> tuple[str, str | None]:
    """Which statistic a latency row reports (from its units), and the assumption if it is not stated."""
    u = (units or "").lower()
    percentile = re.search(r"\bp(\d+(?:\.\d+)?)\b", u)
    if percentile:
        stat = f"p{percentile.group(1)}"
        if stat not in ("p50", "p90", "p95", "p99"):
            raise _Refused("statistic", f"units {units!r}: the {stat} of a latency is not one the simulator reports "
                                        "(mean, p50, p90, p95, p99)")
        return stat, None
    for word, stat in (("median", "p50"), ("mean", "mean"), ("avg", "mean"), ("average", "mean")):
        if word in u:
            return stat, None
    if metric.endswith("_ms"):
        return "mean", "statistic not stated: read as the mean"
    return "mean", None


def _chunk_tokens(units: str) -> int:
    m = re.search(r"(\d+)-token chunks?", (units or "").lower())
    return int(m.group(1)) if m else 1


# ------------------------------------------------------------------------------- engines

_ENGINES = [("nim", r"\bnim\b"), ("tensorrt-llm", r"tensorrt|trt-?llm"), ("sglang", r"sglang"),
            ("lmdeploy", r"lmdeploy|turbomind"), ("jetstream", r"jetstream"), ("vllm", r"vllm"),
            ("tgi", r"text-generation-inference|\btgi\b"), ("fastertransformer", r"fastertransformer")]

_VLLM_V1 = ("vllm-project/vllm vllm/engine/arg_utils.py @ 99d7eb5d6a512cfcc5a2b104f24ebf2d6cda772b "
            "(EngineArgs defaults: >= 70 GiB and not an A100: max_num_batched_tokens 8192 (API server) / 16384 "
            "(LLM class), max_num_seqs 1024; else 2048 / 8192 and 256; TPU by chip: v6e 1024 / 2048, v5e 512 / "
            "1024, v5p 256 / 512, max_num_seqs capped at the token budget)")
_VLLM_V0 = ("vllm-project/vllm vllm/config.py @ 0004438383ee731a6e44708609d175c48528a8d0 (SchedulerConfig: "
            "without chunked prefill max_num_batched_tokens = max(max_model_len, 2048)) and "
            "vllm/engine/arg_utils.py @ 001999d2f360c2c5da23a916510c273b1a73d06c (max_num_seqs 256 in V0)")
_SGLANG = ("SGLang python/sglang/srt/server_args.py (chunked_prefill_size 8192 on GPUs of 25 GB and more, "
           "2048 below; read in versions held by the search index, not pinned to the v0.3/v0.4 tags); its "
           "scheduler admits a request only when the KV pool holds its prompt and its expected output "
           "(new_token_ratio), modelled as a cap of KV tokens / (mean prompt + mean output) sequences; and "
           "sgl-project/sglang benchmark/benchmark_vllm_060/README.md @ 120affb9 (mem_fraction_static 0.88 "
           "at TP 1, 0.85 at TP 4); prefill batches run apart from decode batches (enable_mixed_chunk off)")
_TRTLLM = ("TensorRT-LLM tensorrt_llm/llmapi/llm_args.py (BaseLlmArgs: max_batch_size 2048, max_num_tokens 8192; "
           "KV cache free_gpu_memory_fraction 0.9 of the memory left after the weights; capacity scheduler "
           "GUARANTEED_NO_EVICT reserves each request's whole sequence) as stored in the search index, and "
           "docs/source/performance/perf-overview.md @ 00f37686aa854010d68bcbd0f4ab000221541ca6; chunked context off "
           "by default (llm_args.py @ fcd3f31682808ae56118ae43c1d7864a3a945e6f: enable_chunked_prefill = "
           "Field(default=False)), so the in-flight batching scheduler adds whole context requests beside the "
           "generation requests while max_num_tokens lasts (https://nvidia.github.io/TensorRT-LLM/performance/"
           "performance-tuning-guide/tuning-max-batch-size-and-max-num-tokens.html)")


def _engine_of(framework: str) -> tuple[str, tuple | None]:
    f = (framework or "").lower()
    for name, pattern in _ENGINES:
        if re.search(pattern, f):
            m = re.search(r"v?(\d+)\.(\d+)(?:\.(\d+))?", f)
            version = tuple(int(x) for x in m.groups() if x is not None) if m else None
            return name, version
    return "unknown", None


_MONTHS = {m: i + 1 for i, m in enumerate(("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct",
                                           "nov", "dec"))}

def _vllm_engine_stated(framework: str):
    """True (V1) or False (V0) where a vLLM framework cell names its engine ("V1 engine", "VLLM_USE_V1=0",
    a bare "V0"), else None. A version such as "v0.6.3" names no engine."""
    text = framework.lower()
    match = re.search(r"vllm_use_v1\s*=\s*([01])", text) or re.search(r"(?<![\w.])v([01])(?![\w.])", text)
    return None if match is None else match.group(1) == "1"


# serving commands and endpoints; not a bare "openai", which names models too (openai/gpt-oss-120b)
_SERVED = re.compile(r"vllm serve|bench serve|benchmark_serving|bench_serving|api_server|launch_server|"
                     r"trtllm-serve|openai-chat|openai-compatible|openai api|/v1/")
_OFFLINE = re.compile(r"benchmark_throughput|bench throughput|trtllm-bench|llm class|offline inference")


def _served_over_http(framework: str, notes: str) -> bool:
    """True where a row that sends every request at once names a serving command or endpoint (``vllm
    serve``, ``vllm bench serve``, ``/v1/completions``) and no offline one (``benchmark_throughput``,
    ``trtllm-bench``, the ``LLM`` class): its engine ran with its API-server defaults."""
    text = f"{framework} {notes}".lower()
    return bool(_SERVED.search(text)) and not _OFFLINE.search(text)


#: vLLM 0.8.0 made the V1 engine the default ("We have now enabled V1 engine by default (#13726)", the
#: v0.8.0 release notes, as quoted in dependabot's bump of 2025-03-19, github.com/microsoft/RecAI/pull/89;
#: docs.vllm.ai/en/v0.8.0 getting_started/v1_user_guide). A source dated from this month on that leaves
#: the version unstated ran V1.
VLLM_V1_DEFAULT_SINCE = (2025, 4)


def source_month(text):
    """(year, month) of a ``source_date`` cell (``"2025-12-03 (commit); read 2026-12-01"``,
    ``"29 Jan 2025 (blog date); read ..."``), ignoring the date the row was read; a year alone reads
    as July; None if undated.

    Derived in the chapter "Validation: how good is the model?" (notebooks/14_validation.ipynb).

    >>> source_month("2025-12-03 (commit); read 2026-12-01"), source_month("29 Jan 2025 (blog)"), source_month("read 2026-12-01")
    ((2025, 12), (2025, 1), None)
    """
    if text is not None and not isinstance(text, str):
        raise TypeError(f"text (a source_date cell) must be a str or None, got {text!r:.60}")
    t = re.split(r"\bread\b", (text or "").lower())[0]
    iso = re.search(r"\b(20\d\d)-(\d\d)\b", t)
    if iso and 1 <= int(iso.group(2)) <= 12:
        return int(iso.group(1)), int(iso.group(2))
    named = re.search(r"\b(jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?[\s,-]+(?:\d{1,2},?\s+)?(20\d\d)\b", t)
    if named:
        return int(named.group(2)), _MONTHS[named.group(1)]
    year = re.search(r"\b(20\d\d)\b", t)
    return (int(year.group(1)), 7) if year else None        # the year alone: read as its middle


def engine_scheduler(framework, accelerator, model, *, offline=False, batch_cap=None, tensor_parallel=1,
                     max_model_len=None, dated=None):
    """The scheduler an engine runs by default: the simulator's policy, its limits and their source.

    Derived in the chapter "Validation: how good is the model?" (notebooks/14_validation.ipynb).

    Parameters
    ----------
    framework : str
        The row's ``framework`` (``"vLLM 0.6.0"``, ``"SGLang v0.3.0"``, ``"TensorRT-LLM 1.0"``...).
    accelerator, model
        What it runs on (vLLM's defaults depend on the GPU class).
    offline : bool
        True for an offline run (vLLM's ``LLM`` class / ``benchmark_throughput``), False for a server.
    batch_cap : int, optional
        A maximum batch the row states (``max batch 64``, JetStream's slots).
    tensor_parallel : int
        SGLang's memory share depends on it.
    max_model_len : int, optional
        The server's ``--max-model-len`` where the row states one (vLLM V0's defaults depend on
        it); default the model's context.
    dated : (year, month), optional
        When the source was published (:func:`source_month`). A vLLM row that leaves its
        version unstated runs V1 if dated from :data:`VLLM_V1_DEFAULT_SINCE` on, else V0.

    Returns
    -------
    dict
        ``policy`` (``"chunked"``: decodes and prompt chunks share one token budget per iteration;
        ``"prefill-first"``: prompts prefilled in their own iterations), ``token_budget``,
        ``max_seqs``, ``memory_fraction`` (share of each GPU for weights + KV), ``reserve``
        (``"full"``: a request's whole sequence is reserved at admission; ``"on-demand"``),
        ``scheduler_steps`` (decode steps per scheduling decision: vLLM V0's
        ``--num-scheduler-steps`` when the framework states it, else 1), ``label`` (engine,
        version, GPU class), ``chunk_prompts`` (``"chunked"`` policy: False where the engine
        prefills each prompt whole beside the decodes, TensorRT-LLM without chunked context) and
        ``source`` (file and commit).

    Examples
    --------
    >>> s = engine_scheduler("vLLM 0.11", "H100", "Llama-3.1-8B")
    >>> s["policy"], s["token_budget"], s["max_seqs"]
    ('chunked', 8192, 1024)
    >>> engine_scheduler("vLLM 0.11", "A100", "Llama-3.1-8B")["token_budget"]
    2048
    >>> engine_scheduler("vLLM 0.6.0", "A100", "Llama-3.1-8B", max_model_len=4096)["policy"]
    'prefill-first'
    >>> s = engine_scheduler("vLLM v0.6.0 (--num-scheduler-steps 10)", "A100", "Llama-3.1-8B", max_model_len=4096)
    >>> s["policy"], s["scheduler_steps"]
    ('prefill-first', 10)
    """
    if not isinstance(framework, str):
        raise TypeError(f"framework must be the engine's name and version (str), got {framework!r}")
    acc, mod = get_accelerator(accelerator), get_model(model)
    engine, version = _engine_of(framework)
    inferred = None
    if engine == "vllm" and version is None and dated is not None and tuple(dated) >= VLLM_V1_DEFAULT_SINCE:
        version, inferred = (0, 8), (f"version not stated; the source is dated {dated[0]}-{dated[1]:02d}, after vLLM "
                                     "0.8.0 made V1 the default (March 2025)")
    context = int(max_model_len) if max_model_len else min(int(mod.max_context_len), 131072)
    out = dict(memory_fraction=0.9, reserve="on-demand", engine=engine, scheduler_steps=1, chunk_prompts=True)
    if engine == "vllm":
        v1 = version is not None and version >= (0, 8)
        stated = _vllm_engine_stated(framework)
        if stated is not None and stated != v1:
            inferred = (f"{'.'.join(map(str, version)) + ', ' if version else ''}the row says the "
                        f"V{int(stated)} engine ran")
            v1 = stated
            if v1 and version is None:
                version = (0, 8)
        if v1:
            large = acc.memory_bytes >= 70 * GiB and "a100" not in acc.name.lower()
            if acc.name.startswith("TPU"):
                # vLLM's TPU defaults by chip (LLM class / API server); the sequences are the GPU
                # default for the chip's memory, capped at the token budget
                chip = acc.name.split("-")[-1].upper()
                budget = {"V6E": (2048, 1024), "V5E": (1024, 512), "V5P": (512, 256)}.get(
                    chip, (8192, 2048))[0 if offline else 1]
                seqs = min(1024 if acc.memory_bytes >= 70 * GiB else 256, budget)
                klass = f"TPU {chip.lower()}"
            elif large:
                budget, seqs, klass = (16384 if offline else 8192), 1024, ">= 70 GiB, not A100"
            else:
                budget, seqs, klass = (8192 if offline else 2048), 256, "< 70 GiB or A100"
            out.update(policy="chunked", token_budget=budget, max_seqs=seqs, source=_VLLM_V1,
                       label=f"vLLM {inferred or '.'.join(map(str, version))} (V1) default for {klass}, "
                             f"{'LLM class' if offline else 'API server'}: chunked prefill, "
                             f"{budget} tokens per step, {seqs} sequences")
        else:
            budget = max(context, 2048) if context <= 32768 else 512
            policy = "prefill-first" if context <= 32768 else "chunked"
            out.update(policy=policy, token_budget=budget, max_seqs=256, source=_VLLM_V0,
                       label=(f"vLLM {'.'.join(map(str, version)) if version else '(version not stated)'} "
                              f"(V0) default: " + ("no chunked prefill, prefills of up to max(max_model_len, "
                                                   f"2048) = {budget} tokens" if policy == "prefill-first" else
                                                   "chunked prefill with 512 tokens per step (V0 enables it "
                                                   "for contexts over 32K; the 512 is not verified at a "
                                                   "commit here)") + ", 256 sequences"))
            multi = re.search(r"num[-_]scheduler[-_]steps[\s=]+(\d+)", framework.lower())
            if multi and int(multi.group(1)) > 1:
                if policy == "prefill-first":
                    out["scheduler_steps"] = int(multi.group(1))
                    out["label"] += (f"; multi-step scheduling: {out['scheduler_steps']} decode steps per "
                                     "scheduling decision (--num-scheduler-steps), new requests wait for the run")
                    out["source"] += ("; multi-step scheduling as vLLM 0.6 documents it (docs: "
                                      "--num-scheduler-steps; prefills scheduled as single steps)")
                else:
                    out["label"] += "; --num-scheduler-steps with chunked prefill: not modelled (one step)"
    elif engine == "sglang":
        budget = 8192 if acc.memory_bytes >= 25e9 else 2048
        out.update(policy="prefill-first", token_budget=budget, max_seqs=4096, reserve="estimate",
                   memory_fraction=0.88 if tensor_parallel < 4 else 0.85, source=_SGLANG,
                   label=(f"SGLang{' ' + '.'.join(map(str, version)) if version else ''} default: prefill batches "
                          f"apart from decodes, chunked_prefill_size {budget}, running requests limited by "
                          f"the KV pool, mem_fraction_static {0.88 if tensor_parallel < 4 else 0.85}"))
    elif engine in ("tensorrt-llm", "nim"):
        # in-flight batching: contexts and generations in one iteration under max_num_tokens; chunked
        # context is off by default (enable_chunked_prefill False), so a prompt is never split
        out.update(policy="chunked", token_budget=8192, max_seqs=2048, reserve="full", source=_TRTLLM,
                   memory_fraction="trtllm", chunk_prompts=False,
                   label=(f"{'NIM (TensorRT-LLM backend)' if engine == 'nim' else 'TensorRT-LLM'} default: "
                          "in-flight batching of whole contexts beside the generations (chunked context off), "
                          "max_num_tokens 8192, max_batch_size 2048, KV cache 0.9 of "
                          "the free memory, whole sequences reserved (GUARANTEED_NO_EVICT)"))
    elif engine == "lmdeploy":
        out.update(policy="prefill-first", token_budget=8192, max_seqs=batch_cap or 128,
                   source="InternLM/lmdeploy docs/en/benchmark/a100_fp16.md @ 3e391df (max batch as stated)",
                   label=f"LMDeploy TurboMind persistent batching, max batch {batch_cap or 128} "
                         "(prefill budget 8192 assumed)")
    elif engine == "jetstream":
        out.update(policy="prefill-first", token_budget=1024, max_seqs=batch_cap or 96, reserve="slots",
                   source=("AI-Hypercomputer/jetstream-pytorch benchmarks/ results table (batch size = decode "
                           "slots, cache length per slot)"),
                   label=f"JetStream: {batch_cap or 96} decode slots, one prompt of up to 1024 tokens per "
                         "prefill, a fixed cache per slot")
    else:
        out.update(policy="chunked", token_budget=2048, max_seqs=256, source="none: engine not recognised",
                   label=f"engine {framework!r} not recognised: a generic chunked-prefill scheduler "
                         "(2048 tokens per step, 256 sequences)")
    if batch_cap is not None and engine not in ("lmdeploy", "jetstream"):
        out["max_seqs"] = int(batch_cap)
        out["label"] += f"; max batch {batch_cap} as stated"
    out["max_seqs"] = int(out["max_seqs"])
    out["token_budget"] = int(max(out["token_budget"], out["max_seqs"] if out["policy"] == "chunked" else 1))
    return out


def engine_memory_fraction(scheduler, model, acc, weight_dtype, tensor_parallel, *, pipeline_parallel=1,
                           expert_parallel=1):
    """The share of each GPU's memory the engine gives weights + KV cache.

    Derived in the chapter "Validation: how good is the model?" (notebooks/14_validation.ipynb).

    ``scheduler``: :func:`engine_scheduler`'s dict. Its ``memory_fraction`` is a number (vLLM's
    ``gpu_memory_utilization``, SGLang's ``mem_fraction_static``) or ``"trtllm"``: TensorRT-LLM
    gives the KV cache 90 % of the memory left after the weights (``free_gpu_memory_fraction``);
    with ``pipeline_parallel`` P stages each GPU holds 1/P of the weights.

    >>> s = engine_scheduler("TensorRT-LLM 1.0", "H100", "Llama-3.1-8B")
    >>> round(engine_memory_fraction(s, "Llama-3.1-8B", "H100", "fp8", 1), 3)
    0.91
    """
    if not isinstance(scheduler, dict) or "memory_fraction" not in scheduler:
        raise TypeError(f"scheduler must be engine_scheduler()'s dict, got {scheduler!r}")
    model, acc = get_model(model), get_accelerator(acc)
    check_integer("tensor_parallel", tensor_parallel, minimum=1)
    if np.ndim(tensor_parallel) != 0:
        raise ValueError(f"tensor_parallel must be a single number, got {tensor_parallel!r}")
    frac = scheduler["memory_fraction"]
    if frac != "trtllm":
        return float(frac)
    from .memory import weight_bytes_per_gpu

    pp = check_integer("pipeline_parallel", pipeline_parallel, minimum=1)
    w = float(weight_bytes_per_gpu(model, weight_dtype=weight_dtype, tensor_parallel=tensor_parallel,
                                   expert_parallel=expert_parallel)) / pp
    return float(min(1.0, (w + 0.9 * max(acc.memory_bytes - w, 0.0)) / acc.memory_bytes))



# ------------------------------------------------------------------------------- records

#: CSV metric -> (kind, scale to SI, SI unit, what the step model computes for a static row).
METRICS = {
    "ttft_ms": ("time", 1e-3, "s", "prefill"),
    "itl_ms": ("time", 1e-3, "s", "decode_step"),
    "tpot_ms": ("time", 1e-3, "s", "decode_step"),
    "e2e_ms": ("time", 1e-3, "s", "static_run"),
    "throughput_tok_s": ("throughput", 1.0, "tok/s", "static_run"),
    "throughput_tok_s_per_gpu": ("throughput", 1.0, "tok/s", "static_run"),
    "throughput_req_s": ("throughput", 1.0, "req/s", "static_run"),
    "throughput_total_tok_s": ("throughput", 1.0, "tok/s", "static_run"),
}

#: The metric groups of the headline errors (issue 17's targets: decode/ITL, TTFT, throughput).
METRIC_GROUPS = {"itl_ms": "decode/ITL", "tpot_ms": "decode/ITL", "ttft_ms": "TTFT", "e2e_ms": "E2E",
                 "throughput_tok_s": "throughput", "throughput_tok_s_per_gpu": "throughput",
                 "throughput_req_s": "throughput", "throughput_total_tok_s": "throughput"}

_BASES = ("total", "per_gpu")
_PATHS = {"prefill": "step model", "decode_step": "step model", "static_run": "step model",
          "memory_wall": "memory wall", "simulated": "simulator"}


@dataclass(frozen=True)
class _Steps:
    """The parts (seconds at the peaks) of every forward step of a measured workload, and how many
    times each step counts: the step model's numbers, kept so that the calibration can rescale
    them by MBU and MFU without recomputing them. ``communication`` is the all-reduces' bandwidth
    term at the full link; ``allreduces`` counts the calls (2 per layer per step when N > 1).
    ``transfer``: with P pipeline stages, the stage-to-stage sends of the activations a round of
    steps waits for, in seconds at the full link (zero without stages). ``overheads``: how many
    step overheads a row pays (its steps, or P per round of steps with P stages)."""

    weight: np.ndarray
    linear: np.ndarray
    kv: np.ndarray
    attention: np.ndarray
    communication: np.ndarray
    layers_with_allreduce: np.ndarray
    count: np.ndarray
    allreduces: np.ndarray
    tensor_parallel: np.ndarray
    transfer: np.ndarray
    overheads: np.ndarray


@dataclass(frozen=True)
class SimulationSpec:
    """What a simulated row runs: one replica's deployment, the engine's scheduler, the lengths and the load.

    Derived in the chapter "Validation: how good is the model?" (notebooks/14_validation.ipynb).

    Two rows of the same run (its TTFT and its throughput) share one spec, so one simulation
    answers both (results are cached per spec, efficiency and seed).
    """

    model: ModelConfig
    accelerator_name: str
    tensor_parallel: int
    weight_dtype: str
    kv_dtype: str
    compute_dtype: str
    policy: str
    token_budget: int
    max_seqs: int
    memory_fraction: float
    kv_capacity: int | None
    workload: tuple
    load: tuple
    n_requests: int
    scheduler_steps: int = 1
    accelerator: Accelerator = field(compare=False, hash=False, repr=False, default=None)
    chunk_prompts: bool = True
    expert_parallel: int = 1

    def describe(self) -> str:
        kind, value = self.load
        load = {"closed": lambda: f"{value} client{'s' if value != 1 else ''}",
                "poisson": lambda: f"Poisson {value:g} req/s",
                "capped": lambda: f"Poisson {value[0]:g} req/s, at most {value[1]} in flight",
                "offline": lambda: f"{self.n_requests} requests at once"}[kind]()
        lengths = {"fixed": lambda w: f"{w[1]}->{w[2]} tok", "uniform": lambda w: f"U{w[1]}->U{w[2]} tok",
                   "dataset": lambda w: w[1] + (" rescaled" if w[2:] != (1.0, 1.0) else "")}[self.workload[0]](
                       self.workload)
        multi = f", {self.scheduler_steps} steps per schedule" if self.scheduler_steps > 1 else ""
        policy = self.policy if self.chunk_prompts or self.policy != "chunked" else "in-flight, whole prompts"
        return f"{load}, {lengths}, {policy} ({self.token_budget} tok/step, {self.max_seqs} seqs{multi})"


@dataclass(frozen=True, eq=False)
class Measurement:
    """One published measurement, as a configuration the model understands plus the measured value.

    Derived in the chapter "Validation: how good is the model?" (notebooks/14_validation.ipynb).

    Attributes
    ----------
    row : int
        0-based index of the data row in the CSV.
    source : str
        Short source name (the title's start; :data:`SOURCES` for the book's five).
    source_title : str
        The CSV's ``source_title``: what identifies a source (leave-one-source-out folds).
    model : ModelConfig
    accelerator : Accelerator
    n_gpus, tensor_parallel, data_parallel, pipeline_parallel, expert_parallel : int
        GPUs in all, the tensor-parallel degree of one replica, replicas, the pipeline stages of
        one replica, and its expert-parallel degree (n_gpus = max(TP, EP) x PP x DP; EP > TP runs
        attention in EP / TP data-parallel groups: :func:`parallel_layout`).
    weight_dtype, kv_dtype, compute_dtype : str
        Matmuls at the fp8 (fp4) peak for fp8 (fp4) weights on a part that has it, else 16-bit.
    batch_size, prompt_len, output_len : int
        For a static row its batch and lengths; for a memory-wall row the batch the engine holds;
        for a simulated row the concurrency (closed loop) or 0, and the mean lengths.
    metric : str
    kind : {"time", "throughput"}
    scenario : {"prefill", "decode_step", "static_run", "memory_wall", "simulated"}
    value : float
        The measured value in SI: seconds, tokens/s or requests/s.
    unit : str
    basis : {"total", "per_gpu", "ambiguous"}
    fits : bool
        Whether the weights and the KV cache of the whole batch at its final context fit
        (memory read generously: the sheet's GB as GiB, all of it usable). Simulated rows: True.
    statistic : {"mean", "p50", "p90", "p95", "p99"}
        The statistic a latency row reports (from its units).
    assumptions : tuple of str
        Every assumption made in turning the row into this configuration.
    scheduler : dict or None
        The engine scheduler of a simulated or memory-wall row (:func:`engine_scheduler`).
    sim : SimulationSpec or None
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
    source_title: str = ""
    data_parallel: int = 1
    statistic: str = "mean"
    scheduler: dict | None = field(default=None, repr=False)
    sim: SimulationSpec | None = field(default=None, repr=False)
    chunk_tokens: int = 1
    pipeline_parallel: int = 1
    expert_parallel: int = 1

    @property
    def gpus_per_replica(self) -> int:
        """max(TP, EP) x PP: the GPUs of one replica (a per-GPU throughput divides by them)."""
        return max(self.tensor_parallel, self.expert_parallel) * self.pipeline_parallel

    @property
    def family(self) -> str:
        return accelerator_family(self.accelerator)

    @property
    def path(self) -> str:
        """Which part of the library predicts the row: ``"step model"``, ``"memory wall"`` or ``"simulator"``."""
        return _PATHS[self.scenario]

    @property
    def group(self) -> str:
        """The metric group of the headline errors (:data:`METRIC_GROUPS`)."""
        return METRIC_GROUPS[self.metric]

    @property
    def published_value(self) -> float:
        """The value back in the CSV's units (ms, tok/s, req/s)."""
        return self.value / METRICS[self.metric][1]

    def with_changes(self, **changes) -> "Measurement":
        """A copy with some configuration fields changed (``model``, ``accelerator``, ``batch_size``,
        dtypes, lengths...) and its steps recomputed: to test what-ifs against the measured value.

        Step-model and memory-wall rows only.

        >>> row = load_published_measurements().by_row(48)
        >>> round(physical_bound(row.with_changes(accelerator=get_accelerator("A100-PCIe-80GB"))) * 1e3, 2)
        6.85
        """
        if self.scenario == "simulated":
            raise ValueError("with_changes applies to step-model rows; a simulated row's configuration is "
                             "its SimulationSpec (.sim)")
        allowed = {"model", "accelerator", "tensor_parallel", "weight_dtype", "kv_dtype", "compute_dtype",
                   "batch_size", "prompt_len", "output_len", "value"}
        for name in changes:
            check_choice("field", name, allowed)
        new = replace(self, **changes)
        model, acc = get_model(new.model), get_accelerator(new.accelerator)
        scenario = "static_run" if new.scenario == "memory_wall" else new.scenario
        pp = new.pipeline_parallel
        batch = new.batch_size // pp if scenario == "static_run" and pp > 1 else new.batch_size
        steps = _steps(model, acc, scenario, batch, new.prompt_len, new.output_len,
                       new.weight_dtype, new.kv_dtype, new.compute_dtype, new.tensor_parallel, pp,
                       ep=new.expert_parallel)
        return replace(new, model=model, accelerator=acc, steps=steps)

    def describe(self) -> str:
        """One line: source, model, accelerator x N, batch or load, lengths, metric."""
        tp = f" x{self.tensor_parallel}" if self.tensor_parallel > 1 else ""
        tp += f" PP {self.pipeline_parallel}" if self.pipeline_parallel > 1 else ""
        dp = f" (DP {self.data_parallel})" if self.data_parallel > 1 else ""
        if self.sim is not None:
            return (f"{self.source}: {self.model.name} {self.weight_dtype} on {self.accelerator.name}{tp}{dp}, "
                    f"{self.sim.describe()}, {self.metric} {self.statistic}")
        return (f"{self.source}: {self.model.name} {self.weight_dtype} on {self.accelerator.name}{tp}{dp}, "
                f"B={self.batch_size}, {self.prompt_len}->{self.output_len} tok, {self.metric}")


@dataclass(frozen=True)
class Unexpressible:
    """A row the model cannot express, with the reason and its category (``category`` is what

    Derived in the chapter "Validation: how good is the model?" (notebooks/14_validation.ipynb).
    :meth:`PublishedData.reasons` counts)."""

    row: int
    source: str
    model: str
    hardware: str
    metric: str
    reason: str
    raw: dict = field(default_factory=dict, repr=False)
    category: str = "other"


@dataclass(frozen=True)
class PublishedData:
    """What :func:`load_published_measurements` returns.

    Derived in the chapter "Validation: how good is the model?" (notebooks/14_validation.ipynb).
    """

    measurements: tuple
    unexpressible: tuple
    path: str = ""

    def by_row(self, row: int):
        """The Measurement (or Unexpressible) made from data row ``row``."""
        for item in self.measurements + self.unexpressible:
            if item.row == row:
                return item
        raise KeyError(f"row {row!r} is not in the data (rows 0..{len(self) - 1})")

    def __len__(self) -> int:
        return len(self.measurements) + len(self.unexpressible)

    @property
    def expressible_share(self) -> float:
        """Share of the rows that became Measurements."""
        return len(self.measurements) / len(self) if len(self) else float("nan")

    def reasons(self) -> dict:
        """Rows refused, counted by reason category (most frequent first)."""
        return dict(Counter(u.category for u in self.unexpressible).most_common())

    def by_path(self) -> dict:
        """Expressible rows counted by the path that predicts them."""
        return dict(Counter(m.path for m in self.measurements).most_common())

    def sources(self) -> list:
        """The distinct source titles, in order of first appearance."""
        return list(dict.fromkeys(m.source_title for m in self.measurements + tuple(self.unexpressible)
                                  if isinstance(m, Measurement)))


# ------------------------------------------------------------------------------- loading

def _check_shape(model: ModelConfig, raw: dict) -> str | None:
    """The CSV may state each model's size and shape; a disagreement with the config is the reason."""
    stated = {"n_layers": model.n_layers, "n_kv_heads": model.n_kv_heads, "head_dim": model.head_dim}
    for column, have in stated.items():
        value = _integer(raw.get(column))
        if value is not None and value != have:
            return f"the CSV gives {column} = {raw[column]} for {raw['model']}, but {model.name} has {have}"
    params = _number(raw.get("params_B"))
    if params:
        have = parameter_count(model) / 1e9
        if abs(have / params - 1) > 0.01:
            return f"the CSV gives {raw['params_B']} B parameters for {raw['model']}, {model.name} has {have:.2f} B"
    return None


def _steps(model, acc, scenario, batch, prompt, output, wd, kd, cd, tp, pp=1, *, ep=1) -> _Steps:
    """The forward steps of a workload, each split into its parts at the peaks (mfu = mbu = 1).

    ``pp`` > 1: the steps of one of the P micro-batches (``batch`` is its size) of a pipelined
    replica, round by round (in a round each micro-batch takes one step). Each stage runs its
    own executor loop (TensorRT-LLM's PyExecutor and vLLM's workers run one per rank), so a
    stage spends p = o + (t - o) / P + x on each micro-batch: the host's step overhead o, its
    1/P of the rest of the whole model's step time t, and the send of the activations to the
    next stage, x = T x D x 2 bytes over the accelerator's interconnect. With the pipeline full
    the busiest stage sets the pace: a round lasts P p = t + (P - 1) o + P x. (The simulator's
    pipeline, :mod:`servingmath.simulate.pipeline`, pays o once per iteration, on the host
    before the first stage: the optimistic end.)

    The L_o - 1 decode steps of a static run are summed into one aggregate step. That is exact
    for the hybrid overlap at any efficiencies: within the run the weight and matmul terms are
    the same at every step, and the KV and attention terms are both proportional to the context,
    so sum_j max(kv_j / u, att_j / m) = max(sum_j kv_j / u, sum_j att_j / m).
    """
    from .step import Iteration, iteration_work

    keys = ("weight_memory", "linear_compute", "kv_memory", "attention_compute", "communication")
    dep = Deployment.build(model, acc, weight_dtype=wd, kv_dtype=kd, compute_dtype=cd, tensor_parallel=tp,
                           expert_parallel=ep)
    calls = float(iteration_work(dep, Iteration.decode(model, sequences=1, context_len=1)).allreduces)
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
    transfer = np.zeros(count.shape)
    if pp > 1:
        tokens = np.array([float(batch * (prompt if scenario != "decode_step" and i == 0 else 1)) for i in
                           range(len(rows))]) * count
        transfer = pp * tokens * model.hidden_size * 2.0 / float(acc.interconnect_bandwidth)
    return _Steps(*arrays, layers, count, count * calls, np.full(count.shape, float(tp)), transfer, count * pp)


def compute_dtype_for(weight_dtype: str, acc) -> tuple[str, str | None]:
    """The matmul dtype for weights stored in ``weight_dtype`` on a part, and the note when it is not
    the weights' own: fp8 (fp4) math where the part has fp8 (fp4) tensor cores, else 16-bit.

    Derived in the chapter "Validation: how good is the model?" (notebooks/14_validation.ipynb).

    >>> compute_dtype_for("fp8", get_accelerator("H100"))[0], compute_dtype_for("fp8", get_accelerator("A100"))[0]
    ('fp8', 'bf16')
    """
    acc = get_accelerator(acc)
    if weight_dtype in ("fp16", "bf16", "fp32"):
        return weight_dtype, None
    if weight_dtype == "fp8" and "fp8" in acc.dense_flops:
        return "fp8", "fp8 engine: matmuls at the fp8 peak"
    if weight_dtype in ("nvfp4", "mxfp4") and weight_dtype in acc.dense_flops:
        return weight_dtype, (f"{weight_dtype} weights and activations (W4A4) on {acc.name}: matmuls at the "
                              "fp4 peak")
    return "bf16", f"{weight_dtype} weights dequantised to bf16 for the matmuls (weight-only on {acc.name})"


def _basis(metric: str, notes: str, units: str, n_gpus: int) -> str:
    if metric.endswith("_per_gpu") or "/gpu" in (units or "").lower():
        return "per_gpu"
    if metric.startswith("throughput") and n_gpus > 1 and "per-GPU vs total not restated" in (notes or ""):
        return "ambiguous"
    return "total"


def _refuse(index, raw, source, category, reason):
    return Unexpressible(index, source, raw.get("model", ""), raw.get("hardware", ""), raw.get("metric", ""),
                         reason, dict(raw), category)


#: The largest runs a simulated row replays (requests): enough for steady state, small enough for a chapter.
#: A Poisson run that states its number of requests is replayed at that number (up to
#: ``poisson_stated_max``): its throughput is all output over the whole run, arrivals plus the drain of
#: the last requests, and a load beyond capacity builds a queue (and a batch) that grows with the run,
#: so a shorter replay of the same rate measures something else (``sglang.bench_serving`` and
#: ``vllm bench serve`` send ``--num-prompts`` requests at ``--request-rate`` and divide by the run's
#: duration). Without a stated number, ``poisson_seconds`` of arrivals.
SIM_REQUESTS = {
    "full": {"closed_per_client": 4, "closed_min": 60, "closed_max": 1200, "poisson_seconds": 40,
             "poisson_min": 150, "poisson_max": 400, "poisson_stated_max": 6000, "offline_default": 1000,
             "offline_max": 6000},
    "small": {"closed_per_client": 2, "closed_min": 40, "closed_max": 500, "poisson_seconds": 25,
              "poisson_min": 100, "poisson_max": 150, "poisson_stated_max": 150, "offline_default": 600,
              "offline_max": 600},
}


def _sim_requests(load, stated, budget="full"):
    caps = SIM_REQUESTS[budget]
    kind, value = load
    if kind == "closed":
        n = min(max(caps["closed_per_client"] * value, caps["closed_min"]), caps["closed_max"])
    elif kind in ("poisson", "capped"):
        rate = value if kind == "poisson" else value[0]
        if stated:
            return int(min(stated, caps["poisson_stated_max"]))
        n = min(max(int(rate * caps["poisson_seconds"]), caps["poisson_min"]), caps["poisson_max"])
    else:
        return int(min(stated, caps["offline_max"])) if stated else caps["offline_default"]
    return int(min(n, stated)) if stated else int(n)


def _stated_requests(raw) -> int | None:
    text = f"{raw.get('notes', '')} {raw.get('units', '')}"
    m = re.search(r"(\d[\d,]*)\s+(?:[A-Za-z-]+\s+){0,2}(?:prompts|requests)\b", text)
    return int(m.group(1).replace(",", "")) if m else None


def load_published_measurements(path=None, root=None, *, config_dir=None, accelerators=None, models=None,
                                dtype_policy="engine-default", strict=False, simulation="full") -> PublishedData:
    """Read any CSV in the book's schema into Measurements, and list the rows the model cannot express.

    Derived in the chapter "Validation: how good is the model?" (notebooks/14_validation.ipynb).

    Parameters
    ----------
    path : str or Path, optional
        The CSV (default: :func:`default_data_path`). Its columns are those of
        ``data/published-measurements.csv``; a missing optional column is read as empty.
    root : str or Path, optional
        Kept for compatibility: the folder whose ``data/model-configs`` holds config files.
    config_dir : str, Path or list, optional
        Folder(s) of ``config.json`` files for models outside the catalog (``name.json`` or
        ``name/config.json``). Default: the CSV's sibling folder ``model-configs``.
    accelerators : dict, optional
        Extra hardware spellings -> Accelerator or catalog name (:func:`resolve_accelerator`).
    models : dict, optional
        Extra model spellings -> ModelConfig or catalog name (:func:`resolve_model`).
    dtype_policy : {"engine-default", "reject"}
        How a row that leaves a data type unstated is read (:data:`DTYPE_POLICIES`).
    strict : bool
        Raise on the first row the loader cannot express (KeyError for a name, ValueError for
        the rest) instead of listing it.
    simulation : {"full", "small"}
        How many requests a simulated row replays (:data:`SIM_REQUESTS`): ``"full"`` the stated
        number (up to 6000 offline or at a stated Poisson rate, 400 for a closed loop or an unstated
        Poisson run), ``"small"`` at most 150 online and 600 offline, for
        a chapter that must run in seconds; then an offline row's latencies over more requests than
        that are refused (they grow with the queue of requests offered at once).

    Returns
    -------
    PublishedData
        ``measurements`` (one :class:`Measurement` per expressible row) and ``unexpressible``
        (one :class:`Unexpressible` per other row, with the reason and its category); together
        they hold every row exactly once.

    Notes
    -----
    fp8 rows compute in fp8 where the part has fp8 tensor cores. A row whose prompt plus output
    exceeds the model's maximum context is modelled with the maximum lifted to the benchmark's
    length (recorded): the arithmetic does not depend on the limit.

    Examples
    --------
    >>> data = load_published_measurements()
    >>> len(data.measurements), len(data.unexpressible)
    (136, 2)
    >>> data.by_path()
    {'step model': 129, 'simulator': 7}
    """
    path = default_data_path() if path is None else Path(path)
    check_choice("dtype_policy", dtype_policy, DTYPE_POLICIES)
    check_choice("simulation", simulation, SIM_REQUESTS)
    if not path.is_file():
        raise FileNotFoundError(f"path {str(path)!r} is not a CSV file")
    if config_dir is None:
        config_dir = [path.parent / "model-configs"]
        if root is not None:
            config_dir.append(Path(root) / "data" / "model-configs")
    with path.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    required = {"source_title", "model", "hardware", "metric", "value"}
    if rows and not required <= set(rows[0]):
        raise ValueError(f"{path.name} lacks the columns {', '.join(sorted(required - set(rows[0])))} of the "
                         f"book's schema (data/published-measurements.csv)")
    measurements, skipped = [], []
    specs: dict = {}
    for index, raw in enumerate(rows):
        raw = {k: (v if v is not None else "") for k, v in raw.items()}
        title = (raw.get("source_title") or "").strip()
        source = _short_source(title) if title else "(no source)"
        try:
            item = _read_row(index, raw, title, source, config_dir, accelerators, models, dtype_policy, specs,
                             simulation)
        except _Refused as refused:
            if strict:
                raise (KeyError if refused.category in ("hardware", "model") else ValueError)(
                    f"row {index}: {refused.reason}") from None
            skipped.append(_refuse(index, raw, source, refused.category, refused.reason))
            continue
        measurements.append(item)
    return PublishedData(tuple(measurements), tuple(skipped), str(path.name))


class _Refused(Exception):
    def __init__(self, category, reason):
        super().__init__(reason)
        self.category, self.reason = category, reason


#: Weight dtypes that name a checkpoint's 4-bit experts (gpt-oss's MXFP4 quantises only them).
_EXPERT_DTYPES = ("mxfp4", "nvfp4", "int4")


def expert_dtypes(model, wd, stated, assumptions):
    """(model, weight dtype of the rest) for a model whose checkpoint quantises only its experts.

    Derived in the chapter "Validation: how good is the model?" (notebooks/14_validation.ipynb).

    A stated 4-bit dtype names the experts' (the rest stays 16-bit, as gpt-oss's
    ``modules_to_not_convert`` keeps attention, router, embeddings and LM head);
    a stated 16-bit or fp8 dtype names the rest, the experts keep the checkpoint's.
    ``stated``: whether the row stated ``wd`` (else it is the dtype policy's); the
    assumption is appended to the list ``assumptions``.

    >>> notes = []
    >>> model, rest = expert_dtypes(get_model("gpt-oss-120b"), "nvfp4", True, notes)
    >>> model.expert_dtype, rest
    ('nvfp4', 'bf16')
    """
    model = get_model(model)
    check_dtype(wd, "wd")
    check_bool("stated", stated)
    if not isinstance(assumptions, list):
        raise TypeError(f"assumptions must be a list the note is appended to, got {type(assumptions).__name__}")
    if model.expert_dtype is None:
        raise ValueError(f"model {model.name!r} has no expert_dtype: its checkpoint does not quantise its experts "
                         "apart (weight_dtype applies to every weight)")
    if wd in _EXPERT_DTYPES:
        experts, rest = wd, "bf16"
        if experts != model.expert_dtype:
            model = replace(model, expert_dtype=experts)
    else:
        experts, rest = model.expert_dtype, wd
    said = "stated" if stated else "not stated"
    assumptions.append(f"{model.name} quantises only its experts: routed experts {experts}, attention, router, "
                       f"embeddings and LM head {rest} (dtype_weights {said}; the checkpoint's "
                       "quantization_config)")
    return model, rest


def _read_row(index, raw, title, source, config_dir, accelerators, models, dtype_policy, specs,
              simulation="full"):
    metric = (raw.get("metric") or "").strip()
    if not title:
        raise _Refused("no source", "no source_title: every row needs its source")
    if metric == "mbu":
        raise _Refused("utilisation", "a utilisation derived by the source, not a time or a throughput: "
                                      "nothing to bound (it is compared with the calibrated MBU instead)")
    spelled = None
    if metric not in METRICS:
        spelled = _metric_spelling(metric)
        if spelled is None:
            raise _Refused("metric", f"metric {metric!r} is not one the model computes ({', '.join(METRICS)})")
    value = _number(raw.get("value"))
    if value is None or value <= 0:
        raise _Refused("value", f"value {raw.get('value')!r} is not a positive number")
    if spelled is not None:   # the row as the schema spells it, its statistic into the units
        metric, factor, stat = spelled
        value *= factor
        units = raw.get("units") or ""
        if stat and not re.search(r"\bp\d|median|mean|avg|average", units.lower()):
            units = f"{units} ({stat})".strip()
        spelled = (f"metric {raw.get('metric')!r} read as {metric}" + (f" (x {factor:g} to ms)" if factor != 1 else "")
                   + (f", statistic {stat}" if stat else ""))
        raw = dict(raw, metric=metric, value=str(value), units=units)
    try:
        acc, acc_note = resolve_accelerator(raw.get("hardware", ""), accelerators=accelerators)
    except KeyError as exc:
        raise _Refused("hardware", str(exc.args[0])) from None
    try:
        model, model_note, implied = resolve_model(raw.get("model", ""), config_dir=config_dir, models=models)
    except KeyError as exc:
        raise _Refused("model", str(exc.args[0])) from None
    except (ValueError, FileNotFoundError) as exc:
        raise _Refused("model", f"config.json for {raw.get('model')!r} unreadable: {exc}") from None
    shape = _check_shape(model, raw)
    if shape:
        raise _Refused("shape", shape)
    try:
        tp, pp, dp, ep = parallel_layout(raw.get("tp", ""), raw.get("n_gpus", ""), expert_parallel=True)
    except ValueError as exc:
        raise _Refused("parallelism", str(exc)) from None
    if ep > 1:
        try:
            check_expert_parallel(model, ep, tp)
        except ValueError as exc:
            raise _Refused("parallelism", f"tp {raw.get('tp')!r}: {exc}") from None
    assumptions = [f"{raw['hardware']} -> {acc.name}: {acc_note}", f"{raw['model']} -> {model.name}: {model_note}"]
    if spelled:
        assumptions.append(spelled)
    if _tp_unstated(raw.get("tp")):
        assumptions.append(f"tp not stated -> TP {tp}: one replica over all {tp} GPUs (a single server's "
                           "tensor-parallel group; state tp, e.g. TP1xDP8, where the run used replicas)")
    if ep > 1:
        assumptions.append(f"EP {ep}: {model.name}'s routed experts dealt out to {ep} GPUs ({model.n_experts // ep} "
                           f"each), attention in {ep // tp} data-parallel group{'s' if ep > tp else ''} of TP {tp} "
                           "(the all-to-alls priced as the library's expert parallelism)")
    elif "ep" in str(raw.get("tp", "")).lower():
        assumptions.append(f"tp {raw.get('tp')!r}: experts split EP ways and each over TP / EP GPUs, so every GPU "
                           f"holds 1/{tp} of them as under plain TP {tp}: predicted as TP {tp}")
    if dp > 1:
        size = max(tp, ep)
        assumptions.append(f"{size * pp * dp} GPUs = {f'EP {ep}' if ep > 1 else f'TP {tp}'} x "
                           f"{f'PP {pp} x ' if pp > 1 else ''}DP {dp}: {dp} replicas share the load")
    # data types
    framework = raw.get("framework", "")
    engine, _version = _engine_of(framework)
    try:
        wd, w_stated = parse_dtype(raw.get("dtype_weights"))
        kd, k_stated = parse_dtype(raw.get("dtype_kv"))
    except ValueError as exc:
        raise _Refused("data type", str(exc)) from None
    if not (w_stated and k_stated):
        if dtype_policy == "reject":
            raise _Refused("data type unstated", "a data type is not stated (dtype_policy='reject')")
        if not w_stated:
            wd = implied or "bf16"
            assumptions.append(f"dtype_weights not stated -> {wd} (dtype policy 'engine-default': "
                               + ("the checkpoint's name says so)" if implied else "a 16-bit checkpoint)"))
        if not k_stated:
            if wd in ("fp16", "bf16"):
                kd = wd
            elif wd in ("fp8", "nvfp4", "mxfp4") and engine in ("tensorrt-llm", "nim"):
                kd = "fp8"
            else:
                kd = "bf16"
            why = {"fp8": "TensorRT-LLM/NIM FP8 and FP4 checkpoints quantise the KV cache to FP8",
                   "bf16": "kv_cache_dtype 'auto' is the model's activation dtype"}.get(kd, "the weights' dtype")
            assumptions.append(f"dtype_kv not stated -> {kd} (dtype policy 'engine-default': {why})")
    if model.expert_dtype is not None:
        model, wd = expert_dtypes(model, wd, w_stated, assumptions)
    if acc.name == "TPU-v5e" and wd == "fp8":
        raise _Refused("data type", "fp8 on a TPU v5e (no fp8 units)")
    cd, cd_note = compute_dtype_for(wd, acc)
    acc, peak_note = with_tensor_peak(acc, cd)
    if peak_note:
        assumptions.append(peak_note)
    if cd not in ("bf16", "fp16") and cd_note:
        assumptions.append(cd_note)
    elif cd_note:
        assumptions.append(cd_note)
    if ("bf16" if cd == "fp16" else cd) not in acc.dense_flops:
        raise _Refused("tensor peak", f"{acc.name} has no published {cd} tensor peak and no stated fallback")
    kind, scale, unit, static_scenario = METRICS[metric]
    load_kind, load_value = _load(raw)
    if load_kind == "unknown":
        raise _Refused("load", load_value)
    lengths = _lengths(raw)
    if lengths[0] == "unknown":
        raise _Refused("lengths", lengths[1])
    if metric in ("itl_ms", "tpot_ms") and lengths[0] == "fixed" and lengths[2] < 2:
        raise _Refused("lengths", f"{metric} of {lengths[2]}-token outputs: one output token has no gap between "
                                  "tokens to time")
    units, notes = raw.get("units", ""), raw.get("notes", "")
    statistic, stat_note = _statistic(units, metric)
    chunk = _chunk_tokens(units)
    if chunk > 1:
        assumptions.append(f"the row times streamed chunks of {chunk} tokens: the prediction is {chunk} decode "
                           "steps per gap")
    n_gpus = max(tp, ep) * pp * dp
    basis = _basis(metric, notes, units, n_gpus)
    value_si = value * scale
    common = dict(row=index, source=source, source_title=title, model=model, accelerator=acc, n_gpus=n_gpus,
                  tensor_parallel=tp, pipeline_parallel=pp, data_parallel=dp, expert_parallel=ep,
                  weight_dtype=wd, kv_dtype=kd,
                  compute_dtype=cd,
                  metric=metric, kind=kind, value=value_si, unit=unit, basis=basis, raw=dict(raw),
                  statistic=statistic, chunk_tokens=chunk)
    if pp > 1 and not (load_kind == "offline" and lengths[0] == "fixed" and kind == "throughput"):
        raise _Refused("pipeline parallel", f"tp {raw.get('tp')!r}: {pp} pipeline stages are modelled for the "
                                            "throughput of offline runs of fixed lengths (a runtime-chosen batch "
                                            "in micro-batches), not for this row's load or metric")
    # --- a static batch: the step model
    if load_kind == "static":
        if lengths[0] != "fixed":
            raise _Refused("lengths", f"a static batch over {lengths[1]!r}: a static run needs fixed lengths")
        if dp > 1:
            raise _Refused("parallelism", "a static batch on several replicas (DP > 1) does not say how the "
                                          "batch is split")
        batch, prompt, output = load_value, lengths[1], lengths[2]
        scenario = static_scenario
        if metric == "throughput_total_tok_s":
            raise _Refused("metric", "total-token throughput of a static run is not modelled")
        if scenario == "prefill":
            output = 1
        model, lifted = _lift_context(model, prompt + output)
        if lifted:
            assumptions.append(lifted)
            common["model"] = model
        fit = fits(model, acc, prompt + output, batch, weight_dtype=wd, kv_dtype=kd, tensor_parallel=tp,
                   expert_parallel=ep, gpu_memory_utilization=1.0, memory_bytes=acc.memory_bytes * GiB / GB)
        steps = _steps(model, acc, scenario, batch, prompt, output, wd, kd, cd, tp, ep=ep)
        return Measurement(batch_size=batch, prompt_len=prompt, output_len=output, scenario=scenario,
                           fits=bool(fit), assumptions=tuple(assumptions), steps=steps, **common)
    # --- everything else runs through an engine's scheduler
    offline = load_kind == "offline"
    served = offline and _served_over_http(framework, raw.get("notes", ""))
    cap = load_value if offline else None
    if cap is not None and dp > 1:
        if cap % dp:
            raise _Refused("parallelism", f"a max batch of {cap} does not split evenly over {dp} replicas")
        cap //= dp
        assumptions.append(f"the stated batch {load_value} is {cap} per replica")
    stated_len = re.search(r"max[_-]model[_-]len[\s=]+(\d+)", f"{framework} {raw.get('notes', '')}")
    scheduler = engine_scheduler(framework, acc, model, offline=offline and not served, batch_cap=cap,
                                 tensor_parallel=tp,
                                 max_model_len=int(stated_len.group(1)) if stated_len else None,
                                 dated=source_month(raw.get("source_date")))
    if served and "API server" in scheduler["label"]:
        assumptions.append("all requests at once, sent to a server (the row names its serving command): "
                           "the engine's API-server defaults, not its offline ones")
    if scheduler["engine"] == "unknown":
        assumptions.append(scheduler["label"])
    stated_n = _stated_requests(raw)
    if offline and lengths[0] == "fixed" and kind == "throughput":
        return _memory_wall_row(common, scheduler, lengths, stated_n, assumptions)
    if stat_note and kind == "time":
        assumptions.append(stat_note)
    mean_prompt, mean_output = _mean_lengths(lengths)
    model, lifted = _lift_context(model, _max_total(lengths))
    if lifted:
        assumptions.append(lifted)
        common["model"] = model
    load = ("closed", load_value // dp if load_kind == "closed" else 0) if load_kind == "closed" else (
        ("poisson", load_value / dp) if load_kind == "poisson" else
        ("capped", (load_value[0] / dp, load_value[1] // dp)) if load_kind == "capped" else ("offline", 0))
    if load_kind == "closed" and load_value % dp:
        raise _Refused("parallelism", f"{load_value} clients do not split evenly over {dp} replicas")
    if load_kind == "capped" and (load_value[1] % dp or load_value[1] < dp):
        raise _Refused("parallelism", f"a concurrency cap of {load_value[1]} does not split evenly over {dp} replicas")
    if load_kind == "capped":
        assumptions.append(f"Poisson {load_value[0]:g} req/s with at most {load_value[1]} requests in flight: the "
                           "benchmark's semaphore sends a request when it is due or when a slot frees, and times it "
                           "from the send (CappedPoisson)")
    if load_kind == "closed" and load[1] < 1:
        raise _Refused("load", f"{load_value} clients over {dp} replicas")
    if load_kind == "offline" and dp > 1:
        assumptions.append(f"the {stated_n or ''} requests split evenly over {dp} replicas")
    n = _sim_requests(load, (stated_n // dp) if stated_n else None, simulation)
    if offline and stated_n and stated_n // dp > n:
        if kind == "time":
            raise _Refused("simulation budget", f"the latencies of {stated_n} requests offered at once grow with "
                                                f"the queue; the simulation budget '{simulation}' replays {n}")
        assumptions.append(f"simulated with {n} of the {stated_n // dp} requests per replica offered at once "
                           "(the throughput of a shorter run)")
    if load[0] in ("poisson", "capped") and stated_n and stated_n // dp > n:
        assumptions.append(f"simulated with {n} of the {stated_n // dp} requests per replica (simulation budget "
                           f"'{simulation}'): a shorter run than measured, whose drain and any queue weigh differently")
    workload = lengths
    if lengths[0] == "dataset":
        workload = ("dataset", lengths[1]) + (_scales(lengths[1], lengths[3]) if lengths[3] else (1.0, 1.0))
    if lengths[0] == "dataset":
        assumptions.append(f"lengths: {lengths[2]}")
    memory_fraction = engine_memory_fraction(scheduler, model, acc, wd, tp, expert_parallel=ep)
    if ep > tp:
        scheduler = _per_attention_group(scheduler, ep // tp)
    kv_capacity = None
    if scheduler["reserve"] in ("full", "estimate"):
        tokens = int(max_kv_tokens(model, acc, weight_dtype=wd, kv_dtype=kd, tensor_parallel=tp,
                                   expert_parallel=ep, gpu_memory_utilization=memory_fraction))
        per_seq = mean_prompt + mean_output
        wall = max(1, int(tokens // max(float(kv_tokens_held(model, math.ceil(per_seq))), 1.0)))
        if wall < scheduler["max_seqs"]:
            scheduler = dict(scheduler, max_seqs=int(wall), label=scheduler["label"] + (
                f"; admission holds {wall} sequences: KV cache {tokens:,} tokens / {per_seq} tokens per request "
                + ("reserved whole" if scheduler["reserve"] == "full" else "expected (prompt + mean output)")))
    if scheduler["reserve"] == "slots":
        cache = _integer(re.search(r"cache length (\d+)", notes).group(1)) if re.search(
            r"cache length (\d+)", notes) else 2048
        kv_capacity = scheduler["max_seqs"] * cache
        if _max_total(lengths) > cache:
            raise _Refused("engine", f"requests of up to {_max_total(lengths)} tokens in a {cache}-token slot "
                                     "cache: a rolling-window cache, not modelled")
    if kv_capacity is None and model.sliding_window is not None:
        kv_capacity = _windowed_capacity(model, acc, wd, kd, tp, memory_fraction, mean_prompt + mean_output,
                                         assumptions, ep)
    spec_key = (model, acc.name, tp, wd, kd, cd, scheduler["policy"], scheduler["token_budget"],
                scheduler["max_seqs"], memory_fraction, kv_capacity, workload, load, n, scheduler["scheduler_steps"],
                scheduler["chunk_prompts"], ep)
    spec = specs.get(spec_key)
    if spec is None:
        spec = SimulationSpec(model, acc.name, tp, wd, kd, cd, scheduler["policy"], scheduler["token_budget"],
                              scheduler["max_seqs"], memory_fraction, kv_capacity, workload, load, n,
                              scheduler_steps=scheduler["scheduler_steps"], accelerator=acc,
                              chunk_prompts=scheduler["chunk_prompts"], expert_parallel=ep)
        try:
            _check_simulable(spec)
        except ValueError as exc:
            raise _Refused("simulator", str(exc)) from None
        specs[spec_key] = spec
    assumptions.append(f"scheduler: {scheduler['label']} [{scheduler['source']}]")
    return Measurement(batch_size=int(load_value) if load_kind == "closed" else 0, prompt_len=mean_prompt,
                       output_len=mean_output, scenario="simulated", fits=True, assumptions=tuple(assumptions),
                       scheduler=scheduler, sim=spec, **common)


def _scales(name, means):
    from .workloads import dataset_lengths

    d = dataset_lengths(name)
    return (float(means[0]) / float(d.prompt["mean"]), float(means[1]) / float(d.output["mean"]))


def _lift_context(model, total):
    if total > model.max_context_len:
        return (replace(model, max_context_len=int(total)),
                f"{model.name}'s maximum context lifted from {model.max_context_len} to {int(total)} tokens, "
                "the benchmark's")
    return model, None


def _mean_lengths(lengths):
    if lengths[0] == "fixed":
        return int(lengths[1]), int(lengths[2])
    if lengths[0] == "uniform":
        return int(round(sum(lengths[1]) / 2)), int(round(sum(lengths[2]) / 2))
    if len(lengths) > 3 and lengths[3]:
        return int(round(lengths[3][0])), int(round(lengths[3][1]))
    from .workloads import dataset_lengths

    d = dataset_lengths(lengths[1])
    return int(round(d.prompt.get("mean", d.prompt.get("median", 0)) or 0)), int(round(
        d.output.get("mean", d.output.get("median", 0)) or 0))


def _max_total(lengths):
    if lengths[0] == "fixed":
        return int(lengths[1] + lengths[2])
    if lengths[0] == "uniform":
        return int(lengths[1][1] + lengths[2][1])
    from .workloads import dataset_lengths

    d = dataset_lengths(lengths[1])
    if len(lengths) >= 4 and isinstance(lengths[2], float):
        scales = (lengths[2], lengths[3])
    elif len(lengths) >= 4 and lengths[3]:
        scales = _scales(lengths[1], lengths[3])
    else:
        scales = (1.0, 1.0)
    top = []
    for stats, scale in zip((d.prompt, d.output), scales):
        if "max" in stats:
            value = stats["max"]
        elif "uniform" in stats:
            value = stats["uniform"][1]
        else:
            value = max(stats.get("quantiles", {"1": 0}).values())
        top.append(max(1, round(value * scale)))
    return int(sum(top))


def _memory_wall_row(common, scheduler, lengths, stated_n, assumptions):
    """An offline run of fixed lengths whose batch the runtime chose: the static run at the batch it holds.

    With P pipeline stages the replica holds B sequences as P micro-batches of B / P (each with
    up to max_num_seqs, as each of vLLM's virtual engines), in a KV cache that spans the P
    stages; the run is the static run of one micro-batch, round by round (:func:`_steps`)."""
    model, acc = common["model"], common["accelerator"]
    tp, pp, dp, wd, kd, cd = (common["tensor_parallel"], common["pipeline_parallel"], common["data_parallel"],
                              common["weight_dtype"], common["kv_dtype"], common["compute_dtype"])
    prompt, output = lengths[1], lengths[2]
    model, lifted = _lift_context(model, prompt + output)
    if lifted:
        assumptions.append(lifted)
    ep = common["expert_parallel"]
    frac = engine_memory_fraction(scheduler, model, acc, wd, tp, pipeline_parallel=pp, expert_parallel=ep)
    if ep > tp:
        scheduler = _per_attention_group(scheduler, ep // tp)
    tokens = int(max_kv_tokens(model, acc, weight_dtype=wd, kv_dtype=kd, tensor_parallel=tp, expert_parallel=ep,
                               gpu_memory_utilization=frac, pipeline_parallel=pp))
    stages = f" on {pp} pipeline stages" if pp > 1 else ""
    if tokens <= 0:
        raise _Refused("memory", f"{model.name} {wd} does not fit on {tp} x {acc.name}{stages}")
    per_seq = prompt + output if scheduler["reserve"] == "full" else prompt + output / 2
    held = float(kv_tokens_held(model, math.ceil(per_seq)))     # a sliding window keeps only its w tokens
    wall = int(tokens // held)
    if held < per_seq:
        assumptions.append(f"{model.name}'s sliding-window layers keep {model.sliding_window} tokens: a "
                           f"sequence of {per_seq:g} tokens holds {held:g} tokens' worth of every layer's cache")
    cap = scheduler["max_seqs"] * pp
    batch = min(cap, wall, (stated_n // dp) if stated_n else cap)
    batch -= batch % pp
    if batch < 1:
        raise _Refused("memory", f"not {'one sequence' if pp == 1 else f'{pp} sequences (one per stage)'} of "
                                 f"{prompt + output} tokens fits beside the weights{stages}")
    limit = ("the KV cache" if batch == wall - wall % pp else
             "the engine's max_num_seqs" if batch == cap else "the requests offered")
    micro = f", as {pp} micro-batches of {batch // pp}" if pp > 1 else ""
    assumptions.append(
        f"runtime-chosen batch: {batch} sequences{micro} ({limit}; KV cache {tokens:,} tokens{stages} at memory "
        f"share {frac:.3f}, {per_seq:g} tokens per sequence "
        f"{'reserved whole' if scheduler['reserve'] == 'full' else 'on average'}, "
        f"max_num_seqs {scheduler['max_seqs']}{' per micro-batch' if pp > 1 else ''}) [{scheduler['label']}]")
    if pp > 1:
        assumptions.append(
            f"{pp} pipeline stages: a round of steps (one per micro-batch) takes the whole model's step time for "
            f"{batch // pp} sequences, {pp - 1} more step overheads (each stage prepares every micro-batch) and "
            f"{pp} activation sends over {acc.interconnect}")
    steps = _steps(model, acc, "static_run", batch // pp, prompt, output, wd, kd, cd, tp, pp, ep=ep)
    common = dict(common, model=model)
    return Measurement(batch_size=batch, prompt_len=prompt, output_len=output, scenario="memory_wall",
                       fits=True, assumptions=tuple(assumptions), steps=steps, scheduler=scheduler, **common)


def _per_attention_group(scheduler, groups):
    """The scheduler of an expert-parallel instance whose attention runs in ``groups`` data-parallel groups:
    each group schedules its own sequences (vLLM's DP engine cores, SGLang's DP-attention workers), so
    the one simulated scheduler holds ``groups`` times the sequences and tokens of one."""
    return dict(scheduler, max_seqs=scheduler["max_seqs"] * groups, token_budget=scheduler["token_budget"] * groups,
                label=scheduler["label"] + f"; x {groups} attention data-parallel groups (each its own scheduler)")


def _windowed_capacity(model, acc, wd, kd, tp, memory_fraction, length, assumptions, ep=1):
    """The simulator's KV capacity, in tokens, for a sliding-window model whose sequences end near ``length``.

    The simulator counts one cache slot per token; a windowed layer keeps only w tokens
    (:func:`servingmath.memory.kv_tokens_held`), as hybrid allocators do (vLLM V1, SGLang). The
    capacity is scaled by length / held(length): exact for requests of that length, an
    approximation for a spread of lengths (recorded on the row)."""
    tokens = int(max_kv_tokens(model, acc, weight_dtype=wd, kv_dtype=kd, tensor_parallel=tp, expert_parallel=ep,
                               gpu_memory_utilization=memory_fraction))
    held = float(kv_tokens_held(model, max(math.ceil(length), 1)))
    capacity = int(tokens * max(length, 1) / held)
    if capacity > tokens:
        assumptions.append(f"{model.name}'s sliding-window layers keep {model.sliding_window} tokens: a "
                           f"{length}-token request holds {held:g} tokens' worth of every layer's cache, so the "
                           f"{tokens:,}-token cache holds {capacity:,} tokens of such requests")
    return capacity if capacity > 0 else None


def _check_simulable(spec: SimulationSpec):
    """Build the spec's server once (errors early, naming the reason) and check the lengths fit."""
    server = _server(spec, PHYSICAL)
    cap = spec.kv_capacity or server.kv_capacity()
    top = _max_total(spec.workload)
    if top > cap:
        raise ValueError(f"a request of up to {top} tokens exceeds the KV cache of {cap} tokens")
    if spec.policy == "prefill-first":
        biggest = spec.workload[1] if spec.workload[0] == "fixed" else _max_total(spec.workload)
        if spec.workload[0] == "uniform":
            biggest = spec.workload[1][1]
        if biggest > spec.token_budget and spec.workload[0] != "dataset":
            raise ValueError(f"prompts of {biggest} tokens exceed the prefill budget of {spec.token_budget}")



# ------------------------------------------------------------------------------- the model

@dataclass(frozen=True)
class Efficiency:
    """The efficiencies and fixed costs a prediction uses (one accelerator family, or a named setting).

    Derived in the chapter "Validation: how good is the model?" (notebooks/14_validation.ipynb).

    Attributes
    ----------
    mbu : float in (0, 1]
        Memory-bandwidth utilisation: achieved / peak bytes/s.
    mfu : float in (0, 1]
        Model FLOP utilisation: achieved / peak FLOP/s.
    comm_per_layer : float >= 0
        Seconds added per layer and forward step when the model is split over N > 1 GPUs: the
        fitted cost of its two all-reduces beyond what the all-reduce model (the fields below)
        already charges.
    step_overhead : float >= 0
        Seconds added to every forward step (prefill or decode).
    allreduce_latency, allreduce_base_latency : float >= 0
        NCCL's per-ring-step and per-call latencies (:func:`servingmath.sharding.allreduce_time`).
    link_efficiency : float in (0, 1]
        Share of the link bandwidth an all-reduce reaches (with a protocol: Simple's).
    allreduce_protocol : {None, "auto", "LL", "LL128", "Simple"}
        NCCL's protocol-aware cost of each all-reduce (:func:`servingmath.sharding.nccl_allreduce_time`),
        which brings its own latencies (then the two latencies above must be 0); None: the plain ring.
    """

    mbu: float = 1.0
    mfu: float = 1.0
    comm_per_layer: float = 0.0
    step_overhead: float = 0.0
    allreduce_latency: float = 0.0
    allreduce_base_latency: float = 0.0
    link_efficiency: float = 1.0
    allreduce_protocol: str | None = None

    def __post_init__(self):
        check_fraction("mbu", self.mbu)
        check_fraction("mfu", self.mfu)
        check_fraction("link_efficiency", self.link_efficiency)
        if self.mbu <= 0 or self.mfu <= 0 or self.link_efficiency <= 0:
            raise ValueError("mbu, mfu and link_efficiency must be > 0")
        for name in ("comm_per_layer", "step_overhead", "allreduce_latency", "allreduce_base_latency"):
            check_nonnegative(name, getattr(self, name))
        if self.allreduce_protocol is not None:
            check_choice("allreduce_protocol", self.allreduce_protocol, ("auto", "LL", "LL128", "Simple"))
            if self.allreduce_latency or self.allreduce_base_latency:
                raise ValueError(f"allreduce_protocol = {self.allreduce_protocol!r} brings NCCL's own latencies: "
                                 "leave allreduce_latency and allreduce_base_latency at 0")

    def options(self, *, n_layers=None, tensor_parallel=1) -> dict:
        """The deployment options that give the same step times (for the simulator).

        ``comm_per_layer`` is, on the plain ring, half a latency on each of a layer's two
        all-reduce calls. NCCL's protocol model brings its own latencies, so there it is added to
        every step as ``n_layers x comm_per_layer`` when ``tensor_parallel > 1`` (the same seconds:
        every step runs every layer), which needs the model's ``n_layers``."""
        base_latency = float(self.allreduce_base_latency)
        step_overhead = float(self.step_overhead)
        if self.comm_per_layer and self.allreduce_protocol is None:
            base_latency += float(self.comm_per_layer) / 2
        elif self.comm_per_layer and check_integer("tensor_parallel", tensor_parallel, minimum=1) > 1:
            if n_layers is None:
                raise ValueError("options(): comm_per_layer with an allreduce_protocol needs n_layers (the "
                                 "model's layers) to become a per-step cost")
            step_overhead += float(self.comm_per_layer) * int(check_integer("n_layers", n_layers, minimum=1))
        return dict(mbu=float(self.mbu), mfu=float(self.mfu), step_overhead=step_overhead,
                    allreduce_latency=float(self.allreduce_latency), allreduce_base_latency=base_latency,
                    link_efficiency=float(self.link_efficiency), allreduce_protocol=self.allreduce_protocol)


#: The physical bound: every efficiency 1.0, no latency.
PHYSICAL = Efficiency()
_PHYSICAL = PHYSICAL

#: The fixed-guess baseline: the book's realistic setting (:data:`servingmath.settings.REALISTIC`):
#: MFU 0.5, MBU 0.75, 0.4 ms per step, NCCL's protocol-aware all-reduce (Simple at 80 % of the link).
BASELINE = Efficiency(mbu=REALISTIC["mbu"], mfu=REALISTIC["mfu"], step_overhead=REALISTIC["step_overhead"],
                      allreduce_latency=REALISTIC["allreduce_latency"],
                      allreduce_base_latency=REALISTIC["allreduce_base_latency"],
                      link_efficiency=REALISTIC["link_efficiency"],
                      allreduce_protocol=REALISTIC["allreduce_protocol"])

#: The family name of a pooled fit (``calibrate(..., pooled=True)``): every row as one family.
POOLED = "(pooled)"

#: The parameters :func:`calibrate` can fit, and their starting values.
PARAMETERS = {"mbu": 0.7, "mfu": 0.5, "comm_per_layer": 10e-6, "step_overhead": 1e-3}


def _allreduces_time(steps: _Steps, e: Efficiency):
    """Seconds of the all-reduces of each row: the plain ring (latencies + bytes at eta x the link) or,
    with a protocol, NCCL's cost of each call (:func:`servingmath.sharding.nccl_allreduce_time`). Every
    call of a row moves the same message, so the row's bandwidth term at the full link divided by its
    calls gives that message (in seconds at a link of 1 B/s, so the link's own bandwidth drops out)."""
    n = steps.tensor_parallel
    if e.allreduce_protocol is None:
        return (steps.communication / e.link_efficiency
                + np.where(n > 1, steps.allreduces * (e.allreduce_base_latency + 2 * (n - 1) * e.allreduce_latency),
                           0.0))
    calls = np.where(steps.allreduces > 0, steps.allreduces, 1.0)
    ring = np.where(n > 1, 2 * (n - 1) / n, 1.0)
    message = steps.communication / calls / ring          # bytes over a 1 B/s link
    per_call = nccl_allreduce_time(message, n.astype(int), 1.0, protocol=e.allreduce_protocol,
                                   link_efficiency=e.link_efficiency)
    return np.where(n > 1, steps.allreduces * per_call, 0.0)


def _step_times(steps: _Steps, e: Efficiency):
    """Hybrid overlap, as decode.decode_step_time: max(weights, matmuls) + max(KV, attention) + comm,
    plus the latencies."""
    comm = _allreduces_time(steps, e) + e.comm_per_layer * steps.layers_with_allreduce + steps.transfer / e.link_efficiency
    return (np.maximum(steps.weight / e.mbu, steps.linear / e.mfu)
            + np.maximum(steps.kv / e.mbu, steps.attention / e.mfu)
            + comm + e.step_overhead * steps.overheads)


def _work(m: Measurement) -> float:
    """What a throughput counts per run: output tokens (B x L_o) or requests (B)."""
    if m.metric == "throughput_total_tok_s":
        return m.batch_size * (m.prompt_len + m.output_len)
    return m.batch_size * (m.output_len if m.unit == "tok/s" else 1)


def _check_basis(basis):
    return check_choice("basis", basis, _BASES)


def _per_gpu(m, basis):
    return m.basis == "per_gpu" or (m.basis == "ambiguous" and basis == "per_gpu")


def _to_metric(m: Measurement, seconds, basis: str):
    """A modelled run time -> the measurement's metric (time, or throughput on its basis)."""
    if m.kind == "time":
        return seconds
    return _work(m) / np.asarray(seconds) / (m.gpus_per_replica if _per_gpu(m, basis) else 1)


def _efficiency(efficiency, name="efficiency") -> Efficiency:
    if efficiency is None:
        return PHYSICAL
    if efficiency == "realistic":
        return BASELINE
    if efficiency == "physical":
        return PHYSICAL
    if not isinstance(efficiency, Efficiency):
        raise ValueError(f"{name} must be an Efficiency, 'physical', 'realistic' or None, got {efficiency!r:.60}")
    return efficiency


#: Seeds of a simulated prediction (their mean is the prediction; :func:`simulate_measurement`
#: gives the spread).
SIM_SEEDS = (0, 1, 2)


def predict(measurement: Measurement, efficiency=None, basis: str = "total", *, seeds=None) -> float:
    """The model's value for a measurement's metric, in SI (seconds, tok/s or req/s).

    Derived in the chapter "Validation: how good is the model?" (notebooks/14_validation.ipynb).

    Parameters
    ----------
    measurement : Measurement
    efficiency : Efficiency, "physical", "realistic" or None
        Default (None): the physical bound.
    basis : {"total", "per_gpu"}
        How to read a throughput whose source does not say (``basis == "ambiguous"``).
    seeds : sequence of int, optional
        Simulated rows: the seeds whose mean is returned (default :data:`SIM_SEEDS`).

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
    e = _efficiency(efficiency)
    m = measurement
    if m.scenario == "simulated":
        values = [_simulated_value(m, e, seed, basis)
                  for seed in (SIM_SEEDS if seeds is None else check_seeds("seeds", seeds))]
        return float(np.mean(values))
    total = float(np.sum(_step_times(m.steps, e)))
    if m.scenario == "memory_wall":
        return float(_to_metric(m, total, basis) * (m.data_parallel if not _per_gpu(m, basis) else 1))
    return float(_to_metric(m, total, basis))


def physical_bound(measurement: Measurement, basis: str = "total") -> float:
    """The model at efficiency 1.0: a lower bound on a static time, an upper bound on a static throughput.

    Derived in the chapter "Validation: how good is the model?" (notebooks/14_validation.ipynb).

    For a simulated row it is the simulation at efficiency 1.0 (queueing included: a lower bound on
    ITL and TPOT, not strictly on a TTFT that waits for others' prefills).

    Examples
    --------
    >>> row = load_published_measurements().by_row(48)   # LMDeploy Llama-2-7B ITL at batch 1: 9.0 ms
    >>> round(physical_bound(row) * 1e3, 2)             # ms: 13.0 GB of weights / 2.039 TB/s
    6.5
    """
    return predict(measurement, None, basis)


def achieved_fraction(measurement: Measurement, basis: str = "total") -> float:
    """How close the measurement came to its physical bound: bound / measured for a time,
    measured / bound for a throughput. In (0, 1] exactly when the bound holds.

    Derived in the chapter "Validation: how good is the model?" (notebooks/14_validation.ipynb).

    Examples
    --------
    >>> row = load_published_measurements().by_row(48)   # 6.5 ms bound, 9.0 ms measured
    >>> round(achieved_fraction(row), 3)
    0.722
    """
    bound = physical_bound(measurement, basis)
    if measurement.kind == "time":
        return bound / measurement.value
    return measurement.value / bound


def bound_holds(measurement: Measurement, basis: str = "total") -> bool:
    """True when a measured time is >= its bound, or a measured throughput <= its bound.

    Derived in the chapter "Validation: how good is the model?" (notebooks/14_validation.ipynb).

    Examples
    --------
    >>> row = load_published_measurements().by_row(48)
    >>> bound_holds(row)
    True
    """
    return bool(achieved_fraction(measurement, basis) <= 1.0)


# ------------------------------------------------------------------------------- the simulator path

def _server(spec: SimulationSpec, e: Efficiency):
    from .simulate import Server

    return Server(spec.model, spec.accelerator, tensor_parallel=spec.tensor_parallel,
                  expert_parallel=spec.expert_parallel,
                  weight_dtype=spec.weight_dtype, kv_dtype=spec.kv_dtype, compute_dtype=spec.compute_dtype,
                  gpu_memory_utilization=spec.memory_fraction, kv_capacity_tokens=spec.kv_capacity,
                  **e.options(n_layers=spec.model.n_layers, tensor_parallel=spec.tensor_parallel))


def _workload(spec: SimulationSpec, seed: int):
    from .workloads import Uniform, Workload

    kind = spec.workload[0]
    n = spec.n_requests
    if kind == "fixed":
        return Workload.fixed(n, prompt_len=spec.workload[1], output_len=spec.workload[2])
    if kind == "uniform":
        (pl, ph), (ol, oh) = spec.workload[1], spec.workload[2]
        return Workload.sample(n, Uniform(max(pl, 1), ph), Uniform(max(ol, 1), oh), seed=seed, name="uniform")
    w = Workload.from_dataset(spec.workload[1], n, seed)
    sp, so = spec.workload[2], spec.workload[3]
    if sp == 1.0 and so == 1.0:
        return w
    return Workload(np.maximum(1, np.rint(w.prompt_lens * sp)).astype(int),
                    np.maximum(1, np.rint(w.output_lens * so)).astype(int), name=f"{spec.workload[1]} (rescaled)")


def simulation_result(measurement: Measurement, efficiency=None, *, seed: int = 0):
    """The whole simulation behind a simulated row: its :class:`servingmath.simulate.SimulationResult`.

    Derived in the chapter "Validation: how good is the model?" (notebooks/14_validation.ipynb).

    The run :func:`predict` summarises: the row's server (``efficiency``: an
    :class:`Efficiency`, ``"realistic"`` or None for the physical bound), its engine's
    scheduler, its lengths and its load, at one ``seed``; every request's record is there
    to look at.

    Examples
    --------
    >>> row = load_published_measurements().by_row(98)   # LMDeploy Llama-2-70B, 3000 requests at once
    >>> r = simulation_result(row, "realistic", seed=0)
    >>> len(r.records), round(r.metrics().output_throughput)
    (3000, 1276)
    """
    if not isinstance(measurement, Measurement) or measurement.scenario != "simulated":
        raise ValueError(f"measurement must be a simulated Measurement (path 'simulator'), got "
                         f"{getattr(measurement, 'path', type(measurement).__name__)!r:.60}")
    seed = check_integer("seed", seed, minimum=0, scalar=True)
    return _run_spec(measurement.sim, _efficiency(efficiency), int(seed))


def _run_spec(spec: SimulationSpec, e: Efficiency, seed: int):
    from . import simulate as sim
    from .workloads import CappedPoisson, ClosedLoop, Poisson, Timestamps

    server = _server(spec, e)
    workload = _workload(spec, seed)
    kind, value = spec.load
    arrivals = (ClosedLoop(clients=int(value)) if kind == "closed" else Poisson(float(value)) if kind == "poisson"
                else CappedPoisson(float(value[0]), int(value[1])) if kind == "capped"
                else Timestamps(np.zeros(len(workload))))
    if spec.policy == "chunked":
        policy = sim.ChunkedPrefill(token_budget=spec.token_budget, max_batch_size=spec.max_seqs,
                                    chunk_prompts=spec.chunk_prompts)
    else:
        policy = sim.ContinuousBatching(max_batch_size=spec.max_seqs,
                                        max_prefill_tokens=max(spec.token_budget, int(workload.prompt_lens.max())),
                                        scheduler_steps=spec.scheduler_steps)
    return sim.simulate(sim.SimulationConfig(server=server, workload=workload, arrivals=arrivals, policy=policy),
                        seed=seed)


@functools.lru_cache(maxsize=4096)
def _simulate_metrics(spec: SimulationSpec, e: Efficiency, seed: int) -> dict:
    """One simulated run of a spec at an efficiency and seed: the metrics benchmarks report (cached)."""
    from . import simulate as sim

    result = _run_spec(spec, e, seed)
    kind, value = spec.load
    m = result.metrics()
    out = {"request_throughput": m.request_throughput, "output_throughput": m.output_throughput,
           "total_token_throughput": m.total_token_throughput, "duration": m.duration,
           "mean_running": float(np.sum(result.records.e2e)) / m.duration, "preemptions": m.preemptions}
    r = result.records
    keep = np.ones(len(r), dtype=bool)
    if kind == "closed" and len(r) >= 2 * int(value):
        keep[: int(value)] = False          # the first wave, all sent at t = 0: a load generator's warm-up
    for name, values in (("ttft", r.ttft), ("tpot", r.tpot), ("e2e", r.e2e)):
        s = sim.Summary.of(values[keep])
        out.update({f"{name}.mean": s.mean, f"{name}.p50": s.p50, f"{name}.p90": s.p90, f"{name}.p95": s.p95,
                    f"{name}.p99": s.p99})
    s = m.itl
    out.update({"itl.mean": s.mean, "itl.p50": s.p50, "itl.p90": s.p90, "itl.p95": s.p95, "itl.p99": s.p99})
    return out


_SIM_KEYS = {"ttft_ms": "ttft", "itl_ms": "itl", "tpot_ms": "tpot", "e2e_ms": "e2e"}


def _simulated_value(m: Measurement, e: Efficiency, seed: int, basis: str) -> float:
    metrics = _simulate_metrics(m.sim, e, int(seed))
    if m.kind == "time":
        value = metrics[f"{_SIM_KEYS[m.metric]}.{m.statistic}"]
        return float(value * (m.chunk_tokens if m.metric == "itl_ms" else 1))
    key = {"throughput_req_s": "request_throughput", "throughput_total_tok_s": "total_token_throughput"}.get(
        m.metric, "output_throughput")
    total = metrics[key] * m.data_parallel
    return float(total / (m.n_gpus if _per_gpu(m, basis) else 1))


def simulate_measurement(measurement: Measurement, efficiency=None, *, seeds=SIM_SEEDS, basis="total") -> dict:
    """A simulated row's prediction over several seeds: mean, the seeds' values and a 95 % interval.

    Derived in the chapter "Validation: how good is the model?" (notebooks/14_validation.ipynb).

    The interval is mean +- t(0.975, n-1) s / sqrt(n) over the seeds (Student's t).

    Returns
    -------
    dict
        ``mean``, ``values`` (one per seed), ``low``, ``high`` (SI units).

    Examples
    --------
    >>> row = load_published_measurements().by_row(98)   # LMDeploy Llama-2-70B, 3000 requests at once
    >>> r = simulate_measurement(row, "realistic", seeds=(0,))
    >>> round(r["mean"]), round(row.value)              # tok/s: simulated, measured
    (1276, 1000)
    """
    if not isinstance(measurement, Measurement) or measurement.scenario != "simulated":
        raise ValueError("simulate_measurement takes a simulated Measurement (path 'simulator')")
    seeds = check_seeds("seeds", seeds)
    if not seeds:
        raise ValueError("seeds must name at least one seed")
    e = _efficiency(efficiency)
    values = np.array([_simulated_value(measurement, e, s, basis) for s in seeds])
    mean = float(values.mean())
    if len(values) < 2:
        return {"mean": mean, "values": values.tolist(), "low": mean, "high": mean}
    t = {2: 12.706, 3: 4.303, 4: 3.182, 5: 2.776, 6: 2.571, 7: 2.447, 8: 2.365, 9: 2.306, 10: 2.262}.get(
        len(values), 1.96)
    half = t * float(values.std(ddof=1)) / math.sqrt(len(values))
    return {"mean": mean, "values": values.tolist(), "low": mean - half, "high": mean + half}


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
    added to every forward step, the all-reduce options, ``setting="realistic"``...).

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
    profile_generation report. Derived in the chapter "Validation".

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
        if float(value) > _MAX_COUNT:
            raise ValueError(f"{name} must be at most {_MAX_COUNT:.0e} (sequences or tokens), got {value!r}")
    if not dep.is_scalar:
        raise ValueError("static_batch_time takes scalar deployment settings")
    check_nonnegative("comm_per_layer", comm_per_layer)
    b, lp, lo, n = int(batch_size), int(prompt_len), int(output_len), int(dep.tensor_parallel)
    steps = _steps(dep.model, dep.accelerator, "static_run", b, lp, lo, dep.weight_dtype, dep.kv_dtype,
                   dep.compute_dtype, n)
    ar = dep.allreduce
    e = Efficiency(mbu=float(dep.mbu), mfu=float(dep.mfu), comm_per_layer=float(comm_per_layer),
                   step_overhead=float(dep.step_overhead), allreduce_latency=float(ar.latency),
                   allreduce_base_latency=float(ar.base_latency), link_efficiency=float(ar.link_efficiency),
                   allreduce_protocol=ar.protocol)
    times = _step_times(steps, e)
    total_prefill, total_decode = float(times[0]), float(np.sum(times[1:]))
    return {"total": total_prefill + total_decode, "prefill": total_prefill, "decode": total_decode}[part]



# ------------------------------------------------------------------------------- calibration

#: the most sequences or tokens a count argument may hold (beyond it, float products overflow)
_MAX_COUNT = 10 ** 9


def _measurement_rows(measurements, name="measurements"):
    """``measurements`` as a list of :class:`Measurement`, or a TypeError naming ``name``."""
    if isinstance(measurements, (str, bytes)) or not hasattr(measurements, "__iter__"):
        raise TypeError(f"{name} must be a sequence of Measurement rows, got {measurements!r}")
    rows = list(measurements)
    bad = [m for m in rows if not isinstance(m, Measurement)]
    if bad:
        raise TypeError(f"{name} must hold Measurement rows (load_published_measurements().measurements), "
                        f"got {bad[0]!r}")
    return rows


def split_measurements(measurements, test_fraction=0.5, seed=0):
    """A seeded split into (train, test), stratified by accelerator family and metric kind.

    Derived in the chapter "Validation: how good is the model?" (notebooks/14_validation.ipynb).

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
    measurements = _measurement_rows(measurements)
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
    work = np.array([_work(m) if m.kind == "throughput" else np.nan for m in measurements], dtype=float)
    per_gpu = np.array([_per_gpu(m, basis) for m in measurements])
    divide = np.where(per_gpu, [m.gpus_per_replica for m in measurements], 1)
    times = np.array([1 if (p or m.scenario != "memory_wall") else m.data_parallel
                      for m, p in zip(measurements, per_gpu)])
    is_time = np.array([m.kind == "time" for m in measurements])
    measured = np.array([m.value for m in measurements])
    return stacked, index, work * times / divide, is_time, measured


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


def _loss_function(names, stacked, index, work, is_time, log_measured, weights, base=None):
    """The calibration loss, the weighted mean |ln(predicted / measured)| (``weights`` per row, summing
    to 1), as a function of the free variables.

    The same arithmetic as :func:`_step_times`, with the fitted values over ``base`` (the
    fields not fitted: default the realistic setting); the terms that do not depend on a fitted
    value are summed once."""
    base = BASELINE if base is None else base
    names = tuple(names)
    fixed = {k: getattr(base, k) for k in Efficiency.__dataclass_fields__ if k not in names}
    weight, linear, kv, attention = stacked.weight, stacked.linear, stacked.kv, stacked.attention
    latency_names = {"link_efficiency", "allreduce_latency", "allreduce_base_latency", "allreduce_protocol"}
    if latency_names & set(names):
        raise ValueError("calibrate fits mbu, mfu, comm_per_layer and step_overhead; the NCCL latencies come "
                         "from base")
    constant = _allreduces_time(stacked, base) + stacked.transfer / base.link_efficiency
    if "comm_per_layer" not in names:
        constant = constant + fixed["comm_per_layer"] * stacked.layers_with_allreduce
    if "step_overhead" not in names:
        constant = constant + fixed["step_overhead"] * stacked.overheads
    layers, count = stacked.layers_with_allreduce, stacked.overheads
    position = {k: i for i, k in enumerate(names)}

    def loss(x):
        values = [_from_free(k, v) for k, v in zip(names, x)]
        mbu = values[position["mbu"]] if "mbu" in position else fixed["mbu"]
        mfu = values[position["mfu"]] if "mfu" in position else fixed["mfu"]
        seconds = np.maximum(weight / mbu, linear / mfu) + np.maximum(kv / mbu, attention / mfu) + constant
        if "comm_per_layer" in position:
            seconds = seconds + values[position["comm_per_layer"]] * layers
        if "step_overhead" in position:
            seconds = seconds + values[position["step_overhead"]] * count
        seconds = np.bincount(index, weights=seconds, minlength=weights.size)
        predicted = np.where(is_time, seconds, work / seconds)
        return float((weights * np.abs(np.log(predicted) - log_measured)).sum())

    return loss


def _trainable(m, basis):
    return (isinstance(m, Measurement) and m.scenario != "simulated" and m.fits and bound_holds(m, basis))


#: how :func:`calibrate` weighs its training rows: ``"source"`` (each source's rows share one weight, so
#: a source counts once however many rows it published) or ``"row"`` (every row alike).
WEIGHTINGS = ("source", "row")


def row_weights(measurements, weighting="source") -> np.ndarray:
    """The weight of each training row in :func:`calibrate`'s loss, summing to 1.

    Derived in the chapter "Validation: how good is the model?" (notebooks/14_validation.ipynb).

    ``"source"``: a row of a source with n rows weighs 1 / (n × number of sources), so every
    source weighs the same. Rows of one source share its engine, its version and its lab: they
    are not independent draws, and a calibration meant for a source it has not seen should not
    be mostly the one that published the most rows. ``"row"``: 1 / (number of rows).

    >>> rows = load_published_measurements().measurements[:3]
    >>> [round(float(w), 3) for w in row_weights(rows, "row")]
    [0.333, 0.333, 0.333]
    """
    check_choice("weighting", weighting, WEIGHTINGS)
    rows = _measurement_rows(measurements)
    if not rows:
        raise ValueError("measurements must hold at least one Measurement row")
    if weighting == "row":
        return np.full(len(rows), 1 / len(rows))
    counts = defaultdict(int)
    for m in rows:
        counts[m.source_title] += 1
    return np.array([1 / (counts[m.source_title] * len(counts)) for m in rows])


def calibrate(measurements, basis="total", parameters=("mbu", "mfu", "comm_per_layer", "step_overhead"), *,
              base=None, pooled=False, weighting="source"):
    """Fit a few efficiencies per accelerator family to measured rows.

    Derived in the chapter "Validation: how good is the model?" (notebooks/14_validation.ipynb).

    Parameters
    ----------
    measurements : sequence of Measurement
        The training rows. Simulated rows, rows that beat their physical bound and rows whose
        batch does not fit are left out (each simulated prediction is a whole simulation, too
        slow inside a search; no efficiency <= 1 explains a beaten bound).
    basis : {"total", "per_gpu"}
        Reading of ambiguous throughputs.
    parameters : tuple of str
        Which :class:`Efficiency` fields to fit (:data:`PARAMETERS`); the others keep their
        defaults (1.0, or no latency). ``comm_per_layer`` is fitted only for a family with a
        tensor-parallel training row.
    base : Efficiency, optional
        Where the fields not fitted come from. Default :data:`BASELINE`, the realistic setting:
        each all-reduce costs what NCCL's protocol-aware model says (LL / LL128 / Simple at 80 % of
        the link), so ``comm_per_layer`` fits only what that model leaves out, and a field not in
        ``parameters`` keeps its realistic value. :data:`PHYSICAL` (efficiencies 1.0, an ideal ring
        with no latency) makes ``comm_per_layer`` absorb every all-reduce latency; out of sample
        (leave one source out, chapter 14) that fits worse.
    pooled : bool
        Fit every row together, as one family named :data:`POOLED`: the fallback
        :func:`leave_one_source_out` uses for a family without training rows of its own.
    weighting : {"source", "row"}
        How the rows of a family weigh in its loss (:func:`row_weights`): ``"source"`` (default)
        gives every source the same weight, ``"row"`` every row. Leaving one source out
        (chapter 14), weighing sources alike predicts the unseen source better.

    Returns
    -------
    dict
        family -> :class:`Efficiency`, for the families with training rows (others:
        :func:`family_efficiency`); with ``pooled=True``, ``{POOLED: Efficiency}``.

    Notes
    -----
    Minimises the weighted mean absolute log error, mean |ln(predicted / measured)|, which treats 10 %
    too high and 10 % too low alike and is robust to a few odd rows, by a deterministic
    Nelder-Mead search (MBU and MFU kept in (0, 1), latencies >= 0, by a change of variables).

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
    usable = [m for m in _measurement_rows(measurements) if _trainable(m, basis)]
    if not usable:
        raise ValueError("calibrate needs at least one step-model Measurement that fits and respects its bound")
    pooled = check_bool("pooled", pooled)
    check_choice("weighting", weighting, WEIGHTINGS)
    families = defaultdict(list)
    for m in usable:
        families[POOLED if pooled else m.family].append(m)
    result = {}
    for family in sorted(families):
        rows = families[family]
        names = [p for p in parameters
                 if p != "comm_per_layer" or any(m.tensor_parallel > 1 for m in rows)]
        stacked, index, work, is_time, measured = _stack(rows, basis)
        loss = _loss_function(names, stacked, index, work, is_time, np.log(measured),
                              row_weights(rows, weighting), base)
        x = [_to_free(k, PARAMETERS[k]) for k in names]
        x, best = _nelder_mead(loss, x)
        x2, again = _nelder_mead(loss, x)      # restart from the best point: Nelder-Mead can stall on a face
        if again < best:
            x = x2
        fitted = {k: float(_from_free(k, v)) for k, v in zip(names, x)}
        result[family] = replace(BASELINE if base is None else base, **fitted)
    return result


def family_efficiency(family: str, fitted: dict, fallback: Efficiency = BASELINE) -> tuple:
    """(Efficiency, note) for a family: the fitted one, or the stated fallback.

    Derived in the chapter "Validation: how good is the model?" (notebooks/14_validation.ipynb).

    ``fallback`` is the realistic setting (:data:`BASELINE`) by default; the note names it, or
    says "a pooled fit" for any other Efficiency (what :func:`leave_one_source_out` passes:
    ``calibrate(..., pooled=True)``).

    >>> e, note = family_efficiency("TPU-v5e", {})
    >>> (e.mbu, e.mfu), note.split(":")[0]
    ((0.75, 0.5), 'fallback')
    """
    if not isinstance(family, str):
        raise TypeError(f"family must be a family's name (str), got {family!r}")
    if not isinstance(fitted, dict):
        raise TypeError(f"fitted must be calibrate()'s dict (family -> Efficiency), got {fitted!r}")
    if not isinstance(fallback, Efficiency):
        raise TypeError(f"fallback must be an Efficiency, got {fallback!r}")
    if family in fitted:
        return fitted[family], "fitted"
    what = "the realistic setting" if fallback == BASELINE else "a pooled fit over every family's rows"
    return fallback, f"fallback: {what} (no training rows for this family)"


@functools.lru_cache(maxsize=4)
def book_calibration(basis: str = "per_gpu", *, weighting: str = "source") -> tuple:
    """The calibration chapter 14 fits: every family on the trainable rows of the book's two data files.

    Derived in the chapter "Validation: how good is the model?" (notebooks/14_validation.ipynb).

    Returns ``(fitted, pooled, rows)``: ``{family: Efficiency}`` (:func:`calibrate` with its four
    parameters over NCCL's all-reduce cost), the pooled fit over the same rows for a family they
    lack (:func:`family_efficiency`'s fallback), and the number of rows fitted. What
    ``python -m servingmath.validate --setting calibrated`` predicts with. ``weighting``: how the
    rows weigh (:func:`row_weights`; default every source alike).

    >>> fitted, pooled, rows = book_calibration()
    >>> family_efficiency("Hopper", fitted, pooled)[1], family_efficiency("TPU-v6e", fitted, pooled)[1][:8]
    ('fitted', 'fallback')
    """
    _check_basis(basis)
    rows = [m for path in (default_data_path(), open_data_path())
            for m in load_published_measurements(path).measurements if _trainable(m, basis)]
    fitted = calibrate(rows, basis=basis, weighting=weighting)
    pooled = calibrate(rows, basis=basis, pooled=True, weighting=weighting)[POOLED]
    return fitted, pooled, len(rows)


def calibration_table(fitted: dict, measurements=(), fallback: Efficiency = BASELINE) -> list:
    """One row per catalog family: its accelerators, training rows and the efficiencies it will use.

    Derived in the chapter "Validation: how good is the model?" (notebooks/14_validation.ipynb).

    Returns
    -------
    list of dict
        ``family``, ``accelerators``, ``rows`` (training rows given), ``status`` (``"fitted"`` or
        the fallback note) and ``efficiency``.

    Examples
    --------
    >>> table = calibration_table({})              # nothing fitted: every family falls back
    >>> [row["family"] for row in table][:3], table[0]["status"].split(":")[0]
    (['A10', 'A100', 'Blackwell'], 'fallback')
    """
    if not isinstance(fitted, dict):
        raise TypeError(f"fitted must be calibrate()'s dict (family -> Efficiency), got {fitted!r}")
    if isinstance(measurements, (str, bytes)) or not hasattr(measurements, "__iter__"):
        raise TypeError(f"measurements must be a sequence of Measurement rows, got {measurements!r}")
    counts = Counter(m.family for m in measurements if isinstance(m, Measurement))
    members = defaultdict(list)
    for name, family in catalog_families().items():
        members[family].append(name)
    for family in fitted:
        members.setdefault(family, [family])
    table = []
    for family in sorted(members):
        e, status = family_efficiency(family, fitted, fallback)
        table.append({"family": family, "accelerators": tuple(members[family]), "rows": int(counts[family]),
                      "status": status, "efficiency": e})
    return table


def percentage_errors(measurements, efficiencies=None, basis="total", *, fallback=None, seeds=None):
    """Signed errors (predicted - measured) / measured of each row, as an array.

    Derived in the chapter "Validation: how good is the model?" (notebooks/14_validation.ipynb).

    ``efficiencies``: family -> :class:`Efficiency` (from :func:`calibrate`), one
    :class:`Efficiency` (or ``"realistic"``) for every row, or ``None`` for the physical bound.
    A family without an entry raises, unless ``fallback`` is given.

    Examples
    --------
    >>> row = load_published_measurements().by_row(48)   # 9.28 ms predicted at MBU 0.7, 9.0 measured
    >>> percentage_errors([row], Efficiency(mbu=0.7)).round(3)
    array([0.031])
    """
    _check_basis(basis)
    if not isinstance(efficiencies, dict):
        _efficiency(efficiencies, "efficiencies")
    errors = []
    for m in _measurement_rows(measurements):
        if isinstance(efficiencies, dict):
            if m.family not in efficiencies and fallback is None:
                raise KeyError(f"no calibrated efficiency for family {m.family!r} "
                               f"(have: {', '.join(sorted(efficiencies))})")
            e = efficiencies.get(m.family, fallback)
        else:
            e = efficiencies
        errors.append(predict(m, e, basis, seeds=seeds) / m.value - 1)
    return np.array(errors, dtype=float)


def error_summary(measurements, efficiencies=None, basis="total", *, fallback=None, seeds=None) -> dict:
    """Per metric: (rows, median and worst absolute percentage error, as fractions).

    Derived in the chapter "Validation: how good is the model?" (notebooks/14_validation.ipynb).

    >>> data = load_published_measurements()
    >>> summary = error_summary(data.measurements[:4])
    >>> sorted(summary)
    ['throughput_tok_s_per_gpu']
    """
    measurements = _measurement_rows(measurements)
    errors = np.abs(percentage_errors(measurements, efficiencies, basis, fallback=fallback, seeds=seeds))
    metrics = np.array([m.metric for m in measurements])
    return {str(metric): (int(np.sum(metrics == metric)), float(np.median(errors[metrics == metric])),
                          float(np.max(errors[metrics == metric])))
            for metric in sorted(set(metrics))}


# ------------------------------------------------------------------------------- leave one source out

@dataclass(frozen=True, eq=False)
class LosoResult:
    """Leave-one-source-out predictions of every row beside the fixed-guess baseline.

    Derived in the chapter "Validation: how good is the model?" (notebooks/14_validation.ipynb).

    Attributes
    ----------
    measurements : tuple of Measurement
    loso, baseline, bound : ndarray
        Each row's prediction (SI): calibrated on the other sources (fallback where its family
        has no training rows elsewhere), by :data:`BASELINE`, and by the physical bound.
    fallback : ndarray of bool
        Rows whose family had no training rows in their fold (predicted by the fallback).
    folds : dict
        source title -> {family: Efficiency} fitted without that source.
    """

    measurements: tuple
    loso: np.ndarray
    baseline: np.ndarray
    bound: np.ndarray
    fallback: np.ndarray
    folds: dict

    def errors(self, which="loso") -> np.ndarray:
        """Signed errors (predicted / measured - 1) of ``"loso"``, ``"baseline"`` or ``"bound"``."""
        check_choice("which", which, ("loso", "baseline", "bound"))
        measured = np.array([m.value for m in self.measurements])
        return getattr(self, which) / measured - 1

    def summary(self, by="group") -> dict:
        """Per metric group (``by="group"``), metric (``"metric"``), path (``"path"``) or source
        (``"source"``): rows, median |error| of LOSO and of the baseline, and the share within 15 %.
        """
        check_choice("by", by, ("group", "metric", "path", "source"))
        keys = np.array([getattr(m, by) if by != "source" else m.source for m in self.measurements])
        lo, base = np.abs(self.errors("loso")), np.abs(self.errors("baseline"))
        out = {}
        for key in dict.fromkeys(keys.tolist()):
            sel = keys == key
            out[key] = {"rows": int(sel.sum()), "loso": float(np.median(lo[sel])),
                        "baseline": float(np.median(base[sel])),
                        "loso_within_15": float(np.mean(lo[sel] <= 0.15)),
                        "baseline_within_15": float(np.mean(base[sel] <= 0.15))}
        return out


def leave_one_source_out(measurements, *, basis="per_gpu",
                         parameters=("mbu", "mfu", "comm_per_layer", "step_overhead"), fallback="pooled",
                         seeds=(0,), base=None, bound=True, weighting="source") -> LosoResult:
    """Predict each source's rows from a calibration on all the other sources.

    Derived in the chapter "Validation: how good is the model?" (notebooks/14_validation.ipynb).

    For each source title s: :func:`calibrate` on the trainable rows of the other sources
    (step-model and memory-wall rows that fit and respect their bound), then predict every row
    of s with its family's fitted efficiencies, or with the fallback where the other sources
    have no row of that family: ``fallback="pooled"`` (default) fits those same training rows as
    one family (what engines reach on the hardware we have seen, applied to hardware we have
    not), or an :class:`Efficiency` (e.g. :data:`BASELINE`, the realistic setting) is used as
    given. Beside it, every row predicted by :data:`BASELINE` and by the physical bound.

    ``seeds``: seeds of the simulated rows (default one; the spread of several is
    :func:`simulate_measurement`'s to report). ``base``: the fields :func:`calibrate` does not
    fit. ``bound=False`` leaves the simulated rows' physical bound out (NaN), to save time.
    ``weighting``: how :func:`calibrate` weighs the training rows (:func:`row_weights`).

    Examples
    --------
    >>> rows = [m for m in load_published_measurements().measurements if m.scenario == "decode_step"]
    >>> r = leave_one_source_out(rows)          # two sources: each predicted from the other's fit
    >>> len(r.loso), int(r.fallback.sum()), sorted(r.folds[rows[0].source_title])
    (21, 0, ['A100'])
    """
    _check_basis(basis)
    ms = tuple(_measurement_rows(measurements))
    if not ms:
        raise ValueError("measurements must hold at least one Measurement row")
    seeds = check_seeds("seeds", seeds)
    bound = check_bool("bound", bound)
    check_choice("weighting", weighting, WEIGHTINGS)
    if not (isinstance(fallback, Efficiency) or fallback == "pooled"):
        raise ValueError(f"fallback must be 'pooled' or an Efficiency, got {fallback!r:.60}")
    titles = list(dict.fromkeys(m.source_title for m in ms))
    loso = np.empty(len(ms))
    used_fallback = np.zeros(len(ms), dtype=bool)
    folds = {}
    for title in titles:
        others = [m for m in ms if m.source_title != title and _trainable(m, basis)]
        fitted = calibrate(others, basis=basis, parameters=parameters, base=base,
                           weighting=weighting) if others else {}
        folds[title] = fitted
        fold_fallback = fallback
        if fallback == "pooled":
            fold_fallback = (calibrate(others, basis=basis, parameters=parameters, base=base, pooled=True,
                                       weighting=weighting)[POOLED] if others else BASELINE)
        for i, m in enumerate(ms):
            if m.source_title == title:
                e, status = family_efficiency(m.family, fitted, fold_fallback)
                used_fallback[i] = status != "fitted"
                loso[i] = predict(m, e, basis, seeds=seeds)
    baseline = np.array([predict(m, BASELINE, basis, seeds=seeds) for m in ms])
    bound = np.array([predict(m, PHYSICAL, basis, seeds=seeds) if (bound or m.scenario != "simulated")
                      else np.nan for m in ms])
    return LosoResult(ms, loso, baseline, bound, used_fallback, folds)


# ------------------------------------------------------------------------------- the realistic setting's provenance

def realistic_provenance(data=None, basis="per_gpu") -> dict:
    """The numbers :data:`servingmath.settings.REALISTIC` quotes as its provenance, recomputed.

    Derived in the chapter "Validation: how good is the model?" (notebooks/14_validation.ipynb).

    * ``decode_fraction``: the median achieved fraction of the physical bound of the decode
      steps (ITL, TPOT rows) at batch <= 16 that fit, and their count and sources;
    * ``prefill_fraction``: the same of the prefills (TTFT rows) of >= 512 tokens;
    * ``check_7b``: the fraction of the bound the realistic MBU and step overhead reproduce
      for a 6.5 ms weight read (a 7-8B model on an A100): 6.5 / (6.5 / MBU + overhead).

    Examples
    --------
    >>> p = realistic_provenance()
    >>> p["decode_rows"], round(p["decode_fraction"], 2), p["prefill_rows"], round(p["prefill_fraction"], 2)
    (12, 0.69, 19, 0.5)
    """
    data = load_published_measurements() if data is None else data
    ms = data.measurements if isinstance(data, PublishedData) else tuple(data)
    decode = [m for m in ms if m.scenario == "decode_step" and m.batch_size <= 16 and m.fits]
    prefill = [m for m in ms if m.scenario == "prefill" and m.prompt_len >= 512]
    t_w = 6.5e-3
    return {
        "decode_fraction": float(np.median([achieved_fraction(m, basis) for m in decode])),
        "decode_rows": len(decode), "decode_sources": sorted({m.source for m in decode}),
        "decode_accelerators": sorted({m.accelerator.name for m in decode}),
        "prefill_fraction": float(np.median([achieved_fraction(m, basis) for m in prefill])),
        "prefill_rows": len(prefill), "prefill_sources": sorted({m.source for m in prefill}),
        "prefill_accelerators": sorted({m.accelerator.name for m in prefill}),
        "check_7b": t_w / (t_w / REALISTIC["mbu"] + REALISTIC["step_overhead"]),
    }


# ------------------------------------------------------------------------------- continuous batching

def littles_law_concurrency(output_throughput, output_len, ttft, tpot):
    """Requests in flight implied by a benchmark's own numbers (Little's law, L = X W).

    Derived in the chapter "Validation: how good is the model?" (notebooks/14_validation.ipynb).

    X = output tokens/s / output tokens per request (requests/s); W = E2E = TTFT + (L_o - 1) TPOT.
    A closed loop of C clients without think time must give L = C (each client always has one
    request in flight); L well below C means the numbers do not describe the same run.

    Parameters
    ----------
    output_throughput : float or array
        Output tokens per second of the whole run.
    output_len : float or array
        Output tokens per request (mean).
    ttft, tpot : float or array
        Seconds (means).

    Examples
    --------
    >>> round(littles_law_concurrency(214.56, 1000, 0.01026, 0.00463), 2)   # 1 client: L ~ 1
    1.0
    """
    x = check_positive("output_throughput", output_throughput)
    lo = check_positive("output_len", output_len)
    w = check_nonnegative("ttft", ttft) + (lo - 1) * check_nonnegative("tpot", tpot)
    return scalar_or_array(x / lo * w)


def fit_knee(x, y):
    """The knee of a curve that turns up: the breakpoint of the best continuous two-segment line.

    Derived in the chapter "Validation: how good is the model?" (notebooks/14_validation.ipynb).

    Fits y = a + b x for x <= k and a + b k + c (x - k) beyond (least squares, continuous at k,
    k scanned over a fine grid between the second and the second-to-last x), and returns k with
    the two slopes.

    Returns
    -------
    dict
        ``knee`` (x units), ``slope_before``, ``slope_after``, ``rss``.

    Raises
    ------
    ValueError
        For fewer than 4 points, or x not increasing.

    Examples
    --------
    >>> k = fit_knee([1, 2, 4, 8, 16, 32], [1.0, 1.0, 1.0, 1.0, 9.0, 25.0])
    >>> round(k["knee"], 1)
    8.0
    """
    try:
        x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    except (TypeError, ValueError) as error:
        raise ValueError(f"fit_knee: x and y must be numbers ({error})") from None
    if x.ndim != 1 or x.shape != y.shape or x.size < 4:
        raise ValueError(f"fit_knee needs at least 4 (x, y) points of equal length, got {x.shape} and {y.shape}")
    if np.any(np.diff(x) <= 0) or not np.all(np.isfinite(x)) or not np.all(np.isfinite(y)):
        raise ValueError("x must be finite and strictly increasing, y finite")
    best = None
    for k in np.linspace(x[1], x[-2], 400):
        design = np.column_stack([np.ones_like(x), np.minimum(x, k), np.maximum(x - k, 0.0)])
        coef, *_ = np.linalg.lstsq(design, y, rcond=None)
        rss = float(np.sum((design @ coef - y) ** 2))
        if best is None or rss < best[0] - 1e-15:
            best = (rss, float(k), float(coef[1]), float(coef[2]))
    return {"knee": best[1], "slope_before": best[2], "slope_after": best[3], "rss": best[0]}


def concurrency_sweeps(measurements) -> list:
    """Closed-loop rows grouped into sweeps: one per (source, model, accelerator, TP, lengths, engine).

    Derived in the chapter "Validation: how good is the model?" (notebooks/14_validation.ipynb).

    Returns
    -------
    list of dict
        ``key`` (a description), ``concurrency`` (sorted), and per metric (``ttft_ms``,
        ``tpot_ms``, ``itl_ms``, ``throughput_tok_s``...) the list of Measurements in
        concurrency order (None where a level lacks that metric).

    Examples
    --------
    >>> opened = load_published_measurements(open_data_path(), simulation="small")
    >>> [(s["concurrency"], sorted(s)) for s in concurrency_sweeps(opened.measurements)
    ...  if s["key"].startswith("NVIDIA NIM")]
    [([1, 5, 25, 50, 100, 150, 200, 250], ['concurrency', 'key', 'throughput_tok_s', 'tpot_ms', 'ttft_ms'])]
    """
    groups = defaultdict(dict)
    for m in _measurement_rows(measurements):
        if m.sim is None or m.sim.load[0] != "closed":
            continue
        key = (m.source, m.model.name, m.accelerator.name, m.tensor_parallel, m.sim.workload,
               m.raw.get("framework", ""))
        groups[key].setdefault(m.metric, {})[m.batch_size] = m
    sweeps = []
    for key, per_metric in groups.items():
        levels = sorted({c for rows in per_metric.values() for c in rows})
        if len(levels) < 2:
            continue
        sweeps.append({"key": f"{key[0]}: {key[1]} on {key[3]} x {key[2]}, {key[5]}", "concurrency": levels,
                       **{metric: [rows.get(c) for c in levels] for metric, rows in per_metric.items()}})
    return sweeps


# ------------------------------------------------------------------------------- implied efficiency

@dataclass(frozen=True)
class ImpliedEfficiency:
    """What one measured step time implies (floats, or arrays when inputs were arrays).

    Derived in the chapter "Validation: how good is the model?" (notebooks/14_validation.ipynb).

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

    Derived in the chapter "Validation: how good is the model?" (notebooks/14_validation.ipynb).

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
    for name, value in (("batch_size", batch_size), ("context_len", context_len), ("prompt_len", prompt_len)):
        arr = check_nonnegative(name, value)
        if arr.size and np.any(arr > _MAX_COUNT):
            raise ValueError(f"{name} must be at most {_MAX_COUNT:.0e} (sequences or tokens), got {value!r}")
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

    Derived in the chapter "Validation: how good is the model?" (notebooks/14_validation.ipynb).

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

    Derived in the chapter "Validation: how good is the model?" (notebooks/14_validation.ipynb).

    >>> round(implied_mfu("Llama-2-7B", "A100-SXM4-80GB", 0.133, phase="prefill", prompt_len=2048,
    ...                   weight_dtype="fp16", compute_dtype="fp16"), 3)   # TensorRT-LLM TTFT
    0.666
    """
    args = (model,) if isinstance(model, Deployment) else (model, accelerator)
    return implied_efficiency(*args, measured_time if measured_time is not None else accelerator, **kwargs).mfu
