"""The step model: the work of one forward iteration, then its time on a deployment.

Every time the book computes -- a decode step, a prefill, a chunk of a chunked
prefill, a mixed iteration of decodes and chunks, a speculative verification,
the simulator's iterations, the validation's predictions -- comes from the two
functions of this module, in two stages.

**1. Work** (:func:`iteration_work`). An iteration is described by what is in
it (:class:`Iteration`): for a group of identical sequences, how many
sequences, how many new tokens each brings, how many tokens each already has in
its KV cache, and how many of its positions emit logits. Four counts follow,
summed over the groups of a mixed iteration:

* T, tokens processed (new tokens);
* X, KV-cache entries moved: every new token's K and V written, every cached
  entry in the attention window of the first new token read;
* Y, (query, key) pairs of causal attention: token i of a sequence (counting
  the cached ones, i = 1, 2, ...) attends to min(i, w) tokens (w: the sliding
  window, infinite without one);
* Z, positions the LM head runs on.

The work is affine in these counts (:func:`work_coefficients` gives the
coefficients), except the weights of a mixture of experts:

* matmul FLOPs = 2 (P_body T + V D Z);
* attention FLOPs = 4 L H d_h Y;
* weight bytes = b_w (P_stationary + V D [Z > 0] + D T): the stationary weights
  (everything except the embedding table and the LM head; for MoE the shared
  part plus the experts the T tokens are expected to touch,
  E (1 - (1 - k/E)^T) per layer), the LM head streamed once when any position
  needs logits, and the T embedding **rows gathered** -- a step never streams
  the input-embedding table (tied embeddings: the LM head streams the shared
  matrix);
* KV bytes = X k_tok, with k_tok = 2 L K d_h b_kv;
* all-reduces: 2 per layer of T D b_ar bytes each when N > 1;
* all-to-alls (expert parallelism, EP > 1): a dispatch and a combine per MoE
  layer, each GPU scattering k D b_ar bytes for each of its T / EP tokens.

With tensor parallelism of degree N each GPU does 1/N of the FLOPs and reads
1/N of the weights and of the KV cache, except the K/V heads and projections
that replicate once N > K (:func:`servingmath.sharding.tensor_parallel_shares`).
With expert parallelism of degree EP (a multiple of N, the layout "attention
DP x expert EP", chapter "Mixture of experts") the instance has G = EP GPUs in
EP / N data-parallel groups of N: the batch is shared evenly by the groups, so
each GPU does 1/G of the FLOPs and holds 1/G of the KV cache (its group's
sequences, split N ways as above); it reads its 1/N of the shared weights
(each group has its own copy) and its E / EP whole experts, of which the T
tokens of the whole instance touch a share 1 - (1 - k/E)^T (uniform routing,
the mean over GPUs: the busiest GPU of a real step reads and computes more).
:class:`Work` holds the work of **one GPU**.

**2. Time** (:func:`time_parts`, :func:`step_time`). With F the compute
dtype's dense peak x MFU and W the bandwidth x MBU, the parts are
weight_memory = weight bytes / W, kv_memory = KV bytes / W, linear_compute =
matmul FLOPs / F, attention_compute = attention FLOPs / F, communication =
the all-reduces (:class:`~servingmath.sharding.AllReduce`), overhead = the
deployment's per-step overhead. They combine by the overlap model:

* ``"hybrid"`` (default): max(weight_memory, linear_compute) + max(kv_memory,
  attention_compute): each kernel overlaps its own traffic with its own math
  (the step-time model of How to Scale Your Model's inference chapter, applied
  per kernel);
* ``"roofline"``: max(all memory, all compute), the lower bound;
* ``"additive"``: the sum of the four, the upper bound;

plus communication and overhead in every model (not overlapped).

Conventions
-----------
A decode step's ``context_len`` S counts the keys its new token attends to: the
tokens in the sequence's KV cache once the step has written the new token's K
and V (a sequence with prompt L that has produced k tokens decodes at S = L + k).
The step moves S KV entries (S - 1 read, 1 written) and computes S attention
pairs, exactly a one-token prefill after S - 1 cached tokens
(:meth:`Iteration.decode`). S = 0 is allowed as the limit that ignores the
KV cache. A prefill's ``cached_tokens`` are the tokens already cached before it.

Examples
--------
>>> from servingmath.deployment import Deployment
>>> dep = Deployment.build("Llama-3.1-8B", "H100")
>>> decode = Iteration.decode(dep.model, sequences=1, context_len=0)
>>> round(step_time(dep, iteration_work(dep, decode)) * 1e3, 3)   # ms: (P - V D) x 2 bytes / W
4.481
>>> mixed = Iteration.decode(dep.model, sequences=16, context_len=600) + Iteration.of(dep.model, new_tokens=256)
>>> round(step_time(dep, iteration_work(dep, mixed)) * 1e3, 2)     # one weight read for both
4.87
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._validation import (check_broadcast_shapes, check_choice, check_instance, check_integer, check_nonnegative,
                          scalar_or_array)
from .deployment import Deployment
from .models import (attention_flops_per_pair, body_parameter_count, check_context_len, expert_parameter_split,
                     get_model, has_shape, input_embedding_parameter_count, kv_bytes_per_token,
                     kv_projection_parameter_count, lm_head_parameter_count, parameter_count, require_shape,
                     window_of)
from .datatypes import bytes_per_element
from .sharding import tensor_parallel_shares

__all__ = [
    "Iteration",
    "Work",
    "WorkCoefficients",
    "work_coefficients",
    "iteration_work",
    "time_parts",
    "combine",
    "step_time",
    "PART_KEYS",
]

#: The keys of :func:`time_parts`, in order.
PART_KEYS = ("weight_memory", "kv_memory", "linear_compute", "attention_compute", "communication", "overhead")


def _window_prefix(n, w):
    """sum_{i=1}^{n} min(i, w), elementwise (w = None: no window)."""
    n = np.asarray(n, dtype=float)
    if w is None:
        return n * (n + 1) / 2
    return np.where(n <= w, n * (n + 1) / 2, w * (w + 1) / 2 + (n - w) * w)


@dataclass(frozen=True)
class Iteration:
    """What is in one forward iteration: the four counts the work is affine in.

    Derived in the chapter "How to use this book" (notebooks/00_how_to_use_this_book.ipynb).

    Attributes
    ----------
    tokens : float or array
        T, new tokens processed.
    kv_tokens : float or array
        X, KV-cache entries moved (new ones written, cached ones in the window read).
    attention_pairs : float or array
        Y, (query, key) pairs of causal attention.
    logits : float or array
        Z, positions the LM head runs on.

    Build one with :meth:`of` (a group of identical sequences) and add groups
    with ``+`` for a mixed iteration.
    """

    tokens: object
    kv_tokens: object
    attention_pairs: object
    logits: object

    @classmethod
    def of(cls, model, *, sequences=1, new_tokens=1, cached_tokens=0, logits=1) -> "Iteration":
        """The counts of ``sequences`` sequences, each with ``new_tokens`` new tokens after
        ``cached_tokens`` cached ones, emitting logits at ``logits`` positions each.

        Parameters
        ----------
        model : str or ModelConfig
        sequences : int or array, >= 0
        new_tokens : int or array, >= 1
            1 for a decode step, the chunk or prompt length for a prefill,
            gamma + 1 for a speculative verification.
        cached_tokens : int or array, >= 0
            Tokens already in each sequence's KV cache (a decode step's context).
        logits : int or array, 0 <= logits <= new_tokens
            1: the last position (a decode step, a prompt's final chunk); 0: a
            chunk that does not end its prompt; ``new_tokens``: every position
            (prompt log-probabilities, or a verification).

        Examples
        --------
        >>> it = Iteration.of("Llama-3.1-8B", sequences=2, new_tokens=3, cached_tokens=10)
        >>> it.tokens, it.kv_tokens, it.attention_pairs, it.logits
        (6.0, 26.0, 72.0, 2.0)
        """
        model = get_model(model)
        b = check_integer("sequences", sequences, minimum=0)
        n = check_integer("new_tokens", new_tokens, minimum=1)
        c = check_nonnegative("cached_tokens", cached_tokens)
        check_integer("cached_tokens", c, minimum=0)
        check_context_len(model, n + c, "new_tokens + cached_tokens")
        z = check_nonnegative("logits", logits)
        check_integer("logits", z, minimum=0)
        if z.size and n.size and np.any(z > n):
            raise ValueError(f"logits must be <= new_tokens (positions that emit logits), got "
                             f"logits={np.max(z):g} with new_tokens={np.min(n):g}")
        w, phi = window_of(model)
        read = c if w is None else np.minimum(c, w - 1)   # the first new token's window holds itself
        pairs = _window_prefix(c + n, w) - _window_prefix(c, w)
        if w is not None and phi < 1.0:   # hybrid: windowed and full layers, by their shares
            read = phi * read + (1.0 - phi) * c
            pairs = phi * pairs + (1.0 - phi) * (_window_prefix(c + n, None) - _window_prefix(c, None))
        return cls(tokens=scalar_or_array(b * n), kv_tokens=scalar_or_array(b * (n + read)),
                   attention_pairs=scalar_or_array(b * pairs), logits=scalar_or_array(b * z))

    @classmethod
    def decode(cls, model, *, sequences=1, context_len=0) -> "Iteration":
        """The counts of a decode step of ``sequences`` sequences at context S (see Conventions).

        T = Z = B, and X = Y = B min(S, w): for S >= 1 the same counts as
        ``Iteration.of(model, sequences=B, new_tokens=1, cached_tokens=S - 1)``.

        >>> Iteration.decode("Llama-3.1-8B", sequences=4, context_len=100) == Iteration.of(
        ...     "Llama-3.1-8B", sequences=4, new_tokens=1, cached_tokens=99)
        True
        """
        model = get_model(model)
        b = check_integer("sequences", sequences, minimum=0)
        s = check_context_len(model, context_len)
        w, phi = window_of(model)
        keys = s if w is None else phi * np.minimum(s, w) + (1.0 - phi) * s
        return cls(tokens=scalar_or_array(b + 0 * s), kv_tokens=scalar_or_array(b * keys),
                   attention_pairs=scalar_or_array(b * keys), logits=scalar_or_array(b + 0 * s))

    def __add__(self, other: "Iteration") -> "Iteration":
        if not isinstance(other, Iteration):
            return NotImplemented
        return Iteration(*(scalar_or_array(np.asarray(a, dtype=float) + np.asarray(b, dtype=float))
                           for a, b in zip(self._values(), other._values())))

    def _values(self):
        return (self.tokens, self.kv_tokens, self.attention_pairs, self.logits)


@dataclass(frozen=True)
class Work:
    """What one forward iteration does on **one GPU** of its tensor-parallel group (arrays broadcast).

    Derived in the chapter "Decode: TPOT(B), throughput and the knee" (notebooks/04_decode.ipynb).

    Attributes
    ----------
    linear_flops, attention_flops : float or array
        FLOPs of the weight matmuls (LM head included at the logit positions) and of attention.
    weight_bytes, kv_bytes : float or array
        Bytes of weights and of KV cache read or written.
    allreduce_bytes : float or array
        Bytes of each all-reduce message (T x D x b_ar, over the data-parallel groups with EP).
    allreduces : float or array
        All-reduce calls (2 per layer when N > 1, else 0).
    tensor_parallel : int or array
        N, the group the work is shared by.
    alltoall_bytes : float or array
        Bytes each GPU scatters in each expert-parallel all-to-all (T k D b_ar / EP); 0 without EP.
    alltoalls : float or array
        All-to-all calls: a dispatch and a combine per MoE layer when EP > 1, else 0.
    expert_parallel : int or array
        EP, the GPUs of the all-to-alls (1: none).
    """

    linear_flops: object
    attention_flops: object
    weight_bytes: object
    kv_bytes: object
    allreduce_bytes: object
    allreduces: object
    tensor_parallel: object
    alltoall_bytes: object = 0.0
    alltoalls: object = 0.0
    expert_parallel: object = 1

    @property
    def flops(self):
        """All FLOPs of the step on one GPU."""
        return scalar_or_array(np.asarray(self.linear_flops) + np.asarray(self.attention_flops))

    @property
    def memory_bytes(self):
        """All bytes the step moves to or from one GPU's memory."""
        return scalar_or_array(np.asarray(self.weight_bytes) + np.asarray(self.kv_bytes))


@dataclass(frozen=True)
class WorkCoefficients:
    """The work of an iteration as an affine function of its counts, on one GPU.

    Derived in the chapter "Decode: TPOT(B), throughput and the knee" (notebooks/04_decode.ipynb).

    work = coefficients x (T, X, Y, Z): FLOPs per token and per logit position,
    FLOPs per attention pair, bytes per KV entry and per gathered embedding row,
    the stationary weight bytes (a function of T for MoE: experts touched), the
    LM head's bytes (read when Z > 0) and the all-reduce bytes per token.
    """

    linear_flops_per_token: object
    linear_flops_per_logit: object
    attention_flops_per_pair: object
    kv_bytes_per_token: object
    embedding_bytes_per_token: object
    lm_head_bytes: object
    stationary_weight_bytes: object
    shared_weight_bytes: object
    expert_bytes: object
    n_experts: int
    n_active_experts: int
    allreduce_bytes_per_token: float
    allreduces: object
    tensor_parallel: object
    alltoall_bytes_per_token: object = 0.0
    alltoalls: object = 0.0
    expert_parallel: object = 1

    def weight_bytes(self, tokens, logits=1):
        """Weight bytes one GPU reads in an iteration of ``tokens`` tokens and ``logits`` logit positions."""
        t = np.asarray(tokens, dtype=float)
        z = np.asarray(logits, dtype=float)
        if self.n_experts > 1:
            e, k = self.n_experts, self.n_active_experts
            touched = e * (1.0 - (1.0 - k / e) ** t)
            stationary = self.shared_weight_bytes + touched * self.expert_bytes
        else:
            stationary = self.stationary_weight_bytes
        return stationary + self.lm_head_bytes * (z > 0) + self.embedding_bytes_per_token * t

    def work(self, iteration: Iteration) -> Work:
        """The :class:`Work` of an iteration."""
        t, x, y, z = (np.asarray(v, dtype=float) for v in iteration._values())
        return Work(
            linear_flops=scalar_or_array(self.linear_flops_per_token * t + self.linear_flops_per_logit * z),
            attention_flops=scalar_or_array(self.attention_flops_per_pair * y),
            weight_bytes=scalar_or_array(self.weight_bytes(t, z)),
            kv_bytes=scalar_or_array(self.kv_bytes_per_token * x),
            allreduce_bytes=scalar_or_array(self.allreduce_bytes_per_token * t),
            allreduces=scalar_or_array(self.allreduces + 0 * t),
            tensor_parallel=self.tensor_parallel,
            alltoall_bytes=scalar_or_array(self.alltoall_bytes_per_token * t),
            alltoalls=scalar_or_array(self.alltoalls + 0 * t),
            expert_parallel=self.expert_parallel,
        )


def work_coefficients(deployment: Deployment) -> WorkCoefficients:
    """The coefficients of the work on one GPU of ``deployment`` (see the module docstring).

    Derived in the chapter "Decode: TPOT(B), throughput and the knee" (notebooks/04_decode.ipynb).

    Examples
    --------
    >>> from servingmath.deployment import Deployment
    >>> c = work_coefficients(Deployment.build("Llama-3.1-8B", "H100"))
    >>> round(c.stationary_weight_bytes / 1e9, 3), round(c.lm_head_bytes / 1e9, 3)   # GB
    (13.959, 1.051)
    """
    check_instance("deployment", deployment, Deployment)
    model = deployment.model
    n = np.asarray(deployment.tensor_parallel, dtype=float)
    g = np.asarray(deployment.n_gpus, dtype=float)        # GPUs of the instance: N, or EP
    dp = g / n                                             # attention data-parallel groups (1 without EP)
    ep = np.asarray(deployment.expert_parallel, dtype=float)
    weight_share, kv_share = (np.asarray(v, dtype=float) for v in
                              tensor_parallel_shares(model, n, kv_sharding=deployment.kv_sharding))
    bw = bytes_per_element(deployment.weight_dtype)
    # the routed experts' bytes per weight: the checkpoint's own where it quantises only them (gpt-oss)
    bw_e = bw if model.expert_dtype is None else bytes_per_element(model.expert_dtype)
    vd = input_embedding_parameter_count(model)
    head = lm_head_parameter_count(model)
    # parameters outside the embedding table and the LM head (tied: one V x D matrix serves both)
    embedding_and_head = vd if model.tied_embeddings else vd + head
    # the K/V projections are held (and read) at the KV-head share, whatever the cache's sharding;
    # they matter only where heads replicate (N > K), elsewhere they split N ways like every weight
    replicates = has_shape(model, "n_kv_heads") and bool(np.any(n > model.n_kv_heads))
    p_kv = kv_projection_parameter_count(model) if replicates else 0.0
    kv_replicated = np.maximum(model.n_kv_heads, n) / (model.n_kv_heads * n) if replicates else 1.0 / n
    if np.any(n > 1):
        layers, width = require_shape(model, "n_layers", "hidden_size",
                                      needed_for=f"the all-reduces of tensor_parallel = {int(np.max(n))}")
    else:
        layers = width = 0.0   # no all-reduce

    def per_gpu(params):
        """Bytes one GPU holds of ``params`` parameters that split N ways (K/V projections apart)."""
        return params * bw / n

    stationary_params = parameter_count(model) - embedding_and_head
    kv_bytes = p_kv * bw * kv_replicated       # every GPU reads its K/V projections
    stationary = per_gpu(stationary_params - p_kv) + kv_bytes
    shared_params, expert_params = expert_parameter_split(model)
    if bw_e != bw:   # every expert held in its own dtype
        stationary = stationary + model.n_experts * expert_params * (bw_e - bw) / n
    shared = per_gpu(shared_params - embedding_and_head - p_kv) + kv_bytes
    n_layers_allreduce = 2.0 * layers * (n > 1)
    b_ar = deployment.allreduce.bytes_per_element
    if np.any(ep > 1):
        d_ep = require_shape(model, "hidden_size", needed_for="the expert-parallel all-to-alls")[0]
        moe_layers = model.n_moe_layers
    else:
        d_ep, moe_layers = 0.0, 0   # no all-to-all
    return WorkCoefficients(
        linear_flops_per_token=scalar_or_array(2.0 * body_parameter_count(model) / g),
        linear_flops_per_logit=scalar_or_array(2.0 * head / g),
        attention_flops_per_pair=scalar_or_array(attention_flops_per_pair(model) / g),
        kv_bytes_per_token=scalar_or_array(kv_bytes_per_token(model, deployment.kv_dtype) * kv_share / dp),
        embedding_bytes_per_token=scalar_or_array(_gathered_row(model) * bw / g),
        lm_head_bytes=scalar_or_array(head * bw / n),
        stationary_weight_bytes=scalar_or_array(stationary),
        shared_weight_bytes=scalar_or_array(shared),
        expert_bytes=scalar_or_array(expert_params * bw_e / g),   # E / EP whole experts (EP = 1: 1/N of each)
        n_experts=model.n_experts,
        n_active_experts=model.n_active_experts,
        allreduce_bytes_per_token=scalar_or_array(width * b_ar / dp),
        allreduces=scalar_or_array(n_layers_allreduce),
        tensor_parallel=deployment.tensor_parallel,
        alltoall_bytes_per_token=scalar_or_array(model.n_active_experts * d_ep * b_ar / g * (ep > 1)),
        alltoalls=scalar_or_array(2.0 * moe_layers * (ep > 1)),
        expert_parallel=deployment.expert_parallel,
    )


def _gathered_row(model):
    """Parameters of one embedding row a token gathers: D (a model given by its totals: 0 when its
    embeddings are ignored, else D or V D / V)."""
    table = input_embedding_parameter_count(model)
    if has_shape(model, "hidden_size"):
        return float(model.hidden_size) if table else 0.0
    if not table:
        return 0.0
    if has_shape(model, "vocab_size"):
        return table / model.vocab_size
    require_shape(model, "hidden_size", needed_for="the embedding rows a step gathers (embedding_parameters > 0)")


def iteration_work(deployment: Deployment, iteration: Iteration) -> Work:
    """The work of ``iteration`` on one GPU of ``deployment``: FLOPs, bytes and all-reduces.

    Derived in the chapter "Decode: TPOT(B), throughput and the knee" (notebooks/04_decode.ipynb).

    >>> from servingmath.deployment import Deployment
    >>> dep = Deployment.build("Llama-3.1-70B", "H100", tensor_parallel=8)
    >>> w = iteration_work(dep, Iteration.of(dep.model, sequences=64, cached_tokens=2048))
    >>> round(w.weight_bytes / 1e9, 2), round(w.kv_bytes / 1e9, 2), int(w.allreduces)
    (17.38, 5.37, 160)
    """
    check_instance("deployment", deployment, Deployment)
    check_instance("iteration", iteration, Iteration, "Iteration (Iteration.of(...))")
    return work_coefficients(deployment).work(iteration)


def _communication_time(deployment: Deployment, work: Work):
    n = np.asarray(work.tensor_parallel)
    ep = np.asarray(work.expert_parallel)
    calls = np.asarray(work.allreduces, dtype=float)
    if not np.any(n > 1) and not np.any(ep > 1):
        return np.zeros(np.broadcast(calls, np.asarray(work.allreduce_bytes)).shape)
    link = deployment.accelerator.interconnect_bandwidth
    if link is None:
        raise ValueError(f"accelerator {deployment.accelerator.name} has no interconnect bandwidth in the "
                         "catalog; tensor_parallel > 1 or expert_parallel > 1 needs one")
    one = np.asarray(deployment.allreduce.time(work.allreduce_bytes, np.maximum(n, 1), link))
    total = calls * one
    if np.any(ep > 1):
        a2a = np.asarray(deployment.allreduce.alltoall_time(work.alltoall_bytes, np.maximum(ep, 1), link))
        total = total + np.asarray(work.alltoalls, dtype=float) * a2a
    return total


def time_parts(deployment: Deployment, work: Work) -> dict:
    """Seconds of each part of a step: weight_memory, kv_memory, linear_compute, attention_compute,
    communication, overhead (arrays broadcast).

    Derived in the chapter "Decode: TPOT(B), throughput and the knee" (notebooks/04_decode.ipynb).

    >>> from servingmath.deployment import Deployment
    >>> dep = Deployment.build("Llama-2-7B", "A100", mbu=0.5)
    >>> parts = time_parts(dep, iteration_work(dep, Iteration.of(dep.model, new_tokens=2048)))
    >>> {k: round(float(v) * 1e3, 2) for k, v in parts.items()}
    {'weight_memory': 12.97, 'kv_memory': 1.05, 'linear_compute': 85.02, 'attention_compute': 3.53, 'communication': 0.0, 'overhead': 0.0}
    """
    check_instance("deployment", deployment, Deployment)
    check_instance("work", work, Work, "Work (iteration_work(...))")
    flops, bandwidth = deployment.flops, deployment.bandwidth
    return {
        "weight_memory": scalar_or_array(np.asarray(work.weight_bytes) / bandwidth),
        "kv_memory": scalar_or_array(np.asarray(work.kv_bytes) / bandwidth),
        "linear_compute": scalar_or_array(np.asarray(work.linear_flops) / flops),
        "attention_compute": scalar_or_array(np.asarray(work.attention_flops) / flops),
        "communication": scalar_or_array(_communication_time(deployment, work)),
        "overhead": scalar_or_array(deployment.step_overhead),
    }


def combine(overlap: str, parts: dict):
    """One step time from its parts, by overlap model (communication and overhead always added).

    Derived in the chapter "Decode: TPOT(B), throughput and the knee" (notebooks/04_decode.ipynb).

    * ``"additive"``: no overlap, the sum of the four (an upper bound);
    * ``"roofline"``: max(weights + KV, matmuls + attention) (a lower bound);
    * ``"hybrid"``: max(weights, matmuls) + max(KV, attention).

    Each part is a time in seconds (>= 0; arrays broadcast).

    >>> combine("hybrid", {"weight_memory": 4.0, "linear_compute": 1.0, "kv_memory": 2.0,
    ...                    "attention_compute": 0.5, "communication": 0.25})
    6.25
    """
    check_choice("overlap", overlap, ("additive", "roofline", "hybrid"))
    check_instance("parts", parts, dict, "dict of the step's parts (time_parts(...))")
    missing = [k for k in ("weight_memory", "kv_memory", "linear_compute", "attention_compute", "communication")
               if k not in parts]
    if missing:
        raise KeyError(f"parts lacks {', '.join(missing)}: it needs weight_memory, kv_memory, linear_compute, "
                       "attention_compute and communication (overhead is optional)")
    parts = {k: check_nonnegative(k, v) for k, v in parts.items()}
    check_broadcast_shapes(**parts)
    wm, kv = parts["weight_memory"], parts["kv_memory"]
    lin, att = parts["linear_compute"], parts["attention_compute"]
    if overlap == "additive":
        core = wm + lin + kv + att
    elif overlap == "roofline":
        core = np.maximum(wm + kv, lin + att)
    elif overlap == "hybrid":
        core = np.maximum(wm, lin) + np.maximum(kv, att)
    else:
        raise ValueError(f"overlap must be one of 'additive', 'roofline', 'hybrid', got {overlap!r}")
    return scalar_or_array(core + np.asarray(parts["communication"]) + np.asarray(parts.get("overhead", 0.0)))


def step_time(deployment: Deployment, work: Work):
    """Seconds for one forward iteration: :func:`time_parts` combined by the deployment's overlap model.

    Derived in the chapter "Decode: TPOT(B), throughput and the knee" (notebooks/04_decode.ipynb).

    Examples
    --------
    >>> from servingmath.deployment import Deployment
    >>> dep = Deployment.build("Llama-2-7B", "A100", mbu=0.5)
    >>> round(step_time(dep, iteration_work(dep, Iteration.of(dep.model, new_tokens=2048))) * 1e3, 2)   # ms
    88.55
    """
    check_instance("deployment", deployment, Deployment)
    return combine(deployment.overlap, time_parts(deployment, work))
