"""Interview questions on mixtures of experts and expert parallelism (the bank's MoE/EP topic).

Numeric ones are checked like the chapters' questions; conceptual ones carry a model answer, the key
points a strong answer names (regular expressions found in free text) and the wrong claims that earn a
hint (each pattern's first alternative is a plain phrase, skipped after a negation, as in
:mod:`servingmath.questions.interview`). Each question's ``chapter`` is ``"moe"``, so the drill finds
them under ``--chapter moe`` as well as under this module's name; they are asked in
``solutions/16_mixture_of_experts.ipynb`` and worked in the chapter "Mixture of experts".
"""

from __future__ import annotations

from ..question import Mistake, Question, Template
from ..decode import decode_step_time
from ..deployment import Deployment
from ..hardware import get_accelerator
from ..memory import max_batch_size
from ..models import (active_parameter_count, expert_parameter_split, get_model, kv_bytes_per_token,
                      parameter_count)
from ..moe import experts_touched, moe_knee, weight_bytes_read
from ._variants import GPUS_FP8, named
from .interview import _GAP, _claim, _inverted

__all__ = ["QUESTIONS"]

DS, MIX, H100, H200 = "DeepSeek-V3", "Mixtral-8x7B", "H100-SXM5-80GB", "H200-SXM-141GB"
#: Mixtures of experts of the catalog (E / k = 32, 16, 16 and 4).
MOE_MODELS = (DS, "Qwen3-235B-A22B", "Qwen3-30B-A3B", MIX)


def _ek_knee(p, **over):
    options = {"weight_dtype": "fp8", "compute_dtype": "fp8", **over}
    return moe_knee(p["model"], p["accelerator"], convention="experts", **options)


def _ridge(p, dtype="fp8"):
    return get_accelerator(p["accelerator"]).ridge_point(dtype)


