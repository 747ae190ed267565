"""Interview questions: the follow-ups an interviewer asks, and the classic pitfalls.

These draw on every chapter. Numeric and symbolic ones are checked like the
chapters' questions (answers computed by the library, known mistakes with
hints); conceptual ones carry a model answer and the key points a strong answer
names (regular expressions found in free text), and the wrong claims that earn
a hint. Each question's ``chapter`` names the chapter it draws on, so the drill
(``python -m servingmath.drill --chapter decode``) finds it there as well as
under ``interview``.

Every question is asked in ``solutions/17_interview_rehearsal.ipynb``; the
chapter "Interview rehearsal" works through them with the numbers.

Writing a wrong claim
---------------------
A wrong claim's pattern is built by :func:`_claim`: its first alternative is a
plain phrase (so the pattern finds itself, which the test suite relies on),
and the whole is skipped when a negation comes right before it ("not
exponentially", "isn't compute-bound").
"""

from __future__ import annotations

import re

import sympy as sp

from ..question import Mistake, Question, Template
from ..decode import decode_step_time, knee_batch_size
from ..deployment import Deployment
from ..hardware import get_accelerator
from ..memory import max_batch_size, memory_available_for_kv
from ..models import get_model, kv_bytes_per_token, matmul_parameter_count, parameter_count
from ..moe import weight_bytes_read
from ..parallelism import tensor_parallel_decode_time, tp_knee_batch_size
from ..prefill import prefill_time
from ..queueing import md1_mean_wait, mm1_mean_wait, prefill_mean_ttft
from ..roofline import critical_batch_size, ridge_point
from ..slo import READING_WPM, WORDS_PER_TOKEN, tpot_for_reading_speed
from ..speculative import LLAMA_3_2_1B, break_even_batch_size
from ..symbolic import B, L_o, Q_w, S, W, k_tok, rho
from ..units import KiB

__all__ = ["QUESTIONS", "REQUIRED"]

H100, H200, A100 = "H100-SXM5-80GB", "H200-SXM-141GB", "A100-SXM4-80GB"
M8, M70 = "Llama-3.1-8B", "Llama-3.1-70B"

_NEGATIONS = ("not ", "n't ", "never ", "no ")


def _claim(phrase: str, *patterns: str) -> str:
    """A wrong-claim pattern: ``phrase`` (plain words) or any of ``patterns``, not after a negation."""
    if not re.fullmatch(phrase, phrase, re.I):
        raise ValueError(f"phrase must be plain words (it has to match its own text), got {phrase!r}")
    guard = "".join(f"(?<!{n})" for n in _NEGATIONS)
    return guard + "(?:" + "|".join((phrase, *patterns)) + ")"


#: Between a subject and its direction in an inverted claim: up to five words of the same clause, none of
#: them a direction word itself ("per-GPU throughput falls as N grows" is not "throughput grows").
_DIRECTION = (r"(?:rise|rises|rising|grow|grows|growing|fall|falls|falling|drop|drops|shrink|shrinks|increase|"
              r"increases|decrease|decreases|climbs|lower|lowers|raise|raises|goes|stays|flattens)\b")
_GAP = rf",?\s+(?:(?!{_DIRECTION})[^\s.;:!?]+\s+){{0,5}}?"


def _inverted(name: str, hint: str, phrase: str, *patterns: str) -> Mistake:
    """A key point stated the wrong way round ("helps at large batch", "TPOT rises with N"): a wrong
    claim whose hint says which way it goes. The checker skips it where the clause negates it."""
    return Mistake(hint, lambda p: _claim(phrase, *patterns), name=f"inverted: {name}")


# ---------------------------------------------------------------- numbers the answers quote
def _knee_tp8(p, **options):
    return float(tp_knee_batch_size(p["model"], p["accelerator"], 0, tensor_parallel=p["tp"], **options))


def _tp_time(p, batch):
    return float(tensor_parallel_decode_time(p["model"], p["accelerator"], batch, p["context"], tensor_parallel=p["tp"]))


def _ridge_h100():
    return ridge_point(H100)


# ---------------------------------------------------------------- the four follow-ups
_WHY_BATCHING = Question(
    "interview.why_batching_raises_throughput",
    "Why does batching decode requests raise throughput, and where does the gain stop?",
    answer=Template(
        "At small batch a decode step is memory-bandwidth-bound: it must read every weight but the "
        "input-embedding table once (about {read_gb:.0f} GB for Llama-3.1-8B in bf16) to produce one token "
        "per sequence, and the weights are read once per step and shared by every sequence in the batch. "
        "Adding a sequence adds only its KV-cache read and a little math, so the step time barely grows "
        "while the tokens per step grow with B: throughput B / T(B) rises almost linearly. "
        "The gain stops at the knee B*, where the weight matmuls turn compute-bound (in bf16 the ridge "
        "point, {ridge:.0f} FLOP/byte on an H100, so B* is about {knee:.0f} at the physical bound and "
        "{knee_real:.0f} at realistic efficiencies): beyond it T(B) grows in proportion to B and throughput "
        "flattens (exactly flat only in the hybrid model at the bound; measured throughput keeps rising "
        "slowly). Memory for the KV cache or a TPOT target usually stops the batch earlier.",
        facts=lambda p: {"read_gb": weight_bytes_read(M8, 1) / 1e9, "ridge": _ridge_h100(),
                         "knee": knee_batch_size(M8, H100, 0),
                         "knee_real": knee_batch_size(M8, H100, 0, setting="realistic")}),
    kind="conceptual",
    key_points=(
        ("the weights are read once per step and shared by the whole batch",
         r"(weights?|parameters?)[^.]*\b(once|shared?|amorti[sz]|reus|same)|(once|shared?|amorti[sz]|reus)[^.]*\b(weights?|parameters?)"),
        ("small-batch decode is bound by memory bandwidth",
         r"(memory|bandwidth|HBM)[- ]bound|bound by (the )?(memory|bandwidth|HBM)|(limited|dominated) by (the )?(memory|bandwidth|HBM|weight)|bandwidth[- ]limited"),
        ("so the step time barely grows while tokens per step grow with B (throughput B / T(B))",
         r"\bB\s*/\s*T|tokens? per step|(step time|TPOT|latency|step)[^.]*(barely|hardly|almost|nearly|roughly|little|slowly|flat|constant|same)|(flat|almost constant|nearly constant)"),
        ("the gain stops at the knee, where the step turns compute-bound",
         r"knee|B\*|ridge|compute[- ]bound|saturat|plateau|ceiling|flatten"),
    ),
    mistakes=[
        _inverted("throughput falls or the step shrinks with the batch",
                  "Backwards: at small batch each extra sequence adds almost nothing to the step time, so "
                  "tokens per step grow with B and throughput rises until the knee.",
                  "throughput falls with the batch",
                  rf"throughput{_GAP}(?:falls|drops|decreases|shrinks|goes down)",
                  rf"(?:step time|TPOT|T\(B\)){_GAP}(?:shrinks|falls|drops|decreases)",
                  rf"tokens per step{_GAP}(?:shrink|fall|drop|decrease)"),
        _inverted("weights read per sequence",
                  "The weights are read once per step for the whole batch, not once per sequence: that "
                  "sharing is the whole gain.",
                  "weights are read for every sequence",
                  r"weights? (?:are |is )?(?:read|streamed|loaded) (?:many times|repeatedly|once per sequence|"
                  r"for (?:each|every) sequence)"),
        _inverted("the knee turns it memory-bound",
                  "Past the knee the step turns compute-bound (the matmuls outgrow the weight read), and the "
                  "gain stops there.",
                  "the gain continues past the knee",
                  rf"(?:knee|B\*){_GAP}(?:turns?|becomes?|goes) (?:memory|bandwidth)[- ]bound",
                  r"gain (?:continues|keeps going|keeps growing)",
                  rf"(?:small|low)[- ]batch{_GAP}compute[- ]bound"),
        Mistake("Batching does not lower anyone's latency: each step gets a little longer as B grows (TPOT "
                "rises). It raises throughput because the weight read is shared.",
                lambda p: _claim("batching reduces latency",
                                 r"(?:reduces|lowers|cuts|decreases) (?:the )?(?:per-token )?(?:latency|TPOT)")),
        Mistake("Decode at small batch is not compute-bound: its arithmetic intensity is about B FLOPs per byte, "
                "far below the ridge point. The idle resource is the tensor cores, the bottleneck is HBM.",
                lambda p: _claim("decode is compute-bound",
                                 r"decod(?:e|ing) (?:is|are) (?:usually |mostly |always )?compute[- ]bound")),
    ],
    chapter="decode", difficulty="easy",
)

