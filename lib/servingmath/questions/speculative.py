"""Questions of chapter 12, "Speculative decoding: a win at low load, a loss at high load".

Every expected answer is computed by the library (:mod:`servingmath.speculative`,
:mod:`servingmath.decode`) from the question's parameters; every known mistake
is computed the same way with the mistaken step, so a variant with other
parameters keeps its hints.
"""

from __future__ import annotations

import sympy as sp

from ..question import Mistake, Question
from ..settings import REALISTIC
from ..decode import decode_coefficients, decode_step_time, knee_batch_size
from ..models import get_model
from ..speculative import (
    LLAMA_3_2_1B,
    LLAMA_3_2_3B,
    acceptance_rate_from_tokens_per_step,
    break_even_batch_size,
    expected_tokens_per_step,
    ideal_speedup,
    speculative_speedup,
    speculative_step_time,
    speculative_time_per_token,
    verification_step_parts,
    verification_step_time,
)

_DRAFTS = {"Llama-3.2-1B": LLAMA_3_2_1B, "Llama-3.2-3B": LLAMA_3_2_3B}

p_acc = sp.Symbol("p", positive=True)      # acceptance probability (Leviathan et al.: alpha)
gamma = sp.Symbol("gamma", positive=True, integer=True)
B_star = sp.Symbol("B_star", positive=True)
E = sp.Symbol("E", positive=True)
delta = sp.Symbol("delta", positive=True)   # the draft's weight-read time over the target's
_SYMBOLS = {"p": p_acc, "gamma": gamma, "B_star": B_star, "E": E, "delta": delta}


def _draft(p):
    name = p["draft"]
    return _DRAFTS[name] if name in _DRAFTS else get_model(name)


def _e(p, a=None, g=None):
    return expected_tokens_per_step(p["alpha"] if a is None else a, p["gamma"] if g is None else g)


def _pair(p):
    return p["target"], _draft(p), p["accelerator"]


def _step_times(p):
    """(plain target step, one draft step, verification, speculative step) at the question's batch."""
    target, draft, gpu = _pair(p)
    b, s, g = p["batch"], p["context"], p["gamma"]
    return (decode_step_time(target, gpu, b, s), decode_step_time(draft, gpu, b, s),
            verification_step_time(target, gpu, b, s, g), speculative_step_time(target, draft, gpu, b, s, g))


def _verify_with(p, kv_reads=1.0, weight_reads=1.0):
    """Hybrid verification time with the KV cache or the weights read several times (the mistakes)."""
    parts = verification_step_parts(p["target"], p["accelerator"], p["batch"], p["context"], p["gamma"])
    return (max(weight_reads * parts["weight_memory"], parts["linear_compute"])
            + max(kv_reads * parts["kv_memory"], parts["attention_compute"]))


def _knee_and_rho(p):
    """The target's knee and delta = T_w^d / T_w, the ratio of the weight bytes a step reads."""
    target, draft, gpu = _pair(p)
    read = decode_coefficients(target, gpu, 0)["weight_memory"]
    return knee_batch_size(target, gpu, 0), decode_coefficients(draft, gpu, 0)["weight_memory"] / read


def _break_even_short(p, gamma_denominator=None, draft_cost=True, per_step=False):
    """B* (E - gamma delta) / (gamma + 1), with the mistaken variants."""
    knee, ratio = _knee_and_rho(p)
    g = p["gamma"]
    tokens = 1.0 if per_step else _e(p)
    return knee * (tokens - (g * ratio if draft_cost else 0.0)) / (gamma_denominator or g + 1)


def _break_even_realistic(p, overhead_steps=None):
    """The short form B* (E - gamma delta - (gamma + 1 - E) theta) / (gamma + 1) at the realistic setting;
    ``overhead_steps=1``: the mistake of charging the overhead once per speculative step."""
    target, draft, gpu = _pair(p)
    t = decode_coefficients(target, gpu, 0, setting="realistic")
    d = decode_coefficients(draft, gpu, 0, setting="realistic")
    e, g = _e(p), p["gamma"]
    theta = t["overhead"] / t["weight_memory"]
    steps = g + 1 if overhead_steps is None else overhead_steps
    return (t["weight_memory"] / t["linear"] * (e - g * d["weight_memory"] / t["weight_memory"]
                                                - (steps - e) * theta) / (g + 1))


