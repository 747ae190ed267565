"""Configuration of a simulation: the server, the scheduling policy, speculative decoding.

Every class here is a frozen dataclass that checks its fields when built, so
a bad value fails at once with a message naming the field.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property

from .._validation import check_bool, check_integer, check_nonnegative, check_positive, check_scalar
from ..deployment import Deployment
from ..workloads import CappedPoisson, ClosedLoop, PiecewisePoisson, Poisson, Timestamps, Workload
from .steptimes import LibraryStepTimes, LinearStepTimes

__all__ = [
    "Server",
    "ContinuousBatching",
    "ChunkedPrefill",
    "StaticBatching",
    "Disaggregated",
    "Speculative",
    "SpeculativeByLoad",
    "SimulationConfig",
    "expected_tokens_per_step",
]


def _int(name, value, minimum):
    return int(check_integer(name, value, minimum=minimum))


@dataclass(frozen=True, init=False, eq=False)
class Server:
    """One model instance: a :class:`~servingmath.deployment.Deployment` plus the simulator's settings.

    Derived in the chapter "Queueing: why TTFT explodes near capacity" (notebooks/09_queueing.ipynb).

    Build it like any function of the library: ``Server(model, accelerator,
    **deployment options)`` or ``Server(deployment)`` (plus changes as keyword
    options), or a toy ``Server(step_times=LinearStepTimes(...))``.

    Attributes
    ----------
    deployment : Deployment or None
        Model, accelerator, tensor parallelism, data types, efficiencies,
        overlap, all-reduce model, per-step overhead (``step_overhead``: fixed
        seconds added to every iteration) and memory share
        (``gpu_memory_utilization``, vLLM's default 0.9). None for a toy server.
    kv_capacity_tokens : int or None
        KV-cache size in tokens. None: :func:`servingmath.memory.max_kv_tokens`
        of the deployment (KV-head replication and the reserve included);
        unlimited for a toy ``step_times`` server.
    step_times : LinearStepTimes or None
        A toy step-time model that replaces the library's.
    pipeline_parallel : int
        P >= 1 pipeline stages, each on its own ``tensor_parallel`` GPUs (P x TP GPUs in
        all; see :mod:`.pipeline` for the model). 1: no pipeline.
    pipeline_link_bandwidth : float or None
        Bytes per second of the link between two stages (None: the accelerator's
        interconnect bandwidth from the catalog; with a toy server, no transfer time).
    pipeline_link_latency : float
        Fixed seconds per stage-to-stage transfer (default 0).
    pipeline_overhead : {"host", "stage"}
        Where an iteration's step overhead o falls with P > 1 stages: ``"host"`` (default)
        once, on the host before the first stage; ``"stage"``: on every stage, as when each
        rank runs its own executor loop that prepares every micro-batch (TensorRT-LLM's
        PyExecutor, vLLM's workers). The memory wall of :mod:`servingmath.validation`
        prices pipelined rows the ``"stage"`` way.

    Notes
    -----
    With P > 1 the KV cache holds floor((P (u M - R) - W_gpu) / kv_gpu) tokens: each
    stage keeps 1/P of the layers, hence 1/P of the weights and of every token's KV
    (``kv_capacity_tokens`` overrides it, as the total over the stages).
    """

    deployment: Deployment | None
    kv_capacity_tokens: int | None
    step_times: LinearStepTimes | None
    pipeline_parallel: int = 1
    pipeline_link_bandwidth: float | None = None
    pipeline_link_latency: float = 0.0
    pipeline_overhead: str = "host"

    def __init__(self, model=None, accelerator=None, *, deployment=None, kv_capacity_tokens=None,
                 step_times=None, pipeline_parallel=1, pipeline_link_bandwidth=None, pipeline_link_latency=0.0,
                 pipeline_overhead="host", **options):
        if "memory_utilization" in options:
            raise ValueError("Server's memory_utilization is now the deployment option gpu_memory_utilization "
                             "(the same name as everywhere in the library)")
        if isinstance(model, Deployment):
            if deployment is not None or accelerator is not None:
                raise ValueError("give a Deployment, or a model and an accelerator, not both")
            deployment, model = model, None
        if step_times is not None:
            if model is not None or accelerator is not None or deployment is not None or options:
                raise ValueError("give either a model and an accelerator (or a deployment), or a toy "
                                 "step_times, not both")
            if not isinstance(step_times, LinearStepTimes):
                raise ValueError(f"step_times must be a LinearStepTimes or None, got {step_times!r}")
        elif deployment is not None:
            if model is not None or accelerator is not None:
                raise ValueError("give a Deployment, or a model and an accelerator, not both")
            if not isinstance(deployment, Deployment):
                raise ValueError(f"deployment must be a Deployment, got {deployment!r}")
            deployment = deployment.replace(**options) if options else deployment
        else:
            if model is None or accelerator is None:
                raise ValueError("Server needs a model and an accelerator (e.g. Server('Llama-3.1-8B', "
                                 "'H100')), a Deployment, or a toy step_times=LinearStepTimes(...)")
            deployment = Deployment.build(model, accelerator, **options)
        if deployment is not None and not deployment.is_scalar:
            raise ValueError("a simulated server is one configuration: give scalar deployment settings")
        if kv_capacity_tokens is not None:
            kv_capacity_tokens = _int("kv_capacity_tokens", kv_capacity_tokens, 1)
        pipeline_parallel = _int("pipeline_parallel", pipeline_parallel, 1)
        if pipeline_link_bandwidth is not None:
            pipeline_link_bandwidth = float(check_positive("pipeline_link_bandwidth", pipeline_link_bandwidth))
        pipeline_link_latency = float(check_nonnegative("pipeline_link_latency", pipeline_link_latency))
        if pipeline_overhead not in ("host", "stage"):
            raise ValueError(f"pipeline_overhead must be 'host' (once, before the first stage) or 'stage' (on "
                             f"every stage), got {pipeline_overhead!r:.60}")
        if (deployment is not None and pipeline_parallel > 1 and pipeline_link_bandwidth is None
                and deployment.accelerator.interconnect_bandwidth is None):
            raise ValueError(f"pipeline_parallel={pipeline_parallel} needs pipeline_link_bandwidth (bytes/s): "
                             f"the catalog has no interconnect bandwidth for {deployment.accelerator.name}")
        object.__setattr__(self, "deployment", deployment)
        object.__setattr__(self, "kv_capacity_tokens", kv_capacity_tokens)
        object.__setattr__(self, "step_times", step_times)
        object.__setattr__(self, "pipeline_parallel", pipeline_parallel)
        object.__setattr__(self, "pipeline_link_bandwidth", pipeline_link_bandwidth)
        object.__setattr__(self, "pipeline_link_latency", pipeline_link_latency)
        object.__setattr__(self, "pipeline_overhead", pipeline_overhead)

    def _key(self):
        return (self.deployment, self.kv_capacity_tokens, self.step_times, self.pipeline_parallel,
                self.pipeline_link_bandwidth, self.pipeline_link_latency, self.pipeline_overhead)

    def __eq__(self, other):
        return isinstance(other, Server) and self._key() == other._key()

    def __hash__(self):
        return hash(self._key())

    def __repr__(self):
        pp = "" if self.pipeline_parallel == 1 else f", pipeline_parallel={self.pipeline_parallel}"
        if self.step_times is not None:
            return f"Server(step_times={self.step_times!r}{pp})"
        return f"Server({self.deployment.describe()!r}, kv_capacity_tokens={self.kv_capacity_tokens!r}{pp})"

    def replace(self, **changes) -> "Server":
        """A copy with deployment settings, ``kv_capacity_tokens`` or the pipeline settings changed."""
        own = {name: changes.pop(name, getattr(self, name))
               for name in ("kv_capacity_tokens", "pipeline_parallel", "pipeline_link_bandwidth",
                            "pipeline_link_latency", "pipeline_overhead")}
        if self.step_times is not None:
            if changes:
                raise ValueError("a toy step_times server has no deployment settings to change")
            return Server(step_times=self.step_times, **own)
        return Server(self.deployment, **own, **changes)

    @property
    def model(self):
        """The deployment's model (None for a toy server)."""
        return None if self.deployment is None else self.deployment.model

    @property
    def accelerator(self):
        """The deployment's accelerator (None for a toy server)."""
        return None if self.deployment is None else self.deployment.accelerator

    def build_step_times(self):
        """The step-time object the engine calls.

        Built once per ``Server`` and reused by every simulation of it (a rate
        sweep runs the same server many times): it holds only per-count
        seconds and a table of the weight read per token count (MoE), pure
        functions of the deployment.
        """
        if self.step_times is not None:
            return self.step_times
        return self._built_step_times

    @cached_property
    def _built_step_times(self):
        # a cache in the instance's __dict__, not a dataclass field: equality, hash and repr ignore it
        return LibraryStepTimes.for_deployment(self.deployment)

    def kv_capacity(self, step_times=None) -> float:
        """KV-cache capacity in tokens, all pipeline stages together (``math.inf`` for a toy server
        without one)."""
        if self.kv_capacity_tokens is not None:
            return int(self.kv_capacity_tokens)
        if self.step_times is not None:
            return math.inf
        if self.pipeline_parallel == 1:
            return (step_times or self.build_step_times()).kv_capacity_tokens()
        from ..memory import max_kv_tokens

        d, p = self.deployment, self.pipeline_parallel
        tokens = int(max_kv_tokens(d, pipeline_parallel=p))
        if tokens <= 0:
            raise ValueError(f"{d.model.name} leaves no room for a KV cache on {p} pipeline stages of "
                             f"{d.tensor_parallel} x {d.accelerator.name}; raise pipeline_parallel or give "
                             "kv_capacity_tokens")
        return tokens

    def stage_transfer(self):
        """(fixed seconds, seconds per token) of one stage-to-stage activation transfer.

        Each token sends its hidden state, D values of 2 bytes (bf16), over the link:
        latency + T x D x 2 / bandwidth. A toy server has no D: latency only.
        """
        if self.pipeline_parallel == 1:
            return 0.0, 0.0
        if self.step_times is not None:
            return self.pipeline_link_latency, 0.0
        bw = self.pipeline_link_bandwidth or float(self.deployment.accelerator.interconnect_bandwidth)
        return self.pipeline_link_latency, 2.0 * self.deployment.model.hidden_size / bw

    @property
    def max_context_len(self) -> float:
        """The model's longest sequence in tokens (``math.inf`` for a toy server)."""
        if self.step_times is not None:
            return math.inf
        return self.deployment.model.max_context_len


KV_OPTIONS_DOC = """The KV-cache options of :class:`ContinuousBatching` and :class:`ChunkedPrefill`.

block_size : int
    Tokens per KV block (vLLM's ``--block-size``, 16 on CUDA GPUs). A sequence of n
    tokens holds ceil(n / block_size) blocks; a decode step allocates a block for a
    sequence only when its last block is full, so the cache fills in whole blocks.
    The capacity becomes floor(kv_capacity / block_size) blocks. Default 1 (tokens).
watermark : float in [0, 1)
    vLLM v0's admission watermark: a request is admitted only if, after allocating
    its prompt's blocks, at least int(watermark x total blocks) blocks stay free
    (``SelfAttnBlockSpaceManager.can_allocate``, default 0.01). Growing sequences
    may use those blocks; they are reserved against new admissions only, so a full
    batch does not thrash: admit, fill the cache, preempt the newest at the next
    step, readmit it. Default 0 (admit until the cache is full).
prefix_caching : bool
    Automatic prefix caching (vLLM's ``--enable-prefix-caching``, on by default in
    v1): each instance keeps the KV of the shared prefixes (``Workload.prefix_ids``)
    it has computed, in whole blocks, while memory allows. A request whose prefix is
    cached prefills only the rest of its prompt (``cached_tokens`` of the step model);
    the cached blocks are shared by every request that uses them, and blocks no
    running request uses are evicted least recently used first when memory is needed.
    A prefix becomes usable once the prefill that computes it has finished (requests
    admitted meanwhile compute it again), and at least one prompt token is always
    computed (the last one, for its logits), as in vLLM. Default True (no effect
    without prefix ids).
priority_preemption : bool
    When a request waits that cannot be admitted (the batch or the cache is full)
    and a running request has a lower priority (a higher class number), preempt the
    most recently admitted running request of the lowest class (recomputed later)
    until the waiting one fits (vLLM's ``scheduling_policy="priority"``,
    ``Scheduler._schedule_priority_preemption``). Default False.

References
----------
vLLM, ``vllm/core/block_manager.py`` (watermark=0.01, can_allocate, can_append_slots) and
``vllm/core/scheduler.py`` (``_schedule_priority_preemption``), commit
006a839fcbc3bd9584eb414a355a5b9fedd5372f, read 2026-11.
"""


def _check_kv_options(policy):
    _int("block_size", policy.block_size, 1)
    w = policy.watermark
    if isinstance(w, bool) or not isinstance(w, (int, float)) or not 0 <= w < 1:
        raise ValueError(f"watermark must be a fraction of the KV blocks in [0, 1), e.g. 0.01 (vLLM v0), "
                         f"got {w!r}")
    check_bool("prefix_caching", policy.prefix_caching)
    check_bool("priority_preemption", policy.priority_preemption)


@dataclass(frozen=True)
class ContinuousBatching:
    """Iteration-level batching with prefill first (vLLM v0, Orca).

    Derived in the chapter "Queueing: why TTFT explodes near capacity" (notebooks/09_queueing.ipynb).

    At every step boundary, waiting requests are admitted (interactive class
    first, then first come first served) while the batch has fewer than
    ``max_batch_size`` sequences, their prompts fit in the KV cache and their
    prompt tokens fit in ``max_prefill_tokens``; the admitted prompts are
    prefilled together in one iteration while the decodes pause. Otherwise all
    running sequences take one decode step. With ``max_batch_size=1`` this is
    a one-at-a-time server (the M/G/1 queue).

    Attributes
    ----------
    max_batch_size : int
        Sequences in the batch at most (vLLM's ``max_num_seqs``, default 256).
    max_prefill_tokens : int or None
        Prompt tokens in one prefill iteration at most (vLLM's
        ``max_num_batched_tokens``). None: max(2048, the model's context), vLLM v0's
        default (no limit for a toy ``LinearStepTimes`` server). A longer prompt is refused.
    block_size, watermark, prefix_caching, priority_preemption
        The KV-cache manager's options, shared with :class:`ChunkedPrefill`
        (see :data:`KV_OPTIONS_DOC` below): paged blocks of ``block_size`` tokens
        (default 1: token granularity), a ``watermark`` fraction of the blocks kept
        free at admission (default 0), automatic prefix caching (default on; it does
        nothing unless the workload has ``prefix_ids``) and preemption of running
        lower-priority requests for a waiting higher-priority one (default off).
        ``block_size=16, watermark=0.01`` are vLLM v0's values.
    scheduler_steps : int
        Decode steps run per scheduling decision (vLLM 0.6's multi-step scheduling,
        ``--num-scheduler-steps``; default 1). A run of decode steps, once begun, goes
        on for that many steps before the scheduler looks at the queue again, so a
        request that arrives meanwhile waits for the run to end before its prefill;
        a prefill iteration is scheduled on its own. A sequence that finishes inside
        a run leaves it at its last token (the steps vLLM still spends on its slot
        are not charged). With several steps per decision the engine streams
        tokens a run at a time: a client's "ITL" is then the gap between runs.
    """

    max_batch_size: int = 256
    max_prefill_tokens: int | None = None
    block_size: int = 1
    watermark: float = 0.0
    prefix_caching: bool = True
    priority_preemption: bool = False
    scheduler_steps: int = 1

    def __post_init__(self):
        _int("max_batch_size", self.max_batch_size, 1)
        if self.max_prefill_tokens is not None:
            _int("max_prefill_tokens", self.max_prefill_tokens, 1)
        _int("scheduler_steps", self.scheduler_steps, 1)
        _check_kv_options(self)
        if self.scheduler_steps > 1 and (self.block_size > 1 or self.watermark > 0 or self.priority_preemption):
            raise ValueError(f"scheduler_steps = {self.scheduler_steps} (multi-step scheduling) is modelled with "
                             "the plain KV manager: leave block_size at 1, watermark at 0 and "
                             "priority_preemption off")


@dataclass(frozen=True)
class ChunkedPrefill:
    """Chunked prefill with a per-iteration token budget (Sarathi-Serve, vLLM v1).

    Derived in the chapter "Scheduling and tail latency" (notebooks/10_scheduling.ipynb).

    Every iteration first gives one token to each decoding sequence, then
    fills the rest of ``token_budget`` with prompt chunks: partly prefilled
    prompts first, then newly admitted ones (interactive first, FCFS). Decodes
    never pause, so a long prompt no longer stalls the inter-token latency.

    Attributes
    ----------
    token_budget : int
        Tokens per iteration (decodes + prompt chunks), >= 1 and >= ``max_batch_size``.
    max_batch_size : int
        Sequences (decoding or prefilling) in the batch at most.
    block_size, watermark, prefix_caching, priority_preemption
        As in :class:`ContinuousBatching` (a cached prefix is skipped: the first
        chunk starts after it).
    chunk_prompts : bool
        True (default): prompts are split into chunks that fill the budget. False: a
        prompt is prefilled whole, beside the decodes, in the first iteration whose
        budget has room for all of it, and the queue waits behind it (TensorRT-LLM's
        in-flight batching without chunked context); a prompt longer than the whole
        budget runs alone. (With a paged cache the admission stops once the budget is
        reached, so the last whole prompt may overrun it.)
    """

    token_budget: int = 512
    max_batch_size: int = 256
    block_size: int = 1
    watermark: float = 0.0
    prefix_caching: bool = True
    priority_preemption: bool = False
    chunk_prompts: bool = True

    def __post_init__(self):
        _int("token_budget", self.token_budget, 1)
        _int("max_batch_size", self.max_batch_size, 1)
        if not isinstance(self.chunk_prompts, bool):
            raise ValueError(f"chunk_prompts must be True (split prompts into chunks) or False (whole prompts), "
                             f"got {self.chunk_prompts!r}")
        _check_kv_options(self)
        if self.token_budget < self.max_batch_size:
            raise ValueError(
                f"token_budget ({self.token_budget}) must be >= max_batch_size ({self.max_batch_size}): "
                "every running sequence needs one token of the budget per iteration")


@dataclass(frozen=True)
class StaticBatching:
    """Request-level (static) batching, as in a plain ``generate()`` loop.

    Derived in the chapter "Scheduling and tail latency" (notebooks/10_scheduling.ipynb).

    The server waits until ``batch_size`` requests wait, or until the oldest
    has waited ``timeout`` seconds (or no more requests can come), and runs
    them as one batch to the end: prompts padded to the longest, one prefill,
    then decode steps until the longest output is done. Finished sequences
    keep their slot (their steps are still computed) and nothing joins a
    running batch. Each request's tokens are recorded when generated (as if
    streamed); it finishes at its own last token.
    """

    batch_size: int = 8
    timeout: float = 0.1

    def __post_init__(self):
        _int("batch_size", self.batch_size, 1)
        if not (isinstance(self.timeout, (int, float)) and self.timeout >= 0):
            raise ValueError(f"timeout must be >= 0 seconds (math.inf: wait for a full batch), "
                             f"got {self.timeout!r}")


@dataclass(frozen=True)
class Disaggregated:
    """Prefill/decode disaggregation (DistServe, Splitwise): a prefill pool and a decode pool.

    Derived in the chapter "Scheduling and tail latency" (notebooks/10_scheduling.ipynb).

    A request is prefilled on the prefill instance with the least queued
    prompt tokens (prefill-only iterations of up to ``max_prefill_tokens``,
    interactive first, FCFS), emits its first token there, then its prompt's
    KV cache (prompt_len x KV bytes per token) moves to a decode instance in
    ``transfer_latency + bytes / link_bandwidth`` seconds
    (:func:`servingmath.memory.kv_transfer_time`, :meth:`transfer_time`; transfers do not
    contend). It joins the decode instance with the fewest sequences at its
    next step boundary, once its full KV (prompt + output) fits beside the
    others' (reservation, so the decode pool never preempts). A prefill
    batch's prompts must fit in the prefill instance's KV cache. With a toy
    ``LinearStepTimes`` server the KV bytes are unknown and a transfer takes
    ``transfer_latency`` alone.

    Attributes
    ----------
    link_bandwidth : float
        Bytes per second between a prefill and a decode instance.
    prefill_instances, decode_instances : int
    max_batch_size : int
        Sequences per decode instance at most.
    max_prefill_tokens : int or None
        Tokens per prefill iteration (None: as :class:`ContinuousBatching`).
    transfer_latency : float
        Fixed seconds per transfer.
    prefill_server, decode_server : Server or None
        Per-pool servers (e.g. different tensor parallelism); None: the config's server.
    """

    link_bandwidth: float
    prefill_instances: int = 1
    decode_instances: int = 1
    max_batch_size: int = 256
    max_prefill_tokens: int | None = None
    transfer_latency: float = 0.0
    prefill_server: Server | None = None
    decode_server: Server | None = None

    def __post_init__(self):
        check_positive("link_bandwidth", self.link_bandwidth)
        _int("prefill_instances", self.prefill_instances, 1)
        _int("decode_instances", self.decode_instances, 1)
        _int("max_batch_size", self.max_batch_size, 1)
        if self.max_prefill_tokens is not None:
            _int("max_prefill_tokens", self.max_prefill_tokens, 1)
        check_nonnegative("transfer_latency", self.transfer_latency)
        for name in ("prefill_server", "decode_server"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, Server):
                raise ValueError(f"{name} must be a Server or None, got {value!r}")

    def transfer_time(self, model, prompt_len, *, kv_dtype: str = "bf16"):
        """Seconds this policy charges to move a prompt's KV cache to a decode instance.

        :func:`servingmath.memory.kv_transfer_time` with this policy's
        ``link_bandwidth`` and ``transfer_latency``: the simulator charges the
        same per request.

        >>> round(Disaggregated(link_bandwidth=50e9).transfer_time("Llama-3.1-8B", 803) * 1e3, 2)   # ms
        2.11
        """
        from ..memory import kv_transfer_time

        return kv_transfer_time(model, prompt_len, link_bandwidth=self.link_bandwidth, kv_dtype=kv_dtype,
                                latency=self.transfer_latency)


def expected_tokens_per_step(acceptance_rate, num_draft_tokens):
    """Expected tokens one speculative step yields: (1 - alpha^(gamma+1)) / (1 - alpha).

    Derived in the chapter "Scheduling and tail latency" (notebooks/10_scheduling.ipynb).

    The simulator's scalar entry to :func:`servingmath.speculative.expected_tokens_per_step`
    (one formula, one place; Leviathan et al., ICML 2023, eq. 1).

    >>> round(expected_tokens_per_step(0.8, 4), 4)
    3.3616
    """
    from ..speculative import expected_tokens_per_step as formula

    check_scalar("acceptance_rate", acceptance_rate)
    check_scalar("num_draft_tokens", num_draft_tokens)
    return float(formula(acceptance_rate, num_draft_tokens))


@dataclass(frozen=True)
class Speculative:
    """Speculative decoding: a draft model proposes gamma tokens, the target verifies them.

    Derived in the chapter "Speculative decoding: a win at low load, a loss at high load" (notebooks/12_speculative_decoding.ipynb).

    One speculative decode step costs ``num_draft_tokens`` decode steps of the
    draft model (same batch, same accelerator) plus one verification iteration
    of the target over gamma + 1 tokens per sequence, and yields 1 to gamma + 1
    tokens per sequence: each draft token is accepted with probability
    ``acceptance_rate`` until the first rejection (drawn per sequence per step
    from the simulation's seed). The draft model also prefills each prompt.
    Its KV cache is not counted against the target's.

    Attributes
    ----------
    num_draft_tokens : int
        gamma >= 1.
    acceptance_rate : float
        alpha in [0, 1].
    draft_model : str or ModelConfig or None
        The draft model, run on the server's accelerator.
    draft_step_time : float or None
        Instead of a draft model: a constant draft step time in seconds.
    """

    num_draft_tokens: int = 4
    acceptance_rate: float = 0.7
    draft_model: object = None
    draft_step_time: float | None = None

    def __post_init__(self):
        expected_tokens_per_step(self.acceptance_rate, self.num_draft_tokens)  # validates both
        if (self.draft_model is None) == (self.draft_step_time is None):
            raise ValueError("Speculative needs exactly one of draft_model (a model name) or "
                             "draft_step_time (seconds)")
        if self.draft_step_time is not None:
            check_positive("draft_step_time", self.draft_step_time)

    @property
    def expected_tokens_per_step(self) -> float:
        # computed (and validated) once: the engine reads it for every request
        cached = self.__dict__.get("_expected_tokens")
        if cached is None:
            cached = expected_tokens_per_step(self.acceptance_rate, self.num_draft_tokens)
            object.__setattr__(self, "_expected_tokens", cached)
        return cached


_SIGNALS = ("batch", "queue", "load")


@dataclass(frozen=True)
class SpeculativeByLoad:
    """Speculative decoding switched on and off by load, with hysteresis.

    Derived in the chapter "Speculative decoding: a win at low load, a loss at high load" (notebooks/12_speculative_decoding.ipynb).

    At every step boundary the instance reads a load signal x: ``"batch"``, the
    sequences holding a batch slot (what vLLM's ``speculative_disable_by_batch_size``
    compares, as ``running_queue_size``); ``"queue"``, the requests waiting; or
    ``"load"``, both. Speculation turns **off** when x > ``off_above`` and back **on**
    when x < ``on_below`` (``on_below <= off_above``; between the two the mode
    holds, so a load that hovers around one threshold does not flip it at every
    step). It starts on. A switch happens between two iterations: every decoding
    sequence changes mode there (tokens produced so far are kept). While off, the
    draft model does no work at all (not even the prompts' prefill). When it turns
    back on, the draft first catches up on the context of the running sequences it
    has not seen (one draft prefill of those tokens after the ones it holds, added to
    the first speculative step; a constant ``draft_step_time`` charges one step).

    Attributes
    ----------
    speculative : Speculative
        The speculation used while on.
    on_below, off_above : float
        The two thresholds of the signal.
    signal : {"batch", "queue", "load"}

    Notes
    -----
    vLLM v0 disables speculation for a whole batch when ``running_queue_size >=
    speculative_disable_by_batch_size`` (one threshold) and, once disabled, never
    re-enables it for the requests of that batch (``vllm/spec_decode/spec_decode_worker.py``:
    ``_should_disable_all_speculation`` compares ``running_queue_size``;
    ``_maybe_disable_speculative_tokens`` sets ``num_speculative_tokens = 0``, "disabled
    forever"; ``_run_no_spec(skip_proposer=True)`` does not run the draft, so its KV
    falls behind; read 2026-11 in the stored version at commit
    00b974dbffec005d4b6d379833e9f3c100dddd3e). The model here lets every request
    switch back, paying the draft's catch-up.

    Examples
    --------
    >>> policy = SpeculativeByLoad(Speculative(num_draft_tokens=4, acceptance_rate=0.7,
    ...                                        draft_step_time=1e-3), on_below=120, off_above=180)
    >>> policy.signal, policy.speculative.num_draft_tokens
    ('batch', 4)
    """

    speculative: Speculative
    on_below: float
    off_above: float
    signal: str = "batch"

    def __post_init__(self):
        if not isinstance(self.speculative, Speculative):
            raise ValueError(f"speculative must be a Speculative, got {self.speculative!r}")
        check_nonnegative("on_below", self.on_below)
        check_nonnegative("off_above", self.off_above)
        if self.on_below > self.off_above:
            raise ValueError(f"on_below ({self.on_below:g}) must be <= off_above ({self.off_above:g}): "
                             "otherwise a load between them would switch both ways")
        if self.signal not in _SIGNALS:
            raise ValueError(f"signal must be one of {', '.join(_SIGNALS)}, got {self.signal!r}")


POLICIES = (ContinuousBatching, ChunkedPrefill, StaticBatching, Disaggregated)
ARRIVALS = (Poisson, ClosedLoop, Timestamps, PiecewisePoisson, CappedPoisson)


@dataclass(frozen=True)
class SimulationConfig:
    """Everything a simulation needs: ``simulate(config, seed)`` runs it.

    Derived in the chapter "Queueing: why TTFT explodes near capacity" (notebooks/09_queueing.ipynb).

    Attributes
    ----------
    server : Server
    workload : Workload
        The requests, in arrival order.
    arrivals : Poisson, PiecewisePoisson, ClosedLoop, CappedPoisson or Timestamps
    policy : ContinuousBatching, ChunkedPrefill, StaticBatching or Disaggregated
    speculative : Speculative, SpeculativeByLoad or None
    """

    server: Server
    workload: Workload
    arrivals: object
    policy: object = field(default_factory=ContinuousBatching)
    speculative: Speculative | None = None

    def __post_init__(self):
        if not isinstance(self.server, Server):
            raise ValueError(f"server must be a Server, got {self.server!r}")
        if not isinstance(self.workload, Workload):
            raise ValueError(f"workload must be a Workload, got {self.workload!r}")
        check_arrivals(self.arrivals, self.workload)
        if not isinstance(self.policy, POLICIES):
            raise ValueError(f"policy must be one of ContinuousBatching, ChunkedPrefill, "
                             f"StaticBatching, Disaggregated, got {self.policy!r}")
        check_replica_settings(self.server, self.policy, self.speculative)


def check_arrivals(arrivals, workload):
    if not isinstance(arrivals, ARRIVALS):
        raise ValueError(f"arrivals must be one of Poisson, PiecewisePoisson, ClosedLoop, CappedPoisson, "
                         f"Timestamps, got {arrivals!r}")
    if isinstance(arrivals, Timestamps) and len(arrivals.times) != len(workload):
        raise ValueError(f"arrivals has {len(arrivals.times)} timestamps but the workload "
                         f"has {len(workload)} requests")


def check_replica_settings(server, policy, speculative):
    """The combinations of server, policy and speculation the simulator does not support."""
    if speculative is not None and not isinstance(speculative, (Speculative, SpeculativeByLoad)):
        raise ValueError(f"speculative must be a Speculative, a SpeculativeByLoad or None, got {speculative!r}")
    if speculative is not None and isinstance(policy, StaticBatching):
        raise ValueError("speculative decoding is not simulated with StaticBatching; "
                         "use ContinuousBatching or ChunkedPrefill")
    if isinstance(speculative, SpeculativeByLoad) and isinstance(policy, Disaggregated):
        raise ValueError("SpeculativeByLoad is simulated with ContinuousBatching or ChunkedPrefill, "
                         "not Disaggregated")
    if server.pipeline_parallel > 1 and not isinstance(policy, (ContinuousBatching, ChunkedPrefill)):
        raise ValueError(f"pipeline_parallel > 1 is simulated with ContinuousBatching or ChunkedPrefill, "
                         f"not {type(policy).__name__}")
