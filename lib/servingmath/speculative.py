"""Speculative decoding: tokens per step, the cost of a step, the speed-up and its break-even batch.

A small *draft* model proposes gamma tokens for each of the B running
sequences (gamma decode steps of the draft, batch B); the *target* model
then scores all of them in one forward pass (the *verification*), keeps the
longest prefix that its own sampling agrees with and adds one token of its
own. With each draft token accepted independently with probability alpha
(Leviathan et al. 2023), a speculative step yields

    E[tokens] = 1 + alpha + ... + alpha^gamma = (1 - alpha^(gamma+1)) / (1 - alpha)

tokens per sequence (:func:`expected_tokens_per_step`), between 1 and gamma + 1.

The cost of one speculative step, from the library's step-time model
(:func:`servingmath.decode.decode_step_parts`), at batch B and context S:

* gamma draft steps: :func:`~servingmath.decode.decode_step_time` of the draft
  model at batch B and context S each;
* one verification step (:func:`verification_step_parts`): a decode step in
  which every sequence brings gamma + 1 query positions, so the weights are
  read **once** (an MoE target: the experts that gamma+1 x B tokens touch),
  the weight matmuls do gamma + 1 times the FLOPs, each sequence's KV cache
  is read **once**, attention does gamma + 1 times the FLOPs, and the
  all-reduces carry gamma + 1 times the activations.

Below the knee the verification costs what a plain decode step costs (the
matmuls hide under the weight read), so each step buys E tokens for
gamma cheap draft steps: a speed-up. The verification turns compute-bound
once (gamma + 1) B reaches the knee B*, gamma + 1 times sooner than plain
decode: beyond a *break-even batch* (:func:`break_even_batch_size`) the
extra FLOPs on rejected tokens cost more than the weight reads they save,
and speculation slows decoding down. At long contexts the verification's
other saving, one read of each KV cache for E tokens, can outweigh those
FLOPs at every batch size: then there is no break-even (``inf``).

Assumptions (the chapter "Speculative decoding" discusses each): i.i.d.
acceptance with one rate alpha for every position and sequence; one chain of
gamma drafts (no tree speculation); draft and target on the same accelerators
with the same tensor parallelism, data types and efficiencies (as in
:class:`servingmath.simulate.Speculative`); the draft's KV reads are counted
in its step time, its KV-cache *memory* is not; the verification is one
iteration of the step model (:mod:`servingmath.step`), so the gamma KV entries it
writes and the causal triangle among its gamma + 1 new positions are counted;
the draft's growing context within a step is neglected (every draft step at
context S: about gamma / (2 S) of its KV read); sampling, the rejection test
and the draft's prefill are not counted.

Examples
--------
>>> round(expected_tokens_per_step(0.8, 4), 4)
3.3616
>>> round(speculative_speedup("Llama-3.1-8B", LLAMA_3_2_1B, "H100", 1, 256, 0.8, 4), 2)
2.03
>>> round(break_even_batch_size("Llama-3.1-8B", LLAMA_3_2_1B, "H100", 256, 0.8, 4), 1)
194.2
"""

from __future__ import annotations

import numpy as np

import dataclasses
import functools

from ._validation import check_integer, check_nonnegative, check_scalar, scalar_or_array
from .decode import decode_step_parts
from .deployment import DEPLOYMENT_OPTIONS, Deployment, deployment_function
from .models import check_context_len, get_model
from .settings import setting_options
from .step import Iteration, combine, iteration_work, time_parts

__all__ = [
    "LLAMA_3_2_1B",
    "LLAMA_3_2_3B",
    "expected_tokens_per_step",
    "ideal_speedup",
    "acceptance_rate_from_tokens_per_step",
    "verification_step_parts",
    "verification_step_time",
    "speculative_step_time",
    "speculative_time_per_token",
    "speculative_speedup",
    "break_even_batch_size",
    "optimal_num_draft_tokens",
    "asymptotic_speedup",
]

#: Llama-3.2-1B (a common draft for Llama-3.1-8B/70B: same tokenizer, 128,256 tokens), from the
#: catalog (``servingmath/data/models/llama-3_2-1b.json``, Hugging Face config of 2024-09-25).
LLAMA_3_2_1B = get_model("Llama-3.2-1B")
#: Llama-3.2-3B, from the catalog (``servingmath/data/models/llama-3_2-3b.json``).
LLAMA_3_2_3B = get_model("Llama-3.2-3B")

