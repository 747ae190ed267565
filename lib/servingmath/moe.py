"""Mixture of experts: experts touched per step, the MoE knee, expert parallelism and its all-to-alls, MLA.

A mixture-of-experts (MoE) layer holds E routed experts (FFNs) and a router
that sends each token to k of them; DeepSeek-V3 also runs one *shared* expert
on every token and keeps its first three layers dense. Everything else
(attention, norms, routers, shared experts, dense layers, embeddings, the LM
head) is *shared*: every token uses it (:func:`servingmath.models.expert_parameter_split`).

What this does to serving, derived in the chapter "Mixture of experts":

* **Weights read per step.** A step of T tokens touches, per MoE layer, an
  expected E (1 - (1 - k/E)^T) distinct experts (each expert is missed by one
  token with probability 1 - k/E; routing assumed uniform and independent,
  :func:`experts_touched`). So a decode step reads the shared weights plus
  the touched experts (:func:`weight_bytes_read`): about the *active*
  parameters at batch 1, almost *all* of them by batch ~ E / k x 4.
  The step model (:mod:`servingmath.step`) counts exactly this, so every
  decode, prefill and knee function of the library works on these models.
* **The MoE knee** (:func:`moe_knee`): where the weight matmuls turn
  compute-bound. Two conventions (:data:`KNEE_CONVENTIONS`): the book's
  ``"step"`` (the whole step: shared weights, which see every token, plus the
  experts touched) and the rule of thumb ``"experts"`` (the E/k rule: the
  routed experts alone, all of them touched, B* = (E / k) x ridge x b_w / 2).
* **Expert parallelism** (EP, ``expert_parallel=EP`` on any deployment): E / EP
  whole experts per GPU, attention and the shared weights run data-parallel in
  EP / N groups of N tensor-parallel GPUs; each MoE layer dispatches every
  token's hidden state to its k experts and combines the results, two
  all-to-alls of T k D b / EP bytes per GPU (:func:`dispatch_bytes`,
  :func:`expert_parallel_communication_time`). Against tensor parallelism on
  the same G GPUs it sends k n_moe / (2 L G) of the bytes
  (:func:`communication_bytes_per_token`), and attention DP keeps one copy of
  each sequence's KV cache where TP replicates an MLA latent on every GPU
  (:func:`compare_ep_tp`).
* **Multi-head latent attention** (MLA, DeepSeek-V2/V3): a 576-value latent
  per token and layer instead of 2 K d_h values; with the up-projections
  absorbed its attention does 2 H (2 d_c + d_R) FLOPs per (query, key) pair
  and layer, about 242 FLOP per KV byte in bf16 (:func:`attention_flops_per_kv_byte`):
  decode attention near the ridge point, unlike GQA's 2 G / b.

Assumptions: uniform, independent routing (the mean; the busiest GPU of a real
step reads and computes more, and load balancing is what keeps it close);
an EP group inside one interconnect domain (NVLink/NVSwitch), costed by the
deployment's all-reduce model (alpha, alpha_0, link efficiency, data type).

Examples
--------
>>> round(experts_touched("DeepSeek-V3", 64), 1)     # of 256 routed experts per layer
222.4
>>> round(moe_knee("DeepSeek-V3", "H200", weight_dtype="fp8", compute_dtype="fp8"))
3772
>>> round(moe_knee("DeepSeek-V3", "H200", weight_dtype="fp8", compute_dtype="fp8", convention="experts"))
6596
"""

from __future__ import annotations

import numpy as np

from ._validation import check_choice, check_integer, check_nonnegative, check_scalar, scalar_or_array
from .datatypes import bytes_per_element, check_dtype
from .decode import decode_step_parts, decode_step_time, knee_batch_size
from .deployment import Deployment, deployment_function
from .memory import max_batch_size
from .models import (active_parameter_count, attention_flops_per_pair, body_parameter_count, get_model,
                     kv_bytes_per_token)
