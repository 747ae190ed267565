"""Questions of chapter 13, "Capacity planning".

Every expected answer is computed by the library (or by the formula the
chapter derives) from the question's parameters; every known mistake is
computed the same way, so a slip earns its own hint.
"""

from __future__ import annotations

import math

import sympy as sp

from ..capacity import (batch_quantile, cheapest_plan, cost_per_million_tokens, replica_capacity,
                        replicas_needed, workload_statistics)
from ..decode import decode_step_time
from ..pareto import compute_dtype_for
from ..question import Mistake, Question
from ..queueing import mm1_mean_wait, mmc_mean_wait, erlang_c
from ..slo import max_batch_for_tpot

_n, _N, _p, _lam, _L_o = sp.symbols("n N p lambda L_o", positive=True)
_COST_SYMBOLS = {"n": _n, "N": _N, "p": _p, "lam": _lam, "lambda": _lam, "L_o": _L_o}


def _node_to_replica(p, gpus):
    return gpus * p["node_price"] / p["gpus_per_node"]


def _replica_capacity(p, **overrides):
    args = dict(tensor_parallel=p["tp"], weight_dtype=p["dtype"], kv_dtype=p["dtype"], setting=p["setting"])
    args.update(overrides)
    ttft, tpot = args.pop("ttft_slo", p["ttft_slo"]), args.pop("tpot_slo", p["tpot_slo"])
    return replica_capacity(p["model"], p["accelerator"], p["prompt_len"], p["output_len"], ttft_slo=ttft,
                            tpot_slo=tpot, **args)


def _decode_only_rate(p):
    """The mistake of sizing with the decode alone: B_SLO(tau) from the step time, rate = B / ((L_o - 1) T(B))."""
    kw = dict(tensor_parallel=p["tp"], weight_dtype=p["dtype"], kv_dtype=p["dtype"], setting=p["setting"],
              compute_dtype=compute_dtype_for(p["dtype"], p["accelerator"]))
    context = p["prompt_len"] + p["output_len"] // 2
    b = max_batch_for_tpot(p["model"], p["accelerator"], context, tpot_slo=p["tpot_slo"], **kw)
    return b / ((p["output_len"] - 1) * decode_step_time(p["model"], p["accelerator"], b, context, **kw))


def _cheapest(p):
    return cheapest_plan(p["model"], p["rate"], p["prompt_len"], p["output_len"], ttft_slo=p["ttft_slo"],
                         tpot_slo=p["tpot_slo"], prices=p["prices"], setting=p["setting"]).accelerator


_CAPACITY = {"model": "Llama-3.1-70B", "accelerator": "H100-SXM5-80GB", "tp": 4, "dtype": "fp8",
             "prompt_len": 1024, "output_len": 256, "ttft_slo": 0.45, "tpot_slo": 0.040, "setting": "realistic"}

_CONTEXT = {"prompt_lens": [1000, 1000], "output_lens": [100, 500]}


def _naive_context(p, halve=True):
    lp, lo = p["prompt_lens"], p["output_lens"]
    return sum(lp) / len(lp) + sum(lo) / len(lo) / (2 if halve else 1)


def _biased_context_no_half(p):
    steps = [o - 1 for o in p["output_lens"]]
    return sum(s * (a + o) for s, a, o in zip(steps, p["prompt_lens"], p["output_lens"])) / sum(steps)


