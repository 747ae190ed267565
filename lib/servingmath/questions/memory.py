"""Questions of the chapter "Memory: weights, the KV cache and the largest batch that fits".

Every expected answer and every known mistake is computed by the library
from the question's parameters, so a variant with other parameters keeps its
hints.
"""

from __future__ import annotations

import math

import sympy as sp

from .. import symbolic as sy
from ..question import Mistake, Question
from ..datatypes import bytes_per_element
from ..decode import decode_step_parts
from ..hardware import get_accelerator
from ..memory import (
    kv_bytes_per_sequence,
    kv_bytes_per_token_per_gpu,
    max_batch_size,
    min_tensor_parallel,
    paged_kv_blocks,
    weight_bytes_per_gpu,
)
from ..models import get_model, kv_bytes_per_token, weight_bytes
from ..units import GB, GiB, MiB
from ._variants import GQA_8B_FULL_ATTENTION, GQA_8B_LARGE_VOCAB, named

# symbols of the derivation: the book's, plus u (gpu_memory_utilization) and R (reserve bytes)
_u = sy.u
_R = sy.M_res   # the reserve is M_res in the book's notation (R is the ridge point)
_SYMBOLS = {"M": sy.M, "u": _u, "M_res": _R, "P": sy.P, "b_w": sy.b_w, "N": sy.N, "L": sy.L,
            "K": sy.K, "H": sy.H, "d_h": sy.d_h, "b_kv": sy.b_kv, "S": sy.S}


def _kv_token(p, heads="kv", factor=2.0, layers=True, dtype=None):
    """KV bytes per token built by hand, with one ingredient changed."""
    m = get_model(p["model"])
    n_heads = m.n_kv_heads if heads == "kv" else m.n_heads
    return (factor * (m.n_layers if layers else 1) * n_heads * m.head_dim
            * bytes_per_element(dtype or p.get("kv_dtype", "bf16")))


def _batch(p, kv_per_token=None, memory=None, utilization=0.9, weights=None):
    """floor((u M - W) / (S kv)) with any ingredient swapped for a wrong one."""
    acc = get_accelerator(p["accelerator"])
    m = acc.memory_bytes if memory is None else memory
    w = weight_bytes(p["model"], "bf16") if weights is None else weights
    kv = kv_bytes_per_token(p["model"], "bf16") if kv_per_token is None else kv_per_token
    return float(max(0, math.floor((utilization * m - w) / (p["context"] * kv))))


def _step_parts(p):
    parts = decode_step_parts(p["model"], p["accelerator"], _max_batch(p), p["context"])
    return float(parts["weight_memory"]), float(parts["kv_memory"])


def _max_batch(p):
    return max_batch_size(p["model"], p["accelerator"], p["context"])


def _b_max_expr(two=2, heads=sy.K, weights_split=True, kv_split=True, layers=True):
    """B_max before rounding, for N <= K, with one ingredient changed."""
    weights = sy.P * sy.b_w / sy.N if weights_split else sy.P * sy.b_w
    heads_per_gpu = heads / sy.N if kv_split else heads
    per_sequence = sy.S * two * (sy.L if layers else 1) * heads_per_gpu * sy.d_h * sy.b_kv
    return (_u * sy.M - _R - weights) / per_sequence


