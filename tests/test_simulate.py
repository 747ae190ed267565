"""The serving simulator: its step times, queueing theory, an independent simulator, invariants.

* Step times: an iteration of decodes only equals ``decode_step_time``, a prompt (or a chunk
  after cached tokens) equals ``prefill_time``: the simulator uses the library's model.
* Queueing theory: with a batch cap of 1 the server is an M/G/1 queue. Deterministic service
  reproduces the M/D/1 mean wait, geometric output lengths with a constant step time (nearly
  exponential service) the M/M/1 mean, P50 and P99 sojourn, each within 4 standard errors
  estimated from the run itself (batch means) - and the runs are precise enough to reject
  the wrong formula.
* ciw (an independent discrete-event library) replays the same arrivals and service times of
  a two-class priority queue and must give the same start and finish of every request.
* Invariants (hypothesis) over random workloads, policies, KV capacities and arrivals.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from servingmath import memory, queueing, slo, simulate as sim
from servingmath.decode import decode_step_time
from servingmath.deployment import Deployment
from servingmath.models import kv_bytes_per_token, kv_projection_parameter_count, parameter_count, weight_bytes
from servingmath.prefill import prefill_step_parts, prefill_time
from servingmath.sharding import NCCL_NVLINK_ALLREDUCE
from servingmath.step import Iteration, iteration_work, step_time, time_parts
from servingmath.simulate.results import weighted_percentile
from servingmath.workloads import (ClosedLoop, Geometric, Poisson, Timestamps, Workload,
                                   chat_workload)

from conftest import load_tool

H100 = "H100-SXM5-80GB"
LLAMA = "Llama-3.1-8B"
SERVER = sim.Server(LLAMA, H100)
# Llama-3.1-8B (config.json): V = 128256, D = 4096, untied; H100-SXM5 datasheet: 3.35 TB/s, 989.4 TFLOP/s bf16
V8, D8, H100_BW = 128_256, 4_096, 3.35e12


def run(workload, arrivals, policy=None, server=SERVER, seed=0, **kw):
    config = sim.SimulationConfig(server, workload, arrivals, policy or sim.ContinuousBatching(), **kw)
    return sim.simulate(config, seed)


def batch_means(x, n_batches=25):
    """Mean and its standard error from batch means (the waits of a queue are correlated)."""
    means = np.array([b.mean() for b in np.array_split(np.asarray(x), n_batches)])
    return float(np.mean(x)), float(means.std(ddof=1) / math.sqrt(n_batches))


def batch_quantile(x, q, n_batches=25):
    qs = np.array([np.percentile(b, q) for b in np.array_split(np.asarray(x), n_batches)])
    return float(np.percentile(x, q)), float(qs.std(ddof=1) / math.sqrt(n_batches))


# ---- the step-time model is the library's ------------------------------------------------------------
@pytest.mark.parametrize("overlap", ["hybrid", "additive", "roofline"])
@pytest.mark.parametrize("model, tp", [(LLAMA, 1), ("Mixtral-8x7B", 2), ("Llama-3.1-70B", 4)])
def test_iterations_equal_decode_and_prefill_step_times(model, tp, overlap):
    steps = sim.Server(model, H100, tensor_parallel=tp, overlap=overlap).build_step_times()
    for b, c in [(1, 0), (1, 700), (8, 512), (64, 1500), (256, 3000)]:
        expected = decode_step_time(model, H100, b, c, tensor_parallel=tp, overlap=overlap)
        assert steps.iteration([c] * b) == pytest.approx(expected, rel=1e-12)
        A, beta, limit = steps.decode_line(b, b * c)
        if b * c <= limit:
            assert A + beta * b * c == pytest.approx(expected, rel=1e-12)
    for n, cached, batch in [(1, 0, 1), (512, 0, 1), (2048, 0, 1), (128, 384, 1), (300, 0, 4)]:
        expected = prefill_time(model, H100, n, batch_size=batch, cached_len=cached, tensor_parallel=tp,
                                overlap=overlap)
        assert steps.iteration(chunks=[(n, cached)] * batch) == pytest.approx(expected, rel=1e-12)


def _cases(model):
    """(name, Iteration, the simulator's description of the same iteration) for one model."""
    return [
        ("decode", Iteration.decode(model, sequences=64, context_len=3000), ([3000] * 64, [])),
        ("decode past a window", Iteration.decode(model, sequences=8, context_len=6000), ([6000] * 8, [])),
        ("lone decode", Iteration.decode(model, sequences=1, context_len=1), ([1], [])),
        ("prefill", Iteration.of(model, new_tokens=2048), ([], [(2048, 0)])),
        ("batched prefill", Iteration.of(model, sequences=3, new_tokens=300), ([], [(300, 0)] * 3)),
        ("final chunk after cached tokens", Iteration.of(model, new_tokens=512, cached_tokens=5000),
         ([], [(512, 5000, True)])),
        ("non-final chunk, no logits", Iteration.of(model, new_tokens=512, cached_tokens=1024, logits=0),
         ([], [(512, 1024, False)])),
        ("mixed", Iteration.decode(model, sequences=16, context_len=600)
         + Iteration.of(model, new_tokens=256)
         + Iteration.of(model, new_tokens=128, cached_tokens=4500, logits=0),
         ([600] * 16, [(256, 0), (128, 4500, False)])),
    ]


@pytest.mark.parametrize("overlap", ["hybrid", "roofline", "additive"])
@pytest.mark.parametrize("tp", [1, 8])
@pytest.mark.parametrize("model", [LLAMA, "Mixtral-8x7B", "Mistral-7B", "gpt-oss-120b"])
def test_library_step_times_are_the_step_model(model, tp, overlap):
    # the simulator's per-count seconds and its own counting of an iteration against step.step_time
    # of the same Iteration: dense, MoE (experts touched), sliding window, half the layers windowed and
    # MXFP4 experts (gpt-oss); TP 8 with NCCL's all-reduce
    # latencies and link efficiency, and a per-step overhead
    options = dict(tensor_parallel=tp, overlap=overlap, step_overhead=150e-6, mfu=0.7, mbu=0.8)
    if tp > 1:
        options.update(NCCL_NVLINK_ALLREDUCE)
    dep = Deployment.build(model, H100, **options)
    steps = sim.LibraryStepTimes(model, H100, **options)
    assert sim.LibraryStepTimes.for_deployment(dep).deployment == steps.deployment == dep
    for name, it, (decodes, chunks) in _cases(dep.model):
        work = iteration_work(dep, it)
        expected = step_time(dep, work)
        parts = time_parts(dep, work)
        assert parts["overhead"] == 150e-6
        assert (parts["communication"] > 0) == (tp > 1), name
        got = steps.iteration_time(int(it.tokens), it.kv_tokens, it.attention_pairs, int(it.logits))
        assert got == pytest.approx(expected, rel=1e-12), name
        assert steps.iteration(decodes, chunks) == pytest.approx(expected, rel=1e-12), name


def test_the_cases_differ_where_the_step_model_says_they_should():
    # guard for the test above: the non-final chunk skips the LM head, the window caps the KV reads
    dep = Deployment.build("Mistral-7B", H100)
    steps = sim.LibraryStepTimes.for_deployment(dep)
    final, partial = steps.iteration(chunks=[(512, 1024, True)]), steps.iteration(chunks=[(512, 1024, False)])
    assert final > partial
    assert steps.iteration([6000]) == steps.iteration([4096]) > steps.iteration([4095])
    moe = sim.LibraryStepTimes("Mixtral-8x7B", H100)
    assert moe.iteration([100] * 2) < moe.iteration([100] * 64)       # more experts touched


def test_roofline_decode_line_changes_regime_where_the_lines_cross():
    # B = 400 > the H100 ridge (~295): compute-bound at short contexts, the KV line overtakes later
    steps = sim.Server(LLAMA, H100, overlap="roofline").build_step_times()
    A, beta, limit = steps.decode_line(400, 0)
    assert 0 < limit < math.inf
    for s in [0, limit * 0.5, limit]:
        assert A + beta * s == pytest.approx(steps.iteration_time(400, s, s, 400), rel=1e-12)
    s = limit * 1.5
    A2, beta2, _ = steps.decode_line(400, s)
    assert A2 + beta2 * s == pytest.approx(steps.iteration_time(400, s, s, 400), rel=1e-12)
    assert A2 + beta2 * s > A + beta * s     # past the crossing the other line is the larger
    # the simulator splits runs of decode steps there: token times still match step by step
    res = run(Workload.fixed(400, 100, 600), Timestamps(np.zeros(400)),
              sim.ContinuousBatching(max_batch_size=400, max_prefill_tokens=40_000),
              server=sim.Server(LLAMA, H100, overlap="roofline"))
    gaps = np.diff(res.token_times(0))
    expected = [decode_step_time(LLAMA, H100, 400, 100 + k, overlap="roofline") for k in range(1, 600)]
    np.testing.assert_allclose(gaps, expected, rtol=1e-9)


def test_default_kv_capacity_is_memory_left_after_weights():
    expected = (80e9 * 0.9 - weight_bytes(LLAMA)) // kv_bytes_per_token(LLAMA)
    assert SERVER.kv_capacity() == expected
    with pytest.raises(ValueError, match="Llama-3.1-405B with bf16 weights leaves no room for a KV cache on "
                                         "1 x H100-SXM5-80GB at gpu_memory_utilization=0.9"):
        sim.Server("Llama-3.1-405B", H100).kv_capacity()


def test_kv_capacity_counts_replicated_kv_heads_per_gpu():
    # Llama-3.1-70B (80 layers, 8 KV heads of 128) on 16 GPUs: each GPU holds one KV head (replicated
    # twice) and 1/8 of the K/V projections; the cache is what one GPU's budget holds, not the pooled memory
    model, n = "Llama-3.1-70B", 16
    p, p_kv = parameter_count(model), kv_projection_parameter_count(model)
    weights_per_gpu = (p - p_kv) * 2 / n + p_kv * 2 / 8
    per_token_per_gpu = 2 * 80 * 1 * 128 * 2
    expected = (80e9 * 0.9 - weights_per_gpu) // per_token_per_gpu
    server = sim.Server(model, H100, tensor_parallel=n)
    assert server.kv_capacity() == expected == memory.max_kv_tokens(model, H100, tensor_parallel=n)
    pooled = (n * 80e9 * 0.9 - weight_bytes(model)) // kv_bytes_per_token(model)     # the old, wrong count
    assert server.kv_capacity() < 0.6 * pooled
    assert sim.Server(model, H100, tensor_parallel=n, gpu_memory_utilization=0.5).kv_capacity() == (
        (80e9 * 0.5 - weights_per_gpu) // per_token_per_gpu)


def test_a_lone_request_takes_prefill_plus_its_decode_steps():
    res = run(Workload.fixed(1, 700, 40), Timestamps([0.25]))
    r = res.records[0]
    assert r.first_token == pytest.approx(0.25 + prefill_time(LLAMA, H100, 700), rel=1e-12)
    decode = sum(decode_step_time(LLAMA, H100, 1, 700 + k) for k in range(1, 40))
    assert r.finish - r.first_token == pytest.approx(decode, rel=1e-12)
    steps = np.diff(res.token_times(0))
    np.testing.assert_allclose(steps, [decode_step_time(LLAMA, H100, 1, 700 + k) for k in range(1, 40)],
                               rtol=1e-9)


def test_simultaneous_arrivals_share_one_prefill():
    res = run(Workload.fixed(8, 300, 5), Timestamps(np.zeros(8)))
    r = res.records
    assert np.ptp(r.first_token) == 0
    assert r.first_token[0] == pytest.approx(prefill_time(LLAMA, H100, 300, batch_size=8), rel=1e-12)


def test_chunked_prefill_charges_each_chunk_after_its_cached_part():
    res = run(Workload.fixed(1, 300, 2), Timestamps([0.0]), sim.ChunkedPrefill(token_budget=128,
                                                                                max_batch_size=8))
    # the two chunks that do not end the prompt emit no logits, so they skip the LM head's V x D x 2 bytes;
    # 128 tokens are below the H100's ridge (~295), so those chunks are bound by the weight read
    head = V8 * D8 * 2 / H100_BW
    for cached in (0, 128):
        parts = prefill_step_parts(LLAMA, H100, 128, cached_len=cached)
        assert parts["linear_compute"] < parts["weight_memory"] - head
    expected = (prefill_time(LLAMA, H100, 128) - head + prefill_time(LLAMA, H100, 128, cached_len=128) - head
                + prefill_time(LLAMA, H100, 44, cached_len=256))
    assert res.records.first_token[0] == pytest.approx(expected, rel=1e-12)


def test_sliding_window_chunks_follow_prefill_time():
    steps = sim.Server("Mistral-7B", H100).build_step_times()
    for n, cached in [(512, 0), (512, 4000), (3000, 6000), (5000, 0)]:
        expected = prefill_time("Mistral-7B", H100, n, cached_len=cached)
        assert steps.iteration(chunks=[(n, cached)]) == pytest.approx(expected, rel=1e-12)


def test_only_final_chunks_run_the_lm_head():
    steps = SERVER.build_step_times()
    final, partial = steps.iteration(chunks=[(1024, 0, True)]), steps.iteration(chunks=[(1024, 0, False)])
    assert final - partial == pytest.approx(steps.linear_per_logit)   # compute-bound chunk
    assert steps.linear_per_logit == pytest.approx(2 * 128256 * 4096 / 989.4e12)   # 2 V D / F


def test_mixed_iteration_reads_weights_once():
    steps = SERVER.build_step_times()
    mixed = steps.iteration([600] * 16, [(256, 0)])
    apart = decode_step_time(LLAMA, H100, 16, 600) + prefill_time(LLAMA, H100, 256)
    # one read of every weight but the embedding table (whose rows are gathered per token, so those stay)
    weights_alone = (weight_bytes(LLAMA) - V8 * D8 * 2) / H100_BW
    assert mixed < apart
    assert apart - mixed == pytest.approx(weights_alone, rel=0.01)   # one weight read saved


# ---- queueing theory ----------------------------------------------------------------------------------
def test_batch_cap_one_with_deterministic_service_is_md1():
    prompt, out, rho, n = 256, 16, 0.7, 40_000
    service = prefill_time(LLAMA, H100, prompt) + sum(
        decode_step_time(LLAMA, H100, 1, prompt + k) for k in range(1, out))
    lam = rho / service
    r = run(Workload.fixed(n, prompt, out), Poisson(lam), sim.ContinuousBatching(max_batch_size=1)).records
    np.testing.assert_allclose(r.finish - r.scheduled, service, rtol=1e-9)    # deterministic
    mean, se = batch_means(r.queue_delay)
    assert se < 0.04 * mean                                       # precise enough to mean something
    assert abs(mean - queueing.md1_mean_wait(lam, service)) < 4 * se
    assert abs(mean - queueing.mm1_mean_wait(lam, service)) > 10 * se   # and not the M/M/1 wait


def test_batch_cap_one_with_exponential_like_service_is_mm1():
    # constant 1 ms per iteration and geometric output lengths (mean 1000): service = n x 1 ms,
    # geometric with p = 1e-3, i.e. exponential up to a relative error of p / 2 in E[S^2]
    rho, n, step = 0.5, 60_000, 1e-3
    work = Workload.sample(n, 1, Geometric(1000), seed=1)
    server = sim.Server(step_times=sim.LinearStepTimes(step))
    r = run(work, Poisson(rho), sim.ContinuousBatching(max_batch_size=1), server=server).records
    np.testing.assert_allclose(r.finish - r.scheduled, work.output_lens * step, rtol=1e-9, atol=1e-10)
    s = 1000 * step
    bias = abs(queueing.mg1_mean_wait(rho, s, s * math.sqrt(1 - 1e-3)) - queueing.mm1_mean_wait(rho, s))
    mean, se = batch_means(r.e2e)
    assert se < 0.02 * mean
    assert abs(mean - queueing.mm1_mean_sojourn(rho, s)) < 4 * se + bias
    assert abs(mean - (queueing.md1_mean_wait(rho, s) + s)) > 10 * se   # and not M/D/1
    for q in (0.5, 0.99):
        value, se_q = batch_quantile(r.e2e, 100 * q)
        assert se_q < 0.05 * value
        assert abs(value - queueing.mm1_sojourn_quantile(q, rho, s)) < 4 * se_q + 1e-3 * value


def test_same_trace_as_ciw_priority_queue():
    ciw = pytest.importorskip("ciw", reason="ciw not installed: pip install ciw (cross-check skipped)")
    n, step = 3000, 2e-3
    work = Workload.sample(n, 1, Geometric(40), seed=4).with_priorities(0.4, seed=5)
    server = sim.Server(step_times=sim.LinearStepTimes(step))
    res = run(work, Poisson(10.0), sim.ContinuousBatching(max_batch_size=1), server=server, seed=6)
    r = res.records
    assert 0.7 < float(np.mean(work.output_lens) * step * 10.0) < 0.9   # a busy queue: rho ~ 0.8

    arrivals, services = {}, {}
    for c in (0, 1):
        mine = np.flatnonzero(r.priority == c)
        gaps = np.diff(r.arrival[mine], prepend=0.0)
        arrivals[f"Class {c}"] = [ciw.dists.Sequential(list(gaps) + [1e9])]   # then nobody else
        services[f"Class {c}"] = [ciw.dists.Sequential(list(work.output_lens[mine] * step))]
    network = ciw.create_network(arrival_distributions=arrivals, service_distributions=services,
                                 number_of_servers=[1], priority_classes={"Class 0": 0, "Class 1": 1})
    ciw.seed(0)
    q = ciw.Simulation(network)
    q.simulate_until_max_customers(n, method="Finish")
    for c in (0, 1):
        mine = np.flatnonzero(r.priority == c)
        recs = sorted((x for x in q.get_all_records() if x.customer_class == f"Class {c}"),
                      key=lambda x: x.arrival_date)
        assert len(recs) == mine.size
        np.testing.assert_allclose([x.arrival_date for x in recs], r.arrival[mine], atol=1e-9)
        np.testing.assert_allclose([x.service_start_date for x in recs], r.scheduled[mine], atol=1e-9)
        np.testing.assert_allclose([x.exit_date for x in recs], r.finish[mine], atol=1e-9)
    # the priority mattered: batch requests waited longer
    assert r.queue_delay[r.priority == 1].mean() > 1.5 * r.queue_delay[r.priority == 0].mean()


# ---- invariants over random systems ---------------------------------------------------------------------
def check_invariants(res, max_batch=None, spec=None):
    r = res.records
    cfg = res.config
    assert np.isfinite(r.finish).all(), "every request finishes"
    assert (r.arrival <= r.scheduled).all() and (r.scheduled <= r.first_token).all()
    assert (r.first_token <= r.finish).all() and (r.ttft <= r.e2e).all()
    assert (np.nan_to_num(r.tpot) >= 0).all()
    for i in range(len(r)):
        times = res.token_times(i)
        assert times[0] == r.first_token[i] and times[-1] == r.finish[i]
        assert (np.diff(times) > 0).all(), "token times increase"
        if spec is None:
            assert times.size == r.output_len[i]
        else:
            g1 = spec.num_draft_tokens + 1
            assert 1 + math.ceil((r.output_len[i] - 1) / g1) <= times.size <= r.output_len[i]
    values, weights = res.itl_values()
    gaps = np.concatenate([np.diff(res.token_times(i)) for i in range(len(r))])
    np.testing.assert_allclose(np.sort(np.repeat(values, weights)), np.sort(gaps), rtol=1e-12, atol=1e-12)
    for k in range(len(res.instances)):
        ts = res.timeseries(k)
        assert (ts["kv_tokens"] <= res.kv_capacity(k)).all()
        if max_batch is not None:
            assert (ts["running"] <= max_batch).all()
    # throughput <= a physical bound: b tokens per step of at least A(b) seconds, per instance
    steps = cfg.server.build_step_times()
    b = np.arange(1, 513)
    best = max(k / steps.decode_line(int(k), 0)[0] for k in b)
    per_step = 1 if spec is None else spec.num_draft_tokens + 1
    bound = best * per_step * len(res.instances)
    assert r.output_len.sum() / res.duration <= bound * (1 + 1e-9)


workloads = st.integers(1, 20).flatmap(lambda n: st.tuples(
    st.lists(st.integers(1, 400), min_size=n, max_size=n),
    st.lists(st.integers(1, 50), min_size=n, max_size=n),
    st.lists(st.integers(0, 1), min_size=n, max_size=n)))
policies = st.one_of(
    st.builds(sim.ContinuousBatching, max_batch_size=st.integers(1, 16)),
    st.integers(1, 16).flatmap(lambda b: st.builds(sim.ChunkedPrefill, token_budget=st.integers(b, 600),
                                                   max_batch_size=st.just(b))),
    st.builds(sim.StaticBatching, batch_size=st.integers(1, 6),
              timeout=st.sampled_from([0.0, 0.02, math.inf])),
    st.builds(sim.Disaggregated, link_bandwidth=st.sampled_from([1e9, 1e11]),
              prefill_instances=st.integers(1, 2), decode_instances=st.integers(1, 2),
              max_batch_size=st.integers(1, 16), transfer_latency=st.sampled_from([0.0, 1e-3])))
arrival_kinds = st.sampled_from(["poisson", "burst", "closed"])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workloads, policies, arrival_kinds, st.floats(1.0, 300.0), st.sampled_from([None, 0, 1200]),
       st.sampled_from([None, (2, 0.0), (3, 0.6), (4, 1.0)]), st.integers(0, 3))
def test_invariants_hold_for_random_systems(lengths, policy, kind, rate, kv, spec, seed):
    prompts, outputs, prio = lengths
    work = Workload.from_lists(prompts, outputs, prio)
    need = int(max(p + o for p, o in zip(prompts, outputs)))
    server = SERVER if kv is None else sim.Server(LLAMA, H100, kv_capacity_tokens=max(need, kv))
    arrivals = {"poisson": Poisson(rate), "burst": Timestamps(np.zeros(len(work))),
                "closed": ClosedLoop(3, think_time=1 / rate, think_time_distribution="exponential")}[kind]
    speculative = None
    if spec is not None and not isinstance(policy, sim.StaticBatching):
        speculative = sim.Speculative(num_draft_tokens=spec[0], acceptance_rate=spec[1],
                                      draft_step_time=5e-4)
    res = run(work, arrivals, policy, server=server, seed=seed, speculative=speculative)
    cap = getattr(policy, "max_batch_size", getattr(policy, "batch_size", None))
    check_invariants(res, None if isinstance(policy, sim.Disaggregated) else cap, speculative)


def test_simulations_are_deterministic_given_the_seed():
    work = chat_workload(300, seed=3).with_priorities(0.5, seed=3)
    spec = sim.Speculative(num_draft_tokens=3, acceptance_rate=0.7, draft_step_time=1e-3)
    a = run(work, Poisson(10.0), seed=7, speculative=spec).records
    b = run(work, Poisson(10.0), seed=7, speculative=spec).records
    c = run(work, Poisson(10.0), seed=8, speculative=spec).records
    for name in ("arrival", "scheduled", "first_token", "finish"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    assert not np.array_equal(a.arrival, c.arrival)


# ---- policies behave as they should ---------------------------------------------------------------------
def test_chunked_prefill_removes_the_decode_stalls_of_prefill_first():
    work = Workload.fixed(600, 2000, 100)
    first = run(work, Poisson(5.0), sim.ContinuousBatching()).metrics()
    chunked = run(work, Poisson(5.0), sim.ChunkedPrefill(token_budget=512)).metrics()
    stall = prefill_time(LLAMA, H100, 2000)
    assert first.itl.p99 > stall                  # a prompt's prefill pauses every running decode
    assert chunked.itl.p99 < 0.5 * first.itl.p99  # Sarathi-Serve: stall-free batching
    # 512-token chunks are compute-bound (above the ridge, ~295): chunking costs a prompt little
    assert chunked.ttft.mean == pytest.approx(first.ttft.mean, rel=0.05)
    # below the ridge every chunk pays a whole weight read (all but the embedding table and the LM head,
    # which only the final chunk runs): a 2000-token prompt in 128-token chunks takes 16 of them
    small = run(work, Poisson(5.0), sim.ChunkedPrefill(token_budget=128, max_batch_size=64)).records
    reads = math.ceil(2000 / 128) * (weight_bytes(LLAMA) - 2 * V8 * D8 * 2) / H100_BW
    assert small.ttft.min() >= reads > 1.5 * first.ttft.mean    # the price of too small a budget


def test_static_batches_start_together_and_nothing_joins_them():
    res = run(Workload.fixed(200, 300, 30), Poisson(50.0), sim.StaticBatching(batch_size=8, timeout=0.05))
    r = res.records
    starts, sizes = np.unique(r.scheduled, return_counts=True)
    assert sizes.max() <= 8 and sizes.min() >= 1 and sizes.mean() > 4
    for t in starts:
        members = r.scheduled == t
        assert np.ptp(r.first_token[members]) == 0       # one prefill for the whole batch
    # the next batch starts only after the previous one has finished
    ends = [r.finish[r.scheduled == t].max() for t in starts]
    assert (starts[1:] >= np.array(ends[:-1])).all()


def test_interactive_requests_overtake_batch_requests():
    work = Workload.fixed(1500, 1000, 50).with_priorities(0.5, seed=1)
    res = run(work, Poisson(40.0), sim.ContinuousBatching(max_batch_size=8))
    r = res.records
    assert r.queue_delay[r.priority == 0].mean() < 0.5 * r.queue_delay[r.priority == 1].mean()
    assert res.slo_attainment(ttft_slo=0.5, priority=0) > res.slo_attainment(ttft_slo=0.5, priority=1)
    interactive, batch = res.metrics(priority=0), res.metrics(priority=1)
    assert interactive.n_requests + batch.n_requests == 1500
    assert interactive.ttft.mean < batch.ttft.mean
    assert interactive.itl.count + batch.itl.count == res.metrics().itl.count == 1500 * 49


def test_kv_limit_preempts_and_recomputes():
    work = Workload.fixed(60, 500, 400)
    server = sim.Server(LLAMA, H100, kv_capacity_tokens=4000)
    res = run(work, Timestamps(np.zeros(60)), sim.ContinuousBatching(), server=server)
    assert res.records.preemptions.sum() > 0
    check_invariants(res)
    roomy = run(work, Timestamps(np.zeros(60)), sim.ContinuousBatching())
    assert roomy.records.preemptions.sum() == 0
    assert res.duration > roomy.duration


def test_disaggregation_transfers_the_kv_cache():
    bw, latency = 10e9, 2e-3
    res = run(Workload.fixed(50, 1000, 20), Poisson(2.0),
              sim.Disaggregated(link_bandwidth=bw, transfer_latency=latency))
    transfer = latency + 1000 * kv_bytes_per_token(LLAMA) / bw
    for i in range(50):
        t = res.token_times(i)
        assert t[1] - t[0] >= transfer + decode_step_time(LLAMA, H100, 1, 1001) * (1 - 1e-9)
    # at this light load a request's TTFT is its prefill alone
    r = res.records
    assert np.median(r.ttft) == pytest.approx(prefill_time(LLAMA, H100, 1000), rel=1e-9)


def test_closed_loop_obeys_the_response_time_law():
    clients, think = 8, 0.2
    res = run(chat_workload(800, seed=2), ClosedLoop(clients, think_time=think))
    r = res.records
    # N = X (R + Z) for every closed system (the interactive response time law)
    x = len(r) / res.duration
    assert x * (r.e2e.mean() + think) == pytest.approx(clients, rel=0.03)
    # never more than N requests inside
    t = np.sort(r.arrival)
    inside = (r.arrival[None, :] <= t[:, None]) & (r.finish[None, :] > t[:, None])
    assert inside.sum(axis=1).max() <= clients


def test_speculative_decoding_yields_its_expected_tokens_per_step():
    out, gamma, alpha = 2001, 4, 0.7
    spec = sim.Speculative(num_draft_tokens=gamma, acceptance_rate=alpha, draft_step_time=1e-3)
    res = run(Workload.fixed(40, 100, out), Poisson(20.0), speculative=spec)
    steps = np.array([res.token_times(i).size - 1 for i in range(40)])
    per_step = (out - 1) / steps
    mean, se = float(per_step.mean()), float(per_step.std(ddof=1) / math.sqrt(40))
    expected = sim.expected_tokens_per_step(alpha, gamma)          # 2.77 tokens
    # the last step of a request is cut to the tokens it needs: at most gamma tokens lost
    assert abs(mean - expected) < 4 * se + expected * gamma / (out - 1)
    for a, tokens in [(0.0, 1), (1.0, gamma + 1)]:
        s = sim.Speculative(num_draft_tokens=gamma, acceptance_rate=a, draft_step_time=1e-3)
        res = run(Workload.fixed(3, 100, 101), Poisson(20.0), speculative=s)
        assert res.token_times(0).size - 1 == math.ceil(100 / tokens)


def test_speculative_decoding_cuts_tpot_of_a_big_model():
    server = sim.Server("Llama-3.1-70B", H100, tensor_parallel=4)
    spec = sim.Speculative(num_draft_tokens=4, acceptance_rate=0.8, draft_model=LLAMA)
    work = Workload.fixed(100, 500, 200)
    plain = run(work, Poisson(1.0), server=server).metrics(itl=False)
    fast = run(work, Poisson(1.0), server=server, speculative=spec).metrics(itl=False)
    assert fast.tpot.mean < 0.7 * plain.tpot.mean


# ---- metrics, SLOs and goodput --------------------------------------------------------------------------
@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(0, 10), min_size=1, max_size=20), st.data())
def test_weighted_percentile_is_percentile_of_repeated_values(values, data):
    weights = data.draw(st.lists(st.integers(0, 5), min_size=len(values), max_size=len(values)))
    if sum(weights) == 0:
        weights[0] = 1
    q = [0, 1, 25, 50, 90, 99, 100]
    np.testing.assert_allclose(weighted_percentile(values, weights, q),
                               np.percentile(np.repeat(values, weights), q), rtol=1e-12, atol=1e-12)


