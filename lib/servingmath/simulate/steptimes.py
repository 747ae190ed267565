"""Step times: how long one engine iteration takes, from the library's prefill and decode models.

An *iteration* (one forward pass of the engine) processes a set of tokens:
one token for each decoding sequence and a chunk of prompt tokens for each
prefilling one. Four numbers describe it:

* ``tokens``: tokens processed, T = B_decode + sum of chunk sizes;
* ``kv_tokens``: KV-cache entries read or written, X = sum of decode
  contexts + sum over chunks of (chunk + cached);
* ``attention_pairs``: (query, key) pairs of attention,
  Y = sum of decode contexts + sum over chunks of (n c + n (n + 1) / 2)
  for a chunk of n new tokens after c cached ones (causal; capped at the
  sliding window where the model has one, as :mod:`servingmath.prefill` does);
* ``logits``: positions the LM head runs on, one per sequence that emits a
  token: every decode and every *final* chunk of a prompt.

The parts are those of :func:`servingmath.decode.decode_step_parts` and
:func:`servingmath.prefill.prefill_step_parts`, combined once for the whole
iteration: the **weights are read once**, the **linear FLOPs count every
token** (plus the LM head at the logit positions), the **KV traffic counts
every decode's reads and every chunk's writes**, and **attention counts every pair**:

    weight_memory  = W_bytes(T) / (N W)          (MoE: experts touched by T tokens)
    linear_compute = 2 (P_body T + V D logits) / (N F)
    kv_memory      = X k_bytes / (N W)
    attention      = 4 L H d_h Y / (N F)
    communication  = tensor-parallel all-reduces of T tokens

and, with the default ``"hybrid"`` overlap,
T_iter = max(weight_memory, linear_compute) + max(kv_memory, attention)
+ communication + step_overhead. An iteration of decodes only equals
:func:`~servingmath.decode.decode_step_time` at the mean context; one of
whole prompts (or of a final chunk after cached tokens) equals
:func:`~servingmath.prefill.prefill_time` (tested).

Decode contexts
---------------
A sequence with prompt L that has produced k tokens holds L + k tokens of KV
cache (its last token's KV is written by the step that reads it) and its next
decode step uses ``context_len = L + k``.

Between events the decode batch is constant, so step j of a run of decode
steps has total context S0 + j B and takes A + beta (S0 + j B): the sum of K
steps is K A + beta (K S0 + B K (K - 1) / 2), a closed form
(:meth:`LibraryStepTimes.decode_line`).

Examples
--------
>>> steps = LibraryStepTimes("Llama-3.1-8B", "H100")
>>> mixed = steps.iteration(decode_contexts=[600] * 16, chunks=[(256, 0)])
>>> apart = steps.iteration(decode_contexts=[600] * 16) + steps.iteration(chunks=[(256, 0)])
>>> round(mixed * 1e3, 2), round(apart * 1e3, 2)     # one weight read saved
(5.18, 9.98)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .._validation import check_nonnegative, check_positive
from ..decode import decode_step_parts
from ..hardware import get_accelerator
from ..models import get_model, kv_bytes_per_token, weight_bytes
from ..prefill import prefill_step_parts
from ..roofline import OVERLAP_MODELS

__all__ = ["LibraryStepTimes", "LinearStepTimes"]


class _Iterations:
    """What both step-time models share: counting an iteration from its sequences."""

    window = None

    def chunk_counts(self, new: int, cached: int):
        """(KV tokens, attention pairs) of a prompt chunk of ``new`` tokens after ``cached`` ones."""
        w = self.window
        if w is None:
            return new + cached, new * cached + new * (new + 1) * 0.5

        def upto(n):  # sum_{i=1}^{n} min(i, w)
            return n * (n + 1) * 0.5 if n <= w else w * (w + 1) * 0.5 + (n - w) * w

        return new + min(cached, w), upto(cached + new) - upto(cached)

    def iteration(self, decode_contexts=(), chunks=()):
        """Seconds for an iteration of decodes (their contexts) and prompt chunks.

        ``chunks``: (new_tokens, cached_tokens) or (new_tokens, cached_tokens, final)
        per prefilling sequence; ``final`` (default True) means the chunk ends
        its prompt, so the LM head runs on its last token.
        """
        tokens, kv, pairs, logits = len(decode_contexts), 0, 0.0, len(decode_contexts)
        kv += sum(decode_contexts)
        pairs += sum(decode_contexts)
        for chunk in chunks:
            n, c = chunk[0], chunk[1]
            x, y = self.chunk_counts(n, c)
            tokens, kv, pairs = tokens + n, kv + x, pairs + y
            logits += 1 if len(chunk) < 3 or chunk[2] else 0
        if tokens == 0:
            raise ValueError("an iteration needs at least one decode or one prompt chunk")
        return self.iteration_time(tokens, kv, pairs, logits)


class LibraryStepTimes(_Iterations):
    """Iteration times of one model instance from the library's step-time model.

    Parameters are those of :func:`servingmath.decode.decode_step_time`, plus
    ``step_overhead`` (seconds of fixed CPU/scheduling time added to every
    iteration, 0 = physical bound).
    """

    def __init__(self, model, accelerator, tensor_parallel=1, weight_dtype="bf16", kv_dtype="bf16",
                 compute_dtype="bf16", mfu=1.0, mbu=1.0, overlap="hybrid", allreduce_latency=0.0,
                 step_overhead=0.0):
        self.model = get_model(model)
        self.accelerator = get_accelerator(accelerator)
        if overlap not in OVERLAP_MODELS:
            raise ValueError(f"overlap must be one of {', '.join(OVERLAP_MODELS)}, got {overlap!r}")
        self.overlap = overlap
        self.overhead = float(check_nonnegative("step_overhead", step_overhead))
        self._kwargs = dict(weight_dtype=weight_dtype, kv_dtype=kv_dtype, compute_dtype=compute_dtype,
                            tensor_parallel=tensor_parallel, mfu=mfu, mbu=mbu,
                            allreduce_latency=allreduce_latency)
        one = decode_step_parts(self.model, self.accelerator, 1, 1, **self._kwargs)
        self.kv_per_token = float(one["kv_memory"])               # seconds per KV entry moved
        self.attention_per_pair = float(one["attention_compute"])  # seconds per (query, key) pair
        # seconds of linear FLOPs per token (body) and per logit position (LM head), read off
        # prefill_step_parts: linear(L_p) = body x L_p + head
        lin = prefill_step_parts(self.model, self.accelerator, np.array([1, 2]), **self._kwargs)
        lin = lin["linear_compute"]
        self.linear_per_token = float(lin[1] - lin[0])
        self.linear_per_logit = float(2 * lin[0] - lin[1])
        self.window = self.model.sliding_window
        self.kv_bytes_per_token = kv_bytes_per_token(self.model, kv_dtype)
        self.tensor_parallel = int(tensor_parallel)
        self.weight_bytes = weight_bytes(self.model, weight_dtype)
        # per-token-count terms (weights read, all-reduces), tabulated on demand
        self._wm: list[float] = []
        self._comm: list[float] = []
        self._extend(1024)

    def _extend(self, n: int) -> None:
        start = max(len(self._wm), 1)
        tokens = np.arange(start, max(n, 2 * start) + 1)
        parts = decode_step_parts(self.model, self.accelerator, tokens, 0, **self._kwargs)
        if not self._wm:
            self._wm, self._comm = [math.nan], [math.nan]
        self._wm += np.broadcast_to(parts["weight_memory"], tokens.shape).tolist()
        self._comm += np.broadcast_to(parts["communication"], tokens.shape).tolist()

    def kv_capacity_tokens(self, memory_utilization: float = 0.9) -> int:
        """KV-cache tokens that fit: (memory x N x utilisation - weights) / KV bytes per token.

        Activations and fragmentation are ignored (an upper bound on a real engine's cache).
        """
        free = (self.accelerator.memory_bytes * self.tensor_parallel * memory_utilization
                - self.weight_bytes)
        if free <= 0:
            raise ValueError(
                f"{self.model.name} ({self.weight_bytes / 1e9:.1f} GB of weights) does not fit in "
                f"{self.tensor_parallel} x {self.accelerator.name} at memory_utilization="
                f"{memory_utilization:g}; raise tensor_parallel or give kv_capacity_tokens")
        return int(free // self.kv_bytes_per_token)

    def iteration_time(self, tokens: int, kv_tokens: float, attention_pairs: float,
                       logits: int) -> float:
        """Seconds for one iteration from its counts (see the module docstring); ``tokens`` >= 1."""
        if tokens >= len(self._wm):
            self._extend(tokens)
        wm, comm = self._wm[tokens], self._comm[tokens]
        lin = self.linear_per_token * tokens + self.linear_per_logit * logits
        kv = self.kv_per_token * kv_tokens
        att = self.attention_per_pair * attention_pairs
        if self.overlap == "hybrid":
            t = (wm if wm > lin else lin) + (kv if kv > att else att)
        elif self.overlap == "additive":
            t = wm + lin + kv + att
        else:  # roofline
            t = max(wm + kv, lin + att)
        return t + comm + self.overhead

    def decode_line(self, batch: int, context_sum: float):
        """A decode-only step of ``batch`` sequences with total context S takes A + beta S.

        Returns (A, beta, S_limit): the line holds for S <= S_limit (inf unless
        the ``"roofline"`` overlap switches from memory- to compute-bound).
        """
        if batch >= len(self._wm):
            self._extend(batch)
        wm, comm = self._wm[batch], self._comm[batch]
        lin = (self.linear_per_token + self.linear_per_logit) * batch
        k, a = self.kv_per_token, self.attention_per_pair
        base = comm + self.overhead
        if self.overlap == "hybrid":
            return (wm if wm > lin else lin) + base, (k if k > a else a), math.inf
        if self.overlap == "additive":
            return wm + lin + base, k + a, math.inf
        # roofline: max(wm + k S, lin + a S); the larger line at S, until they cross
        mem, comp = wm + k * context_sum, lin + a * context_sum
        if mem >= comp:
            line, other = (wm, k), (lin, a)
        else:
            line, other = (lin, a), (wm, k)
        limit = math.inf
        if other[1] > line[1]:
            limit = (line[0] - other[0]) / (other[1] - line[1])
        return line[0] + base, line[1], limit


@dataclass(frozen=True)
class LinearStepTimes(_Iterations):
    """A toy engine whose iteration takes ``step_time + per_token x tokens + per_kv_token x kv_tokens``.

    Useful to compare the simulator with queueing theory: with
    ``LinearStepTimes(step_time=0.01)`` every iteration (a prefill or a decode
    step) takes 10 ms, so a request of n output tokens served alone takes
    exactly n x 10 ms.

    Attributes
    ----------
    step_time : float
        Seconds per iteration, whatever it holds (> 0).
    per_token : float
        Extra seconds per token processed (decode tokens and prompt tokens).
    per_kv_token : float
        Extra seconds per KV-cache entry read or written.
    """

    step_time: float
    per_token: float = 0.0
    per_kv_token: float = 0.0

    def __post_init__(self):
        check_positive("step_time", self.step_time)
        check_nonnegative("per_token", self.per_token)
        check_nonnegative("per_kv_token", self.per_kv_token)

    def iteration_time(self, tokens: int, kv_tokens: float, attention_pairs: float,
                       logits: int = 0) -> float:
        return self.step_time + self.per_token * tokens + self.per_kv_token * kv_tokens

    def decode_line(self, batch: int, context_sum: float):
        return self.step_time + self.per_token * batch, self.per_kv_token, math.inf