QUESTIONS = [
    Question(
        "capacity.confirm_action",
        "Your closed-form plan gives a mean TPOT of 36 ms at the planned load per replica, under the 40 ms P99 "
        "target. The simulator, replaying your workload at that load, reports a P99 TPOT of 48 ms. What do you "
        "do? ('ship it', 'raise the batch cap' or 'add a replica')",
        answer=lambda p: "add a replica",
        kind="choice",
        choices=("ship it", "raise the batch cap", "add a replica"),
        difficulty="easy",
        mistakes=[
            Mistake("The closed form's TPOT is a mean over requests; the target is a 99th percentile, and the "
                    "simulator measured it 8 ms over. Shipping breaks the SLO for more than 1 % of users.",
                    lambda p: "ship it", name="inverted: the mean stands for the P99"),
            Mistake("A larger cap lets the batch grow further in a burst, and every step gets longer: TPOT "
                    "rises. Lower the load per replica instead.", lambda p: "raise the batch cap"),
        ],
    ),
    Question(
        "capacity.node_price",
        "A cloud lists an 8 x H200 node at ${node_price:.2f} per node-hour. One replica runs on {tp} of its GPUs "
        "(TP {tp}) and produces {tokens_per_s:,} output tokens/s within its SLOs. What do that replica's output "
        "tokens cost, in dollars per million? ($/M tokens)",
        answer=lambda p: cost_per_million_tokens(_node_to_replica(p, p["tp"]), p["tokens_per_s"]),
        params={"node_price": 32.0, "gpus_per_node": 8, "tp": 2, "tokens_per_s": 4000},
        variants={"node_price": (24.0, 32.0, 40.0), "tp": (2, 4), "tokens_per_s": (3000, 4000, 6000)},
        difficulty="easy",
        mistakes=[
            Mistake("You took the node price as the price of one GPU: divide it by the 8 GPUs of the node first.",
                    lambda p: cost_per_million_tokens(p["tp"] * p["node_price"], p["tokens_per_s"])),
            Mistake("You charged the whole node to one replica; the replica uses only N of its 8 GPUs (the "
                    "others can run more replicas).",
                    lambda p: cost_per_million_tokens(p["node_price"], p["tokens_per_s"])),
            Mistake("You charged one GPU; the replica is split over N (tensor parallelism): pay for all of them.",
                    lambda p: cost_per_million_tokens(_node_to_replica(p, 1), p["tokens_per_s"])),
            Mistake("That is dollars per thousand tokens; the question asks per million (x 1000).",
                    lambda p: cost_per_million_tokens(_node_to_replica(p, p["tp"]), p["tokens_per_s"]) / 1e3),
        ],
    ),
    Question(
        "capacity.replicas",
        "Peak traffic is {rate:g} req/s. One replica serves {capacity} req/s within the SLOs, and you plan each "
        "replica at a utilisation target of {u:g} ({headroom:g} % headroom). How many replicas? (a whole number)",
        answer=lambda p: float(replicas_needed(p["rate"], p["capacity"], p["u"])),
        params={"rate": 40.0, "capacity": 8.44, "u": 0.7},
        variants={"rate": (30.0, 40.0, 60.0), "capacity": (6.5, 8.44, 11.2), "u": (0.6, 0.7, 0.8)},
        derive=lambda p: {**p, "headroom": round((1 - p["u"]) * 100, 3)},
        difficulty="easy",
        mistakes=[
            Mistake("Without the headroom: divide the traffic by u x capacity, not by the capacity.",
                    lambda p: float(math.ceil(p["rate"] / p["capacity"]))),
            Mistake("Replicas come whole: round up (a fraction of a replica cannot be rented).",
                    lambda p: p["rate"] / (p["u"] * p["capacity"])),
            Mistake("You rounded down: those replicas would run above the utilisation target.",
                    lambda p: float(math.floor(p["rate"] / (p["u"] * p["capacity"])))),
            Mistake("You multiplied the traffic by u; the headroom lowers what each replica may take, so divide "
                    "the capacity's share: rate / (u x capacity).",
                    lambda p: float(math.ceil(p["rate"] * p["u"] / p["capacity"]))),
        ],
    ),
    Question(
        "capacity.fleet_cost",
        "A fleet of {replicas} replicas of Llama-3.1-70B, each on {tp} H100s at ${price:.2f} per GPU-hour, serves "
        "{rate:g} req/s; requests average {prompt:g} prompt and {output:g} output tokens, and each replica could "
        "serve {capacity} req/s within the SLOs. What does the fleet pay per million output tokens served? "
        "($/M tokens)",
        answer=lambda p: cost_per_million_tokens(p["replicas"] * p["tp"] * p["price"], p["rate"] * p["output"]),
        params={"replicas": 3, "tp": 4, "price": 3.0, "rate": 40.0, "prompt": 775.0, "output": 300.0,
                "capacity": 20.8},
        variants={"replicas": (3, 4), "tp": (2, 4), "price": (2.5, 3.0, 4.0), "rate": (30.0, 40.0),
                  "output": (200.0, 300.0)},
        mistakes=[
            Mistake("That is one replica's cost against the whole traffic: the fleet pays for every replica.",
                    lambda p: cost_per_million_tokens(p["tp"] * p["price"], p["rate"] * p["output"])),
            Mistake("That charges one GPU per replica; each replica holds N GPUs (its TP degree).",
                    lambda p: cost_per_million_tokens(p["replicas"] * p["price"], p["rate"] * p["output"])),
            Mistake("That is the cost at 100 % of the replicas' capacity; the fleet serves only the traffic, "
                    "and pays for its headroom too.",
                    lambda p: cost_per_million_tokens(p["replicas"] * p["tp"] * p["price"],
                                                      p["replicas"] * p["capacity"] * p["output"])),
            Mistake("You counted prompt tokens as well; the question asks per output token.",
                    lambda p: cost_per_million_tokens(p["replicas"] * p["tp"] * p["price"],
                                                      p["rate"] * (p["prompt"] + p["output"]))),
            Mistake("That is dollars per thousand tokens; the question asks per million.",
                    lambda p: cost_per_million_tokens(p["replicas"] * p["tp"] * p["price"],
                                                      p["rate"] * p["output"]) / 1e3),
        ],
    ),
    Question(
        "capacity.decode_context",
        "Half the requests have {a_p}-token prompts and {a_o}-token answers, the other half {b_p}-token prompts and "
        "{b_o}-token answers. What is the mean context (tokens in the KV cache per sequence) of the decode batch, "
        "averaged over decode steps? (tokens)",
        answer=lambda p: workload_statistics(p["prompt_lens"], p["output_lens"])["decode_context"],
        params={"lens": ((1000, 1000), (100, 500))},
        variants={"lens": (((1000, 1000), (100, 500)), ((800, 800), (200, 600)), ((1500, 500), (100, 400)),
                           ((1000, 2000), (300, 100)))},
        derive=lambda p: {**p, "prompt_lens": list(p["lens"][0]), "output_lens": list(p["lens"][1]),
                          "a_p": p["lens"][0][0], "b_p": p["lens"][0][1], "a_o": p["lens"][1][0],
                          "b_o": p["lens"][1][1]},
        unit="tok",
        mistakes=[
            Mistake("That is E[L_p] + E[L_o] / 2, the average over requests. The batch is an average over "
                    "decode steps, and a longer answer stays in it proportionally longer: weight each request "
                    "by its L_o - 1 steps.", lambda p: _naive_context(p)),
            Mistake("A sequence's context grows from L_p to L_p + L_o during its decode: its mean is "
                    "L_p + L_o / 2, not L_p + L_o.", lambda p: _naive_context(p, halve=False)),
            Mistake("Right weights, but the context averages L_p + L_o / 2 over a sequence's decode, not "
                    "L_p + L_o.", _biased_context_no_half),
        ],
    ),
    Question(
        "capacity.batch_cap",
        "Little's law says a replica's decode batch averages {mean:g} sequences; requests arrive as a Poisson "
        "stream. What batch cap holds the instantaneous batch 99 % of the time? Use the normal approximation "
        "of the Poisson distribution. (sequences)",
        answer=lambda p: batch_quantile(p["mean"], 0.99),
        params={"mean": 100.0},
        variants={"mean": (50.0, 100.0, 200.0, 400.0)},
        mistakes=[
            Mistake("That is the mean: a cap at the mean batch is full half the time, and requests queue.",
                    lambda p: p["mean"]),
            Mistake("The standard deviation of a Poisson count is sqrt(B), not 1: add z sqrt(B).",
                    lambda p: p["mean"] + 2.3263478740408408),
            Mistake("The standard deviation of a Poisson count is sqrt(B), not B.",
                    lambda p: p["mean"] * (1 + 2.3263478740408408)),
            Mistake("z = 1.645 is the one-sided 95th percentile; the 99th is z = 2.326.",
                    lambda p: batch_quantile(p["mean"], 0.95)),
            Mistake("z = 2.576 leaves 0.5 % in each of two tails; a cap has only the upper one: z = 2.326.",
                    lambda p: batch_quantile(p["mean"], 0.995)),
        ],
    ),
    Question(
        "capacity.replica_capacity",
        "Llama-3.1-70B on 4 H100-SXM5-80GB (TP 4), fp8 weights and KV cache (fp8 math), every request "
        "{prompt_len} prompt and {output_len} output tokens, prefill and decode on the same GPUs (prefill first). "
        "Targets: P99 TTFT {ttft_slo:g} s and TPOT {tpot_slo:g} s; the book's realistic setting "
        "(setting=\"realistic\": MFU 0.5, MBU 0.75, 0.4 ms per step, NCCL's all-reduce); no batch cap. "
        "What request rate does one replica serve within the targets, in the chapter's closed-form model? (req/s)",
        answer=lambda p: _replica_capacity(p)["rate"],
        params=_CAPACITY,
        # shapes where the TPOT target holds the batch well below the memory wall (>= 4 % less rate), so
        # that the memory-wall slip stays distinguishable (at 1024/512 tokens and 40 ms it is within 1 %)
        variants={"shape": ((1024, 256, 0.04), (1024, 256, 0.03), (1024, 256, 0.05), (1024, 512, 0.03),
                            (512, 256, 0.03), (2048, 256, 0.04))},
        derive=lambda p: {**p, **({"prompt_len": p["shape"][0], "output_len": p["shape"][1],
                                   "tpot_slo": p["shape"][2]} if "shape" in p else {})},
        unit="req/s",
        difficulty="medium",
        mistakes=[
            Mistake("That is the rate at the memory wall, as if there were no latency targets: the TPOT target "
                    "binds first.", lambda p: _replica_capacity(p, ttft_slo=1e6, tpot_slo=1e6)["rate"]),
            Mistake("You sized the decode alone. Every request's prefill holds the GPUs too (here most of their "
                    "time), and it pauses the decode: rate = B / ((L_o - 1) T(B) + B t_p), TPOT = T / (1 - rho).",
                    _decode_only_rate),
            Mistake("That is output tokens per second; the question asks for requests per second.",
                    lambda p: _replica_capacity(p)["rate"] * p["output_len"]),
        ],
    ),
    Question(
        "capacity.cheapest_accelerator",
        "Llama-3.1-70B must serve {rate:g} req/s of 1024-token prompts with 256-token answers at P99 TTFT "
        "{ttft_slo:g} s and TPOT {tpot_slo:g} s, at the book's realistic setting. A GPU-hour costs $1.30 on an "
        "A100-SXM4-80GB and $3.00 on an H100-SXM5-80GB. Trying TP 1, 2, 4, 8, bf16 or fp8 weights and KV cache, "
        "and a batch cap of 256 at a utilisation target of 0.8, which accelerator gives the lower cost per "
        "million output tokens? ('A100-SXM4-80GB' or 'H100-SXM5-80GB')",
        answer=_cheapest,
        kind="choice",
        choices=("A100-SXM4-80GB", "H100-SXM5-80GB"),
        params={"model": "Llama-3.1-70B", "rate": 40.0, "prompt_len": 1024, "output_len": 256, "ttft_slo": 0.45,
                "tpot_slo": 0.040, "setting": "realistic",
                "prices": {"A100-SXM4-80GB": 1.3, "H100-SXM5-80GB": 3.0}},
        difficulty="medium",
        mistakes=[
            Mistake("The cheapest GPU-hour is not the cheapest token. At a 40 ms TPOT a 70B model needs fast "
                    "memory: the A100 serves so few requests per GPU that it pays for several times more "
                    "GPU-hours per token.", lambda p: "A100-SXM4-80GB",
                    name="inverted: the cheaper GPU-hour gives the cheaper token"),
        ],
    ),
    Question(
        "capacity.cost_formula",
        "A fleet of n replicas of N GPUs each, at p dollars per GPU-hour, serves lambda requests per second "
        "with L_o output tokens each on average. Write its cost in dollars per million output tokens. "
        "(sympy expression in n, N, p, lam, L_o)",
        answer=lambda p: 10**6 * _n * _N * _p / (3600 * _lam * _L_o),
        kind="symbolic",
        symbols=_COST_SYMBOLS,
        mistakes=[
            Mistake("A replica of N GPUs costs N x p per hour: multiply by N.",
                    lambda p: 10**6 * _n * _p / (3600 * _lam * _L_o)),
            Mistake("The fleet has n replicas: multiply by n.", lambda p: 10**6 * _N * _p / (3600 * _lam * _L_o)),
            Mistake("That is per thousand tokens: scale by 10**6, not 10**3.",
                    lambda p: 10**3 * _n * _N * _p / (3600 * _lam * _L_o)),
            Mistake("The price is per hour and the rate per second: divide by the 3600 seconds of an hour.",
                    lambda p: 10**6 * _n * _N * _p / (_lam * _L_o)),
            Mistake("Tokens per hour are 3600 x lambda x L_o: divide by 3600, do not multiply.",
                    lambda p: 3600 * 10**6 * _n * _N * _p / (_lam * _L_o)),
        ],
    ),
]