def test_metrics_follow_vllm_definitions():
    work = Workload.from_lists([100] * 50 + [200] * 50, [1] * 10 + [64] * 90)
    res = run(work, Poisson(30.0))
    r, m = res.records, res.metrics()
    assert np.isnan(r.tpot[:10]).all()
    np.testing.assert_allclose(r.tpot[10:], (r.e2e[10:] - r.ttft[10:]) / 63)
    assert m.tpot.count == 90 and m.tpot.mean == pytest.approx(np.mean(r.tpot[10:]))
    assert m.ttft.p99 == pytest.approx(np.percentile(r.ttft, 99))
    assert m.output_throughput == pytest.approx(r.output_len.sum() / (r.finish.max() - r.arrival.min()))
    assert m.request_throughput == pytest.approx(100 / res.duration)
    # goodput (vLLM): SLO-meeting requests per second; one-token outputs meet any TPOT SLO
    ok = (r.ttft <= 0.02) & (np.nan_to_num(r.tpot) <= 0.006)
    assert res.goodput(ttft_slo=0.02, tpot_slo=0.006) == pytest.approx(ok.sum() / res.duration)
    assert res.slo_attainment(tpot_slo=1e-9) == pytest.approx(0.1)     # only the 10 one-token requests
    assert "TTFT" in str(m) and "P99" in str(m)
    assert res.records[3].ttft == pytest.approx(r.ttft[3])


