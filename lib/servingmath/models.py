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
* Mixture of experts (chapter "Mixture of experts"): ``n_experts`` routed
  experts per MoE layer of which ``n_active_experts`` serve each token, plus
  ``n_shared_experts`` that serve every token (DeepSeek), and the first
  ``n_dense_layers`` layers with a dense FFN (DeepSeek's
  ``first_k_dense_replace``). Every parameter is either *shared* (used by
  every token) or belongs to one routed expert (:func:`expert_parameter_split`).
* Multi-head latent attention (MLA, DeepSeek-V2/V3), when ``kv_lora_rank`` is
  set: the cache holds one compressed latent of ``kv_lora_rank`` values plus
  one decoupled RoPE key of ``qk_rope_head_dim`` values per token and layer,
  shared by all heads (so ``n_kv_heads`` is 1); attention FLOPs are counted
  with the up-projections absorbed into the query and the output, as
  DeepSeek's inference code runs it (:func:`attention_flops_per_pair`).

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
import math
import os
from dataclasses import dataclass, replace
from functools import cache
from importlib import resources
from pathlib import Path

import numpy as np

from ._validation import (MissingFileError, check_choice, check_integer, check_nonnegative, check_path, check_scalar,
                          scalar_or_array, unknown_name)
from .datatypes import bytes_per_element, check_dtype

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
    "ModelTotals",
    "MissingShapeError",
    "model_from_totals",
    "as_totals",
    "with_kv_heads",
    "has_shape",
    "require_shape",
    "GQA_WEIGHTS",
    "attention_parameter_count",
]