_GOODPUT = Question(
    "interview.what_is_goodput",
    "What is goodput, and why do serving papers report it rather than throughput?",
    answer=Template(
        "Goodput counts only the work that meets its latency SLOs: the requests (or their tokens) whose "
        "TTFT and TPOT are both within target. vLLM's benchmark reports it as good requests per second at a "
        "given load; DistServe defines it as the highest request rate at which at least 90 % of requests "
        "meet both SLOs, often per GPU. Raw throughput ignores latency: a server can raise tokens per second "
        "by batching more while breaking the SLOs, so its throughput goes up and its goodput goes down."),
    kind="conceptual",
    key_points=(
        ("only requests (or tokens) that meet their latency SLOs count",
         r"(meet|meets|meeting|within|satisf|under|below)[^.]*(SLO|target|deadline|latency)|SLO[- ]?(meeting|compliant|attain)"),
        ("every SLO at once: TTFT and TPOT",
         r"TTFT[^.]*(TPOT|ITL|inter-token)|(TPOT|ITL|inter-token)[^.]*TTFT|(every|all|both) (the |its |their )?(SLOs|targets|latency targets)"),
        ("a rate: good requests per second, or the highest rate that keeps e.g. 90 % within SLO",
         r"per second|req/s|/s\b|rate|per GPU"),
        ("throughput alone ignores latency: it can rise while the SLOs break",
         r"(throughput|tokens/s|tokens per second)[^.]*(ignor|hide|regardless|even (if|when|though)|no matter|break|violat|miss|sacrific|expense|cost of|while)"),
    ),
    mistakes=[
        _inverted("counts requests that miss their SLOs",
                  "Goodput counts only what meets its SLOs: a request beyond its TTFT or TPOT target does not "
                  "count, however fast it finished otherwise.",
                  "counts every request",
                  rf"(?:are|is) (?:both )?(?:beyond|above|over|outside) (?:the |their |its )?(?:target|SLO)",
                  r"including (?:those|the requests|requests) that miss",
                  r"(?:lowest|smallest|minimum) (?:request )?rate",
                  r"at most \d+ ?%"),
        _inverted("goodput rises as the SLOs break",
                  "Backwards: batching more raises raw throughput while the SLOs break, so throughput goes up "
                  "and goodput goes down.",
                  "goodput goes up while the SLOs break",
                  rf"throughput (?:goes down|falls|drops|decreases){_GAP}goodput (?:goes up|rises|increases)",
                  rf"goodput{_GAP}(?:ignores|regardless of) (?:the )?(?:latency|SLO)"),
        Mistake("In serving, goodput is not 'the requests that did not fail' (the networking sense of useful "
                "bytes): a request that completes but misses its TTFT or TPOT target does not count.",
                lambda p: _claim("requests that did not fail",
                                 r"(?:successful|non-error|error-free|completed) requests (?:per second|only)",
                                 r"(?:excluding|minus|without) (?:the )?(?:failed|errored|error) requests")),
        Mistake("An average throughput is not goodput: goodput filters requests by their latency SLOs.",
                lambda p: _claim("average throughput", r"mean throughput")),
    ],
    chapter="slo", difficulty="easy",
)

_SYSTEM_8X = {"model": M70, "accelerator": H100, "tp": 8}

_B_STAR = Question(
    "interview.b_star_8xh100",
    "With the roofline, find B* for {model} in bf16 served with tensor parallelism {tp} on one "
    "{tp} x {accelerator} node: the batch at which the decode step's weight matmuls turn compute-bound "
    "(dense peak specs, MFU = MBU = 1). (sequences; a real number)",
    answer=_knee_tp8,
    params=dict(_SYSTEM_8X),
    variants={"model": (M70, "Qwen2.5-72B"), "accelerator": (H100, H200), "tp": (4, 8)},
    # the ridge point itself is an accepted roofline answer: the gathered embedding rows move B* by 2 in 10^4
    mistakes=[
        Mistake("A step does not read the input-embedding table: it gathers its B rows. Charging the whole "
                "table to the weight read puts B* a few percent above the ridge point.",
                lambda p: _knee_tp8(p) * parameter_count(p["model"]) / matmul_parameter_count(p["model"])),
        Mistake("You divided by the N GPUs. Tensor parallelism splits both the weight bytes and the FLOPs "
                "N ways, so N cancels: B* of the node equals B* of one GPU.", lambda p: _knee_tp8(p) / p["tp"]),
        Mistake("You multiplied by the N GPUs (the node's FLOP/s over one GPU's bandwidth, or the reverse "
                "reasoning). Each GPU has its own HBM: bytes and FLOPs both split N ways, N cancels.",
                lambda p: _knee_tp8(p) * p["tp"]),
        Mistake("Twice too large: that is the 2:4-sparse (or fp8) peak. With bf16 weights and math use the "
                "dense bf16 peak.", lambda p: 2 * _knee_tp8(p)),
    ],
    chapter="parallelism", difficulty="medium",
)

_B_STAR_METHOD = Question(
    "interview.b_star_method",
    "Explain how you find B* with the roofline for an 8 x H100 node serving a 70B model, and what it "
    "means for the batch you run.",
    answer=Template(
        "Start from the ridge point: the H100's dense bf16 peak over its bandwidth, {peak_tflops:.1f} TFLOP/s / "
        "{bandwidth_tbs:.2f} TB/s = {ridge:.0f} FLOP per byte. A decode step's weight matmuls do 2 FLOPs per "
        "weight per sequence and read each 2-byte weight once, so their arithmetic intensity is about B FLOPs "
        "per byte: they turn compute-bound when B reaches the ridge, B* = R b_w / 2, about {knee:.0f} for "
        "Llama-3.1-70B in bf16. Tensor parallelism 8 divides both the weight bytes and the FLOPs by 8, so N "
        "cancels: the node's B* equals one GPU's (the all-reduces add time but use neither HBM nor the tensor "
        "cores). Realistic efficiencies move it by MFU / MBU (0.5 / 0.75: about {knee_real:.0f}). With the "
        "KV-cache reads, the memory capacity and the TPOT target, run min(B_SLO, B*, B_mem): below B* "
        "throughput is still rising almost for free, above it the batch mostly adds latency.",
        facts=lambda p: {"peak_tflops": get_accelerator(H100).peak_flops("bf16") / 1e12,
                         "bandwidth_tbs": get_accelerator(H100).memory_bandwidth / 1e12,
                         "ridge": _ridge_h100(), "knee": _knee_tp8(_SYSTEM_8X),
                         "knee_real": _knee_tp8(_SYSTEM_8X, setting="realistic")}),
    kind="conceptual",
    key_points=(
        ("the ridge point: peak FLOP/s over bandwidth, about 295 FLOP/byte on an H100",
         r"ridge|F\s*/\s*W|FLOP/s\s*/\s*(bandwidth|B/s|TB/s)|FLOPs? per byte|FLOP/B|\b29[0-9]\b|\b300\b"),
        ("decode's matmul intensity grows with the batch: about B FLOPs per byte in bf16",
         r"intensity[^.]*\bB\b|\bB FLOPs? per byte|(grows|rises|scales|increases|linear|proportional)[^.]*(with|in|to) (the )?batch|(2|two) FLOPs? per (weight|parameter)"),
        ("tensor parallelism divides bytes and FLOPs alike, so N cancels",
         r"cancel|independent of (N|the number of GPUs|TP|tensor)|(TP|tensor[- ]parallel\w*|8 GPUs|eight GPUs|\bN\b)[^.]*(divid|same|does not change|doesn't change|unchanged|split)"),
        ("realistic efficiencies, the KV cache, memory and the TPOT target move the operating point",
         r"MFU|MBU|efficien|realistic|KV|memory (capacity|limit)|TPOT|SLO"),
    ),
    mistakes=[
        _inverted("memory-bound past the ridge",
                  "At the ridge the matmuls turn compute-bound, not memory-bound: their intensity, about B FLOPs "
                  "per byte, grows with the batch.",
                  "turns memory-bound at the ridge",
                  r"(?:turns?|becomes?) (?:memory|bandwidth)[- ]bound when (?:B|the batch) (?:reaches|passes|exceeds)",
                  rf"(?:intensity|FLOPs? per byte){_GAP}(?:falls|drops|decreases|shrinks) (?:with|as) (?:the )?batch",
                  rf"above B\*{_GAP}throughput{_GAP}ris",
                  rf"below (?:B\*|the knee){_GAP}(?:only adds latency|adds only latency|mostly adds latency)"),
        _inverted("B star grows with N",
                  "N cancels: each GPU reads 1/N of the weights and does 1/N of the FLOPs, so B* does not change "
                  "with the TP degree.",
                  "B star grows with N",
                  r"N (?:multiplies|scales it|does not cancel)",
                  rf"B\*{_GAP}(?:grows|scales|rises|increases|multiplies) with (?:N|the number of GPUs|the TP degree|tensor)"),
        Mistake("B* does not grow with the number of GPUs: each GPU reads 1/N of the weights and does 1/N of "
                "the FLOPs, so N cancels.",
                lambda p: _claim("8 times larger", r"eight times larger",
                                 r"B\* (?:is|grows|becomes) (?:8|eight) times")),
    ],
    chapter="rooflines", difficulty="medium",
)