def _per_replica_rate_as_total(p):
    return mmc_mean_wait(p["replicas"], p["rate"] / p["replicas"], p["service_time"])


QUESTIONS += [
    Question(
        "capacity.pooled_prefill_wait",
        "A fleet of {replicas} replicas receives {rate:g} req/s in total (Poisson); each replica prefills one "
        "prompt at a time, and prefill times are exponential with mean {service_ms:g} ms. A least-loaded router "
        "makes the fleet's prefills behave like one pooled queue over {replicas} servers (M/M/c). What is the "
        "mean wait before a prefill starts? (ms)",
        answer=lambda p: mmc_mean_wait(p["replicas"], p["rate"], p["service_time"]),
        unit="ms",
        params={"replicas": 4, "rate": 40.0, "service_time": 0.040},
        variants={"replicas": (3, 4, 8), "rate_share": (0.4, 0.55, 0.7), "service_time": (0.03, 0.04)},
        derive=lambda p: {**p, "service_ms": round(p["service_time"] * 1e3, 3),
                          **({"rate": round(p["rate_share"] * p["replicas"] / p["service_time"], 6)}
                             if "rate_share" in p else {})},
        mistakes=[
            Mistake("That is random routing: each replica its own M/M/1 queue at lambda / c. Pooling waits "
                    "much less: W_q = C(c, a) s / (c - a), a = lambda s.",
                    lambda p: mm1_mean_wait(p["rate"] / p["replicas"], p["service_time"])),
            Mistake("The M/M/c formula takes the total arrival rate, not one replica's share.",
                    _per_replica_rate_as_total),
            Mistake("That is the mean wait of those who wait, s / (c - a); the mean over all requests "
                    "multiplies it by the probability of waiting, C(c, a).",
                    lambda p: mmc_mean_wait(p["replicas"], p["rate"], p["service_time"])
                    / erlang_c(p["replicas"], p["rate"], p["service_time"])),
            Mistake("That includes the prefill itself (wait + service); the question asks for the wait before "
                    "it starts.",
                    lambda p: mmc_mean_wait(p["replicas"], p["rate"], p["service_time"]) + p["service_time"]),
        ],
        difficulty="medium",
    ),
    Question(
        "capacity.routing_tail",
        "Two fleets of equal size serve the same Poisson traffic of chat requests with prefill-first batching "
        "replicas: one routes each request to a replica at random, the other to the least-loaded replica "
        "(fewest outstanding tokens). Which has the lower P99 TTFT? ('random' or 'least loaded')",
        answer=lambda p: "least loaded",
        kind="choice",
        choices=("random", "least loaded"),
        difficulty="easy",
        mistakes=[
            Mistake("Backwards: random routing makes every replica its own queue, and one can be sent a burst "
                    "of long prompts while another idles. Least loaded sends each request where the work is "
                    "smallest, close to one pooled queue (M/M/c against c x M/M/1): shorter waits at the same "
                    "load.", lambda p: "random", name="inverted: random routing has the shorter tail"),
        ],
    ),
]