_PART_KEYS = ("weight_memory", "kv_memory", "linear_compute", "attention_compute", "communication",
              "overhead")


def _check_acceptance(acceptance_rate):
    a = check_nonnegative("acceptance_rate", acceptance_rate)
    if a.size and np.any(a > 1):
        bad = a[a > 1].flat[0]
        raise ValueError(f"acceptance_rate must be in [0, 1] (a probability), got {bad:g}")
    return a


def _check_gamma(num_draft_tokens):
    return check_integer("num_draft_tokens", num_draft_tokens, minimum=1)


def expected_tokens_per_step(acceptance_rate, num_draft_tokens):
    """Expected tokens one speculative step yields per sequence.

    Derived in the chapter "Speculative decoding: a win at low load, a loss at high load" (notebooks/12_speculative_decoding.ipynb).

    Parameters
    ----------
    acceptance_rate : float or array in [0, 1]
        alpha: the probability that the target accepts a draft token, the same
        for every position, independently (given the earlier ones were accepted).
    num_draft_tokens : int or array of int
        gamma >= 1: draft tokens proposed per step.

    Returns
    -------
    float or ndarray
        E = (1 - alpha^(gamma+1)) / (1 - alpha), and gamma + 1 at alpha = 1;
        between 1 (alpha = 0) and gamma + 1.

    Notes
    -----
    The number of accepted drafts is a geometric count truncated at gamma:
    P(at least i accepted) = alpha^i for i <= gamma. The verification adds one
    token of its own in every case (the correction after a rejection, or the
    *bonus* token after gamma acceptances), so
    E = 1 + sum_{i=1}^{gamma} alpha^i = sum_{i=0}^{gamma} alpha^i.
    The same as :func:`servingmath.simulate.expected_tokens_per_step`, for arrays.

    References
    ----------
    Y. Leviathan, M. Kalman, Y. Matias, "Fast Inference from Transformers via
    Speculative Decoding", ICML 2023, arXiv:2211.17192, eq. (1).

    Examples
    --------
    >>> round(expected_tokens_per_step(0.8, 4), 4)
    3.3616
    >>> expected_tokens_per_step(1.0, 4), expected_tokens_per_step(0.0, 4)
    (5.0, 1.0)
    """
    a = _check_acceptance(acceptance_rate)
    g = _check_gamma(num_draft_tokens)
    one = a == 1.0
    safe = np.where(one, 0.5, a)
    e = np.where(one, g + 1.0, (1.0 - safe ** (g + 1.0)) / (1.0 - safe))
    return scalar_or_array(e)


def acceptance_rate_from_tokens_per_step(tokens_per_step, num_draft_tokens):
    """The per-token acceptance rate alpha that yields a measured mean of tokens per step.

    Derived in the chapter "Speculative decoding: a win at low load, a loss at high load" (notebooks/12_speculative_decoding.ipynb).

    Inverts :func:`expected_tokens_per_step` (increasing in alpha) by bisection.

    Parameters
    ----------
    tokens_per_step : float or array in [1, gamma + 1]
        Mean tokens a sequence gains per speculative step (accepted drafts + 1).
        vLLM reports the *draft acceptance rate* r = accepted / proposed draft
        tokens; then tokens_per_step = 1 + gamma r.
    num_draft_tokens : int or array of int
        gamma >= 1.

    Returns
    -------
    float or ndarray
        alpha in [0, 1]. It is larger than r = (E - 1) / gamma whenever
        0 < r < 1: the drafts after the first rejection are counted as
        proposed but never had a chance to be accepted.

    Examples
    --------
    >>> round(acceptance_rate_from_tokens_per_step(3.3616, 4), 4)
    0.8
    >>> round(acceptance_rate_from_tokens_per_step(1 + 4 * 0.5, 4), 3)   # vLLM's rate 0.5
    0.741
    """
    g = _check_gamma(num_draft_tokens)
    m = check_nonnegative("tokens_per_step", tokens_per_step)
    if m.size and np.any((m < 1) | (m > g + 1)):
        bad = np.broadcast_to(m, np.broadcast(m, g).shape)[np.broadcast_to((m < 1) | (m > g + 1),
                                                                           np.broadcast(m, g).shape)]
        raise ValueError(f"tokens_per_step must be in [1, num_draft_tokens + 1], got {bad.flat[0]:g}")
    lo = np.zeros(np.broadcast(m, g).shape)
    hi = np.ones_like(lo)
    for _ in range(60):
        mid = (lo + hi) / 2
        below = np.asarray(expected_tokens_per_step(mid, np.broadcast_to(g, mid.shape))) < m
        lo = np.where(below, mid, lo)
        hi = np.where(below, hi, mid)
    return scalar_or_array((lo + hi) / 2)