_BACKGROUND = Question(
    "interview.low_tpot_with_background_work",
    "You serve an interactive chat product (TPOT target 50 ms) and want to fill the spare GPU capacity "
    "with background throughput work (offline summarisation) on the same fleet. How do you keep TPOT low "
    "for the chat users?",
    answer=Template(
        "Cap every decode step at the batch (or token budget) that the TPOT target allows, B_SLO, instead of "
        "the largest batch that fits in memory: past that point each extra sequence slows every chat user. "
        "Give interactive requests priority and let the background jobs take only the leftover capacity "
        "(a lower class, preempted or throttled first when chat load rises). Chunk long prefills so that "
        "a background prompt of many thousand tokens cannot stall the decode steps, with the chunk size "
        "bounded by the step time the target leaves. If interference remains, isolate: separate replicas "
        "or pools for the two classes, or prefill/decode disaggregation. Measure P99 TPOT and goodput, "
        "not the mean."),
    kind="conceptual",
    key_points=(
        ("cap the batch or token budget per step at what the TPOT target allows (B_SLO)",
         r"B_?SLO|\bcap|\blimit|budget|max_num_(batched_tokens|seqs)|bound the batch"),
        ("interactive requests first; background work takes only leftover capacity, preempted or throttled",
         r"priorit|preempt|leftover|spare|idle|best[- ]effort|lower class|throttl"),
        ("chunked prefill, so a long background prompt cannot stall the decode steps",
         r"chunk"),
        ("isolate when needed (separate pools, disaggregation) and watch P99 TPOT or goodput",
         r"separate|dedicated|isolat|disaggregat|own (replicas|GPUs|pool)|\bpools?\b|P99|percentile|goodput|monitor|measure"),
    ),
    mistakes=[
        _inverted("background work first",
                  "The other way round: chat requests go first; background work takes only the leftover capacity "
                  "and is preempted or throttled first.",
                  "give the background work priority",
                  r"(?:background|offline|batch) (?:jobs?|work|requests?)[^.;:!?]{0,80}?(?:higher|top|first) "
                  r"(?:class|priority)",
                  r"(?:preempt|throttle) (?:the )?(?:chat|interactive)",
                  r"(?:background|offline) (?:jobs?|work|requests?) (?:go|goes|run|runs) first"),
        _inverted("watch the mean",
                  "A mean hides the users who suffer: watch P99 TPOT (or goodput), not the mean.",
                  "watch the mean TPOT",
                  r"(?:watch|measure|track|monitor) (?:only )?(?:the )?(?:mean|average)\b(?! is)"),
        Mistake("The largest batch that fits maximises tokens per second, but every sequence in it waits for "
                "the same longer step: TPOT is set by the batch. Cap the batch at B_SLO.",
                lambda p: _claim("maximise the batch", r"maximi[sz]e the batch( size)?",
                                 r"(?:use|run|fill) (?:all|every bit of) (?:the )?(?:KV|memory)")),
    ],
    chapter="scheduling", difficulty="hard",
)

# ---------------------------------------------------------------- the pitfalls
_UNCONSTRAINED = Question(
    "interview.pitfall_unconstrained_throughput",
    "A colleague proposes running the largest batch that fits in memory, because it maximises tokens per "
    "second. What is wrong with optimising unconstrained throughput?",
    answer=Template(
        "TPOT grows with the batch, so the batch that maximises throughput usually breaks the TPOT target "
        "(and, with prefills sharing the GPU, the TTFT target through queueing). Past the knee the extra "
        "batch buys almost no throughput anyway: the step is compute-bound and tokens per second flatten. "
        "Optimise goodput instead: run the largest batch that meets every SLO, the SLO edge B_SLO, or the "
        "knee if that comes first."),
    kind="conceptual",
    key_points=(
        ("the latency targets: TPOT (and TTFT) grow with the batch and break the SLO",
         r"(TPOT|TTFT|latency|per[- ]token)[^.]*(SLO|target|grow|rise|increas|break|violat|miss|exceed|longer)|(SLO|target)[^.]*(TPOT|TTFT|latency)"),
        ("past the knee the extra batch adds little throughput",
         r"knee|saturat|plateau|flat|diminishing|barely|little (more|extra)|ceiling|compute[- ]bound"),
        ("optimise goodput: the largest batch that meets every SLO",
         r"goodput|B_?SLO|SLO edge|largest batch (that|which) meets|meets? (the|every|all|its)[^.]*(SLO|target)|(under|within) (the|an|its|every) (SLO|target)|subject to"),
    ),
    mistakes=[
        _inverted("TPOT falls with the batch",
                  "TPOT grows with the batch: every sequence waits for the whole, longer step.",
                  "TPOT shrinks with the batch",
                  rf"(?:TPOT|latency|step time){_GAP}(?:shrinks|falls|drops|decreases|goes down) (?:with|as) "
                  rf"(?:the )?batch",
                  rf"past the knee{_GAP}(?:memory|bandwidth)[- ]bound",
                  rf"(?:throughput|tokens per second) (?:keeps|continues to) (?:grow|rise){_GAP}past the knee"),
        Mistake("Latency does depend on the batch: every sequence waits for the whole step, and the step "
                "grows with B (slowly below the knee, in proportion beyond it).",
                lambda p: _claim("latency does not change", r"latency (?:is|stays) (?:the same|constant)",
                                 r"independent of (?:the )?batch")),
    ],
    chapter="slo", difficulty="medium",
)

_SATURATES = Question(
    "interview.pitfall_decode_saturates",
    "{model} (bf16) with tensor parallelism {tp} on {tp} x {accelerator}, {context} tokens of context per "
    "sequence, physical bound (hybrid model). By what factor does decode throughput grow when the batch "
    "goes from {small} to {large} sequences (both fit in memory)? (a ratio)",
    answer=lambda p: (p["large"] / _tp_time(p, p["large"])) / (p["small"] / _tp_time(p, p["small"])),
    params={**_SYSTEM_8X, "context": 2048, "batches": (128, 512)},
    variants={"context": (1024, 2048), "batches": ((128, 512), (64, 512), (128, 600))},
    derive=lambda p: {**p, "small": p["batches"][0], "large": p["batches"][1]},
    mistakes=[
        Mistake("Throughput is not linear in the batch: past the knee (a few hundred sequences here) the step is "
                "compute-bound, T(B) grows in proportion to B, and B / T(B) flattens.",
                lambda p: p["large"] / p["small"]),
        Mistake("That is how much TPOT grows. Throughput is B / T(B), and the batch grows too.",
                lambda p: _tp_time(p, p["large"]) / _tp_time(p, p["small"])),
    ],
    chapter="decode", difficulty="medium",
)

_LINEAR = Question(
    "interview.pitfall_latency_linear_in_batch",
    "{model} (bf16) on one {accelerator}, {context} tokens of context per sequence, physical bound "
    "(hybrid model). By what factor is the TPOT at batch {batch} larger than at batch 1? (a ratio)",
    answer=lambda p: (decode_step_time(p["model"], p["accelerator"], p["batch"], p["context"])
                      / decode_step_time(p["model"], p["accelerator"], 1, p["context"])),
    params={"model": M8, "accelerator": H100, "batch": 32, "context": 1024},
    variants={"model": (M8, "Mistral-7B", "Qwen2.5-7B"), "accelerator": (H100, H200), "batch": (16, 32, 64),
              "context": (512, 1024, 2048)},
    mistakes=[
        Mistake("Latency does not grow in proportion to the batch: below the knee TPOT is T_w + B c, a straight "
                "line whose intercept, the weight read all the sequences share, dominates.",
                lambda p: float(p["batch"])),
        Mistake("TPOT does grow a little: each sequence adds its own KV-cache read (and its share of the "
                "matmuls).", lambda p: 1.0),
    ],
    chapter="decode", difficulty="medium",
)

_QUEUE = {"model": M8, "accelerator": H100, "prompt": 4096, "mfu": 0.6, "rate": 7.0}


def _t_prefill(p):
    return float(prefill_time(p["model"], p["accelerator"], p["prompt"], mfu=p["mfu"]))


_IGNORE_QUEUEING = Question(
    "interview.pitfall_ignoring_queueing_ttft",
    "Prompts of {prompt} tokens to {model} (bf16) on one {accelerator} are prefilled one at a time at "
    "MFU = {mfu:g} (otherwise physical bound); requests arrive as a Poisson stream at {rate:g} req/s. What is "
    "the mean TTFT (M/D/1 queue: every prefill takes the same time)? (ms)",
    answer=lambda p: float(prefill_mean_ttft(p["rate"], p["model"], p["accelerator"], p["prompt"], mfu=p["mfu"])),
    unit="ms",
    params={**_QUEUE, "load": (4096, 7.0)},
    variants={"load": ((4096, 7.0), (4096, 5.0), (2048, 12.0), (2048, 15.0)), "mfu": (0.5, 0.6)},
    derive=lambda p: {**p, "prompt": p["load"][0], "rate": p["load"][1]},
    mistakes=[
        Mistake("That is the prefill alone. TTFT also holds the wait behind the prefills ahead in the queue: "
                "at this load the server is busy most of the time.", _t_prefill),
        Mistake("That is the M/M/1 wait (exponential service). Equal prompts take equal time: M/D/1 waits "
                "half as long.", lambda p: _t_prefill(p) + float(mm1_mean_wait(p["rate"], _t_prefill(p)))),
        Mistake("That is only the wait in the queue: add the request's own prefill.",
                lambda p: float(md1_mean_wait(p["rate"], _t_prefill(p)))),
    ],
    chapter="queueing", difficulty="medium",
)

_SLUGGISH = Question(
    "interview.pitfall_tpot_80ms_sluggish",
    "Is a TPOT of {tpot_ms:g} ms sluggish? An adult reads English non-fiction at about 238 words per minute, and "
    "English text averages 0.75 words per token. How many times faster than reading speed does text "
    "arrive at {tpot_ms:g} ms per token? (a ratio)",
    answer=lambda p: float(tpot_for_reading_speed(READING_WPM, WORDS_PER_TOKEN)) / p["tpot"],
    params={"tpot": 0.080},
    variants={"tpot": (0.05, 0.08, 0.1, 0.12)},
    derive=lambda p: {**p, "tpot_ms": round(p["tpot"] * 1e3, 3)},
    mistakes=[
        Mistake("You compared tokens per minute with words per minute: a token is only three quarters of a "
                "word, so there are fewer words than tokens per minute.", lambda p: (60 / p["tpot"]) / READING_WPM),
        Mistake("Upside down: that is how many times slower than reading it would be. Faster means "
                "reading time per token over TPOT.", lambda p: p["tpot"] / float(tpot_for_reading_speed())),
    ],
    chapter="slo", difficulty="easy",
)