@pytest.mark.parametrize("policy", [sim.ContinuousBatching(), sim.ChunkedPrefill(token_budget=512)])
def test_sliding_window_caps_the_kv_reads_of_decode_in_the_simulator(policy):
    # Mistral-7B attends to its last 4096 keys: a request served alone decodes at contexts 3901 ... 4499;
    # every step past the window reads 4096 keys, so those steps all take the same time
    mistral = sim.Server("Mistral-7B", H100)
    res = run(Workload.fixed(1, 3900, 600), Timestamps([0.0]), policy, server=mistral)
    gaps = np.diff(res.token_times(0))                   # gap k - 1: the decode step at context 3900 + k
    contexts = 3900 + np.arange(1, 600)
    beyond, within = gaps[contexts >= 4096], gaps[contexts < 4096]
    assert beyond.size == 404 and within.size == 195
    np.testing.assert_allclose(beyond, beyond[0], rtol=1e-12)
    np.testing.assert_allclose(beyond, decode_step_time("Mistral-7B", H100, 1, 4096), rtol=1e-9)
    assert np.all(np.diff(within) > 0)                   # within the window each key more costs more
    # memory-bound: one more key is one more KV entry, 2 x 32 layers x 8 KV heads x 128 x 2 bytes, read at W
    per_key = 2 * 32 * 8 * 128 * 2 / H100_BW
    np.testing.assert_allclose(np.diff(within), per_key, rtol=1e-6)
    np.testing.assert_allclose(beyond[0] - within[0], (4096 - 3901) * per_key, rtol=1e-6)