def ideal_speedup(acceptance_rate, num_draft_tokens, cost_ratio):
    """Leviathan et al.'s speed-up when a verification costs one plain target step.

    Derived in the chapter "Speculative decoding: a win at low load, a loss at high load" (notebooks/12_speculative_decoding.ipynb).

    E / (gamma c + 1), with c = ``cost_ratio`` = (draft step time) / (target
    step time). True at small batch, where the verification step is as
    memory-bound as a plain one (:func:`speculative_speedup` equals it there
    with c = the ratio of the two decode step times, one GPU); above the
    break-even batch it overstates the speed-up.

    Examples
    --------
    >>> round(ideal_speedup(0.8, 4, 0.1), 3)
    2.401
    """
    c = check_nonnegative("cost_ratio", cost_ratio)
    g = _check_gamma(num_draft_tokens)
    e = expected_tokens_per_step(acceptance_rate, num_draft_tokens)
    return scalar_or_array(np.asarray(e) / (g * c + 1.0))


def _verification_parts(dep: Deployment, batch, context, g):
    """Parts of the verification: B sequences each bring g + 1 new tokens after S - 1 cached ones."""
    check_integer("batch_size", batch, minimum=1)
    g1 = np.asarray(g, dtype=float) + 1.0
    context = check_context_len(dep.model, context)      # S = 0 (no cache yet) verifies after 0 cached
    cached = np.maximum(np.asarray(context, dtype=float) - 1.0, 0.0)
    check_context_len(dep.model, cached + g1, "context_len + num_draft_tokens (the positions a verification fills)")
    it = Iteration.of(dep.model, sequences=batch, new_tokens=g1, cached_tokens=cached, logits=g1)
    return time_parts(dep, iteration_work(dep, it))


@deployment_function
def verification_step_parts(dep: Deployment, batch_size, context_len, num_draft_tokens=4) -> dict:
    """The parts of one verification step of the target model, in seconds.

    Every one of the ``batch_size`` sequences brings gamma + 1 positions (its
    last token and the gamma drafts) after the S - 1 tokens already cached: one
    iteration of the step model (:mod:`servingmath.step`) with
    ``new_tokens = gamma + 1`` and logits at every new position. Same keys as
    :func:`servingmath.decode.decode_step_parts`.

    Notes
    -----
    Against a plain decode step at batch B: the weights are read once (MoE:
    the experts (gamma + 1) B tokens touch), each cache is read once (plus the
    gamma extra KV entries written), the weight matmuls and the LM head do
    gamma + 1 times the FLOPs, attention does (gamma + 1) S + gamma (gamma + 1) / 2
    pairs per sequence (the causal triangle among the new positions), and the
    all-reduces carry (gamma + 1) B tokens. Derived in the chapter "Speculative decoding".

    Examples
    --------
    >>> p = verification_step_parts("Llama-3.1-8B", "H100", 64, 1024, 4)
    >>> {k: round(float(v) * 1e3, 3) for k, v in p.items()}
    {'weight_memory': 4.481, 'kv_memory': 2.574, 'linear_compute': 4.855, 'attention_compute': 0.174, 'communication': 0.0, 'overhead': 0.0}
    """
    g = _check_gamma(num_draft_tokens)
    return _verification_parts(dep, batch_size, context_len, g)


