"""The event loop of the serving simulator: set-up, arrivals, completions, and time.

:class:`Engine` builds the instances a policy needs (:mod:`.policies`),
checks every request against the model's context and the KV cache, draws the
arrival process from the seed, and runs the loop: take the earliest of the
next open-loop arrival and the next event (an instance's action ending, a
closed-loop arrival, a KV transfer, a static-batching timeout) and hand it on.
At equal times arrivals go first, so a request that arrives exactly at a step
boundary joins there. Each instance jumps over whole runs of decode steps in
closed form (:mod:`.instance`), so the loop sees a few events per request,
not one per token.
"""

from __future__ import annotations

import heapq
import itertools
import math
import sys

import dataclasses

import numpy as np

from ..memory import kv_transfer_time
from ..models import get_model
from ..workloads import ClosedLoop, Poisson, Timestamps
from .config import ChunkedPrefill, ContinuousBatching, Disaggregated
from .instance import _ARRIVAL, _END, _TRANSFER, INF, NAN
from .policies import Chunked, DecodeOnly, PrefillFirst, PrefillOnly, Static
from .steptimes import LibraryStepTimes


class Engine:
    """Runs one simulation; :func:`servingmath.simulate.simulate` is the public entry point."""

    def __init__(self, config, seed, progress=False):
        w = config.workload
        self.config = config
        self.n = n = len(w)
        self.prompt = w.prompt_lens.tolist()
        self.out = w.output_lens.tolist()
        self.prio = w.priorities.tolist()
        self.n_classes = max(self.prio) + 1
        self.arrival = [NAN] * n
        self.scheduled = [NAN] * n
        self.first_token = [NAN] * n
        self.finish_time = [NAN] * n
        self.produced = [0] * n
        self.preemptions = [0] * n
        self.fin = [-1] * n
        self.join_g = [0] * n
        self.join_p = [0] * n
        self.st_inst = [-1] * n    # the first decode stint: instance, first step, steps
        self.st_g0 = [0] * n
        self.st_n = [0] * n
        self.extra = {}            # rid -> [[emission time, instance, first step, steps], ...] after preemptions
        self.events = []
        self.counter = itertools.count()
        self.n_done = 0
        self.progress = progress
        self._progress_every = max(1, n // 100)

        seeds = np.random.SeedSequence(int(seed)).spawn(3)
        self.rng_arrivals = np.random.default_rng(seeds[0])
        self.rng_think = np.random.default_rng(seeds[1])
        self.rng_spec = np.random.default_rng(seeds[2])

        self._build_instances(config)
        self._check_requests()
        self._setup_arrivals(config.arrivals)

    # ---- set-up ---------------------------------------------------------------------------------------
    def _build_instances(self, config):
        policy, server = config.policy, config.server
        self.spec = config.speculative
        self.draft = None
        self.instances = []
        self.max_context = server.max_context_len
        self.disaggregated = isinstance(policy, Disaggregated)

        def default_prefill_cap(srv, value):
            if value is not None:
                return value
            return INF if srv.step_times is not None else max(2048, srv.max_context_len)

        if isinstance(policy, Disaggregated):
            pserver = policy.prefill_server or server
            dserver = policy.decode_server or server
            psteps, dsteps = pserver.build_step_times(), dserver.build_step_times()
            self.max_context = min(pserver.max_context_len, dserver.max_context_len)
            # memory.kv_transfer_time is affine in the prompt: latency + L_p x (seconds per token)
            per_token = (float(kv_transfer_time(psteps.model, 1, link_bandwidth=policy.link_bandwidth,
                                                kv_dtype=psteps.deployment.kv_dtype))
                         if isinstance(psteps, LibraryStepTimes) else 0.0)
            transfer = (float(policy.transfer_latency), per_token)
            cap_p = default_prefill_cap(pserver, policy.max_prefill_tokens)
            self.prefill_kv_capacity = pserver.kv_capacity(psteps)
            self.prefill_pool = [
                PrefillOnly(self, i, f"prefill-{i}", psteps, self.prefill_kv_capacity, cap_p, transfer)
                for i in range(policy.prefill_instances)]
            self.instances += self.prefill_pool
            kv = dserver.kv_capacity(dsteps)
            self.decode_pool = [
                DecodeOnly(self, len(self.instances) + i, f"decode-{i}", dsteps, kv,
                            policy.max_batch_size)
                for i in range(policy.decode_instances)]
            self.instances += self.decode_pool
            self.kv_capacity, self.max_prefill = kv, cap_p
            steps_for_draft = dsteps
        else:
            steps = server.build_step_times()
            kv = server.kv_capacity(steps)
            self.kv_capacity = kv
            self.max_prefill = INF
            if isinstance(policy, ContinuousBatching):
                self.max_prefill = default_prefill_cap(server, policy.max_prefill_tokens)
                inst = PrefillFirst(self, 0, "server", steps, kv, policy, self.max_prefill)
            elif isinstance(policy, ChunkedPrefill):
                inst = Chunked(self, 0, "server", steps, kv, policy)
            else:
                inst = Static(self, 0, "server", steps, kv, policy)
            self.instances = [inst]
            steps_for_draft = steps
        if self.spec is not None and self.spec.draft_model is not None:
            if not isinstance(steps_for_draft, LibraryStepTimes):
                raise ValueError("a draft_model needs a server with a model and an accelerator; "
                                 "with a toy step_times server use draft_step_time")
            target = steps_for_draft.deployment
            self.draft = LibraryStepTimes.for_deployment(
                dataclasses.replace(target, model=get_model(self.spec.draft_model)))

    def _check_requests(self):
        prompt = np.asarray(self.prompt)
        total = prompt + np.asarray(self.out)
        for limit, what in [(self.max_context, "the model's maximum context"),
                            (self.kv_capacity, "the KV-cache capacity")]:
            if limit != INF and total.max() > limit:
                i = int(np.argmax(total > limit))
                raise ValueError(
                    f"request {i} needs prompt_len + output_len = {int(total[i])} tokens, more than "
                    f"{what} of {int(limit)} tokens; shorten it or give the server more memory")
        if self.disaggregated and prompt.max() + 1 > self.prefill_kv_capacity:
            i = int(np.argmax(prompt + 1 > self.prefill_kv_capacity))
            raise ValueError(f"request {i} has prompt_len = {int(prompt[i])} tokens, more than the "
                             f"prefill instances' KV-cache capacity of {int(self.prefill_kv_capacity)} tokens")
        if self.max_prefill != INF and prompt.max() > self.max_prefill:
            i = int(np.argmax(prompt > self.max_prefill))
            raise ValueError(f"request {i} has prompt_len = {int(prompt[i])} tokens, more than "
                             f"max_prefill_tokens = {int(self.max_prefill)}")

    def _setup_arrivals(self, arrivals):
        n = self.n
        self.closed = isinstance(arrivals, ClosedLoop)
        if isinstance(arrivals, Poisson):          # exponential gaps, or gamma ones (burstiness != 1)
            self.open_times = np.cumsum(arrivals.gaps(self.rng_arrivals, n)).tolist()
        elif isinstance(arrivals, Timestamps):
            self.open_times = arrivals.times.tolist()
        else:
            self.open_times = []
            self.think = float(arrivals.think_time)
            self.think_exp = arrivals.think_time_distribution == "exponential"
            self.client = [-1] * n
            first = min(int(arrivals.clients), n)
            for rid in range(first):
                self.client[rid] = rid
                heapq.heappush(self.events, (0.0, _ARRIVAL, next(self.counter), rid, 0))
            self.next_rid = first
            self.pending_arrivals = first

    # ---- speculative decoding ----------------------------------------------------------------------------
    def spec_sample(self, rid, left):
        """Draw the tokens of each speculative step until ``left`` tokens; return the steps needed."""
        spec = self.spec
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

    def draft_time(self, batch, context_sum):
        spec = self.spec
        if self.draft is None:
            return spec.num_draft_tokens * spec.draft_step_time
        total = 0.0
        for j in range(spec.num_draft_tokens):
            s = context_sum + j * batch
            total += self.draft.iteration_time(batch, s, s, batch)
        return total

    def spec_step_time(self, steps, batch, context_sum):
        """A speculative step: the draft's gamma steps, then one verification in which every sequence
        brings gamma + 1 new tokens after its S - 1 cached ones (the step model's counts)."""
        g1 = self.spec.num_draft_tokens + 1
        cached = context_sum - batch
        verify = steps.iteration_time(batch * g1, cached + batch * g1,
                                      g1 * cached + batch * g1 * (g1 + 1) * 0.5, batch * g1)
        return self.draft_time(batch, context_sum) + verify

    # ---- arrivals and completions --------------------------------------------------------------------------
    def arrivals_exhausted(self):
        if self.closed:
            return self.pending_arrivals == 0
        return self.next_open >= len(self.open_times)

    def _arrive(self, rid, t):
        self.arrival[rid] = t
        if self.disaggregated:
            inst = min(self.prefill_pool, key=lambda p: (p.queued_tokens, p.index))
        else:
            inst = self.instances[0]
        inst.enqueue(rid, t)

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
            heapq.heappush(self.events, (t + think, _ARRIVAL, next(self.counter), nxt, 0))
            self.pending_arrivals += 1
        if self.progress and self.n_done % self._progress_every == 0:
            print(f"\r[simulate] {100 * self.n_done // self.n:3d} % "
                  f"({self.n_done}/{self.n} requests)", end="", file=sys.stderr, flush=True)

    # ---- the loop ---------------------------------------------------------------------------------------------
    def run(self):
        events, instances = self.events, self.instances
        open_times = self.open_times
        n_open = self.n_open = len(open_times)
        self.spec_cum = {} if self.spec is not None else None
        self.next_open = 0
        if not self.closed and not self.disaggregated:
            instances[0].sees_arrivals = True
        heappop = heapq.heappop
        arrival = self.arrival
        single = None if self.disaggregated else instances[0]
        while True:
            i = self.next_open
            ta = open_times[i] if i < n_open else INF
            te = events[0][0] if events else INF
            if ta <= te:
                if ta == INF:
                    break
                self.next_open = i + 1
                if single is not None:
                    arrival[i] = ta
                    single.enqueue(i, ta)
                else:
                    self._arrive(i, ta)
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
            else:
                instances[a].on_timeout(t, b)
        if self.progress:
            print(file=sys.stderr)
        if self.n_done != self.n:  # pragma: no cover - a bug, not a user error
            raise RuntimeError(f"simulation stalled with {self.n - self.n_done} unfinished requests")
        return self