_ACTIVE = Question(
    "interview_moe.active_is_not_bytes",
    "DeepSeek-V3 has 671B parameters, 37B of them active per token. Does a decode step at batch 64 cost "
    "like a 37B dense model's? Explain what it reads, and what sets its knee.",
    answer=Template(
        "No. The active parameters are one token's: its k = 8 routed experts per layer plus the shared part. "
        "Different tokens of a batch pick different experts, so a step of B tokens touches about "
        "E (1 - (1 - k/E)^B) experts per layer: {touched:.0f} of 256 at batch 64, and it reads "
        "each once, about {read_gb:.0f} GB in fp8 rather than {active_gb:.0f} GB: most of the model. Memory "
        "must hold all {total_b:.0f}B parameters anyway. The FLOPs per token do follow the active count, "
        "so the arithmetic intensity of each expert's matmul is only B k / E per weight: the knee is thousands "
        "of sequences (the E/k rule puts it at E / k times the dense knee; counting the shared weights lowers "
        "it), and a single node stays memory-bound, limited by KV capacity.",
        facts=lambda p: {"touched": experts_touched(DS, 64),
                         "read_gb": weight_bytes_read(DS, 64, weight_dtype="fp8") / 1e9,
                         "active_gb": active_parameter_count(DS) / 1e9, "total_b": parameter_count(DS) / 1e9}),
    kind="conceptual",
    key_points=(
        ("the batch's tokens touch more and more distinct experts: E (1 - (1 - k/E)^B) per layer",
         r"(touch|union|distinct|different|more)[^.]*experts|experts[^.]*?(touch|union|distinct|different)|1\s*-\s*\(1\s*-\s*k\s*/\s*E\)"),
        ("so a step reads most of the weights at moderate batch, not only the active ones",
         r"(read|load|stream|fetch)[^.]*?(most|all|nearly|almost|majority|\d{3} ?GB)|(most|all|nearly all)[^.]*?(weights|parameters|model)"),
        ("the active count sets the FLOPs per token, so the MoE knee is much larger (E / k)",
         r"E\s*/\s*k|knee[^.]*?(larger|higher|thousands|bigger)|(thousands|larger|higher)[^.]*knee|intensity"),
        ("memory must hold every expert",
         r"(memory|HBM|capacity|hold|store|fit)[^.]*?(all|every|671|total)"),
    ),
    mistakes=[
        _inverted("a batch reads little of the model",
                  "A batch's tokens pick different experts: at moderate batch a step reads most of the weights "
                  "(each touched expert once), not a small share of them.",
                  "reads little of the model",
                  r"(?:least|little|a small (?:share|part|fraction)) of the (?:model|weights)",
                  r"(?:pick|choose|touch)(?:es)? the same experts",
                  r"reads? (?:each|every expert|them) many times"),
        _inverted("the MoE knee is lower, the node compute-bound",
                  "The FLOPs follow the active parameters but the bytes follow the experts touched: each expert "
                  "sees only B k / E tokens, so the knee is about E / k times the dense one and a node stays "
                  "memory-bound.",
                  "the knee is lower than a dense",
                  rf"knee{_GAP}(?:is |lies )?(?:lower|smaller) than",
                  rf"(?:node|step|decode){_GAP}(?:stays|is|turns|becomes) compute[- ]bound",
                  r"shared weights raises? (?:it|the knee)"),
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

def _ep_tp_facts() -> dict:
    """The capacities, bytes and latencies the EP-or-TP answer quotes (DeepSeek-V3, fp8, 8 x H200)."""
    m = get_model(DS)
    tp = Deployment.build(DS, H200, weight_dtype="fp8", tensor_parallel=8)
    ep = Deployment.build(DS, H200, weight_dtype="fp8", expert_parallel=8)
    tp_seqs, ep_seqs = float(max_batch_size(tp, 4096)), float(max_batch_size(ep, 4096))
    n_moe = m.n_layers - m.n_dense_layers
    return {"tp_seqs": tp_seqs, "ep_seqs": ep_seqs, "capacity_x": ep_seqs / tp_seqs,
            "bytes_ratio": m.n_active_experts * n_moe / (2 * m.n_layers * 8),
            "shared_gb": expert_parameter_split(m)[0] / 1e9,
            "tp_ms": decode_step_time(tp, 1, 0) * 1e3, "ep_ms": decode_step_time(ep, 1, 0) * 1e3}


_EP_OR_TP = Question(
    "interview_moe.ep_or_tp",
    "You serve DeepSeek-V3 on one 8 x H200 node. Tensor parallelism 8, or expert parallelism 8 with "
    "data-parallel attention? Argue from memory, bytes and communication.",
    answer=Template(
        "Expert parallelism with attention data parallelism, for any real batch. MLA caches one latent per "
        "token shared by all heads, a single KV head, so TP 8 must replicate it: every GPU keeps the whole "
        "latent of every sequence, eight copies, and the node holds about {tp_seqs:.0f} sequences of 4096 "
        "tokens. With attention DP each GPU keeps only its own sequences: the node holds about {ep_seqs:.0f}, "
        "{capacity_x:.0f} times the capacity, and the throughput per GPU follows. Communication also falls: TP "
        "all-reduces every token twice per layer, EP sends each token to its k = 8 experts in a dispatch and a "
        "combine per MoE layer, k n_moe / (2 L G) of TP's bytes, about {bytes_ratio:.2f} of them on 8 GPUs. The "
        "costs: each GPU holds and reads the {shared_gb:.0f} GB of shared weights (attention, shared expert, "
        "dense layers) in fp8, so batch-1 latency is worse (about {ep_ms:.1f} ms against {tp_ms:.1f} ms, "
        "physical bound), and the busiest GPU sets the step, so routing imbalance and hot experts matter "
        "(DeepSeek duplicates hot experts).",
        facts=lambda p: _ep_tp_facts()),
    kind="conceptual",
    key_points=(
        ("MLA's latent is one KV head: TP replicates it on every GPU, attention DP keeps each sequence once",
         r"(latent|MLA|KV)[^.]*?(replicat|copies|every GPU|each GPU|one KV head|single KV head|duplicat|cannot split|can't split)|(replicat|duplicat|copies)[^.]*?(latent|KV|cache)"),
        ("so attention DP holds several times more sequences (capacity, throughput)",
         r"(more|five|5x|5 times|several times|larger)[^.]*(sequences|batch|capacity|KV|tokens)|capacity"),
        ("EP sends fewer bytes: k copies per token in two all-to-alls per MoE layer against two all-reduces per layer",
         r"all-to-all|dispatch|combine|fewer bytes|less communication|half (the|of)"),
        ("the price: every GPU reads the shared weights (worse small-batch latency), and load imbalance",
         r"shared (weights|expert|part)|imbalanc|hot expert|batch[- ]1|small batch|latency at light load|straggler|busiest"),
    ),
    mistakes=[
        _inverted("TP splits the latent, EP sends more",
                  "MLA's latent is one KV head: TP cannot split it, so every GPU keeps all of it; and EP's two "
                  "all-to-alls per MoE layer send fewer bytes than TP's two all-reduces per layer (about half on "
                  "8 GPUs).",
                  "TP can split the latent",
                  r"(?:TP|tensor parallelism)(?: \d+)? (?:can|does) split",
                  rf"communication{_GAP}(?:also )?(?:rises|grows|increases)",
                  r"EP sends more (?:bytes|data)",
                  rf"attention DP{_GAP}(?:holds|fits) (?:fewer|less)"),
        Mistake("EP does not reduce the FLOPs per token: each token still runs k experts; it changes where they "
                "run and what each GPU holds.",
                lambda p: _claim("EP reduces the FLOPs", r"expert parallelism reduces (?:the )?(?:FLOPs|compute)")),
        Mistake("TP does not always communicate less: it all-reduces every token's D activations twice per layer, "
                "while EP sends k copies of each token to the GPUs of its experts, k n_moe / (2 L G) of TP's bytes.",
                lambda p: _claim("TP always communicates less", r"tensor parallelism always communicates less")),
    ],
    chapter="moe", difficulty="hard",
)

def _moe_fields(p):
    m = get_model(p["model"])
    return {**p, "n_experts": m.n_experts, "n_active": m.n_active_experts}


_EK = Question(
    "interview_moe.e_over_k_knee",
    "By the E/k rule, at what decode batch do {model}'s routed experts ({n_experts} experts, {n_active} per "
    "token) turn compute-bound in fp8 (weights and math) on an {gpu} (dense peak, MFU = MBU = 1)? (sequences)",
    answer=_ek_knee,
    params={"model": DS, "accelerator": H100},
    variants={"model": MOE_MODELS, "accelerator": GPUS_FP8},
    derive=named(_moe_fields, gpu="accelerator"),
    mistakes=[
        Mistake("That is a dense model's fp8 knee, ridge x b_w / 2. Each of the E experts sees only k/E of "
                "the batch: multiply by E / k.", lambda p: _ridge(p) / 2),
        Mistake("With fp8 weights each weight is 1 byte and gives 2 FLOPs per token: the knee is ridge x b_w / 2 "
                "x E / k, half of ridge x E / k.", lambda p: 2 * _ek_knee(p)),
        Mistake("That uses the bf16 peak; fp8 math runs at twice the bf16 FLOP/s.",
                lambda p: _ek_knee(p, compute_dtype="bf16")),
    ],
    chapter="moe", difficulty="medium",
)


def _touched(p):
    return experts_touched(MIX, p["tokens"])


_TOUCHED = Question(
    "interview_moe.mixtral_experts_touched",
    "Mixtral-8x7B routes each token to 2 of its 8 experts. On average, how many distinct experts does a "
    "decode step of {tokens} sequences touch per layer (uniform routing)? (a number)",
    answer=_touched,
    params={"tokens": 3},
    variants={"tokens": (2, 3, 5, 6)},
    mistakes=[
        Mistake("B x k assumes the tokens never share an expert; each expert escapes one token with "
                "probability 1 - k/E = 0.75, so E (1 - 0.75^B) are touched.", lambda p: 2.0 * p["tokens"]),
        Mistake("Not yet all 8: each expert escapes every token of the step with probability 0.75^B.",
                lambda p: 8.0),
        Mistake("That is one token's experts; a step of several tokens touches more.", lambda p: 2.0),
    ],
    chapter="moe", difficulty="easy",
)

_MLA = Question(
    "interview_moe.mla_cache",
    "How does DeepSeek's multi-head latent attention (MLA) shrink the KV cache, and what does it do to decode "
    "attention's arithmetic intensity and to tensor parallelism?",
    answer=Template(
        "MLA caches, per token and layer, one compressed latent of d_c = 512 values and one decoupled RoPE key "
        "of 64 values, shared by all 128 heads, instead of a key and a value per KV head: "
        "{kv_kb:.0f} kB per token in bf16 for DeepSeek-V3, 71 times less than its "
        "decompressed K and V and less than GQA with 8 KV heads. The up-projections are absorbed into the query and "
        "the output, so attention runs directly on the latent: each byte of cache read serves all 128 heads, "
        "about 240 FLOPs per byte in bf16, near or above the ridge point, so decode attention becomes "
        "compute-bound where GQA's 2G/b never is. And since the latent is one KV head shared by every head, "
        "tensor parallelism cannot split it: each GPU keeps the whole cache, which is why DeepSeek runs "
        "attention data-parallel.",
        facts=lambda p: {"kv_kb": kv_bytes_per_token(DS) / 1e3}),
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
        _inverted("MLA attention stays memory-bound, TP splits it",
                  "Each byte of the latent serves all 128 heads: about 240 FLOPs per byte in bf16, near or above "
                  "the ridge, so decode attention turns compute-bound; the cache is 71 times smaller than K and "
                  "V, and TP cannot split the one shared latent.",
                  "attention stays memory-bound",
                  rf"attention{_GAP}(?:becomes|is|stays|turns|remains) memory[- ]bound",
                  r"(?:near or |at or )?below the ridge",
                  r"(?:TP|tensor parallelism)(?: \d+)? (?:can|does) split",
                  r"times (?:more|larger|bigger) than (?:its |the )?(?:decompressed|full|uncompressed)"),
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
