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
  recomputed later (vLLM v0's default). With ``block_size`` b > 1 it holds
  ceil(n / b) blocks and a decode step allocates a block only for the sequences
  whose last block is full: the new blocks of a run of K = q b + r steps are
  q B + #{sequences whose block fills within r steps}, from a histogram of the
  sequences' phases (n - G) mod b, so runs stay in closed form;
* prefix caching (:class:`PrefixCache`): shared prefixes held once, least
  recently used ones evicted when memory is needed;
* speculative decoding, fixed or switched by load at step boundaries;
* the logs: one row per run of decode steps, (t0, K, A, beta, S0, B), from
  which :mod:`.results` rebuilds every token time; one row per action for the
  time series.
"""

from __future__ import annotations

import math
from collections import deque
from heapq import heappop, heappush

INF = math.inf
NAN = math.nan
_ARRIVAL, _END, _TRANSFER, _TIMEOUT, _SCALE, _READY = 0, 1, 2, 3, 4, 5
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


class PrefixCache:
    """The shared prefixes one instance holds in its KV cache.

    ``entries[pid] = [tokens, users, ready, owner]``: the prefix's KV tokens
    (whole blocks), the running requests that use it, whether the prefill that
    computes it has finished, and that request. Entries no running request uses
    sit in ``lru`` (oldest first) and are evicted from the front when memory is
    needed. Counters: ``lookups`` (admissions of a request with a prefix),
    ``hits`` and ``hit_tokens`` (prompt tokens not prefilled).
    """

    __slots__ = ("entries", "lru", "evictable", "lookups", "hits", "hit_tokens")

    def __init__(self):
        self.entries = {}
        self.lru = {}          # pid -> tokens, insertion order = least recently used first
        self.evictable = 0
        self.lookups = 0
        self.hits = 0
        self.hit_tokens = 0


def _whole_prompt_counts(lengths):
    """(tokens, KV tokens, attention pairs) of whole prompts prefilled together, no window, nothing
    cached: sum n, sum n and sum n (n + 1) / 2 (whole numbers until the last step: exact in any order)."""
    tokens = pairs = 0
    for n in lengths:
        tokens += n
        pairs += n * (n + 1)
    return tokens, tokens, pairs * 0.5


class _Instance:
    """One model instance: waiting queues (one per priority class), a batch, a clock."""

    #: Whether the one-server fast path may end each run of decode steps at the next open-loop
    #: arrival (``sees_arrivals``); a scheduler whose runs ignore arrivals says no.
    WATCHES_ARRIVALS = True

    __slots__ = ("e", "index", "name", "steps", "kv_cap", "max_batch", "waiting", "n_waiting",
                 "running", "decoding", "heap", "G", "B", "S", "kv_used", "kind", "version", "seg",
                 "action", "sees_arrivals", "watching", "segments", "series", "lines",
                 "spec", "switch", "draft", "catchup", "spec_log", "kv_action",
                 "bs", "wm_tokens", "paged", "pc", "phase", "prio_preempt", "pipe", "work", "drain", "pull",
                 "replica", "hooks")

    def __init__(self, engine, index, name, steps, kv_capacity, max_batch, *, block_size=1, watermark=0.0,
                 prefix_caching=False, priority_preemption=False, pipe=None, speculative=None, draft=None):
        self.e = engine
        self.index = index
        self.name = name
        self.steps = steps
        self.max_batch = max_batch
        self.waiting = [deque() for _ in range(engine.n_classes)]
        self.n_waiting = 0
        self.running = {}       # rid -> None: sequences holding KV, in admission order
        self.decoding = {}      # rid -> None: the running sequences that decode
        self.heap = []          # (finish step, rid) of decoding sequences
        self.G = 0              # decode steps done
        self.B = 0              # decoding sequences
        self.S = 0              # their total context (= their KV tokens)
        self.kv_used = 0        # KV tokens held by all running sequences (whole blocks) and cached prefixes
        self.kind = _IDLE       # the action in progress
        self.version = 0        # bumps when the planned end moves (stale events are skipped)
        self.seg = None         # decode run in progress: (t0, K, A, beta, S0, growth per step)
        self.action = None      # what the action holds (prefill batch, chunks, ...)
        self.kv_action = 0      # KV tokens a speculative step adds
        # the next open-loop arrival bounds each run of decode steps (no cutting needed)
        self.sees_arrivals = False
        self.watching = False
        # one row per run of decode steps: (t0, K, A, beta, S0, B)
        self.segments = []
        # one row per action, the time series: (t, running, decoding, prefill tokens, KV tokens)
        self.series = []
        self.lines = {}         # batch size -> (A, beta, limit) of its decode steps
        # the KV manager's options
        bs = int(block_size)
        self.bs = bs
        if kv_capacity != INF and bs > 1:
            kv_capacity = (int(kv_capacity) // bs) * bs
        self.kv_cap = kv_capacity
        self.wm_tokens = 0 if kv_capacity == INF else int(watermark * (kv_capacity // bs)) * bs
        self.pc = PrefixCache() if prefix_caching else None
        self.paged = bs > 1 or self.wm_tokens > 0 or self.pc is not None
        self.phase = [0] * bs if bs > 1 else None     # decoding sequences per phase (n - G) mod b
        self.prio_preempt = bool(priority_preemption)
        self.pipe = pipe
        # speculative decoding: the active config (None: off), the switch, the draft's step times
        self.switch = speculative if speculative is not None and hasattr(speculative, "on_below") else None
        self.spec = self.switch.speculative if self.switch is not None else speculative
        self.draft = draft
        self.catchup = 0.0
        self.spec_log = []      # (time, on) at every switch
        # fleets: outstanding work (prompt tokens to prefill + output tokens to generate) at the last
        # step boundary, and tokens per second the run of decode steps in progress takes off it (kept
        # by every instance: a few additions per action, cheaper than a subclass for the fleets that read them)
        self.work = 0
        self.drain = 0.0
        self.pull = False        # a central queue: take requests from it at every step boundary
        self.replica = 0
        # the per-step checks of the optional features, folded into one flag. An instance with any
        # of the options above (or a pipeline, or in a fleet with a central queue) is built from a
        # _Featured class; a plain one keeps the short paths of this class.
        self.hooks = self.switch is not None or self.prio_preempt

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

    def work_at(self, t):
        """Outstanding tokens at time t: prompt tokens still to prefill plus output tokens still to come.

        Exact at every step boundary; inside a run of decode steps the run's tokens are taken off
        in proportion to the time elapsed (a router's estimate, not a step count).
        """
        if self.kind == _DECODE:
            return self.work - (t - self.seg[0]) * self.drain
        return self.work

    # ---- scheduling helpers --------------------------------------------------------------------------
    def _schedule(self, t_end, kind):
        self.kind = kind
        self.version += 1
        e = self.e
        heappush(e.events, (t_end, _END, next(e.counter), self.index, self.version))

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
        p = e.produced[rid]
        self.work -= e.prompt[rid] + p + 1      # its prompt is prefilled, one more output token is out
        e.produced[rid] = p + 1
        if e.first_token[rid] != e.first_token[rid]:  # NaN: the first token
            e.first_token[rid] = t
        else:  # after a preemption: the recomputation yields the next token
            e.extra.setdefault(rid, []).append([t, -1, 0, 0])
        if p + 1 >= e.out[rid]:
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
        if self.spec is not None:
            left = e.spec_sample(rid, left, self.spec)  # steps needed, tokens drawn per step
        f = g + left
        e.fin[rid] = f
        heappush(self.heap, (f, rid))
        self.decoding[rid] = None
        self.B += 1
        self.S += e.prompt[rid] + p

    def _produced_now(self, rid):
        e = self.e
        steps = self.G - e.join_g[rid]
        if self.spec is not None:
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
            self.work += e.prompt[victim] + e.produced[victim]     # to prefill again
        else:  # a partly prefilled prompt (chunked prefill): its progress is lost (still counted in work)
            self._drop_prefill(victim)
        e.preemptions[victim] += 1
        self.waiting[worst].appendleft(victim)
        self.n_waiting += 1

    def _drop_prefill(self, rid):  # overridden by the chunked-prefill instance
        raise AssertionError("no prefill in progress to drop")

    def _preempt_for_priority(self, chunked):
        """Preempt running lower-class sequences while the first waiting request of the highest
        class cannot be admitted (batch or cache full). ``chunked``: the decodes' KV growth of
        the coming iteration is reserved first (chunked prefill runs them in the same iteration)."""
        e = self.e
        for c, dq in enumerate(self.waiting):
            if dq:
                break
        else:
            return
        rid = dq[0]
        while self.running:
            reserve = 0
            if chunked:
                reserve = self._spec_growth()[1] if self.spec is not None else self._decode_kv_growth()
            if len(self.running) < self.max_batch and self._admissible(rid, reserve):
                return
            if max(e.prio[r] for r in self.running) <= c:
                return
            self._preempt_one()

    def _admissible(self, rid, reserve):
        e = self.e
        if not self.paged:
            return e.prompt[rid] + e.produced[rid] + 1 <= self.kv_cap - self.kv_used - reserve
        new, skip, shared, charge, action, freed = self._admission(rid)
        free = self.kv_cap - self.kv_used - reserve - self.wm_tokens
        if self.pc is not None:
            free += self.pc.evictable - freed
        return charge <= free

    # ---- the paged KV cache: blocks, watermark, prefix caching ------------------------------------------------
    def _pad(self, n):
        bs = self.bs
        return n if bs == 1 else -(-n // bs) * bs

    def _admission(self, rid):
        """What admitting ``rid`` now takes: (tokens to prefill, cached tokens skipped, shared prefix
        tokens, KV tokens to allocate, "hit" / "insert" / None, evictable tokens the hit removes)."""
        e = self.e
        n = e.prompt[rid] + e.produced[rid]
        pc = self.pc
        if pc is not None:
            pid = e.prefix_id[rid]
            if pid >= 0:
                bs = self.bs
                cacheable = (min(e.prefix_len[rid], n - 1) // bs) * bs
                if cacheable > 0:
                    entry = pc.entries.get(pid)
                    if entry is None:     # a miss: the prefill computes the prefix and caches it
                        return n, 0, cacheable, self._pad(n + 1 - cacheable) + cacheable, "insert", 0
                    if entry[2]:          # a hit on a computed prefix
                        shared = min(entry[0], cacheable)
                        freed = entry[0] if pid in pc.lru else 0
                        return n - shared, shared, shared, self._pad(n + 1 - shared), "hit", freed
                    # being computed by another request's prefill: computed again, privately
        return n, 0, 0, self._pad(n + 1), None, 0

    def _evict(self, tokens):
        """Free at least ``tokens`` KV tokens by evicting unused cached prefixes, oldest first."""
        pc = self.pc
        lru, entries = pc.lru, pc.entries
        freed = 0
        while lru and freed < tokens:
            pid = next(iter(lru))
            size = lru.pop(pid)
            del entries[pid]
            pc.evictable -= size
            self.kv_used -= size
            freed += size
        return freed

    def _take_prompts_paged(self, room, reserve, max_tokens, budget=None):
        """As :meth:`_take_prompts` for a paged cache (blocks, the watermark, prefix caching).

        Admits (allocating their blocks, sharing or inserting their prefixes) and returns
        (batch, prefill tokens to compute); ``e.skip[rid]`` holds each one's cached tokens.
        ``budget`` (chunked prefill): admit only while the iteration's token budget lasts.
        """
        e = self.e
        pc = self.pc
        batch, tokens = [], 0
        for dq in self.waiting:
            while dq:
                rid = dq[0]
                new, skip, shared, charge, action, freed = self._admission(rid)
                free = self.kv_cap - self.kv_used - reserve - self.wm_tokens
                avail = free + (pc.evictable - freed if pc is not None else 0)
                if (len(batch) >= room or charge > avail or (batch and tokens + new > max_tokens)
                        or (budget is not None and tokens >= budget)):
                    self.n_waiting -= len(batch)
                    return batch, tokens
                dq.popleft()
                if pc is not None:
                    pid = e.prefix_id[rid]
                    if pid >= 0:
                        pc.lookups += 1
                    if action == "hit":
                        entry = pc.entries[pid]
                        if freed:
                            del pc.lru[pid]
                            pc.evictable -= freed
                        entry[1] += 1
                        pc.hits += 1
                        pc.hit_tokens += skip
                    elif action == "insert":
                        pc.entries[pid] = [shared, 1, False, rid]
                    e.shared[rid] = shared if action is not None else 0
                    if charge > free:
                        self._evict(charge - free)
                    if e.scheduled[rid] != e.scheduled[rid]:
                        e.cached_tokens[rid] = skip
                e.skip[rid] = skip
                self.kv_used += charge
                batch.append(rid)
                tokens += new
        self.n_waiting -= len(batch)
        return batch, tokens

    def _release_paged(self, rid, held):
        """Free the KV of a sequence holding ``held`` tokens (its private blocks; its prefix's share)."""
        e = self.e
        pc = self.pc
        shared = e.shared[rid] if pc is not None else 0
        self.kv_used -= self._pad(held - shared)
        if shared:
            e.shared[rid] = 0
            pid = e.prefix_id[rid]
            entry = pc.entries[pid]
            entry[1] -= 1
            if entry[1] == 0:
                if entry[2]:
                    pc.lru[pid] = entry[0]
                    pc.evictable += entry[0]
                else:                       # its prefill never finished: the prefix is gone
                    del pc.entries[pid]
                    self.kv_used -= entry[0]

    def _make_room(self, need):
        """True when the next step's ``need`` KV tokens fit, after evicting unused prefixes if needed."""
        over = self.kv_used + need - self.kv_cap
        if over > 0 and self.pc is not None and self.pc.evictable:
            self._evict(over)
        return self.kv_used + need <= self.kv_cap

    def _new_blocks(self, K):
        """Blocks the decoding sequences allocate over the next K decode steps (block_size > 1)."""
        bs, B = self.bs, self.B
        q, r = divmod(K, bs)
        n = q * B
        if r:
            phase, g = self.phase, -self.G
            for f in range(r):     # sequences whose block fills f steps from now
                n += phase[(g - f) % bs]
        return n

    def _steps_until_full(self):
        """The most decode steps whose new blocks fit in the free blocks (block_size > 1)."""
        bs, B = self.bs, self.B
        blocks = int(self.kv_cap - self.kv_used) // bs
        q, rem = divmod(blocks, B)
        phase, g = self.phase, -self.G
        r, used = 0, 0
        while r < bs:
            c = phase[(g - r) % bs]
            if used + c > rem:
                break
            used += c
            r += 1
        return q * bs + r

    def _decode_kv_growth(self):
        """KV tokens the next plain decode step allocates."""
        return self.B if self.bs == 1 else self.bs * self._new_blocks(1)

    # ---- runs of decode steps ----------------------------------------------------------------------------
    def _clean_heap(self):
        heap, fin = self.heap, self.e.fin
        while heap and fin[heap[0][1]] != heap[0][0]:
            heappop(heap)

    def _decode_segment(self, t, B, K):
        """The next run of up to ``K`` decode steps of ``B`` sequences that share one affine cost:
        (steps, seconds at S keys, seconds per key, S, keys added per step, seconds). It ends where the
        sliding window is reached, the roofline regime changes or (when watching) after the next arrival."""
        e = self.e
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
        return K, A, beta, S, grow, dur

    def _plan_decode(self, t):
        e = self.e
        if self.spec is not None:
            return self._plan_spec_step(t)
        if self.kv_used + self.B > self.kv_cap:
            while self.B and self.kv_used + self.B > self.kv_cap:
                self._preempt_one()
            if self.B == 0:
                return self.plan(t)
        B = self.B
        heap, fin = self.heap, e.fin
        while fin[heap[0][1]] != heap[0][0]:
            heappop(heap)
        K = heap[0][0] - self.G                       # until the next sequence finishes
        if self.kv_cap != INF:                        # until the KV cache is full
            room = int((self.kv_cap - self.kv_used) // B)
            if room < K:
                K = room
        K, A, beta, S, grow, dur = self._decode_segment(t, B, K)
        self.seg = (t, K, A, beta, S, grow)
        self.drain = K * B / dur
        self.series.append((t, len(self.running), B, 0, self.kv_used))
        self.kind = _DECODE
        self.version += 1
        heappush(e.events, (t + dur, _END, next(e.counter), self.index, self.version))

    def _truncate(self, t):
        """An arrival at t: end the run at the first step boundary at or after t."""
        t0, K, A, beta, S, grow = self.seg
        if K <= 1 or self.spec is not None:
            return
        k = _steps_to_cover(t - t0, A, beta, grow, S)
        if k < K:
            self.seg = (t0, k, A, beta, S, grow)
            self._schedule(t0 + (k * A + beta * (k * S + grow * k * (k - 1) * 0.5)), _DECODE)

    def _window_counts(self):
        """(keys the batch attends to, how many of them grow per step, steps until a sequence's
        context reaches the sliding window) for a windowed model: sum of min(context, w)."""
        w, phi = self.steps.window, self.steps.window_share
        keys, grow, room, total = 0, 0, INF, 0
        for rid in self.decoding:
            c = self._context(rid)
            total += c
            if c < w:
                keys += c
                grow += 1
                room = min(room, w - c)
            else:
                keys += w
        if phi < 1.0:   # a hybrid model: the full layers' keys grow with every sequence
            keys = phi * keys + (1.0 - phi) * total
            grow = phi * grow + (1.0 - phi) * len(self.decoding)
        return keys, grow, (max(int(room), 1) if room != INF else INF)

    def _context(self, rid):
        """A decoding sequence's context now: prompt + tokens produced (its KV after the next step)."""
        return self.e.prompt[rid] + self._produced_now(rid)

    def _apply_decode(self, t):
        seg = self.seg
        K = seg[1]
        if K:
            self.segments.append(seg)                 # (t0, K, A, beta, S0, growth per step)
            grow = self.action if self.spec is not None else K * self.B
            self.G += K
            self.S += grow
            self.kv_used += grow
            self.work -= grow
        self._finish_decodes(t)

    def _log_segment(self, t0, K, A, beta, s0=None, grow=None):
        self.segments.append((t0, K, A, beta, self.S if s0 is None else s0, self.B if grow is None else grow))

    def _finish_decodes(self, t):
        heap, e, G = self.heap, self.e, self.G
        fin = e.fin
        while heap and heap[0][0] <= G:
            f, rid = heappop(heap)
            if fin[rid] != f:
                continue
            if self.spec is None and rid not in e.extra:  # the common case, inlined
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

    def _spec_growth(self):
        """(tokens, KV tokens allocated) of the next speculative step of the decoding sequences."""
        if self.bs == 1:
            total = self._spec_tokens()
            return total, total
        e, G, bs = self.e, self.G, self.bs
        cum, jg, jp, prompt = e.spec_cum, e.join_g, e.join_p, e.prompt
        total = kv = 0
        for rid in self.decoding:
            c = cum[rid]
            j = G - jg[rid]
            n = prompt[rid] + jp[rid] + c[j]
            k = c[j + 1] - c[j]
            total += k
            kv += (-(-(n + k) // bs) - -(-n // bs)) * bs
        return total, kv

    def _draft_time(self, batch, context_sum):
        spec = self.spec
        if self.draft is None:
            return spec.num_draft_tokens * spec.draft_step_time
        total = 0.0
        for j in range(spec.num_draft_tokens):
            s = context_sum + j * batch
            total += self.draft.iteration_time(batch, s, s, batch)
        return total

    def _spec_step_time(self, batch, context_sum):
        """A speculative step: the draft's gamma steps, then one verification in which every sequence
        brings gamma + 1 new tokens after its S - 1 cached ones (the step model's counts). With a
        sliding window the target reads and attends to at most w keys per sequence (the draft keeps
        its own, unwindowed context)."""
        g1 = self.spec.num_draft_tokens + 1
        keys = self._window_counts()[0] if self.steps.window is not None else context_sum
        cached = keys - batch
        verify = self.steps.iteration_time(batch * g1, cached + batch * g1,
                                           g1 * cached + batch * g1 * (g1 + 1) * 0.5, batch * g1)
        return self._draft_time(batch, context_sum) + verify

    def _plan_spec_step(self, t):
        total = self._spec_tokens()
        while self.B and self.kv_used + total > self.kv_cap:
            self._preempt_one()
            total = self._spec_tokens()
        if self.B == 0:
            return self.plan(t)
        A = self._spec_step_time(self.B, self.S)
        self.seg = (t, 1, A, 0.0, self.S, self.B)
        self.drain = 0.0       # a router sees the step's tokens only when it ends
        self.action = total
        self._log_action(t, 0)
        self._schedule(t + A, _DECODE)

    def decode_part(self):
        """(tokens, kv_tokens, attention_pairs, logits, extra seconds) of the decodes of an iteration."""
        B, S = self.B, self.S
        if B and self.steps.window is not None:
            S = self._window_counts()[0]
        spec = self.spec
        if spec is None or B == 0:
            return B, S, S, B, 0.0
        g1 = spec.num_draft_tokens + 1   # verification: gamma + 1 new positions after S - B cached keys
        cached = S - B
        return (B * g1, cached + B * g1, g1 * cached + B * g1 * (g1 + 1) * 0.5, B * g1,
                self._draft_time(B, S))

    def _check_switch(self, t):
        """SpeculativeByLoad: at a step boundary, switch speculation off above the high threshold
        and on below the low one."""
        sw = self.switch
        if sw.signal == "batch":
            x = len(self.running)
        elif sw.signal == "queue":
            x = self.n_waiting
        else:
            x = len(self.running) + self.n_waiting
        if self.spec is not None:
            if x > sw.off_above:
                self._set_speculation(None, t)
        elif x < sw.on_below:
            self._set_speculation(sw.speculative, t)

    def _set_speculation(self, spec, t):
        """Every decoding sequence changes mode here: close its stint, restart it in the new mode."""
        e = self.e
        riders = list(self.decoding)
        for rid in riders:
            self._stop_decoding(rid)
        if spec is None:                 # the draft stops here: its KV covers all but the newest token
            for rid in riders:
                e.draft_mark[rid] = e.prompt[rid] + e.produced[rid] - 1
        else:                            # the draft catches up on the context it has not seen
            tokens, kv, pairs = 0, 0.0, 0.0
            for rid in riders:
                c = e.draft_mark.get(rid, 0)
                m = max(e.prompt[rid] + e.produced[rid] - 1 - c, 0)
                tokens, kv, pairs = tokens + m, kv + m + c, pairs + m * c + m * (m + 1) * 0.5
            if tokens:
                if self.draft is None:
                    self.catchup = spec.draft_step_time
                else:
                    self.catchup = self.draft.iteration_time(tokens, kv, pairs, 0)
        self.spec = spec
        for rid in riders:
            e.extra.setdefault(rid, []).append([NAN, -1, 0, 0])    # a new stint, no emission
            self._join(rid)
        self.spec_log.append((t, spec is not None))

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
        if steps.window is None:  # the common case
            tokens, kv, pairs = _whole_prompt_counts(lengths)
        else:
            tokens, kv, pairs = 0, 0, 0.0
            for n in lengths:
                x, y = steps.chunk_counts(n, 0)
                tokens, kv, pairs = tokens + n, kv + x, pairs + y
        t = steps.iteration_time(tokens, kv, pairs, len(lengths))
        if self.draft is not None:
            t += self.draft.iteration_time(tokens, kv, pairs, len(lengths))
        return t


class _Featured:
    """The paths of an instance with options: a paged KV cache (blocks, watermark, prefix caching),
    priority preemption, a speculation switch, a pipeline, or a fleet that feeds it from a
    central queue. Mixed in before a policy class, so a plain instance keeps the short paths of
    :class:`_Instance`."""

    __slots__ = ()

    def enqueue(self, rid, t):
        super().enqueue(rid, t)
        if self.prio_preempt and self.kind == _DECODE and not self._could_admit():
            # a full batch runs on until a sequence finishes, unless this request may preempt one
            e = self.e
            c = e.prio[rid]
            if any(e.prio[r] > c for r in self.running):
                self._truncate(t)

    def on_end(self, t):
        kind = self.kind
        self.kind = _IDLE
        if kind == _DECODE:
            self._apply_decode(t)
        elif kind == _PREFILL:
            self._apply_prefill(t)
        elif kind == _MIXED:
            self._apply_mixed(t)
        if self.pull:
            self.e.pull(self, t)
        self.plan(t)

    def _emit_prefill_token(self, rid, t):
        """A prefill (or re-prefill) ended: the sequence emits a token, then decodes or finishes."""
        e = self.e
        p = e.produced[rid]
        self.work -= e.prompt[rid] + p + 1
        e.produced[rid] = p + 1
        if e.first_token[rid] != e.first_token[rid]:  # NaN: the first token
            e.first_token[rid] = t
        else:  # after a preemption: the recomputation yields the next token
            e.extra.setdefault(rid, []).append([t, -1, 0, 0])
        if self.pc is not None and e.shared[rid]:
            entry = self.pc.entries[e.prefix_id[rid]]
            if entry[3] == rid:
                entry[2] = True       # the prefix this prefill computed is now usable by others
        if self.switch is not None:   # the draft's KV covers the prefilled context only while on
            e.draft_mark[rid] = e.prompt[rid] + p if self.spec is not None else 0
        if p + 1 >= e.out[rid]:
            self._release(rid)
            e.finish(rid, t)
        else:
            self._join(rid)

    def _join(self, rid):
        super()._join(rid)
        if self.phase is not None:
            e = self.e
            ph = (e.prompt[rid] + e.produced[rid] - self.G) % self.bs
            e.phase_of[rid] = ph
            self.phase[ph] += 1

    def _stop_decoding(self, rid):
        super()._stop_decoding(rid)
        if self.phase is not None:
            self.phase[self.e.phase_of[rid]] -= 1

    def _release(self, rid):
        e = self.e
        del self.running[rid]
        if self.paged:
            self._release_paged(rid, e.prompt[rid] + e.produced[rid])
        else:
            self.kv_used -= e.prompt[rid] + e.produced[rid]

    def _plan_decode(self, t):
        e = self.e
        if self.spec is not None:
            return self._plan_spec_step(t)
        need = self.B if self.bs == 1 else self.bs * self._new_blocks(1)
        if self.kv_used + need > self.kv_cap:
            if self.pc is not None:
                self._make_room(need)
            while self.B and self.kv_used + need > self.kv_cap:
                self._preempt_one()
                need = self._decode_kv_growth()
            if self.B == 0:
                return self.plan(t)
        B = self.B
        heap, fin = self.heap, e.fin
        while fin[heap[0][1]] != heap[0][0]:
            heappop(heap)
        K = heap[0][0] - self.G                       # until the next sequence finishes
        if self.kv_cap != INF:                        # until the KV cache is full
            if self.bs == 1:
                K = min(K, int((self.kv_cap - self.kv_used) // B))
            else:
                K = min(K, self._steps_until_full())
        if self.pipe is not None:                     # a pipeline interleaves its micro-batches step by step
            K = 1
        K, A, beta, S, grow, dur = self._decode_segment(t, B, K)
        if self.pipe is None:
            self.seg = (t, K, A, beta, S, grow)
            end = t + dur
        else:
            end = self.pipe.submit(t, dur, B)
            self.seg = (t, 1, end - t, 0.0, S, grow)
        self.drain = K * B / (end - t)
        self.series.append((t, len(self.running), B, 0, self.kv_used))
        self.kind = _DECODE
        self.version += 1
        heappush(e.events, (end, _END, next(e.counter), self.index, self.version))

    def _apply_decode(self, t):
        seg = self.seg
        K = seg[1]
        if K:
            self.segments.append(seg)
            if self.spec is not None:
                tokens, kv = self.action, self.kv_action
            else:
                tokens = kv = K * self.B
                if self.bs > 1:
                    kv = self.bs * self._new_blocks(K)
            self.G += K
            self.S += tokens
            self.kv_used += kv
            self.work -= tokens
        self._finish_decodes(t)

    def _finish_decodes(self, t):
        heap, e, G = self.heap, self.e, self.G
        fin = e.fin
        while heap and heap[0][0] <= G:
            f, rid = heappop(heap)
            if fin[rid] != f:
                continue
            if self.spec is None and rid not in e.extra:  # the common case, inlined
                e.st_n[rid] = G - e.join_g[rid]
                out = e.produced[rid] = e.out[rid]
                fin[rid] = -1
                del self.decoding[rid]
                self.B -= 1
                self.S -= e.prompt[rid] + out
                if self.phase is not None:
                    self.phase[e.phase_of[rid]] -= 1
            else:
                self._stop_decoding(rid)
            self._release(rid)
            e.finish(rid, t)

    def _plan_spec_step(self, t):
        total, kv = self._spec_growth()
        if self.kv_used + kv > self.kv_cap:
            if self.pc is not None:
                self._make_room(kv)
            while self.B and self.kv_used + kv > self.kv_cap:
                self._preempt_one()
                total, kv = self._spec_growth()
        if self.B == 0:
            return self.plan(t)
        A = self._spec_step_time(self.B, self.S) + self.catchup
        self.catchup = 0.0
        self.action, self.kv_action = total, kv
        self.drain = 0.0
        self._log_action(t, 0)
        if self.pipe is None:
            end = t + A
        else:
            end = self.pipe.submit(t, A, self.B * (self.spec.num_draft_tokens + 1))
        self.seg = (t, 1, end - t, 0.0, self.S, self.B)
        self._schedule(end, _DECODE)

    def decode_part(self):
        tokens, kv, pairs, logits, extra = super().decode_part()
        if self.catchup:
            extra += self.catchup
            self.catchup = 0.0
        return tokens, kv, pairs, logits, extra

    def _prefill_seconds(self, lengths, cached=None):
        """Seconds to prefill whole prompts of the given lengths in one iteration (``cached``: the
        tokens of each already in the KV cache, skipped)."""
        steps = self.steps
        if cached is None and steps.window is None:  # the common case
            tokens, kv, pairs = _whole_prompt_counts(lengths)
        else:
            tokens, kv, pairs = 0, 0, 0.0
            for i, n in enumerate(lengths):
                c = 0 if cached is None else cached[i]
                x, y = steps.chunk_counts(n - c, c)
                tokens, kv, pairs = tokens + n - c, kv + x, pairs + y
        t = steps.iteration_time(tokens, kv, pairs, len(lengths))
        if self.draft is not None and (self.switch is None or self.spec is not None):
            t += self.draft.iteration_time(tokens, kv, pairs, len(lengths))
        return t