@pytest.mark.parametrize("ttft_slo, tpot_slo, e2el_slo", [(0.014, None, None), (None, 0.0075, None),
                                                          (0.025, 0.0085, None), (None, None, 0.3),
                                                          (0.03, 1e-9, 2.0)])
def test_simulated_goodput_and_attainment_are_the_slo_modules_on_the_records(ttft_slo, tpot_slo, e2el_slo):
    # one-token requests (TPOT NaN in the records) meet any TPOT target, as vLLM counts them
    work = Workload.from_lists([100, 800, 1500, 300] * 30, [1, 64, 32, 1] * 30).with_priorities(0.5, seed=1)
    res = run(work, Poisson(40.0))
    r = res.records
    assert np.isnan(r.tpot[r.output_len == 1]).all()
    targets = dict(ttft_slo=ttft_slo, tpot_slo=tpot_slo, e2el_slo=e2el_slo)
    latencies = dict(ttft=r.ttft, tpot=r.tpot, e2el=r.e2e)
    assert res.goodput(**targets) == slo.request_goodput(duration=res.duration, **latencies, **targets)
    assert res.slo_attainment(**targets) == slo.slo_attainment(**latencies, **targets)
    np.testing.assert_array_equal(res.meets_slo(**targets), slo.meets_slo(**latencies, **targets))
    # and by hand: a request is good when every given target holds; a missing TPOT counts as met
    ok = np.ones(len(r), dtype=bool)
    if ttft_slo is not None:
        ok &= r.ttft <= ttft_slo
    if tpot_slo is not None:
        ok &= np.nan_to_num(r.tpot, nan=0.0) <= tpot_slo
    if e2el_slo is not None:
        ok &= r.e2e <= e2el_slo
    assert 0 < ok.sum() < len(r)                          # the targets separate the requests
    assert res.goodput(**targets) == pytest.approx(ok.sum() / (r.finish.max() - r.arrival.min()), rel=1e-12)
    assert res.slo_attainment(**targets) == pytest.approx(ok.mean(), rel=1e-12)
    if tpot_slo == 1e-9:
        assert ok[r.output_len > 1].sum() == 0 and ok[r.output_len == 1].any()
    for c in (0, 1):
        assert res.slo_attainment(**targets, priority=c) == pytest.approx(ok[r.priority == c].mean(), rel=1e-12)


