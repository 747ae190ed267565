"""Step times: how long one engine iteration takes, from the library's step model.

An *iteration* (one forward pass of the engine) processes a set of tokens:
one token for each decoding sequence and a chunk of prompt tokens for each
prefilling one. It is described by the four counts of the step model
(:class:`servingmath.step.Iteration`):

* ``tokens``: tokens processed, T = B_decode + sum of chunk sizes;
* ``kv_tokens``: KV-cache entries read or written, X = sum of decode
  contexts + sum over chunks of (chunk + cached);
* ``attention_pairs``: (query, key) pairs of attention,
  Y = sum of decode contexts + sum over chunks of (n c + n (n + 1) / 2)
  for a chunk of n new tokens after c cached ones (causal; capped at the
  sliding window where the model has one);
* ``logits``: positions the LM head runs on, one per sequence that emits a
  token: every decode and every *final* chunk of a prompt.

:class:`LibraryStepTimes` evaluates :func:`servingmath.step.step_time` for
those counts with the coefficients of the work (:func:`servingmath.step.work_coefficients`)
taken once from the deployment: the simulator and the chapters compute a
step the same way, exactly (tested against :func:`servingmath.step.step_time`
for decode, prefill, chunked and mixed iterations). The weights are read once
per iteration (the LM head only when some position needs logits; the
embedding rows of the T tokens are gathered), so a mixed iteration of
decodes and a chunk costs less than the two apart.

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
>>> from servingmath.deployment import Deployment
>>> steps = LibraryStepTimes.for_deployment(Deployment.build("Llama-3.1-8B", "H100"))
>>> mixed = steps.iteration(decode_contexts=[600] * 16, chunks=[(256, 0)])
>>> apart = steps.iteration(decode_contexts=[600] * 16) + steps.iteration(chunks=[(256, 0)])
>>> round(mixed * 1e3, 2), round(apart * 1e3, 2)     # one weight read saved
(4.87, 9.35)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .._validation import check_nonnegative, check_positive
from ..deployment import Deployment
from ..memory import max_kv_tokens
from ..models import window_of
from ..step import Iteration, iteration_work, step_time, work_coefficients

__all__ = ["LibraryStepTimes", "LinearStepTimes"]


class _Iterations:
    """What both step-time models share: counting an iteration from its sequences."""

    window = None
    #: the share of the layers that attend within ``window`` (the rest attend to everything)
    window_share = 1.0

    def chunk_counts(self, new: int, cached: int):
        """(KV tokens, attention pairs) of a prompt chunk of ``new`` tokens after ``cached`` ones
        (the counts of :meth:`servingmath.step.Iteration.of`)."""
        w = self.window
        full = new + cached, new * cached + new * (new + 1) * 0.5
        if w is None:
            return full

        def upto(n):  # sum_{i=1}^{n} min(i, w)
            return n * (n + 1) * 0.5 if n <= w else w * (w + 1) * 0.5 + (n - w) * w

        x, y = new + min(cached, w - 1), upto(cached + new) - upto(cached)
        phi = self.window_share
        if phi < 1.0:   # windowed and full layers, by their shares of the layers
            return phi * x + (1.0 - phi) * full[0], phi * y + (1.0 - phi) * full[1]
        return x, y

    def decode_counts(self, context: int):
        """(KV tokens, attention pairs) of one decode at context S: min(S, w) each (a hybrid model:
        phi min(S, w) + (1 - phi) S)."""
        w = self.window
        if w is None:
            return context, context
        s = min(context, w)
        if self.window_share < 1.0:
            s = self.window_share * s + (1.0 - self.window_share) * context
        return s, s

    def iteration(self, decode_contexts=(), chunks=()):
        """Seconds for an iteration of decodes (their contexts) and prompt chunks.

        ``chunks``: (new_tokens, cached_tokens) or (new_tokens, cached_tokens, final)
        per prefilling sequence; ``final`` (default True) means the chunk ends
        its prompt, so the LM head runs on its last token.
        """
        tokens, kv, pairs, logits = len(decode_contexts), 0, 0.0, len(decode_contexts)
        for c in decode_contexts:
            x, y = self.decode_counts(c)
            kv, pairs = kv + x, pairs + y
        for chunk in chunks:
            n, c = chunk[0], chunk[1]
            x, y = self.chunk_counts(n, c)
            tokens, kv, pairs = tokens + n, kv + x, pairs + y
            logits += 1 if len(chunk) < 3 or chunk[2] else 0
        if tokens == 0:
            raise ValueError("an iteration needs at least one decode or one prompt chunk")
        return self.iteration_time(tokens, kv, pairs, logits)


class LibraryStepTimes(_Iterations):
    """Iteration times of one model instance from the library's step model.

    Derived in the chapter "Scheduling and tail latency" (notebooks/10_scheduling.ipynb).

    Build it with :meth:`for_deployment` (or ``LibraryStepTimes(model,
    accelerator, **deployment options)``). The per-count seconds are the
    coefficients of :func:`servingmath.step.work_coefficients` divided by the
    deployment's FLOP/s and bandwidth; the weight read (a function of the
    iteration's tokens for MoE: experts touched) is tabulated per token count.
    """

    def __init__(self, model=None, accelerator=None, *, deployment: Deployment | None = None, **options):
        if deployment is None:
            deployment = Deployment.build(model, accelerator, **options)
        elif model is not None or accelerator is not None or options:
            raise ValueError("give a deployment, or a model, an accelerator and options, not both")
        if not deployment.is_scalar:
            raise ValueError("the simulator needs one configuration: give scalar deployment settings")
        self.deployment = deployment
        self.model = deployment.model
        self.accelerator = deployment.accelerator
        self.overlap = deployment.overlap
        self.overhead = float(deployment.step_overhead)
        self.tensor_parallel = int(deployment.tensor_parallel)
        self.window, share = window_of(self.model)
        self.window_share = share if self.window is not None else 1.0
        coef = work_coefficients(deployment)
        self._coef = coef
        f, w = deployment.flops, deployment.bandwidth
        self.linear_per_token = float(coef.linear_flops_per_token) / f
        self.linear_per_logit = float(coef.linear_flops_per_logit) / f
        self.attention_per_pair = float(coef.attention_flops_per_pair) / f
        self.kv_per_token = float(coef.kv_bytes_per_token) / w        # seconds per KV entry moved
        self._bandwidth = w
        self._head = float(coef.lm_head_bytes) / w
        self._gather = float(coef.embedding_bytes_per_token) / w
        self._moe = deployment.model.is_moe
        self._fixed = float(coef.weight_bytes(0.0, 0.0)) / w           # dense: stationary weights
        # communication is affine in the tokens: c0 + c1 T (0 without tensor parallelism)
        zero = iteration_work(deployment, Iteration(0.0, 0.0, 0.0, 0.0))
        one = iteration_work(deployment, Iteration(1.0, 0.0, 0.0, 0.0))
        from ..step import time_parts

        c0 = float(time_parts(deployment, zero)["communication"])
        c1 = float(time_parts(deployment, one)["communication"]) - c0
        self._comm0, self._comm1 = c0, c1
        # NCCL "auto" all-reduces are not affine in the tokens: tabulated per token count instead
        self._comm_affine = deployment.allreduce.is_affine or self.tensor_parallel == 1
        self._comm: list[float] = []
        self._kv_tokens: int | None = None
        # MoE: the stationary weight read per token count, tabulated on demand
        self._wm: list[float] = []

    @classmethod
    def for_deployment(cls, deployment: Deployment) -> "LibraryStepTimes":
        """The step times of a :class:`~servingmath.deployment.Deployment`."""
        return cls(deployment=deployment)

    def _weights(self, tokens: int) -> float:
        """Seconds of the weight read, LM head excluded, for an iteration of ``tokens`` tokens."""
        if not self._moe:
            return self._fixed + self._gather * tokens
        if tokens >= len(self._wm):
            start = len(self._wm)
            t = np.arange(start, max(tokens + 1, 2 * start, 1024))
            self._wm += (np.asarray(self._coef.weight_bytes(t, 0.0), dtype=float) / self._bandwidth).tolist()
        return self._wm[tokens]

    def _communication(self, tokens: int) -> float:
        """Seconds of the all-reduces of an iteration of ``tokens`` tokens (affine, or tabulated)."""
        if self._comm_affine:
            return self._comm0 + self._comm1 * tokens
        if tokens >= len(self._comm):
            from ..step import time_parts

            start = len(self._comm)
            t = np.arange(start, max(tokens + 1, 2 * start, 1024), dtype=float)
            z = np.zeros_like(t)
            work = iteration_work(self.deployment, Iteration(t, z, z, z))
            self._comm += np.asarray(time_parts(self.deployment, work)["communication"], dtype=float).tolist()
        return self._comm[tokens]

    def kv_capacity_tokens(self) -> int:
        """KV-cache tokens that fit: :func:`servingmath.memory.max_kv_tokens` of the deployment."""
        if self._kv_tokens is not None:        # the deployment is frozen: computed once per table
            return self._kv_tokens
        tokens = max_kv_tokens(self.deployment)
        if tokens <= 0:
            d = self.deployment
            raise ValueError(
                f"{self.model.name} with {d.weight_dtype} weights leaves no room for a KV cache on "
                f"{self.tensor_parallel} x {self.accelerator.name} at gpu_memory_utilization="
                f"{float(d.gpu_memory_utilization):g}; raise tensor_parallel, store the weights in fewer bytes, "
                "or give kv_capacity_tokens")
        self._kv_tokens = int(tokens)
        return self._kv_tokens

    def iteration_time(self, tokens: int, kv_tokens: float, attention_pairs: float,
                       logits: int) -> float:
        """Seconds for one iteration from its counts (see the module docstring); ``tokens`` >= 1."""
        wm = self._weights(tokens) + (self._head if logits > 0 else 0.0)
        lin = self.linear_per_token * tokens + self.linear_per_logit * logits
        kv = self.kv_per_token * kv_tokens
        att = self.attention_per_pair * attention_pairs
        if self.overlap == "hybrid":
            t = (wm if wm > lin else lin) + (kv if kv > att else att)
        elif self.overlap == "additive":
            t = wm + lin + kv + att
        else:  # roofline
            t = max(wm + kv, lin + att)
        comm = self._comm0 + self._comm1 * tokens if self._comm_affine else self._communication(tokens)
        return t + comm + self.overhead

    def check_against_step_model(self, iteration: Iteration) -> tuple[float, float]:
        """(this table's time, :func:`servingmath.step.step_time`) for one iteration: a self-test."""
        mine = self.iteration_time(int(iteration.tokens), iteration.kv_tokens, iteration.attention_pairs,
                                   int(iteration.logits))
        return mine, float(step_time(self.deployment, iteration_work(self.deployment, iteration)))

    def decode_line(self, batch: int, context_sum: float):
        """A decode-only step of ``batch`` sequences with total context S takes A + beta S.

        Returns (A, beta, S_limit): the line holds for S <= S_limit (inf unless
        the ``"roofline"`` overlap switches from memory- to compute-bound).
        """
        wm = self._weights(batch) + self._head
        lin = (self.linear_per_token + self.linear_per_logit) * batch
        k, a = self.kv_per_token, self.attention_per_pair
        comm = self._comm0 + self._comm1 * batch if self._comm_affine else self._communication(batch)
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

    Derived in the chapter "Queueing: why TTFT explodes near capacity" (notebooks/09_queueing.ipynb).

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
