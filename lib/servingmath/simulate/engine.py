"""The event loop of the serving simulator: set-up, arrivals, routing, completions, and time.

:class:`Engine` builds the instances a configuration needs (:mod:`.policies`):
one server, the two pools of a disaggregated deployment, or the replicas of a
fleet (each with P virtual engines when it is pipeline-parallel); it checks
every request against the model's context and the KV cache, draws the arrival
process from the seed, and runs the loop: take the earliest of the next
open-loop arrival and the next event (an instance's action ending, a
closed-loop arrival, a KV transfer, a static-batching timeout, a scaling
decision, a replica ready after its warm-up) and hand it on. At equal times
arrivals go first, so a request that arrives exactly at a step boundary joins
there. Each instance jumps over whole runs of decode steps in closed form
(:mod:`.instance`), so the loop sees a few events per request, not one per
token. A fleet's router (:mod:`.fleet`) picks a replica per arrival; a fleet
whose replicas never interact (:meth:`Engine._fixed_routes`) runs the loop once
per replica over that replica's arrivals.
"""

from __future__ import annotations

import dataclasses
import gc
import heapq
import itertools
import math
import sys
from collections import deque

import numpy as np

from ..memory import kv_transfer_time
from ..models import get_model
from ..workloads import CappedPoisson, ClosedLoop, PiecewisePoisson, Poisson, Timestamps
from .config import ChunkedPrefill, ContinuousBatching, Disaggregated, SpeculativeByLoad
from .fleet import (CentralQueue, FleetConfig, LeastLoaded, PrefixAffinity, Random, RateScaling,
                    RoundRobin, ScheduledScaling)
from .instance import _ARRIVAL, _DECODE, _END, _READY, _SCALE, _TRANSFER, _IDLE, _WAKE, INF, NAN
from .pipeline import Pipeline
from .policies import (Chunked, ChunkedFeatured, DecodeOnly, PrefillFirst, PrefillFirstFeatured, PrefillFirstMultiStep,
                       PrefillOnly, Static, StaticFeatured)
from . import compiled
from .steptimes import LibraryStepTimes

# replica states in a fleet
OFF, WARMING, ON, DRAINING = 0, 1, 2, 3


class _Replica:
    """One replica of a fleet (or the one server): its instances (P virtual engines if pipelined)."""

    __slots__ = ("e", "index", "name", "instances", "single")

    def __init__(self, engine, index, name):
        self.e = engine
        self.index = index
        self.name = name
        self.instances = []
        self.single = None

    def enqueue(self, rid, t):
        """A request joins this replica: the virtual engine with the fewest unfinished requests (vLLM)."""
        e = self.e
        inst = self.single
        if inst is None:
            inst = min(self.instances, key=lambda i: (len(i.running) + i.n_waiting, i.index))
        if e.fleet:
            e.replica_of[rid] = self.index
        inst.work += e.prompt[rid] + e.out[rid]
        inst.enqueue(rid, t)

    def tokens(self, t):
        inst = self.single
        if inst is not None:
            return inst.work_at(t)
        return sum(i.work_at(t) for i in self.instances)

    def requests(self):
        inst = self.single
        if inst is not None:
            return len(inst.running) + inst.n_waiting
        return sum(len(i.running) + i.n_waiting for i in self.instances)

    def free_slots(self):
        return sum(i.max_batch - len(i.running) - i.n_waiting for i in self.instances)


