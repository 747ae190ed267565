"""The scheduling policies, one instance class each (the configs live in :mod:`.config`).

* :class:`PrefillFirst`: continuous batching, prefill first (vLLM v0, Orca);
* :class:`Chunked`: chunked prefill with a token budget (Sarathi-Serve, vLLM v1);
* :class:`Static`: request-level batching;
* :class:`PrefillOnly` and :class:`DecodeOnly`: the two pools of a
  disaggregated deployment (DistServe, Splitwise).
"""

from __future__ import annotations

import heapq

from .instance import INF, _IDLE, _MIXED, _PREFILL, _STATIC, _TIMEOUT, _TRANSFER, _WAKE, _Featured, _Instance

class PrefillFirst(_Instance):
    """Continuous batching, prefill first (vLLM v0): admit and prefill, else decode."""

    __slots__ = ("max_prefill",)

    def __init__(self, engine, index, name, steps, kv_capacity, policy, max_prefill, **options):
        super().__init__(engine, index, name, steps, kv_capacity, policy.max_batch_size, **options)
        self.max_prefill = max_prefill

    def plan(self, t):
        if self.n_waiting and len(self.running) < self.max_batch:
            batch, tokens = self._take_prompts(self.max_batch - len(self.running),
                                               self.kv_cap - self.kv_used, self.max_prefill)
            if batch:
                e = self.e
                lengths = []
                for rid in batch:
                    self.running[rid] = None
                    if e.scheduled[rid] != e.scheduled[rid]:
                        e.scheduled[rid] = t
                    lengths.append(e.prompt[rid] + e.produced[rid])
                self.kv_used += tokens + len(batch)
                self.action = batch
                self._log_action(t, tokens)
                self._schedule(t + self._prefill_seconds(lengths), _PREFILL)
                return
        if self.B:
            self._plan_decode(t)

    def _apply_prefill(self, t):
        for rid in self.action:
            # kv_used already holds prompt + produced + 1 for this sequence
            self._emit_prefill_token(rid, t)


class PrefillFirstMultiStep(PrefillFirst):
    """Prefill first with multi-step scheduling (vLLM 0.6 ``--num-scheduler-steps n``).

    A run of decode steps is planned ``n`` steps at a time; the queue is looked at only when
    a run has ended: an arrival does not cut the run short, and a sequence that finishes
    inside the run leaves it without letting a prompt in. ``left`` counts the steps the
    current run still has to go (0: the scheduler decides at the next boundary).
    """

    __slots__ = ("n_steps", "left")
    WATCHES_ARRIVALS = False                   # a run's length does not depend on arrivals

    def __init__(self, engine, index, name, steps, kv_capacity, policy, max_prefill, **options):
        super().__init__(engine, index, name, steps, kv_capacity, policy, max_prefill, **options)
        self.n_steps = int(policy.scheduler_steps)
        self.left = 0

    def plan(self, t):
        if self.left and self.B:              # inside a run: the sequences decode on, nobody joins
            self._plan_decode(t)
            return
        self.left = 0
        super().plan(t)

    def _plan_decode(self, t):
        if not self.left:
            self.left = self.n_steps          # a new run begins
        super()._plan_decode(t)

    def _decode_segment(self, t, B, K):
        return super()._decode_segment(t, B, min(K, self.left))

    def _apply_decode(self, t):
        K = self.seg[1]
        super()._apply_decode(t)
        self.left = max(self.left - K, 0)

    def _truncate(self, t):
        """An arrival inside a run waits for its end (the run is already planned to end there)."""


