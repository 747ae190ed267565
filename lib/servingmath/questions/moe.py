"""Questions of chapter 16, "Mixture of experts and expert parallelism".

Every expected answer is computed by the library from the question's parameters, and so is every
known mistake (the total for the active count, no overlap between tokens' experts, the active
parameters as the bytes a batch reads, the E/k rule for the whole-step knee, a dispatch without its
k copies, one all-to-all per layer, one protocol's latencies with another's bandwidth, TP's two
all-reduces forgotten, K and V counted for an MLA latent, the config's 128 KV heads), so a variant
with other parameters keeps its hints.
"""

from __future__ import annotations

import sympy as sp

from ..question import Mistake, Question
from ..datatypes import bytes_per_element
from ..sharding import NCCL_LL_BANDWIDTH_CAP, NCCL_RING_PROTOCOLS
from ..deployment import Deployment
from ..hardware import get_accelerator
from ..memory import max_batch_size
from ..models import (active_parameter_count, expert_parameter_split, get_model, input_embedding_parameter_count,
                      kv_bytes_per_token, parameter_count)
from ..moe import (dispatch_bytes, experts_touched, expert_parallel_communication_time, mla_decompressed_kv_bytes_per_token,
                   moe_knee, prefill_communication_per_token, weight_bytes_read)

__all__ = ["QUESTIONS"]

DS, Q235, Q30, MIX = "DeepSeek-V3", "Qwen3-235B-A22B", "Qwen3-30B-A3B", "Mixtral-8x7B"
H100, H200, B200 = "H100-SXM5-80GB", "H200-SXM-141GB", "B200-SXM-180GB"
FP8 = {"weight_dtype": "fp8", "compute_dtype": "fp8"}

_k, _G, _L, _n = sp.symbols("k G L n_moe", positive=True)


def _billions(x):
    return float(x) / 1e9


def _experts_only(p):
    """k x one expert summed over the layers: the shared part forgotten."""
    m = get_model(p["model"])
    return m.n_active_experts * expert_parameter_split(m)[1]


def _touched_no_overlap(p):
    m = get_model(p["model"])
    return min(m.n_experts, p["batch"] * m.n_active_experts)


def _read(p, **over):
    return weight_bytes_read(p["model"], p["batch"], weight_dtype="fp8", **over)


def _experts_read_only(p):
    """The touched experts without the shared weights."""
    m = get_model(p["model"])
    return experts_touched(m, p["batch"]) * expert_parameter_split(m)[1] * 1.0


def _ridge(p):
    g = get_accelerator(p["accelerator"])
    return g.peak_flops(p.get("compute", "bf16")) / g.memory_bandwidth


def _knee(p, convention):
    opts = FP8 if p.get("compute") == "fp8" else {}
    return moe_knee(p["model"], p["accelerator"], convention=convention, **opts)


def _b(p):
    return bytes_per_element(p.get("compute", "bf16"))


def _dispatch_out(p, copies=True, own_share=False, dtype="fp8"):
    m = get_model(DS)
    per_gpu = p["tokens"] * (m.n_active_experts if copies else 1) * m.hidden_size * bytes_per_element(dtype)
    return per_gpu if own_share else per_gpu * (p["ep"] - 1) / p["ep"]


def _a2a(p, **over):
    opts = {"expert_parallel": 8, "setting": "realistic", **over}
    return expert_parallel_communication_time(DS, H200, p["batch"], **opts)


def _a2a_all_layers(p):
    m = get_model(DS)
    return _a2a(p) * m.n_layers / m.n_moe_layers


def _a2a_by_hand(p, *, link=450e9, bytes_=True, latencies="own"):
    """2 n_moe x the fastest protocol's t_p = alpha_0 + 7 alpha + 7/8 m / B_p (EP = 8), with slips:
    ``bytes_=False`` drops the bandwidth term; ``latencies="LL"`` takes LL's latencies for every
    protocol's bandwidth (the book's earlier realistic pair: LL's latencies at 80 % of the link)."""
    m = get_model(DS)
    message = p["batch"] / 8 * m.n_active_experts * m.hidden_size * 2
    times = []
    for name, c in NCCL_RING_PROTOCOLS.items():
        bandwidth = c["bandwidth_factor"] * 0.8 * link
        if name == "LL":
            bandwidth = min(bandwidth, NCCL_LL_BANDWIDTH_CAP * link)
        lat = NCCL_RING_PROTOCOLS["LL" if latencies == "LL" else name]
        times.append(lat["base_latency"] + 7 * lat["latency"] + (7 / 8 * message / bandwidth if bytes_ else 0.0))
    return 2 * m.n_moe_layers * min(times)


