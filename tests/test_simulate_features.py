"""The simulator's KV-manager options, pipeline parallelism, speculation by load, and arrivals.

* Prefix caching: a cached prefix is skipped exactly (the step model's cached_tokens), only
  whole blocks are cached and one prompt token is always computed, a prefix being computed is
  not shared yet, unused prefixes are evicted least recently used first; TTFT and throughput gain.
* Block granularity: the decode step at which the cache fills is the brute-force one.
* vLLM's watermark: without it, admitting until the cache is full and preempting at the next
  step restarts requests several times as often; admissions leave the watermark free.
* Priority preemption: a waiting interactive request displaces a running batch one (exact
  timings on a toy server); off by default.
* Pipeline parallelism: P = 1 is the single stage; m <= P micro-batches released together leave
  the stages idle (P - 1) / (m + P - 1) of the time (GPipe's bubble); a lone request pays the
  whole pipe plus P - 1 transfers; a full pipe runs P micro-batches at once.
* Speculative decoding switched by load: never switching is fixed speculation exactly; switches
  happen at the thresholds, at step boundaries, with every token still produced; over a day of
  changing load the switch beats both always-on and always-off (every seed).
* Gamma arrivals keep their burstiness through the goodput search and rate sweeps; the
  piecewise-Poisson day has the arrivals its rate integrates to.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from servingmath import memory, simulate as sim, speculative
from servingmath.decode import decode_step_time
from servingmath.prefill import prefill_time
from servingmath.scheduling_plots import rate_sweep
from servingmath.workloads import LogNormal, PiecewisePoisson, Poisson, Timestamps, Workload, chat_workload

from conftest import load_tool

H100 = "H100-SXM5-80GB"
LLAMA = "Llama-3.1-8B"
SERVER = sim.Server(LLAMA, H100)
TOY = sim.Server(step_times=sim.LinearStepTimes(0.01))


def run(work, arrivals, policy=None, server=SERVER, seed=0, **kw):
    return sim.simulate(sim.SimulationConfig(server, work, arrivals, policy or sim.ContinuousBatching(), **kw), seed)


def prefixed(prompts, outputs, ids, lens, prio=None):
    return Workload.from_lists(prompts, outputs, prio).with_prefixes(ids, lens)


# ---- prefix caching -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("policy", [sim.ContinuousBatching(), sim.ChunkedPrefill(token_budget=2048)])
def test_a_cached_prefix_is_skipped_exactly(policy):
    work = prefixed([1536, 1536], [2, 2], [7, 7], [1024, 1024])
    res = run(work, Timestamps([0.0, 1.0]), policy)
    r = res.records
    assert r.ttft[0] == pytest.approx(prefill_time(LLAMA, H100, 1536), rel=1e-12)                  # a miss
    assert r.ttft[1] == pytest.approx(prefill_time(LLAMA, H100, 512, cached_len=1024), rel=1e-12)  # a hit
    assert r.cached_tokens.tolist() == [0, 1024]
    assert res.prefix_hit_rate() == 0.5
    assert res.prefix_hit_rate("tokens") == pytest.approx(1024 / 3072)
    off = run(work, Timestamps([0.0, 1.0]), sim.ContinuousBatching(prefix_caching=False))
    assert off.records.ttft[1] == pytest.approx(r.ttft[0]) and np.isnan(off.prefix_hit_rate())


def test_only_whole_blocks_are_cached_and_one_prompt_token_is_computed():
    work = prefixed([1500, 1500, 1024, 1024], [2] * 4, [1, 1, 2, 2], [1000, 1000, 1024, 1024])
    for bs, first, whole in [(1, 1000, 1023), (16, 992, 1008)]:
        res = run(work, Timestamps([0.0, 1.0, 2.0, 3.0]), sim.ContinuousBatching(block_size=bs))
        assert res.records.cached_tokens.tolist() == [0, first, 0, whole]
        assert res.records.ttft[3] == pytest.approx(prefill_time(LLAMA, H100, 1024 - whole, cached_len=whole),
                                                    rel=1e-12)


def test_a_prefix_being_computed_is_not_shared_yet():
    work = prefixed([800] * 3, [3] * 3, [4] * 3, [600] * 3)
    res = run(work, Timestamps([0.0, 0.0, 1.0]))      # the first two share one prefill: both compute it
    assert res.records.cached_tokens.tolist() == [0, 0, 600]


def test_unused_prefixes_are_evicted_least_recently_used_first():
    # room for two cached prefixes of 1500 tokens beside one running request
    server = sim.Server(LLAMA, H100, kv_capacity_tokens=4000)
    ids = [0, 1, 0, 2, 1, 2]                          # A, B, A (hit), C (evicts B: A was used later), B, C
    work = prefixed([1600] * 6, [2] * 6, ids, [1500] * 6)
    res = run(work, Timestamps(np.arange(6.0)), server=server)
    assert res.records.cached_tokens.tolist() == [0, 0, 1500, 0, 0, 1500]
    assert (res.timeseries()["kv_tokens"] <= 4000).all()


def test_prefix_caching_cuts_ttft_and_raises_throughput():
    work = chat_workload(3000, seed=1).with_shared_prefixes(20, 2000, zipf=1.0, seed=3)
    on = run(work, Poisson(12.0), sim.ChunkedPrefill())
    off = run(work, Poisson(12.0), sim.ChunkedPrefill(prefix_caching=False))
    m_on, m_off = on.metrics(itl=False), off.metrics(itl=False)
    assert m_on.ttft.p50 < 0.3 * m_off.ttft.p50
    assert m_on.output_throughput > m_off.output_throughput
    assert on.prefix_hit_rate() > 1 - 40 / 3000        # misses: each prefix's first request(s)
    r = on.records
    assert on.prefix_hit_rate("tokens") >= r.cached_tokens.sum() / r.prompt_len.sum() - 1e-12


# ---- block granularity and the watermark ------------------------------------------------------------------------
@pytest.mark.parametrize("bs", [1, 16])
def test_the_cache_fills_at_the_brute_force_step(bs):
    prompts = np.array([100, 117, 250, 31, 64, 400, 199, 16])
    cap = 2600
    # after the prefill each sequence holds L + 1 tokens; step j makes it L + 1 + j
    held = lambda j: int(sum(-(-(p + 1 + j) // bs) * bs for p in prompts))
    k = 0
    while held(k + 1) <= cap:
        k += 1
    res = run(Workload.from_lists(prompts, [300] * 8), Timestamps(np.zeros(8)),
              sim.ContinuousBatching(block_size=bs), server=sim.Server(LLAMA, H100, kv_capacity_tokens=cap))
    victim = 7                                      # the most recently admitted
    gaps = np.diff(res.token_times(victim))
    assert res.records.preemptions[victim] >= 1
    assert int(np.argmax(gaps)) == k               # k decode steps, then evicted
    kv = res.timeseries()["kv_tokens"]
    assert (kv % bs == 0).all() and kv.max() <= cap


def test_without_the_watermark_a_full_cache_restarts_requests_several_times_as_often():
    server = sim.Server(LLAMA, H100, kv_capacity_tokens=100_000)
    restarts = {0.0: 0, 0.01: 0}
    for seed in range(3):
        work = Workload.sample(3000, LogNormal(600, 0.8, 16, 2048), LogNormal(500, 0.8, 8, 3000), seed=seed)
        for wm in restarts:
            res = run(work, Poisson(10.0), sim.ContinuousBatching(block_size=16, watermark=wm), server=server,
                      seed=seed)
            restarts[wm] += int(res.records.preemptions.sum())
            if wm:
                ts = res.timeseries()
                admitting = ts["prefill_tokens"] > 0
                assert (ts["kv_tokens"][admitting] <= 100_000 - int(0.01 * 100_000 / 16) * 16).all()
    assert restarts[0.01] > 0                       # the watermark does not forbid preemption...
    assert restarts[0.0] > 3 * restarts[0.01]       # ... but admit-then-evict thrashing is gone


# ---- priority preemption ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("policy_class", [sim.ContinuousBatching, sim.ChunkedPrefill])
def test_a_waiting_interactive_request_preempts_a_running_batch_one(policy_class):
    # two batch requests fill the batch of two; an interactive one arrives at 0.105 s
    work = Workload.from_lists([10, 10, 10], [100, 100, 5], [1, 1, 0])
    times = Timestamps([0.0, 0.0, 0.105])
    kw = dict(max_batch_size=2) if policy_class is sim.ContinuousBatching else dict(max_batch_size=2,
                                                                                    token_budget=64)
    waits = run(work, times, policy_class(**kw), server=TOY)
    preempts = run(work, times, policy_class(priority_preemption=True, **kw), server=TOY)
    assert waits.records.ttft[2] > 0.85             # until a batch request finishes (about 1 s)
    assert preempts.records.ttft[2] == pytest.approx(0.015, abs=1e-9)   # next step boundary 0.11, prefill 0.01
    assert preempts.records.preemptions.tolist() == [0, 1, 0]           # the most recently admitted
    assert waits.records.preemptions.sum() == 0


def test_priority_preemption_helps_the_interactive_tail_and_is_off_by_default():
    work = chat_workload(3000, seed=1).with_priorities(0.7, seed=2)
    plain = run(work, Poisson(14.0), sim.ContinuousBatching(max_batch_size=32))
    prio = run(work, Poisson(14.0), sim.ContinuousBatching(max_batch_size=32, priority_preemption=True))
    assert plain.records.preemptions.sum() == 0
    assert prio.records.preemptions[prio.records.priority == 0].sum() == 0
    assert prio.records.preemptions[prio.records.priority == 1].sum() > 0
    assert prio.metrics(priority=0, itl=False).ttft.p99 < 0.85 * plain.metrics(priority=0, itl=False).ttft.p99


# ---- pipeline parallelism --------------------------------------------------------------------------------------------------
def test_one_stage_is_the_single_stage_time():
    pipe = sim.pipeline.Pipeline(1, 4e-4, 0.0, 0.0)
    for t, s in [(0.0, 0.0123), (1.5, 0.004), (1.6, 1e-3)]:
        assert pipe.submit(t, s, 64) == pytest.approx(t + s, rel=1e-15, abs=1e-15)
    assert sim.Server(LLAMA, H100, pipeline_parallel=1) == SERVER


@pytest.mark.parametrize("P", [2, 4])
def test_micro_batches_released_together_see_gpipes_bubble(P):
    p = 0.01 / P                                     # a 10 ms iteration in P equal stages
    for m in range(1, P + 1):
        res = run(Workload.fixed(m, 10, 1), Timestamps(np.zeros(m)),
                  server=sim.Server(step_times=sim.LinearStepTimes(0.01), pipeline_parallel=P))
        np.testing.assert_allclose(np.sort(res.records.first_token), (np.arange(m) + P) * p, rtol=1e-12)
        bubble = 1 - res.stage_utilisation(0)
        np.testing.assert_allclose(bubble, (P - 1) / (m + P - 1), rtol=1e-12)


def test_a_lone_request_pays_the_whole_pipe_and_its_transfers():
    bw, latency = 50e9, 20e-6
    server = sim.Server("Llama-3.1-70B", H100, tensor_parallel=2, pipeline_parallel=2,
                        pipeline_link_bandwidth=bw, pipeline_link_latency=latency)
    res = run(Workload.fixed(1, 700, 20), Timestamps([0.0]), server=server)
    x = lambda tokens: latency + tokens * 8192 * 2 / bw             # one stage-to-stage transfer
    assert res.records.ttft[0] == pytest.approx(prefill_time("Llama-3.1-70B", H100, 700, tensor_parallel=2)
                                                + x(700), rel=1e-12)
    expected = [decode_step_time("Llama-3.1-70B", H100, 1, 700 + k, tensor_parallel=2) + x(1) for k in range(1, 20)]
    np.testing.assert_allclose(np.diff(res.token_times(0)), expected, rtol=1e-9)


@pytest.mark.parametrize("P", [2, 4])
def test_the_step_overhead_once_on_the_host_or_on_every_stage(P):
    t, o, x, tokens = 0.012, 0.004, 0.0005, 64                   # whole-model time, its overhead, one send
    host = sim.pipeline.Pipeline(P, o, x, 0.0)
    stage = sim.pipeline.Pipeline(P, o, x, 0.0, every_stage=True)
    # a lone iteration: o once + the P stage shares + P - 1 sends, or o on each of the P stages
    assert host.submit(0.0, t, tokens) == pytest.approx(t + (P - 1) * x, rel=1e-12)
    assert stage.submit(0.0, t, tokens) == pytest.approx(t + (P - 1) * (o + x), rel=1e-12)
    # the pipe full (many iterations ready at once): one leaves every busiest-stage time
    host, stage = sim.pipeline.Pipeline(P, o, x, 0.0), sim.pipeline.Pipeline(P, o, x, 0.0, every_stage=True)
    ends = {name: [pipe.submit(0.0, t, tokens) for _ in range(50)] for name, pipe in (("host", host),
                                                                                     ("stage", stage))}
    assert np.diff(ends["host"])[-1] == pytest.approx((t - o) / P + x, rel=1e-12)
    assert np.diff(ends["stage"])[-1] == pytest.approx(o + (t - o) / P + x, rel=1e-12)


def test_pipeline_kv_capacity_pools_the_stages_memory():
    dep = sim.Server("Llama-3.1-70B", H100, tensor_parallel=2).deployment
    usable = memory.usable_memory(H100)
    weights = memory.weight_bytes_per_gpu(dep.model, tensor_parallel=2)
    kv = memory.kv_bytes_per_token_per_gpu(dep.model, tensor_parallel=2)
    for P in (2, 4):
        server = sim.Server("Llama-3.1-70B", H100, tensor_parallel=2, pipeline_parallel=P)
        assert server.kv_capacity() == math.floor((P * usable - weights) / kv)
    res = run(Workload.fixed(4, 100, 5), Timestamps(np.zeros(4)),
              server=sim.Server("Llama-3.1-70B", H100, tensor_parallel=2, pipeline_parallel=4))
    assert res.kv_capacity(0) == math.floor((4 * usable - weights) / kv) // 4   # vLLM: blocks // P per engine


def test_a_full_pipeline_runs_p_micro_batches_at_once():
    work = Workload.fixed(800, 10, 50)
    rates = {}
    for P in (1, 4):
        res = run(work, Timestamps(np.zeros(800)), sim.ContinuousBatching(max_batch_size=25),
                  server=sim.Server(step_times=sim.LinearStepTimes(0.01), pipeline_parallel=P))
        rates[P] = res.metrics(itl=False).output_throughput
    assert rates[4] / rates[1] == pytest.approx(4.0, rel=0.03)


# ---- speculative decoding switched by load ------------------------------------------------------------------------------------
SPEC = sim.Speculative(num_draft_tokens=4, acceptance_rate=0.7, draft_step_time=1e-3)


def test_a_switch_that_never_switches_is_fixed_speculation():
    work = chat_workload(400, seed=2)
    for policy in (sim.ContinuousBatching(), sim.ChunkedPrefill()):
        fixed = run(work, Poisson(10.0), policy, speculative=SPEC, seed=3)
        never = run(work, Poisson(10.0), policy, speculative=sim.SpeculativeByLoad(SPEC, on_below=0, off_above=1e9),
                    seed=3)
        for name in ("scheduled", "first_token", "finish"):
            np.testing.assert_array_equal(getattr(fixed.records, name), getattr(never.records, name))
        assert never.speculation_switches() == []


@pytest.mark.parametrize("policy", [sim.ContinuousBatching(max_batch_size=64),
                                    sim.ChunkedPrefill(token_budget=256, max_batch_size=64)])
def test_speculation_switches_at_the_thresholds_and_every_token_comes_out(policy):
    outputs = 10 * np.arange(1, 21)                   # 20 requests that finish one by one
    work = Workload.from_lists([50] * 20, outputs)
    res = run(work, Timestamps(np.zeros(20)), policy, server=TOY,
              speculative=sim.SpeculativeByLoad(SPEC, on_below=5, off_above=10))
    switches = res.speculation_switches()
    assert [on for _, on in switches] == [False, True]
    t_off, t_on = switches[0][0], switches[1][0]
    r = res.records
    assert t_off <= r.first_token.max() + 0.02        # off as soon as the batch of 20 runs
    assert (r.finish <= t_on).sum() == 16             # back on when 4 remain (< 5), at that step
    for i in range(20):
        times = res.token_times(i)
        assert times[-1] == r.finish[i] and (np.diff(times) > 0).all()
        assert math.ceil((outputs[i] - 1) / 5) + 1 <= times.size <= outputs[i]
    tpot_before = r.tpot[r.finish < t_on].mean()
    assert tpot_before > 0                            # sanity: decoding happened


def test_hysteresis_switches_less_than_one_threshold():
    work = chat_workload(1500, seed=4)
    kw = dict(server=TOY)
    one = run(work, Poisson(6.0), speculative=sim.SpeculativeByLoad(SPEC, on_below=12, off_above=12), **kw)
    band = run(work, Poisson(6.0), speculative=sim.SpeculativeByLoad(SPEC, on_below=6, off_above=18), **kw)
    assert len(one.speculation_switches()) > 3 * max(1, len(band.speculation_switches()))


def test_over_a_day_of_changing_load_the_switch_beats_always_on_and_always_off():
    # chapter 12's day, simulated through its transitions: six blocks of Poisson traffic
    target, draft = LLAMA, "Llama-3.2-1B"
    spec = sim.Speculative(num_draft_tokens=4, acceptance_rate=0.7, draft_model=draft)
    b_e = speculative.break_even_batch_size(target, draft, H100, 256, 0.7, 4)
    switch = sim.SpeculativeByLoad(spec, on_below=0.8 * b_e, off_above=1.2 * b_e)
    rates, block = np.array([10, 6, 50, 100, 85, 30.0]), 10.0
    for seed in range(3):
        rng = np.random.default_rng(seed)
        times = np.concatenate([k * block + np.sort(rng.uniform(0, block, rng.poisson(r * block)))
                                for k, r in enumerate(rates)])
        work = Workload.fixed(times.size, 128, 256)
        tpot = {name: np.nanmean(run(work, Timestamps(times), sim.ContinuousBatching(max_batch_size=512),
                                     speculative=choice, seed=seed).records.tpot)
                for name, choice in [("off", None), ("on", spec), ("switch", switch)]}
        assert tpot["switch"] < tpot["off"] < tpot["on"], (seed, tpot)


# ---- arrivals -------------------------------------------------------------------------------------------------------------------
def test_gamma_arrivals_keep_their_burstiness_through_goodput_and_rate_sweeps():
    config = sim.SimulationConfig(TOY, Workload.fixed(600, 10, 5), Poisson(1.0, burstiness=0.25),
                                  sim.ContinuousBatching(max_batch_size=1))
    direct = run(Workload.fixed(600, 10, 5), Poisson(15.0, burstiness=0.25), sim.ContinuousBatching(max_batch_size=1),
                 server=TOY)
    poisson = run(Workload.fixed(600, 10, 5), Poisson(15.0), sim.ContinuousBatching(max_batch_size=1), server=TOY)
    curve = sim.slo_attainment_curve(config, [15.0], ttft_slo=0.2)
    assert curve[0] == direct.slo_attainment(ttft_slo=0.2) != poisson.slo_attainment(ttft_slo=0.2)
    sweep = rate_sweep(config, [15.0])
    np.testing.assert_array_equal(sweep.results[0].records.arrival, direct.records.arrival)
    gaps = np.diff(direct.records.arrival)
    assert gaps.var() / gaps.mean() ** 2 > 2.5       # c_a^2 = 1 / 0.25 = 4, not Poisson's 1
    bursty = sim.max_goodput_rate(config, ttft_slo=0.2, rel_tol=0.05)
    smooth = sim.max_goodput_rate(sim.SimulationConfig(TOY, Workload.fixed(600, 10, 5), Poisson(1.0),
                                                       sim.ContinuousBatching(max_batch_size=1)),
                                  ttft_slo=0.2, rel_tol=0.05)
    assert bursty < 0.9 * smooth


def test_a_piecewise_poisson_day_has_the_arrivals_its_rate_integrates_to():
    day = PiecewisePoisson(times=[0.0, 100.0, 300.0], rates=[5.0, 20.0, 2.0])
    counts = []
    for seed in range(5):
        t = run(Workload.fixed(4900, 1, 1), day, server=TOY, seed=seed).records.arrival
        counts.append(np.histogram(t, bins=[0, 100, 300, 500])[0])
    counts = np.array(counts)
    expected = [500, 4000, 400]
    for k in range(3):
        assert abs(counts[:, k].mean() - expected[k]) < 4 * math.sqrt(expected[k] / 5)
    assert day.expected_arrivals(500.0) == pytest.approx(4900.0)
    assert day.rate_at(150.0) == 20.0
    diurnal = PiecewisePoisson.diurnal(mean_rate=3.0, peak_to_trough=5.0, period=1000.0, steps=10)
    assert diurnal.expected_arrivals(1000.0) == pytest.approx(3000.0)
    assert diurnal.rates.argmax() in (4, 5) and diurnal.rates.argmin() in (0, 9)


@pytest.mark.parametrize("make, match", [
    (lambda: PiecewisePoisson(times=[1.0, 2.0], rates=[1.0, 1.0]), "start at 0"),
    (lambda: PiecewisePoisson(times=[0.0, 2.0], rates=[1.0, 0.0]), "rates"),
    (lambda: PiecewisePoisson(times=[0.0], rates=[1.0], burstiness=0.0), "burstiness"),
    (lambda: PiecewisePoisson.diurnal(mean_rate=1.0, peak_to_trough=0.5), "peak_to_trough"),
    (lambda: Workload.fixed(2, 10, 2).with_prefixes([0, 0], [5, 6]), "two lengths"),
    (lambda: Workload.fixed(2, 10, 2).with_prefixes([0, 1], [5, 11]), "prefix_lens"),
    (lambda: Workload.fixed(2, 10, 2).with_prefixes([-1, 1], [5, 5]), "no prefix"),
    (lambda: Workload.fixed(2, 10, 2).with_prefixes([-2, 1], [0, 5]), "prefix_ids"),
    (lambda: Workload(np.array([5]), np.array([5]), prefix_ids=np.array([0])), "both"),
    (lambda: Workload.fixed(2, 10, 2).with_shared_prefixes(2, 0), "prefix_len"),
    (lambda: Workload.fixed(2, 10, 2).with_shared_prefixes(2, 5, fraction=1.5), "fraction"),
    (lambda: sim.ContinuousBatching(block_size=0), "block_size"),
    (lambda: sim.ContinuousBatching(watermark=1.0), "watermark"),
    (lambda: sim.ChunkedPrefill(watermark=-0.1), "watermark"),
    (lambda: sim.ContinuousBatching(prefix_caching="yes"), "prefix_caching"),
    (lambda: sim.ChunkedPrefill(priority_preemption=1), "priority_preemption"),
    (lambda: sim.Server(LLAMA, H100, pipeline_parallel=0), "pipeline_parallel"),
    (lambda: sim.Server(LLAMA, H100, pipeline_parallel=2, pipeline_link_bandwidth=0.0), "pipeline_link_bandwidth"),
    (lambda: sim.SpeculativeByLoad(SPEC, on_below=10, off_above=5), "on_below"),
    (lambda: sim.SpeculativeByLoad(SPEC, on_below=1, off_above=5, signal="kv"), "signal"),
    (lambda: sim.SpeculativeByLoad("spec", on_below=1, off_above=5), "Speculative"),
    (lambda: sim.SimulationConfig(sim.Server(LLAMA, H100, pipeline_parallel=2), Workload.fixed(2, 5, 5),
                                  Poisson(1.0), sim.StaticBatching()), "pipeline_parallel"),
    (lambda: sim.SimulationConfig(SERVER, Workload.fixed(2, 5, 5), Poisson(1.0),
                                  sim.Disaggregated(link_bandwidth=1e9),
                                  speculative=sim.SpeculativeByLoad(SPEC, on_below=1, off_above=5)), "Disaggregated"),
])
def test_bad_options_are_refused_by_name(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_a_prompt_that_never_fits_beside_the_watermark_is_refused():
    server = sim.Server(LLAMA, H100, kv_capacity_tokens=1000)
    with pytest.raises(ValueError, match="watermark"):
        run(Workload.fixed(2, 990, 5), Poisson(1.0), sim.ContinuousBatching(watermark=0.05), server=server)


def test_bench_script_measures_a_fleet():
    bench = load_tool("bench_simulator")
    assert bench.main(["--requests", "400", "--repeat", "1", "--replicas", "1", "3", "--no-calibration"]) == 0


# ---- multi-step scheduling (vLLM 0.6 --num-scheduler-steps) ------------------------------------------------

def _multi_step_run(n, rate=6.0):
    from servingmath.workloads import Poisson, Workload
    cfg = sim.SimulationConfig(server=sim.Server("Llama-3.1-8B", "A100"),
                               workload=Workload.fixed(600, prompt_len=256, output_len=200),
                               arrivals=Poisson(rate=rate),
                               policy=sim.ContinuousBatching(max_batch_size=256, scheduler_steps=n))
    return sim.simulate(cfg, seed=0)


def test_multi_step_scheduling_admits_prompts_only_between_runs_of_n_decode_steps():
    r = _multi_step_run(10)
    seg, ts = r._seg(0), r.timeseries(0)
    prefills = ts["time"][ts["prefill_tokens"] > 0]
    between = [int(seg["k"][(seg["t0"] > a) & (seg["t0"] < b)].sum()) for a, b in zip(prefills[:-1], prefills[1:])]
    assert len(between) > 100
    assert all(k % 10 == 0 for k in between), sorted(set(k % 10 for k in between))
    # one step per decision: prompts join at the next step, and the gaps are not all multiples of 10
    plain = _multi_step_run(1)
    seg1, ts1 = plain._seg(0), plain.timeseries(0)
    p1 = ts1["time"][ts1["prefill_tokens"] > 0]
    gaps1 = [int(seg1["k"][(seg1["t0"] > a) & (seg1["t0"] < b)].sum()) for a, b in zip(p1[:-1], p1[1:])]
    assert any(k % 10 for k in gaps1)


def test_multi_step_scheduling_costs_ttft_about_half_a_run_and_no_throughput():
    one, ten = _multi_step_run(1).metrics(), _multi_step_run(10).metrics()
    run = 10 * one.tpot.mean                         # seconds of one run of ten decode steps
    extra = ten.ttft.mean - one.ttft.mean            # an arrival waits for the rest of the run
    assert 0.3 * run < extra < 0.6 * run, (extra, run)
    # the closed form: an arrival waits for the rest of the run, (n - 1) d / 2 more than for one step
    from servingmath.prefill import multistep_wait
    assert extra == pytest.approx(multistep_wait(one.itl.p50, 10), rel=0.15)
    assert ten.output_throughput == pytest.approx(one.output_throughput, rel=0.01)
    assert ten.tpot.mean == pytest.approx(one.tpot.mean, rel=0.05)


def test_multi_step_scheduling_refuses_what_it_does_not_model():
    with pytest.raises(ValueError, match="scheduler_steps"):
        sim.ContinuousBatching(scheduler_steps=0)
    with pytest.raises(ValueError, match="scheduler_steps = 4"):
        sim.ContinuousBatching(scheduler_steps=4, block_size=16)


# ---- a Poisson stream behind a client semaphore (vllm bench serve --request-rate R --max-concurrency N) -------------
def test_a_capped_stream_is_the_poisson_stream_when_the_cap_never_binds_and_never_exceeds_it():
    work = Workload.fixed(300, 512, 64)
    policy = sim.ChunkedPrefill(token_budget=8192, max_batch_size=256)
    free = run(work, Poisson(6.0), policy)
    loose = run(work, sim.CappedPoisson(6.0, 10_000), policy)
    np.testing.assert_array_equal(loose.records.ttft, free.records.ttft)
    np.testing.assert_array_equal(loose.records.e2e, free.records.e2e)
    cap = 3
    tight = run(work, sim.CappedPoisson(6.0, cap), policy)
    sent = tight.records.arrival
    done = sent + tight.records.e2e
    # at no time are more than `cap` requests in flight
    events = sorted([(t, 1) for t in sent] + [(t, -1) for t in done], key=lambda e: (e[0], e[1]))
    assert max(np.cumsum([d for _, d in events])) == cap
    # each request is sent at its due time, or when a slot freed: never before it is due
    stream = loose.records.arrival            # the uncapped run's arrivals are the due times
    assert np.all(sent >= stream - 1e-12)
    late = sent > stream + 1e-12
    assert late.any() and all(np.isclose(done, s).any() for s in sent[late])


def test_a_capped_stream_far_above_capacity_is_a_closed_loop_of_its_cap():
    work = Workload.fixed(400, 512, 128)
    policy = sim.ChunkedPrefill(token_budget=8192, max_batch_size=256)
    capped = run(work, sim.CappedPoisson(1000.0, 4), policy).metrics(itl=False)
    closed = run(work, sim.ClosedLoop(4), policy).metrics(itl=False)
    assert capped.output_throughput == pytest.approx(closed.output_throughput, rel=0.01)
    with pytest.raises(ValueError, match="max_concurrency"):
        sim.CappedPoisson(4.0, 0)
    with pytest.raises(ValueError, match="rate"):
        sim.CappedPoisson(-1.0, 4)