# ---------------------------------------------------------------- more numbers
_RIDGE_H200 = Question(
    "interview.ridge_h200",
    "Ridge point of the {gpu} for dense bf16 math, in FLOP/byte.",
    answer=lambda p: ridge_point(p["accelerator"]),
    unit="FLOP/B",
    params={"accelerator": H200},
    variants={"accelerator": (H200, "GH200-144GB", "H100-NVL-94GB")},
    derive=lambda p: {**p, "gpu": {H200: "H200 SXM (141 GB)", "GH200-144GB": "GH200 (144 GB)",
                                   "H100-NVL-94GB": "H100 NVL (94 GB)"}[p["accelerator"]]},
    mistakes=[
        Mistake("That is the H100 SXM's ridge. This GPU has GH100 compute too but more bandwidth than the "
                "H100 SXM's 3.35 TB/s: more bandwidth, lower ridge.", lambda p: ridge_point(H100)),
        Mistake("Twice too large: that is the 2:4-sparse figure vendors headline. Use the dense peak.",
                lambda p: 2 * ridge_point(p["accelerator"])),
    ],
    chapter="rooflines", difficulty="easy",
)

_RIDGE_A100 = Question(
    "interview.ridge_a100",
    "Ridge point of the {accelerator} for dense bf16 math, in FLOP/byte.",
    answer=lambda p: ridge_point(p["accelerator"]),
    unit="FLOP/B",
    params={"accelerator": A100},
    variants={"accelerator": (A100, "A100-PCIe-80GB")},
    mistakes=[
        Mistake("That is the A100-40GB, whose HBM2 gives 1.555 TB/s. The 80 GB parts have HBM2e, about 2 TB/s.",
                lambda p: ridge_point("A100-SXM4-40GB")),
        Mistake("Twice too large: 624 TFLOP/s is the 2:4-sparse bf16 figure. Dense is 312.",
                lambda p: 2 * ridge_point(p["accelerator"])),
    ],
    chapter="rooflines", difficulty="easy",
)

_H200_VS_H100 = Question(
    "interview.h200_vs_h100_decode",
    "{model} (bf16) decodes at batch 1 with {context} tokens of context. How many times faster is one "
    "decode step on an H200 SXM than on an H100 SXM (physical bound)? (a ratio)",
    answer=lambda p: (decode_step_time(p["model"], H100, 1, p["context"])
                      / decode_step_time(p["model"], H200, 1, p["context"])),
    params={"model": M8, "context": 1024},
    variants={"model": (M8, "Mistral-7B", "Qwen2.5-7B"), "context": (512, 1024, 4096)},
    mistakes=[
        Mistake("The two have the same compute, but decode at batch 1 is bandwidth-bound: the ratio of the "
                "bandwidths (4.8 / 3.35 TB/s) sets the speed.", lambda p: 1.0),
        Mistake("That is the ratio of memory capacities (141 / 80 GB). Capacity sets the batch that fits, "
                "bandwidth sets the step time.",
                lambda p: get_accelerator(H200).memory_bytes / get_accelerator(H100).memory_bytes),
    ],
    chapter="decode", difficulty="easy",
)

_KV_70B = Question(
    "interview.kv_per_token_70b",
    "How much KV cache does one token of {model} add in bf16? (KiB)",
    answer=lambda p: kv_bytes_per_token(p["model"], "bf16"),
    unit="KiB",
    params={"model": M70},
    variants={"model": (M70, "Qwen2.5-72B", "Llama-3.1-405B", M8)},
    mistakes=[
        Mistake("You used the query heads: the model has grouped-query attention with fewer KV heads.",
                lambda p: kv_bytes_per_token(p["model"], "bf16") * get_model(p["model"]).n_heads
                / get_model(p["model"]).n_kv_heads),
        Mistake("You counted K or V, not both: the cache holds a key and a value per head and layer.",
                lambda p: kv_bytes_per_token(p["model"], "bf16") / 2),
    ],
    chapter="memory", difficulty="easy",
)

_FLOOR_TP8 = Question(
    "interview.decode_floor_70b_tp8",
    "The fastest a decode step of {model} (bf16) can be on {tp} x {accelerator} with tensor "
    "parallelism {tp}: batch 1, empty cache, physical bound (the all-reduces without latency, their bytes "
    "at the full NVLink bandwidth). (ms)",
    answer=lambda p: float(tensor_parallel_decode_time(p["model"], p["accelerator"], 1, 0, tensor_parallel=p["tp"])),
    unit="ms",
    params=dict(_SYSTEM_8X),
    variants={"model": (M70, "Qwen2.5-72B"), "accelerator": (H100, H200), "tp": (4, 8)},
    mistakes=[
        Mistake("That is one GPU reading all the weights. With TP N each GPU reads 1/N of them, in "
                "parallel.",
                lambda p: float(tensor_parallel_decode_time(p["model"], p["accelerator"], 1, 0, tensor_parallel=p["tp"])) * p["tp"]),
    ],
    chapter="parallelism", difficulty="medium",
)


def _kv_budget_tp8(p):
    return float(memory_available_for_kv(p["model"], p["accelerator"], tensor_parallel=p["tp"]))


