"""Interview questions on mixtures of experts and expert parallelism (the bank's MoE/EP topic).

Numeric ones are checked like the chapters' questions; conceptual ones carry a model answer, the key
points a strong answer names (regular expressions found in free text) and the wrong claims that earn a
hint (each pattern's first alternative is a plain phrase, skipped after a negation, as in
:mod:`servingmath.questions.interview`). Each question's ``chapter`` is ``"moe"``, so the drill finds
them under ``--chapter moe`` as well as under this module's name; they are asked in
``solutions/16_mixture_of_experts.ipynb`` and worked in the chapter "Mixture of experts".
"""

from __future__ import annotations

import re

from ..question import Mistake, Question
from ..hardware import get_accelerator
from ..models import active_parameter_count, get_model, kv_bytes_per_token, parameter_count
from ..moe import experts_touched, moe_knee, weight_bytes_read

__all__ = ["QUESTIONS"]

DS, MIX, H100 = "DeepSeek-V3", "Mixtral-8x7B", "H100-SXM5-80GB"
_NEGATIONS = ("not ", "n't ", "never ", "no ")


def _claim(phrase: str, *patterns: str) -> str:
    """A wrong-claim pattern: ``phrase`` (plain words) or any of ``patterns``, not right after a negation."""
    if not re.fullmatch(phrase, phrase, re.I):
        raise ValueError(f"phrase must be plain words (it has to match its own text), got {phrase!r}")
    guard = "".join(f"(?<!{n})" for n in _NEGATIONS)
    return guard + "(?:" + "|".join((phrase, *patterns)) + ")"


def _ek_knee(p, **over):
    options = {"weight_dtype": "fp8", "compute_dtype": "fp8", **over}
    return moe_knee(p["model"], p["accelerator"], convention="experts", **options)


def _ridge(p, dtype="fp8"):
    return get_accelerator(p["accelerator"]).ridge_point(dtype)


_ACTIVE = Question(
    "interview_moe.active_is_not_bytes",
    "DeepSeek-V3 has 671B parameters, 37B of them active per token. Does a decode step at batch 64 cost "
    "like a 37B dense model's? Explain what it reads, and what sets its knee.",
    answer=lambda p: (
        "No. The active parameters are one token's: its k = 8 routed experts per layer plus the shared part. "
        "Different tokens of a batch pick different experts, so a step of B tokens touches about "
        f"E (1 - (1 - k/E)^B) experts per layer: {experts_touched(DS, 64):.0f} of 256 at batch 64, and it reads "
        f"each once, about {weight_bytes_read(DS, 64, weight_dtype='fp8') / 1e9:.0f} GB in fp8 rather than "
        f"{active_parameter_count(DS) / 1e9:.0f} GB: most of the model. Memory must hold all "
        f"{parameter_count(DS) / 1e9:.0f}B parameters anyway. The FLOPs per token do follow the active count, "
        "so the arithmetic intensity of each expert's matmul is only B k / E per weight: the knee is thousands "
        "of sequences (the E/k rule puts it at E / k times the dense knee; counting the shared weights lowers "
        "it), and a single node stays memory-bound, limited by KV capacity."),
    kind="conceptual",
    key_points=(
        ("the batch's tokens touch more and more distinct experts: E (1 - (1 - k/E)^B) per layer",
         r"(touch|union|distinct|different|more)[^.]*experts|experts[^.]*(touch|union|distinct|different)|1\s*-\s*\(1\s*-\s*k\s*/\s*E\)"),
        ("so a step reads most of the weights at moderate batch, not only the active ones",
         r"(read|load|stream|fetch)[^.]*(most|all|nearly|almost|majority|\d{3} ?GB)|(most|all|nearly all)[^.]*(weights|parameters|model)"),
        ("the active count sets the FLOPs per token, so the MoE knee is much larger (E / k)",
         r"E\s*/\s*k|knee[^.]*(larger|higher|thousands|bigger)|(thousands|larger|higher)[^.]*knee|intensity"),
        ("memory must hold every expert",
         r"(memory|HBM|capacity|hold|store|fit)[^.]*(all|every|671|total)"),
    ),
    mistakes=[
        Mistake("A step does not read only the active parameters: that is one token's share. A batch's tokens "
                "pick different experts, and the step reads every expert any of them picked.",
                lambda p: _claim("reads only the active parameters",
                                 r"only (?:reads|loads) (?:the )?(?:37B |active )")),
        Mistake("An MoE does not need only its active parameters in memory: every expert must be resident, since "
                "any token may pick any of them.",
                lambda p: _claim("only the active parameters need to fit",
                                 r"only (?:the )?active (?:parameters|experts) (?:need|have) to (?:fit|be (?:resident|loaded))")),
    ],
    chapter="moe", difficulty="medium",
)

