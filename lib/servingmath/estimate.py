"""Napkin math for one deployment: TPOT bounds, TTFT, throughput, memory, the knee and the wall that binds.

From the terminal::

    python -m servingmath.estimate --params 70e9 --weights int8 --kv-per-token 320kB --gpu H100 \\
        --tp 4 --batch 64 --context 4096 --layers 80 --hidden 8192
    python -m servingmath.estimate --model Llama-3.1-70B --gpu H100 --tp 4 --batch 64 --context 4096
    python -m servingmath.estimate --config path/to/config.json --gpu H100 --batch 8 --context 2048

or from a notebook cell, :func:`estimate` (its result prints as the same table).

Each line is one function of the library (named in :data:`FORMULAS` with the
formula it evaluates), at the **physical bound** and at the book's
**realistic** setting (:mod:`servingmath.settings`). A model may be a catalog
name, a ``config.json`` or totals (:func:`servingmath.models.model_from_totals`):
``--params`` with ``--kv-per-token`` (bytes per token **in the KV dtype of the
run**, ``--kv``). Tensor parallelism counts its all-reduces, which need
``--layers`` and ``--hidden`` for a model given by totals; ``--pooled`` treats
the GPUs as one pooled chip instead (no communication, the references' bound).

Examples
--------
>>> e = estimate("Llama-3.1-8B", "H100", batch_size=64, context_len=2048)
>>> round(e.values["physical"]["tpot_hybrid"] * 1e3, 2), e.values["physical"]["max_batch"]
(9.61, 208)
>>> print(e.text.splitlines()[0])
Llama-3.1-8B on 1 x H100-SXM5-80GB: batch 64, context 2048 tokens, prompt 2048 tokens
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field

import numpy as np

from ._validation import UnknownNameError, check_argv, check_integer, check_scalar
from .datatypes import DTYPES
from .decode import decode_step_parts, knee_batch_size
from .deployment import Deployment, auto_compute_dtype
from .hardware import get_accelerator, list_accelerators
from .memory import kv_bytes_for_batch, max_batch_size, usable_memory, weight_bytes_per_gpu
from .models import (MissingShapeError, check_context_len, get_model, list_models, load_model_config,
                     model_from_totals)
from .prefill import prefill_time
from .settings import SETTINGS, setting_options
from .sharding import pooled_slice
from .step import combine
from .units import parse_quantity

__all__ = ["estimate", "Estimate", "FORMULAS", "main"]

#: Each line of the estimate: (key, label, the library function, the formula it evaluates).
FORMULAS = (
    ("tpot_roofline", "TPOT, roofline (lower bound)", "decode.decode_step_time(overlap='roofline')",
     "max((W + B S k) / BW, (2 P B + 4 L H d_h S B) / F) + T_comm + T_step"),
    ("tpot_hybrid", "TPOT, hybrid (the book)", "decode.decode_step_time(overlap='hybrid')",
     "max(W / BW, 2 P B / F) + max(B S k / BW, 4 L H d_h S B / F) + T_comm + T_step"),
    ("tpot_additive", "TPOT, additive (upper bound)", "decode.decode_step_time(overlap='additive')",
     "W / BW + 2 P B / F + B S k / BW + 4 L H d_h S B / F + T_comm + T_step"),
    ("ttft", "TTFT (one prompt, no queue)", "prefill.prefill_time",
     "max(W / BW, 2 (P_body L_p + V D) / F) + max(L_p k / BW, 2 L H d_h L_p (L_p + 1) / F) + T_comm + T_step"),
    ("throughput_per_gpu", "throughput per GPU", "B / (N x TPOT hybrid)", "B / (N T)"),
    ("memory_per_gpu", "memory per GPU (weights + KV)", "memory.weight_bytes_per_gpu + kv_bytes_for_batch",
     "P b_w / N + B S k / N  (KV-head replication and K/V weights counted)"),
    ("usable_per_gpu", "usable per GPU", "memory.usable_memory", "u M - R"),
    ("max_batch", "largest batch that fits", "memory.max_batch_size", "floor((u M - R - W_gpu) / (S k_gpu))"),
    ("knee", "knee (hybrid)", "decode.knee_batch_size", "B* = W / (BW (2 P / F - g)): weight read = matmul time"),
    ("binds", "wall that binds", "the largest part of the hybrid step, or memory when B > B_max", ""),
)

_SETTINGS = ("physical", "realistic")
_LEGEND = ("TPOT = decode.decode_step_time(overlap=...)", "TTFT = prefill.prefill_time",
           "memory = memory.weight_bytes_per_gpu + memory.kv_bytes_for_batch", "B_max = memory.max_batch_size",
           "knee = decode.knee_batch_size",
           "W weights read, k KV bytes per token, BW and F bandwidth and FLOP/s x MBU and MFU, all per GPU")


@dataclass
class Estimate:
    """The numbers of one estimate, per setting, and their table (``str(estimate)``).

    Derived in the chapter "How to use this book" (notebooks/00_how_to_use_this_book.ipynb).
    """

    title: str
    notes: list
    values: dict = field(default_factory=dict)

    @property
    def text(self) -> str:
        settings = list(self.values)
        lines = [self.title] + [f"  {n}" for n in self.notes] + [""]
        head = f"{'':32s}" + "".join(f"{s:>14s}" for s in settings) + "   formula"
        lines.append(head)
        for key, label, _function, formula in FORMULAS:
            cells = "".join(f"{_show(key, self.values[s][key]):>14s}" for s in settings)
            lines.append(f"{label:32s}{cells}   {formula}")
        lines.append("")
        lines.append("computed by: " + "; ".join(_LEGEND))
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:   # a notebook cell shows the table
        return self.text


def _show(key, value) -> str:
    if key.startswith("tpot") or key == "ttft":
        return f"{value * 1e3:.2f} ms" if value < 10 else f"{value:.1f} s"
    if key == "throughput_per_gpu":
        return f"{value:,.0f} tok/s"
    if key in ("memory_per_gpu", "usable_per_gpu"):
        return f"{value / 1e9:.1f} GB"
    if key == "max_batch":
        return f"{int(value):,d}"
    if key == "knee":
        return "never" if not np.isfinite(value) else f"{value:,.0f}"
    return str(value)


def _binding(parts: dict, batch: int, max_batch: int) -> str:
    if batch > max_batch:
        return "memory (KV)" if max_batch > 0 else "memory (weights)"
    contributions = {
        "compute" if parts["linear_compute"] > parts["weight_memory"] else "HBM (weights)":
            max(parts["weight_memory"], parts["linear_compute"]),
        "compute (attn)" if parts["attention_compute"] > parts["kv_memory"] else "HBM (KV)":
            max(parts["kv_memory"], parts["attention_compute"]),
        "interconnect": parts["communication"],
        "overhead": parts["overhead"],
    }
    return max(contributions, key=contributions.get)


def estimate(model, accelerator, batch_size, context_len, *, prompt_len=None, tensor_parallel=1, pooled=False,
             weight_dtype="bf16", kv_dtype="bf16", compute_dtype="auto", gpu_memory_utilization=0.9,
             settings=_SETTINGS) -> Estimate:
    """The napkin-math estimate of a deployment, at the physical bound and at the realistic setting.

    Parameters
    ----------
    model : str, ModelConfig, ModelTotals or a config.json path
    accelerator : str or Accelerator
    batch_size, context_len : int
        Sequences decoding together and the tokens in each one's KV cache.
    prompt_len : int, optional
        Prompt length for the TTFT (default: ``context_len``).
    tensor_parallel : int
        GPUs of one instance.
    pooled : bool
        Treat the ``tensor_parallel`` GPUs as one pooled chip
        (:func:`servingmath.sharding.pooled_slice`): no communication, the
        references' bound. Default False: the book's tensor parallelism.
    weight_dtype, kv_dtype, compute_dtype : str
        ``compute_dtype="auto"``: fp8 math for fp8 weights on fp8 tensor cores, else bf16.
    gpu_memory_utilization : float
        u, the share of memory the server may fill (vLLM's 0.9; 1.0 for all of it).
    settings : tuple of str
        The named settings to compute (:data:`servingmath.settings.SETTINGS`).

    Returns
    -------
    Estimate
        ``.values[setting][key]`` for the keys of :data:`FORMULAS`; ``str()``
        or a notebook cell shows the table.

    Notes
    -----
    Every number is a library function of the same deployment (see
    :data:`FORMULAS`); the realistic column rebuilds the deployment with
    ``setting="realistic"``. Derived in the chapter "How to use this book".

    Examples
    --------
    >>> e = estimate("Llama-3.1-8B", "H100", 64, 2048)
    >>> e.values["physical"]["binds"], round(e.values["physical"]["knee"], 1)
    ('HBM (KV)', 295.4)
    """
    model = get_model(model)
    acc = get_accelerator(accelerator)
    n = int(check_integer("tensor_parallel", check_scalar("tensor_parallel", tensor_parallel), minimum=1))
    b = int(check_integer("batch_size", check_scalar("batch_size", batch_size), minimum=1))
    s = int(check_context_len(model, check_integer("context_len", check_scalar("context_len", context_len),
                                                   minimum=1)))
    lp = s if prompt_len is None else int(check_context_len(model, check_integer(
        "prompt_len", check_scalar("prompt_len", prompt_len), minimum=1), "prompt_len"))
    if b > 10**9:
        raise ValueError(f"batch_size = {b:g} is more sequences than any server holds (at most 10^9)")
    if compute_dtype == "auto":
        compute_dtype = auto_compute_dtype(weight_dtype, acc)
    run_acc, run_tp = (pooled_slice(acc, n), 1) if pooled else (acc, n)
    base = Deployment.build(model, run_acc, tensor_parallel=run_tp, weight_dtype=weight_dtype, kv_dtype=kv_dtype,
                            compute_dtype=compute_dtype, gpu_memory_utilization=gpu_memory_utilization)
    notes = [model.describe() if hasattr(model, "ignored") else f"{model.name}: {model.source}"]
    how = (f"{n} x {acc.name} pooled as one chip (no communication counted)" if pooled and n > 1
           else f"tensor_parallel={n}" + (" (all-reduces counted)" if n > 1 else ""))
    notes.append(f"{how}; weights {weight_dtype}, KV {kv_dtype}, math {compute_dtype}, "
                 f"gpu_memory_utilization {gpu_memory_utilization:g}")
    result = Estimate(title=f"{model.name} on {n} x {acc.name}: batch {b}, context {s} tokens, prompt {lp} tokens",
                      notes=notes)
    for name in settings:
        dep = base.replace(**setting_options(name, run_acc))
        parts = {k: float(v) for k, v in decode_step_parts(dep, b, s).items()}
        row = {f"tpot_{o}": float(combine(o, parts)) for o in ("roofline", "hybrid", "additive")}
        row["ttft"] = float(prefill_time(dep, lp))
        row["throughput_per_gpu"] = b / (n * row["tpot_hybrid"])
        weights = float(weight_bytes_per_gpu(model, weight_dtype=weight_dtype, tensor_parallel=run_tp)) / (
            n if pooled else 1)
        kv = float(kv_bytes_for_batch(model, b, s, kv_dtype=kv_dtype, tensor_parallel=run_tp)) / (n if pooled else 1)
        row["memory_per_gpu"] = weights + kv
        row["usable_per_gpu"] = float(usable_memory(acc, gpu_memory_utilization=gpu_memory_utilization))
        row["max_batch"] = int(max_batch_size(dep, s))
        row["knee"] = float(knee_batch_size(dep, s))
        row["binds"] = _binding(parts, b, row["max_batch"])
        result.values[name] = row
    return result


# ---------------------------------------------------------------- command line

_EPILOG = """examples:
  python -m servingmath.estimate --model Llama-3.1-70B --gpu H100 --tp 4 --batch 64 --context 4096
  python -m servingmath.estimate --params 70e9 --weights int8 --kv-per-token 320kB --gpu H100 --tp 4 \\
      --batch 64 --context 4096 --layers 80 --hidden 8192
  python -m servingmath.estimate --params 30e9 --kv-per-token 100kB --weights int8 --kv int8 \\
      --gpu TPU-v5e --tp 16 --pooled --batch 4 --context 8192
"""


class _Usage(Exception):
    """A usage error: the message and the options that would fix it."""


def _count(text: str, option: str) -> float:
    """A number of parameters: 70e9, 70B, 70G, 405M, 1.2T."""
    t = text.strip().replace(",", "").replace("_", "")
    scale = {"k": 1e3, "K": 1e3, "M": 1e6, "B": 1e9, "G": 1e9, "T": 1e12}.get(t[-1:], None)
    try:
        value = float(t[:-1]) * scale if scale else float(t)
    except ValueError:
        raise _Usage(f"{option} {text!r} is not a number of parameters: write 70e9 or 70B") from None
    if not value > 0:
        raise _Usage(f"{option} must be > 0, got {text!r}")
    return value


def _bytes(text: str, option: str) -> float:
    try:
        value, dim = parse_quantity(text)
    except ValueError as exc:
        raise _Usage(f"{option}: {exc}") from None
    if dim not in (None, "B"):
        raise _Usage(f"{option} {text!r} is not a size in bytes: write 320kB, 0.3125MiB or 327680")
    if value < 0:
        raise _Usage(f"{option} must be >= 0 bytes, got {text!r}")
    return value


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m servingmath.estimate", description=__doc__.split("\n\n")[0],
                                epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    src = p.add_argument_group("the model (one of)")
    src.add_argument("--model", metavar="NAME", help="a catalog model (python -m servingmath.estimate --list)")
    src.add_argument("--config", metavar="PATH", help="a Hugging Face config.json (or a folder holding one)")
    src.add_argument("--params", metavar="N", help="total parameters (70e9 or 70B): a model given by its totals")
    tot = p.add_argument_group("totals (with --params)")
    tot.add_argument("--kv-per-token", metavar="BYTES", help="KV-cache bytes per token in the --kv dtype (320kB)")
    tot.add_argument("--active-params", metavar="N", help="parameters a token uses (a mixture of experts)")
    tot.add_argument("--experts", type=int, default=1, help="experts per layer (with --active-params)")
    tot.add_argument("--active-experts", type=int, default=1, help="experts a token uses")
    tot.add_argument("--embedding-params", metavar="N", help="V x D of the input table (default: ignored)")
    for name, what in (("layers", "transformer layers L"), ("hidden", "model width D"), ("heads", "query heads H"),
                       ("kv-heads", "KV heads K"), ("head-dim", "head size d_h")):
        tot.add_argument(f"--{name}", type=int, metavar="N", help=what)
    dep = p.add_argument_group("the deployment")
    dep.add_argument("--gpu", metavar="NAME", help="accelerator (H100, A100, TPU-v5e, ...; see --list)")
    dep.add_argument("--tp", type=int, default=1, metavar="N", help="GPUs of one instance (default 1)")
    dep.add_argument("--pooled", action="store_true",
                     help="treat the --tp GPUs as one pooled chip: no communication (the references' bound)")
    dep.add_argument("--weights", default="bf16", metavar="DTYPE", help=f"weight dtype ({', '.join(DTYPES)})")
    dep.add_argument("--kv", default="bf16", metavar="DTYPE", help="KV-cache dtype (default bf16)")
    dep.add_argument("--compute", default="auto", metavar="DTYPE",
                     help="matmul dtype; auto: fp8 for fp8 weights on fp8 tensor cores, else bf16")
    dep.add_argument("--gpu-memory-utilization", type=float, default=0.9, metavar="U",
                     help="share of memory the server may fill (vLLM's 0.9; 1.0 for all of it)")
    dep.add_argument("--setting", choices=("physical", "realistic", "both"), default="both",
                     help="which setting(s) to show (default both)")
    load = p.add_argument_group("the load")
    load.add_argument("--batch", type=int, metavar="B", help="sequences decoding together")
    load.add_argument("--context", type=int, metavar="S", help="tokens in each sequence's KV cache")
    load.add_argument("--prompt", type=int, metavar="L", help="prompt tokens for the TTFT (default: --context)")
    p.add_argument("--list", action="store_true", help="list the catalog's models and accelerators")
    return p


def _model(args):
    given = [o for o in ("model", "config", "params") if getattr(args, o) is not None]
    if len(given) != 1:
        raise _Usage(("give the model with one of --model NAME, --config PATH or --params N (with "
                      "--kv-per-token)") if not given else
                     f"give only one of --model, --config, --params (got {', '.join('--' + g for g in given)})")
    if args.model is not None:
        return get_model(args.model)
    if args.config is not None:
        try:
            return load_model_config(args.config)
        except FileNotFoundError as exc:
            raise _Usage(f"--config: {exc}") from None
    if args.kv_per_token is None and not (args.layers and args.kv_heads and args.head_dim):
        raise _Usage("--params needs the KV cache: --kv-per-token BYTES (in the --kv dtype, e.g. 320kB), or "
                     "--layers, --kv-heads and --head-dim (or --kv-per-token 0 to ignore it)")
    active = None if args.active_params is None else _count(args.active_params, "--active-params")
    return model_from_totals(
        parameters=_count(args.params, "--params"),
        kv_bytes_per_token=None if args.kv_per_token is None else _bytes(args.kv_per_token, "--kv-per-token"),
        kv_dtype=args.kv, active_parameters=active, n_experts=args.experts, n_active_experts=args.active_experts,
        embedding_parameters=None if args.embedding_params is None else _count(args.embedding_params,
                                                                                "--embedding-params"),
        n_layers=args.layers, hidden_size=args.hidden, n_heads=args.heads, n_kv_heads=args.kv_heads,
        head_dim=args.head_dim, name=f"{args.params} parameters (totals)")


def main(argv=None, stdout=None, stderr=None) -> int:
    """Run the calculator; returns the exit status (0, or 2 for bad input with the fix printed).

    Derived in the chapter "How to use this book" (notebooks/00_how_to_use_this_book.ipynb).

    ``argv``: the command line's words (None: ``sys.argv``); ``stdout``, ``stderr``: text streams
    (None: the process's own).

    Examples
    --------
    >>> import io
    >>> out = io.StringIO()
    >>> main(["--model", "Llama-3.1-8B", "--gpu", "H100", "--batch", "64", "--context", "2048"], stdout=out)
    0
    >>> print(out.getvalue().splitlines()[0])
    Llama-3.1-8B on 1 x H100-SXM5-80GB: batch 64, context 2048 tokens, prompt 2048 tokens
    """
    check_argv(argv)
    for name, stream in (("stdout", stdout), ("stderr", stderr)):
        if stream is not None and not callable(getattr(stream, "write", None)):
            raise TypeError(f"{name} must be a text stream (with .write) or None, got {stream!r:.60}")
    stdout, stderr = stdout or sys.stdout, stderr or sys.stderr
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:   # --help (0) or a word argparse refuses (2, its usage printed): the status
        return exc.code if isinstance(exc.code, int) else 2
    if args.list:
        stdout.write("models: " + ", ".join(list_models()) + "\n")
        stdout.write("accelerators: " + ", ".join(list_accelerators()) + "\n")
        return 0
    try:
        missing = [o for o in ("gpu", "batch", "context") if getattr(args, o) is None]
        if missing:
            raise _Usage(f"missing {', '.join('--' + m for m in missing)}: say which accelerator (--gpu H100), "
                         "how many sequences decode together (--batch 64) and their context (--context 4096)")
        model = _model(args)
        settings = _SETTINGS if args.setting == "both" else (args.setting,)
        options = dict(batch_size=args.batch, context_len=args.context, prompt_len=args.prompt,
                       tensor_parallel=args.tp, weight_dtype=args.weights, kv_dtype=args.kv,
                       compute_dtype=args.compute, gpu_memory_utilization=args.gpu_memory_utilization,
                       settings=settings)
        note = ""
        try:
            result = estimate(model, args.gpu, pooled=args.pooled, **options)
        except MissingShapeError as exc:
            if not (args.tp > 1 and not args.pooled and "all-reduces" in str(exc)):
                raise
            # totals without shapes: the references' convention (a pooled slice), said on the first line
            result = estimate(model, args.gpu, pooled=True, **options)
            note = (f"note: --tp {args.tp} with totals only: the {args.tp} GPUs are treated as one pooled chip "
                    "(the all-reduces need the layers and width: add --layers L --hidden D to count them)\n")
    except MissingShapeError as exc:
        return _fail(stderr, f"{exc}\n  (the shape options are --layers, --hidden, --heads, --kv-heads, --head-dim)")
    except _Usage as exc:
        return _fail(stderr, str(exc))
    except UnknownNameError as exc:
        return _fail(stderr, f"{exc}\n  (python -m servingmath.estimate --list shows the catalog)")
    except ValueError as exc:
        return _fail(stderr, str(exc))
    stdout.write(note + result.text + "\n")
    return 0


def _fail(stderr, message: str) -> int:
    stderr.write(f"estimate: error: {message}\n")
    return 2


if __name__ == "__main__":
    sys.exit(main())