_MAX_BATCH = Question(
    "interview.max_batch_70b_tp8",
    "How many sequences of {context} tokens fit next to {model} (bf16 weights and KV cache) on "
    "{tp} x {accelerator} with tensor parallelism {tp}, with vLLM's gpu_memory_utilization = 0.9 (catalog 80 GB "
    "per GPU, no other reserve)? (sequences, a whole number)",
    answer=lambda p: float(max_batch_size(p["model"], p["accelerator"], p["context"], tensor_parallel=p["tp"])),
    rel_tol=1e-9,
    params={**_SYSTEM_8X, "context": 8192},
    variants={"model": (M70, "Qwen2.5-72B"), "tp": (4, 8), "context": (4096, 8192, 16384)},
    mistakes=[
        Mistake("You used all the memory: vLLM lets the server take gpu_memory_utilization = 0.9 of it.",
                lambda p: float(max_batch_size(p["model"], p["accelerator"], p["context"], tensor_parallel=p["tp"],
                                               gpu_memory_utilization=1.0))),
        Mistake("With TP N each GPU holds 1/N of the KV heads, so each GPU stores only 1/N of every "
                "token's KV cache.",
                lambda p: float(int(_kv_budget_tp8(p) // (p["context"] * kv_bytes_per_token(p["model"]))))),
    ],
    chapter="memory", difficulty="medium",
)


def _batch1(option):
    kwargs = {"H200": dict(accelerator=H200), "fp8 math": dict(accelerator=H100, compute_dtype="fp8"),
              "int4 weights": dict(accelerator=H100, weight_dtype="int4")}[option]
    accelerator = kwargs.pop("accelerator")
    return decode_step_time(M8, accelerator, 1, 1024, **kwargs)


_LOWEST = Question(
    "interview.lowest_batch1_tpot",
    "Llama-3.1-8B decodes at batch 1 (1024 tokens of context) on an H100 SXM in bf16. Which one change "
    "lowers the TPOT the most: 'H200' (same compute, 4.8 TB/s), 'fp8 math' (twice the FLOP/s, bf16 "
    "weights) or 'int4 weights' (weight-only quantisation, bf16 math)?",
    answer=lambda p: min(("H200", "fp8 math", "int4 weights"), key=_batch1),
    kind="choice",
    choices=("H200", "fp8 math", "int4 weights"),
    mistakes=[
        Mistake("Batch-1 decode is bandwidth-bound: twice the FLOP/s change nothing. Fewer bytes, or more "
                "bandwidth, do.", lambda p: "fp8 math"),
        Mistake("The H200 gives 1.43x the bandwidth; int4 weights cut the bytes of the weight read 4x.",
                lambda p: "H200"),
    ],
    chapter="quantization", difficulty="easy",
)

# ---------------------------------------------------------------- symbolic
_s = sp.Symbol("s", positive=True)        # mean service time
_T = sp.Symbol("T", positive=True)        # TPOT
_lam = sp.Symbol("lam", positive=True)    # arrival rate (named as the prompt writes it; the book's lambda)

_TPOT_MEMORY = Question(
    "interview.tpot_memory_bound",
    "Below the knee a decode step is memory-bound. Write its time T(B) as a sympy expression in Q_w "
    "(bytes of weights one step reads: every weight but the input-embedding table, whose few rows are "
    "gathered), B (batch), S (tokens of context per sequence), k_tok (KV bytes per token) and W "
    "(bandwidth).",
    answer=lambda p: (Q_w + B * S * k_tok) / W,
    kind="symbolic",
    symbols={"Q_w": Q_w, "B": B, "S": S, "k_tok": k_tok, "W": W},
    mistakes=[
        Mistake("Every sequence reads its own KV cache: the KV term grows with B.",
                lambda p: (Q_w + S * k_tok) / W),
        Mistake("The weights are read once per step, shared by the batch, not once per sequence.",
                lambda p: B * (Q_w + S * k_tok) / W),
    ],
    chapter="decode", difficulty="easy",
)

_MM1 = Question(
    "interview.mm1_wait",
    "Mean wait in the queue (before service) of an M/M/1 queue with utilisation rho and mean service time "
    "s: a sympy expression in rho and s.",
    answer=lambda p: rho * _s / (1 - rho),
    kind="symbolic",
    symbols={"rho": rho, "s": _s},
    mistakes=[
        Mistake("The wait grows like 1 / (1 - rho): hyperbolically, not exponentially.",
                lambda p: _s * (sp.exp(rho) - 1)),
        Mistake("That is the M/D/1 wait (equal service times), half the M/M/1 one.",
                lambda p: rho * _s / (2 * (1 - rho))),
        Mistake("That is the time in the system, wait plus service: s / (1 - rho).",
                lambda p: _s / (1 - rho)),
    ],
    chapter="queueing", difficulty="medium",
)

_LITTLE = Question(
    "interview.littles_decode_batch",
    "Requests arrive at lam per second; each produces L_o output tokens, the first by its prefill and the "
    "others one per decode step of T seconds. By Little's law, how many sequences are decoding at once on "
    "average? (a sympy expression in lam, L_o and T)",
    answer=lambda p: _lam * (L_o - 1) * _T,
    kind="symbolic",
    symbols={"lam": _lam, "L_o": L_o, "T": _T},
    mistakes=[
        Mistake("The first token comes out of the prefill: a request spends (L_o - 1) steps decoding.",
                lambda p: _lam * L_o * _T),
        Mistake("Little's law multiplies: L = lambda x W, sequences = arrival rate x time each stays.",
                lambda p: (L_o - 1) * _T / _lam),
    ],
    chapter="queueing", difficulty="medium",
)

# ---------------------------------------------------------------- conceptual, across the chapters
_QUEUEING_GROWTH = Question(
    "interview.queueing_growth",
    "How does the queueing delay of a server grow as its utilisation approaches 1?",
    answer=Template(
        "Hyperbolically, like 1 / (1 - rho), not exponentially: the M/M/1 mean wait is rho s / (1 - rho). "
        "At rho = 0.5 the wait equals one service time, at 0.9 it is 9 service times, at 0.99 it is 99: "
        "halving the idle fraction 1 - rho doubles the wait, and it diverges as rho goes to 1. "
        "Variability matters too (Pollaczek-Khinchine): equal service times (M/D/1) wait half as long as "
        "exponential ones, so mixing very different prompt lengths hurts."),
    kind="conceptual",
    key_points=(
        ("the wait grows like 1 / (1 - rho), hyperbolically",
         r"1\s*/\s*\(?\s*1\s*[-−]\s*(rho|ρ|u|utili[sz]ation)|\(\s*1\s*[-−]\s*(rho|ρ|u)\s*\)|hyperbol"),
        ("it diverges as the utilisation approaches 1",
         r"infinit|diverg|unbounded|blows? up|without (bound|limit)|∞|to infinity|no steady state|unstable"),
        ("a number to remember: at 90 % busy the M/M/1 wait is 9 service times; halving the idle time doubles it",
         r"doubl|\b9 (service|times)|nine times|\b9x|\b10x|ten times|\b99\b"),
        ("service-time variability matters: M/D/1 waits half as long as M/M/1",
         r"M/D/1|variab|half|C_?s|coefficient of variation|Pollaczek|Kingman|M/G/1"),
    ),
    mistakes=[
        _inverted("grows linearly or stays finite",
                  "Not linearly: the wait grows like 1 / (1 - rho), hyperbolically, and diverges as rho goes to 1.",
                  "grows linearly",
                  r"(?:increases|rises) linearly",
                  r"(?:converges|stays finite|stays bounded|levels off|saturates) as (?:rho|the utili[sz]ation)",
                  rf"M/D/1{_GAP}(?:twice|longer|more) (?:as long|than)"),
        Mistake("Queueing delay is not exponential in the load: it grows like 1 / (1 - rho), hyperbolically. "
                "It is gentle until about 70-80 % and then diverges.",
                lambda p: _claim("grows exponentially", r"(?:increases|rises|explodes|blows up) exponentially",
                                 r"exponential (?:growth|blow-?up|increase)")),
    ],
    chapter="queueing", difficulty="medium",
)

_PREFILL_DECODE = Question(
    "interview.prefill_vs_decode_bound",
    "Why is prefill usually compute-bound and decode memory-bound?",
    answer=Template(
        "Prefill pushes all the prompt's tokens through the model at once: each weight read from HBM is "
        "used for thousands of tokens, so the arithmetic intensity (FLOPs per byte) is about the prompt "
        "length, far above the ridge point. Decode produces one new token per sequence per step, yet must "
        "read every weight (and its KV cache) for it: its intensity is about the batch size, below the "
        "ridge ({ridge:.0f} FLOP/byte on an H100) until the batch is a few hundred sequences.",
        facts=lambda p: {"ridge": _ridge_h100()}),
    kind="conceptual",
    key_points=(
        ("prefill processes many tokens per weight read",
         r"(prompt|prefill)[^.]*(tokens|parallel|at once|together|one pass)"),
        ("decode makes one token per sequence per step but reads every weight (and the KV cache)",
         r"(one|1|a single|each) (new )?token|(reads?|load|stream)[^.]*(weights|parameters|KV)"),
        ("arithmetic intensity against the ridge point",
         r"intensity|FLOPs? per byte|FLOP/B|ridge"),
    ),
    mistakes=[
        _inverted("prefill below the ridge, decode above",
                  "The other way round: prefill's intensity (about the prompt length) is far above the ridge, "
                  "decode's (about the batch) below it.",
                  "prefill is below the ridge",
                  rf"prompt length{_GAP}below the ridge",
                  rf"prefill{_GAP}below the ridge",
                  rf"prefill[^.;:!?]{{0,80}}?intensity{_GAP}below the ridge",
                  rf"batch size{_GAP}above the ridge",
                  rf"decode{_GAP}above the ridge"),
        Mistake("Decode is compute-bound only at a batch above the ridge point (a few hundred sequences), "
                "rarely reached: at typical batches it is bandwidth-bound.",
                lambda p: _claim("decode is compute-bound",
                                 r"decod(?:e|ing) (?:is|are) (?:usually |mostly |always )?compute[- ]bound")),
        Mistake("Prefill's cost is its FLOPs: 2 per weight per prompt token. The KV cache it writes is small "
                "next to the math.",
                lambda p: _claim("prefill is memory-bound",
                                 r"prefill (?:is|are) (?:usually |mostly |always )?(?:memory|bandwidth)[- ]bound")),
    ],
    chapter="rooflines", difficulty="easy",
)

_METRICS = Question(
    "interview.ttft_tpot_e2e",
    "Define TTFT, TPOT and end-to-end latency, and how they relate.",
    answer=Template(
        "TTFT is the time from the request's arrival to its first output token: queueing plus prefill. "
        "TPOT is the mean time per output token after the first, vLLM's (E2E - TTFT) / (n - 1) for n output "
        "tokens. The end-to-end latency is the time to the last token, E2E = TTFT + (n - 1) x TPOT."),
    kind="conceptual",
    key_points=(
        ("TTFT runs from arrival (queueing included) to the first token",
         r"(TTFT|first token)[^.]*(arriv|submit|sent|request|queue|wait|prefill)"),
        ("TPOT is the time per output token after the first: (E2E - TTFT) / (n - 1)",
         r"n\s*[-−]\s*1|after the first|excluding the first|between (output |later |subsequent |two )?tokens|inter-token"),
        ("E2E = TTFT + (n - 1) TPOT",
         r"TTFT\s*\+|TTFT plus|\+\s*\(?n\s*[-−]\s*1|sum of"),
    ),
    mistakes=[
        _inverted("TPOT includes the first token",
                  "TPOT is the time per output token after the first; TTFT runs from arrival, queueing included.",
                  "TPOT includes the first token",
                  r"TPOT[^.;:!?]{0,60}?(?:before|including) the first",
                  r"TTFT[^.;:!?]{0,40}?(?:excludes|excluding|without|not including) (?:the )?queu",
                  r"TTFT[^.;:!?]{0,30}?(?:to|until) (?:the|its) last token"),
        Mistake("TPOT excludes the first token: (E2E - TTFT) / (n - 1), not E2E / n (which mixes the prefill "
                "into every token).",
                lambda p: _claim("E2E divided by n", r"E2E ?/ ?n\b(?! ?[-−])")),
    ],
    chapter="anatomy", difficulty="easy",
)

_KV_CACHE = Question(
    "interview.kv_cache_limits",
    "What is the KV cache, how large is it per token, and why does it (not the weights) usually limit the "
    "decode batch?",
    answer=Template(
        "The KV cache keeps the keys and values of every past token, for each layer and KV head, so that "
        "attention does not recompute them. Per token it holds 2 x L x K x d_h x b_kv bytes "
        "({kv_kib:.0f} KiB for Llama-3.1-70B in bf16). The weights are stored once, but "
        "the KV cache grows with context length times batch: every running sequence needs its own. So after "
        "the weights, the memory left divided by one sequence's KV bytes sets the largest batch. Grouped-query "
        "attention (fewer KV heads), an fp8 KV cache and paged allocation all raise it.",
        facts=lambda p: {"kv_kib": kv_bytes_per_token(M70) / KiB}),
    kind="conceptual",
    key_points=(
        ("it stores the keys and values of every past token",
         r"keys? and values?|\bK and V\b|\bK/V\b"),
        ("per token 2 x layers x KV heads x head size x bytes",
         r"2\s*[·x×*]?\s*L|layers?[^.]*(KV heads|heads|head (dim|size)|d_h)|per token[^.]*(layer|head)"),
        ("it grows with context length and with the batch, the weights do not",
         r"(context|sequence|length|tokens)[^.]*(batch|sequences|requests)|(batch|sequences|requests)[^.]*(context|length)|grows? (linearly )?with"),
        ("GQA, an fp8 KV cache or paging shrink it",
         r"GQA|grouped|MQA|multi-query|fp8|quanti|paged|paging|KV heads"),
    ),
    mistakes=[
        _inverted("the cache shrinks with the context",
                  "The KV cache grows with context length and batch (a key and a value per token); the weights "
                  "are stored once.",
                  "the cache shrinks with the context",
                  rf"(?:KV cache|cache){_GAP}(?:shrinks|falls|decreases) (?:with|as)",
                  r"weights? (?:are |is )?(?:stored|kept) (?:many times|per sequence|for each sequence)",
                  rf"(?:more|extra) KV heads{_GAP}(?:raise|increase|help|more sequences)",
                  rf"weights{_GAP}grow with (?:the )?(?:batch|context)",
                  r"attention (?:does|must) recompute"),
        Mistake("KV memory is linear in the context (one key and value per token). Attention *compute* over a "
                "whole prompt is what grows quadratically.",
                lambda p: _claim("grows quadratically", r"quadratic(?:ally)? (?:in|with) (?:the )?(?:context|sequence|length)")),
    ],
    chapter="memory", difficulty="medium",
)

_TP = Question(
    "interview.tensor_parallel_tradeoff",
    "When does tensor parallelism help a decode deployment, and what does it cost?",
    answer=Template(
        "It lets a model that does not fit on one GPU run at all, and leaves more memory per GPU for the KV "
        "cache. It lowers TPOT: each of N GPUs reads 1/N of the weights, so the weight-bound step shrinks "
        "almost N-fold. The cost is two all-reduces per layer over NVLink, a latency that does not shrink "
        "with N, which is why TP stays inside one node. Per-GPU throughput falls as N grows, so for "
        "throughput at a loose TPOT target several smaller replicas (data parallelism) beat one wide one."),
    kind="conceptual",
    key_points=(
        ("it makes a large model fit and leaves more memory for the KV cache",
         r"\bfits?\b|capacity|(more|spare|free|leaves?) memory|memory (per GPU|for (the )?KV)|too (big|large)"),
        ("it lowers TPOT: each GPU reads 1/N of the weights",
         r"(TPOT|latency|step time)[^.]*(lower|reduc|drop|shrink|faster|divid|split|1/N)|(lower|reduc|cut|faster|shrink)[^.]*(TPOT|latency|step time)"),
        ("it costs all-reduces per layer, so it stays inside an NVLink node",
         r"all-?reduce|communicat|NVLink|interconnect"),
        ("per-GPU throughput falls; replicas may serve throughput better",
         r"per[- ]GPU|replica|data[- ]parallel|throughput per|cost per token"),
    ),
    mistakes=[
        _inverted("TP raises TPOT or per-GPU throughput",
                  "The other way round: tensor parallelism lowers TPOT (each GPU reads 1/N of the weights) and "
                  "per-GPU throughput falls as N grows.",
                  "raises TPOT",
                  r"(?:raises|increases|lengthens) (?:the )?(?:TPOT|step time|per-token latency)",
                  rf"(?:TPOT|step time){_GAP}(?:rises|grows|increases|goes up|gets longer)",
                  rf"per-GPU throughput{_GAP}(?:rises|grows|increases|goes up)",
                  r"per-GPU throughput (?:scales|grows) (?:linearly )?with",
                  r"(?:leaves|frees|gives) less memory"),
        Mistake("Throughput per GPU does not scale linearly with TP: the all-reduces add latency, KV heads "
                "replicate beyond K GPUs, and per-GPU throughput falls.",
                lambda p: _claim("linear speedup", r"(?:throughput|speed) (?:scales|grows) linearly with (?:the )?(?:number of )?GPUs")),
    ],
    chapter="parallelism", difficulty="medium",
)

_PAGED = Question(
    "interview.paged_attention",
    "Why does vLLM's PagedAttention let a server hold a larger batch?",
    answer=Template(
        "Without paging a server reserves KV memory for the maximum length of every request up front, and "
        "most of the reservation is never used (and fragments the rest). PagedAttention allocates the KV "
        "cache in small blocks (16 tokens by default) on demand, like virtual-memory pages, so a sequence "
        "wastes at most one partially filled block. The memory freed holds more sequences: a larger batch and, "
        "below the knee, more throughput."),
    kind="conceptual",
    key_points=(
        ("reserving the maximum length per request wastes memory (fragmentation)",
         r"reserv|fragment|max(imum)? (length|context)|pre-?allocat|worst[- ]case|up front"),
        ("fixed-size blocks allocated on demand",
         r"block|page"),
        ("the waste is at most one partial block per sequence",
         r"(last|one|partial(ly)?|half)[^.]*(block|page)|less than|under \d+\s*%|near(ly)? zero|little waste|at most"),
        ("more sequences fit: a larger batch, more throughput",
         r"(more|larger|bigger) (sequences|batch|requests)|batch (size )?(grows|rises|increases)|throughput"),
    ),
    mistakes=[
        _inverted("paging fits fewer sequences",
                  "Paging frees the memory that reservations waste, so more sequences fit: a larger batch, not a "
                  "smaller one; the waste is at most one partial block per sequence.",
                  "fits fewer sequences",
                  rf"(?:memory freed|paging|PagedAttention|it){_GAP}(?:fewer|less) sequences",
                  rf"(?:memory freed|paging|PagedAttention){_GAP}a smaller batch",
                  r"wastes? at least",
                  r"(?:most|all) of the reservation is used"),
        Mistake("Paging changes where the KV cache lives, not how much math attention does: the gain is "
                "memory, hence the batch.",
                lambda p: _claim("fewer FLOPs", r"(?:reduces|cuts|lowers) (?:the )?(?:attention )?FLOPs")),
    ],
    chapter="memory", difficulty="medium",
)

_CHUNKED = Question(
    "interview.chunked_prefill",
    "Why do serving engines chunk long prefills, and how large should a chunk be?",
    answer=Template(
        "A long prompt prefilled in one step stalls every decoding sequence on the GPU for the whole prefill: "
        "their inter-token latency spikes. Chunked prefill splits the prompt into chunks and runs each chunk "
        "together with the decode tokens in one step under a token budget, so every step stays short. The "
        "chunk should be large enough that the step's matmuls are compute-bound (a few hundred to a couple "
        "of thousand tokens, about the ridge point), since smaller chunks re-read the weights and the growing "
        "KV cache more often for the same work: TTFT grows slightly in exchange for a steady TPOT."),
    kind="conceptual",
    key_points=(
        ("a long prefill stalls the decoding sequences (TPOT spikes)",
         r"stall|block|pause|spike|hiccup|freez|(TPOT|inter-token|ITL)[^.]*(jump|rise|grow|spike)"),
        ("chunks share a step with the decode tokens under a token budget",
         r"chunk[^.]*(bound|limit|cap|budget|mix|together|piggyback|alongside|with (the )?decode)|token budget|max_num_batched_tokens"),
        ("a chunk large enough to keep the matmuls compute-bound (about the ridge point)",
         r"compute[- ]bound|ridge|saturat|knee|few hundred|\b(256|512|1024|2048)\b"),
        ("the cost: slightly longer TTFT, weights and KV re-read per chunk",
         r"TTFT|first token|re-?read|overhead"),
    ),
    mistakes=[
        _inverted("small chunks, memory-bound",
                  "A chunk should be large enough for the matmuls to be compute-bound (about the ridge point); "
                  "the price is a slightly longer TTFT, not a shorter one.",
                  "chunks small enough to be memory-bound",
                  rf"(?:small|short) enough{_GAP}(?:memory|bandwidth)[- ]bound",
                  rf"chunks?{_GAP}(?:memory|bandwidth)[- ]bound",
                  r"TTFT (?:shrinks|falls|drops|improves|decreases|gets shorter)",
                  rf"chunk(?:ing|ed prefill)?{_GAP}(?:raises|increases|lengthens) (?:the )?(?:TPOT|inter-token)"),
        Mistake("Chunking does not reduce the prefill's FLOPs: the same tokens pass through the same weights "
                "(and each chunk re-reads the cache of the chunks before it).",
                lambda p: _claim("chunking reduces the FLOPs", r"(?:fewer|less) (?:total )?(?:prefill )?FLOPs")),
    ],
    chapter="prefill", difficulty="medium",
)

_DISAGG = Question(
    "interview.disaggregation",
    "When does prefill/decode disaggregation (separate GPUs for prefill and for decode) pay off?",
    answer=Template(
        "On shared GPUs prefill and decode interfere: each prefill pauses the decode steps (TPOT suffers) and "
        "a large decode batch delays prefills (TTFT suffers). Disaggregation removes the interference and lets "
        "each pool be sized and parallelised independently for its own SLO, prefill for TTFT and decode for "
        "TPOT. It costs a KV-cache transfer per request (KV bytes per token times the prompt length, over "
        "NVLink or the network) and more complex operations. It pays off when both SLOs are tight, prompts "
        "are long, and goodput per GPU is the goal (DistServe, Splitwise)."),
    kind="conceptual",
    key_points=(
        ("prefill and decode interfere on shared GPUs",
         r"interfer|stall|contend|compet|pause|TTFT[^.]*TPOT|TPOT[^.]*TTFT"),
        ("each pool is sized and parallelised for its own SLO",
         r"(size|scale|tune|parallel\w*|configur|provision)[^.]*(independent|separate|each|own)|own (SLO|parallel|TP|batch)|independently"),
        ("it costs a KV-cache transfer per request",
         r"transfer|\bmov(e|ing)|migrat|\bsend|\bcopy"),
        ("it pays off with tight SLOs, long prompts, goodput per GPU",
         r"tight|strict|long prompt|goodput|SLO"),
    ),
    mistakes=[
        _inverted("pays off with loose SLOs and short prompts",
                  "It pays off with tight SLOs and long prompts; with loose SLOs and short prompts a colocated "
                  "server does as well without the KV transfer.",
                  "pays off with loose SLOs",
                  rf"(?:pays off|helps|wins|worth it){_GAP}(?:loose|relaxed|short prompts?)",
                  rf"(?:loose|relaxed) SLOs?{_GAP}(?:pays off|helps|wins)",
                  r"(?:simpler|less complex) (?:to )?operat",
                  r"(?:a )?(?:small|smaller) decode batch(?:es)? delays?"),
        Mistake("Disaggregation is not always better: it adds a KV transfer per request and splits the "
                "GPUs into pools that can sit idle; with loose SLOs a colocated server with chunked prefill "
                "often gives more goodput per GPU.",
                lambda p: _claim("always better", r"(?:always|in every case) (?:improves|raises|increases|wins)")),
    ],
    chapter="scheduling", difficulty="hard",
)

_MFU_MBU = Question(
    "interview.mfu_mbu",
    "What are MFU and MBU, and which one tells you how well decode is running?",
    answer=Template(
        "MFU (model FLOP utilisation) is the achieved FLOP/s (the model's FLOPs per token times tokens per "
        "second) over the peak dense FLOP/s. MBU (model bandwidth utilisation) is the achieved bandwidth, the "
        "bytes a step must move (weights plus KV cache) divided by the step time, over the peak bandwidth. "
        "Decode at ordinary batch sizes is memory-bound, so MBU is its figure of merit (Databricks measured "
        "about 55-60 %); MFU is the one for prefill and for large, compute-bound batches."),
    kind="conceptual",
    key_points=(
        ("MFU: achieved FLOP/s over peak FLOP/s",
         r"(achiev|actual|measured|useful|delivered)[^.]*(FLOP|compute)[^.]*(peak|maximum)"
         r"|(FLOP|compute)[^.]*(achiev|actual|measured|delivered)[^.]*(peak|maximum)|FLOP/s\s*/\s*peak|FLOP utili[sz]ation"),
        ("MBU: achieved bandwidth (bytes per step over step time) over peak bandwidth",
         r"(bytes|bandwidth)[^.]*(peak|maximum)|bandwidth utili[sz]ation"),
        ("decode is memory-bound, so MBU is its measure",
         r"decode[^.]*(MBU|bandwidth|memory[- ]bound)|MBU[^.]*decode"),
        ("MFU for prefill and large batches",
         r"prefill|large batch|compute[- ]bound"),
    ),
    mistakes=[
        _inverted("decode judged by MFU",
                  "Decode at ordinary batch sizes is memory-bound: MBU is its measure, MFU the one for prefill "
                  "and large batches.",
                  "decode is compute-bound",
                  r"decod(?:e|ing)[^.;:!?]{0,40}?(?:is|are) (?:usually |mostly |always )?compute[- ]bound",
                  rf"MFU{_GAP}(?:small|memory[- ]bound) batch",
                  rf"MBU{_GAP}(?:prefill|large batch)",
                  rf"(?:judge|measure){_GAP}decode{_GAP}MFU"),
        Mistake("At ordinary batch sizes decode's MFU is low by physics (intensity about B FLOPs per byte): "
                "judge decode by MBU.",
                lambda p: _claim("decode should reach high MFU", r"decode[^.]*(?:should|must) (?:reach|have|hit) (?:a )?high MFU")),
    ],
    chapter="validation", difficulty="medium",
)

_QUANT = Question(
    "interview.quantization_effect",
    "What does int4 weight-only quantisation do to decode TPOT, to the knee B*, and to prefill?",
    answer=Template(
        "It stores 0.5 byte per weight instead of 2, so the weight read of a memory-bound decode step is 4x "
        "smaller and TPOT at small batch drops by up to 4x (Llama-3.1-8B at batch 1 on an H100: "
        "{tpot_bf16_ms:.1f} ms -> {tpot_int4_ms:.1f} ms at 1024 tokens of context, physical bound). "
        "The math still runs in bf16, so the knee B* = R b_w / 2 drops 4x too (from "
        "{knee_bf16:.0f} to {knee_int4:.0f} on an H100): "
        "the step turns compute-bound at a smaller batch. Prefill is compute-bound, so it gains little or "
        "nothing (dequantisation can even slow it). The memory freed holds more KV cache, a larger batch; "
        "check the accuracy.",
        facts=lambda p: {"tpot_bf16_ms": decode_step_time(M8, H100, 1, 1024) * 1e3,
                         "tpot_int4_ms": decode_step_time(M8, H100, 1, 1024, weight_dtype="int4") * 1e3,
                         "knee_bf16": critical_batch_size(H100),
                         "knee_int4": critical_batch_size(H100, weight_dtype="int4")}),
    kind="conceptual",
    key_points=(
        ("decode TPOT drops: the weight read moves 4x fewer bytes",
         r"(TPOT|step time|decode|latency)[^.]*(drop|lower|fall|faster|reduc|shrink|4\s*[x×]|four|quarter)|fewer bytes|less (memory )?traffic"),
        ("the knee B* drops (B* = R b_w / 2)",
         r"(knee|B\*|critical batch)[^.]*(drop|lower|smaller|fall|shrink|reduc|4|quarter|earlier|sooner)"),
        ("prefill, compute-bound, gains little",
         r"prefill[^.]*(little|\bno\b|\bnot|barely|same|unchanged|compute|nothing|slower)"),
        ("memory freed for the KV cache; check the accuracy",
         r"KV|batch|capacity|accuracy|quality|perplexity"),
    ),
    mistakes=[
        _inverted("TPOT or the knee rises",
                  "Backwards: int4 weights shrink the weight read, so TPOT falls, and the knee B* = R b_w / 2 "
                  "falls with b_w.",
                  "TPOT rises with int4",
                  rf"TPOT{_GAP}(?:climbs|rises|grows|increases|goes up)",
                  rf"(?:knee|B\*){_GAP}(?:climbs|rises|grows|increases|goes up|moves up)",
                  rf"prefill{_GAP}(?:memory|bandwidth)[- ]bound",
                  rf"prefill{_GAP}(?:4x|four times|much) faster",
                  r"(?:less|smaller) KV cache"),
        Mistake("Weight-only int4 dequantises to bf16 and computes in bf16: the FLOP/s do not change, only the "
                "bytes do.",
                lambda p: _claim("quadruples the FLOP", r"(?:more|higher|faster) (?:tensor[- ]core )?FLOP/?s (?:with|from) (?:weight-only )?int4")),
    ],
    chapter="quantization", difficulty="medium",
)

def _speculative_facts() -> dict:
    """The break-even batches the speculative-decoding answer quotes (chapter 12's pair)."""
    out = {}
    for suffix, setting in (("", "physical"), ("_real", "realistic")):
        target = Deployment.build(M8, H100, setting=setting)
        out["break_even" + suffix] = float(break_even_batch_size(target, LLAMA_3_2_1B, 256, 0.7, 4))
        out["knee" + suffix] = float(knee_batch_size(target, 0))
        out["long" + suffix] = float(break_even_batch_size(target, LLAMA_3_2_1B, 2048, 0.8, 4))
    return out


_SPEC = Question(
    "interview.speculative_decoding",
    "When does speculative decoding help, and when does it hurt?",
    answer=Template(
        "A cheap draft (a small model, n-grams or extra heads) proposes gamma tokens and the target model "
        "verifies all of them in one forward pass, keeping the accepted prefix. It helps when decode is "
        "memory-bound, at small batch: verifying gamma + 1 tokens costs about one weight read, the same as "
        "producing one, so each step yields more tokens when the acceptance rate is high. The verification "
        "does gamma + 1 times the FLOPs, so it turns compute-bound once (gamma + 1) B reaches the knee, at "
        "B*/(gamma + 1), long before plain decode does: from there the rejected tokens cost real compute, and "
        "beyond the break-even batch B_e speculation slows decoding down. For Llama-3.1-8B with a Llama-3.2-1B "
        "draft on an H100 (alpha = 0.7, gamma = 4, 256 tokens of context) B_e is about {break_even:.0f} at the "
        "physical bound and {break_even_real:.0f} at realistic efficiencies, well before the knee ({knee:.0f} "
        "and {knee_real:.0f}). At long contexts a small draft can remove the break-even altogether: the "
        "verification reads each KV cache once for gamma + 1 tokens, so at 2048 tokens with alpha = 0.8 "
        "speculation pays at every batch, at both settings. The output distribution is unchanged (rejection "
        "sampling).",
        facts=lambda p: _speculative_facts()),
    kind="conceptual",
    key_points=(
        ("a draft proposes tokens, the target verifies them in one pass",
         r"draft|propos|guess|verif"),
        ("it helps while decode is memory-bound (small batch): k tokens for about one weight read",
         r"memory[- ]bound|bandwidth[- ]bound|small batch|low batch|batch (of |size )?1\b|weight read|idle compute|spare compute"),
        ("the gain depends on the acceptance rate",
         r"accept"),
        ("it hurts beyond a break-even batch, well before the knee: the verification turns compute-bound "
         "once (gamma + 1) B reaches it",
         r"break[- ]even|B_e\b|(large|high|big) batch|compute[- ]bound|knee|throughput[^.]*(drop|fall|hurt|lower|suffer)"),
        ("at long contexts (shared KV read) there may be no break-even at all",
         r"long (context|prompt|sequence)s?|KV[^.]*(once|shar)|no break[- ]even|every batch"),
    ),
    mistakes=[
        _inverted("helps at large batch, hurts at small batch",
                  "The other way round: speculation helps at small batch, where decode is memory-bound, and hurts "
                  "at large batch, past the knee, where compute is the bottleneck.",
                  "helps at large batch",
                  rf"helps?{_GAP}(?:large|high|big) batch",
                  rf"(?:large|high|big) batch{_GAP}(?:helps|pays off|wins)",
                  rf"hurts?{_GAP}(?:small|low) batch",
                  rf"(?:small|low) batch{_GAP}(?:hurts|loses|slows)",
                  rf"helps?{_GAP}compute[- ]bound",
                  rf"(?:small|low) batch{_GAP}\(?(?:past the knee|compute[- ]bound)",
                  r"(?:yields?|gives?|produces?) (?:less|fewer) tokens",
                  r"output distribution (?:is |gets )?changed"),
        _inverted("pays until the knee",
                  "It stops paying well before the knee: the verification does (gamma + 1) times the FLOPs, so it "
                  "turns compute-bound at B*/(gamma + 1), and the break-even batch B_e lies below B*.",
                  "helps until the knee",
                  r"(?:helps|pays(?: off)?) (?:up to|until|right up to) the knee",
                  r"hurts (?:only )?(?:past|beyond|after) the knee",
                  r"(?:break[- ]even|B_e)[^.;:!?]{0,40}?(?:above|beyond|past) the knee"),
        Mistake("With rejection sampling the output distribution is exactly the target model's: speculation "
                "changes the speed, not the quality.",
                lambda p: _claim("changes the output distribution", r"(?:lowers|worsens|degrades|reduces) (?:the )?(?:output )?quality")),
    ],
    chapter="speculative", difficulty="hard",
)

_PERCENTILE = Question(
    "interview.percentile_slos",
    "Why are latency SLOs stated as P99 (or P90) and not as means?",
    answer=Template(
        "A mean hides the tail: a few very slow requests barely move it, yet those users wait. Each user "
        "sends many requests per session, so most users meet the slow tail sooner or later. Near saturation "
        "queueing stretches the tail much faster than the mean (bursts pile up), so a P99 target catches "
        "overload that a mean target misses."),
    kind="conceptual",
    key_points=(
        ("a mean hides the slow tail",
         r"tail|slow(est)? (requests|users)|outlier|worst|\bhide|\bmask"),
        ("users see every request; over many requests they meet the tail",
         r"\buser|session|many requests|every request|fan-?out|\beach"),
        ("queueing near saturation stretches the tail faster than the mean",
         r"queue|load|utili[sz]ation|saturat|burst"),
    ),
    mistakes=[
        _inverted("the mean shows the tail",
                  "A mean hides the tail: a few slow requests barely move it, and queueing stretches the tail "
                  "faster than the mean.",
                  "the mean shows the tail",
                  rf"mean (?:shows|reveals|captures){_GAP}tail",
                  rf"(?:slow requests|outliers){_GAP}(?:sharply|strongly|greatly) (?:move|shift|raise)",
                  rf"tail{_GAP}slower than the mean",
                  r"(?:few|least|no) users (?:ever )?(?:meet|see|hit) the (?:slow )?tail"),
        Mistake("The mean is not enough: a low mean is compatible with a long, painful tail.",
                lambda p: _claim("the mean is enough", r"(?:average|mean) (?:is|tells you) (?:all|everything)")),
    ],
    chapter="slo", difficulty="easy",
)

_CAPACITY = Question(
    "interview.capacity_planning",
    "How do you estimate how many GPUs a service needs for a given request rate and SLOs?",
    answer=Template(
        "Characterise the requests: prompt and output lengths (their distributions, not only means). Pick a "
        "configuration that fits in memory (model, data types, tensor-parallel degree) and find what one "
        "replica sustains within the SLOs: the batch B_SLO the TPOT target allows, the prefill load the TTFT "
        "target allows, hence its goodput in requests per second. Divide the peak request rate by that goodput, "
        "round up, and keep headroom: utilisation well below 1, because waits grow like 1 / (1 - rho). Then "
        "validate with a simulator or a load test."),
    kind="conceptual",
    key_points=(
        ("the workload: prompt and output lengths",
         r"prompt|input (length|tokens)|output (length|tokens)|tokens per request"),
        ("what one replica sustains within the SLOs (B_SLO, goodput)",
         r"B_?SLO|goodput|SLO|per replica|per GPU"),
        ("peak rate over per-replica capacity, rounded up, with headroom",
         r"divid|ceil|round(ed)? up|headroom|\bpeak|margin|utili[sz]ation"),
        ("the configuration must fit: memory, TP degree, KV cache",
         r"memory|\bfits?\b|\bKV\b|\bTP\b|tensor[- ]parallel"),
    ),
    mistakes=[
        _inverted("round down, plan near full utilisation",
                  "Round up and keep headroom: utilisation well below 1, since waits grow like 1 / (1 - rho).",
                  "round down",
                  r"round(?:ed|ing)? (?:it )?down",
                  rf"utili[sz]ation{_GAP}(?:above|over|at|near) 1\b",
                  r"waits? (?:shrink|fall|drop)",
                  r"beyond the SLOs?"),
        Mistake("Size for the peak (or a high percentile) of the load, with utilisation below 1: queueing "
                "waits grow like 1 / (1 - rho).",
                lambda p: _claim("size for the average load", r"(?:plan|provision) for the (?:average|mean) (?:load|rate)")),
    ],
    chapter="capacity", difficulty="hard",
)

_VALIDATE = Question(
    "interview.validate_with_measurement",
    "Your model predicts a TPOT of 4.8 ms and you measure 9 ms. What do you conclude, and what do you "
    "check?",
    answer=Template(
        "The model at MFU = MBU = 1 is a lower bound, a physical limit, so the measurement being slower is "
        "expected: the ratio says the server reaches about 4.8 / 9 = 53 % of peak bandwidth (its MBU), a "
        "typical figure. Then check that both describe the same thing: batch size, context length, data "
        "types, the TPOT definition, and overheads the model leaves out (kernel launches without CUDA graphs, "
        "sampling, scheduling in Python). Calibrate MBU (and MFU) from one measurement and validate the "
        "re-predicted numbers on another configuration."),
    kind="conceptual",
    key_points=(
        ("the model is a lower bound (physical limit)",
         r"lower bound|\bbound\b|best case|ideal|\bpeak|physical"),
        ("the ratio is an efficiency: the implied MBU (about 53 %)",
         r"MBU|efficien|utili[sz]ation|fraction of (peak|the bound)|\d+\s*%"),
        ("check that both measure the same thing and the overheads the model omits",
         r"overhead|launch|CUDA graphs?|sampl|schedul|python|warm|dtype|data type|batch|context|definition"),
        ("calibrate on one measurement, validate on another",
         r"calibrat|\bfit|re-?predict|another|held[- ]out|second|compare"),
    ),
    mistakes=[
        _inverted("the model as an upper bound on time",
                  "At MFU = MBU = 1 the model is a lower bound on the step time: a slower measurement is expected.",
                  "the measurement should be faster",
                  r"(?:is|gives) an? (?:upper|higher) bound(?! on (?:the )?throughput)",
                  rf"(?:measurement|measured){_GAP}faster{_GAP}expected",
                  r"expect(?:ed)?[^.;:!?]{0,30}?faster than (?:the )?(?:model|prediction|bound)"),
        Mistake("A first-principles bound is supposed to be faster than reality; the gap is information "
                "(an efficiency to calibrate), not a reason to drop the model.",
                lambda p: _claim("throw away the model", r"the model is useless")),
    ],
    chapter="validation", difficulty="medium",
)

QUESTIONS = [
    _WHY_BATCHING, _GOODPUT, _B_STAR, _B_STAR_METHOD, _BACKGROUND,
    _UNCONSTRAINED, _SATURATES, _LINEAR, _IGNORE_QUEUEING, _SLUGGISH,
    _RIDGE_H200, _RIDGE_A100, _H200_VS_H100, _KV_70B, _FLOOR_TP8, _MAX_BATCH, _LOWEST,
    _TPOT_MEMORY, _MM1, _LITTLE,
    _QUEUEING_GROWTH, _PREFILL_DECODE, _METRICS, _KV_CACHE, _TP, _PAGED, _CHUNKED, _DISAGG,
    _MFU_MBU, _QUANT, _SPEC, _PERCENTILE, _CAPACITY, _VALIDATE,
]

#: The follow-up questions and pitfalls the interview rehearsal must cover (tested by id).
REQUIRED = {
    "follow-up: why decode batching raises throughput": "interview.why_batching_raises_throughput",
    "follow-up: what goodput is": "interview.what_is_goodput",
    "follow-up: B* with the roofline for an 8 x H100 node": "interview.b_star_8xh100",
    "follow-up: keeping TPOT low while serving background throughput work": "interview.low_tpot_with_background_work",
    "pitfall: unconstrained throughput that breaks SLOs": "interview.pitfall_unconstrained_throughput",
    "pitfall: ignoring that decode throughput saturates": "interview.pitfall_decode_saturates",
    "pitfall: assuming latency grows linearly with batch from the start": "interview.pitfall_latency_linear_in_batch",
    "pitfall: ignoring queueing in TTFT": "interview.pitfall_ignoring_queueing_ttft",
    "pitfall: TPOT > 80 ms feels sluggish": "interview.pitfall_tpot_80ms_sluggish",
}