_EP_OR_TP = Question(
    "interview_moe.ep_or_tp",
    "You serve DeepSeek-V3 on one 8 x H200 node. Tensor parallelism 8, or expert parallelism 8 with "
    "data-parallel attention? Argue from memory, bytes and communication.",
    answer=lambda p: (
        "Expert parallelism with attention data parallelism, for any real batch. MLA caches one latent per "
        "token shared by all heads, a single KV head, so TP 8 cannot split it: every GPU keeps the whole latent of "
        "every sequence, eight copies, and the node holds about 148 sequences of 4096 tokens. With attention DP "
        "each GPU keeps only its own sequences: the node holds about 776, five times the capacity, and the "
        "throughput per GPU follows. Communication also falls: TP all-reduces every token twice per layer, EP sends each token to "
        "its k = 8 experts in a dispatch and a combine per MoE layer, k n_moe / (2 L G) of TP's bytes, about "
        "half on 8 GPUs. The costs: each GPU holds and reads the 17 GB of shared weights (attention, shared "
        "expert, dense layers), so batch-1 latency is worse (about 3.9 ms against 1.1 ms), and the busiest "
        "GPU sets the step, so routing imbalance and hot experts matter (DeepSeek duplicates hot experts)."),
    kind="conceptual",
    key_points=(
        ("MLA's latent is one KV head: TP replicates it on every GPU, attention DP keeps each sequence once",
         r"(latent|MLA|KV)[^.]*(replicat|copies|every GPU|each GPU|one KV head|single KV head|duplicat|cannot split|can't split)|(replicat|duplicat|copies)[^.]*(latent|KV|cache)"),
        ("so attention DP holds several times more sequences (capacity, throughput)",
         r"(more|five|5x|5 times|several times|larger)[^.]*(sequences|batch|capacity|KV|tokens)|capacity"),
        ("EP sends fewer bytes: k copies per token in two all-to-alls per MoE layer against two all-reduces per layer",
         r"all-to-all|dispatch|combine|fewer bytes|less communication|half (the|of)"),
        ("the price: every GPU reads the shared weights (worse small-batch latency), and load imbalance",
         r"shared (weights|expert|part)|imbalanc|hot expert|batch[- ]1|small batch|latency at light load|straggler|busiest"),
    ),
    mistakes=[
        Mistake("EP does not reduce the FLOPs per token: each token still runs k experts; it changes where they "
                "run and what each GPU holds.",
                lambda p: _claim("EP reduces the FLOPs", r"expert parallelism reduces (?:the )?(?:FLOPs|compute)")),
        Mistake("TP does not always communicate less: it all-reduces every token's D activations twice per layer, "
                "while EP sends k copies of each token to the GPUs of its experts, k n_moe / (2 L G) of TP's bytes.",
                lambda p: _claim("TP always communicates less", r"tensor parallelism always communicates less")),
    ],
    chapter="moe", difficulty="hard",
)