class Chunked(_Instance):
    """Chunked prefill (Sarathi-Serve): decodes first, prompt chunks fill the token budget."""

    __slots__ = ("budget", "prefilling", "whole")

    def __init__(self, engine, index, name, steps, kv_capacity, policy, **options):
        super().__init__(engine, index, name, steps, kv_capacity, policy.max_batch_size, **options)
        self.budget = policy.token_budget
        self.whole = not policy.chunk_prompts  # whole prompts only (TensorRT-LLM without chunked context)
        self.prefilling = {}  # rid -> tokens of its prompt (+ recomputed output) prefilled so far

    def _could_admit(self):
        return len(self.running) < self.max_batch and self.budget > self.B

    def _drop_prefill(self, rid):
        e = self.e
        del self.prefilling[rid]
        del self.running[rid]
        self.kv_used -= e.prompt[rid] + e.produced[rid] + 1

    def plan(self, t):
        e = self.e
        spec = self.spec
        # the decodes' KV for this iteration
        grow = self._spec_tokens() if spec is not None else self.B
        while self.B and self.kv_used + grow > self.kv_cap:
            self._preempt_one()
            grow = self._spec_tokens() if spec is not None else self.B
        budget = self.budget - (self.B * (spec.num_draft_tokens + 1) if spec is not None else self.B)
        chunks, budget = self._continue_prefills(budget)
        if budget > 0 and self.n_waiting and len(self.running) < self.max_batch:
            batch, _ = self._take_prompts(self.max_batch - len(self.running),
                                          self.kv_cap - self.kv_used - grow, INF)
            budget = self._admit_within(batch, budget, chunks, t)
        if not chunks:
            if self.B:
                self._plan_decode(t)
            return
        dur, tokens, prefill_tokens = self._mixed_time(chunks, self.draft is not None)
        self.action = (chunks, grow, t, dur)
        self._log_action(t, prefill_tokens)
        self._schedule(t + dur, _MIXED)

    def _advance_chunks(self, chunks, t):
        """After an iteration: each prompt's prefilled tokens advance; a finished prompt emits its first token."""
        e = self.e
        for rid, n, done in chunks:
            if rid not in self.prefilling:
                continue
            done += n
            if done < e.prompt[rid] + e.produced[rid]:
                self.prefilling[rid] = done
            else:
                del self.prefilling[rid]
                self._emit_prefill_token(rid, t)

    def _continue_prefills(self, budget):
        """The chunks of the prompts already being prefilled, in order, within ``budget`` tokens."""
        e, chunks = self.e, []
        if budget > 0:
            for rid, done in self.prefilling.items():
                n = min(e.prompt[rid] + e.produced[rid] - done, budget)
                chunks.append((rid, n, done))
                budget -= n
                if budget == 0:
                    break
        return chunks, budget

    def _admit_within(self, batch, budget, chunks, t):
        """Start the prompts of ``batch`` that this iteration's budget reaches (their first chunks go to
        ``chunks``); the rest go back to the queue in order. Returns the budget left."""
        e = self.e
        for i, rid in enumerate(batch):
            if budget <= 0:
                for back in reversed(batch[i:]):
                    self.waiting[e.prio[back]].appendleft(back)
                self.n_waiting += len(batch) - i
                break
            need = e.prompt[rid] + e.produced[rid]
            if self.whole and need > budget and (chunks or self.B):
                for back in reversed(batch[i:]):
                    self.waiting[e.prio[back]].appendleft(back)
                self.n_waiting += len(batch) - i
                break
            self.running[rid] = None
            self.prefilling[rid] = 0
            self.kv_used += need + 1
            if e.scheduled[rid] != e.scheduled[rid]:
                e.scheduled[rid] = t
            n = need if self.whole else min(need, budget)
            chunks.append((rid, n, 0))
            budget -= n
        return budget

    def _mixed_time(self, chunks, with_draft):
        """(seconds, decode tokens, prefill tokens) of one iteration: the decodes plus ``chunks``
        (the draft model prefills the same chunks when ``with_draft``)."""
        e = self.e
        tokens, kv, pairs, logits, extra = self.decode_part()
        prefill_tokens, prefill_kv, prefill_pairs, finals = 0, 0, 0.0, 0
        for rid, n, c in chunks:
            x, y = self.steps.chunk_counts(n, c)
            prefill_tokens, prefill_kv, prefill_pairs = prefill_tokens + n, prefill_kv + x, prefill_pairs + y
            finals += n + c == e.prompt[rid] + e.produced[rid]   # the prompt's last chunk: logits
        dur = self.steps.iteration_time(tokens + prefill_tokens, kv + prefill_kv,
                                        pairs + prefill_pairs, logits + finals) + extra
        if with_draft:
            dur += self.draft.iteration_time(prefill_tokens, prefill_kv, prefill_pairs, finals)
        return dur, tokens, prefill_tokens

    def _apply_mixed(self, t):
        chunks, grow, start, dur = self.action
        if self.B:
            self._log_segment(start, 1, dur, 0.0)
            self.G += 1
            self.S += grow
            self.kv_used += grow
            self.work -= grow
            self._finish_decodes(t)
        self._advance_chunks(chunks, t)


