"""Precompute the Pareto-front explorer's design space for the static HTML book.

    .venv/bin/python tools/explorer_data.py OUT_DIR     # writes OUT_DIR/explorer-index.js and one file a model

The book's explorer (book/_static/explorer.js, drawn with Plotly) runs with no kernel and no
network, so everything it shows is computed here, by the library, on a grid: every default model
x accelerator x context length x setting, and in each, every weight data type x KV data type x
tensor-parallel degree x batch size (the widget's grid, ``explorer.DEFAULT_BATCH_SIZES``). For
each (model, accelerator, context, setting) it stores

* the points of the space (TPOT, throughput per GPU, to 4 significant digits: enough for a
  plot) as one curve over the batch sizes per configuration, and which are on the Pareto front;
* the summary text of every configuration, made by ``servingmath.explorer.summary``: the page
  prints the library's own words and numbers, nothing computed in JavaScript.

Two settings: the physical bound (the library's defaults) and :data:`REALISTIC`. The files are
JavaScript (``window.SERVINGMATH_EXPLORER...``), loaded with ``<script>`` tags, so the page also
works opened from disk (``file://``, where a browser refuses to ``fetch`` a JSON file). One file a
model (about 1.5 MB), loaded when the reader picks that model. About 5 s on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

import numpy as np

from servingmath import explorer
from servingmath.memory import valid_tensor_parallel_degrees
from servingmath.models import get_model
from servingmath.settings import PHYSICAL, REALISTIC

#: The explorer's two settings are the library's (:mod:`servingmath.settings`): the physical bound
#: and the book's one realistic setting, calibrated in the chapter "Validation".
SETTINGS = {
    "physical bound": (PHYSICAL, "the physical bound: peak FLOP/s and bandwidth, free all-reduces"),
    "realistic": (REALISTIC, "realistic: " + ", ".join(f"{k} = {v:g}" if isinstance(v, (int, float)) else
                                                        f"{k} = {v}" for k, v in REALISTIC.items())),
}
TPOT_SLO = 0.05
SIGNIFICANT = 4
VERSION = 1


def _round(values) -> list[float]:
    return [float(f"{v:.{SIGNIFICANT}g}") for v in np.asarray(values, dtype=float)]


def config_key(weight_dtype: str, kv_dtype: str, tensor_parallel: int) -> str:
    return f"{weight_dtype}|{kv_dtype}|{int(tensor_parallel)}"


def space_key(model: str, accelerator: str, context_len: int, setting: str) -> str:
    return f"{model}|{accelerator}|{int(context_len)}|{setting}"


def model_file(model: str) -> str:
    return "explorer-" + re.sub(r"[^A-Za-z0-9.]+", "-", model).strip("-").lower() + ".js"


def one_space(model: str, accelerator: str, context_len: int, setting: str) -> dict:
    """The explorer's data for one model, accelerator, context and setting (see the module doc)."""
    options, _ = SETTINGS[setting]
    data = explorer.frontier_data(model, accelerator, context_len=context_len, **options)
    space = data["space"]
    configs = [config_key(w, k, n) for w, k, n in zip(space["weight_dtype"], space["kv_dtype"],
                                                       space["tensor_parallel"])]
    order = list(dict.fromkeys(configs))
    index = {c: i for i, c in enumerate(order)}
    summaries = {}
    for weight_dtype in explorer.WEIGHT_DTYPES:
        for kv_dtype in explorer.KV_DTYPES:
            for tp in explorer.TENSOR_PARALLEL:
                if tp not in valid_tensor_parallel_degrees(get_model(model)):
                    continue
                picked = explorer.select(data, weight_dtype, kv_dtype, tp)
                summaries[config_key(weight_dtype, kv_dtype, tp)] = explorer.summary(picked, TPOT_SLO)
    batch_index = np.searchsorted(explorer.DEFAULT_BATCH_SIZES, space["batch_size"])
    config_index = np.array([index[c] for c in configs], dtype=int)
    curves = []
    for i, key in enumerate(order):
        rows = np.flatnonzero(config_index == i)
        rows = rows[np.argsort(batch_index[rows], kind="stable")]
        if batch_index[rows].tolist() != list(range(rows.size)):    # feasible batches are a prefix
            raise AssertionError(f"{key}: the feasible batch sizes are not the first {rows.size} of the grid")
        curves.append({"tpot_ms": _round(space["tpot"][rows] * 1e3),
                       "throughput_per_gpu": _round(space["throughput_per_gpu"][rows])})
    front = [[int(config_index[i]), int(batch_index[i])] for i in np.flatnonzero(data["front"])]
    return {
        "model": data["model"], "accelerator": data["accelerator"], "context_len": data["context_len"],
        "clamped": bool(data["clamped"]), "setting": setting, "points": int(space["tpot"].size),
        "configs": order,            # "weight|kv|tp", in the library's order
        "curves": curves,            # per configuration: batch sizes batch_sizes[:n], n = len(tpot_ms)
        "front": front,              # [configuration, batch] of each point on the front
        "frame": explorer.fit_frame(space, tpot_slo=TPOT_SLO),
        **_split_summaries(summaries),
    }