from .sharding import alltoall_time, check_expert_parallel, check_tensor_parallel, ring_allreduce_bytes
from .step import Iteration, work_coefficients

__all__ = [
    "KNEE_CONVENTIONS",
    "DEFAULT_KNEE_CONVENTION",
    "touched_fraction",
    "experts_touched",
    "weight_bytes_read",
    "active_weight_bytes",
    "moe_knee",
    "alltoall_time",
    "dispatch_bytes",
    "expert_parallel_communication_time",
    "communication_bytes_per_token",
    "compare_ep_tp",
    "attention_flops_per_kv_byte",
    "mla_decompressed_kv_bytes_per_token",
    "prefill_communication_per_token",
]

#: The two conventions for the MoE knee (critical batch), name -> what it counts and who uses it.
KNEE_CONVENTIONS = {
    "step": ("the book's default: the whole decode step, as the step model counts it -- the shared "
             "weights (attention, shared experts, dense layers, LM head), which every token multiplies, "
             "and the routed experts the batch is expected to touch, E (1 - (1 - k/E)^B) per layer; "
             "solved by bisection (servingmath.decode.knee_batch_size)"),
    "experts": ("the E/k rule: the routed experts alone, every one of them touched, each seeing B k / E "
                "tokens, so B* = (E / k) x (F / W) x b_w / 2; the uniform-routing arithmetic of "
                "A. Douillard's 'Intensity' calculator (arthurdouillard.com/intensity, read 2026-12: "
                "'each of the E experts processes approximately (B x K) / E tokens during sampling') "
                "and of interview rules of thumb. It ignores the shared weights, so it overstates the "
                "knee of models whose shared part is large, and it undercounts nothing only when "
                "B >> E / k"),
}
#: The book's convention for :func:`moe_knee`.
DEFAULT_KNEE_CONVENTION = "step"
_MAX_BATCH = 10**9   # sequences: a bound far beyond any memory, below float overflow in the step model


def _moe_model(model):
    model = get_model(model)
    if not model.is_moe:
        raise ValueError(f"model {model.name} is dense (n_experts = 1); this function is for a mixture of "
                         "experts (e.g. 'Mixtral-8x7B', 'Qwen3-30B-A3B', 'DeepSeek-V3')")
    return model


def touched_fraction(tokens, *, n_experts, n_active):
    """Expected share of the experts of one layer that ``tokens`` tokens touch: 1 - (1 - k/E)^T.

    Parameters
    ----------
    tokens : int or array
        T >= 0, tokens in the step (the batch in decode).
    n_experts, n_active : int
        E routed experts per layer, k of them per token (1 <= k <= E).

    Returns
    -------
    float or ndarray
        In [0, 1]; T k / E for T << E / k, 1 - exp(-T k / E) for large E.

    Notes
    -----
    Each token picks k distinct experts of E; with uniform, independent
    routing a given expert escapes one token with probability 1 - k/E and all
    T with (1 - k/E)^T. The expectation is exact under that assumption;
    learned routers are not uniform (load-balancing losses push them towards
    it), which touches fewer experts at small T. Derived in the chapter
    "Mixture of experts".

    References
    ----------
    The occupancy ("balls into bins") expectation; for MoE serving e.g.
    J. Huang et al., "Towards MoE Deployment: Mitigating Inefficiencies in
    Mixture-of-Expert (MoE) Inference", arXiv:2303.06182 (2023).

    Examples
    --------
    >>> touched_fraction(1, n_experts=256, n_active=8)
    0.03125
    >>> round(touched_fraction(256, n_experts=256, n_active=8), 4)    # B = E: 1 - (31/32)^256
    0.9997
    >>> round(touched_fraction(16, n_experts=8, n_active=2), 3)       # Mixtral: all 8 experts by B = 16
    0.99
    >>> touched_fraction(4, n_experts=8, n_active=9)
    Traceback (most recent call last):
    ...
    ValueError: n_active must be between 1 and n_experts = 8, got 9
    """
    t = check_nonnegative("tokens", tokens)
    e = int(check_integer("n_experts", check_scalar("n_experts", n_experts), minimum=1))
    k = int(check_integer("n_active", check_scalar("n_active", n_active), minimum=1))
    if k > e:
        raise ValueError(f"n_active must be between 1 and n_experts = {e}, got {k}")
    return scalar_or_array(1.0 - (1.0 - k / e) ** t)


