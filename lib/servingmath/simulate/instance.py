"""One model instance: its waiting queues, its batch, its clock, and runs of decode steps.

An instance runs one *action* at a time (a prefill iteration, a mixed
iteration, a static batch or a run of decode steps) and plans the next when it
ends. The policies (:mod:`.policies`) decide what to plan; this base class
holds what they share:

* the decode batch: every instance counts its decode steps (``G``); a
  sequence that starts decoding at step G0 with r tokens left finishes at
  step G0 + r, so the running sequences sit in a heap keyed by finish step;
* runs of decode steps in closed form: within a run the batch is constant,
  step j takes A + beta (S0 + j B) seconds and K steps take
  K A + beta (K S0 + B K (K-1)/2); a run lasts until a sequence finishes, the
  KV cache fills up, the roofline regime changes or (when the batch has room)
  the step after the next arrival (:func:`_steps_to_cover`, a quadratic in K);
* the KV cache: a sequence holds prompt + produced tokens; when it is full,
  the most recently admitted sequence of the lowest class is preempted and
  recomputed later (vLLM v0's default);
* the logs: one row per run of decode steps, (t0, K, A, beta, S0, B), from
  which :mod:`.results` rebuilds every token time; one row per action for the
  time series.
"""

from __future__ import annotations

import heapq
import math
from collections import deque

INF = math.inf
NAN = math.nan
_ARRIVAL, _END, _TRANSFER, _TIMEOUT = 0, 1, 2, 3
_IDLE, _DECODE, _PREFILL, _MIXED, _STATIC, _WAKE = 0, 1, 2, 3, 4, 5


def _steps_to_cover(delta, A, beta, B, S):
    """Smallest K >= 0 with K A + beta (K S + B K (K-1) / 2) >= delta: the steps until time delta."""
    a = beta * B * 0.5
    b = A + beta * S - a
    k = delta / b if a == 0 else 2 * delta / (b + math.sqrt(b * b + 4 * a * delta))
    k = max(0, math.ceil(k))
    while k > 0 and (k - 1) * A + beta * ((k - 1) * S + B * (k - 1) * (k - 2) * 0.5) >= delta:
        k -= 1
    while k * A + beta * (k * S + B * k * (k - 1) * 0.5) < delta:
        k += 1
    return k