def _on_or_off(p):
    target, draft, gpu = _pair(p)
    x = speculative_speedup(target, draft, gpu, p["batch"], p["context"], p["alpha"], p["gamma"])
    return "on" if x > 1 else "off"


def _other(choice):
    return "off" if choice == "on" else "on"


def _break_even_expr(tokens=E, draft_cost=True, denominator=gamma + 1):
    return B_star * (tokens - (gamma * delta if draft_cost else 0)) / denominator


QUESTIONS = [
    Question(
        "speculative.tokens_per_step",
        "A draft proposes gamma = {gamma} tokens per step and the target accepts each with probability "
        "p = {alpha}, independently, until the first rejection. How many tokens does one speculative "
        "step yield per sequence, on average (the verification's own token included)?",
        difficulty="easy",
        answer=_e,
        params={"alpha": 0.75, "gamma": 5},
        variants={"alpha": [0.6, 0.7, 0.75, 0.8, 0.85], "gamma": [3, 4, 5, 6]},
        mistakes=[
            Mistake("That counts the accepted drafts only: the verification always adds one token of its own "
                    "(the correction after a rejection, or the bonus token when all drafts pass).",
                    lambda p: _e(p) - 1),
            Mistake("The sum runs from p^0 to p^gamma, gamma + 1 terms: (1 - p^(gamma+1)) / "
                    "(1 - p), not (1 - p^gamma) / (1 - p).",
                    lambda p: (1 - p["alpha"] ** p["gamma"]) / (1 - p["alpha"])),
            Mistake("Acceptance stops at the first rejection: draft i counts only if drafts 1..i are all "
                    "accepted (probability p^i), so the mean is not 1 + gamma p.",
                    lambda p: 1 + p["gamma"] * p["alpha"]),
        ],
    ),
    Question(
        "speculative.tokens_per_step_symbolic",
        "Derive the expected tokens per speculative step, E, as a sympy expression in p and gamma "
        "(i.i.d. acceptance with probability p, gamma drafts, p < 1).",
        difficulty="medium",
        kind="symbolic",
        answer=lambda p: (1 - p_acc ** (gamma + 1)) / (1 - p_acc),
        symbols=_SYMBOLS,
        mistakes=[
            Mistake("Off by one term: the sum of p^i runs over i = 0..gamma, so the numerator is "
                    "1 - p^(gamma+1).", lambda p: (1 - p_acc ** gamma) / (1 - p_acc)),
            Mistake("That is E[accepted drafts]; add the verification's own token (the bonus token).",
                    lambda p: p_acc * (1 - p_acc ** gamma) / (1 - p_acc)),
            Mistake("Acceptance stops at the first rejection: P(at least i accepted) = p^i, not a "
                    "binomial count.", lambda p: 1 + gamma * p_acc),
        ],
    ),
    Question(
        "speculative.ideal_speedup",
        "At batch 1 a verification costs one plain target step. A draft step costs c = {cost_ratio} target "
        "steps, gamma = {gamma}, p = {alpha}. What is the speed-up (plain time per token over "
        "speculative time per token)?",
        difficulty="easy",
        answer=lambda p: ideal_speedup(p["alpha"], p["gamma"], p["cost_ratio"]),
        params={"alpha": 0.8, "gamma": 4, "cost_ratio": 0.12},
        variants={"alpha": [0.7, 0.8, 0.9], "cost_ratio": [0.05, 0.12, 0.2]},
        mistakes=[
            Mistake("You ignored the draft: gamma draft steps of c each are part of every speculative step.",
                    lambda p: _e(p)),
            Mistake("A step runs gamma draft steps, not gamma + 1: the verification is the target's pass.",
                    lambda p: _e(p) / ((p["gamma"] + 1) * p["cost_ratio"] + 1)),
            Mistake("You forgot the verification's own token: E = 1 + p + ... + p^gamma.",
                    lambda p: (_e(p) - 1) / (p["gamma"] * p["cost_ratio"] + 1)),
        ],
    ),
    Question(
        "speculative.speedup_batch_one",
        "{target} on one {accelerator} with a {draft} draft ({draft_ref}), batch 1, {context} "
        "tokens of context, gamma = {gamma}, p = {alpha}, hybrid model at the physical bound. What "
        "speed-up does speculation give?",
        difficulty="medium",
        answer=lambda p: speculative_speedup(*_pair(p), 1, p["context"], p["alpha"], p["gamma"]),
        params={"target": "Llama-3.1-8B", "draft": "Llama-3.2-1B", "accelerator": "H100-SXM5-80GB",
                "context": 512, "alpha": 0.7, "gamma": 4, "batch": 1},
        variants={"draft": ("Llama-3.2-1B", "Llama-3.2-3B"),
                  "accelerator": ("H100-SXM5-80GB", "H200-SXM-141GB", "A100-SXM4-80GB"),
                  "context": (256, 512, 1024), "alpha": (0.6, 0.7, 0.8), "gamma": (3, 4, 5)},
        derive=lambda p: {**p, "draft_ref": "speculative." + p["draft"].upper().replace("-", "_").replace(".", "_")},
        mistakes=[
            Mistake("You left out the draft's cost: at batch 1 the verification costs a plain step, but the "
                    "gamma draft steps come on top.", lambda p: _e(p)),
            Mistake("That is a ratio of step times; a speculative step yields E tokens, so compare time "
                    "per token.", lambda p: _step_times(p)[0] / _step_times(p)[3]),
            Mistake("You forgot the verification's own token: E tokens per step, not E - 1.",
                    lambda p: (_e(p) - 1) * _step_times(p)[0] / _step_times(p)[3]),
        ],
    ),
    Question(
        "speculative.verification_time",
        "Verification step of {target} on one {accelerator}: {batch} sequences with {context} tokens of "
        "context each, gamma = {gamma} drafts per sequence (gamma + 1 positions), hybrid model, physical "
        "bound. How long does it take? (ms)",
        difficulty="medium",
        unit="ms",
        answer=lambda p: verification_step_time(p["target"], p["accelerator"], p["batch"], p["context"],
                                                p["gamma"]),
        params={"target": "Llama-3.1-8B", "accelerator": "H100-SXM5-80GB", "batch": 128, "context": 1024,
                "gamma": 4},
        variants={"accelerator": ("H100-SXM5-80GB", "H200-SXM-141GB"), "batch": (128, 256),
                  "context": (512, 1024, 2048), "gamma": (4, 5)},
        mistakes=[
            Mistake("That is a plain decode step: the verification multiplies the weights by gamma + 1 "
                    "positions per sequence, and at (gamma + 1) x B positions the matmuls are compute-bound.",
                    lambda p: decode_step_time(p["target"], p["accelerator"], p["batch"], p["context"])),
            Mistake("Each sequence's cache is read once for all its gamma + 1 queries, not once per query "
                    "(that is 'batch expansion', which early vLLM did).", lambda p: _verify_with(p, kv_reads=p["gamma"] + 1)),
            Mistake("The weights are read once per forward pass, whatever the number of positions.",
                    lambda p: _verify_with(p, weight_reads=p["gamma"] + 1)),
        ],
    ),
    Question(
        "speculative.time_per_token",
        "{target} with a {draft} draft on one {accelerator}: {batch} sequences, {context} tokens of context, "
        "gamma = {gamma}, p = {alpha}, hybrid model, physical bound. What is the expected time per output "
        "token of each sequence (the speculative TPOT)? (ms)",
        difficulty="medium",
        unit="ms",
        answer=lambda p: speculative_time_per_token(*_pair(p), p["batch"], p["context"], p["alpha"],
                                                    p["gamma"]),
        params={"target": "Llama-3.1-8B", "draft": "Llama-3.2-1B", "accelerator": "H100-SXM5-80GB",
                "batch": 32, "context": 512, "alpha": 0.8, "gamma": 4},
        variants={"draft": ("Llama-3.2-1B", "Llama-3.2-3B"), "batch": (16, 32, 64), "context": (256, 512, 1024),
                  "alpha": (0.7, 0.8), "gamma": (3, 4)},
        mistakes=[
            Mistake("That is the time of a whole speculative step; it yields E tokens per sequence, so "
                    "divide by E.", lambda p: _step_times(p)[3]),
            Mistake("You divided by gamma + 1, as if every draft were accepted; divide by "
                    "E = (1 - p^(gamma+1)) / (1 - p).",
                    lambda p: _step_times(p)[3] / (p["gamma"] + 1)),
            Mistake("You left out the gamma draft steps.", lambda p: _step_times(p)[2] / _e(p)),
        ],
    ),
    Question(
        "speculative.break_even_short_context",
        "{target} on one {accelerator} with a {draft} draft, gamma = {gamma}, p = {alpha}, contexts so "
        "short that the KV reads are negligible (S = 0), hybrid model, physical bound. Beyond what batch size "
        "does speculation slow decoding down? (a number of sequences, not rounded)",
        difficulty="hard",
        answer=lambda p: break_even_batch_size(*_pair(p), 0, p["alpha"], p["gamma"]),
        params={"target": "Llama-3.1-8B", "draft": "Llama-3.2-1B", "accelerator": "H100-SXM5-80GB",
                "alpha": 0.8, "gamma": 4},
        variants={"draft": ("Llama-3.2-1B", "Llama-3.2-3B"), "accelerator": ("H100-SXM5-80GB", "H200-SXM-141GB"),
                  "alpha": (0.7, 0.8, 0.9), "gamma": (3, 4, 5)},
        mistakes=[
            Mistake("B*/(gamma + 1) is where the verification turns compute-bound; speculation still pays "
                    "beyond it, until its extra FLOPs eat the E tokens' gain.",
                    lambda p: _knee_and_rho(p)[0] / (p["gamma"] + 1)),
            Mistake("You left out the draft's weight reads: B_e = B* (E - gamma delta) / (gamma + 1), delta the ratio of the bytes a step reads.",
                    lambda p: _break_even_short(p, draft_cost=False)),
            Mistake("The verification processes gamma + 1 positions per sequence: divide by gamma + 1, "
                    "not gamma.", lambda p: _break_even_short(p, gamma_denominator=p["gamma"])),
            Mistake("Compare time per token, not per step: a speculative step yields E tokens.",
                    lambda p: _break_even_short(p, per_step=True)),
        ],
    ),
    Question(
        "speculative.break_even_realistic",
        "The same pair, {target} with a {draft} draft on one {accelerator}, gamma = {gamma}, p = {alpha}, "
        "S = 0, but at the book's realistic setting (setting=\"realistic\": MFU 0.5, MBU 0.75, 0.4 ms of "
        "fixed overhead in every step, draft steps included). Beyond what batch size does speculation slow "
        "decoding down? (a number of sequences, not rounded)",
        difficulty="hard",
        answer=lambda p: break_even_batch_size(*_pair(p), 0, p["alpha"], p["gamma"], setting="realistic"),
        params={"target": "Llama-3.1-8B", "draft": "Llama-3.2-1B", "accelerator": "H100-SXM5-80GB",
                "alpha": 0.8, "gamma": 4},
        variants={"accelerator": ("H100-SXM5-80GB", "H200-SXM-141GB"), "alpha": (0.7, 0.8),
                  "gamma": (3, 4, 5)},
        mistakes=[
            Mistake("That is the physical bound; at the realistic setting the knee is lower and every step "
                    "pays the fixed overhead.",
                    lambda p: break_even_batch_size(*_pair(p), 0, p["alpha"], p["gamma"])),
            Mistake("Scaling the bound's break-even by MFU / MBU moves the knee, but not the overhead: each of "
                    "the gamma + 1 steps of a speculative step pays it, against E plain steps, so subtract "
                    "(gamma + 1 - E) theta with theta = T_oh / T_w.",
                    lambda p: break_even_batch_size(*_pair(p), 0, p["alpha"], p["gamma"])
                    * REALISTIC["mfu"] / REALISTIC["mbu"]),
            Mistake("The overhead is paid by every step, the gamma draft steps included, not once per "
                    "speculative step.", lambda p: _break_even_realistic(p, overhead_steps=1)),
        ],
    ),
    Question(
        "speculative.break_even_symbolic",
        "Hybrid model, S = 0, one GPU: the plain step and the draft are memory-bound (T_w and delta T_w), the "
        "verification is compute-bound ((gamma + 1) c B, with the knee B_star = T_w / c). Solve "
        "E T_plain = gamma T_draft + T_verify for the break-even batch, as a sympy expression in B_star, "
        "E, gamma and delta.",
        difficulty="hard",
        kind="symbolic",
        answer=lambda p: _break_even_expr(),
        symbols=_SYMBOLS,
        mistakes=[
            Mistake("The draft's gamma weight reads (gamma delta T_w per step) belong on the cost side.",
                    lambda p: _break_even_expr(draft_cost=False)),
            Mistake("The verification does gamma + 1 positions' FLOPs per sequence, so (gamma + 1) c B.",
                    lambda p: _break_even_expr(denominator=gamma)),
            Mistake("Per step instead of per token: the plain side is E plain steps' worth of tokens, "
                    "E T_plain.", lambda p: _break_even_expr(tokens=1)),
            Mistake("That is where the verification turns compute-bound, not where the speed-up reaches 1.",
                    lambda p: B_star / (gamma + 1)),
        ],
    ),
    Question(
        "speculative.switch_at_short_context",
        "{target} with a {draft} draft on one {accelerator}, gamma = {gamma}, p = {alpha}, {context} tokens "
        "of context per sequence, and the server is running {batch} sequences. Should speculation be 'on' or "
        "'off' (hybrid model, physical bound)?",
        difficulty="easy",
        kind="choice",
        choices=("on", "off"),
        answer=_on_or_off,
        params={"target": "Llama-3.1-8B", "draft": "Llama-3.2-1B", "accelerator": "H100-SXM5-80GB",
                "context": 256, "alpha": 0.7, "gamma": 4, "batch": 200},
        variants={"batch": (64, 100, 200, 250), "alpha": (0.6, 0.7, 0.8), "context": (128, 256)},
        mistakes=[
            Mistake("The other way round: compare the batch with the break-even batch "
                    "(speculative.break_even_batch_size). Below it the gamma + 1 positions' matmuls still hide "
                    "under the weight read and speculation pays; above it (gamma + 1) B is past the knee and the "
                    "rejected drafts' FLOPs cost more than the weight reads speculation saves.",
                    lambda p: _other(_on_or_off(p)), name="inverted: on above the break-even, off below"),
        ],
    ),
    Question(
        "speculative.switch_at_long_context",
        "{target} with a {draft} draft on one {accelerator}, gamma = {gamma}, p = {alpha}, the server running "
        "{batch} sequences, and every sequence now holds {context} tokens of context. Should speculation be 'on' "
        "or 'off' (hybrid model, physical bound)?",
        difficulty="medium",
        kind="choice",
        choices=("on", "off"),
        answer=_on_or_off,
        params={"target": "Llama-3.1-8B", "draft": "Llama-3.2-1B", "accelerator": "H100-SXM5-80GB",
                "context": 2048, "alpha": 0.7, "gamma": 4, "batch": 200},
        variants={"batch": (100, 200, 300), "context": (1024, 2048, 4096), "alpha": (0.6, 0.7, 0.8)},
        mistakes=[
            Mistake("The other way round: at long contexts the KV reads dominate. The verification reads each "
                    "cache once for E tokens, while the draft reads its own cache gamma times; with a small "
                    "draft the saving outweighs the extra FLOPs at every batch beyond S_spec, with a short "
                    "context or a low p it does not (compare speculative.speculative_speedup with 1).",
                    lambda p: _other(_on_or_off(p)), name="inverted: the long-context decision"),
        ],
    ),
    Question(
        "speculative.alpha_from_engine_rate",
        "vLLM reports a draft acceptance rate of {rate} (accepted draft tokens / proposed draft tokens) with "
        "gamma = {gamma}. Under i.i.d. acceptance, what per-token acceptance probability p does that "
        "imply?",
        difficulty="medium",
        answer=lambda p: acceptance_rate_from_tokens_per_step(1 + p["gamma"] * p["rate"], p["gamma"]),
        params={"rate": 0.6, "gamma": 5},
        variants={"rate": [0.4, 0.5, 0.6, 0.7], "gamma": [3, 4, 5]},
        mistakes=[
            Mistake("The engine's rate counts drafts after the first rejection as proposed but not accepted; "
                    "it is (E - 1) / gamma, not p. Solve E(p) = 1 + gamma x rate.",
                    lambda p: p["rate"]),
            Mistake("Tokens per step = accepted drafts + 1 (the verification's own token): solve "
                    "E(p) = 1 + gamma x rate, not gamma x rate.",
                    lambda p: acceptance_rate_from_tokens_per_step(max(1.0, p["gamma"] * p["rate"]),
                                                                   p["gamma"])),
        ],
    ),
]