def experts_touched(model, tokens, *, expert_parallel=1):
    """Expected distinct routed experts per MoE layer that a step of ``tokens`` tokens touches.

    E (1 - (1 - k/E)^T) for the whole layer; with ``expert_parallel`` = EP,
    the mean per GPU, (E / EP) (1 - (1 - k/E)^T) (T: the tokens of the whole
    instance, which all GPUs dispatch to each other). Derived in the chapter
    "Mixture of experts".

    Examples
    --------
    >>> experts_touched("DeepSeek-V3", 1)          # one token: its k = 8 experts
    8.0
    >>> round(experts_touched("DeepSeek-V3", 64, expert_parallel=8), 2)
    27.81
    >>> [round(float(x), 2) for x in experts_touched("Mixtral-8x7B", [1, 2, 4, 8])]
    [2.0, 3.5, 5.47, 7.2]
    """
    model = _moe_model(model)
    ep = check_expert_parallel(model, expert_parallel)
    frac = np.asarray(touched_fraction(tokens, n_experts=model.n_experts, n_active=model.n_active_experts))
    return scalar_or_array(model.n_experts / np.asarray(ep, dtype=float) * frac)


def weight_bytes_read(model, tokens, *, weight_dtype="bf16", tensor_parallel=1, expert_parallel=1):
    """Bytes of weights one GPU reads in a step of ``tokens`` tokens (logits at the last position).

    The step model's weight read (:mod:`servingmath.step`): the shared weights
    (less the embedding table, of which T rows are gathered) plus the routed
    experts the T tokens touch, on one GPU of the deployment.

    Notes
    -----
    W(T) = b_w [P_shared - V D + V D (LM head) + T D + E (1 - (1 - k/E)^T) P_e] / G
    on one GPU, with P_e one expert summed over the MoE layers and G GPUs (TP:
    every term / N; EP: the shared terms / N, the experts / EP). At T = 1 it
    is about the active parameters, P_shared + k P_e; for T >> E / k, all of
    them. Derived in the chapter "Mixture of experts".

    Examples
    --------
    >>> round(weight_bytes_read("DeepSeek-V3", 1, weight_dtype="fp8") / 1e9, 1)     # GB, batch 1
    36.6
    >>> round(weight_bytes_read("DeepSeek-V3", 1024, weight_dtype="fp8") / 1e9, 1)  # all 671B but the table
    670.1
    """
    model = get_model(model)
    t = check_nonnegative("tokens", tokens)
    dep = Deployment(model=model, accelerator=None, tensor_parallel=tensor_parallel,
                     expert_parallel=expert_parallel, weight_dtype=weight_dtype)
    return scalar_or_array(work_coefficients(dep).weight_bytes(t, 1.0))


def active_weight_bytes(model, *, weight_dtype="bf16"):
    """Bytes of the active parameters, P_active x b_w: what a step of one token needs at most.

    The naive estimate of a decode step's weight read ("an MoE reads only its
    active parameters"), right at batch 1 only: a batch of B tokens touches
    more experts (:func:`weight_bytes_read`). Derived in the chapter
    "Mixture of experts".

    >>> round(active_weight_bytes("DeepSeek-V3", weight_dtype="fp8") / 1e9, 1)
    37.6
    """
    check_dtype(weight_dtype, "weight_dtype")
    return float(active_parameter_count(model) * bytes_per_element(weight_dtype))