@deployment_function
def verification_step_time(dep: Deployment, batch_size, context_len, num_draft_tokens=4):
    """Seconds for one verification step (parts combined as in :func:`~servingmath.decode.decode_step_time`).

    Derived in the chapter "Speculative decoding: a win at low load, a loss at high load" (notebooks/12_speculative_decoding.ipynb).

    Examples
    --------
    >>> round(verification_step_time("Llama-3.1-8B", "H100", 1, 1024, 4) * 1e3, 3)   # = a decode step
    4.521
    >>> round(verification_step_time("Llama-3.1-8B", "H100", 128, 1024, 4) * 1e3, 2)  # compute-bound
    14.87
    """
    g = _check_gamma(num_draft_tokens)
    return combine(dep.overlap, _verification_parts(dep, batch_size, context_len, g))


def _time(parts, overlap):
    return combine(overlap, parts)


def _all_parts(target: Deployment, draft: Deployment, batch, context, g):
    """(plain target step, draft step, verification) parts at the given batch (arrays)."""
    plain = decode_step_parts(target, batch, context)
    drafting = decode_step_parts(draft, batch, context)
    verify = _verification_parts(target, batch, context, g)
    as_float = lambda d: {k: np.asarray(d[k], dtype=float) for k in _PART_KEYS}  # noqa: E731
    return as_float(plain), as_float(drafting), as_float(verify)


def speculative_function(func):
    """The calling convention of the speculative functions: ``(target, draft, accelerator, ...)``
    or ``(deployment, draft, ...)``, deployment settings as keyword options shared by both models
    (``setting="realistic"`` selects the book's realistic setting, :mod:`servingmath.settings`).

    The draft runs on the target's deployment (same accelerators, tensor
    parallelism, data types and efficiencies), as in :class:`servingmath.simulate.Speculative`.
    """
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        setting = kwargs.pop("setting", None)
        options = {k: kwargs.pop(k) for k in list(kwargs) if k in DEPLOYMENT_OPTIONS}
        if args and isinstance(args[0], Deployment):
            if len(args) < 2:
                raise ValueError(f"{func.__name__}: give the draft model after the deployment")
            if setting is not None:       # a named setting, then the options given beside it
                options = {**setting_options(setting, args[0].accelerator), **options}
            target = args[0].replace(**options) if options else args[0]
            draft, rest = args[1], args[2:]
        else:
            if len(args) < 3:
                raise ValueError(f"{func.__name__}: give the target model, the draft model and the accelerator "
                                 "(or a Deployment and the draft model)")
            target = Deployment.build(args[0], args[2], setting=setting, **options)
            draft, rest = args[1], args[3:]
        draft_dep = dataclasses.replace(target, model=get_model(draft))
        return func(target, draft_dep, *rest, **kwargs)

    wrapper.takes_deployment = True
    return wrapper


@speculative_function
def speculative_step_time(target: Deployment, draft: Deployment, batch_size, context_len, num_draft_tokens=4):
    """Seconds for one speculative step: gamma draft decode steps + one verification.

    Parameters
    ----------
    target, draft : str or ModelConfig
        The model that is served and the one that proposes tokens (e.g.
        :data:`LLAMA_3_2_1B`), on the same accelerators with the same settings.
        (Or a target :class:`~servingmath.deployment.Deployment` and the draft.)
    accelerator : str or Accelerator
    batch_size, context_len
        As in :func:`servingmath.decode.decode_step_time`.
    num_draft_tokens : int
        gamma >= 1.
    Deployment settings as keyword options, shared by both models.

    Returns
    -------
    float or ndarray
        gamma x T_draft(B, S) + T_verify(B, S). Not a time per token: one step
        yields :func:`expected_tokens_per_step` tokens per sequence. Derived in
        the chapter "Speculative decoding".

    Examples
    --------
    >>> round(speculative_step_time("Llama-3.1-8B", LLAMA_3_2_1B, "H100", 1, 256, 4) * 1e3, 3)
    7.46
    """
    g = _check_gamma(num_draft_tokens)
    _, drafting, verify = _all_parts(target, draft, batch_size, context_len, g)
    total = g * _time(drafting, target.overlap) + _time(verify, target.overlap)
    return scalar_or_array(total)


