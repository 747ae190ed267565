"""Questions of chapter 08, "Tensor parallelism and the 8-GPU node".

Every expected answer is computed by the library from the question's
parameters, and so is every known mistake (one-way versus bidirectional
NVLink, one all-reduce per layer instead of two, the factor 2(N-1)/N,
per-GPU versus total throughput, KV heads that replicate past N = K, a
knee multiplied by N...), so a variant with other parameters keeps its hints.
"""

from __future__ import annotations

import sympy as sp

from .. import symbolic
from ..question import Mistake, Question
from ..decode import decode_step_parts
from ..hardware import get_accelerator
from ..memory import kv_bytes_per_token_per_gpu, min_tensor_parallel
from ..models import get_model, kv_bytes_per_token
from ..parallelism import (NCCL_NVLINK_ALLREDUCE, allreduce_time, per_gpu_throughput,
                           ring_allreduce_bytes, tensor_parallel_communication_time,
                           tensor_parallel_decode_time, tp_knee_batch_size, tpot_slo_batch_size)
from ..settings import REALISTIC

_alpha, _beta, _m = sp.symbols("alpha beta m", positive=True)
_N, _F, _W, _b_w = symbolic.N, symbolic.F, symbolic.W, symbolic.b_w

_LLAMA70, _H100 = "Llama-3.1-70B", "H100-SXM5-80GB"
# NCCL's LL protocol on NVLink (tuning.cc): the one it picks for a 1 MB message on 8 GPUs
_NCCL_LL = {"alpha": 0.6e-6, "alpha0": 6.6e-6, "bus": 141e9}
#: the book's realistic setting (settings.REALISTIC: MFU 0.5, MBU 0.75, 0.4 ms per step, NCCL's protocols)
_REAL = {"setting": "realistic"}
#: the first edition's pair: the book's efficiencies with LL's latencies at 80 % of the link
_OLD_PAIR = {"mfu": REALISTIC["mfu"], "mbu": REALISTIC["mbu"], "step_overhead": REALISTIC["step_overhead"],
             **NCCL_NVLINK_ALLREDUCE}
#: the realistic efficiencies with free all-reduces
_FREE_COMM = {"setting": "realistic", "allreduce_protocol": None, "link_efficiency": 1.0}
_70B_CLASS = (_LLAMA70, "Qwen2.5-72B")


def _message(p):
    """Bytes of one decode all-reduce: B x D x 2 (bf16)."""
    return p["batch"] * get_model(p["model"]).hidden_size * 2.0


def _link(p):
    return get_accelerator(p["accelerator"]).interconnect_bandwidth


def _step_comm(p, per_layer=2, latency=True, base=True, bytes_=True, bus=None):
    one = allreduce_time(_message(p) if bytes_ else 0.0, p["tp"], p["bus"] if bus is None else bus,
                         latency=p["alpha"] if latency else 0.0, base_latency=p["alpha0"] if (latency and base) else 0.0)
    return per_layer * get_model(p["model"]).n_layers * one


def _tpot_without_kv_split(p):
    parts = decode_step_parts(p["model"], p["accelerator"], p["batch"], p["context"], tensor_parallel=p["tp"])
    return tensor_parallel_decode_time(p["model"], p["accelerator"], p["batch"], p["context"], tensor_parallel=p["tp"]) \
        - parts["kv_memory"] + parts["kv_memory"] * p["tp"]


def _tpot_without_comm(p):
    return tensor_parallel_decode_time(p["model"], p["accelerator"], p["batch"], p["context"], tensor_parallel=p["tp"]) \
        - tensor_parallel_communication_time(p["model"], p["accelerator"], p["batch"], tensor_parallel=p["tp"])


def _knee(p, **over):
    kw = {"mfu": p["mfu"], "mbu": p["mbu"], **over}
    return tp_knee_batch_size(p["model"], p["accelerator"], tensor_parallel=p["tp"], **kw)


def _per_gpu_at_fixed_batch(p, n):
    return per_gpu_throughput(p["model"], p["accelerator"], p["batch"], p["context"], tensor_parallel=n, **_REAL)


