"""Transformer models: shapes, parameter counts, weight and KV-cache bytes, FLOPs per token.

A :class:`ModelConfig` holds the architecture numbers that serving arithmetic
needs. It is read from a Hugging Face style ``config.json`` on disk with
:func:`load_model_config` (no network): the built-in catalog is a folder of
such files, ``servingmath/data/models``, each with its source.

Conventions
-----------
* Parameters counted exactly from the shapes: embeddings, attention (with
  biases where the architecture has them), FFN (gated: three matrices; plain:
  two), norms, the LM head unless tied to the embeddings, MoE routers.
* ``weight_bytes`` stores every parameter in one data type (real int4
  checkpoints often keep embeddings in 16 bits: a few percent more).
* FLOPs per token of a forward pass = 2 x (matmul parameters used per token,
  LM head included, input embedding excluded) + the attention score and value
  products, 4 x layers x (query heads x head size) x context.

Examples
--------
>>> llama = get_model("Llama-2-7B")
>>> parameter_count(llama)
6738415616
>>> kv_bytes_per_token(llama, "bf16")
524288.0
>>> kv_bytes_per_token(get_model("Llama-3.1-70B"), "bf16")
327680.0
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path

import numpy as np

from ._validation import check_integer, check_nonnegative, scalar_or_array, unknown_name
from .datatypes import bytes_per_element

__all__ = [
    "ModelConfig",
    "load_model_config",
    "get_model",
    "list_models",
    "parameter_count",
    "active_parameter_count",
    "weight_bytes",
    "kv_bytes_per_token",
    "flops_per_token",
    "check_context_len",
    "input_embedding_parameter_count",
    "lm_head_parameter_count",
    "matmul_parameter_count",
    "body_parameter_count",
    "kv_projection_parameter_count",
    "expert_parameter_split",
    "attention_flops_per_pair",
]


@dataclass(frozen=True)
class ModelConfig:
    """Architecture of a decoder-only transformer.

    Attributes
    ----------
    name : str
    n_layers : int
        Transformer blocks, L.
    hidden_size : int
        Model width, D.
    n_heads : int
        Query heads, H.
    n_kv_heads : int
        Key/value heads, K (= H for MHA, 1 for MQA, in between for GQA).
    head_dim : int
        Size of one head, d_h (usually D / H).
    ffn_size : int
        Intermediate size of the feed-forward block, F.
    ffn_gated : bool
        True for SwiGLU-style FFNs (three matrices), False for two.
    vocab_size : int
    tied_embeddings : bool
        True when the LM head reuses the input embedding matrix.
    n_experts, n_active_experts : int
        Mixture of experts: experts per layer and experts used per token (1, 1 for dense).
    max_context_len : int
        Longest sequence the model was built for (``max_position_embeddings``).
    qkv_bias, ffn_bias, norm_bias, lm_head_bias : bool
        Which layers carry bias vectors.
    norms_per_layer : int
        Normalisation layers per block (2 for Llama, 1 for GPT-J's parallel block).
    sliding_window : int or None
        Attention window, where the model uses one (Mistral-7B v0.1: 4096).
    source : str
        Where the numbers come from.
    """

    name: str
    n_layers: int
    hidden_size: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    ffn_size: int
    ffn_gated: bool
    vocab_size: int
    tied_embeddings: bool = False
    n_experts: int = 1
    n_active_experts: int = 1
    max_context_len: int = 4096
    qkv_bias: bool = False
    ffn_bias: bool = False
    norm_bias: bool = False
    lm_head_bias: bool = False
    norms_per_layer: int = 2
    sliding_window: int | None = None
    source: str = "user-defined"

    def __post_init__(self):
        for name in ["n_layers", "hidden_size", "n_heads", "n_kv_heads", "head_dim",
                     "ffn_size", "vocab_size", "n_experts", "n_active_experts", "max_context_len"]:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {value!r} (model {self.name!r})")
        if self.n_heads % self.n_kv_heads:
            raise ValueError(
                f"n_heads ({self.n_heads}) must be a multiple of n_kv_heads ({self.n_kv_heads}) "
                f"in model {self.name!r}"
            )
        if self.n_active_experts > self.n_experts:
            raise ValueError(
                f"n_active_experts ({self.n_active_experts}) must be <= n_experts ({self.n_experts})"
            )

    @property
    def attention_type(self) -> str:
        """``"MHA"``, ``"GQA"`` or ``"MQA"``."""
        if self.n_kv_heads == self.n_heads:
            return "MHA"
        return "MQA" if self.n_kv_heads == 1 else "GQA"

    @property
    def group_size(self) -> int:
        """Query heads per KV head, G = H / K."""
        return self.n_heads // self.n_kv_heads

    @property
    def is_moe(self) -> bool:
        return self.n_experts > 1


def _get(config: dict, *keys, default=None):
    for key in keys:
        if key in config and config[key] is not None:
            return config[key]
    return default


def model_from_hf_config(config: dict, name: str | None = None, source: str = "config dict") -> ModelConfig:
    """Build a :class:`ModelConfig` from a Hugging Face config dictionary."""
    if not isinstance(config, dict):
        raise ValueError(f"config must be a dict parsed from config.json, got {type(config).__name__}")
    model_type = config.get("model_type", "")
    hidden = _get(config, "hidden_size", "n_embd", "d_model")
    layers = _get(config, "num_hidden_layers", "n_layer", "num_layers", "n_layers")
    heads = _get(config, "num_attention_heads", "n_head", "n_heads")
    missing = [k for k, v in [("hidden_size", hidden), ("num_hidden_layers", layers),
                              ("num_attention_heads", heads),
                              ("vocab_size", config.get("vocab_size"))] if v is None]
    if missing:
        raise ValueError(f"config {name or source!r} lacks {', '.join(missing)}: "
                         "not a decoder-only transformer config this library understands")
    kv_heads = _get(config, "num_key_value_heads", "n_kv_heads", default=heads)
    if config.get("multi_query"):
        kv_heads = 1
    head_dim = _get(config, "head_dim", default=hidden // heads)
    meta = config.get("servingmath", {})
    gated = model_type not in {"gptj", "gpt2", "gpt_neox", "opt", "falcon", "bloom", "mpt"}
    if "ffn_gated" in meta:  # an explicit statement beats the guess from model_type
        gated = bool(meta["ffn_gated"])
    expansion = config.get("expansion_ratio")  # MPT names the FFN size by its ratio to d_model
    ffn = _get(config, "intermediate_size", "n_inner", "ffn_dim",
               default=int(expansion * hidden) if expansion else 4 * hidden)
    gptj_like = model_type in {"gptj", "gpt2", "gpt_neox"}
    return ModelConfig(
        name=name or meta.get("name") or config.get("_name_or_path") or "unnamed",
        n_layers=int(layers),
        hidden_size=int(hidden),
        n_heads=int(heads),
        n_kv_heads=int(kv_heads),
        head_dim=int(head_dim),
        ffn_size=int(ffn),
        ffn_gated=gated,
        vocab_size=int(config["vocab_size"]),
        tied_embeddings=bool(config.get("tie_word_embeddings", not gptj_like and False)),
        n_experts=int(_get(config, "num_local_experts", "num_experts", default=1)),
        n_active_experts=int(_get(config, "num_experts_per_tok", default=1)),
        max_context_len=int(_get(config, "max_position_embeddings", "n_positions", "max_seq_len", default=4096)),
        qkv_bias=bool(config.get("attention_bias", model_type == "qwen2")),
        ffn_bias=bool(config.get("mlp_bias", gptj_like)),
        norm_bias=gptj_like,
        lm_head_bias=model_type == "gptj",
        norms_per_layer=1 if model_type == "gptj" else 2,
        sliding_window=(int(config["sliding_window"]) if config.get("sliding_window")
                        and config.get("use_sliding_window", True) else None),
        source=meta.get("source", source),
    )


def load_model_config(path, name: str | None = None) -> ModelConfig:
    """Read a Hugging Face style ``config.json`` from disk (no network).

    Parameters
    ----------
    path : str or Path
        A ``config.json`` file, or a folder that holds one (a downloaded checkpoint).
    name : str, optional
        Display name; defaults to the file's ``servingmath.name``, ``_name_or_path``
        or the folder name.
    """
    path = Path(path)
    if path.is_dir():
        path = path / "config.json"
    if not path.is_file():
        raise FileNotFoundError(f"path {str(path)!r} is not a config.json file or a folder holding one")
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"path {str(path)!r} is not valid JSON: {exc}") from None
    default = path.parent.name if path.name == "config.json" else path.stem
    meta_name = config.get("servingmath", {}).get("name") or config.get("_name_or_path")
    return model_from_hf_config(config, name=name or meta_name or default,
                                source=config.get("servingmath", {}).get("source", path.name))


@cache
def _catalog() -> dict[str, ModelConfig]:
    folder = resources.files("servingmath") / "data" / "models"
    models = {}
    for entry in sorted(folder.iterdir(), key=lambda p: p.name):
        if entry.name.endswith(".json"):
            with resources.as_file(entry) as file:
                model = load_model_config(file)
            models[model.name] = model
    return models


def list_models() -> list[str]:
    """Names of the catalog models."""
    return list(_catalog())


def get_model(name) -> ModelConfig:
    """Look up a catalog model by name; a :class:`ModelConfig` or a path to a config.json passes through.

    Raises
    ------
    KeyError
        For an unknown name, with the closest catalog names.
    """
    if isinstance(name, ModelConfig):
        return name
    catalog = _catalog()
    if isinstance(name, str) and name in catalog:
        return catalog[name]
    if isinstance(name, (str, os.PathLike)) and str(name).endswith(".json") and Path(name).is_file():
        return load_model_config(name)
    lowered = {k.lower(): k for k in catalog}
    if isinstance(name, str) and name.lower() in lowered:
        return catalog[lowered[name.lower()]]
    raise unknown_name("model", name, catalog)


def _layer_parameters(model: ModelConfig) -> tuple[int, int]:
    """(parameters of one block outside the experts, parameters of one expert FFN)."""
    d, h, k, dh, f = model.hidden_size, model.n_heads, model.n_kv_heads, model.head_dim, model.ffn_size
    attention = d * h * dh + 2 * d * k * dh + h * dh * d
    if model.qkv_bias:
        attention += h * dh + 2 * k * dh
    expert = (3 if model.ffn_gated else 2) * d * f
    if model.ffn_bias:
        expert += f + d
    norms = model.norms_per_layer * d * (2 if model.norm_bias else 1)
    router = d * model.n_experts if model.is_moe else 0
    return attention + norms + router, expert


def _embedding_parameters(model: ModelConfig) -> tuple[int, int]:
    """(input embedding + final norm, LM head)."""
    d, v = model.hidden_size, model.vocab_size
    final_norm = d * (2 if model.norm_bias else 1)
    head = 0 if model.tied_embeddings else v * d + (v if model.lm_head_bias else 0)
    return v * d + final_norm, head


def parameter_count(model) -> int:
    """Total parameters N (every expert counted).

    Examples
    --------
    >>> parameter_count("Llama-3.1-70B")
    70553706496
    >>> parameter_count("Mixtral-8x7B")
    46702792704
    """
    model = get_model(model)
    block, expert = _layer_parameters(model)
    embed, head = _embedding_parameters(model)
    return model.n_layers * (block + model.n_experts * expert) + embed + head


def active_parameter_count(model) -> int:
    """Parameters used per token (MoE: only the active experts); equals N for dense models.

    Examples
    --------
    >>> active_parameter_count("Mixtral-8x7B")
    12879925248
    """
    model = get_model(model)
    block, expert = _layer_parameters(model)
    embed, head = _embedding_parameters(model)
    return model.n_layers * (block + model.n_active_experts * expert) + embed + head


def weight_bytes(model, dtype: str = "bf16") -> float:
    """Bytes of all weights stored in ``dtype``: N x bytes per element.

    Examples
    --------
    >>> weight_bytes("Llama-2-7B", "bf16") / 1e9
    13.476831232
    """
    return parameter_count(model) * bytes_per_element(dtype)


def kv_bytes_per_token(model, dtype: str = "bf16") -> float:
    """KV-cache bytes one token adds: 2 x layers x KV heads x head size x bytes.

    The 2 is one key and one value vector per KV head per layer.

    Examples
    --------
    >>> kv_bytes_per_token("Llama-2-70B", "fp8")
    163840.0
    """
    model = get_model(model)
    return 2.0 * model.n_layers * model.n_kv_heads * model.head_dim * bytes_per_element(dtype)


def check_context_len(model, context_len, name: str = "context_len"):
    """Check 0 <= context_len <= the model's maximum; return it as an array."""
    model = get_model(model)
    arr = check_nonnegative(name, context_len)
    check_integer(name, arr, minimum=0)
    if arr.size and np.any(arr > model.max_context_len):
        bad = arr[arr > model.max_context_len].flat[0]
        raise ValueError(f"{name} = {bad:g} exceeds {model.name}'s maximum context "
                         f"of {model.max_context_len} tokens")
    return arr


def input_embedding_parameter_count(model) -> int:
    """Parameters of the input embedding table, V x D (the LM head's too when tied).

    A forward pass *gathers* one row of this table per token; it never streams
    the table, so a step reads T x D of it, not V x D (chapter "Decode").

    >>> input_embedding_parameter_count("Llama-3.1-8B")
    525336576
    """
    model = get_model(model)
    return model.vocab_size * model.hidden_size


def lm_head_parameter_count(model) -> int:
    """Weights of the LM head, V x D: multiplied at every position that emits logits (tied or not).

    >>> lm_head_parameter_count("Llama-2-7B")
    131072000
    """
    model = get_model(model)
    return model.vocab_size * model.hidden_size


def matmul_parameter_count(model) -> int:
    """Parameters that take part in matmuls per token: active parameters minus the input
    embedding (a table look-up), plus the LM head when tied (it still multiplies).

    Derived in the chapter "Rooflines" (2 FLOPs per parameter per token).

    >>> matmul_parameter_count("Llama-2-7B")
    6607343616
    """
    model = get_model(model)
    p = active_parameter_count(model) - model.vocab_size * model.hidden_size
    if model.tied_embeddings:
        p += model.vocab_size * model.hidden_size
    return p


def body_parameter_count(model) -> int:
    """P_body: the weights every token is multiplied by in the transformer blocks.

    :func:`matmul_parameter_count` minus the LM head (active experts only, for
    MoE). Derived in the chapter "Prefill".

    >>> body_parameter_count("Llama-2-7B")
    6476271616
    """
    return matmul_parameter_count(model) - lm_head_parameter_count(model)


def kv_projection_parameter_count(model) -> int:
    """Parameters of the key and value projections of all layers: L x 2 x (D x K x d_h [+ K x d_h bias]).

    These are the weights that tensor parallelism must replicate once N > K
    (chapter "Tensor parallelism").

    >>> kv_projection_parameter_count("Llama-3.1-70B")
    1342177280
    """
    model = get_model(model)
    per_layer = 2 * model.hidden_size * model.n_kv_heads * model.head_dim
    if model.qkv_bias:
        per_layer += 2 * model.n_kv_heads * model.head_dim
    return model.n_layers * per_layer


def expert_parameter_split(model) -> tuple[int, int]:
    """(parameters outside the experts, parameters of one expert summed over the layers).

    Every parameter is in exactly one of: the shared part (embeddings, LM head,
    attention, norms, routers) or one of the E experts, so
    ``shared + E x per_expert == parameter_count(model)``. A dense model is one
    expert. Derived in the chapter "Mixture of experts".

    >>> expert_parameter_split("Mixtral-8x7B")
    (1605636096, 5637144576)
    """
    model = get_model(model)
    block, expert = _layer_parameters(model)
    embed, head = _embedding_parameters(model)
    return model.n_layers * block + embed + head, model.n_layers * expert


def attention_flops_per_pair(model) -> float:
    """FLOPs of one (query, key) pair of attention summed over layers and query heads: 4 L H d_h.

    q k^T and p v are two multiply-adds per element of a head, two FLOPs each
    (chapter "Rooflines").

    >>> attention_flops_per_pair("Llama-3.1-8B")
    524288.0
    """
    model = get_model(model)
    return 4.0 * model.n_layers * model.n_heads * model.head_dim


def flops_per_token(model, context_len=0):
    """Forward-pass FLOPs for one token that attends to ``context_len`` earlier tokens.

    2 x (active matmul parameters incl. LM head, excl. input embedding)
    + 4 x layers x (query heads x head size) x context.

    Examples
    --------
    >>> round(flops_per_token("Llama-2-7B") / 1e9, 2)
    13.21
    >>> round(flops_per_token("Llama-2-7B", 4096) / 1e9, 2)
    15.36
    """
    model = get_model(model)
    context = check_context_len(model, context_len)
    matmul_params = matmul_parameter_count(model)
    attention = attention_flops_per_pair(model) * context
    return scalar_or_array(2.0 * matmul_params + attention)