def _split_summaries(summaries: dict) -> dict:
    """The summaries as one shared first and last line (the space, the best of all) and, per
    configuration, the lines between (the page joins them again with newlines)."""
    lines = {k: v.splitlines() for k, v in summaries.items()}
    heads = {v[0] for v in lines.values()}
    tails = {v[-1] for v in lines.values()}
    if len(heads) == 1 and len(tails) == 1 and all(len(v) >= 3 for v in lines.values()):
        return {"summary_head": heads.pop(), "summary_tail": tails.pop(),
                "summaries": {k: "\n".join(v[1:-1]) for k, v in lines.items()}}
    return {"summary_head": None, "summary_tail": None, "summaries": summaries}


def index_data(models=explorer.DEFAULT_MODELS) -> dict:
    return {
        "version": VERSION,
        "models": list(models),
        "accelerators": list(explorer.DEFAULT_ACCELERATORS),
        "weight_dtypes": list(explorer.WEIGHT_DTYPES),
        "kv_dtypes": list(explorer.KV_DTYPES),
        "tensor_parallel": list(explorer.TENSOR_PARALLEL),
        "context_lens": list(explorer.CONTEXT_LENS),
        "settings": [{"name": name, "description": description} for name, (_, description) in SETTINGS.items()],
        "batch_sizes": [int(b) for b in explorer.DEFAULT_BATCH_SIZES],
        "tpot_slo_ms": TPOT_SLO * 1e3,
        "valid_tensor_parallel": {m: [d for d in valid_tensor_parallel_degrees(get_model(m))
                                      if d in explorer.TENSOR_PARALLEL] for m in models},
        "files": {m: model_file(m) for m in models},
        "initial": {"model": "Llama-3.1-8B", "accelerator": "H100-SXM5-80GB", "weight_dtype": "bf16",
                    "kv_dtype": "bf16", "tensor_parallel": 1, "context_len": 2048,
                    "setting": "physical bound"},
    }


def model_data(model: str, accelerators=explorer.DEFAULT_ACCELERATORS,
               context_lens=explorer.CONTEXT_LENS) -> dict:
    return {space_key(model, a, s, setting): one_space(model, a, s, setting)
            for a in accelerators for s in context_lens for setting in SETTINGS}


def _script(variable: str, payload: dict) -> str:
    return (f"// Generated by tools/explorer_data.py from the servingmath library: do not edit.\n"
            f"{variable} = {json.dumps(payload, separators=(',', ':'), ensure_ascii=False)};\n")


def write(out_dir: Path, models=explorer.DEFAULT_MODELS, accelerators=explorer.DEFAULT_ACCELERATORS,
          context_lens=explorer.CONTEXT_LENS) -> list[Path]:
    """Write explorer-index.js and one explorer-<model>.js a model into ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = [out_dir / "explorer-index.js"]
    written[0].write_text(_script("window.SERVINGMATH_EXPLORER_INDEX", index_data(models)), encoding="utf-8")
    for model in models:
        path = out_dir / model_file(model)
        name = get_model(model).name
        path.write_text(_script(f"window.SERVINGMATH_EXPLORER_DATA = window.SERVINGMATH_EXPLORER_DATA || {{}};\n"
                                f"window.SERVINGMATH_EXPLORER_DATA[{json.dumps(name)}]",
                                model_data(model, accelerators, context_lens)),
                        encoding="utf-8")
        written.append(path)
    return written


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    args = parser.parse_args(argv)
    start = time.perf_counter()
    written = write(args.out)
    size = sum(p.stat().st_size for p in written)
    print(f"[explorer] wrote {len(written)} files, {size / 1e6:.1f} MB, in {time.perf_counter() - start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