_EK = Question(
    "interview_moe.e_over_k_knee",
    "By the E/k rule, at what decode batch do DeepSeek-V3's routed experts turn compute-bound in fp8 (weights "
    "and math) on an H100 (dense peak, MFU = MBU = 1)? (sequences)",
    answer=_ek_knee,
    params={"model": DS, "accelerator": H100},
    mistakes=[
        Mistake("That is a dense model's fp8 knee, ridge x b_w / 2. Each of the 256 experts sees only 8/256 of "
                "the batch: multiply by E / k = 32.", lambda p: _ridge(p) / 2),
        Mistake("With fp8 weights each weight is 1 byte and gives 2 FLOPs per token: the knee is ridge x b_w / 2 "
                "x E / k, half of ridge x E / k.", lambda p: 2 * _ek_knee(p)),
        Mistake("That uses the bf16 peak; fp8 math runs at twice the bf16 FLOP/s.",
                lambda p: _ek_knee(p, compute_dtype="bf16")),
    ],
    chapter="moe", difficulty="medium",
)

_TOUCHED = Question(
    "interview_moe.mixtral_experts_touched",
    "Mixtral-8x7B routes each token to 2 of its 8 experts. On average, how many distinct experts does a "
    "decode step of 3 sequences touch per layer (uniform routing)? (a number)",
    answer=lambda p: experts_touched(MIX, 3),
    mistakes=[
        Mistake("3 x 2 = 6 assumes the three tokens never share an expert; each expert escapes a token with "
                "probability 1 - 2/8, so 8 (1 - 0.75^3) are touched.", lambda p: 6.0),
        Mistake("Not yet all 8: each expert escapes all three tokens with probability 0.75^3 = 0.42.",
                lambda p: 8.0),
        Mistake("That is one token's experts; three tokens touch more.", lambda p: 2.0),
    ],
    chapter="moe", difficulty="easy",
)

_MLA = Question(
    "interview_moe.mla_cache",
    "How does DeepSeek's multi-head latent attention (MLA) shrink the KV cache, and what does it do to decode "
    "attention's arithmetic intensity and to tensor parallelism?",
    answer=lambda p: (
        "MLA caches, per token and layer, one compressed latent of d_c = 512 values and one decoupled RoPE key "
        "of 64 values, shared by all 128 heads, instead of a key and a value per KV head: "
        f"{kv_bytes_per_token(DS) / 1e3:.0f} kB per token in bf16 for DeepSeek-V3, 71 times less than its "
        "decompressed K and V and less than GQA with 8 KV heads. The up-projections are absorbed into the query and "
        "the output, so attention runs directly on the latent: each byte of cache read serves all 128 heads, "
        "about 240 FLOPs per byte in bf16, near or above the ridge point, so decode attention becomes "
        "compute-bound where GQA's 2G/b never is. And since the latent is one KV head shared by every head, "
        "tensor parallelism cannot split it: each GPU keeps the whole cache, which is why DeepSeek runs "
        "attention data-parallel."),
    kind="conceptual",
    key_points=(
        ("a compressed latent (plus a small RoPE key) per token and layer, shared by all heads",
         r"latent|compress|low[- ]rank"),
        ("the up-projections are absorbed, so attention works on the latent",
         r"absorb|up[- ]projection|decompress|reconstruct"),
        ("high arithmetic intensity: decode attention turns compute-bound",
         r"intensity|compute[- ]bound|FLOPs? per byte|ridge"),
        ("one shared latent cannot be split by TP: each GPU keeps all of it (hence attention DP)",
         r"(TP|tensor[- ]parallel\w*)[^.]*(replicat|cannot split|can't split|whole|every GPU|each GPU|all of it|duplicat)|data[- ]parallel|attention DP|one KV head|single KV head"),
    ),
    mistakes=[
        Mistake("MLA is not a quantization of the cache: it stores a lower-dimensional latent (512 + 64 values per "
                "layer) in the same data type; fp8 would halve it again.",
                lambda p: _claim("quantizes the KV cache", r"quantis(?:es|ing) the KV cache")),
        Mistake("MLA does not drop heads as MQA does: all 128 query heads keep their own keys and values, "
                "reconstructed from the shared latent.",
                lambda p: _claim("fewer attention heads", r"reduces the number of (?:query |attention )?heads")),
    ],
    chapter="moe", difficulty="medium",
)

QUESTIONS = [_ACTIVE, _EP_OR_TP, _EK, _TOUCHED, _MLA]