def test_distserve_goodput_search_brackets_the_attainment_target():
    server = sim.Server(step_times=sim.LinearStepTimes(step_time=1e-3, per_token=1e-5))
    config = sim.SimulationConfig(server, Workload.fixed(400, 200, 20), Poisson(10.0),
                                  sim.ContinuousBatching(max_batch_size=1))
    rate = sim.max_goodput_rate(config, ttft_slo=0.1, tpot_slo=0.01, attainment=0.9, rel_tol=0.02)
    at = sim.slo_attainment_curve(config, [rate, rate * 1.05], ttft_slo=0.1, tpot_slo=0.01)
    assert at[0] >= 0.9 > at[1]
    # with a batch cap of 1 the same arrivals squeezed in time only wait longer: monotone
    curve = sim.slo_attainment_curve(config, [5.0, 10.0, 20.0, 40.0, 80.0], ttft_slo=0.05)
    assert (np.diff(curve) <= 0).all() and curve[0] > curve[-1]
    with pytest.raises(ValueError, match="SLO"):
        sim.max_goodput_rate(config)


def test_timeseries_tracks_batch_and_kv():
    res = run(Workload.fixed(300, 1000, 100), Poisson(20.0), sim.ContinuousBatching(max_batch_size=16))
    ts = res.timeseries()
    assert set(ts) == {"time", "running", "decoding", "prefill_tokens", "kv_tokens", "kv_occupancy"}
    assert (np.diff(ts["time"]) >= 0).all()
    assert ts["running"].max() == 16 and (ts["decoding"] <= ts["running"]).all()
    assert 0 < ts["kv_occupancy"].max() <= 1
    assert res.timeseries("server")["time"].size == ts["time"].size