class Static(_Instance):
    """Static batching: wait for a full batch (or a timeout), run it to the end."""

    __slots__ = ("timeout",)

    def __init__(self, engine, index, name, steps, kv_capacity, policy, **options):
        super().__init__(engine, index, name, steps, kv_capacity, policy.batch_size, **options)
        self.timeout = float(policy.timeout)

    def enqueue(self, rid, t):
        self.waiting[self.e.prio[rid]].append(rid)
        self.n_waiting += 1
        if self.kind == _IDLE:
            self._schedule(t, _WAKE)

    def on_timeout(self, t, version):
        if self.kind == _IDLE and version == self.version:
            self.plan(t)

    def plan(self, t):
        e = self.e
        if not self.n_waiting:
            return
        first = min(e.arrival[dq[0]] for dq in self.waiting if dq)
        if not (self.n_waiting >= self.max_batch or t >= first + self.timeout
                or e.arrivals_exhausted(t)):
            if first + self.timeout < INF:
                self.version += 1
                heapq.heappush(e.events, (first + self.timeout, _TIMEOUT, next(e.counter),
                                          self.index, self.version))
            return
        self._run_batch(t)

    def _run_batch(self, t):
        e = self.e
        batch, longest_prompt, longest_out = [], 0, 0
        for dq in self.waiting:
            while dq and len(batch) < self.max_batch:
                rid = dq[0]
                lp, lo = max(longest_prompt, e.prompt[rid]), max(longest_out, e.out[rid])
                if batch and (len(batch) + 1) * (lp + lo) > self.kv_cap:
                    break
                dq.popleft()
                batch.append(rid)
                longest_prompt, longest_out = lp, lo
        self.n_waiting -= len(batch)
        self.work -= sum(e.prompt[rid] + e.out[rid] for rid in batch)
        b, lp = len(batch), longest_prompt
        # prefill of b prompts padded to the longest
        for rid in batch:
            e.scheduled[rid] = t
            self.running[rid] = None
        self.kv_used = b * (lp + 1)
        self.B = 0
        self._log_action(t, b * lp)
        t1 = t + self._prefill_seconds([lp] * b)
        for rid in batch:
            e.first_token[rid] = t1
            e.produced[rid] = 1
            if e.out[rid] == 1:
                e.finish(rid, t1)
        # decode steps of the padded batch until the longest output is done
        by_steps = {}
        for rid in batch:
            if e.out[rid] > 1:
                by_steps.setdefault(e.out[rid] - 1, []).append(rid)
                e.st_inst[rid] = self.index
                e.st_g0[rid] = self.G
                e.st_n[rid] = e.out[rid] - 1
        self.B, self.S = b, b * (lp + 1)
        if by_steps:
            self._log_action(t1, 0)
        now, done = t1, 0
        w, phi = self.steps.window, self.steps.window_share
        for target in sorted(by_steps):
            while done < target:
                K = target - done
                per = self.S // b                     # every padded sequence has the same context
                if w is None:
                    s0, grow = self.S, b
                elif per >= w:                        # keys capped at the window (its share of the layers)
                    s0, grow = phi * b * w + (1.0 - phi) * self.S, (1.0 - phi) * b
                else:
                    s0, grow = self.S, b
                    K = min(K, w - per)
                A, beta, limit = self.steps.decode_line(b, s0)
                if limit != INF:
                    K = min(K, max(1, int((limit - s0) // max(grow, 1)) + 1))
                self._log_segment(now, K, A, beta, s0, grow)
                now += K * A + beta * (K * s0 + grow * K * (K - 1) * 0.5)
                self.G += K
                self.S += K * b
                done += K
            for rid in by_steps[target]:
                e.produced[rid] = e.out[rid]
                e.finish(rid, now)
        self.running.clear()
        self.B = self.S = self.kv_used = 0
        self._schedule(now, _STATIC)


class PrefillOnly(_Instance):
    """A prefill instance of a disaggregated deployment."""

    __slots__ = ("max_prefill", "transfer", "queued_tokens")

    def __init__(self, engine, index, name, steps, kv_capacity, max_prefill, transfer, **options):
        super().__init__(engine, index, name, steps, kv_capacity, 1 << 30, **options)
        self.max_prefill = max_prefill
        self.transfer = transfer  # (latency, seconds per prompt token)
        self.queued_tokens = 0

    def enqueue(self, rid, t):
        self.queued_tokens += self.e.prompt[rid]
        super().enqueue(rid, t)

    def plan(self, t):
        if not self.n_waiting:
            return
        # the prompts' KV must fit while they are prefilled (it leaves with the transfer)
        batch, tokens = self._take_prompts(1 << 30, self.kv_cap, self.max_prefill)
        e = self.e
        for rid in batch:
            e.scheduled[rid] = t
        self.action = batch
        self.kv_used = tokens
        self._log_action(t, tokens)
        self.kv_used = 0
        self._schedule(t + self._prefill_seconds([e.prompt[rid] for rid in batch]), _PREFILL)

    def _apply_prefill(self, t):
        e = self.e
        latency, per_token = self.transfer
        for rid in self.action:
            self.queued_tokens -= e.prompt[rid]
            e.first_token[rid] = t
            e.produced[rid] = 1
            if e.out[rid] == 1:
                e.finish(rid, t)
            else:
                done = t + latency + per_token * e.prompt[rid]
                heapq.heappush(e.events, (done, _TRANSFER, next(e.counter), rid, 0))


class DecodeOnly(_Instance):
    """A decode instance of a disaggregated deployment: requests join with their KV cache."""

    __slots__ = ("reserved",)

    def __init__(self, engine, index, name, steps, kv_capacity, max_batch, **options):
        super().__init__(engine, index, name, steps, kv_capacity, max_batch, **options)
        self.reserved = 0  # KV tokens promised to running sequences (prompt + output each)

    def plan(self, t):
        e = self.e
        if self.n_waiting and len(self.running) < self.max_batch:
            for dq in self.waiting:
                while dq and len(self.running) < self.max_batch:
                    rid = dq[0]
                    need = e.prompt[rid] + e.out[rid]
                    if self.reserved + need > self.kv_cap:
                        break
                    dq.popleft()
                    self.n_waiting -= 1
                    self.reserved += need
                    self.running[rid] = None
                    self.kv_used += e.prompt[rid] + e.produced[rid]
                    self._join(rid)
                else:
                    continue
                break
        if self.B:
            self._plan_decode(t)

    def _release(self, rid):
        self.reserved -= self.e.prompt[rid] + self.e.out[rid]
        super()._release(rid)


# ---- the same policies with options (see instance._Featured) -----------------------------------------------
class PrefillFirstFeatured(_Featured, PrefillFirst):
    """:class:`PrefillFirst` with a paged KV cache, priority preemption, a speculation switch,
    a pipeline or a fleet's load tracking."""

    __slots__ = ()

    def plan(self, t):
        """Prefill first with the KV manager's options, the speculation switch, a pipeline."""
        if self.hooks:
            if self.switch is not None:
                self._check_switch(t)
            if self.prio_preempt and self.n_waiting:
                self._preempt_for_priority(False)
        if self.n_waiting and len(self.running) < self.max_batch:
            room = self.max_batch - len(self.running)
            if self.paged:
                batch, tokens = self._take_prompts_paged(room, 0, self.max_prefill)
            else:
                batch, tokens = self._take_prompts(room, self.kv_cap - self.kv_used, self.max_prefill)
            if batch:
                e = self.e
                lengths = []
                for rid in batch:
                    self.running[rid] = None
                    if e.scheduled[rid] != e.scheduled[rid]:
                        e.scheduled[rid] = t
                    lengths.append(e.prompt[rid] + e.produced[rid])
                cached = None
                if self.paged:
                    if self.pc is not None:
                        cached = [e.skip[rid] for rid in batch]
                else:
                    self.kv_used += tokens + len(batch)
                self.action = batch
                self._log_action(t, tokens)
                seconds = self._prefill_seconds(lengths, cached)
                self._schedule(t + seconds if self.pipe is None else self.pipe.submit(t, seconds, tokens),
                               _PREFILL)
                return
        if self.B:
            self._plan_decode(t)


class ChunkedFeatured(_Featured, Chunked):
    """:class:`Chunked` with the same options."""

    __slots__ = ()

    def _drop_prefill(self, rid):
        e = self.e
        del self.prefilling[rid]
        del self.running[rid]
        if self.paged:
            self._release_paged(rid, e.prompt[rid] + e.produced[rid] + 1)
        else:
            self.kv_used -= e.prompt[rid] + e.produced[rid] + 1

    def _growth(self):
        """(tokens, KV tokens) the decodes add in the coming iteration."""
        if self.spec is not None:
            return self._spec_growth()
        if self.bs == 1:
            return self.B, self.B
        return self.B, self.bs * self._new_blocks(1)

    def plan(self, t):
        """Chunked prefill with the KV manager's options, the speculation switch, a pipeline."""
        e = self.e
        if self.hooks:
            if self.switch is not None:
                self._check_switch(t)
            if self.prio_preempt and self.n_waiting:
                self._preempt_for_priority(True)
        spec = self.spec
        # the decodes' KV for this iteration
        grow, kv_grow = self._growth()
        if self.kv_used + kv_grow > self.kv_cap:
            if self.pc is not None:
                self._make_room(kv_grow)
            while self.B and self.kv_used + kv_grow > self.kv_cap:
                self._preempt_one()
                grow, kv_grow = self._growth()
        budget = self.budget - (self.B * (spec.num_draft_tokens + 1) if spec is not None else self.B)
        chunks, budget = self._continue_prefills(budget)
        if budget > 0 and self.n_waiting and len(self.running) < self.max_batch:
            room = self.max_batch - len(self.running)
            if self.paged:
                batch, _ = self._take_prompts_paged(room, kv_grow, INF, budget)
                for rid in batch:
                    need, done = e.prompt[rid] + e.produced[rid], e.skip[rid]
                    self.running[rid] = None
                    self.prefilling[rid] = done
                    if e.scheduled[rid] != e.scheduled[rid]:
                        e.scheduled[rid] = t
                    n = need - done if self.whole else min(need - done, budget)
                    chunks.append((rid, n, done))
                    budget -= n
            else:
                batch, _ = self._take_prompts(room, self.kv_cap - self.kv_used - kv_grow, INF)
                budget = self._admit_within(batch, budget, chunks, t)
        if not chunks:
            if self.B:
                self._plan_decode(t)
            return
        dur, tokens, prefill_tokens = self._mixed_time(
            chunks, self.draft is not None and (self.switch is None or spec is not None))
        end = t + dur if self.pipe is None else self.pipe.submit(t, dur, tokens + prefill_tokens)
        self.action = (chunks, grow, kv_grow, t, end)
        self._log_action(t, prefill_tokens)
        self._schedule(end, _MIXED)

    def _apply_mixed(self, t):
        chunks, grow, kv_grow, start, end = self.action
        if self.B:
            self._log_segment(start, 1, end - start, 0.0)
            self.G += 1
            self.S += grow
            self.kv_used += kv_grow
            self.work -= grow
            self._finish_decodes(t)
        self._advance_chunks(chunks, t)



class StaticFeatured(_Featured, Static):
    """:class:`Static` in a fleet that reads its load or feeds it from a central queue."""

    __slots__ = ()