QUESTIONS = [
    Question(
        "memory.weights_per_gpu",
        "{model} is stored in fp8 and split over {tp} GPUs with tensor parallelism. "
        "How many GB of weights does each GPU hold? (GB)",
        answer=lambda p: weight_bytes_per_gpu(p["model"], weight_dtype="fp8", tensor_parallel=p["tp"]),
        unit="GB",
        params={"model": "Llama-3.1-70B", "tp": 4},
        variants={"model": ("Llama-3.1-70B", "Qwen2.5-72B", "Llama-2-70B", "Mixtral-8x7B"), "tp": (2, 4, 8)},
        mistakes=[
            Mistake("That is the whole model: with tensor_parallel = N each GPU holds 1/N of it.",
                    lambda p: weight_bytes(p["model"], "fp8")),
            Mistake("That is bf16 (2 bytes per weight); fp8 stores 1 byte per weight.",
                    lambda p: weight_bytes_per_gpu(p["model"], weight_dtype="bf16", tensor_parallel=p["tp"])),
            Mistake("That is int4 (half a byte per weight); fp8 stores 1 byte per weight.",
                    lambda p: weight_bytes_per_gpu(p["model"], weight_dtype="int4", tensor_parallel=p["tp"])),
        ],
    ),
    Question(
        "memory.kv_per_token_fp8",
        "How many bytes of KV cache does one token of {model} add with an fp8 KV cache? (bytes)",
        answer=lambda p: kv_bytes_per_token(p["model"], p["kv_dtype"]),
        unit="B",
        params={"model": "Llama-3.1-405B", "kv_dtype": "fp8"},
        variants={"model": ("Llama-3.1-405B", "Llama-3.1-70B", "Qwen2.5-72B", "Llama-3.1-8B", "Mistral-7B")},
        mistakes=[
            Mistake("You used the query heads; the cache holds only the KV heads (GQA).",
                    lambda p: _kv_token(p, heads="query")),
            Mistake("You stored K but not V: the factor 2 is one key and one value vector.",
                    lambda p: _kv_token(p, factor=1.0)),
            Mistake("That is bf16 (2 bytes per element); fp8 is 1 byte.",
                    lambda p: _kv_token(p, dtype="bf16")),
            Mistake("That is one layer's worth: each layer keeps its own K and V.",
                    lambda p: _kv_token(p, layers=False)),
        ],
    ),
    Question(
        "memory.kv_long_sequence",
        "How large is the bf16 KV cache of one {context}-token request to {model}? (GiB)",
        answer=lambda p: kv_bytes_per_sequence(p["model"], p["context"], kv_dtype="bf16"),
        unit="GiB",
        params={"model": "Qwen2.5-7B", "context": 32768},
        variants={"model": GQA_8B_FULL_ATTENTION, "context": (8192, 16384, 32768)},
        mistakes=[
            Mistake("You computed GB (1e9 bytes) but the question asks for GiB (2**30 bytes).",
                    lambda p: kv_bytes_per_sequence(p["model"], p["context"]) * GiB / GB),
            Mistake("You used the query heads; the model caches only its KV heads (GQA).",
                    lambda p: _kv_token(p, heads="query") * p["context"]),
            Mistake("You stored K but not V: multiply by 2.",
                    lambda p: _kv_token(p, factor=1.0) * p["context"]),
        ],
    ),
    Question(
        "memory.static_batch_kv",
        "LMDeploy benchmarked Llama-2-7B (fp16) at batch 64 with 2048 prompt + 2048 output "
        "tokens on an A100-80GB. How much KV cache do {batch} sequences of {context} tokens of {model} "
        "(fp16) need? (GiB)",
        answer=lambda p: p["batch"] * kv_bytes_per_sequence(p["model"], p["context"], kv_dtype="fp16"),
        unit="GiB",
        params={"model": "Llama-2-7B", "batch": 64, "context": 4096},
        variants={"model": ("Llama-2-7B", "Llama-2-13B"), "batch": (16, 32, 64, 128), "context": (2048, 3072, 4096)},
        mistakes=[
            Mistake("You stored K but not V: multiply by 2.",
                    lambda p: p["batch"] * _kv_token(p, factor=1.0) * p["context"]),
            Mistake("That is one layer's worth: each layer keeps its own K and V.",
                    lambda p: p["batch"] * _kv_token(p, layers=False) * p["context"]),
            Mistake("That is one sequence; the batch holds B of them.",
                    lambda p: kv_bytes_per_sequence(p["model"], p["context"], kv_dtype="fp16")),
        ],
    ),
    Question(
        "memory.max_batch",
        "{model} in bf16 (weights and KV cache) on one {gpu}: the catalog's {gpu_gb:g} GB, "
        "gpu_memory_utilization 0.9, no other reserve. What is the largest batch of {context}-token "
        "sequences? (a whole number)",
        answer=_max_batch,
        unit=None,
        rel_tol=0.005,
        params={"model": "Llama-3.1-8B", "accelerator": "H100-SXM5-80GB", "context": 8192},
        variants={"model": GQA_8B_FULL_ATTENTION, "accelerator": ("H100-SXM5-80GB", "H200-SXM-141GB",
                                                                   "A100-SXM4-80GB", "MI300X"),
                  "context": (4096, 8192, 16384)},
        derive=named(gpu="accelerator"),
        mistakes=[
            Mistake("You used all the memory; the server may use only gpu_memory_utilization = 0.9 of it.",
                    lambda p: _batch(p, utilization=1.0)),
            Mistake("You used the query heads; the KV cache holds only the KV heads (GQA).",
                    lambda p: _batch(p, kv_per_token=_kv_token(p, heads="query"))),
            Mistake("You stored K but not V: each token needs one key and one value per KV head.",
                    lambda p: _batch(p, kv_per_token=_kv_token(p, factor=1.0))),
            Mistake("You forgot the weights: they take their share of the usable memory before any KV cache.",
                    lambda p: _batch(p, weights=0.0)),
            Mistake("You read the catalog's GB as GiB; its figure is decimal (1e9 bytes per GB).",
                    lambda p: _batch(p, memory=get_accelerator(p["accelerator"]).memory_bytes
                                     * GiB / GB)),
        ],
    ),
    Question(
        "memory.kv_per_gpu_replicated",
        "{model} (8 KV heads) runs with tensor_parallel = {tp} and a bf16 KV cache. "
        "How many bytes of KV cache does one token add on each GPU? (bytes)",
        answer=lambda p: kv_bytes_per_token_per_gpu(p["model"], tensor_parallel=p["tp"]),
        unit="B",
        params={"model": "Llama-3.1-405B", "tp": 16},
        variants={"model": ("Llama-3.1-405B", "Llama-3.1-70B", "Qwen2.5-72B")},
        mistakes=[
            Mistake("8 KV heads cannot be split more than 8 ways: half a head does not exist. Each GPU "
                    "keeps one whole KV head, and every head is stored on N / 8 GPUs.",
                    lambda p: kv_bytes_per_token(p["model"], "bf16") / p["tp"]),
            Mistake("That is the whole model's cache per token; the question asks per GPU.",
                    lambda p: kv_bytes_per_token(p["model"], "bf16")),
            Mistake("That is the sum over all the GPUs; the question asks per GPU.",
                    lambda p: kv_bytes_per_token_per_gpu(p["model"], tensor_parallel=p["tp"]) * p["tp"]),
        ],
    ),
    Question(
        "memory.min_tensor_parallel",
        "What is the smallest tensor-parallel degree that fits {model} in bf16 on {gpu} "
        "GPUs (catalog {gpu_gb:g} GB, gpu_memory_utilization 0.9) with room for one {context}-token sequence? "
        "(a whole number)",
        answer=lambda p: min_tensor_parallel(p["model"], p["accelerator"], p["context"]),
        unit=None,
        rel_tol=0.001,
        params={"model": "Llama-3.1-405B", "accelerator": "H100-SXM5-80GB", "context": 8192},
        variants={"accelerator": ("H100-SXM5-80GB", "A100-SXM4-80GB", "H200-SXM-141GB", "MI300X"),
                  "context": (4096, 8192, 16384)},
        derive=named(gpu="accelerator"),
        mistakes=[
            Mistake("ceil(weights / memory) forgets both gpu_memory_utilization = 0.9 and that the "
                    "degree must split 128 query heads and 8 KV heads evenly.",
                    lambda p: math.ceil(weight_bytes(p["model"], "bf16")
                                        / get_accelerator(p["accelerator"]).memory_bytes)),
            Mistake("That many GPUs would have room, but the degree must split the 128 query heads "
                    "(and 8 KV heads) evenly.",
                    lambda p: math.ceil(weight_bytes(p["model"], "bf16")
                                        / (0.9 * get_accelerator(p["accelerator"]).memory_bytes))),
            Mistake("Rounded down: with that few GPUs the weights alone would not fit.",
                    lambda p: 2 ** math.floor(math.log2(weight_bytes(p["model"], "bf16")
                                              / (0.9 * get_accelerator(p["accelerator"]).memory_bytes)))),
        ],
    ),
    Question(
        "memory.paged_blocks",
        "With {block_text}, how many KV blocks does a {context}-token "
        "sequence occupy? (a whole number)",
        answer=lambda p: paged_kv_blocks(p["context"], p["block"]),
        unit=None,
        rel_tol=0.001,
        params={"context": 1000, "block": 16},
        variants={"context": (1000, 777, 1500, 2049, 3100), "block": (16, 32)},
        derive=lambda p: {**p, "block_text": ("vLLM's default block size of 16 tokens" if p["block"] == 16
                                              else f"a block size of {p['block']} tokens")},
        mistakes=[
            Mistake("Rounded down: the tokens left over need a block of their own.",
                    lambda p: p["context"] // p["block"]),
            Mistake("Blocks come whole: a fractional count of blocks rounds up.",
                    lambda p: p["context"] / p["block"]),
        ],
    ),
    Question(
        "memory.reserved_waste",
        "A server reserves KV cache for {reserved} tokens per request, but requests end after {mean_len} tokens "
        "on average. What fraction of the reserved KV memory holds no token? (a fraction, 0 to 1)",
        answer=lambda p: 1 - p["mean_len"] / p["reserved"],
        unit=None,
        params={"mean_len": 600, "reserved": 4096},
        variants={"mean_len": (400, 600, 900, 1500), "reserved": (2048, 4096, 8192)},
        mistakes=[
            Mistake("That is the fraction that is used; the question asks for the part wasted.",
                    lambda p: p["mean_len"] / p["reserved"]),
        ],
    ),
    Question(
        "memory.gib_trap",
        "nvidia-smi shows {card_name} memory as {mib} MiB. How many GB (decimal) is that? (GB)",
        answer=lambda p: p["mib"] * MiB,
        unit="GB",
        params={"card": ("an A100-SXM4-80GB's", 81920)},
        variants={"card": (("an A100-SXM4-80GB's", 81920), ("an A100-SXM4-40GB's", 40960), ("a 24 GiB card's", 24576),
                           ("a 48 GiB card's", 49152))},
        derive=lambda p: {**p, "mib": p["card"][1], "card_name": p["card"][0]},
        mistakes=[
            Mistake("MiB / 1024 gives GiB, not GB: a GiB is 2**30 = 1.074e9 bytes.",
                    lambda p: p["mib"] * MiB / GiB * GB),
            Mistake("A MiB is 2**20 = 1,048,576 bytes, not 1e6.", lambda p: p["mib"] * 1e6),
        ],
    ),
    Question(
        "memory.full_memory_step",
        "{model} in bf16 runs on one {gpu} at the largest batch of {context}-token sequences "
        "that fits (catalog {gpu_gb:g} GB, gpu_memory_utilization 0.9). At the physical bound, how long "
        "does one decode step take just to read the weights and every sequence's KV cache once? (ms)",
        answer=lambda p: sum(_step_parts(p)),
        unit="ms",
        params={"model": "Llama-3.1-8B", "accelerator": "H100-SXM5-80GB", "context": 8192},
        variants={"model": GQA_8B_FULL_ATTENTION, "accelerator": ("H100-SXM5-80GB", "H200-SXM-141GB",
                                                                   "A100-SXM4-80GB"),
                  "context": (4096, 8192, 16384)},
        derive=named(gpu="accelerator"),
        mistakes=[
            Mistake("You read only the weights: each step also reads every sequence's KV cache, "
                    "B x S x kv bytes, which grows with batch x context.",
                    lambda p: _step_parts(p)[0]),
            Mistake("You read only the KV cache: the weights are read once per step too.",
                    lambda p: _step_parts(p)[1]),
            # (charging the whole embedding table is a slip too, but at the memory wall the KV cache is
            # so much larger that it moves the answer by less than the 1 % tolerance: no hint here)
        ],
    ),
    Question(
        "memory.max_batch_formula",
        "Write B_max before rounding down, for N <= K, as a sympy expression in M, u, M_res, P, b_w, "
        "N, L, K, d_h, b_kv and S (per-GPU memory M, utilisation u, reserve M_res, parameters P, "
        "tensor-parallel degree N).",
        answer=lambda p: _b_max_expr(),
        kind="symbolic",
        symbols=_SYMBOLS,
        mistakes=[
            Mistake("You stored K but not V: the KV cache per token has a factor 2.",
                    lambda p: _b_max_expr(two=1)),
            Mistake("You used the query heads H; the cache holds only the K KV heads.",
                    lambda p: _b_max_expr(heads=sy.H)),
            Mistake("Per GPU vs total: each GPU holds P b_w / N of the weights, not all of them.",
                    lambda p: _b_max_expr(weights_split=False)),
            Mistake("Per GPU vs total: each GPU holds K / N of the KV heads, so a sequence takes "
                    "1/N of its cache on each GPU.",
                    lambda p: _b_max_expr(kv_split=False)),
            Mistake("You forgot the layers: every one of the L layers keeps its own K and V.",
                    lambda p: _b_max_expr(layers=False)),
        ],
    ),
]