def test_progress_goes_to_stderr_only_when_asked(capsys):
    config = sim.SimulationConfig(SERVER, Workload.fixed(200, 100, 10), Poisson(10.0))
    sim.simulate(config, 0)
    assert capsys.readouterr().err == ""
    sim.simulate(config, 0, progress=True)
    captured = capsys.readouterr()
    assert "100 %" in captured.err and captured.out == ""


def test_bench_script_runs():
    bench = load_tool("bench_simulator")
    assert bench.main(["--requests", "300", "--repeat", "1", "--no-calibration"]) == 0


def test_bench_simulates_a_whole_day_of_an_autoscaled_fleet(capsys):
    bench = load_tool("bench_simulator")
    assert bench.main(["--day", "--day-replicas", "2"]) == 0      # about 0.7 M requests
    out = capsys.readouterr().out
    assert "a day of a 2-replica fleet" in out and "at most 2 serving" in out


# ---- bad input --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("make, match", [
    (lambda: Poisson(-1.0), "rate"),
    (lambda: Poisson(0.0), "rate"),
    (lambda: Workload.from_lists([], []), "empty"),
    (lambda: Workload.from_lists([10, 20], [5]), "output_lens"),
    (lambda: sim.ChunkedPrefill(token_budget=0), "token_budget"),
    (lambda: sim.ChunkedPrefill(token_budget=64, max_batch_size=256), "token_budget"),
    (lambda: sim.ContinuousBatching(max_batch_size=0), "max_batch_size"),
    (lambda: sim.StaticBatching(timeout=-1.0), "timeout"),
    (lambda: sim.Disaggregated(link_bandwidth=0.0), "link_bandwidth"),
    (lambda: sim.Speculative(acceptance_rate=1.5, draft_step_time=1e-3), "acceptance_rate"),
    (lambda: sim.Speculative(num_draft_tokens=0, draft_step_time=1e-3), "num_draft_tokens"),
    (lambda: sim.Speculative(), "draft_model"),
    (lambda: sim.Server(), "model"),
    (lambda: sim.Server(LLAMA, H100, step_times=sim.LinearStepTimes(1e-3)), "either"),
    (lambda: sim.Server(LLAMA, H100, kv_capacity_tokens=0), "kv_capacity_tokens"),
    (lambda: ClosedLoop(clients=0), "clients"),
    (lambda: Timestamps([1.0, 0.5]), "non-decreasing"),
    (lambda: sim.LinearStepTimes(step_time=0.0), "step_time"),
])
def test_bad_configuration_is_refused_by_name(make, match):
    with pytest.raises(ValueError, match=match):
        make()


