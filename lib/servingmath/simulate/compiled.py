"""The compiled event loop: plain replicas over open-loop arrivals, the same events as the reference.

The reference loop (:mod:`.engine`, :mod:`.instance`, :mod:`.policies`) is
written for clarity and covers every option; it simulates some 25,000 to
70,000 requests per CPU-second, so a day of a 16-replica fleet (millions of
requests) takes many minutes. This module is the same loop for the case that
dominates such runs, compiled with numba:

* instances under continuous batching (:class:`.policies.PrefillFirst`) or
  chunked prefill (:class:`.policies.Chunked`, whole prompts or chunks), without
  the options (paged KV blocks, watermark, prefix caching, priority preemption,
  speculative decoding, a pipeline, a sliding window, multi-step scheduling),
  with the library's step model or a linear toy one;
* open-loop arrivals, to one server, to each replica of a fleet whose replicas
  never interact (one at a time, as the reference does), or to a fleet behind a
  random, round-robin or least-loaded router, autoscaled or not (an autoscaler's
  decisions depend on the arrivals only, so :meth:`.engine.Engine._scaling_decisions`
  works them out before the run).

It is a transcription, statement for statement, of the reference's paths for
that case: the same arithmetic in the same order, so the same floating-point
numbers, and the same decisions; the tests compare the two bit for bit on many
configurations (``tests/test_simulator_compiled.py``). Where the reference
would preempt a sequence (the KV cache is full), this loop stops and says so,
and the engine runs that replica (or fleet) with the reference loop instead:
preemption (a sequence recomputed later, its token stints in several pieces)
stays in one place only.

Why numba (a package, not code of our own): it compiles this plain Python
subset to machine code on the reader's machine, with no compiler to install
and no second language to read; the loop stays readable beside the reference.
The first call compiles (about 25 s; ``tools/book.py`` does it after setting
up, :func:`warm_up`) and caches the result beside this file (under
``sys.pycache_prefix`` where one is set; or in numba's user cache); later
processes load it in a second or two. Without numba (or with
``SERVINGMATH_COMPILED=0`` in the environment), every simulation runs the
reference loop, with the same results.
"""

from __future__ import annotations

import importlib.util
import math
import os
import sys

import numpy as np

INF = math.inf
OK, PREEMPTS, NO_REPLICA = 0, 1, 2       # what a compiled run returns
_OFF, _WARMING, _ON, _DRAINING = 0, 1, 2, 3      # engine.py's replica states
HYBRID, ADDITIVE, ROOFLINE, LINEAR = 0, 1, 2, 3
PREFILL_FIRST, CHUNKED = 0, 1
ROUTE_NONE, ROUTE_RANDOM, ROUTE_ROUND_ROBIN, ROUTE_REQUESTS, ROUTE_TOKENS = 0, 1, 2, 3, 4
_IDLE, _DECODE, _PREFILL, _MIXED, _WAKE = 0, 1, 2, 3, 5    # instance.py's action kinds


_BROKEN = []       # why numba could not compile the loop here, once it failed


def available() -> bool:
    """Whether the compiled loop can run here (numba installed and working, not switched off)."""
    return (os.environ.get("SERVINGMATH_COMPILED", "1") != "0" and not _BROKEN
            and importlib.util.find_spec("numba") is not None)


_COMPILED = []     # the functions below, compiled on first use (importing numba takes a moment)
List = None        # numba.typed.List once compiled


def _njit(fn):
    _COMPILED.append(fn.__name__)
    return fn


def _compile():
    """Replace this module's loop functions by numba's compiled versions (once per process)."""
    g = globals()
    if _COMPILED and not isinstance(g[_COMPILED[0]], type(_compile)):
        return
    if sys.pycache_prefix and "NUMBA_CACHE_DIR" not in os.environ:
        # the book keeps bytecode out of the sources there (tools/book.py): numba's cache too
        os.environ["NUMBA_CACHE_DIR"] = os.path.join(sys.pycache_prefix, "numba")
    import numba
    from numba.typed import List

    g["List"] = List
    for name in _COMPILED:
        g[name] = numba.njit(cache=True, nogil=True)(g[name])


# ---- the step model: steptimes.LibraryStepTimes / LinearStepTimes, the same operations -----------------------
@_njit
def _iteration_time(P, WM, CM, i, tokens, kv_tokens, attention_pairs, logits):
    mode = int(P[i, 0])
    if mode == LINEAR:
        return P[i, 11] + P[i, 12] * tokens + P[i, 13] * kv_tokens
    # _weights(tokens) + head
    if WM[i, 0] >= 0:
        wm = WM[i, tokens + 1]
    else:
        wm = P[i, 1] + P[i, 2] * tokens
    if logits > 0:
        wm = wm + P[i, 3]
    lin = P[i, 4] * tokens + P[i, 5] * logits
    kv = P[i, 6] * kv_tokens
    att = P[i, 7] * attention_pairs
    if mode == HYBRID:
        t = (wm if wm > lin else lin) + (kv if kv > att else att)
    elif mode == ADDITIVE:
        t = wm + lin + kv + att
    else:
        t = max(wm + kv, lin + att)
    if CM[i, 0] >= 0:
        comm = CM[i, tokens + 1]
    else:
        comm = P[i, 8] + P[i, 9] * tokens
    return t + comm + P[i, 10]