@deployment_function
def moe_knee(dep: Deployment, context_len=0, *, convention=DEFAULT_KNEE_CONVENTION):
    """The MoE knee: the decode batch at which the weight matmuls turn compute-bound, by convention.

    Parameters
    ----------
    model, accelerator : or one Deployment
    context_len : int or array
        As in :func:`servingmath.decode.knee_batch_size` (the hybrid knee ignores it).
    convention : {"step", "experts"}
        :data:`KNEE_CONVENTIONS`. ``"step"`` (default): the whole step
        (:func:`servingmath.decode.knee_batch_size`). ``"experts"``: the E/k rule.

    Returns
    -------
    float or ndarray
        B*, sequences of the whole instance.

    Notes
    -----
    ``"step"`` solves b_w [S + E (1 - (1 - k/E)^B) e] / W = 2 B (S' + k e) / F
    for B (S: shared weights read, S': shared weights multiplied, e: one
    expert), so B* = ridge x b_w / 2 x (S + E e) / (S' + k e) once every expert
    is touched. ``"experts"`` keeps only the experts, each read once and
    multiplied by its B k / E tokens: B* = (E / k) x ridge x b_w / 2. The
    shared weights, compute-bound from B = ridge x b_w / 2 on, pull the
    ``"step"`` knee below the E/k rule: 3772 vs 6596 for DeepSeek-V3 in fp8
    on an H200. Tensor and expert parallelism divide both sides (the shared
    weights replicate per attention group under EP, which raises the ``"step"``
    knee). Derived in the chapter "Mixture of experts".

    Examples
    --------
    >>> round(moe_knee("Mixtral-8x7B", "H100"))                        # bf16
    1079
    >>> round(moe_knee("Mixtral-8x7B", "H100", convention="experts"))  # 8 / 2 x 295.3
    1181
    >>> moe_knee("Llama-3.1-8B", "H100")
    Traceback (most recent call last):
    ...
    ValueError: model Llama-3.1-8B is dense (n_experts = 1); this function is for a mixture of experts (e.g. 'Mixtral-8x7B', 'Qwen3-30B-A3B', 'DeepSeek-V3')
    """
    model = _moe_model(dep.model)
    check_choice("convention", convention, KNEE_CONVENTIONS)
    if convention == "step":
        return knee_batch_size(dep, context_len)
    ratio = model.n_experts / model.n_active_experts
    knee = ratio * dep.flops / dep.bandwidth * bytes_per_element(dep.weight_dtype) / 2.0
    return scalar_or_array(np.asarray(knee) + 0.0 * np.asarray(context_len, dtype=float))


def dispatch_bytes(model, tokens, *, expert_parallel, dtype="bf16"):
    """Bytes one GPU scatters in one MoE dispatch (or combine): T k D b / EP.

    T tokens of the whole instance, spread evenly over its EP GPUs, each sent
    to its k experts (one copy per expert; deduplicating the copies bound for
    one GPU, as DeepEP does across nodes, sends fewer). Of these,
    (EP - 1) / EP leave the GPU. Derived in the chapter "Mixture of experts".

    >>> dispatch_bytes("DeepSeek-V3", 128 * 8, expert_parallel=8, dtype="fp8") / 1e6   # MB: 128 tokens per GPU
    7.340032
    """
    model = _moe_model(model)
    t = check_nonnegative("tokens", tokens)
    ep = np.asarray(check_expert_parallel(model, expert_parallel), dtype=float)
    b = bytes_per_element(check_dtype(dtype, "dtype"))
    return scalar_or_array(t * model.n_active_experts * model.hidden_size * b / ep)