@speculative_function
def speculative_time_per_token(target: Deployment, draft: Deployment, batch_size, context_len, acceptance_rate,
                               num_draft_tokens=4):
    """Expected seconds per output token of each sequence: the speculative TPOT.

    Derived in the chapter "Speculative decoding: a win at low load, a loss at high load" (notebooks/12_speculative_decoding.ipynb).

    :func:`speculative_step_time` / :func:`expected_tokens_per_step`; deployment
    settings as in :func:`speculative_step_time`.

    Examples
    --------
    >>> round(speculative_time_per_token("Llama-3.1-8B", LLAMA_3_2_1B, "H100", 1, 256, 0.8, 4) * 1e3, 2)
    2.22
    """
    e = expected_tokens_per_step(acceptance_rate, num_draft_tokens)
    t = speculative_step_time(target, draft.model, batch_size, context_len, num_draft_tokens)
    return scalar_or_array(np.asarray(t) / np.asarray(e))


def _speedup_from_parts(plain, drafting, verify, e, g, overlap):
    return e * _time(plain, overlap) / (g * _time(drafting, overlap) + _time(verify, overlap))


@speculative_function
def speculative_speedup(target: Deployment, draft: Deployment, batch_size, context_len, acceptance_rate,
                        num_draft_tokens=4):
    """Speed-up of decoding at batch B: plain TPOT over speculative time per token.

    Derived in the chapter "Speculative decoding: a win at low load, a loss at high load" (notebooks/12_speculative_decoding.ipynb).

    Parameters
    ----------
    target, draft, accelerator, batch_size, context_len, num_draft_tokens, ... :
        As in :func:`speculative_step_time`.
    acceptance_rate : float or array in [0, 1]
        alpha.

    Returns
    -------
    float or ndarray
        S(B) = E x T_target(B) / (gamma T_draft(B) + T_verify(B)) at the same
        batch size and context; > 1 means speculation makes every sequence's
        tokens (and the whole batch's throughput) faster.

    Notes
    -----
    At small batch T_verify = T_target (both read the weights once and the
    matmuls hide under the read), so S = E / (gamma c + 1) with
    c = T_draft / T_target (:func:`ideal_speedup`). Once (gamma + 1) B passes
    the knee the verification grows as (gamma + 1) B x 2 P / F while the plain
    step stays memory-bound, and S falls below 1 at :func:`break_even_batch_size`.

    Examples
    --------
    >>> round(speculative_speedup("Llama-3.1-8B", LLAMA_3_2_1B, "H100", 1, 256, 0.8, 4), 2)
    2.03
    >>> args = ("Llama-3.1-8B", LLAMA_3_2_1B, "H100")
    >>> [round(speculative_speedup(*args, b, 256, 0.8, 4), 2) for b in (1, 64, 256)]
    [2.03, 1.89, 0.86]
    >>> round(speculative_speedup(*args, 256, 2048, 0.8, 4), 2)   # long contexts: still a gain
    1.32
    """
    e = expected_tokens_per_step(acceptance_rate, num_draft_tokens)
    g = _check_gamma(num_draft_tokens)
    parts = _all_parts(target, draft, batch_size, context_len, g)
    result = _speedup_from_parts(*parts, np.asarray(e), g, target.overlap)
    return scalar_or_array(result)


def _trailing_axis(dep: Deployment) -> Deployment:
    """The same deployment with a trailing axis on every array-valued setting (to broadcast against batches)."""
    changes = {}
    for name in ("tensor_parallel", "mfu", "mbu", "step_overhead"):
        v = getattr(dep, name)
        if np.ndim(v):
            changes[name] = np.asarray(v)[..., None]
    for name, flat in (("latency", "allreduce_latency"), ("base_latency", "allreduce_base_latency"),
                       ("link_efficiency", "link_efficiency")):
        v = getattr(dep.allreduce, name)
        if np.ndim(v):
            changes[flat] = np.asarray(v)[..., None]
    return dep.replace(**changes) if changes else dep


def _setting_shape(dep: Deployment):
    values = [dep.tensor_parallel, dep.mfu, dep.mbu, dep.step_overhead, dep.allreduce.latency,
              dep.allreduce.base_latency, dep.allreduce.link_efficiency]
    return np.broadcast_shapes(*(np.shape(v) for v in values))