@_njit
def _decode_line(P, WM, CM, i, batch, context_sum):
    """(A, beta, limit) of a decode step of ``batch`` sequences (LibraryStepTimes.decode_line)."""
    mode = int(P[i, 0])
    if mode == LINEAR:
        return P[i, 11] + P[i, 12] * batch, P[i, 13], INF
    if WM[i, 0] >= 0:
        wm = WM[i, batch + 1] + P[i, 3]
    else:
        wm = P[i, 1] + P[i, 2] * batch + P[i, 3]
    lin = (P[i, 4] + P[i, 5]) * batch
    k, a = P[i, 6], P[i, 7]
    if CM[i, 0] >= 0:
        comm = CM[i, batch + 1]
    else:
        comm = P[i, 8] + P[i, 9] * batch
    base = comm + P[i, 10]
    if mode == HYBRID:
        return (wm if wm > lin else lin) + base, (k if k > a else a), INF
    if mode == ADDITIVE:
        return wm + lin + base, k + a, INF
    mem, comp = wm + k * context_sum, lin + a * context_sum
    if mem >= comp:
        l0, l1, o0, o1 = wm, k, lin, a
    else:
        l0, l1, o0, o1 = lin, a, wm, k
    limit = INF
    if o1 > l1:
        limit = (l0 - o0) / (o1 - l1)
    return l0 + base, l1, limit


@_njit
def _steps_to_cover(delta, A, beta, B, S):
    """instance._steps_to_cover: the smallest K >= 0 whose K steps last at least ``delta``."""
    a = beta * B * 0.5
    b = A + beta * S - a
    if a == 0:
        kf = delta / b
    else:
        kf = 2 * delta / (b + math.sqrt(b * b + 4 * a * delta))
    k = max(0, int(math.ceil(kf)))
    while k > 0 and (k - 1) * A + beta * ((k - 1) * S + B * (k - 1) * (k - 2) * 0.5) >= delta:
        k -= 1
    while k * A + beta * (k * S + B * k * (k - 1) * 0.5) < delta:
        k += 1
    return k


# ---- a binary heap of (finish step, request), lexicographic: pops in the order heapq's does ----------------
@_njit
def _less(hf, hr, row, i, j):
    return hf[row, i] < hf[row, j] or (hf[row, i] == hf[row, j] and hr[row, i] < hr[row, j])


@_njit
def _swap(hf, hr, row, i, j):
    hf[row, i], hf[row, j] = hf[row, j], hf[row, i]
    hr[row, i], hr[row, j] = hr[row, j], hr[row, i]


@_njit
def _heap_push(hf, hr, row, n, f, r):
    """Push (f, r) on the heap in row ``row`` of size n; returns the new size."""
    i = n
    hf[row, i] = f
    hr[row, i] = r
    while i > 0:
        parent = (i - 1) >> 1
        if not _less(hf, hr, row, i, parent):
            break
        _swap(hf, hr, row, i, parent)
        i = parent
    return n + 1


@_njit
def _heap_pop(hf, hr, row, n):
    """Remove the top of the heap in row ``row`` (read it first); returns the new size."""
    n -= 1
    hf[row, 0] = hf[row, n]
    hr[row, 0] = hr[row, n]
    i = 0
    while True:
        left = 2 * i + 1
        if left >= n:
            break
        child = left
        if left + 1 < n and _less(hf, hr, row, left + 1, left):
            child = left + 1
        if not _less(hf, hr, row, child, i):
            break
        _swap(hf, hr, row, i, child)
        i = child
    return n


@_njit
def _grow(a, n):
    """``a`` with room for at least one more row than ``n`` (doubling)."""
    if n < a.shape[0]:
        return a
    b = np.empty((2 * a.shape[0] + 16, a.shape[1]))
    b[:n] = a[:n]
    return b


# ---- the loop -----------------------------------------------------------------------------------------------
@_njit
def _put(buf, n, a, b, c, d, e, f=0.0):
    """Write row n of a log: a decode run (t0, K, A, beta, S0, B) in six columns, or a time
    series row (t, running, decoding, prefill tokens, KV tokens) in five (``f`` unused)."""
    buf[n, 0] = a
    buf[n, 1] = b
    buf[n, 2] = c
    buf[n, 3] = d
    buf[n, 4] = e
    if buf.shape[1] > 5:
        buf[n, 5] = f