@deployment_function
def expert_parallel_communication_time(dep: Deployment, tokens):
    """Seconds per step of the expert-parallel all-to-alls: a dispatch and a combine per MoE layer.

    2 n_moe [alpha_0 + (EP - 1) alpha + (EP - 1) / EP x T k D b / (EP eta beta)],
    with the deployment's all-reduce model (``allreduce_latency``,
    ``allreduce_base_latency``, ``link_efficiency``, ``allreduce_dtype``) and
    the accelerator's one-way link bandwidth beta; 0 without expert
    parallelism. Derived in the chapter "Mixture of experts".

    Examples
    --------
    >>> t = expert_parallel_communication_time("DeepSeek-V3", "H200", 256, expert_parallel=8)
    >>> round(t * 1e3, 3)       # ms: 116 all-to-alls of 3.7 MB at 450 GB/s
    0.828
    >>> expert_parallel_communication_time("DeepSeek-V3", "H200", 256)   # no EP
    0.0
    """
    model = _moe_model(dep.model)
    t = check_nonnegative("tokens", tokens)
    ep = np.asarray(dep.expert_parallel)
    if not np.any(ep > 1):
        return scalar_or_array(0.0 * t)
    link = dep.accelerator.interconnect_bandwidth
    if link is None:
        raise ValueError(f"accelerator {dep.accelerator.name} has no interconnect bandwidth in the catalog; "
                         "expert_parallel > 1 needs one")
    m = t * model.n_active_experts * model.hidden_size * dep.allreduce.bytes_per_element / np.maximum(ep, 1)
    one = np.asarray(dep.allreduce.alltoall_time(m, np.maximum(ep, 1), link))
    return scalar_or_array(2.0 * model.n_moe_layers * one * (ep > 1))


def communication_bytes_per_token(model, *, tensor_parallel=1, expert_parallel=1, dtype="bf16"):
    """Bytes each GPU sends per token of the instance, all-reduces and all-to-alls together.

    Tensor parallelism: 2 L ring all-reduces of the group's tokens,
    2 (N - 1) / N x D b each per token, over the EP / N data-parallel groups.
    Expert parallelism: 2 n_moe all-to-alls, (EP - 1) / EP x k D b / EP per token.

    Notes
    -----
    On G GPUs, pure TP (N = G) sends 4 L (G - 1) / G x D b per token; EP = G
    with attention DP (N = 1) sends 2 n_moe (G - 1) / G x k D b / G. Their
    ratio is k n_moe / (2 L G): EP sends fewer bytes once G > k n_moe / (2 L),
    about k / 2 (4 GPUs for DeepSeek-V3's k = 8). Derived in the chapter
    "Mixture of experts".

    Examples
    --------
    >>> tp = communication_bytes_per_token("DeepSeek-V3", tensor_parallel=8)
    >>> ep = communication_bytes_per_token("DeepSeek-V3", expert_parallel=8)
    >>> round(tp / 1e6, 3), round(ep / 1e6, 3), round(ep / tp, 3)      # MB per token
    (3.061, 1.455, 0.475)
    """
    model = get_model(model)
    n = np.asarray(check_tensor_parallel(model, tensor_parallel), dtype=float)
    ep = np.asarray(check_expert_parallel(model, expert_parallel, tensor_parallel), dtype=float)
    b = bytes_per_element(check_dtype(dtype, "dtype"))
    dp = np.maximum(ep, n) / n
    allreduce = 2.0 * model.n_layers * np.asarray(ring_allreduce_bytes(model.hidden_size * b, n)) / dp
    a2a = 2.0 * model.n_moe_layers * (ep - 1) / ep * model.n_active_experts * model.hidden_size * b / ep
    return scalar_or_array(allreduce + a2a * (ep > 1))