class _Instance:
    """One model instance: waiting queues (one per priority class), a batch, a clock."""

    __slots__ = ("e", "index", "name", "steps", "kv_cap", "max_batch", "waiting", "n_waiting",
                 "running", "decoding", "heap", "G", "B", "S", "kv_used", "kind", "version", "seg",
                 "action", "sees_arrivals", "watching", "segments", "series", "lines")

    def __init__(self, engine, index, name, steps, kv_capacity, max_batch):
        self.e = engine
        self.index = index
        self.name = name
        self.steps = steps
        self.kv_cap = kv_capacity
        self.max_batch = max_batch
        self.waiting = [deque() for _ in range(engine.n_classes)]
        self.n_waiting = 0
        self.running = {}       # rid -> None: sequences holding KV, in admission order
        self.decoding = {}      # rid -> None: the running sequences that decode
        self.heap = []          # (finish step, rid) of decoding sequences
        self.G = 0              # decode steps done
        self.B = 0              # decoding sequences
        self.S = 0              # their total context (= their KV tokens)
        self.kv_used = 0        # KV tokens held by all running sequences
        self.kind = _IDLE       # the action in progress
        self.version = 0        # bumps when the planned end moves (stale events are skipped)
        self.seg = None         # decode run in progress: (t0, K, A, beta, S0, growth per step)
        self.action = None      # what the action holds (prefill batch, chunks, ...)
        # the next open-loop arrival bounds each run of decode steps (no cutting needed)
        self.sees_arrivals = False
        self.watching = False
        # one row per run of decode steps: (t0, K, A, beta, S0, B)
        self.segments = []
        # one row per action, the time series: (t, running, decoding, prefill tokens, KV tokens)
        self.series = []
        self.lines = {}         # batch size -> (A, beta, limit) of its decode steps

    # ---- queue -----------------------------------------------------------------------------------
    def enqueue(self, rid, t):
        self.waiting[self.e.prio[rid]].append(rid)
        self.n_waiting += 1
        if self.kind == _IDLE:
            self._schedule(t, _WAKE)  # plan once every arrival of this instant is queued
        elif self.kind == _DECODE and not self.watching and self._could_admit():
            self._truncate(t)

    def _could_admit(self):
        return len(self.running) < self.max_batch

    # ---- scheduling helpers --------------------------------------------------------------------------
    def _schedule(self, t_end, kind):
        self.kind = kind
        self.version += 1
        e = self.e
        heapq.heappush(e.events, (t_end, _END, next(e.counter), self.index, self.version))

    def _log_action(self, t, prefill_tokens):
        self.series.append((t, len(self.running), self.B, prefill_tokens, self.kv_used))

    def on_end(self, t):
        kind = self.kind
        self.kind = _IDLE
        if kind == _DECODE:
            self._apply_decode(t)
        elif kind == _PREFILL:
            self._apply_prefill(t)
        elif kind == _MIXED:
            self._apply_mixed(t)
        self.plan(t)

    # ---- sequences -------------------------------------------------------------------------------------
    def _emit_prefill_token(self, rid, t):
        """A prefill (or re-prefill) ended: the sequence emits a token, then decodes or finishes."""
        e = self.e
        e.produced[rid] += 1
        if e.first_token[rid] != e.first_token[rid]:  # NaN: the first token
            e.first_token[rid] = t
        else:  # after a preemption: the recomputation yields the next token
            e.extra.setdefault(rid, []).append([t, -1, 0, 0])
        if e.produced[rid] >= e.out[rid]:
            self._release(rid)
            e.finish(rid, t)
        else:
            self._join(rid)

    def _join(self, rid):
        """Start decoding: the sequence's remaining tokens come one per decode step."""
        e = self.e
        g = self.G
        e.join_g[rid] = g
        p = e.produced[rid]
        e.join_p[rid] = p
        pieces = e.extra.get(rid)
        if pieces:
            pieces[-1][1] = self.index
            pieces[-1][2] = g
        else:
            e.st_inst[rid] = self.index
            e.st_g0[rid] = g
        left = e.out[rid] - p
        if e.spec is not None:
            left = e.spec_sample(rid, left)  # steps needed, tokens drawn per step
        f = g + left
        e.fin[rid] = f
        heapq.heappush(self.heap, (f, rid))
        self.decoding[rid] = None
        self.B += 1
        self.S += e.prompt[rid] + p

    def _produced_now(self, rid):
        e = self.e
        steps = self.G - e.join_g[rid]
        if e.spec is not None:
            return e.join_p[rid] + e.spec_cum[rid][steps]
        return e.join_p[rid] + steps

    def _close_stint(self, rid):
        e = self.e
        n = self.G - e.join_g[rid]
        pieces = e.extra.get(rid)
        if pieces:
            pieces[-1][3] = n
        else:
            e.st_n[rid] = n

    def _stop_decoding(self, rid):
        e = self.e
        self._close_stint(rid)
        e.produced[rid] = self._produced_now(rid)
        e.fin[rid] = -1
        del self.decoding[rid]
        self.B -= 1
        self.S -= e.prompt[rid] + e.produced[rid]

    def _release(self, rid):
        e = self.e
        del self.running[rid]
        self.kv_used -= e.prompt[rid] + e.produced[rid]

    def _preempt_one(self):
        """Evict the most recently admitted sequence of the lowest class; it is recomputed later."""
        e = self.e
        victim, worst = None, -1
        for rid in reversed(self.running):
            if e.prio[rid] > worst:
                victim, worst = rid, e.prio[rid]
        if victim in self.decoding:
            self._stop_decoding(victim)
            self._release(victim)
        else:  # a partly prefilled prompt (chunked prefill): its progress is lost
            self._drop_prefill(victim)
        e.preemptions[victim] += 1
        self.waiting[worst].appendleft(victim)
        self.n_waiting += 1

    def _drop_prefill(self, rid):  # overridden by the chunked-prefill instance
        raise AssertionError("no prefill in progress to drop")

    # ---- runs of decode steps ----------------------------------------------------------------------------
    def _clean_heap(self):
        heap, fin = self.heap, self.e.fin
        while heap and fin[heap[0][1]] != heap[0][0]:
            heapq.heappop(heap)

    def _plan_decode(self, t):
        e = self.e
        if e.spec is not None:
            return self._plan_spec_step(t)
        if self.kv_used + self.B > self.kv_cap:
            while self.B and self.kv_used + self.B > self.kv_cap:
                self._preempt_one()
            if self.B == 0:
                return self.plan(t)
        B = self.B
        heap, fin = self.heap, e.fin
        while fin[heap[0][1]] != heap[0][0]:
            heapq.heappop(heap)
        K = heap[0][0] - self.G                       # until the next sequence finishes
        if self.kv_cap != INF:
            K = min(K, int((self.kv_cap - self.kv_used) // B))   # until the KV cache is full
        if self.steps.window is None:
            S, grow = self.S, B                       # every step adds one key per sequence
        else:                                         # keys capped at the window: until one reaches it
            S, grow, room = self._window_counts()
            K = min(K, room)
        line = self.lines.get(B)
        if line is None:
            line = self.steps.decode_line(B, S)
            if line[2] == INF:  # the same for every context: cache it
                self.lines[B] = line
        A, beta, limit = line
        if limit != INF:                              # until the roofline regime changes
            K = min(K, max(1, int((limit - S) // max(grow, 1)) + 1))
        dur = K * A + beta * (K * S + grow * K * (K - 1) * 0.5)
        self.watching = self.sees_arrivals and self._could_admit()
        if self.watching:                             # until the step after the next arrival
            i = e.next_open
            if i < e.n_open and e.open_times[i] - t < dur:
                K = _steps_to_cover(e.open_times[i] - t, A, beta, grow, S)
                dur = K * A + beta * (K * S + grow * K * (K - 1) * 0.5)
        self.seg = (t, K, A, beta, S, grow)
        self.series.append((t, len(self.running), B, 0, self.kv_used))
        self.kind = _DECODE
        self.version += 1
        heapq.heappush(e.events, (t + dur, _END, next(e.counter), self.index, self.version))

    def _truncate(self, t):
        """An arrival at t: end the run at the first step boundary at or after t."""
        t0, K, A, beta, S, grow = self.seg
        if K <= 1 or self.e.spec is not None:
            return
        k = _steps_to_cover(t - t0, A, beta, grow, S)
        if k < K:
            self.seg = (t0, k, A, beta, S, grow)
            self._schedule(t0 + (k * A + beta * (k * S + grow * k * (k - 1) * 0.5)), _DECODE)

    def _window_counts(self):
        """(keys the batch attends to, how many of them grow per step, steps until a sequence's
        context reaches the sliding window) for a windowed model: sum of min(context, w)."""
        w = self.steps.window
        keys, grow, room = 0, 0, INF
        for rid in self.decoding:
            c = self._context(rid)
            if c < w:
                keys += c
                grow += 1
                room = min(room, w - c)
            else:
                keys += w
        return keys, grow, (max(int(room), 1) if room != INF else INF)

    def _context(self, rid):
        """A decoding sequence's context now: prompt + tokens produced (its KV after the next step)."""
        return self.e.prompt[rid] + self._produced_now(rid)

    def _apply_decode(self, t):
        t0, K, A, beta, s0, grow = self.seg
        if K:
            self.segments.append((t0, K, A, beta, s0, grow))
            grow = self.action if self.e.spec is not None else K * self.B
            self.G += K
            self.S += grow
            self.kv_used += grow
        self._finish_decodes(t)

    def _log_segment(self, t0, K, A, beta, s0=None, grow=None):
        self.segments.append((t0, K, A, beta, self.S if s0 is None else s0, self.B if grow is None else grow))

    def _finish_decodes(self, t):
        heap, e, G = self.heap, self.e, self.G
        fin = e.fin
        while heap and heap[0][0] <= G:
            f, rid = heapq.heappop(heap)
            if fin[rid] != f:
                continue
            if e.spec is None and rid not in e.extra:  # the common case, inlined
                e.st_n[rid] = G - e.join_g[rid]
                out = e.produced[rid] = e.out[rid]
                fin[rid] = -1
                del self.decoding[rid]
                self.B -= 1
                self.S -= e.prompt[rid] + out
            else:
                self._stop_decoding(rid)
            self._release(rid)
            e.finish(rid, t)

    # ---- speculative decoding -------------------------------------------------------------------------------
    def _spec_tokens(self):
        """Tokens all decoding sequences together get from the next speculative step."""
        e, G = self.e, self.G
        cum, jg = e.spec_cum, e.join_g
        total = 0
        for rid in self.decoding:
            c = cum[rid]
            j = G - jg[rid]
            total += c[j + 1] - c[j]
        return total

    def _plan_spec_step(self, t):
        total = self._spec_tokens()
        while self.B and self.kv_used + total > self.kv_cap:
            self._preempt_one()
            total = self._spec_tokens()
        if self.B == 0:
            return self.plan(t)
        A = self.e.spec_step_time(self.steps, self.B, self.S)
        self.seg = (t, 1, A, 0.0, self.S, self.B)
        self.action = total
        self._log_action(t, 0)
        self._schedule(t + A, _DECODE)

    def decode_part(self):
        """(tokens, kv_tokens, attention_pairs, logits, extra seconds) of the decodes of an iteration."""
        B, S = self.B, self.S
        if B and self.steps.window is not None:
            S = self._window_counts()[0]
        spec = self.e.spec
        if spec is None or B == 0:
            return B, S, S, B, 0.0
        g1 = spec.num_draft_tokens + 1   # verification: gamma + 1 new positions after S - B cached keys
        cached = S - B
        return (B * g1, cached + B * g1, g1 * cached + B * g1 * (g1 + 1) * 0.5, B * g1,
                self.e.draft_time(B, S))

    # ---- prefill ---------------------------------------------------------------------------------------------
    def _take_prompts(self, room, free_kv, max_tokens):
        """Pop waiting requests (class order, FCFS) for one prefill: head-of-line blocking."""
        e = self.e
        prompt, produced = e.prompt, e.produced
        batch, tokens = [], 0
        for dq in self.waiting:
            while dq:
                rid = dq[0]
                n = prompt[rid] + produced[rid]
                if len(batch) >= room or n + 1 > free_kv or (batch and tokens + n > max_tokens):
                    self.n_waiting -= len(batch)
                    return batch, tokens
                dq.popleft()
                batch.append(rid)
                tokens += n
                free_kv -= n + 1
        self.n_waiting -= len(batch)
        return batch, tokens

    def _prefill_seconds(self, lengths):
        """Seconds to prefill whole prompts of the given lengths in one iteration."""
        steps = self.steps
        if steps.window is None:  # the common case, inlined
            tokens = kv = sum(lengths)
            pairs = sum(n * (n + 1) for n in lengths) * 0.5
        else:
            tokens, kv, pairs = 0, 0, 0.0
            for n in lengths:
                x, y = steps.chunk_counts(n, 0)
                tokens, kv, pairs = tokens + n, kv + x, pairs + y
        t = steps.iteration_time(tokens, kv, pairs, len(lengths))
        if self.e.draft is not None:
            t += self.e.draft.iteration_time(tokens, kv, pairs, len(lengths))
        return t