@_njit
def _take_prompts(Q, qhead, qtail, i, n_classes, room, free_kv, max_tokens, prompt, produced, batch):
    """instance._take_prompts for instance i: pop waiting requests (class order, FCFS, head-of-line
    blocking) into ``batch[i]`` while the batch has room, the KV cache has room and (after the first)
    the prefill stays within ``max_tokens``. Returns (requests taken, their prompt tokens)."""
    nb = 0
    tokens = 0
    for c in range(n_classes):
        row = i * n_classes + c
        while qhead[row] < qtail[row]:
            r = Q[row, qhead[row] % Q.shape[1]]
            nn = prompt[r] + produced[r]
            if nb >= room or nn + 1 > free_kv or (nb and tokens + nn > max_tokens):
                return nb, tokens
            qhead[row] += 1
            batch[i, nb] = r
            nb += 1
            tokens += nn
            free_kv -= nn + 1
    return nb, tokens


@_njit
def _queue_grow(Q, qhead, qtail):
    """The waiting queues (ring buffers, one row per instance and class) with twice the room."""
    cap = Q.shape[1]
    R = np.empty((Q.shape[0], 2 * cap), np.int64)
    for row in range(Q.shape[0]):
        for pos in range(qhead[row], qtail[row]):
            R[row, pos % (2 * cap)] = Q[row, pos % cap]
    return R