QUESTIONS = [
    Question(
        "parallelism.ring_bytes",
        "In one ring all-reduce of a decode step's activations ({model}, batch {batch}, bf16, TP = {tp}), "
        "how many bytes does each GPU send? (bytes)",
        answer=lambda p: ring_allreduce_bytes(_message(p), p["tp"]),
        unit="B",
        params={"model": _LLAMA70, "batch": 64, "tp": 8},
        variants={"model": _70B_CLASS + ("Llama-3.1-405B", "Llama-3.1-8B"), "batch": (16, 64, 256), "tp": (4, 8)},
        mistakes=[
            Mistake("That is one phase only (the reduce-scatter). A ring all-reduce is a reduce-scatter "
                    "and an all-gather: 2 (N - 1) / N of the message.",
                    lambda p: (p["tp"] - 1) / p["tp"] * _message(p)),
            Mistake("You sent the message once; the ring moves 2 (N - 1) / N times it.",
                    lambda p: _message(p)),
            Mistake("Each of the 2 (N - 1) steps sends one 1/N chunk, not the whole message.",
                    lambda p: 2 * (p["tp"] - 1) * _message(p)),
        ],
    ),
    Question(
        "parallelism.allreduce_us",
        "How long does one ring all-reduce of a decode step's activations ({model}, batch {batch}, bf16, "
        "TP = {tp}) take on H100 SXM NVLink at the physical bound (alpha = 0)? (µs)",
        answer=lambda p: allreduce_time(_message(p), p["tp"], _link(p)),
        unit="us",
        params={"model": _LLAMA70, "accelerator": _H100, "batch": 64, "tp": 8},
        variants={"model": _70B_CLASS + ("Llama-3.1-405B",), "batch": (16, 64, 256), "tp": (4, 8)},
        mistakes=[
            Mistake("NVLink 4's 900 GB/s counts both directions; a ring sends one way, at 450 GB/s.",
                    lambda p: allreduce_time(_message(p), p["tp"], 2 * _link(p))),
            Mistake("You left out the ring factor: each GPU sends 2 (N - 1) / N times the message.",
                    lambda p: _message(p) / _link(p)),
        ],
    ),
    Question(
        "parallelism.comm_per_step",
        "All-reduce time of one decode step of {model}, batch {batch}, TP = {tp} on H100 NVLink, with NCCL's "
        "LL protocol (alpha_0 = 6.6 µs per call, alpha = 0.6 µs per ring step, bus bandwidth 141 GB/s). (ms)",
        answer=lambda p: _step_comm(p),
        unit="ms",
        params={"model": _LLAMA70, "accelerator": _H100, "batch": 64, "tp": 8, **_NCCL_LL},
        variants={"model": _70B_CLASS, "batch": (32, 64, 128), "tp": (4, 8)},
        mistakes=[
            Mistake("Each layer has two all-reduces (after attention and after the FFN), not one.",
                    lambda p: _step_comm(p, per_layer=1)),
            Mistake("You counted only the latencies; the bytes take time too (2 (N - 1)/N x m / beta).",
                    lambda p: _step_comm(p, bytes_=False)),
            Mistake("You left out alpha_0, the fixed cost of every call.",
                    lambda p: _step_comm(p, base=False)),
            Mistake("That is one all-reduce; a step has 2 per layer, 2 L in all.",
                    lambda p: _step_comm(p, per_layer=1) / get_model(p["model"]).n_layers),
            Mistake("LL's latencies come with LL's bandwidth: it moves at most 141 GB/s, not the link's 450.",
                    lambda p: _step_comm(p, bus=_link(p))),
            Mistake("LL's latencies come with LL's bandwidth, 141 GB/s: 360 GB/s is Simple's, which has other "
                    "latencies (8.4 + 3.4 µs per step).", lambda p: _step_comm(p, bus=0.8 * _link(p))),
        ],
    ),
    Question(
        "parallelism.tpot_tp8",
        "TPOT of {model} on 8 x H100 SXM with TP = 8: batch {batch}, {context} tokens of context per sequence, "
        "bf16, physical bound (MFU = MBU = 1, alpha = 0), hybrid overlap. (ms)",
        answer=lambda p: tensor_parallel_decode_time(p["model"], p["accelerator"], p["batch"], p["context"],
                                                     tensor_parallel=p["tp"]),
        unit="ms",
        params={"model": _LLAMA70, "accelerator": _H100, "batch": 64, "context": 2048, "tp": 8},
        variants={"model": _70B_CLASS, "batch": (32, 64, 128), "context": (1024, 2048, 4096)},
        mistakes=[
            Mistake("Each GPU holds 1/N of the KV heads (one of the 8 at TP = 8), so it reads "
                    "1/N of the KV cache.", _tpot_without_kv_split),
            Mistake("You left out the all-reduces: T(1) / N is linear scaling, which TP never quite reaches. "
                    "Add 2 L all-reduces of B x D x 2 bytes.", _tpot_without_comm),
        ],
    ),
    Question(
        "parallelism.per_gpu_throughput",
        "{model}, TP = {tp} on H100, batch {batch}, {context} tokens of context, the book's realistic setting "
        "(MFU 0.5, MBU 0.75, 0.4 ms per step, NCCL's all-reduce protocols): output tokens/s per GPU? (tok/s)",
        answer=lambda p: per_gpu_throughput(p["model"], p["accelerator"], p["batch"], p["context"], tensor_parallel=p["tp"],
                                            **_REAL),
        unit="tok/s",
        params={"model": _LLAMA70, "accelerator": _H100, "batch": 256, "context": 2048, "tp": 8},
        variants={"model": _70B_CLASS, "batch": (64, 128, 256), "context": (1024, 2048), "tp": (4, 8)},
        mistakes=[
            Mistake("That is the whole replica's throughput, B / T; per GPU divide by N.",
                    lambda p: p["tp"] * per_gpu_throughput(p["model"], p["accelerator"], p["batch"],
                                                           p["context"], tensor_parallel=p["tp"], **_REAL)),
            Mistake("That is the physical bound; the question asks for the realistic setting.",
                    lambda p: per_gpu_throughput(p["model"], p["accelerator"], p["batch"], p["context"],
                                                 tensor_parallel=p["tp"])),
            Mistake("You paired LL's latencies with 80 % of the link; NCCL's LL moves at most 141 GB/s and "
                    "picks a protocol for each message size (setting='realistic' does this).",
                    lambda p: per_gpu_throughput(p["model"], p["accelerator"], p["batch"], p["context"],
                                                 tensor_parallel=p["tp"], **_OLD_PAIR)),
            Mistake("That is one sequence's rate, 1 / TPOT.",
                    lambda p: 1 / tensor_parallel_decode_time(p["model"], p["accelerator"], p["batch"],
                                                              p["context"], tensor_parallel=p["tp"], **_REAL)),
        ],
    ),
    Question(
        "parallelism.knee",
        "The knee B* (weight matmuls turn compute-bound) of {model} on {tp} x H100 with TP = {tp}, "
        "MFU {mfu:g} and MBU {mbu:g}: how many sequences in the whole batch? (a number)",
        answer=lambda p: _knee(p),
        params={"model": _LLAMA70, "accelerator": _H100, "tp": 8, "mfu": 0.6, "mbu": 0.65},
        variants={"model": _70B_CLASS, "tp": (4, 8), "mfu": (0.5, 0.6), "mbu": (0.65, 0.75)},
        mistakes=[
            Mistake("N cancels: each GPU reads 1/N of the weights and does 1/N of the math, so B* is the "
                    "same batch for the whole group; do not multiply by N.", lambda p: p["tp"] * _knee(p)),
            Mistake("N cancels: B* counts the sequences of the whole TP group, all of which every GPU "
                    "processes; do not divide by N.", lambda p: _knee(p) / p["tp"]),
            Mistake("That is the peak-spec knee; scale it by MFU / MBU.", lambda p: _knee(p, mfu=1.0, mbu=1.0)),
            Mistake("Inverted: B* grows with MFU / MBU (faster math needs a bigger batch to keep up).",
                    lambda p: _knee(p) * (p["mbu"] / p["mfu"]) ** 2),
        ],
    ),
    Question(
        "parallelism.knee_formula",
        "With N GPUs, weights of b_w bytes per parameter, peak FLOP/s F and bandwidth W: at which batch B* "
        "does the time to read the weight slices, P b_w / (N W), equal the matmul time, 2 P B / (N F)? "
        "Answer in F, W, b_w (and N if it stays).",
        answer=lambda p: _F * _b_w / (2 * _W),
        kind="symbolic",
        symbols={"F": _F, "W": _W, "b_w": _b_w, "N": _N},
        mistakes=[
            Mistake("N cancels: both sides carry 1/N.", lambda p: _N * _F * _b_w / (2 * _W)),
            Mistake("N cancels: both sides carry 1/N.", lambda p: _F * _b_w / (2 * _W * _N)),
            Mistake("A multiply-add is 2 FLOPs: the matmul time is 2 P B / (N F).", lambda p: _F * _b_w / _W),
            Mistake("Upside down: B* grows with the FLOP/s and shrinks with the bandwidth.",
                    lambda p: 2 * _W / (_F * _b_w)),
        ],
    ),
    Question(
        "parallelism.ring_formula",
        "Derive the time of a ring all-reduce of m bytes over N GPUs, with latency alpha per ring step and "
        "one-way link bandwidth beta (no per-call cost). Use symbolic.N and "
        "alpha, beta, m = sp.symbols('alpha beta m', positive=True).",
        answer=lambda p: 2 * (_N - 1) * _alpha + 2 * (_N - 1) / _N * _m / _beta,
        kind="symbolic",
        symbols={"alpha": _alpha, "beta": _beta, "m": _m, "N": _N},
        mistakes=[
            Mistake("That is the reduce-scatter alone; the all-gather takes another N - 1 steps.",
                    lambda p: (_N - 1) * _alpha + (_N - 1) / _N * _m / _beta),
            Mistake("Each step sends one chunk of m / N bytes, not the whole message.",
                    lambda p: 2 * (_N - 1) * (_alpha + _m / _beta)),
            Mistake("The bandwidth term should carry 2 (N - 1) / N: each GPU sends 2 (N - 1) chunks of m / N.",
                    lambda p: 2 * (_N - 1) * _alpha + 2 * _m / _beta),
            Mistake("beta is the one-way bandwidth: a bidirectional figure would halve the bandwidth term.",
                    lambda p: 2 * (_N - 1) * _alpha + (_N - 1) / _N * _m / _beta),
        ],
    ),
    Question(
        "parallelism.kv_replicated",
        "{model} (8 KV heads) split over two 8-GPU nodes with TP = 16: how many bytes of bf16 KV "
        "cache does one token add on each GPU? (bytes)",
        answer=lambda p: kv_bytes_per_token_per_gpu(p["model"], tensor_parallel=p["tp"]),
        unit="B",
        params={"model": _LLAMA70, "tp": 16},
        variants={"model": _70B_CLASS + ("Llama-3.1-405B", "Llama-2-70B")},
        mistakes=[
            Mistake("A KV head cannot be split: with 16 GPUs and 8 KV heads each GPU keeps one whole head "
                    "(each head is replicated twice), not half a head.",
                    lambda p: kv_bytes_per_token(p["model"], "bf16") / p["tp"]),
            Mistake("That is the whole token's cache; each GPU keeps only its KV head(s).",
                    lambda p: kv_bytes_per_token(p["model"], "bf16")),
        ],
    ),
    Question(
        "parallelism.min_tp",
        "Smallest TP degree ('1', '2', '4' or '8') that holds Llama-3.1-70B in bf16 plus the KV cache of 64 "
        "sequences of 4096 tokens, in 90 % of each H100's 80 GB?",
        answer=lambda p: str(min_tensor_parallel(p["model"], p["accelerator"], p["context"],
                                                 batch_size=p["batch"])),
        kind="choice",
        choices=("1", "2", "4", "8"),
        params={"model": _LLAMA70, "accelerator": _H100, "context": 4096, "batch": 64},
        mistakes=[
            Mistake("The weights fit at TP = 2 (70.6 GB per GPU of 72 GB), but the 64 x 4096-token KV cache "
                    "needs another 43 GB per GPU there.", lambda p: "2"),
            Mistake("141 GB of bf16 weights do not fit on one 80 GB GPU.", lambda p: "1"),
        ],
    ),
    Question(
        "parallelism.slo_batch",
        "{model}, TP = {tp} on H100, {context} tokens of context, the book's realistic setting (MFU 0.5, "
        "MBU 0.75, 0.4 ms per step, NCCL's all-reduce protocols): the largest batch whose TPOT meets {slo_ms:g} ms "
        "(memory aside)? (a number)",
        answer=lambda p: tpot_slo_batch_size(p["model"], p["accelerator"], p["context"], tpot_slo=p["slo"],
                                             tensor_parallel=p["tp"], **_REAL),
        params={"model": _LLAMA70, "accelerator": _H100, "context": 2048, "tp": 4, "slo": 0.050},
        variants={"model": _70B_CLASS, "tp": (4, 8), "context": (1024, 2048), "slo": (0.04, 0.05, 0.06)},
        derive=lambda p: {**p, "slo_ms": round(p["slo"] * 1e3, 3)},
        mistakes=[
            Mistake("That is the physical bound (MFU = MBU = 1, free all-reduces); the question asks for "
                    "the realistic setting.",
                    lambda p: tpot_slo_batch_size(p["model"], p["accelerator"], p["context"], tpot_slo=p["slo"], tensor_parallel=p["tp"])),
            Mistake("You applied MFU, MBU and the overhead but left the all-reduces free: their latency and "
                    "bytes count too.",
                    lambda p: tpot_slo_batch_size(p["model"], p["accelerator"], p["context"], tpot_slo=p["slo"],
                                                  tensor_parallel=p["tp"], **_FREE_COMM)),
            Mistake("You paired LL's latencies with 80 % of the link; NCCL's LL moves at most 141 GB/s "
                    "(setting='realistic' costs each message with the protocol NCCL picks).",
                    lambda p: tpot_slo_batch_size(p["model"], p["accelerator"], p["context"], tpot_slo=p["slo"],
                                                  tensor_parallel=p["tp"], **_OLD_PAIR)),
        ],
    ),
    Question(
        "parallelism.replicas_per_gpu",
        "On one 8 x H100 node at a fixed batch of 64 sequences per replica (2048 tokens of context, the book's "
        "realistic setting), which gives more output tokens/s per GPU: 'two TP=4 replicas', 'one TP=8 replica' or "
        "'the same'?",
        answer=lambda p: ("two TP=4 replicas" if _per_gpu_at_fixed_batch(p, 4) > 1.01 * _per_gpu_at_fixed_batch(p, 8)
                          else "one TP=8 replica" if _per_gpu_at_fixed_batch(p, 8) > 1.01 * _per_gpu_at_fixed_batch(p, 4)
                          else "the same"),
        kind="choice",
        choices=("two TP=4 replicas", "one TP=8 replica", "the same"),
        params={"model": _LLAMA70, "accelerator": _H100, "batch": 64, "context": 2048},
        mistakes=[
            Mistake("The TP=8 replica's step is faster (1.6x), but it uses twice the GPUs: per GPU it "
                    "delivers less. Compare B / (N T), not B / T.", lambda p: "one TP=8 replica"),
            Mistake("Per replica TP=8 is 1.6x faster, not 2x, because of the all-reduces and the overhead; per "
                    "GPU the two TP=4 replicas win.", lambda p: "the same"),
        ],
    ),
]