@speculative_function
def break_even_batch_size(target: Deployment, draft: Deployment, context_len, acceptance_rate,
                          num_draft_tokens=4, *, max_batch_size=4096):
    """The batch size beyond which speculative decoding slows decoding down.

    Derived in the chapter "Speculative decoding: a win at low load, a loss at high load" (notebooks/12_speculative_decoding.ipynb).

    Parameters
    ----------
    target, draft, accelerator, context_len, acceptance_rate, num_draft_tokens, ... :
        As in :func:`speculative_speedup` (all but the batch size; arrays broadcast).
    max_batch_size : int
        Largest batch searched (>= 2).

    Returns
    -------
    float or ndarray
        B_e, the first batch size at which :func:`speculative_speedup` falls to 1,
        as a real number (not rounded): speculation pays for B < B_e and does not
        at the first integer batch >= B_e. ``0.0`` where it does not pay even at
        batch 1; ``inf`` where it still pays at ``max_batch_size`` (long contexts:
        the verification reads each KV cache once for gamma + 1 tokens, so the KV
        reads it saves can outweigh its extra FLOPs at every batch).

    Notes
    -----
    Found by evaluating the speed-up at every integer batch up to
    ``max_batch_size``, then solving speed-up = 1 exactly between the last
    batch that gains and the first that loses, with each part of each step
    interpolated linearly in B (exact for dense models, whose parts are affine
    in B; for MoE targets the weight reads are interpolated).

    In the hybrid model on one GPU at S = 0, with the verification
    compute-bound and the plain step and the draft memory-bound at B_e,
    B_e = B* (E - gamma rho) / (gamma + 1), with B* the target's knee
    (:func:`servingmath.decode.knee_batch_size`) and rho = M_draft / M_target
    the ratio of the weight bytes; the chapter derives the general form with
    the KV term.

    Examples
    --------
    >>> round(break_even_batch_size("Llama-3.1-8B", LLAMA_3_2_1B, "H100", 0, 0.8, 4), 1)
    159.3
    >>> args = ("Llama-3.1-8B", LLAMA_3_2_1B, "H100")
    >>> round(break_even_batch_size(*args, 256, 0.8, 4), 1)
    194.2
    >>> round(break_even_batch_size(*args, 0, 0.8, 4, setting="realistic"), 1)
    101.9
    >>> break_even_batch_size(*args, 2048, 0.8, 4)   # pays at every batch up to 4096
    inf
    """
    overlap = target.overlap
    n_max = int(check_integer("max_batch_size", max_batch_size, minimum=2))
    e = np.asarray(expected_tokens_per_step(acceptance_rate, num_draft_tokens), dtype=float)
    g = _check_gamma(num_draft_tokens)
    context = check_nonnegative("context_len", context_len)
    shape = np.broadcast_shapes(np.shape(context), e.shape, np.shape(g), _setting_shape(target))
    batches = np.arange(1, n_max + 1)
    parts = _all_parts(_trailing_axis(target), _trailing_axis(draft), batches, context[..., None],
                       g[..., None])
    parts = tuple({k: np.broadcast_to(v, shape + (n_max,)) for k, v in p.items()} for p in parts)
    e_b, g_b = np.broadcast_to(e, shape)[..., None], np.broadcast_to(g, shape)[..., None]
    gain = _speedup_from_parts(*parts, e_b, g_b, overlap) - 1.0
    loses = gain <= 0
    first = np.argmax(loses, axis=-1)                      # index of the first losing batch
    never = ~loses.any(axis=-1)
    at_one = loses[..., 0]
    lo_index = np.clip(first - 1, 0, n_max - 1)[..., None]
    hi_index = np.clip(first, 0, n_max - 1)[..., None]
    lo = tuple({k: np.take_along_axis(v, lo_index, -1)[..., 0] for k, v in p.items()} for p in parts)
    hi = tuple({k: np.take_along_axis(v, hi_index, -1)[..., 0] for k, v in p.items()} for p in parts)
    e_s, g_s = np.broadcast_to(e, shape), np.broadcast_to(g, shape)

    def gain_at(t):  # t in [0, 1] between the last gaining batch and the first losing one
        mix = tuple({k: (1 - t) * a[k] + t * b[k] for k in _PART_KEYS} for a, b in zip(lo, hi))
        return _speedup_from_parts(*mix, e_s, g_s, overlap) - 1.0

    left, right = np.zeros(shape), np.ones(shape)
    for _ in range(60):
        mid = (left + right) / 2
        positive = gain_at(mid) > 0
        left = np.where(positive, mid, left)
        right = np.where(positive, right, mid)
    root = (lo_index[..., 0] + 1) + (left + right) / 2
    result = np.where(never, np.inf, np.where(at_one, 0.0, root))
    return scalar_or_array(result)