@_njit
def _run(router, watch, route_u, pol, whole, max_batch, max_prefill, budget, kv_cap, inst_index, P, WM, CM,
         times, prompt, out, prio, n_classes,
         scheduled, first_token, finish, st_inst, st_g0, st_n, replica_of,
         state, scale_t, scale_n, warmup):
    """Instances 0..n-1 (one per replica) over the open-loop arrivals ``times`` (requests 0..m-1 in
    arrival order), routed by ``router``; ``watch``: one instance that bounds its runs of decode steps
    by the next arrival (the reference's sees_arrivals). Fills the per-request outputs; returns
    (status, segments, rows, series, rows, scale log): each instance's logs and their lengths.

    Autoscaling (engine._scale_to, _on_ready): ``state`` the replicas' initial states, the targets
    ``scale_n`` taken at ``scale_t`` (worked out before the run: they depend on the arrivals
    only), a replica started is routable ``warmup`` seconds later. At equal times the reference's
    heap runs the ends of actions first, then scaling decisions, then replicas becoming ready."""
    n = pol.shape[0]
    m = times.shape[0]
    nq = n * n_classes
    qcap = 64
    Q = np.empty((nq, qcap), np.int64)       # waiting queues: ring buffers [head, tail), one per instance and class
    qhead = np.zeros(nq, np.int64)
    qtail = np.zeros(nq, np.int64)
    cap = 1
    for i in range(n):
        cap = max(cap, min(max_batch[i], m) + 1)
    hf = np.empty((n, cap), np.int64)        # decoding sequences: heaps of (finish step, request)
    hr = np.empty((n, cap), np.int64)
    pf_rid = np.empty((n, cap), np.int64)    # chunked prefill: the prompts being prefilled, in order
    pf_done = np.empty((n, cap), np.int64)
    batch = np.empty((n, cap), np.int64)     # the prompts of the prefill in progress
    ch_rid = np.empty((n, cap), np.int64)    # the chunks of the mixed iteration in progress
    ch_n = np.empty((n, cap), np.int64)
    ch_done = np.empty((n, cap), np.int64)
    line_a = np.zeros((n, cap))              # decode lines cached per batch size (limit inf only)
    line_b = np.zeros((n, cap))
    line_ok = np.zeros((n, cap), np.bool_)
    fin = np.full(max(m, 1), -1, np.int64)
    join_g = np.zeros(max(m, 1), np.int64)
    produced = np.zeros(max(m, 1), np.int64)
    # the logs, one per instance (numba's typed lists of arrays, each grown by doubling)
    segments = List()
    series = List()
    for x in range(n):
        segments.append(np.empty((max(64, 2 * m // n), 6)))
        series.append(np.empty((max(64, 3 * m // n), 5)))
    n_seg = np.zeros(n, np.int64)
    n_ser = np.zeros(n, np.int64)
    # each instance's state (instance.py's attributes of the same names)
    n_waiting = np.zeros(n, np.int64)
    n_running = np.zeros(n, np.int64)
    nh = np.zeros(n, np.int64)
    n_pf = np.zeros(n, np.int64)
    n_batch = np.zeros(n, np.int64)
    n_ch = np.zeros(n, np.int64)
    G = np.zeros(n, np.int64)
    B = np.zeros(n, np.int64)
    S = np.zeros(n, np.int64)
    kv_used = np.zeros(n, np.int64)
    work = np.zeros(n, np.int64)
    drain = np.zeros(n)
    kind = np.zeros(n, np.int64)
    t_end = np.full(n, INF)                  # the end of the action in progress (its event)
    seq = np.zeros(n, np.int64)              # ... and when it was scheduled (ties: the earlier first)
    watching = np.zeros(n, np.bool_)
    seg_t0 = np.zeros(n)
    seg_k = np.zeros(n, np.int64)
    seg_a = np.zeros(n)
    seg_beta = np.zeros(n)
    seg_s = np.zeros(n, np.int64)
    seg_grow = np.zeros(n, np.int64)
    act_grow = np.zeros(n, np.int64)
    act_start = np.zeros(n)
    act_dur = np.zeros(n)
    # the fleet's replicas: routable = those ON, in index order; scaling decisions and warm-ups
    routable = np.empty(n, np.int64)
    n_r = 0
    for x in range(n):
        if state[x] == _ON:
            routable[n_r] = x
            n_r += 1
    n_scale = scale_t.shape[0]
    ps = 0
    ready_t = np.empty(max(n * (n_scale + 1), 1))
    ready_i = np.empty(max(n * (n_scale + 1), 1), np.int64)
    pr = 0
    nr = 0
    scale_log = np.empty((max(n * (n_scale + 1) * 2, 1), 3))
    n_log = 0
    for x in range(n):
        scale_log[n_log, 0] = 0.0
        scale_log[n_log, 1] = x
        scale_log[n_log, 2] = state[x]
        n_log += 1
    counter = 0
    turn = 0
    nxt = 0
    while True:
        ta = times[nxt] if nxt < m else INF
        # the next event: the earliest end, the earliest scheduled among equal times
        i = 0
        te = t_end[0]
        for x in range(1, n):
            if t_end[x] < te or (t_end[x] == te and seq[x] < seq[i]):
                i = x
                te = t_end[x]
        tsc = scale_t[ps] if ps < n_scale else INF
        trd = ready_t[pr] if pr < nr else INF
        if ta > te or ta > tsc or ta > trd:
            pass                                           # an event first
        elif ta == INF:
            break
        if (ta > tsc or ta > trd) and not (te <= tsc and te <= trd):
            if tsc <= trd:
                # ---- a scaling decision (engine._scale_to) ----
                target = scale_n[ps]
                ps += 1
                k = 0
                for x in range(n):
                    if state[x] == _ON or state[x] == _WARMING:
                        k += 1
                if target > k:
                    # bring back draining replicas first (still loaded), then start cold ones
                    for x in range(n):
                        if k >= target:
                            break
                        if state[x] == _DRAINING:
                            state[x] = _ON
                            scale_log[n_log, 0] = tsc
                            scale_log[n_log, 1] = x
                            scale_log[n_log, 2] = _ON
                            n_log += 1
                            k += 1
                    for x in range(n):
                        if k >= target:
                            break
                        if state[x] == _OFF:
                            if warmup > 0:
                                state[x] = _WARMING
                                ready_t[nr] = tsc + warmup
                                ready_i[nr] = x
                                nr += 1
                            else:
                                state[x] = _ON
                            scale_log[n_log, 0] = tsc
                            scale_log[n_log, 1] = x
                            scale_log[n_log, 2] = state[x]
                            n_log += 1
                            k += 1
                elif target < k:
                    for x in range(n - 1, -1, -1):
                        if k <= target:
                            break
                        if state[x] == _ON or state[x] == _WARMING:
                            state[x] = _DRAINING if state[x] == _ON else _OFF
                            scale_log[n_log, 0] = tsc
                            scale_log[n_log, 1] = x
                            scale_log[n_log, 2] = state[x]
                            n_log += 1
                            k -= 1
            else:
                # ---- a replica warmed up (engine._on_ready) ----
                x = ready_i[pr]
                pr += 1
                if state[x] != _WARMING:
                    continue
                state[x] = _ON
                scale_log[n_log, 0] = trd
                scale_log[n_log, 1] = x
                scale_log[n_log, 2] = _ON
                n_log += 1
            n_r = 0
            for x in range(n):
                if state[x] == _ON:
                    routable[n_r] = x
                    n_r += 1
            continue
        if ta <= te:
            # ---- an arrival: the router picks an instance; enqueue ----
            j = nxt
            nxt += 1
            if router == ROUTE_NONE:
                i = 0
            else:
                if n_r == 0:
                    return NO_REPLICA, segments, n_seg, series, n_ser, scale_log[:n_log]
                if router == ROUTE_RANDOM:
                    i = routable[int(route_u[j] * n_r)]
                elif router == ROUTE_ROUND_ROBIN:
                    i = routable[turn % n_r]
                    turn += 1
                elif router == ROUTE_REQUESTS:
                    i = routable[0]
                    best = n_running[i] + n_waiting[i]
                    for y in range(1, n_r):
                        x = routable[y]
                        load = n_running[x] + n_waiting[x]
                        if load < best:
                            i = x
                            best = load
                else:                                      # ROUTE_TOKENS: work_at(t)
                    i = routable[0]
                    bestf = INF
                    for y in range(n_r):
                        x = routable[y]
                        if kind[x] == _DECODE:
                            lf = work[x] - (ta - seg_t0[x]) * drain[x]
                        else:
                            lf = float(work[x])
                        if y == 0 or lf < bestf:
                            i = x
                            bestf = lf
                replica_of[j] = i
                work[i] += prompt[j] + out[j]
            row = i * n_classes + prio[j]
            if qtail[row] - qhead[row] == Q.shape[1]:
                Q = _queue_grow(Q, qhead, qtail)
            Q[row, qtail[row] % Q.shape[1]] = j
            qtail[row] += 1
            n_waiting[i] += 1
            if kind[i] == _IDLE:
                kind[i] = _WAKE
                t_end[i] = ta
                seq[i] = counter
                counter += 1
            elif kind[i] == _DECODE and not watching[i]:
                if pol[i] == CHUNKED:
                    could = n_running[i] < max_batch[i] and budget[i] > B[i]
                else:
                    could = n_running[i] < max_batch[i]
                if could and seg_k[i] > 1:                 # _truncate
                    k = _steps_to_cover(ta - seg_t0[i], seg_a[i], seg_beta[i], seg_grow[i], seg_s[i])
                    if k < seg_k[i]:
                        seg_k[i] = k
                        t_end[i] = seg_t0[i] + (k * seg_a[i] + seg_beta[i] * (k * seg_s[i]
                                                                 + seg_grow[i] * k * (k - 1) * 0.5))
                        seq[i] = counter
                        counter += 1
            continue
        # ---- instance i's action ends: on_end ----
        t = te
        t_end[i] = INF
        ending = kind[i]
        kind[i] = _IDLE
        fin_decodes = False
        if ending == _DECODE:
            if seg_k[i]:
                if n_seg[i] == segments[i].shape[0]:
                    segments[i] = _grow(segments[i], n_seg[i])
                _put(segments[i], n_seg[i], seg_t0[i], seg_k[i], seg_a[i], seg_beta[i], seg_s[i], seg_grow[i])
                n_seg[i] += 1
                grow = seg_k[i] * B[i]
                G[i] += seg_k[i]
                S[i] += grow
                kv_used[i] += grow
                work[i] -= grow
            fin_decodes = True
        elif ending == _MIXED:
            if B[i]:
                if n_seg[i] == segments[i].shape[0]:
                    segments[i] = _grow(segments[i], n_seg[i])
                _put(segments[i], n_seg[i], act_start[i], 1, act_dur[i], 0.0, S[i], B[i])
                n_seg[i] += 1
                G[i] += 1
                S[i] += act_grow[i]
                kv_used[i] += act_grow[i]
                work[i] -= act_grow[i]
                fin_decodes = True
        if fin_decodes:                                    # _finish_decodes
            while nh[i] and hf[i, 0] <= G[i]:
                f = hf[i, 0]
                r = hr[i, 0]
                nh[i] = _heap_pop(hf, hr, i, nh[i])
                if fin[r] != f:
                    continue
                st_n[r] = G[i] - join_g[r]
                produced[r] = out[r]
                fin[r] = -1
                B[i] -= 1
                S[i] -= prompt[r] + out[r]
                n_running[i] -= 1
                kv_used[i] -= prompt[r] + produced[r]
                finish[r] = t
        if ending == _PREFILL or ending == _MIXED:
            # the prompts whose prefill ended emit a token (_emit_prefill_token)
            count = n_batch[i] if ending == _PREFILL else n_ch[i]
            for q in range(count):
                if ending == _PREFILL:
                    r = batch[i, q]
                else:                                      # _advance_chunks
                    r = ch_rid[i, q]
                    done = ch_done[i, q] + ch_n[i, q]
                    w = 0
                    while pf_rid[i, w] != r:
                        w += 1
                    if done < prompt[r] + produced[r]:
                        pf_done[i, w] = done
                        continue
                    for v in range(w, n_pf[i] - 1):
                        pf_rid[i, v] = pf_rid[i, v + 1]
                        pf_done[i, v] = pf_done[i, v + 1]
                    n_pf[i] -= 1
                pp = produced[r]
                work[i] -= prompt[r] + pp + 1
                produced[r] = pp + 1
                first_token[r] = t
                if pp + 1 >= out[r]:
                    n_running[i] -= 1
                    kv_used[i] -= prompt[r] + produced[r]
                    finish[r] = t
                else:                                      # _join
                    join_g[r] = G[i]
                    st_inst[r] = inst_index[i]
                    st_g0[r] = G[i]
                    f = G[i] + out[r] - pp - 1
                    fin[r] = f
                    nh[i] = _heap_push(hf, hr, i, nh[i], f, r)
                    B[i] += 1
                    S[i] += prompt[r] + produced[r]
        # ---- plan the next action ----
        if pol[i] == PREFILL_FIRST:
            if n_waiting[i] and n_running[i] < max_batch[i]:
                nb, tokens = _take_prompts(Q, qhead, qtail, i, n_classes, max_batch[i] - n_running[i],
                                           kv_cap[i] - kv_used[i], max_prefill[i], prompt, produced, batch)
                n_waiting[i] -= nb
                n_batch[i] = nb
                if nb:
                    pairs2 = 0
                    for q in range(nb):
                        r = batch[i, q]
                        n_running[i] += 1
                        if scheduled[r] != scheduled[r]:
                            scheduled[r] = t
                        nn = prompt[r] + produced[r]
                        pairs2 += nn * (nn + 1)                # _whole_prompt_counts
                    kv_used[i] += tokens + nb
                    if n_ser[i] == series[i].shape[0]:
                        series[i] = _grow(series[i], n_ser[i])
                    _put(series[i], n_ser[i], t, n_running[i], B[i], tokens, kv_used[i])
                    n_ser[i] += 1
                    kind[i] = _PREFILL
                    t_end[i] = t + _iteration_time(P, WM, CM, i, tokens, tokens, pairs2 * 0.5, nb)
                    seq[i] = counter
                    counter += 1
                    continue
            if not B[i]:
                continue
        else:                                              # Chunked.plan
            grow = B[i]
            if B[i] and kv_used[i] + grow > kv_cap[i]:
                return PREEMPTS, segments, n_seg, series, n_ser, scale_log[:n_log]
            left = budget[i] - B[i]
            nc = 0
            if left > 0:                                   # _continue_prefills
                for w in range(n_pf[i]):
                    r = pf_rid[i, w]
                    nn = min(prompt[r] + produced[r] - pf_done[i, w], left)
                    ch_rid[i, nc] = r
                    ch_n[i, nc] = nn
                    ch_done[i, nc] = pf_done[i, w]
                    nc += 1
                    left -= nn
                    if left == 0:
                        break
            if left > 0 and n_waiting[i] and n_running[i] < max_batch[i]:
                nb, _ = _take_prompts(Q, qhead, qtail, i, n_classes, max_batch[i] - n_running[i],
                                      kv_cap[i] - kv_used[i] - grow, INF, prompt, produced, batch)
                n_waiting[i] -= nb
                for q in range(nb):                        # _admit_within
                    if left <= 0:
                        for back in range(nb - 1, q - 1, -1):
                            qhead[i * n_classes + prio[batch[i, back]]] -= 1
                        n_waiting[i] += nb - q
                        break
                    r = batch[i, q]
                    need = prompt[r] + produced[r]
                    if whole[i] and need > left and (nc or B[i]):     # a whole prompt waits for room
                        for back in range(nb - 1, q - 1, -1):
                            qhead[i * n_classes + prio[batch[i, back]]] -= 1
                        n_waiting[i] += nb - q
                        break
                    n_running[i] += 1
                    pf_rid[i, n_pf[i]] = r
                    pf_done[i, n_pf[i]] = 0
                    n_pf[i] += 1
                    kv_used[i] += need + 1
                    if scheduled[r] != scheduled[r]:
                        scheduled[r] = t
                    nn = need if whole[i] else min(need, left)
                    ch_rid[i, nc] = r
                    ch_n[i, nc] = nn
                    ch_done[i, nc] = 0
                    nc += 1
                    left -= nn
            n_ch[i] = nc
            if nc:                                         # _mixed_time
                prefill_tokens = 0
                prefill_kv = 0
                prefill_pairs = 0.0
                finals = 0
                for q in range(nc):
                    nn = ch_n[i, q]
                    cc = ch_done[i, q]
                    prefill_tokens += nn
                    prefill_kv += nn + cc
                    prefill_pairs += nn * cc + nn * (nn + 1) * 0.5
                    if nn + cc == prompt[ch_rid[i, q]] + produced[ch_rid[i, q]]:
                        finals += 1
                dur = _iteration_time(P, WM, CM, i, B[i] + prefill_tokens, S[i] + prefill_kv,
                                      S[i] + prefill_pairs, B[i] + finals) + 0.0
                act_grow[i] = grow
                act_start[i] = t
                act_dur[i] = dur
                if n_ser[i] == series[i].shape[0]:
                    series[i] = _grow(series[i], n_ser[i])
                _put(series[i], n_ser[i], t, n_running[i], B[i], prefill_tokens, kv_used[i])
                n_ser[i] += 1
                kind[i] = _MIXED
                t_end[i] = t + dur
                seq[i] = counter
                counter += 1
                continue
            if not B[i]:
                continue
        # ---- _plan_decode ----
        b = B[i]
        if kv_used[i] + b > kv_cap[i]:
            return PREEMPTS, segments, n_seg, series, n_ser, scale_log[:n_log]
        while fin[hr[i, 0]] != hf[i, 0]:
            nh[i] = _heap_pop(hf, hr, i, nh[i])
        K = hf[i, 0] - G[i]
        if kv_cap[i] != INF:
            room = int((kv_cap[i] - kv_used[i]) // b)
            if room < K:
                K = room
        # _decode_segment (no window)
        s0 = S[i]
        if line_ok[i, b]:
            A = line_a[i, b]
            beta = line_b[i, b]
            limit = INF
        else:
            A, beta, limit = _decode_line(P, WM, CM, i, b, s0)
            if limit == INF:
                line_a[i, b] = A
                line_b[i, b] = beta
                line_ok[i, b] = True
        if limit != INF:
            K = min(K, max(1, int((limit - s0) // max(b, 1)) + 1))
        dur = K * A + beta * (K * s0 + b * K * (K - 1) * 0.5)
        if pol[i] == CHUNKED:
            watching[i] = watch and n_running[i] < max_batch[i] and budget[i] > b
        else:
            watching[i] = watch and n_running[i] < max_batch[i]
        if watching[i] and nxt < m and times[nxt] - t < dur:
            K = _steps_to_cover(times[nxt] - t, A, beta, b, s0)
            dur = K * A + beta * (K * s0 + b * K * (K - 1) * 0.5)
        seg_t0[i] = t
        seg_k[i] = K
        seg_a[i] = A
        seg_beta[i] = beta
        seg_s[i] = s0
        seg_grow[i] = b
        drain[i] = K * b / dur
        if n_ser[i] == series[i].shape[0]:
            series[i] = _grow(series[i], n_ser[i])
        _put(series[i], n_ser[i], t, n_running[i], b, 0, kv_used[i])
        n_ser[i] += 1
        kind[i] = _DECODE
        t_end[i] = t + dur
        seq[i] = counter
        counter += 1
    return OK, segments, n_seg, series, n_ser, scale_log[:n_log]


def warm_up() -> bool:
    """Compile the loop now (or load it from numba's cache): a tiny simulation through it. Returns
    whether the compiled loop is available. ``tools/book.py`` calls it after setting up."""
    if not available():
        return False
    from ..workloads import Poisson, Workload
    from .config import ContinuousBatching, Server, SimulationConfig
    from .engine import Engine
    from .steptimes import LinearStepTimes

    config = SimulationConfig(server=Server(step_times=LinearStepTimes(step_time=1e-3)),
                              workload=Workload.fixed(8, prompt_len=16, output_len=4),
                              arrivals=Poisson(rate=100.0), policy=ContinuousBatching(max_batch_size=4))
    return Engine(config, 0).run().compiled_instances == 1


# ---- what the engine calls ------------------------------------------------------------------------------------
def supports(inst) -> bool:
    """Whether an instance is one this loop transcribes: a plain PrefillFirst or Chunked instance (no
    options), the library's step model without a sliding window or a linear toy, no speculation."""
    from .policies import Chunked, PrefillFirst
    from .steptimes import LibraryStepTimes, LinearStepTimes

    if type(inst) not in (PrefillFirst, Chunked):
        return False
    if inst.spec is not None or inst.switch is not None or inst.draft is not None or inst.pipe is not None:
        return False
    steps = inst.steps
    if type(steps) is LinearStepTimes:
        return True
    return type(steps) is LibraryStepTimes and steps.window is None and steps.overlap in _MODES


_MODES = {"hybrid": HYBRID, "additive": ADDITIVE, "roofline": ROOFLINE}


def _give_up(exc):
    """numba could not compile the loop here: say so once, and let the reference loop run everything."""
    import warnings

    _BROKEN.append(repr(exc))
    warnings.warn(f"servingmath.simulate: the compiled loop is unavailable here ({exc!r:.200}); "
                  "simulations run the reference loop (same results, slower)", RuntimeWarning, stacklevel=3)
    return None


def _step_parameters(steps, largest):
    """The step model as the flat row ``_run`` reads, and its tables (MoE weight reads, NCCL
    all-reduces) up to ``largest`` tokens from the step model's own tables, each behind a flag
    (-1: no table)."""
    from .steptimes import LinearStepTimes

    p = np.zeros(14)
    none = np.array([-1.0])
    if isinstance(steps, LinearStepTimes):
        p[0] = LINEAR
        p[11], p[12], p[13] = steps.step_time, steps.per_token, steps.per_kv_token
        return p, none, none
    p[0] = _MODES[steps.overlap]
    p[1], p[2], p[3] = steps._fixed, steps._gather, steps._head
    p[4], p[5] = steps.linear_per_token, steps.linear_per_logit
    p[6], p[7] = steps.kv_per_token, steps.attention_per_pair
    p[8], p[9], p[10] = steps._comm0, steps._comm1, steps.overhead
    wm = comm = none
    if steps._moe:
        steps._weights(largest)
        wm = np.concatenate([[0.0], np.array(steps._wm[:largest + 1], dtype=float)])
    if not steps._comm_affine:
        steps._communication(largest)
        comm = np.concatenate([[0.0], np.array(steps._comm[:largest + 1], dtype=float)])
    return p, wm, comm


def _rows(rows):
    """Rows of different lengths as one array, padded."""
    out = np.zeros((len(rows), max(len(r) for r in rows)))
    for i, r in enumerate(rows):
        out[i, :len(r)] = r
    return out


_ROUTERS = {"Random": ROUTE_RANDOM, "RoundRobin": ROUTE_ROUND_ROBIN}


def router_code(router):
    """The compiled loop's code for a fleet's router, or None for one it does not route."""
    name = type(router).__name__
    if name == "LeastLoaded":
        return ROUTE_TOKENS if router.measure == "tokens" else ROUTE_REQUESTS
    return _ROUTERS.get(name)


def run(instances, times, prompt, out, prio, n_classes, *, router=ROUTE_NONE, route_u=None, states=None,
        scaling=None, warmup=0.0):
    """Simulate ``instances`` (one per replica; one alone with ``router=ROUTE_NONE``) over the
    open-loop arrivals (arrays in arrival order). Returns the per-request columns (and the replica
    of each request when routed) and each instance's (segments, series), or None, having changed
    nothing, where the reference loop must run it (a preemption). ``states``: the replicas' states
    at the start (all on by default); ``scaling``: the autoscaler's (times, targets), with replicas
    ready ``warmup`` seconds after they start; the scale log then comes back as ``columns["scale_log"]``."""
    from .policies import Chunked

    try:
        _compile()
    except Exception as exc:  # pragma: no cover - a broken numba install: the reference loop runs instead
        return _give_up(exc)
    m = len(times)
    n = len(instances)
    pol, whole, max_batch, max_prefill, budget, kv_cap = [], [], [], [], [], []
    P, WM, CM = [], [], []
    for inst in instances:
        chunked = type(inst) is Chunked
        pol.append(CHUNKED if chunked else PREFILL_FIRST)
        whole.append(bool(chunked and inst.whole))       # chunked prefill of whole prompts (TensorRT-LLM)
        max_batch.append(int(min(inst.max_batch, 2 ** 62)))
        budget.append(int(inst.budget) if chunked else 0)
        max_prefill.append(INF if chunked else float(inst.max_prefill))
        kv_cap.append(float(inst.kv_cap))
        tokens = budget[-1] if chunked else (0 if max_prefill[-1] == INF else int(max_prefill[-1]))
        p, wm, comm = _step_parameters(inst.steps, max(tokens, min(max_batch[-1], m)) + 1)
        P.append(p)
        WM.append(wm)
        CM.append(comm)
    columns = dict(scheduled=np.full(m, np.nan), first_token=np.full(m, np.nan), finish_time=np.full(m, np.nan),
                   st_inst=np.full(m, -1, np.int64), st_g0=np.zeros(m, np.int64), st_n=np.zeros(m, np.int64))
    replica_of = np.zeros(m, np.int64)
    state = np.full(n, _ON, np.int64) if states is None else np.array(states, np.int64)
    scale_t, scale_n = (np.zeros(0), np.zeros(0, np.int64)) if scaling is None else scaling
    try:
        status, segments, n_seg, series, n_ser, scale_log = _run(
            int(router), router == ROUTE_NONE, np.zeros(1) if route_u is None else np.asarray(route_u, dtype=float),
            np.array(pol, np.int64), np.array(whole, np.bool_), np.array(max_batch, np.int64),
            np.array(max_prefill), np.array(budget, np.int64), np.array(kv_cap),
            np.array([inst.index for inst in instances], np.int64), np.array(P), _rows(WM), _rows(CM),
            np.ascontiguousarray(times, dtype=float), np.ascontiguousarray(prompt, dtype=np.int64),
            np.ascontiguousarray(out, dtype=np.int64), np.ascontiguousarray(prio, dtype=np.int64), int(n_classes),
            columns["scheduled"], columns["first_token"], columns["finish_time"], columns["st_inst"],
            columns["st_g0"], columns["st_n"], replica_of, state, np.asarray(scale_t, dtype=float),
            np.asarray(scale_n, dtype=np.int64), float(warmup))
    except Exception as exc:  # pragma: no cover - numba failed to compile here: the reference loop runs instead
        if type(exc).__module__.split(".")[0] not in ("numba", "llvmlite"):
            raise
        return _give_up(exc)
    if status != OK:
        return None
    if scaling is not None:
        columns["scale_log"] = [(float(t), int(i), int(k)) for t, i, k in scale_log]
    if router != ROUTE_NONE:
        columns["replica_of"] = replica_of
    logs = [(np.asarray(segments[i])[:n_seg[i]], np.asarray(series[i])[:n_ser[i]]) for i in range(n)]
    return columns, logs