@pytest.mark.parametrize("kwargs, match", [
    (dict(workload=Workload.fixed(3, 130_000, 5000)), "maximum context"),
    (dict(server=sim.Server(LLAMA, H100, kv_capacity_tokens=1000)), "KV-cache capacity"),
    (dict(policy=sim.ContinuousBatching(max_prefill_tokens=256)), "max_prefill_tokens"),
    (dict(arrivals=Timestamps([0.0, 1.0])), "timestamps"),
    (dict(policy=sim.StaticBatching(), speculative=sim.Speculative(draft_step_time=1e-3)), "Static"),
    (dict(arrivals="poisson"), "arrivals"),
])
def test_bad_simulations_are_refused_with_a_reason(kwargs, match):
    base = dict(server=SERVER, workload=Workload.fixed(3, 1000, 500), arrivals=Poisson(1.0))
    base.update(kwargs)
    with pytest.raises(ValueError, match=match):
        sim.simulate(sim.SimulationConfig(**base), 0)


def test_bad_calls_are_refused():
    res = run(Workload.fixed(3, 100, 5), Poisson(1.0))
    with pytest.raises(ValueError, match="request_id"):
        res.token_times(3)
    with pytest.raises(ValueError, match="instance"):
        res.timeseries("decode-0")
    with pytest.raises(ValueError, match="seed"):
        sim.simulate(res.config, seed=-1)
    with pytest.raises(ValueError, match="config"):
        sim.simulate("fast", 0)
    with pytest.raises(ValueError, match="ttft_slo must be > 0, got -1"):
        res.slo_attainment(ttft_slo=-1.0)
    with pytest.raises(ValueError, match="at least one target"):
        res.goodput()
    with pytest.raises(TypeError, match="ttft"):          # the old keyword names are gone
        res.slo_attainment(ttft=0.5)