@speculative_function
def optimal_num_draft_tokens(target: Deployment, draft: Deployment, batch_size, context_len, acceptance_rate,
                             *, max_draft_tokens=16):
    """The draft length gamma in 1..``max_draft_tokens`` with the largest speed-up.

    Derived in the chapter "Speculative decoding: a win at low load, a loss at high load" (notebooks/12_speculative_decoding.ipynb).

    Deployment settings as in :func:`speculative_speedup`. Scalars only (one
    batch, context and acceptance rate). Returns an int.

    Notes
    -----
    Too short a draft wastes the cheap verification; too long a draft pays for
    draft steps (and verification FLOPs) that alpha^i makes unlikely to be
    kept. At batch 1 this maximises E(gamma) / (gamma c + 1).

    Examples
    --------
    >>> optimal_num_draft_tokens("Llama-3.1-8B", LLAMA_3_2_1B, "H100", 1, 1024, 0.8)
    4
    >>> optimal_num_draft_tokens("Llama-3.1-8B", LLAMA_3_2_1B, "H100", 1, 1024, 0.95)
    12
    """
    for name, value in [("batch_size", batch_size), ("context_len", context_len),
                        ("acceptance_rate", acceptance_rate)]:
        check_scalar(name, value)
    n = int(check_integer("max_draft_tokens", max_draft_tokens, minimum=1))
    gammas = np.arange(1, n + 1)
    s = speculative_speedup(target, draft.model, batch_size, context_len, acceptance_rate, gammas)
    return int(gammas[int(np.argmax(s))])


@speculative_function
def asymptotic_speedup(target: Deployment, draft: Deployment, context_len, acceptance_rate, num_draft_tokens=4):
    """The speed-up as the batch grows without bound: lim B -> inf of :func:`speculative_speedup`.

    Derived in the chapter "Speculative decoding: a win at low load, a loss at high load" (notebooks/12_speculative_decoding.ipynb).

    Every step time grows as B times a per-sequence slope (the weight read
    is a fixed cost and drops out), so the limit is
    E x slope_target / (gamma slope_draft + slope_verify). In the hybrid model

    * plain step: c + max(m, a);
    * draft step: c_d + max(m_d, a_d);
    * verification: (gamma + 1) c + max(m, (gamma + 1) a);

    with c, a the matmul and attention seconds per sequence and m its KV read
    (each divided by N, plus the per-sequence all-reduce time when N > 1).
    Above 1, speculation pays at every batch size (long contexts: the
    verification reads each cache once for E tokens); below 1 it loses at
    large batch.

    Examples
    --------
    >>> round(asymptotic_speedup("Llama-3.1-8B", LLAMA_3_2_1B, "H100", 0, 0.8, 4), 3)
    0.593
    >>> args = ("Llama-3.1-8B", LLAMA_3_2_1B, "H100")
    >>> round(asymptotic_speedup(*args, 0, 0.8, 4), 3), round(asymptotic_speedup(*args, 2048, 0.8, 4), 3)
    (0.593, 1.301)
    """
    e = expected_tokens_per_step(acceptance_rate, num_draft_tokens)
    g = _check_gamma(num_draft_tokens)
    # each part is affine in B once every expert is touched (dense models: at every B), so its
    # slope is the difference between two large batches; the fixed costs (weight read, all-reduce
    # latency, overhead) drop out of the limit
    big = 2 ** 20
    one = _all_parts(target, draft, big, context_len, g)
    two = _all_parts(target, draft, big + 1, context_len, g)
    slopes = tuple({k: (b[k] - a[k]) if k != "overhead" else 0.0 * a[k] for k in _PART_KEYS}
                   for a, b in zip(one, two))
    result = _speedup_from_parts(*slopes, np.asarray(e), g, target.overlap)
    return scalar_or_array(result)
