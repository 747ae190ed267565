"""One deployment: the model, the accelerator and every setting that decides how fast a step runs.

A :class:`Deployment` is a frozen, validated value: model, accelerator,
tensor parallelism, the three data types (weights, KV cache, matmuls), the
efficiencies (MFU, MBU), the overlap model, the all-reduce cost model, the
per-step overhead and the memory budget (share of memory, reserve, capacity).
It is checked once, when it is built, with errors that name the setting, the
value and what is allowed; ``.replace()`` makes variations.

One convention for every function a chapter calls
---------------------------------------------------
Every function of the library that needs a deployment takes, as its first
arguments, **either** a model and an accelerator (catalog names or config
objects) **or** one :class:`Deployment` (then leave the accelerator out), then
its own positional arguments (batch, then lengths), and every deployment
setting as a keyword option (:data:`DEPLOYMENT_OPTIONS`)::

    decode.decode_step_time("Llama-3.1-8B", "H100", 64, 2048, weight_dtype="fp8")
    dep = Deployment.build("Llama-3.1-8B", "H100", weight_dtype="fp8")
    decode.decode_step_time(dep, 64, 2048)                  # the same number
    decode.decode_step_time(dep, 64, 2048, mbu=0.8)         # dep.replace(mbu=0.8)

The defaults are the **physical bound**: every efficiency 1.0, no latency,
no overhead. ``setting="realistic"`` starts from the book's one realistic
setting instead (:mod:`servingmath.settings`); options given beside it override it.

Numeric settings (tensor parallelism, efficiencies, latencies) may be arrays:
results broadcast over them, as over batch sizes and lengths.

Examples
--------
>>> dep = Deployment.build("Llama-3.1-70B", "H100", tensor_parallel=8, weight_dtype="fp8")
>>> dep.describe()
'Llama-3.1-70B on 8 x H100-SXM5-80GB, weights fp8, KV bf16, math bf16, MFU 1, MBU 1, hybrid overlap'
>>> dep.replace(tensor_parallel=3)
Traceback (most recent call last):
...
ValueError: tensor_parallel = 3 cannot split Llama-3.1-70B: 3 does not divide its 64 query heads. Allowed degrees: 1, 2, 4, 8, 16, 32, 64
>>> Deployment.build("Llama-3.1-8B", "H100", mfu=0)
Traceback (most recent call last):
...
ValueError: mfu must be in (0, 1], got 0
"""

from __future__ import annotations

import difflib
import functools
import inspect
from dataclasses import dataclass, field, fields, replace

import numpy as np

from ._validation import (ValueFields, check_choice, check_fraction, check_nonempty, check_nonnegative, check_positive,
                          freeze_number, unknown_name)
from .datatypes import check_dtype
from .hardware import Accelerator, get_accelerator
from .models import ModelConfig, get_model
from .settings import SETTINGS, setting_options
from .sharding import KV_SHARDINGS, AllReduce, check_expert_parallel, check_tensor_parallel

__all__ = [
    "Deployment",
    "AllReduce",
    "OVERLAP_MODELS",
    "DEFAULT_GPU_MEMORY_UTILIZATION",
    "DEPLOYMENT_OPTIONS",
    "ALLREDUCE_OPTIONS",
    "SETTINGS",
    "deployment_function",
    "as_deployment",
    "auto_compute_dtype",
]

#: vLLM's default share of GPU memory one server may use (``--gpu-memory-utilization``).
DEFAULT_GPU_MEMORY_UTILIZATION = 0.9

#: How the memory and compute parts of a step combine (see :mod:`servingmath.step`).
OVERLAP_MODELS = ("additive", "roofline", "hybrid")

#: Flat keyword names of the all-reduce model, as the functions take them -> AllReduce field.
ALLREDUCE_OPTIONS = {"allreduce_latency": "latency", "allreduce_base_latency": "base_latency",
                     "link_efficiency": "link_efficiency", "allreduce_dtype": "dtype",
                     "allreduce_ring_factor": "ring_factor", "allreduce_protocol": "protocol"}