def test_a_server_builds_its_step_times_once_and_reuse_changes_no_result():
    import dataclasses

    server = sim.Server(LLAMA, H100, mfu=0.6, mbu=0.65)
    assert server.build_step_times() is server.build_step_times()
    other = dataclasses.replace(server, mfu=0.5)           # another server: its own tables
    assert other.build_step_times() is not server.build_step_times()
    assert other.build_step_times().linear_per_token > server.build_step_times().linear_per_token
    assert server == sim.Server(LLAMA, H100, mfu=0.6, mbu=0.65)      # the cache is not a field
    assert "_built_step_times" not in repr(server)
    work = Workload.from_lists([2000] * 40, [50] * 40)      # padded static batches grow the tables
    cfg = sim.SimulationConfig(server, work, Poisson(4.0), sim.StaticBatching(batch_size=32, timeout=0.2))
    first = sim.simulate(cfg, seed=3)
    again = sim.simulate(cfg, seed=3)                        # the grown tables are reused
    fresh = sim.simulate(dataclasses.replace(cfg, server=sim.Server(LLAMA, H100, mfu=0.6, mbu=0.65)), seed=3)
    for run in (again, fresh):
        np.testing.assert_array_equal(run.records.first_token, first.records.first_token)
        np.testing.assert_array_equal(run.records.finish, first.records.finish)


# ---- gamma (bursty) arrivals, as vllm bench serve --burstiness draws them ------------------------------------
def test_poisson_arrivals_keep_their_random_stream():
    # burstiness = 1 (the default) draws exactly the exponential gaps the simulator always drew,
    # so every stored chapter output that uses Poisson(rate) is unchanged
    work = Workload.fixed(500, 16, 4)
    server = sim.Server(step_times=sim.LinearStepTimes(1e-3))
    res = run(work, Poisson(50.0), server=server, seed=7)
    stream = np.random.default_rng(np.random.SeedSequence(7).spawn(3)[0])
    np.testing.assert_array_equal(res.records.arrival, np.cumsum(stream.exponential(1 / 50.0, 500)))
    same = run(work, Poisson(50.0, burstiness=1.0), server=server, seed=7)
    np.testing.assert_array_equal(same.records.arrival, res.records.arrival)


@pytest.mark.parametrize("burstiness", [0.25, 1.0, 4.0])
def test_gamma_arrivals_have_the_rate_and_the_variability_asked_for(burstiness):
    # vLLM: gaps ~ gamma(shape = burstiness, scale = 1 / (rate x burstiness)): mean 1/rate, c_a^2 = 1/k
    rate, n = 20.0, 20_000
    server = sim.Server(step_times=sim.LinearStepTimes(1e-4))
    work = Workload.fixed(n, 1, 1)
    means, cv2s = [], []
    for seed in range(5):
        gaps = np.diff(run(work, Poisson(rate, burstiness=burstiness), server=server, seed=seed).records.arrival,
                       prepend=0.0)
        means.append(gaps.mean())
        cv2s.append(gaps.var() / gaps.mean() ** 2)
    t = 2.7764451051977987                            # 95 %, 4 degrees of freedom
    for values, expected in [(means, 1 / rate), (cv2s, 1 / burstiness)]:
        v = np.asarray(values)
        half = t * v.std(ddof=1) / math.sqrt(v.size)
        assert abs(v.mean() - expected) <= half, (values, expected)
    assert Poisson(rate, burstiness=burstiness).arrival_cv2 == pytest.approx(1 / burstiness)
    if burstiness != 1.0:                             # and it is not the Poisson stream
        assert abs(np.mean(cv2s) - 1.0) > 5 * np.std(cv2s)


@pytest.mark.parametrize("bad", [0.0, -1.0, "bursty", True, None, math.inf])
def test_bad_burstiness_is_refused(bad):
    with pytest.raises(ValueError, match="burstiness"):
        Poisson(10.0, burstiness=bad)


def test_sliding_window_caps_the_verification_steps_of_speculative_decoding():
    # past Mistral-7B's 4096-key window a verification step reads and attends to 4096 keys whatever the
    # context: two prompts beyond the window decode at the same speed (all drafts accepted: 4 tokens a step)
    mistral = sim.Server("Mistral-7B", H100)
    spec = sim.Speculative(num_draft_tokens=3, acceptance_rate=1.0, draft_step_time=1e-3)
    gaps = {}
    for prompt in (6000, 9000):
        res = run(Workload.fixed(1, prompt, 401), Timestamps([0.0]), server=mistral, speculative=spec)
        gaps[prompt] = np.diff(np.unique(res.token_times(0)))
    np.testing.assert_allclose(gaps[6000], gaps[9000], rtol=1e-12)
    within = run(Workload.fixed(1, 2000, 401), Timestamps([0.0]), server=mistral, speculative=spec)
    assert np.diff(np.unique(within.token_times(0))).mean() < gaps[6000].mean()   # fewer keys: faster