@deployment_function
def compare_ep_tp(dep: Deployment, batch_size, context_len, *, n_gpus, attention_tensor_parallel=1) -> list[dict]:
    """Tensor parallelism against attention DP x expert EP on the same GPUs, at one batch and context.

    Parameters
    ----------
    model, accelerator : or one Deployment (its tensor_parallel and expert_parallel are replaced)
    batch_size, context_len : int
        Sequences of the whole instance, and tokens in each one's KV cache.
    n_gpus : int
        G: the TP row uses ``tensor_parallel=G``, the EP row ``expert_parallel=G``
        with ``tensor_parallel=attention_tensor_parallel``.
    attention_tensor_parallel : int
        N of each attention group under EP (1: pure attention DP).

    Returns
    -------
    list of dict
        One row per layout: ``layout``, ``tensor_parallel``, ``expert_parallel``,
        ``tpot`` (s), the six parts of :func:`servingmath.decode.decode_step_parts`
        (s), ``throughput_per_gpu`` (tok/s), ``max_batch`` (the memory wall at
        this context) and ``fits`` (the batch fits).

    Notes
    -----
    Per GPU the two layouts do the same FLOPs; they differ in three terms:
    the shared weights (TP reads 1/G of them, EP + DP 1/N: one copy per
    attention group), the KV cache (TP replicates KV heads once G > K, the
    whole MLA latent on every GPU since K = 1; DP keeps each sequence once)
    and the communication (:func:`communication_bytes_per_token`). So EP + DP
    wins once the batch's KV read B S k_tok (1 - 1/G) exceeds the extra shared
    read S b_w (1 - 1/G) for an MLA model -- at B S > S_w / k_tok tokens of
    context -- and on communication alone for GQA. Derived in the chapter
    "Mixture of experts".

    Examples
    --------
    >>> rows = compare_ep_tp("DeepSeek-V3", "H200", 256, 4096, n_gpus=8, weight_dtype="fp8", compute_dtype="fp8")
    >>> [(r["layout"], round(r["tpot"] * 1e3, 2), r["max_batch"]) for r in rows]
    [('TP 8', 34.58, 148), ('EP 8 (attention DP 8 x TP 1)', 23.14, 776)]
    """
    g = int(check_integer("n_gpus", check_scalar("n_gpus", n_gpus), minimum=2))
    a = int(check_integer("attention_tensor_parallel", check_scalar("attention_tensor_parallel",
                                                                    attention_tensor_parallel), minimum=1))
    b = int(check_integer("batch_size", check_scalar("batch_size", batch_size), minimum=1))
    check_scalar("context_len", context_len)
    if b > _MAX_BATCH:
        raise ValueError(f"batch_size must be <= {_MAX_BATCH:.0e} sequences, got {b:.3g}")
    _moe_model(dep.model)
    rows = []
    layouts = [(f"TP {g}", dict(tensor_parallel=g, expert_parallel=1)),
               (f"EP {g} (attention DP {g // a} x TP {a})", dict(tensor_parallel=a, expert_parallel=g))]
    for name, layout in layouts:
        d = dep.replace(**layout)
        parts = decode_step_parts(d, b, context_len)
        t = float(decode_step_time(d, b, context_len))
        wall = int(max_batch_size(d, context_len))
        rows.append({"layout": name, **layout, "tpot": t, **{k: float(v) for k, v in parts.items()},
                     "throughput_per_gpu": b / (g * t), "max_batch": wall, "fits": wall >= b})
    return rows


def attention_flops_per_kv_byte(model, *, kv_dtype="bf16", absorbed=True):
    """Decode attention's arithmetic intensity at long context: FLOPs per byte of KV cache read.

    GQA/MHA: 4 L H d_h / (2 L K d_h b) = 2 G / b (G = H / K query heads per KV
    head). MLA with absorbed up-projections: 2 H (2 d_c + d_R) / ((d_c + d_R) b),
    the latent read once and used by all H heads; ``absorbed=False`` is the
    naive kernel that decompresses K and V into H heads and caches them:
    2 (d_qk + d_v) H / (H (d_qk + d_v) b) = 2 / b, like MHA. Derived in the
    chapter "Mixture of experts".

    References
    ----------
    DeepSeek-AI, "DeepSeek-V2", arXiv:2405.04434 (2024), section 2.1; DeepSeek's
    FlashMLA kernel is reported compute-bound on H800 (github:deepseek-ai/FlashMLA
    README, 2025).

    Examples
    --------
    >>> attention_flops_per_kv_byte("Llama-3.1-70B")      # G = 8, bf16
    8.0
    >>> round(attention_flops_per_kv_byte("DeepSeek-V3"), 1)
    241.8
    >>> attention_flops_per_kv_byte("DeepSeek-V3", absorbed=False)
    1.0
    """
    model = get_model(model)
    b = bytes_per_element(check_dtype(kv_dtype, "kv_dtype"))
    if model.is_mla and not absorbed:
        return 2.0 / b
    if not model.is_mla and not absorbed:
        raise ValueError(f"absorbed=False describes an MLA kernel; {model.name} has {model.attention_type} "
                         "attention (leave absorbed=True)")
    return float(attention_flops_per_pair(model) / kv_bytes_per_token(model, kv_dtype))