def _mla(p, dtype=None):
    return kv_bytes_per_token(DS, dtype or p["dtype"])


def _prefill(p, **over):
    return prefill_communication_per_token(DS, H200, tensor_parallel=p["tp"], **FP8, **over)["ratio"]


def _capacity(layout):
    dep = Deployment.build(DS, H200, **FP8, **layout)
    return int(max_batch_size(dep, 4096))


def _best_layout(p):
    tp, ep = _capacity({"tensor_parallel": 8}), _capacity({"expert_parallel": 8})
    return "EP 8 with attention DP 8" if ep > tp else "TP 8"


QUESTIONS = [
    Question(
        "moe.active_parameters",
        "How many parameters does one token of {model} use (its active parameters, the input-embedding table "
        "included, as models.active_parameter_count counts them)? (billions, a number)",
        answer=lambda p: _billions(active_parameter_count(p["model"])),
        params={"model": DS},
        variants={"model": (DS, Q235, Q30, MIX)},
        mistakes=[
            Mistake("That is every parameter, all E experts of every layer; a token uses only k of them (plus the "
                    "shared part).", lambda p: _billions(parameter_count(p["model"]))),
            Mistake("You counted only the k routed experts. Every token also uses the shared part: attention, "
                    "norms, routers, shared experts, dense layers, embeddings and the LM head.",
                    lambda p: _billions(_experts_only(p))),
            Mistake("That leaves out the input-embedding table (a look-up, but a stored parameter the count "
                    "includes).", lambda p: _billions(active_parameter_count(p["model"])
                                                      - input_embedding_parameter_count(p["model"]))),
        ],
        chapter="moe", difficulty="easy",
    ),
    Question(
        "moe.experts_touched",
        "A decode step of {model} runs a batch of {batch} sequences. With uniform, independent routing, how "
        "many distinct routed experts does it touch per MoE layer, on average? (a number)",
        answer=lambda p: experts_touched(p["model"], p["batch"]),
        params={"model": DS, "batch": 16},
        variants={"model": (DS, Q235, Q30), "batch": (4, 8, 16, 32)},
        mistakes=[
            Mistake("B x k assumes no two tokens share an expert. Each expert escapes one token with probability "
                    "1 - k/E, so E (1 - (1 - k/E)^B) are touched.", _touched_no_overlap),
            Mistake("That is one token's experts, k; the batch's tokens pick theirs independently.",
                    lambda p: get_model(p["model"]).n_active_experts),
            Mistake("That is the share of the experts touched, 1 - (1 - k/E)^B; multiply by E for the count.",
                    lambda p: experts_touched(p["model"], p["batch"]) / get_model(p["model"]).n_experts),
        ],
        chapter="moe", difficulty="easy",
    ),
    Question(
        "moe.weight_read",
        "{model} with fp8 weights: how many bytes of weights does a decode step of batch {batch} read, summed "
        "over the GPUs (uniform routing; the step gathers rows of the embedding table rather than reading it)? (GB)",
        answer=_read,
        unit="GB",
        params={"model": DS, "batch": 16},
        variants={"model": (DS, Q235), "batch": (4, 8, 16, 32)},
        mistakes=[
            Mistake("The active parameters are one token's weights. A batch of B tokens touches "
                    "E (1 - (1 - k/E)^B) experts per layer, and the step reads each of them once.",
                    lambda p: active_parameter_count(p["model"]) * 1.0),
            Mistake("That is every weight; a batch this small has not touched all the experts yet.",
                    lambda p: parameter_count(p["model"]) * 1.0),
            Mistake("You counted the touched experts only; the step reads the shared weights too (attention, "
                    "shared experts, dense layers, LM head).", _experts_read_only),
        ],
        chapter="moe", difficulty="medium",
    ),
    Question(
        "moe.knee_e_over_k",
        "The E/k rule for the MoE knee: {model} in W8A8-FP8 (fp8 weights and math) on one {accelerator}. At which "
        "decode batch do the routed experts' matmuls turn compute-bound, every expert touched and the shared "
        "weights ignored (dense peak, MFU = MBU = 1)? (sequences)",
        answer=lambda p: _knee(p, "experts"),
        params={"model": DS, "accelerator": H200, "compute": "fp8"},
        variants={"model": (DS, Q235, MIX), "accelerator": (H100, H200, B200)},
        mistakes=[
            Mistake("That is a dense model's knee, ridge x b_w / 2. Each expert sees only B k / E of the batch, so "
                    "it needs E / k times as many sequences.", lambda p: _ridge(p) * _b(p) / 2),
            Mistake("Upside down: each expert sees k/E of the batch, so the knee is E / k (not k / E) times the "
                    "dense one.", lambda p: _ridge(p) * _b(p) / 2 * get_model(p["model"]).n_active_experts
                    / get_model(p["model"]).n_experts),
            Mistake("That is the whole-step knee (the book's default convention); the question asks for the E/k "
                    "rule, experts only.", lambda p: _knee(p, "step")),
        ],
        chapter="moe", difficulty="medium",
    ),
    Question(
        "moe.knee_step",
        "The book's MoE knee (the whole decode step: shared weights and the experts the batch touches) of "
        "{model} in bf16 on one {accelerator}, physical bound. (sequences)",
        answer=lambda p: _knee(p, "step"),
        params={"model": Q235, "accelerator": H100},
        variants={"model": (DS, Q235, Q30), "accelerator": (H100, H200, B200)},
        mistakes=[
            Mistake("That is the E/k rule, which ignores the shared weights; every token multiplies those, so the "
                    "whole step turns compute-bound earlier.", lambda p: _knee(p, "experts")),
            Mistake("That is a dense model's knee; an MoE reads all E experts per step but multiplies each token "
                    "by only k of them.", lambda p: _ridge(p) * _b(p) / 2),
        ],
        chapter="moe", difficulty="hard",
    ),
    Question(
        "moe.dispatch_bytes",
        "DeepSeek-V3 (hidden size 7168, top-8 routing) with expert parallelism EP = {ep}: each GPU holds {tokens} "
        "tokens of a decode step. In one dispatch, in fp8, how many bytes leave each GPU, routing uniform? (MB)",
        answer=lambda p: _dispatch_out(p),
        unit="MB",
        params={"ep": 8, "tokens": 128},
        variants={"ep": (8, 16, 32), "tokens": (64, 128, 256)},
        mistakes=[
            Mistake("Each token goes to k = 8 experts, one copy each: T k D b bytes, not T D b.",
                    lambda p: _dispatch_out(p, copies=False)),
            Mistake("1/EP of the copies are for experts on the GPU itself and never leave it: (EP - 1) / EP of "
                    "T k D b.", lambda p: _dispatch_out(p, own_share=True)),
            Mistake("The question says fp8 (1 byte); bf16 would be 2.", lambda p: _dispatch_out(p, dtype="bf16")),
        ],
        chapter="moe", difficulty="medium",
    ),
    Question(
        "moe.alltoall_time",
        "DeepSeek-V3 with EP = 8 on one 8 x H200 node (NVLink 4, 450 GB/s one way), a decode step of {batch} "
        "sequences, bf16 activations, the realistic setting: NCCL's tuner costs each all-to-all with the fastest "
        "of its protocols, t_p = alpha_0 + (EP - 1) alpha + (EP - 1) / EP x m / B_p, with (alpha_0, alpha, B_p) "
        "= LL (6.6 µs, 0.6 µs, min(0.5 x 0.8 x 450, 141) GB/s), LL128 (14.0 µs, 1.9 µs, 0.92 x 0.8 x 450 GB/s), "
        "Simple (8.4 µs, 3.4 µs, 0.8 x 450 GB/s). Time of the step's all-to-alls? (ms)",
        answer=_a2a,
        unit="ms",
        params={"batch": 256},
        variants={"batch": (64, 256, 1024)},
        mistakes=[
            Mistake("Each MoE layer has two all-to-alls, a dispatch and a combine.", lambda p: _a2a(p) / 2),
            Mistake("Only the 58 MoE layers have all-to-alls; DeepSeek-V3's first 3 layers are dense.",
                    _a2a_all_layers),
            Mistake("You counted only the latencies; the bytes take time too ((EP - 1) / EP x T k D b / EP at "
                    "the protocol's bandwidth).", lambda p: _a2a_by_hand(p, bytes_=False)),
            Mistake("NVLink 4's 900 GB/s counts both directions; each GPU sends at 450 GB/s.",
                    lambda p: _a2a_by_hand(p, link=900e9)),
            Mistake("That is LL's latencies with the bandwidth of Simple (0.8 x 450 GB/s), a pair NCCL never "
                    "uses together: LL moves at most 141 GB/s, and LL128 and Simple have longer latencies. Cost "
                    "each protocol with its own three numbers and take the fastest.",
                    lambda p: _a2a_by_hand(p, latencies="LL")),
        ],
        chapter="moe", difficulty="hard",
    ),
    Question(
        "moe.ep_tp_bytes",
        "Derive the bytes each GPU sends per token with expert parallelism (EP = G, attention data-parallel: a "
        "dispatch and a combine in each of n_moe MoE layers, k copies per token) divided by those with tensor "
        "parallelism (TP = G: two ring all-reduces of D values per layer, L layers). Use "
        "k, G, L, n_moe = sp.symbols('k G L n_moe', positive=True).",
        answer=lambda p: _k * _n / (2 * _L * _G),
        kind="symbolic",
        symbols={"k": _k, "G": _G, "L": _L, "n_moe": _n},
        mistakes=[
            Mistake("TP all-reduces twice per layer (after attention and after the FFN).",
                    lambda p: _k * _n / (_L * _G)),
            Mistake("EP has two all-to-alls per MoE layer, a dispatch and a combine.",
                    lambda p: _k * _n / (4 * _L * _G)),
            Mistake("Upside down: EP sends fewer bytes as G grows.", lambda p: 2 * _L * _G / (_k * _n)),
            Mistake("Only the MoE layers have all-to-alls: n_moe of them, not L.", lambda p: _k / (2 * _G)),
        ],
        chapter="moe", difficulty="hard",
    ),
    Question(
        "moe.mla_kv_bytes",
        "KV-cache bytes one token adds to DeepSeek-V3 (MLA: kv_lora_rank 512, qk_rope_head_dim 64, 61 layers) "
        "in {dtype}, cached as DeepSeek's inference code caches it (the latent and the RoPE key)? (bytes)",
        answer=lambda p: _mla(p),
        unit="B",
        params={"dtype": "bf16"},
        variants={"dtype": ("bf16", "fp8")},
        mistakes=[
            Mistake("MLA caches one latent per layer, not a K and a V: there is no factor 2.",
                    lambda p: 2 * _mla(p)),
            Mistake("You left out the decoupled RoPE key (64 values per layer), cached beside the 512-value latent.",
                    lambda p: _mla(p) * 512 / 576),
            Mistake("That is the decompressed cache (K and V of all 128 heads), what the naive kernel stores.",
                    lambda p: mla_decompressed_kv_bytes_per_token(DS, kv_dtype=p["dtype"])),
            Mistake("The config's num_key_value_heads = 128 counts heads after decompression; the cache holds "
                    "one latent shared by all heads.",
                    lambda p: 2 * 61 * 128 * 192 * bytes_per_element(p["dtype"])),
        ],
        chapter="moe", difficulty="easy",
    ),
    Question(
        "moe.layout_capacity",
        "One 8 x H200 node serves DeepSeek-V3 in fp8 with 4096 tokens of context per sequence (90 % of memory). "
        "Which layout holds more sequences: 'TP 8' or 'EP 8 with attention DP 8'?",
        answer=_best_layout,
        kind="choice",
        choices=("TP 8", "EP 8 with attention DP 8"),
        mistakes=[
            Mistake("TP 8 splits the weights most finely, but MLA's latent is one 'KV head': TP keeps all of it on "
                    "every GPU, eight copies. Attention DP keeps each sequence's latent once (776 sequences "
                    "against 148).", lambda p: "TP 8"),
        ],
        chapter="moe", difficulty="medium",
    ),
    Question(
        "moe.prefill_ratio",
        "A long prefill of DeepSeek-V3 in W8A8-FP8 under TP = {tp} on H200s (NVLink 4), physical bound: the time "
        "its all-reduces take per prompt token over its matmul time per prompt token? (a number)",
        answer=_prefill,
        params={"tp": 8},
        variants={"tp": (2, 4, 8)},
        mistakes=[
            Mistake("NVLink 4's 900 GB/s counts both directions; a ring sends at 450 GB/s one way.",
                    lambda p: _prefill(p) / 2),
            Mistake("A ring all-reduce sends 2 (N - 1) / N of the message, not 2: the (N - 1) / N is missing.",
                    lambda p: _prefill(p) * p["tp"] / (p["tp"] - 1)),
            Mistake("Upside down: the question asks for communication over compute.", lambda p: 1 / _prefill(p)),
        ],
        chapter="moe", difficulty="hard",
    ),
]