class Engine:
    """Runs one simulation; :func:`servingmath.simulate.simulate` is the public entry point."""

    def __init__(self, config, seed, progress=False, *, use_compiled=True):
        w = config.workload
        # the compiled loop (.compiled) for the replicas it transcribes; False: the reference loop only
        self.compiled = bool(use_compiled) and compiled.available()
        self.compiled_instances = 0     # how many instances the compiled loop simulated
        self._prompt, self._out, self._prio = w.prompt_lens, w.output_lens, w.priorities
        self.config = config
        self.seed = seed
        self.fleet = isinstance(config, FleetConfig)
        self.n = n = len(w)
        self.n_classes = int(w.priorities.max()) + 1 if n else 1
        # the per-request lists of the reference loop are made on first use (__getattr__): a run
        # entirely in the compiled loop never needs them (millions of requests: gigabytes)
        self.extra = {}            # rid -> [[emission time, instance, first step, steps], ...] after preemptions
        has_prefixes = w.has_prefixes
        self.prefix_id = w.prefix_ids.tolist() if has_prefixes else None
        self.prefix_len = w.prefix_lens.tolist() if has_prefixes else None
        self.skip = self.shared = self.phase_of = self.draft_mark = self.spec_cum = None
        self.events = []
        self.counter = itertools.count()
        self.n_done = 0
        self.progress = progress
        self._progress_every = max(1, n // 100)

        seeds = np.random.SeedSequence(int(seed)).spawn(4)
        self.rng_arrivals = np.random.default_rng(seeds[0])
        self.rng_think = np.random.default_rng(seeds[1])
        self.rng_spec = np.random.default_rng(seeds[2])
        self.rng_route = np.random.default_rng(seeds[3])

        self.instances = []
        self.replicas = []
        self._drafts = {}
        self._checks = []
        self.disaggregated = False
        if self.fleet:
            for i, rep in enumerate(config.replicas):
                self._add_replica(rep.server, rep.policy, rep.speculative, f"replica-{i}")
        elif isinstance(config.policy, Disaggregated):
            self._build_disaggregated(config)
        else:
            self._add_replica(config.server, config.policy, config.speculative, "server")
        self._allocate_state()
        self._check_requests()
        self._setup_arrivals(config.arrivals)
        self._setup_fleet()

    # the reference loop's per-request state: made the first time it is read
    _LISTS = {
        "open_times": lambda e: e._times.tolist(),
        "prompt": lambda e: e._prompt.tolist(),
        "out": lambda e: e._out.tolist(),
        "prio": lambda e: e._prio.tolist(),
        "arrival": lambda e: [NAN] * e.n,
        "scheduled": lambda e: [NAN] * e.n,
        "first_token": lambda e: [NAN] * e.n,
        "finish_time": lambda e: [NAN] * e.n,
        "produced": lambda e: [0] * e.n,
        "preemptions": lambda e: [0] * e.n,
        "fin": lambda e: [-1] * e.n,
        "join_g": lambda e: [0] * e.n,
        "join_p": lambda e: [0] * e.n,
        "st_inst": lambda e: [-1] * e.n,     # the first decode stint: instance, first step, steps
        "st_g0": lambda e: [0] * e.n,
        "st_n": lambda e: [0] * e.n,
        "replica_of": lambda e: [0] * e.n if e.fleet else None,
        "cached_tokens": lambda e: [0] * e.n if e.config.workload.has_prefixes else None,
    }

    def __getattr__(self, name):
        make = Engine._LISTS.get(name)
        if make is None:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        value = make(self)
        setattr(self, name, value)
        return value

    # ---- set-up ---------------------------------------------------------------------------------------
    @staticmethod
    def _prefill_cap(server, value):
        if value is not None:
            return value
        return INF if server.step_times is not None else max(2048, server.max_context_len)

    def _draft_for(self, steps, speculative):
        if speculative is None:
            return None
        spec = speculative.speculative if isinstance(speculative, SpeculativeByLoad) else speculative
        if spec.draft_model is None:
            return None
        if not isinstance(steps, LibraryStepTimes):
            raise ValueError("a draft_model needs a server with a model and an accelerator; "
                             "with a toy step_times server use draft_step_time")
        key = (id(steps), repr(spec.draft_model))
        draft = self._drafts.get(key)
        if draft is None:
            draft = LibraryStepTimes.for_deployment(
                dataclasses.replace(steps.deployment, model=get_model(spec.draft_model)))
            self._drafts[key] = (draft, steps)     # keep steps alive: the id stays unique
        else:
            draft = draft[0]
        return draft

    def _add_replica(self, server, policy, speculative, name):
        steps = server.build_step_times()
        p = server.pipeline_parallel
        total = server.kv_capacity(steps)
        kv = total if p == 1 or total == INF else total // p
        draft = self._draft_for(steps, speculative)
        pipe = None
        if p > 1:
            latency, per_token = server.stage_transfer()
            overhead = steps.overhead if isinstance(steps, LibraryStepTimes) else 0.0
            pipe = Pipeline(p, overhead, latency, per_token, every_stage=server.pipeline_overhead == "stage")
        options = dict(speculative=speculative, draft=draft, pipe=pipe)
        max_prefill = INF
        # the instance classes: plain (the short paths) or featured (the KV manager's options, a
        # pipeline, a speculation switch, a central queue)
        router = self.config.router if self.fleet else None
        featured = isinstance(router, CentralQueue) or pipe is not None or isinstance(speculative, SpeculativeByLoad)
        if isinstance(policy, (ContinuousBatching, ChunkedPrefill)):
            options.update(block_size=policy.block_size, watermark=policy.watermark,
                           prefix_caching=bool(policy.prefix_caching and self.prefix_id is not None),
                           priority_preemption=policy.priority_preemption)
            featured = featured or (options["block_size"] > 1 or options["watermark"] > 0
                                    or options["prefix_caching"] or options["priority_preemption"])
        replica = _Replica(self, len(self.replicas), name)
        for v in range(p):
            label = name if p == 1 else f"{name}.ve{v}"
            index = len(self.instances)
            if isinstance(policy, ContinuousBatching):
                max_prefill = self._prefill_cap(server, policy.max_prefill_tokens)
                cls = PrefillFirstFeatured if featured else PrefillFirst
                if policy.scheduler_steps > 1:
                    if featured or speculative is not None:
                        raise ValueError(f"scheduler_steps = {policy.scheduler_steps} (multi-step scheduling) runs "
                                         "on a plain replica: no speculative decoding, pipeline, prefix caching, "
                                         "paged KV options or central queue")
                    cls = PrefillFirstMultiStep
                inst = cls(self, index, label, steps, kv, policy, max_prefill, **options)
            elif isinstance(policy, ChunkedPrefill):
                cls = ChunkedFeatured if featured else Chunked
                inst = cls(self, index, label, steps, kv, policy, **options)
            else:
                inst = (StaticFeatured if featured else Static)(self, index, label, steps, kv, policy, **options)
            inst.replica = replica.index
            replica.instances.append(inst)
            self.instances.append(inst)
        if p == 1:
            replica.single = replica.instances[0]
        self.replicas.append(replica)
        inst = replica.instances[0]
        self._checks.append((name, server.max_context_len, inst.kv_cap, max_prefill, inst.wm_tokens, inst.bs))

    def _build_disaggregated(self, config):
        policy, server = config.policy, config.server
        self.disaggregated = True
        pserver = policy.prefill_server or server
        dserver = policy.decode_server or server
        for srv in (pserver, dserver):
            if srv.pipeline_parallel > 1:
                raise ValueError("pipeline_parallel > 1 is not simulated in a Disaggregated deployment")
        psteps, dsteps = pserver.build_step_times(), dserver.build_step_times()
        # memory.kv_transfer_time is affine in the prompt: latency + L_p x (seconds per token)
        per_token = (float(kv_transfer_time(psteps.model, 1, link_bandwidth=policy.link_bandwidth,
                                            kv_dtype=psteps.deployment.kv_dtype))
                     if isinstance(psteps, LibraryStepTimes) else 0.0)
        transfer = (float(policy.transfer_latency), per_token)
        cap_p = self._prefill_cap(pserver, policy.max_prefill_tokens)
        self.prefill_kv_capacity = pserver.kv_capacity(psteps)
        draft = self._draft_for(dsteps, config.speculative)
        self.prefill_pool = [
            PrefillOnly(self, i, f"prefill-{i}", psteps, self.prefill_kv_capacity, cap_p, transfer, draft=draft)
            for i in range(policy.prefill_instances)]
        self.instances += self.prefill_pool
        kv = dserver.kv_capacity(dsteps)
        self.decode_pool = [
            DecodeOnly(self, len(self.instances) + i, f"decode-{i}", dsteps, kv, policy.max_batch_size,
                       speculative=config.speculative, draft=draft)
            for i in range(policy.decode_instances)]
        self.instances += self.decode_pool
        self._checks.append(("", min(pserver.max_context_len, dserver.max_context_len), kv, cap_p, 0, 1))

    def _allocate_state(self):
        n, insts = self.n, self.instances
        if any(i.spec is not None or i.switch is not None for i in insts):
            self.spec_cum = {}
        if any(i.switch is not None for i in insts):
            self.draft_mark = {}
        if any(i.bs > 1 for i in insts):
            self.phase_of = [0] * n
        if any(i.paged for i in insts):
            self.skip = [0] * n
        if any(i.pc is not None for i in insts):
            self.shared = [0] * n

    def _check_requests(self):
        prompt = np.asarray(self._prompt, dtype=np.int64)
        total = prompt + np.asarray(self._out, dtype=np.int64)
        for name, max_context, kv, max_prefill, wm, bs in self._checks:
            where = f" on {name}" if self.fleet else ""
            need = total if bs == 1 else -(-total // bs) * bs
            for limit, value, what in [(max_context, total, "the model's maximum context"),
                                       (kv, need, "the KV-cache capacity")]:
                if limit != INF and value.max() > limit:
                    i = int(np.argmax(value > limit))
                    raise ValueError(
                        f"request {i} needs prompt_len + output_len = {int(total[i])} tokens, more than "
                        f"{what} of {int(limit)} tokens{where}; shorten it or give the server more memory")
            if wm and kv != INF:
                first = -(-(prompt + 1) // bs) * bs
                if first.max() > kv - wm:
                    i = int(np.argmax(first > kv - wm))
                    raise ValueError(f"request {i}'s prompt of {int(prompt[i])} tokens never fits beside the "
                                     f"watermark of {int(wm)} KV tokens{where} (capacity {int(kv)})")
            if max_prefill != INF and prompt.max() > max_prefill:
                i = int(np.argmax(prompt > max_prefill))
                raise ValueError(f"request {i} has prompt_len = {int(prompt[i])} tokens, more than "
                                 f"max_prefill_tokens = {int(max_prefill)}{where}")
        if self.disaggregated and prompt.max() + 1 > self.prefill_kv_capacity:
            i = int(np.argmax(prompt + 1 > self.prefill_kv_capacity))
            raise ValueError(f"request {i} has prompt_len = {int(prompt[i])} tokens, more than the "
                             f"prefill instances' KV-cache capacity of {int(self.prefill_kv_capacity)} tokens")

    def _setup_arrivals(self, arrivals):
        n = self.n
        self.closed = isinstance(arrivals, (ClosedLoop, CappedPoisson))
        self.due = None                            # a capped stream's due times (CappedPoisson)
        if isinstance(arrivals, Poisson):          # exponential gaps, or gamma ones (burstiness != 1)
            self._times = np.cumsum(arrivals.gaps(self.rng_arrivals, n))
        elif isinstance(arrivals, PiecewisePoisson):
            self._times = np.asarray(arrivals.arrival_times(self.rng_arrivals, n), dtype=float)
        elif isinstance(arrivals, Timestamps):
            self._times = np.asarray(arrivals.times, dtype=float)
        else:
            # clients: a closed loop's (each sends at 0, then think_time after its request finishes), or a
            # capped stream's semaphore (request k is sent when due or when a slot frees, whichever is later)
            self._times = np.zeros(0)
            if isinstance(arrivals, CappedPoisson):
                self.due = np.cumsum(arrivals.stream.gaps(self.rng_arrivals, n))
                self.think, self.think_exp, clients = 0.0, False, int(arrivals.max_concurrency)
            else:
                self.think = float(arrivals.think_time)
                self.think_exp = arrivals.think_time_distribution == "exponential"
                clients = int(arrivals.clients)
            self.client = [-1] * n
            first = min(clients, n)
            for rid in range(first):
                self.client[rid] = rid
                start = 0.0 if self.due is None else float(self.due[rid])
                heapq.heappush(self.events, (start, _ARRIVAL, next(self.counter), rid, 0))
            self.next_rid = first
            self.pending_arrivals = first
        # the open-loop arrival times (an array; the reference loop reads them as a list, open_times)
        self.last_open = float(self._times[-1]) if self._times.size else INF   # see arrivals_exhausted

    # ---- the fleet: router, central queue, autoscaling -----------------------------------------------------
    def _setup_fleet(self):
        self.central = None
        self.n_central = 0
        self.scale_log = []
        if not self.fleet:
            return
        config = self.config
        n_max = len(self.replicas)
        scaler = config.autoscaler
        k = n_max if scaler is None else scaler.initial(n_max)
        self.state = [ON if i < k else OFF for i in range(n_max)]
        self._update_routable()
        for i in range(n_max):
            self.scale_log.append((0.0, i, self.state[i]))
        if isinstance(scaler, ScheduledScaling):
            for t, c in zip(scaler.times.tolist(), scaler.replicas.tolist()):
                heapq.heappush(self.events, (t, _SCALE, next(self.counter), int(c), 0))
        elif isinstance(scaler, RateScaling):
            heapq.heappush(self.events, (float(scaler.interval), _SCALE, next(self.counter), -1, 0))
        router = config.router
        self.route = self._make_router(router)
        if isinstance(router, CentralQueue):
            self.central = [deque() for _ in range(self.n_classes)]
            for inst in self.instances:
                inst.pull = True

    def _update_routable(self):
        self.routable = [self.replicas[i] for i, s in enumerate(self.state) if s == ON]
        # replicas of one instance each (no pipeline): the routers read the instances directly
        self.flat = all(rep.single is not None for rep in self.routable)
        self.routable_insts = [rep.single for rep in self.routable] if self.flat else None

    def _make_router(self, router):
        if isinstance(router, Random):
            self.route_draws = self.rng_route.random(self.n)
            u = self.route_draws.tolist()

            def route(rid, t):
                reps = self.routable
                return reps[int(u[rid] * len(reps))]
            return route
        if isinstance(router, RoundRobin):
            turn = itertools.count()

            def route(rid, t):
                reps = self.routable
                return reps[next(turn) % len(reps)]
            return route
        if isinstance(router, LeastLoaded):
            return self._least_loaded(router.measure)
        if isinstance(router, PrefixAffinity):
            fallback = self._least_loaded(router.fallback.measure)
            home = {}
            ids = self.prefix_id
            b_abs, b_rel = float(router.balance_abs), float(router.balance_rel)

            def route(rid, t):
                reps = self.routable
                pid = ids[rid] if ids is not None else -1
                if pid < 0:
                    return fallback(rid, t)
                if self.flat:
                    loads = [len(i.running) + i.n_waiting for i in self.routable_insts]
                else:
                    loads = [r.requests() for r in reps]
                hi, lo = max(loads), min(loads)
                if hi - lo > b_abs and hi > b_rel * lo:       # imbalanced: shortest queue
                    return reps[loads.index(lo)]
                rep = home.get(pid)
                if rep is None or self.state[rep.index] != ON:
                    rep = fallback(rid, t)
                    home[pid] = rep
                return rep
            return route

        def route(rid, t):                                  # CentralQueue
            best, most = None, 0
            for rep in self.routable:
                free = rep.free_slots()
                if free > most:
                    best, most = rep, free
            return best
        return route

    def _least_loaded(self, measure):
        # the loads in a list, then the first smallest (ties to the lowest index): min and index
        # run in C, quicker than comparing in a Python loop
        if measure == "requests":
            def route(rid, t):
                if not self.flat:
                    return min(self.routable, key=_Replica.requests)
                loads = [len(inst.running) + inst.n_waiting for inst in self.routable_insts]
                return self.routable[loads.index(min(loads))]
            return route

        def route(rid, t):
            if not self.flat:
                return min(self.routable, key=lambda rep: rep.tokens(t))
            loads = [inst.work - (t - inst.seg[0]) * inst.drain if inst.kind == _DECODE else inst.work
                     for inst in self.routable_insts]         # inst.work_at(t), inlined
            return self.routable[loads.index(min(loads))]
        return route

    def pull(self, inst, t):
        """A central queue: an instance with free slots takes the oldest waiting requests."""
        if not self.n_central or self.state[inst.replica] != ON:
            return
        central = self.central
        while self.n_central and len(inst.running) + inst.n_waiting < inst.max_batch:
            for dq in central:
                if dq:
                    rid = dq.popleft()
                    break
            self.n_central -= 1
            self.replica_of[rid] = inst.replica
            inst.work += self.prompt[rid] + self.out[rid]
            inst.waiting[self.prio[rid]].append(rid)
            inst.n_waiting += 1

    def _on_scale(self, t, target):
        scaler = self.config.autoscaler
        n_max = len(self.replicas)
        if target < 0:        # RateScaling: measure, decide, and look again after an interval
            target = self._rate_target(t)
            if self.next_open < self.n_open:
                heapq.heappush(self.events, (t + float(scaler.interval), _SCALE, next(self.counter), -1, 0))
        self._scale_to(min(int(target), n_max), t, float(scaler.warmup))

    def _scale_to(self, target, t, warmup):
        state = self.state
        committed = [i for i, s in enumerate(state) if s in (ON, WARMING)]
        k = len(committed)
        if target > k:
            # bring back draining replicas first (still loaded), then start cold ones
            for i in [i for i, s in enumerate(state) if s == DRAINING][:target - k]:
                state[i] = ON
                self.scale_log.append((t, i, ON))
                k += 1
            for i in [i for i, s in enumerate(state) if s == OFF][:target - k]:
                if warmup > 0:
                    state[i] = WARMING
                    heapq.heappush(self.events, (t + warmup, _READY, next(self.counter), i, 0))
                else:
                    state[i] = ON
                self.scale_log.append((t, i, state[i]))
        elif target < k:
            for i in sorted(committed, reverse=True)[:k - target]:
                state[i] = DRAINING if state[i] == ON else OFF
                self.scale_log.append((t, i, state[i]))
        self._update_routable()
        self._wake_for_central(t)

    def _on_ready(self, t, i):
        if self.state[i] == WARMING:
            self.state[i] = ON
            self.scale_log.append((t, i, ON))
            self._update_routable()
            self._wake_for_central(t)

    def _wake_for_central(self, t):
        if not self.n_central:
            return
        for rep in self.routable:
            for inst in rep.instances:
                if inst.kind == _IDLE:
                    self.pull(inst, t)
                    if inst.n_waiting:
                        inst._schedule(t, _WAKE)

    # ---- speculative decoding ----------------------------------------------------------------------------
    def spec_sample(self, rid, left, spec):
        """Draw the tokens of each speculative step until ``left`` tokens; return the steps needed."""
        g, a = spec.num_draft_tokens, spec.acceptance_rate
        mean = spec.expected_tokens_per_step
        m = int(left / mean * 1.5) + 8
        while True:
            if a <= 0:
                accepted = np.zeros(m)
            elif a >= 1:
                accepted = np.full(m, float(g))
            else:
                u = self.rng_spec.random(m)
                accepted = np.minimum(np.floor(np.log1p(-u) / math.log(a)), g)
            cum = np.cumsum(accepted + 1)
            if cum[-1] >= left:
                break
            m *= 2
        steps = int(np.searchsorted(cum, left)) + 1
        self.spec_cum[rid] = [0] + np.minimum(cum[:steps], left).astype(int).tolist()
        return steps

    # ---- arrivals and completions --------------------------------------------------------------------------
    def arrivals_exhausted(self, t):
        """Whether every request has arrived by ``t``, the time of the event being handled (arrivals
        come first at equal times; a decoupled fleet's replica sees only its own arrivals)."""
        if self.closed:
            return self.pending_arrivals == 0
        return t >= self.last_open

    def _arrive(self, rid, t):
        self.arrival[rid] = t
        if self.disaggregated:
            inst = min(self.prefill_pool, key=lambda p: (p.queued_tokens, p.index))
            inst.enqueue(rid, t)
        elif self.fleet:
            rep = self.route(rid, t)
            if rep is None:                      # a central queue with every slot taken
                self.central[self.prio[rid]].append(rid)
                self.n_central += 1
            else:
                rep.enqueue(rid, t)
        else:
            self.replicas[0].enqueue(rid, t)

    def _transfer_done(self, rid, t):
        inst = min(self.decode_pool, key=lambda d: (len(d.running) + d.n_waiting, d.index))
        inst.enqueue(rid, t)

    def finish(self, rid, t):
        self.finish_time[rid] = t
        self.n_done += 1
        if self.closed and self.next_rid < self.n:
            nxt = self.next_rid
            self.next_rid += 1
            self.client[nxt] = self.client[rid]
            think = self.think
            if self.think_exp and think > 0:
                think = float(self.rng_think.exponential(think))
            send = t + think if self.due is None else max(t, float(self.due[nxt]))
            heapq.heappush(self.events, (send, _ARRIVAL, next(self.counter), nxt, 0))
            self.pending_arrivals += 1
        if self.progress and self.n_done % self._progress_every == 0:
            self._report()

    def _report(self):
        print(f"\r[simulate] {100 * self.n_done // self.n:3d} % "
              f"({self.n_done}/{self.n} requests)", end="", file=sys.stderr, flush=True)

    # ---- the loop ---------------------------------------------------------------------------------------------
    def _fixed_routes(self):
        """The replica of every request when the replicas of a fleet never interact, else None.

        They do not when the router reads no state (Random: the router's own draws; RoundRobin:
        the request's turn), every replica is on all day (no autoscaler), the arrivals are open-loop
        (a closed loop's next request comes from whichever replica finishes first) and no replica
        speculates (the acceptances come from one random stream, drawn in event order).
        """
        router = self.config.router if self.fleet else None
        if (not isinstance(router, (Random, RoundRobin)) or self.closed or self.config.autoscaler is not None
                or any(i.spec is not None or i.switch is not None for i in self.instances)):
            return None
        c = len(self.replicas)
        if isinstance(router, RoundRobin):
            return np.arange(self.n) % c
        return (self.route_draws * c).astype(np.int64).tolist()     # the router's int(u * c), for all at once

    def run(self, workers=1):
        """Run the loop to the end. ``workers`` > 1: the replicas of a decoupled fleet (see
        :meth:`_fixed_routes`) are split among that many processes (ignored for other configurations)."""
        # the loop allocates millions of small tuples that live to the end (events, the logs): the
        # cyclic garbage collector would scan them again and again for nothing (a few per cent of
        # the time), so it pauses during the run
        collecting = gc.isenabled()
        gc.disable()
        try:
            self._run(workers)
        finally:
            if collecting:
                gc.enable()
        if self.progress:
            print(file=sys.stderr)
        if self.n_done != self.n:  # pragma: no cover - a bug, not a user error
            raise RuntimeError(f"simulation stalled with {self.n - self.n_done} unfinished requests")
        return self

    def _run(self, workers=1):
        owner = self._fixed_routes()
        if owner is None:
            single = None
            if not self.closed and not self.disaggregated and not self.fleet and len(self.instances) == 1:
                single = self.replicas[0]
                if self.compiled and compiled.supports(single.single):
                    self.mine = [np.arange(self.n)]
                    self._run_replicas([0])
                    return
            if self._compiled_fleet():
                return
            self._loop(self.open_times, range(self.n), single)
            return
        self._deal(owner)
        if workers > 1 and len(self.replicas) > 1:
            self._run_in_processes(min(workers, len(self.replicas)))
        else:
            self._run_replicas(range(len(self.replicas)))

    def _deal(self, owner):
        """Record the replica of every request, and each replica's requests in arrival order."""
        owner = np.asarray(owner, dtype=np.int64)
        self.replica_of = owner
        order = np.argsort(owner, kind="stable")
        cuts = np.cumsum(np.bincount(owner, minlength=len(self.replicas)))[:-1]
        self.mine = np.split(order, cuts)

    def _compiled_fleet(self):
        """A fleet of plain replicas, open-loop, whose replicas interact (a least-loaded router, or an
        autoscaler behind any of the routers the compiled loop knows): the whole loop compiled (:mod:`.compiled`). False where it does not apply or
        would preempt (then nothing has changed and the reference loop runs)."""
        if not (self.compiled and self.fleet and not self.closed):
            return False
        code = compiled.router_code(self.config.router)
        insts = [rep.single for rep in self.replicas]
        if code is None or any(i is None or not compiled.supports(i) for i in insts):
            return False
        rids = np.arange(self.n)
        u = self.route_draws if code == compiled.ROUTE_RANDOM else None
        scaler = self.config.autoscaler
        scaling, warmup = None, 0.0
        if scaler is not None:
            scaling, warmup = self._scaling_decisions(), float(scaler.warmup)
        outcome = compiled.run(insts, self._times, self._prompt, self._out,
                               self._prio, self.n_classes, router=code, route_u=u, states=self.state,
                               scaling=scaling, warmup=warmup)
        if outcome is None:
            return False
        if scaling is not None:
            self.scale_log = outcome[0].pop("scale_log")
        columns = self._columns()
        self._store(columns, rids, outcome, insts)
        for name, values in columns.items():
            setattr(self, name, values)
        self.replica_of = outcome[0]["replica_of"]
        return True

    def _scaling_decisions(self):
        """The autoscaler's (times, targets) for the whole run, as _on_scale takes them: they depend
        on the open-loop arrivals only (arrivals at an instant come before a decision there)."""
        scaler, n_max = self.config.autoscaler, len(self.replicas)
        if isinstance(scaler, ScheduledScaling):
            return ([float(t) for t in scaler.times.tolist()],
                    [min(int(c), n_max) for c in scaler.replicas.tolist()])
        step = float(scaler.interval)
        at, targets = [], []
        t = step
        while True:
            at.append(t)
            targets.append(min(int(self._rate_target(t)), n_max))
            if np.searchsorted(self._times, t, side="right") >= len(self._times):   # every request has arrived
                return at, targets
            t = t + step

    def _rate_target(self, t):
        """RateScaling's target at t, from the open-loop arrivals of the last window (those at t included:
        arrivals come first at equal times)."""
        scaler, times = self.config.autoscaler, self._times
        window = float(scaler.window or scaler.interval)
        count = int(np.searchsorted(times, t, side="right") - np.searchsorted(times, t - window, side="right"))
        return scaler.target(count / min(window, t) if t > 0 else 0.0, len(self.replicas))

    def _store(self, columns, rids, outcome, insts):
        """Copy a compiled run's outcome into the engine's columns and the instances' logs."""
        mine, logs = outcome
        columns["arrival"][rids] = self._times[rids]
        for name, values in mine.items():
            if name in columns:
                columns[name][rids] = values
        for inst, (segments, series) in zip(insts, logs):
            inst.segments, inst.series = segments, series
        self.compiled_instances += len(insts)
        self.n_done += len(rids)
        if self.progress:
            self._report()

    def _run_replicas(self, indices):
        """Decoupled: each replica is simulated alone over its own arrivals, one after the other: the
        same events in the same order for every replica (nothing another replica does reaches it),
        but a small heap and the one-server fast path (sees_arrivals) per replica. A replica of one
        plain instance runs in the compiled loop (:mod:`.compiled`) unless it would preempt."""
        times = self._times
        rest = list(indices)
        if self.compiled:
            rest = []
            columns = None
            for k in indices:
                rids = self.mine[k]
                inst = self.replicas[k].single
                outcome = None
                if inst is not None and compiled.supports(inst):
                    outcome = compiled.run([inst], times[rids], self._prompt[rids], self._out[rids],
                                           self._prio[rids], self.n_classes)
                if outcome is None:
                    rest.append(k)
                    continue
                if columns is None:
                    columns = self._columns()
                self._store(columns, rids, outcome, [inst])
            if columns is not None:
                for name, values in columns.items():
                    setattr(self, name, values.tolist() if rest else values)
        for k in rest:
            self._loop(times[self.mine[k]].tolist(), self.mine[k].tolist(), self.replicas[k])
        if rest:
            self.open_times = times.tolist()

    def _columns(self):
        """The per-request columns the compiled loop writes, as arrays of their initial values (it
        runs before any replica of the reference loop)."""
        n = self.n
        return dict(arrival=np.full(n, NAN), scheduled=np.full(n, NAN), first_token=np.full(n, NAN),
                    finish_time=np.full(n, NAN), preemptions=np.zeros(n, np.int64),
                    st_inst=np.full(n, -1, np.int64), st_g0=np.zeros(n, np.int64), st_n=np.zeros(n, np.int64))

    # what a result reads of a replica's requests and instances (see results.SimulationResult)
    _PER_REQUEST = ("arrival", "scheduled", "first_token", "finish_time", "preemptions", "st_inst", "st_g0",
                    "st_n", "cached_tokens")

    def _outcome(self, indices):
        """The state a result reads of the replicas ``indices``, to send back from a worker process."""
        rids = np.concatenate([self.mine[k] for k in indices]) if indices else np.zeros(0, np.int64)
        columns = {name: np.asarray(getattr(self, name))[rids]
                   for name in self._PER_REQUEST if getattr(self, name) is not None}
        mine = set(indices)
        extra = {rid: pieces for rid, pieces in self.extra.items() if self.replica_of[rid] in mine}
        # the logs as the arrays the result makes of them (quicker to send than lists of tuples)
        insts = [(inst.index, np.asarray(inst.segments, dtype=float).reshape(-1, 6),
                  np.asarray(inst.series, dtype=float).reshape(-1, 5),
                  None if inst.pc is None else (inst.pc.lookups, inst.pc.hits, inst.pc.hit_tokens),
                  None if inst.pipe is None else inst.pipe.busy)
                 for k in indices for inst in self.replicas[k].instances]
        return rids, columns, extra, insts, self.n_done

    def _run_in_processes(self, workers):
        """The replicas dealt out to ``workers`` processes, each simulating its share from the same
        configuration and seed (so the same arrivals and routes); their outcomes are copied back here."""
        from concurrent.futures import ProcessPoolExecutor

        shares = [list(range(w, len(self.replicas), workers)) for w in range(workers)]
        with ProcessPoolExecutor(max_workers=workers) as pool:
            outcomes = list(pool.map(_simulate_replicas, [self.config] * workers, [self.seed] * workers, shares))
        merged = {}
        for rids, columns, extra, insts, n_done in outcomes:
            for name, values in columns.items():
                if name not in merged:
                    merged[name] = np.asarray(getattr(self, name), dtype=values.dtype)
                merged[name][rids] = values
            self.extra.update(extra)
            for index, segments, series, pc, busy in insts:
                inst = self.instances[index]
                inst.segments, inst.series = segments, series
                if pc is not None:
                    inst.pc.lookups, inst.pc.hits, inst.pc.hit_tokens = pc
                if busy is not None:
                    inst.pipe.busy = busy
            self.n_done += n_done
        for name, values in merged.items():
            setattr(self, name, values)

    def _loop(self, open_times, rids, replica):
        """The event loop over the open-loop arrivals ``open_times`` (request ids ``rids``), all routed to
        ``replica`` when given (one server, or one replica of a decoupled fleet), else to :meth:`_arrive`."""
        events, instances = self.events, self.instances
        self.open_times = open_times
        n_open = self.n_open = len(open_times)
        self.next_open = 0
        single = replica.single if replica is not None else None
        if single is not None:
            # the next arrival bounds each run of decode steps: no run to cut when it comes
            single.sees_arrivals = single.WATCHES_ARRIVALS
        heappop = heapq.heappop
        arrival = self.arrival
        while True:
            i = self.next_open
            ta = open_times[i] if i < n_open else INF
            te = events[0][0] if events else INF
            if ta <= te:
                if ta == INF:
                    break
                self.next_open = i + 1
                rid = rids[i]
                if single is not None:
                    arrival[rid] = ta
                    single.enqueue(rid, ta)
                elif replica is not None:
                    arrival[rid] = ta
                    replica.enqueue(rid, ta)
                else:
                    self._arrive(rid, ta)
                continue
            t, kind, _, a, b = heappop(events)
            if kind == _END:
                inst = instances[a]
                if b == inst.version:
                    inst.on_end(t)
            elif kind == _ARRIVAL:
                self.pending_arrivals -= 1
                self._arrive(a, t)
            elif kind == _TRANSFER:
                self._transfer_done(a, t)
            elif kind == _SCALE:
                self._on_scale(t, a)
            elif kind == _READY:
                self._on_ready(t, a)
            else:
                instances[a].on_timeout(t, b)


def _simulate_replicas(config, seed, indices):
    """In a worker process: simulate the replicas ``indices`` of a decoupled fleet; return their outcome."""
    engine = Engine(config, seed)
    engine._deal(engine._fixed_routes())
    gc.disable()                                    # as in Engine.run (the process ends after)
    engine._run_replicas(indices)
    return engine._outcome(indices)