def mla_decompressed_kv_bytes_per_token(model, *, kv_dtype="bf16"):
    """KV bytes per token of an MLA model whose keys and values are decompressed before caching.

    L H (d_qk + d_v) b: what DeepSeek's ``attn_impl = "naive"`` caches
    (``k_cache`` of H x qk_head_dim, ``v_cache`` of H x v_head_dim per layer),
    against the latent's L (d_c + d_R) b (:func:`servingmath.models.kv_bytes_per_token`).
    Derived in the chapter "Mixture of experts".

    References
    ----------
    github:deepseek-ai/DeepSeek-V3 ``inference/model.py`` (the two cache layouts of ``MLA``),
    commit 9b4e9788, read 2026-12.

    >>> mla_decompressed_kv_bytes_per_token("DeepSeek-V3") / 1e6    # MB: 71x the latent
    4.99712
    """
    model = get_model(model)
    if not model.is_mla:
        raise ValueError(f"model {model.name} has {model.attention_type} attention, not MLA (kv_lora_rank is None)")
    b = bytes_per_element(check_dtype(kv_dtype, "kv_dtype"))
    return float(model.n_layers * model.n_heads * (model.head_dim + (model.v_head_dim or model.head_dim)) * b)


@deployment_function
def prefill_communication_per_token(dep: Deployment) -> dict:
    """A prefill's communication per prompt token, against its matmul time per token (long prompts).

    Returns
    -------
    dict
        ``bytes`` (each GPU sends per prompt token, :func:`communication_bytes_per_token`),
        ``communication`` (s per token: bytes / (eta beta), latencies amortised away),
        ``compute`` (s per token: 2 P_body / (G F)) and ``ratio`` (communication / compute:
        above 1, a prefill that does not overlap its collectives with its matmuls
        is communication-bound).

    Notes
    -----
    Pure TP on N GPUs: ratio = [4 L (N - 1) / N x D b / (eta beta)] / [2 P_body / (N F)]
    = 2 L (N - 1) D b F / (eta beta P_body): it grows like N - 1 and with F / beta.
    Derived in the chapter "Mixture of experts".

    Examples
    --------
    >>> r = prefill_communication_per_token("DeepSeek-V3", "H200", tensor_parallel=8, compute_dtype="fp8")
    >>> round(r["ratio"], 2)
    1.51
    >>> round(prefill_communication_per_token("Llama-3.1-70B", "H100", tensor_parallel=8)["ratio"], 2)
    0.59
    """
    model = dep.model
    link = dep.accelerator.interconnect_bandwidth
    g = np.asarray(dep.n_gpus, dtype=float)
    sent = np.asarray(communication_bytes_per_token(model, tensor_parallel=dep.tensor_parallel,
                                                    expert_parallel=dep.expert_parallel,
                                                    dtype=dep.allreduce.dtype))
    if link is None:
        if np.any(g > 1):
            raise ValueError(f"accelerator {dep.accelerator.name} has no interconnect bandwidth in the catalog")
        link = 1.0
    comm = sent / (link * np.asarray(dep.allreduce.link_efficiency))
    compute = 2.0 * body_parameter_count(model) / g / np.asarray(dep.flops)
    return {"bytes": scalar_or_array(sent), "communication": scalar_or_array(comm),
            "compute": scalar_or_array(compute), "ratio": scalar_or_array(comm / compute)}