def _numeric(name, value, check):
    return freeze_number(check_nonempty(name, check(name, value)))


@dataclass(frozen=True, eq=False)
class Deployment(ValueFields):
    """A model served on accelerators with every setting that decides its step time and memory.

    Attributes
    ----------
    model : ModelConfig
        (A catalog name or a config.json path is resolved when built.)
    accelerator : Accelerator or None
        None gives a deployment that counts work (FLOPs, bytes) but cannot time it.
    tensor_parallel : int or array of int
        N, GPUs the model is split across; checked against the model's heads.
    weight_dtype, kv_dtype : str
        Storage data types of the weights and of the KV cache.
    compute_dtype : str
        Data type of the matmuls, which picks the peak FLOP/s: bf16 for
        weight-only quantisation, fp8 or int8 for quantised math. It must have a
        published tensor-core peak on the accelerator to compute a time.
        ``"auto"``: :func:`auto_compute_dtype` (fp8 math for fp8 weights on fp8
        tensor cores, else bf16).
    mfu, mbu : float or array in (0, 1]
        Model FLOP utilisation and memory-bandwidth utilisation (Databricks'
        definitions, achieved / peak); 1.0 is the physical bound.
    overlap : {"hybrid", "roofline", "additive"}
        How memory traffic and compute overlap within a step (:mod:`servingmath.step`).
    allreduce : AllReduce
        Cost model of the tensor-parallel all-reduces (default: no latency, full
        link bandwidth, bf16 activations).
    step_overhead : float or array
        Seconds added to every forward step (scheduler, sampling, launches); 0 = physical bound.
    gpu_memory_utilization : float in (0, 1]
        Share of each GPU's memory the server may fill (vLLM's default 0.9).
    reserve_bytes : float
        Memory per GPU for activations and runtime within that share (0: an upper bound).
    memory_bytes : float or None
        Memory per GPU; None: the catalog's capacity (the sheet's GB read as decimal).
    kv_sharding : {"heads", "batch"}
        How the KV cache splits over the tensor-parallel group once N > K:
        ``"heads"`` (default, vLLM) replicates each KV head's cache on N / K
        GPUs; ``"batch"`` (How to Scale Your Model) shards the rest of the
        group by sequences, so each GPU holds 1/N of the cache
        (:func:`servingmath.sharding.tensor_parallel_shares`).
    expert_parallel : int or array of int
        EP, for a mixture of experts: 1 (default) splits every expert N ways by
        tensor parallelism. EP > 1 deals the routed experts out to EP GPUs
        (E / EP whole experts each) and runs attention and the shared weights
        data-parallel, in EP / N groups of ``tensor_parallel`` GPUs ("attention
        DP x expert EP"); each MoE layer then exchanges its tokens in two
        all-to-alls (dispatch and combine), costed with ``allreduce``'s alpha,
        alpha_0, link efficiency and data type. The instance has EP GPUs and a
        batch is shared evenly by its EP / N groups (chapter "Mixture of experts").
    """

    model: ModelConfig
    accelerator: Accelerator
    tensor_parallel: int = 1
    weight_dtype: str = "bf16"
    kv_dtype: str = "bf16"
    compute_dtype: str = "bf16"
    mfu: float = 1.0
    mbu: float = 1.0
    overlap: str = "hybrid"
    allreduce: AllReduce = field(default_factory=AllReduce)
    step_overhead: float = 0.0
    gpu_memory_utilization: float = DEFAULT_GPU_MEMORY_UTILIZATION
    reserve_bytes: float = 0.0
    memory_bytes: float | None = None
    kv_sharding: str = "heads"
    expert_parallel: int = 1

    def __post_init__(self):
        set_ = functools.partial(object.__setattr__, self)
        set_("model", get_model(self.model))
        if self.accelerator is not None:   # None: a deployment that counts work but cannot time it
            set_("accelerator", get_accelerator(self.accelerator))
        n = check_nonempty("tensor_parallel", check_tensor_parallel(self.model, self.tensor_parallel))
        set_("tensor_parallel", int(n) if n.ndim == 0 else freeze_number(n).astype(np.int64))
        ep = check_expert_parallel(self.model, self.expert_parallel, self.tensor_parallel)
        set_("expert_parallel", int(ep) if ep.ndim == 0 else freeze_number(ep).astype(np.int64))
        check_dtype(self.weight_dtype, "weight_dtype")
        check_dtype(self.kv_dtype, "kv_dtype")
        if self.compute_dtype == "auto":
            set_("compute_dtype", auto_compute_dtype(self.weight_dtype, self.accelerator))
        check_dtype(self.compute_dtype, "compute_dtype")
        set_("mfu", _numeric("mfu", self.mfu, check_fraction))
        set_("mbu", _numeric("mbu", self.mbu, check_fraction))
        check_choice("overlap", self.overlap, OVERLAP_MODELS)
        if not isinstance(self.allreduce, AllReduce):
            raise ValueError(f"allreduce must be an AllReduce, got {self.allreduce!r}")
        set_("step_overhead", _numeric("step_overhead", self.step_overhead, check_nonnegative))
        set_("gpu_memory_utilization", _numeric("gpu_memory_utilization", self.gpu_memory_utilization,
                                                check_fraction))
        set_("reserve_bytes", _numeric("reserve_bytes", self.reserve_bytes, check_nonnegative))
        if self.memory_bytes is not None:
            set_("memory_bytes", _numeric("memory_bytes", self.memory_bytes, check_positive))
        check_choice("kv_sharding", self.kv_sharding, KV_SHARDINGS)

    # ---- building --------------------------------------------------------------------------------
    @classmethod
    def build(cls, model, accelerator, *, setting: str | None = None, **options) -> "Deployment":
        """A deployment from names (or configs) and keyword options.

        ``options`` are the field names and the flat all-reduce names
        (``allreduce_latency``, ``allreduce_base_latency``, ``link_efficiency``,
        ``allreduce_dtype``, ``allreduce_ring_factor``, ``allreduce_protocol``); ``setting`` starts from one of
        :data:`SETTINGS`.

        >>> Deployment.build("Llama-3.1-8B", "H100", mbu=0.8).mbu
        0.8
        >>> Deployment.build("Llama-3.1-8B", "H100", batch=4)
        Traceback (most recent call last):
        ...
        servingmath._validation.UnknownNameError: unknown deployment option 'batch'. Allowed: allreduce, allreduce_base_latency, allreduce_dtype, allreduce_latency, allreduce_protocol, allreduce_ring_factor, compute_dtype, expert_parallel, gpu_memory_utilization, kv_dtype, kv_sharding, link_efficiency, mbu, memory_bytes, mfu, overlap, reserve_bytes, step_overhead, tensor_parallel, weight_dtype
        """
        base = {} if setting is None else setting_options(setting, accelerator)
        base.update(options)
        return cls(model=model, accelerator=accelerator, **_split_options(base))

    def replace(self, **changes) -> "Deployment":
        """A copy with some settings changed, validated again (flat all-reduce names allowed).

        >>> d = Deployment.build("Llama-3.1-8B", "H100")
        >>> d.replace(allreduce_latency=1e-6).allreduce.latency
        1e-06
        """
        flat = {k: changes.pop(k) for k in list(changes) if k in ALLREDUCE_OPTIONS}
        for name in changes:
            if name not in _FIELDS:
                raise unknown_name("deployment option", name, sorted(DEPLOYMENT_OPTIONS))
        if flat:
            if "allreduce" in changes:
                raise ValueError("give allreduce or its flat options (allreduce_latency, ...), not both")
            changes["allreduce"] = replace(self.allreduce, **{ALLREDUCE_OPTIONS[k]: v for k, v in flat.items()})
        return replace(self, **changes)

    # ---- derived numbers ---------------------------------------------------------------------------
    @property
    def is_scalar(self) -> bool:
        """True when no numeric setting is an array (one configuration, not a grid)."""
        values = [self.tensor_parallel, self.expert_parallel, self.mfu, self.mbu, self.step_overhead, self.gpu_memory_utilization,
                  self.reserve_bytes, self.memory_bytes, self.allreduce.latency, self.allreduce.base_latency,
                  self.allreduce.link_efficiency]
        return all(np.ndim(v) == 0 for v in values if v is not None)

    @property
    def n_gpus(self):
        """GPUs of one instance: tensor_parallel, or expert_parallel where EP > 1 (a multiple of it)."""
        n, ep = self.tensor_parallel, self.expert_parallel
        if np.ndim(n) == 0 and np.ndim(ep) == 0:
            return max(int(n), int(ep))
        return np.maximum(n, ep)

    @property
    def data_parallel(self):
        """Attention data-parallel groups of one instance: n_gpus / tensor_parallel (1 without EP)."""
        n, g = self.tensor_parallel, self.n_gpus
        if np.ndim(n) == 0 and np.ndim(g) == 0:
            return int(g) // int(n)
        return np.asarray(g) // np.asarray(n)

    def _need_accelerator(self, what):
        if self.accelerator is None:
            raise ValueError(f"this deployment of {self.model.name} has no accelerator, so it can count "
                             f"work but not give {what}: build it with an accelerator (e.g. 'H100')")
        return self.accelerator

    @property
    def flops(self):
        """Achieved FLOP/s of one GPU: the compute dtype's dense peak x MFU.

        Raises a ValueError naming ``compute_dtype`` when the accelerator has no
        published peak for it (checked here, not when the deployment is built,
        so that memory-only questions work on any accelerator).
        """
        acc = self._need_accelerator("FLOP/s")
        try:
            peak = acc.peak_flops(self.compute_dtype)
        except ValueError as exc:
            raise ValueError(f"compute_dtype: {exc}") from None
        return peak * self.mfu

    @property
    def bandwidth(self):
        """Achieved memory bandwidth of one GPU: peak x MBU, bytes/s."""
        return self._need_accelerator("a bandwidth").memory_bandwidth * self.mbu

    @property
    def memory_per_gpu(self):
        """Memory of one GPU in bytes: ``memory_bytes`` or the catalog's capacity."""
        if self.memory_bytes is not None:
            return self.memory_bytes
        return self._need_accelerator("a memory capacity").memory_bytes

    def options(self) -> dict:
        """The settings as keyword options (without model and accelerator)."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("model", "accelerator")}
        return out

    def describe(self) -> str:
        """One line naming the model, the GPUs and the settings."""
        def num(x):
            return f"{x:g}" if np.ndim(x) == 0 else f"{np.shape(x)} values"
        n = self.n_gpus
        gpus = f"{n} x " if np.ndim(n) or n > 1 else ""
        gpus = f"{num(n)} x " if np.ndim(n) else gpus
        acc = "no accelerator" if self.accelerator is None else self.accelerator.name
        text = (f"{self.model.name} on {gpus}{acc}, weights {self.weight_dtype}, "
                f"KV {self.kv_dtype}, math {self.compute_dtype}, MFU {num(self.mfu)}, MBU {num(self.mbu)}, "
                f"{self.overlap} overlap")
        if np.ndim(self.step_overhead) or self.step_overhead:
            text += f", {num(self.step_overhead)} s per step"
        if self.kv_sharding != "heads":
            text += f", KV sharded by {self.kv_sharding}"
        if np.ndim(self.expert_parallel) or self.expert_parallel > 1:
            text += (f", experts EP {num(self.expert_parallel)} with attention DP {num(self.data_parallel)}"
                     f" x TP {num(self.tensor_parallel)}")
        return text


_FIELDS = {f.name for f in fields(Deployment)} - {"model", "accelerator"}
#: Every keyword option a function that takes a deployment accepts.
DEPLOYMENT_OPTIONS = frozenset(_FIELDS | set(ALLREDUCE_OPTIONS))


def auto_compute_dtype(weight_dtype: str, accelerator) -> str:
    """The matmul data type a server would use for weights stored in ``weight_dtype``.

    Derived in the chapter "How to use this book" (notebooks/00_how_to_use_this_book.ipynb).

    fp8 weights compute in fp8 where the accelerator has fp8 tensor cores
    (H100, H200, L40S, MI300X: "W8A8-FP8"); everything else is weight-only
    quantisation that dequantises to bf16 and computes in bf16 (int8/int4
    "W8A16"/"W4A16", fp8 on an A100). Without an accelerator: bf16.

    >>> auto_compute_dtype("fp8", "H100"), auto_compute_dtype("fp8", "A100"), auto_compute_dtype("int4", "H100")
    ('fp8', 'bf16', 'bf16')
    """
    check_dtype(weight_dtype, "weight_dtype")
    if accelerator is None:
        return "bf16"
    acc = get_accelerator(accelerator)
    if weight_dtype == "fp8" and "fp8" in acc.dense_flops:
        return "fp8"
    return "bf16"


def _split_options(options: dict) -> dict:
    """Flat keyword options -> Deployment field values (all-reduce options gathered in one AllReduce)."""
    out, flat = {}, {}
    for name, value in options.items():
        if name in ALLREDUCE_OPTIONS:
            flat[ALLREDUCE_OPTIONS[name]] = value
        elif name in _FIELDS:
            out[name] = value
        else:
            raise unknown_name("deployment option", name, sorted(DEPLOYMENT_OPTIONS))
    if flat:
        if "allreduce" in out:
            raise ValueError("give allreduce or its flat options (allreduce_latency, ...), not both")
        out["allreduce"] = AllReduce(**flat)
    return out


def as_deployment(model, accelerator=None, **options) -> Deployment:
    """A :class:`Deployment` from either a deployment (plus changes) or a model and an accelerator.

    Derived in the chapter "How to use this book" (notebooks/00_how_to_use_this_book.ipynb).

    >>> d = as_deployment("Llama-3.1-8B", "H100", mbu=0.5)
    >>> as_deployment(d, mbu=0.7).mbu
    0.7
    """
    if isinstance(model, Deployment):
        if accelerator is not None:
            raise ValueError("give a Deployment or a model and an accelerator, not both "
                             f"(got a Deployment and accelerator={accelerator!r})")
        return model.replace(**options) if options else model
    if accelerator is None:
        raise ValueError(f"accelerator is missing: give a model and an accelerator (e.g. 'H100'), "
                         f"or a Deployment; got model={model!r}")
    return Deployment.build(model, accelerator, **options)


def _unexpected_keyword(function: str, name: str, allowed) -> TypeError:
    """The TypeError Python raises for an unknown keyword, with close matches and the allowed names."""
    allowed = sorted(allowed)
    close = difflib.get_close_matches(name, allowed, n=3, cutoff=0.6)
    hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    return TypeError(f"{function}() got an unexpected keyword argument {name!r}.{hint} Allowed: {', '.join(allowed)}")


def deployment_function(func=None, **defaults):
    """Decorate ``func(deployment, *args, **kwargs)`` into the library's one calling convention.

    Derived in the chapter "How to use this book" (notebooks/00_how_to_use_this_book.ipynb).

    The decorated function takes ``(model, accelerator, *args, **kwargs)`` or
    ``(deployment, *args, **kwargs)``; keyword options named in
    :data:`DEPLOYMENT_OPTIONS` build (or change) the deployment, the rest go to
    ``func``. Its signature, as ``help()`` shows it, lists them all.
    ``@deployment_function(compute_dtype="auto")`` changes a default for the
    deployments this function builds from a model and an accelerator.

    Examples
    --------
    >>> def gpus(dep):
    ...     return dep.n_gpus
    >>> gpus = deployment_function(gpus)
    >>> gpus("Llama-3.1-70B", "H100", tensor_parallel=4)
    4
    """
    if func is None:
        return lambda f: deployment_function(f, **defaults)
    if not callable(func):
        raise TypeError(f"func must be a function of (deployment, ...), got {type(func).__name__} {func!r:.60}")
    for name in defaults:
        if name not in DEPLOYMENT_OPTIONS:
            raise TypeError(f"unknown deployment option {name!r} in the defaults of a deployment function")
    sig = inspect.signature(func)
    params = list(sig.parameters.values())[1:]
    own_names = {p.name for p in params}
    clash = own_names & DEPLOYMENT_OPTIONS
    if clash:
        raise TypeError(f"{func.__name__} has parameters that are deployment options: {sorted(clash)}")
    any_keyword = any(p.kind == p.VAR_KEYWORD for p in params)
    keywords = {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        setting = kwargs.pop("setting", None)
        if args and isinstance(args[0], Deployment):
            if "accelerator" in kwargs or "model" in kwargs:
                raise ValueError(f"{func.__name__}: give a Deployment or a model and an accelerator, not both")
            base, rest = args[0], args[1:]
            options = {} if setting is None else setting_options(setting, base.accelerator)
            options.update({k: kwargs.pop(k) for k in list(kwargs) if k in DEPLOYMENT_OPTIONS})
            dep = base.replace(**options) if options else base
        else:
            model = args[0] if args else kwargs.pop("model", None)
            accelerator = args[1] if len(args) > 1 else kwargs.pop("accelerator", None)
            if model is None:
                raise ValueError(f"{func.__name__}: model is missing (a catalog name such as "
                                 "'Llama-3.1-8B', a ModelConfig, a config.json path, or a Deployment)")
            if accelerator is None:
                raise ValueError(f"{func.__name__}: accelerator is missing (a catalog name such as "
                                 "'H100', an Accelerator), or pass a Deployment instead of the model")
            rest = args[2:]
            options = dict(defaults)
            options.update({k: kwargs.pop(k) for k in list(kwargs) if k in DEPLOYMENT_OPTIONS})
            dep = Deployment.build(model, accelerator, setting=setting, **options)
        unknown = [] if any_keyword else [k for k in kwargs if k not in keywords]
        if unknown:   # Python's TypeError, saying also what is allowed (e.g. tp= for tensor_parallel=)
            raise _unexpected_keyword(func.__name__, unknown[0], keywords | DEPLOYMENT_OPTIONS | {"setting"})
        return func(dep, *rest, **kwargs)

    shown = [inspect.Parameter("model", inspect.Parameter.POSITIONAL_OR_KEYWORD),
             inspect.Parameter("accelerator", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    shown += [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    shown += [p for p in params if p.kind == p.KEYWORD_ONLY]
    shown_defaults = {f.name: f.default for f in fields(Deployment) if f.name in _FIELDS}
    shown_defaults["allreduce"] = AllReduce()
    shown_defaults.update(defaults)
    for name in sorted(DEPLOYMENT_OPTIONS):
        default = shown_defaults.get(name, getattr(AllReduce(), ALLREDUCE_OPTIONS.get(name, ""), None))
        shown.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default))
    shown.append(inspect.Parameter("setting", inspect.Parameter.KEYWORD_ONLY, default=None))
    shown += [p for p in params if p.kind == p.VAR_KEYWORD]
    wrapper.__signature__ = sig.replace(parameters=shown)
    wrapper.takes_deployment = True
    return wrapper