@dataclass(frozen=True)
class ModelConfig:
    """Architecture of a decoder-only transformer.

    Derived in the chapter "Memory: weights, the KV cache and the largest batch that fits" (notebooks/03_memory.ipynb).

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
    sliding_window_layers : int or None
        How many of the L layers attend within ``sliding_window``; the others
        attend to the whole context (gemma-2: every other layer; gemma-3: five
        of every six; gpt-oss: every other, window 128). None: every layer, as
        Mistral-7B v0.1. The layers share one head layout, so a step's KV reads
        and attention pairs are the two kinds' counts weighted by their share
        of the layers (:func:`window_of`).
    expert_dtype : str or None
        The routed experts' own storage dtype, where a checkpoint quantises
        only them (gpt-oss: ``"mxfp4"`` experts, attention, router, embeddings
        and LM head in 16 bits). None: every weight in the deployment's
        ``weight_dtype``.
    source : str
        Where the numbers come from.
    n_shared_experts : int
        Mixture of experts: experts every token uses besides its routed ones
        (DeepSeek-V3: 1; Mixtral, Qwen3: 0). Each has ``shared_expert_ffn_size``.
    shared_expert_ffn_size : int or None
        Intermediate size of one shared expert; None: ``ffn_size``.
    n_dense_layers : int
        Mixture of experts: the first layers whose FFN is dense, of size
        ``dense_ffn_size`` (DeepSeek-V3: 3 of 61, ``first_k_dense_replace``).
    dense_ffn_size : int or None
        Intermediate size of those dense FFNs; None: ``ffn_size``.
    kv_lora_rank : int or None
        Multi-head latent attention (MLA): the size d_c of the compressed KV
        latent each token caches per layer (DeepSeek-V3: 512). None: ordinary
        multi-head / grouped-query attention. An MLA model has ``n_kv_heads``
        = 1 (one latent shared by every head) and ``head_dim`` = the query/key
        head size, ``qk_nope_head_dim + qk_rope_head_dim`` (DeepSeek-V3: 192).
    q_lora_rank : int or None
        MLA: rank of the low-rank query projection (DeepSeek-V3: 1536); None: a full one.
    qk_rope_head_dim : int
        MLA: size d_R of the decoupled RoPE part of each query and key head
        (DeepSeek-V3: 64); the key part is cached once per token, shared by the heads.
    v_head_dim : int or None
        MLA: size of one value head (DeepSeek-V3: 128); None: ``head_dim``.

    Only ``ffn_size`` is the size of one routed expert in a mixture of
    experts (Mixtral: 14336; DeepSeek-V3: 2048, its ``moe_intermediate_size``).
    The fields after ``source`` default to a plain transformer, so models
    written without them keep their numbers.
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
    n_shared_experts: int = 0
    shared_expert_ffn_size: int | None = None
    n_dense_layers: int = 0
    dense_ffn_size: int | None = None
    kv_lora_rank: int | None = None
    q_lora_rank: int | None = None
    qk_rope_head_dim: int = 0
    v_head_dim: int | None = None
    sliding_window_layers: int | None = None
    expert_dtype: str | None = None

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
        for name in ["n_shared_experts", "n_dense_layers", "qk_rope_head_dim"]:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
                raise ValueError(f"{name} must be an integer >= 0, got {value!r} (model {self.name!r})")
        for name in ["shared_expert_ffn_size", "dense_ffn_size", "kv_lora_rank", "q_lora_rank", "v_head_dim"]:
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, np.integer))
                                      or value < 1):
                raise ValueError(f"{name} must be None or an integer >= 1, got {value!r} (model {self.name!r})")
        if self.n_dense_layers >= self.n_layers and self.n_dense_layers:
            raise ValueError(f"n_dense_layers ({self.n_dense_layers}) must be < n_layers ({self.n_layers}) "
                             f"in model {self.name!r}: an all-dense model has n_experts = 1")
        if (self.n_dense_layers or self.n_shared_experts) and self.n_experts == 1:
            raise ValueError(f"n_dense_layers and n_shared_experts describe a mixture of experts, but model "
                             f"{self.name!r} has n_experts = 1")
        _check_window(self.sliding_window, self.sliding_window_layers, self.n_layers, self.name)
        if self.expert_dtype is not None:
            check_dtype(self.expert_dtype, "expert_dtype")
            if self.n_experts == 1:
                raise ValueError(f"expert_dtype ({self.expert_dtype!r}) is the routed experts' dtype, but model "
                                 f"{self.name!r} has n_experts = 1: give weight_dtype instead")
        if self.kv_lora_rank is None:
            if self.q_lora_rank is not None or self.qk_rope_head_dim or self.v_head_dim is not None:
                raise ValueError(f"q_lora_rank, qk_rope_head_dim and v_head_dim describe multi-head latent "
                                 f"attention: give kv_lora_rank too (model {self.name!r})")
        else:
            if self.n_kv_heads != 1:
                raise ValueError(f"an MLA model (kv_lora_rank = {self.kv_lora_rank}) caches one latent shared "
                                 f"by every head: n_kv_heads must be 1, got {self.n_kv_heads} (model {self.name!r})")
            if self.qk_rope_head_dim >= self.head_dim:
                raise ValueError(f"qk_rope_head_dim ({self.qk_rope_head_dim}) must be < head_dim "
                                 f"({self.head_dim}), the query/key head size nope + rope (model {self.name!r})")

    @property
    def attention_type(self) -> str:
        """``"MHA"``, ``"GQA"``, ``"MQA"`` or ``"MLA"`` (multi-head latent attention)."""
        if self.is_mla:
            return "MLA"
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

    @property
    def is_mla(self) -> bool:
        """True for multi-head latent attention (``kv_lora_rank`` set)."""
        return self.kv_lora_rank is not None

    @property
    def n_moe_layers(self) -> int:
        """Layers whose FFN is a mixture of experts: L - n_dense_layers (0 for a dense model)."""
        return self.n_layers - self.n_dense_layers if self.is_moe else 0


class MissingShapeError(ValueError):
    """A function needs a shape (layers, width, heads, ...) that a model given by its totals does not state.

    Derived in the chapter "Anatomy of a request" (notebooks/01_anatomy_of_a_request.ipynb).
    """


#: The shapes a :class:`ModelTotals` may state, with what each is (for the error messages).
SHAPE_NAMES = {
    "n_layers": "transformer layers L",
    "hidden_size": "model width D",
    "n_heads": "query heads H",
    "n_kv_heads": "KV heads K",
    "head_dim": "head size d_h",
    "vocab_size": "vocabulary V",
    "ffn_size": "FFN size F",
}

#: Longest context of a model given by its totals when none is stated: no practical limit.
TOTALS_MAX_CONTEXT = 10**9


@dataclass(frozen=True)
class ModelTotals:
    """A model given by its totals, the way problems state them: parameters, KV bytes per token, chips.

    Derived in the chapter "Anatomy of a request" (notebooks/01_anatomy_of_a_request.ipynb).

    Build one with :func:`model_from_totals`. Every function of the library
    that needs only totals (decode and prefill step times, the knee, the
    memory budget, the estimate calculator) accepts it where it accepts a
    :class:`ModelConfig`: the counting functions of this module
    (:func:`parameter_count`, :func:`kv_bytes_per_token`,
    :func:`matmul_parameter_count`, ...) read the totals, so the step model
    keeps one code path. A function that needs a shape the totals do not
    state (the all-reduces of tensor parallelism need ``n_layers`` and
    ``hidden_size``; KV-head replication needs ``n_kv_heads``) raises a
    :class:`MissingShapeError` that names it.

    Attributes
    ----------
    parameters : float
        N, every stored parameter (all experts; the embedding table and the
        LM head where :attr:`embedding_parameters` and
        :attr:`lm_head_parameters` say they are part of it).
    kv_bytes : float or None
        KV-cache bytes one token adds, stated at :attr:`kv_bytes_dtype` (all
        layers and KV heads). None: not stated (a function that needs it raises).
    kv_bytes_dtype : str
        The data type ``kv_bytes`` was stated in; other KV dtypes scale it by
        their bytes per element.
    embedding_parameters, lm_head_parameters : float
        The input embedding table V x D (gathered, one row per token, never
        streamed) and the LM head (streamed once when a step emits logits).
        0: ignored, as most napkin problems do (every parameter is then a
        matmul parameter, read and multiplied by every token).
    tied_embeddings : bool
        The LM head is the embedding table (counted once in ``parameters``).
    active_parameters : float or None
        Parameters used per token (a mixture of experts); None: all of them.
    n_experts, n_active_experts : int
        Experts per layer and experts a token uses (1, 1 for a dense model).
    attention_flops : float
        FLOPs of one (query, key) pair summed over layers and heads, 4 L H d_h;
        0 ignores attention FLOPs (the default when the shapes are not given).
    kv_projection_parameters : float or None
        Parameters of the K and V projections (replicated once tensor
        parallelism exceeds the KV heads); None: 2 L D K d_h from the shapes.
    attention_parameters : float or None
        Parameters of the attention blocks; None: 2 L D H d_h + the K/V projections from the shapes.
    shapes : tuple of (name, int)
        The shapes that are stated, among :data:`SHAPE_NAMES`.
    moe_layers : int or None
        Layers with routed experts (expert parallelism's all-to-alls); None: all ``n_layers``.
    max_context_len : int
        Longest sequence (default: no practical limit).
    name, source : str
    """

    parameters: float
    kv_bytes: float | None = None
    kv_bytes_dtype: str = "bf16"
    embedding_parameters: float = 0.0
    lm_head_parameters: float = 0.0
    tied_embeddings: bool = False
    active_parameters: float | None = None
    n_experts: int = 1
    n_active_experts: int = 1
    attention_flops: float = 0.0
    kv_projection_parameters: float | None = None
    attention_parameters: float | None = None
    shapes: tuple = ()
    moe_layers: int | None = None
    max_context_len: int = TOTALS_MAX_CONTEXT
    sliding_window: int | None = None
    name: str = "totals"
    source: str = "user-defined totals"
    window_share: float = 1.0
    expert_dtype: str | None = None

    def __post_init__(self):
        def number(field, value, positive=False):
            if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) \
                    or not math.isfinite(float(value)) or value < 0 or (positive and value == 0):
                need = "a number > 0" if positive else "a number >= 0"
                raise ValueError(f"{field} must be {need}, got {value!r} (model {self.name!r})")
            return float(value)

        set_ = object.__setattr__
        set_(self, "parameters", number("parameters", self.parameters, positive=True))
        for field in ("embedding_parameters", "lm_head_parameters", "attention_flops"):
            set_(self, field, number(field, getattr(self, field)))
        if self.kv_bytes is not None:
            set_(self, "kv_bytes", number("kv_bytes_per_token", self.kv_bytes))
        if self.kv_projection_parameters is not None:
            set_(self, "kv_projection_parameters",
                 number("kv_projection_parameters", self.kv_projection_parameters))
        check_dtype(self.kv_bytes_dtype, "kv_dtype")
        if self.expert_dtype is not None:
            check_dtype(self.expert_dtype, "expert_dtype")
        share = number("window_share", self.window_share)
        if share > 1.0:
            raise ValueError(f"window_share must be in [0, 1] (the share of layers that attend within "
                             f"sliding_window), got {share!r} (model {self.name!r})")
        set_(self, "window_share", share)
        shapes = dict(self.shapes)
        for key, value in shapes.items():
            if key not in SHAPE_NAMES:
                raise unknown_name("shape", key, SHAPE_NAMES)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise ValueError(f"{key} must be an integer >= 1, got {value!r} (model {self.name!r})")
        set_(self, "shapes", tuple(sorted((k, int(v)) for k, v in shapes.items())))
        for field in ("n_experts", "n_active_experts", "max_context_len"):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise ValueError(f"{field} must be an integer >= 1, got {value!r} (model {self.name!r})")
        if self.n_active_experts > self.n_experts:
            raise ValueError(f"n_active_experts ({self.n_active_experts}) must be <= n_experts "
                             f"({self.n_experts}) (model {self.name!r})")
        if "n_heads" in shapes and "n_kv_heads" in shapes and shapes["n_heads"] % shapes["n_kv_heads"]:
            raise ValueError(f"n_heads ({shapes['n_heads']}) must be a multiple of n_kv_heads "
                             f"({shapes['n_kv_heads']}) in model {self.name!r}")
        head = self.embedding_parameters if self.tied_embeddings else self.lm_head_parameters
        if self.tied_embeddings and self.lm_head_parameters not in (0.0, self.embedding_parameters):
            raise ValueError("tied_embeddings=True: the LM head is the embedding table; give "
                             f"embedding_parameters only (got lm_head_parameters={self.lm_head_parameters:g})")
        outside = self.embedding_parameters + (0.0 if self.tied_embeddings else self.lm_head_parameters)
        if outside > self.parameters:
            raise ValueError(f"embedding_parameters + lm_head_parameters ({outside:g}) exceed parameters "
                             f"({self.parameters:g}) in model {self.name!r}: parameters counts them")
        del head
        if self.active_parameters is not None:
            active = number("active_parameters", self.active_parameters, positive=True)
            set_(self, "active_parameters", active)
            if active > self.parameters:
                raise ValueError(f"active_parameters ({active:g}) must be <= parameters "
                                 f"({self.parameters:g}) in model {self.name!r}")
            if active < self.parameters and self.n_experts == 1:
                raise ValueError(
                    f"active_parameters ({active:g}) < parameters ({self.parameters:g}) describes a "
                    f"mixture of experts: give n_experts and n_active_experts too (the step model "
                    f"counts the experts a batch touches), model {self.name!r}")
        elif self.n_experts > 1:
            raise ValueError(f"a mixture of experts given by totals needs active_parameters (the "
                             f"parameters one token uses), model {self.name!r}")
        if self.n_experts > 1:
            per_expert, shared = self._expert_split()
            if per_expert <= 0 or shared < outside:
                raise ValueError(
                    f"parameters={self.parameters:g} and active_parameters={self.active_parameters:g} "
                    f"with {self.n_experts} experts, {self.n_active_experts} active, give a negative "
                    f"shared part or expert (model {self.name!r})")

    # ---- the ModelConfig protocol -----------------------------------------------------------
    def _shape(self, key):
        value = dict(self.shapes).get(key)
        if value is None:
            raise MissingShapeError(
                f"model {self.name!r} was given by its totals without {key} ({SHAPE_NAMES[key]}); "
                f"give {key}= to model_from_totals for this function")
        return value

    n_layers = property(lambda self: self._shape("n_layers"), doc="L (raises MissingShapeError if not stated).")
    hidden_size = property(lambda self: self._shape("hidden_size"), doc="D (raises if not stated).")
    n_heads = property(lambda self: self._shape("n_heads"), doc="H (raises if not stated).")
    n_kv_heads = property(lambda self: self._shape("n_kv_heads"), doc="K (raises if not stated).")
    head_dim = property(lambda self: self._shape("head_dim"), doc="d_h (raises if not stated).")
    vocab_size = property(lambda self: self._shape("vocab_size"), doc="V (raises if not stated).")
    ffn_size = property(lambda self: self._shape("ffn_size"), doc="F (raises if not stated).")

    @property
    def is_moe(self) -> bool:
        return self.n_experts > 1

    @property
    def is_mla(self) -> bool:
        """False: a model given by its totals states its KV bytes directly (an MLA latent is just bytes)."""
        return False

    @property
    def n_moe_layers(self) -> int:
        """Layers with routed experts: ``moe_layers``, else n_layers (needs it), 0 for a dense model."""
        if not self.is_moe:
            return 0
        return self.moe_layers if self.moe_layers is not None else self.n_layers

    @property
    def attention_type(self) -> str:
        """``"MHA"``, ``"GQA"``, ``"MQA"``, or ``"unknown"`` when the heads are not stated."""
        shapes = dict(self.shapes)
        if "n_heads" not in shapes or "n_kv_heads" not in shapes:
            return "unknown"
        h, k = shapes["n_heads"], shapes["n_kv_heads"]
        return "MHA" if k == h else ("MQA" if k == 1 else "GQA")

    @property
    def group_size(self) -> int:
        """Query heads per KV head, G = H / K (needs both)."""
        return self.n_heads // self.n_kv_heads

    @property
    def ignored(self) -> tuple:
        """What these totals leave out (each counted as zero), for the record a calculator prints."""
        out = []
        if self.embedding_parameters == 0:
            out.append("input embedding (every parameter is a matmul parameter)")
        if self.lm_head_parameters == 0 and not self.tied_embeddings:
            out.append("LM head (read and multiplied like any layer)")
        if self.attention_flops == 0:
            out.append("attention FLOPs")
        if self.kv_bytes == 0:
            out.append("KV cache")
        return tuple(out)

    def _expert_split(self):
        e, k = self.n_experts, self.n_active_experts
        per_expert = (self.parameters - self.active_parameters) / (e - k) if e > k else 0.0
        return per_expert, self.parameters - e * per_expert

    def describe(self) -> str:
        """One line: the totals and what they leave out."""
        def si(x):
            return f"{x / 1e9:.4g}e9"
        text = f"{self.name}: {si(self.parameters)} parameters"
        if self.is_moe:
            text += f" ({si(self.active_parameters)} active, {self.n_active_experts} of {self.n_experts} experts)"
        if self.kv_bytes is not None:
            text += f", {self.kv_bytes:,.0f} B of KV per token in {self.kv_bytes_dtype}"
        if self.shapes:
            text += ", " + ", ".join(f"{k}={v}" for k, v in self.shapes)
        if self.ignored:
            text += "; ignored: " + ", ".join(self.ignored)
        return text


def model_from_totals(*, parameters=None, matmul_parameters=None, kv_bytes_per_token=None,
                      kv_dtype: str = "bf16", embedding_parameters=None, lm_head_parameters=None,
                      tied_embeddings: bool = False, active_parameters=None, n_experts: int = 1,
                      n_active_experts: int = 1, n_layers=None, hidden_size=None, n_heads=None,
                      n_kv_heads=None, head_dim=None, vocab_size=None, ffn_size=None,
                      attention_flops_per_pair=None, kv_projection_parameters=None,
                      max_context_len=TOTALS_MAX_CONTEXT, sliding_window=None, name: str = "totals",
                      source: str = "user-defined totals") -> ModelTotals:
    """A model built from totals: "a 30B dense model, 100 kB of KV per token in int8".

    Parameters
    ----------
    parameters : float
        N, all stored parameters (every expert). Give this or ``matmul_parameters``.
    matmul_parameters : float
        The parameters a token is multiplied by (the input embedding aside,
        the LM head included). Then ``parameters`` = matmul_parameters + the
        input embedding (untied).
    kv_bytes_per_token : float, optional
        KV-cache bytes one token adds, in bytes, **stated at** ``kv_dtype``
        (e.g. 100e3 with ``kv_dtype="int8"``). Run the deployment with the same
        ``kv_dtype`` to use it as stated; another KV dtype scales it. Default:
        2 L K d_h bytes x b_kv from the shapes, when they are given.
    kv_dtype : str
        The data type ``kv_bytes_per_token`` is stated in.
    embedding_parameters, lm_head_parameters : float, optional
        V x D of the input table and of the LM head. Default 0 (V x D when
        ``vocab_size`` and ``hidden_size`` are given): the embeddings are
        ignored and said so (:attr:`ModelTotals.ignored`).
    tied_embeddings : bool
        One V x D matrix serves both (give ``embedding_parameters`` only).
    active_parameters, n_experts, n_active_experts
        A mixture of experts: the parameters one token uses and the expert
        counts (the step model counts the experts a batch touches).
    n_layers, hidden_size, n_heads, n_kv_heads, head_dim, vocab_size, ffn_size : int, optional
        Shapes, where a function needs them: the all-reduces of tensor
        parallelism need ``n_layers`` and ``hidden_size``; KV-head replication
        and valid TP degrees need ``n_heads`` and ``n_kv_heads``; attention
        FLOPs need ``n_layers``, ``n_heads`` and ``head_dim``.
    attention_flops_per_pair : float, optional
        4 L H d_h, the FLOPs of one (query, key) pair; default from the shapes,
        else 0 (attention FLOPs ignored, and said so).
    kv_projection_parameters : float, optional
        K/V projection parameters (default 2 L D K d_h from the shapes).
    max_context_len : int
        Longest sequence (default no practical limit).

    Returns
    -------
    ModelTotals

    Notes
    -----
    With the embeddings ignored, a decode step reads N b_w bytes of weights
    and does 2 N FLOPs per token: the "2 N" and "N b_w" of How to Scale Your
    Model, kipply and CS336. With ``embedding_parameters`` = V D given, the
    library's rule applies: (N - V D) b_w read plus the gathered rows.
    Derived in the chapter "How to use this book" (totals as input).

    Examples
    --------
    >>> m = model_from_totals(parameters=30e9, kv_bytes_per_token=100e3, kv_dtype="int8")
    >>> m.describe()
    'totals: 30e9 parameters, 100,000 B of KV per token in int8; ignored: input embedding (every parameter is a matmul parameter), LM head (read and multiplied like any layer), attention FLOPs'
    >>> kv_bytes_per_token(m, "int8"), kv_bytes_per_token(m, "bf16")
    (100000.0, 200000.0)
    >>> model_from_totals(parameters=7e9).n_layers
    Traceback (most recent call last):
    ...
    servingmath.models.MissingShapeError: model 'totals' was given by its totals without n_layers (transformer layers L); give n_layers= to model_from_totals for this function
    """
    check_dtype(kv_dtype, "kv_dtype")
    shapes = {k: v for k, v in [("n_layers", n_layers), ("hidden_size", hidden_size), ("n_heads", n_heads),
                                ("n_kv_heads", n_kv_heads), ("head_dim", head_dim), ("vocab_size", vocab_size),
                                ("ffn_size", ffn_size)] if v is not None}
    if (parameters is None) == (matmul_parameters is None) and parameters is None:
        raise ValueError("model_from_totals needs parameters= (all stored parameters) or "
                         "matmul_parameters= (those a token is multiplied by)")
    if embedding_parameters is None:
        embedding_parameters = (float(vocab_size) * float(hidden_size)
                                if vocab_size is not None and hidden_size is not None else 0.0)
    if lm_head_parameters is None:
        lm_head_parameters = 0.0 if tied_embeddings or embedding_parameters == 0 else float(embedding_parameters)
    if matmul_parameters is not None:
        check_nonnegative("matmul_parameters", matmul_parameters)
        from_matmul = float(matmul_parameters) + (0.0 if tied_embeddings else float(embedding_parameters))
        if parameters is not None and not np.isclose(float(parameters), from_matmul, rtol=1e-9):
            raise ValueError(f"parameters ({float(parameters):g}) disagree with matmul_parameters + the "
                             f"input embedding ({from_matmul:g}); give one of them")
        parameters = from_matmul
    if kv_bytes_per_token is None and all(k in shapes for k in ("n_layers", "n_kv_heads", "head_dim")):
        kv_bytes_per_token = (2.0 * shapes["n_layers"] * shapes["n_kv_heads"] * shapes["head_dim"]
                              * bytes_per_element(kv_dtype))
    if attention_flops_per_pair is None:
        attention_flops_per_pair = (4.0 * shapes["n_layers"] * shapes["n_heads"] * shapes["head_dim"]
                                    if all(k in shapes for k in ("n_layers", "n_heads", "head_dim")) else 0.0)
    return ModelTotals(parameters=parameters, kv_bytes=kv_bytes_per_token, kv_bytes_dtype=kv_dtype,
                       embedding_parameters=embedding_parameters, lm_head_parameters=lm_head_parameters,
                       tied_embeddings=tied_embeddings, active_parameters=active_parameters,
                       n_experts=n_experts, n_active_experts=n_active_experts,
                       attention_flops=attention_flops_per_pair,
                       kv_projection_parameters=kv_projection_parameters, shapes=tuple(shapes.items()),
                       max_context_len=max_context_len, sliding_window=sliding_window, name=name,
                       source=source)


def _check_shape_name(parameter, name):
    if not isinstance(name, str):
        raise TypeError(f"{parameter} must be shape names (strings such as 'n_layers'), got {name!r}")
    if name not in SHAPE_NAMES:
        raise unknown_name(f"{parameter} entry (a shape)", name, SHAPE_NAMES)


def has_shape(model, name: str) -> bool:
    """True when ``model`` states the shape ``name`` (a :class:`ModelConfig` states them all).

    Derived in the chapter "Anatomy of a request" (notebooks/01_anatomy_of_a_request.ipynb).

    >>> has_shape("Llama-3.1-8B", "n_layers"), has_shape(model_from_totals(parameters=7e9), "n_layers")
    (True, False)
    """
    _check_shape_name("name", name)
    model = get_model(model)
    if isinstance(model, ModelTotals):
        return name in dict(model.shapes)
    return True


def require_shape(model, *names: str, needed_for: str):
    """The shapes ``names`` of ``model``, or a :class:`MissingShapeError` naming those missing and why.

    Derived in the chapter "Anatomy of a request" (notebooks/01_anatomy_of_a_request.ipynb).

    >>> require_shape("Llama-3.1-8B", "n_layers", "hidden_size", needed_for="the all-reduces")
    (32, 4096)
    >>> require_shape(model_from_totals(parameters=7e9), "n_layers", "hidden_size", needed_for="the all-reduces")
    Traceback (most recent call last):
    ...
    servingmath.models.MissingShapeError: the all-reduces need n_layers and hidden_size (transformer layers L, model width D), which model 'totals' (given by its totals) does not state: give n_layers=, hidden_size= to model_from_totals
    """
    if not isinstance(needed_for, str) or not needed_for:
        raise TypeError(f"needed_for must say what needs the shapes (a string), got {needed_for!r}")
    for n in names:
        _check_shape_name("names", n)
    model = get_model(model)
    missing = [n for n in names if not has_shape(model, n)]
    if missing:
        what = ", ".join(SHAPE_NAMES[n] for n in missing)
        raise MissingShapeError(
            f"{needed_for} need {' and '.join(missing)} ({what}), which model {model.name!r} (given by "
            f"its totals) does not state: give {', '.join(n + '=' for n in missing)} to model_from_totals")
    return tuple(getattr(model, n) for n in names)


def as_totals(model, *, name=None) -> ModelTotals:
    """The totals of a catalog model, with every count it has: the same numbers through the totals path.

    Derived in the chapter "Anatomy of a request" (notebooks/01_anatomy_of_a_request.ipynb).

    ``decode_step_time(as_totals(m), ...)`` equals ``decode_step_time(m, ...)``
    (the test suite checks it), which is how the book shows that the step
    model reads nothing but these totals.

    >>> t = as_totals("Llama-3.1-8B")
    >>> parameter_count(t) == parameter_count("Llama-3.1-8B"), t.attention_type
    (True, 'GQA')
    """
    model = get_model(model)
    if isinstance(model, ModelTotals):
        return model
    shared, per_expert = expert_parameter_split(model)
    shapes = dict(n_layers=model.n_layers, hidden_size=model.hidden_size, n_heads=model.n_heads,
                  n_kv_heads=model.n_kv_heads, head_dim=model.head_dim, vocab_size=model.vocab_size,
                  ffn_size=model.ffn_size)
    return ModelTotals(
        parameters=float(parameter_count(model)),
        kv_bytes=float(kv_bytes_per_token(model, "bf16")), kv_bytes_dtype="bf16",
        embedding_parameters=float(input_embedding_parameter_count(model)),
        lm_head_parameters=0.0 if model.tied_embeddings else float(lm_head_parameter_count(model)),
        tied_embeddings=model.tied_embeddings,
        active_parameters=float(active_parameter_count(model)) if model.is_moe else None,
        n_experts=model.n_experts, n_active_experts=model.n_active_experts,
        attention_flops=float(attention_flops_per_pair(model)),
        kv_projection_parameters=float(kv_projection_parameter_count(model)),
        attention_parameters=float(attention_parameter_count(model)),
        shapes=tuple(shapes.items()), moe_layers=model.n_moe_layers if model.is_moe else None,
        max_context_len=model.max_context_len, sliding_window=model.sliding_window,
        name=name or f"{model.name} (totals)", source=model.source,
        window_share=window_of(model)[1] if model.sliding_window else 1.0, expert_dtype=model.expert_dtype)


#: How :func:`with_kv_heads` treats the weights when the KV heads change.
GQA_WEIGHTS = ("recompute", "fixed")


def with_kv_heads(model, n_kv_heads: int, *, weights: str = "recompute"):
    """The model with ``n_kv_heads`` KV heads: grouped-query attention as a what-if.

    Parameters
    ----------
    model : str, ModelConfig or ModelTotals
    n_kv_heads : int
        K', a divisor of the query heads.
    weights : {"recompute", "fixed"}
        ``"recompute"`` (the book's default): the K and V projections shrink
        with the heads, P' = P - 2 L D d_h (K - K'), as in a real GQA model
        (CS336's lecture 10 recomputes them). ``"fixed"``: the parameter count
        is kept and only the KV cache shrinks by K'/K, the convention of How
        to Scale Your Model's LLaMA-2-13B table ("keep the total number of
        params the same, but make the KV cache 5x smaller").

    Returns
    -------
    ModelConfig (recompute, for a ModelConfig) or ModelTotals

    Notes
    -----
    KV bytes per token scale as K'/K in both; the attention FLOPs (4 L H d_h)
    do not depend on K. The two differ only in the weight bytes:
    2 L D d_h (K - K') b_w, 1.7 GB for LLaMA-2-13B at K' = 8 in bf16.
    Derived in the chapter "Memory".

    Examples
    --------
    >>> gqa = with_kv_heads("Llama-2-13B", 8)
    >>> kv_bytes_per_token(gqa) / kv_bytes_per_token("Llama-2-13B")
    0.2
    >>> round((parameter_count("Llama-2-13B") - parameter_count(gqa)) / 1e9, 3)   # 2 L D d_h (K - K')
    1.678
    >>> parameter_count(with_kv_heads("Llama-2-13B", 8, weights="fixed")) == parameter_count("Llama-2-13B")
    True
    """
    model = get_model(model)
    check_choice("weights", weights, GQA_WEIGHTS)
    k_new = int(check_integer("n_kv_heads", check_scalar("n_kv_heads", n_kv_heads), minimum=1))
    if isinstance(model, ModelConfig):
        if model.n_heads % k_new:
            raise ValueError(f"n_kv_heads = {k_new} must divide {model.name}'s {model.n_heads} query heads")
        if weights == "recompute":
            return replace(model, n_kv_heads=k_new, name=f"{model.name} (K={k_new})")
        model = as_totals(model, name=f"{model.name} (K={k_new}, weights fixed)")
    else:
        model = replace(model, name=f"{model.name} (K={k_new})")
    k_old = require_shape(model, "n_kv_heads", needed_for="changing the KV heads")[0]
    if has_shape(model, "n_heads") and model.n_heads % k_new:
        raise ValueError(f"n_kv_heads = {k_new} must divide {model.name}'s {model.n_heads} query heads")
    ratio = k_new / k_old
    shapes = dict(model.shapes)
    shapes["n_kv_heads"] = k_new
    changes = dict(shapes=tuple(shapes.items()),
                   kv_bytes=None if model.kv_bytes is None else model.kv_bytes * ratio)
    p_kv = kv_projection_parameter_count(model)
    if weights == "recompute":
        delta = p_kv * (1.0 - ratio)
        changes.update(parameters=model.parameters - delta,
                       active_parameters=None if model.active_parameters is None
                       else model.active_parameters - delta)
    changes["kv_projection_parameters"] = p_kv * ratio
    return replace(model, **changes)


def _get(config: dict, *keys, default=None):
    for key in keys:
        if key in config and config[key] is not None:
            return config[key]
    return default


def model_from_hf_config(config: dict, name: str | None = None, source: str = "config dict") -> ModelConfig:
    """Build a :class:`ModelConfig` from a Hugging Face config dictionary."""
    if not isinstance(config, dict):
        raise ValueError(f"config must be a dict parsed from config.json, got {type(config).__name__}")
    if isinstance(config.get("text_config"), dict) and _get(config, "hidden_size", "n_embd", "d_model") is None:
        # a multimodal checkpoint (gemma-3, Mistral-Small-3.1, Llama-4): the language model is nested
        outer = {k: config[k] for k in ("quantization_config", "servingmath") if k in config}
        config = {**config["text_config"], **outer}
    model_type = config.get("model_type", "")
    for key, what in (("global_head_dim", "full-attention layers with their own head size"),
                      ("num_global_key_value_heads", "full-attention layers with their own KV heads"),
                      ("num_kv_shared_layers", "layers that reuse another layer's KV cache"),
                      ("kv_sharing_layer_map", "layers that reuse another layer's KV cache")):
        if config.get(key):   # gemma-4-style heterogeneous attention: one head layout per model is assumed
            raise ValueError(f"config {name or source!r}: {key} = {config[key]!r} ({what}) is not modelled; "
                             "every layer is taken to have the same heads and its own cache")
    if config.get("attention_chunk_size"):
        raise ValueError(f"config {name or source!r}: attention_chunk_size = {config['attention_chunk_size']} "
                         "(Llama-4's chunked local attention) is not modelled; only full attention and "
                         "sliding windows are")
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
    moe = _moe_fields(config, name or source, ffn)
    mla = _mla_fields(config)
    window, window_layers = _window_fields(config, int(layers), name or source)
    expert_dtype = meta.get("expert_dtype")
    quant = config.get("quantization_config") or {}
    if expert_dtype is None and quant.get("quant_method") == "mxfp4" and moe["n_experts"] > 1:
        expert_dtype = "mxfp4"   # gpt-oss: the MXFP4 format quantises the experts only
    return ModelConfig(
        name=name or meta.get("name") or config.get("_name_or_path") or "unnamed",
        n_layers=int(layers),
        hidden_size=int(hidden),
        n_heads=int(heads),
        n_kv_heads=1 if mla else int(kv_heads),
        head_dim=int(mla.pop("head_dim")) if mla else int(head_dim),
        ffn_size=int(moe.pop("ffn_size")),
        ffn_gated=gated,
        vocab_size=int(config["vocab_size"]),
        # transformers' defaults where a config leaves it out: gemma ties, Llama-style configs do not
        tied_embeddings=bool(config.get("tie_word_embeddings", model_type.startswith("gemma"))),
        n_experts=int(moe.pop("n_experts")),
        n_active_experts=int(_get(config, "num_experts_per_tok", "experts_per_token", default=1)),
        max_context_len=int(_get(config, "max_position_embeddings", "n_positions", "max_seq_len", default=4096)),
        qkv_bias=bool(config.get("attention_bias", model_type in {"qwen2", "qwen2_moe"})),
        ffn_bias=bool(config.get("mlp_bias", gptj_like)),
        norm_bias=gptj_like,
        lm_head_bias=model_type == "gptj",
        # gemma-2/3 norm before and after both attention and FFN
        norms_per_layer=1 if model_type == "gptj" else 4 if model_type in ("gemma2", "gemma3", "gemma3_text") else 2,
        sliding_window=window,
        sliding_window_layers=window_layers,
        expert_dtype=expert_dtype,
        source=meta.get("source", source),
        **moe,
        **mla,
    )


def _window_fields(config: dict, n_layers: int, where) -> tuple:
    """(sliding_window, sliding_window_layers) of a Hugging Face config.

    ``layer_types`` (recent transformers) names each layer's attention; without it,
    gemma-2 and gpt-oss alternate windowed and full layers starting with a windowed
    one, gemma-3 has ``sliding_window_pattern`` - 1 windowed layers before each full
    one, and any other model with a ``sliding_window`` (Mistral-7B v0.1) windows every
    layer. Qwen2's ``use_sliding_window: false`` means no window. Layer types other than
    full and sliding attention (linear attention, state-space layers) are refused.
    """
    window = config.get("sliding_window")
    if not window or not config.get("use_sliding_window", True):
        return None, None
    window = int(window)
    types = config.get("layer_types")
    model_type = config.get("model_type", "")
    if types:
        other = sorted({t for t in types if t not in ("sliding_attention", "full_attention")})
        if other:
            raise ValueError(f"config {where!r}: layer_types {', '.join(map(repr, other))} are not modelled; "
                             "only 'full_attention' and 'sliding_attention' layers are")
        if len(types) != n_layers:
            raise ValueError(f"config {where!r}: layer_types names {len(types)} layers, num_hidden_layers "
                             f"is {n_layers}")
        return window, sum(t == "sliding_attention" for t in types)
    if model_type in ("gemma2", "gpt_oss"):
        return window, (n_layers + 1) // 2
    if model_type in ("gemma3", "gemma3_text"):
        pattern = int(config.get("sliding_window_pattern", 6))
        return window, n_layers - n_layers // pattern
    return window, None


def _moe_fields(config: dict, where, ffn) -> dict:
    """The mixture-of-experts fields of a Hugging Face config (Mixtral, Qwen2/3-MoE, DeepSeek-V2/V3).

    Routed experts: ``num_local_experts`` (Mixtral), ``num_experts`` (Qwen) or
    ``n_routed_experts`` (DeepSeek), each of ``moe_intermediate_size`` where the
    config has one (else ``intermediate_size``, Mixtral's convention). Shared
    experts: DeepSeek's ``n_shared_experts`` (of ``moe_intermediate_size``) or
    Qwen2-MoE's one ``shared_expert_intermediate_size``. Dense layers: DeepSeek's
    ``first_k_dense_replace`` first layers, of ``intermediate_size``. Layouts the
    library does not model (MoE every other layer) are refused by name.
    """
    n_experts = int(_get(config, "num_local_experts", "num_experts", "n_routed_experts", default=1))
    if n_experts <= 1:
        return {"ffn_size": ffn, "n_experts": 1}
    for key, ok in [("moe_layer_freq", 1), ("decoder_sparse_step", 1)]:
        if config.get(key, ok) != ok:
            raise ValueError(f"config {where!r}: {key} = {config[key]!r} (an MoE layer every "
                             f"{config[key]} layers) is not modelled; only every layer (1) is")
    if config.get("mlp_only_layers"):
        raise ValueError(f"config {where!r}: mlp_only_layers = {config['mlp_only_layers']!r} (dense layers "
                         "inside an MoE stack) is not modelled; only DeepSeek's first_k_dense_replace is")
    expert = int(_get(config, "moe_intermediate_size", default=ffn))
    fields = {"ffn_size": expert, "n_experts": n_experts}
    if config.get("n_shared_experts"):
        fields.update(n_shared_experts=int(config["n_shared_experts"]), shared_expert_ffn_size=expert)
    elif config.get("shared_expert_intermediate_size"):
        fields.update(n_shared_experts=1, shared_expert_ffn_size=int(config["shared_expert_intermediate_size"]))
    if config.get("first_k_dense_replace"):
        fields.update(n_dense_layers=int(config["first_k_dense_replace"]), dense_ffn_size=int(ffn))
    return fields


def _mla_fields(config: dict) -> dict:
    """The multi-head latent attention fields of a DeepSeek-V2/V3 config ({} without MLA)."""
    if config.get("kv_lora_rank") is None:
        return {}
    rope = int(config.get("qk_rope_head_dim", 0))
    nope = int(_get(config, "qk_nope_head_dim", default=128))
    return {"kv_lora_rank": int(config["kv_lora_rank"]), "q_lora_rank": _get(config, "q_lora_rank"),
            "qk_rope_head_dim": rope, "v_head_dim": int(_get(config, "v_head_dim", default=nope)),
            "head_dim": nope + rope}


def load_model_config(path, name: str | None = None) -> ModelConfig:
    """Read a Hugging Face style ``config.json`` from disk (no network).

    Derived in the chapter "Anatomy of a request" (notebooks/01_anatomy_of_a_request.ipynb).

    Parameters
    ----------
    path : str or Path
        A ``config.json`` file, or a folder that holds one (a downloaded checkpoint).
    name : str, optional
        Display name; defaults to the file's ``servingmath.name``, ``_name_or_path``
        or the folder name.

    Examples
    --------
    >>> from importlib.resources import files
    >>> path = files("servingmath") / "data" / "models" / "llama-3_1-8b.json"
    >>> m = load_model_config(path)
    >>> m.name, m.n_layers, m.hidden_size
    ('Llama-3.1-8B', 32, 4096)
    """
    path = check_path("path", path)
    if path.is_dir():
        path = path / "config.json"
    if not path.is_file():
        raise MissingFileError(f"path {str(path)!r} is not a config.json file or a folder holding one")
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
    """Names of the catalog models.

    Derived in the chapter "Anatomy of a request" (notebooks/01_anatomy_of_a_request.ipynb).

    Examples
    --------
    >>> "Llama-3.1-8B" in list_models()
    True
    """
    return list(_catalog())


def get_model(name) -> ModelConfig:
    """Look up a catalog model by name; a :class:`ModelConfig` or a path to a config.json passes through.

    Derived in the chapter "How to use this book" (notebooks/00_how_to_use_this_book.ipynb).

    Raises
    ------
    KeyError
        For an unknown name, with the closest catalog names.

    Examples
    --------
    >>> m = get_model("Llama-3.1-8B")
    >>> m.name, m.n_layers, m.n_kv_heads
    ('Llama-3.1-8B', 32, 8)
    """
    if isinstance(name, (ModelConfig, ModelTotals)):
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


def _attention_parameters(model: ModelConfig) -> int:
    """Parameters of one layer's attention block (projections, their biases, MLA's latent norms)."""
    d, h, k, dh = model.hidden_size, model.n_heads, model.n_kv_heads, model.head_dim
    if model.is_mla:
        c, r, q = model.kv_lora_rank, model.qk_rope_head_dim, model.q_lora_rank
        v = model.v_head_dim or dh
        query = d * h * dh if q is None else d * q + q + q * h * dh   # W_DQ, its norm, W_UQ
        latent = d * (c + r) + c + c * h * (dh - r + v)             # W_DKV (+ rope key), norm, W_UK and W_UV
        return query + latent + h * v * d
    attention = d * h * dh + 2 * d * k * dh + h * dh * d
    if model.qkv_bias:
        attention += h * dh + 2 * k * dh
    return attention


def _ffn_parameters(model: ModelConfig, size: int) -> int:
    """Parameters of one FFN of intermediate size ``size`` (gated: three matrices)."""
    d = model.hidden_size
    ffn = (3 if model.ffn_gated else 2) * d * size
    if model.ffn_bias:
        ffn += size + d
    return ffn


def _layer_parameters(model: ModelConfig) -> tuple[int, int]:
    """(parameters of one MoE-style block outside its routed experts, parameters of one routed expert).

    The block holds attention, norms, the router and the shared experts. A dense
    model is one "expert" per layer with no router.
    """
    d = model.hidden_size
    norms = model.norms_per_layer * d * (2 if model.norm_bias else 1)
    router = d * model.n_experts if model.is_moe else 0
    shared = model.n_shared_experts * _ffn_parameters(model, model.shared_expert_ffn_size or model.ffn_size)
    return _attention_parameters(model) + norms + router + shared, _ffn_parameters(model, model.ffn_size)


def _dense_layer_parameters(model: ModelConfig) -> int:
    """Parameters of one of the first ``n_dense_layers`` layers: attention, norms and a dense FFN."""
    d = model.hidden_size
    norms = model.norms_per_layer * d * (2 if model.norm_bias else 1)
    return _attention_parameters(model) + norms + _ffn_parameters(model, model.dense_ffn_size or model.ffn_size)


def _embedding_parameters(model: ModelConfig) -> tuple[int, int]:
    """(input embedding + final norm, LM head)."""
    d, v = model.hidden_size, model.vocab_size
    final_norm = d * (2 if model.norm_bias else 1)
    head = 0 if model.tied_embeddings else v * d + (v if model.lm_head_bias else 0)
    return v * d + final_norm, head


def _split(model: ModelConfig) -> tuple[int, int]:
    """(shared parameters, parameters of one routed expert summed over the MoE layers)."""
    block, expert = _layer_parameters(model)
    embed, head = _embedding_parameters(model)
    moe_layers = model.n_layers - model.n_dense_layers
    shared = moe_layers * block + model.n_dense_layers * _dense_layer_parameters(model) + embed + head
    return shared, moe_layers * expert


def parameter_count(model) -> int:
    """Total parameters N (every expert counted).

    Derived in the chapter "How to use this book" (notebooks/00_how_to_use_this_book.ipynb).

    Examples
    --------
    >>> parameter_count("Llama-3.1-70B")
    70553706496
    >>> parameter_count("Mixtral-8x7B")
    46702792704
    >>> round(parameter_count("DeepSeek-V3") / 1e9, 1)   # the report's 671B (MTP module excluded)
    671.0
    """
    model = get_model(model)
    if isinstance(model, ModelTotals):
        return model.parameters
    shared, per_expert = _split(model)
    return shared + model.n_experts * per_expert


def active_parameter_count(model) -> int:
    """Parameters used per token (MoE: the shared ones and the active experts); N for dense models.

    Derived in the chapter "Mixture of experts and expert parallelism" (notebooks/16_mixture_of_experts.ipynb).

    Examples
    --------
    >>> active_parameter_count("Mixtral-8x7B")
    12879925248
    >>> round(active_parameter_count("Qwen3-235B-A22B") / 1e9, 1)   # "22B activated"
    22.2
    """
    model = get_model(model)
    if isinstance(model, ModelTotals):
        return model.parameters if model.active_parameters is None else model.active_parameters
    shared, per_expert = _split(model)
    return shared + model.n_active_experts * per_expert


def attention_parameter_count(model) -> int:
    """Parameters of the attention blocks of all layers (projections and their biases; MLA: the latent
    projections and norms too).

    Derived in the chapter "Anatomy of a request" (notebooks/01_anatomy_of_a_request.ipynb).

    >>> attention_parameter_count("Llama-3.1-8B")
    1342177280
    >>> round(attention_parameter_count("DeepSeek-V3") / 1e9, 2)   # MLA: 187 M per layer
    11.41
    """
    model = get_model(model)
    if isinstance(model, ModelTotals):
        if model.attention_parameters is not None:
            return model.attention_parameters
        layers, d, h, dh = require_shape(model, "n_layers", "hidden_size", "n_heads", "head_dim",
                                         needed_for="the attention parameters")
        return 2.0 * layers * d * h * dh + kv_projection_parameter_count(model)
    return model.n_layers * _attention_parameters(model)


def weight_bytes(model, dtype: str = "bf16") -> float:
    """Bytes of all weights stored in ``dtype``: N x bytes per element.

    Derived in the chapter "Anatomy of a request" (notebooks/01_anatomy_of_a_request.ipynb).

    A model whose checkpoint quantises only its routed experts (``expert_dtype``,
    gpt-oss) stores them in that dtype and the rest in ``dtype``:
    P_shared b + E P_e b_e (:func:`expert_parameter_split`).

    Examples
    --------
    >>> weight_bytes("Llama-2-7B", "bf16") / 1e9
    13.476831232
    >>> round(weight_bytes("gpt-oss-120b", "bf16") / 2**30, 1)   # GiB: MXFP4 experts, the rest bf16
    60.7
    """
    model = get_model(model)
    if model.expert_dtype is None:
        return parameter_count(model) * bytes_per_element(dtype)
    shared, per_expert = expert_parameter_split(model)
    return float(shared * bytes_per_element(dtype)
                 + model.n_experts * per_expert * bytes_per_element(model.expert_dtype))


def kv_bytes_per_token(model, dtype: str = "bf16") -> float:
    """KV-cache bytes one token adds: 2 x layers x KV heads x head size x bytes.

    The 2 is one key and one value vector per KV head per layer. With
    multi-head latent attention (MLA) each layer caches one latent of d_c
    values and one RoPE key of d_R values, shared by every head:
    L (d_c + d_R) bytes per element (DeepSeek-V2, section 2.1; derived in the
    chapter "Mixture of experts").

    Examples
    --------
    >>> kv_bytes_per_token("Llama-2-70B", "fp8")
    163840.0
    >>> kv_bytes_per_token("DeepSeek-V3", "bf16")   # 61 x (512 + 64) x 2
    70272.0
    """
    model = get_model(model)
    if isinstance(model, ModelTotals):
        if model.kv_bytes is None:
            raise MissingShapeError(
                f"model {model.name!r} was given by its totals without kv_bytes_per_token: give "
                "kv_bytes_per_token= (bytes per token at kv_dtype=), or n_layers=, n_kv_heads= and "
                "head_dim= to model_from_totals (0 ignores the KV cache)")
        return model.kv_bytes * bytes_per_element(dtype) / bytes_per_element(model.kv_bytes_dtype)
    if model.is_mla:
        return float(model.n_layers * (model.kv_lora_rank + model.qk_rope_head_dim) * bytes_per_element(dtype))
    return 2.0 * model.n_layers * model.n_kv_heads * model.head_dim * bytes_per_element(dtype)


def _check_window(window, layers, n_layers, name):
    """Check a model's sliding window and how many layers use it (see :class:`ModelConfig`)."""
    if window is not None and (isinstance(window, bool) or not isinstance(window, (int, np.integer))
                               or window < 1):
        raise ValueError(f"sliding_window must be None or an integer >= 1, got {window!r} (model {name!r})")
    if layers is None:
        return
    if window is None:
        raise ValueError(f"sliding_window_layers ({layers!r}) counts the layers that attend within the "
                         f"sliding window, but model {name!r} has none: give sliding_window too")
    if isinstance(layers, bool) or not isinstance(layers, (int, np.integer)) or not 0 <= layers <= n_layers:
        raise ValueError(f"sliding_window_layers must be an integer in [0, n_layers = {n_layers}], got "
                         f"{layers!r} (model {name!r})")


def window_of(model) -> tuple:
    """(w, phi): the sliding window and the share of layers that use it; (None, 0.0) without one.

    Derived in the chapter "Memory: weights, the KV cache and the largest batch that fits" (notebooks/03_memory.ipynb).

    A token at context S reads (1 - phi) S + phi min(S, w) keys per layer on
    average, since every layer has the same heads: the step model's counts
    of a hybrid model are the full and windowed counts weighted by their
    shares of the layers.

    >>> window_of("Mistral-7B"), window_of("Llama-3.1-8B")
    ((4096, 1.0), (None, 0.0))
    >>> window_of("gpt-oss-120b")    # 18 of its 36 layers attend to the last 128 tokens
    (128, 0.5)
    """
    model = get_model(model)
    w = model.sliding_window
    if w is None:
        return None, 0.0
    if isinstance(model, ModelTotals):
        return int(w), float(model.window_share)
    layers = model.sliding_window_layers
    return int(w), 1.0 if layers is None else layers / model.n_layers


def check_context_len(model, context_len, name: str = "context_len"):
    """Check 0 <= context_len <= the model's maximum; return it as an array.

    Derived in the chapter "Anatomy of a request" (notebooks/01_anatomy_of_a_request.ipynb).

    Examples
    --------
    >>> check_context_len("Llama-3.1-8B", [1024, 8192])
    array([1024., 8192.])
    """
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
    if isinstance(model, ModelTotals):
        return model.embedding_parameters
    return model.vocab_size * model.hidden_size


def lm_head_parameter_count(model) -> int:
    """Weights of the LM head, V x D: multiplied at every position that emits logits (tied or not).

    Derived in the chapter "Anatomy of a request" (notebooks/01_anatomy_of_a_request.ipynb).

    >>> lm_head_parameter_count("Llama-2-7B")
    131072000
    """
    model = get_model(model)
    if isinstance(model, ModelTotals):
        return model.embedding_parameters if model.tied_embeddings else model.lm_head_parameters
    return model.vocab_size * model.hidden_size


def matmul_parameter_count(model) -> int:
    """Parameters that take part in matmuls per token: active parameters minus the input
    embedding (a table look-up), plus the LM head when tied (it still multiplies).

    Derived in the chapter "Rooflines" (2 FLOPs per parameter per token).

    >>> matmul_parameter_count("Llama-2-7B")
    6607343616
    """
    model = get_model(model)
    table = input_embedding_parameter_count(model)
    p = active_parameter_count(model) - table
    if model.tied_embeddings:
        p += table
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

    For multi-head latent attention it is the down-projection to the latent
    and the RoPE key, L x D x (d_c + d_R): every GPU of a tensor-parallel group
    keeps it whole, as it keeps the whole latent cache (one "KV head").

    >>> kv_projection_parameter_count("Llama-3.1-70B")
    1342177280
    >>> kv_projection_parameter_count("DeepSeek-V3")   # 61 x 7168 x 576
    251854848
    """
    model = get_model(model)
    if isinstance(model, ModelTotals):
        if model.kv_projection_parameters is not None:
            return model.kv_projection_parameters
        if not has_shape(model, "n_kv_heads"):
            return 0.0   # the KV heads are not stated: nothing is replicated (the KV share is 1/N)
        d, k, dh, layers = require_shape(model, "hidden_size", "n_kv_heads", "head_dim", "n_layers",
                                         needed_for="the K/V projection weights")
        return 2.0 * layers * d * k * dh
    if model.is_mla:
        return model.n_layers * model.hidden_size * (model.kv_lora_rank + model.qk_rope_head_dim)
    per_layer = 2 * model.hidden_size * model.n_kv_heads * model.head_dim
    if model.qkv_bias:
        per_layer += 2 * model.n_kv_heads * model.head_dim
    return model.n_layers * per_layer


def expert_parameter_split(model) -> tuple[int, int]:
    """(parameters outside the routed experts, parameters of one routed expert summed over the MoE layers).

    Every parameter is in exactly one of: the shared part (embeddings, LM head,
    attention, norms, routers, shared experts, the FFNs of the dense layers) or
    one of the E routed experts, so ``shared + E x per_expert ==
    parameter_count(model)`` and ``shared + k x per_expert ==
    active_parameter_count(model)``. A dense model is one expert. Derived in the
    chapter "Mixture of experts".

    >>> expert_parameter_split("Mixtral-8x7B")
    (1605636096, 5637144576)
    >>> [round(x / 1e9, 3) for x in expert_parameter_split("DeepSeek-V3")]   # 58 MoE layers
    [17.118, 2.554]
    """
    model = get_model(model)
    if isinstance(model, ModelTotals):
        if not model.is_moe:
            return model.parameters, 0.0
        per_expert, shared = model._expert_split()
        return shared, per_expert
    return _split(model)


def attention_flops_per_pair(model) -> float:
    """FLOPs of one (query, key) pair of attention summed over layers and query heads: 4 L H d_h.

    q k^T and p v are two multiply-adds per element of a head, two FLOPs each
    (chapter "Rooflines").

    Multi-head latent attention is counted as DeepSeek's inference runs it,
    with the key and value up-projections **absorbed** into the query and the
    output (``attn_impl = "absorb"``): each head scores its query against the
    cached latent and RoPE key (d_c + d_R values) and sums the latents
    (d_c values), 2 L H (2 d_c + d_R) FLOPs per pair. The absorbed
    projections cost 2 x their parameters per query token, the same as
    applying them once per new token, so the matmul count is unchanged.
    Derived in the chapter "Mixture of experts".

    >>> attention_flops_per_pair("Llama-3.1-8B")
    524288.0
    >>> attention_flops_per_pair("DeepSeek-V3")   # 2 x 61 x 128 x (2 x 512 + 64)
    16990208.0

    References
    ----------
    DeepSeek-AI, "DeepSeek-V2", arXiv:2405.04434 (2024), section 2.1 (MLA, the
    absorbed up-projections); github:deepseek-ai/DeepSeek-V3 ``inference/model.py``
    (``attn_impl: Literal["naive", "absorb"] = "absorb"``), commit 9b4e9788, read 2026-12.
    """
    model = get_model(model)
    if isinstance(model, ModelTotals):
        return model.attention_flops
    if model.is_mla:
        return 2.0 * model.n_layers * model.n_heads * (2 * model.kv_lora_rank + model.qk_rope_head_dim)
    return 4.0 * model.n_layers * model.n_heads * model.head_dim


def flops_per_token(model, context_len=0):
    """Forward-pass FLOPs for one token that attends to ``context_len`` earlier tokens.

    Derived in the chapter "Rooflines: why decoding is bandwidth-bound" (notebooks/02_rooflines.ipynb).

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
