"""Tests of servingmath.scheduling_plots: sweeps, two-class traffic, per-class summaries, probes, figures."""

from __future__ import annotations

import dataclasses
import math

import matplotlib.pyplot as plt
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from servingmath import scheduling_plots as sched
from servingmath import simulate as sim
from servingmath.plotting import RequestTrace
from servingmath.workloads import Workload

T_W, C_TOK = 0.007, 25e-6
TOY = sim.Server(step_times=sim.LinearStepTimes(step_time=T_W, per_token=C_TOK))
TEN_MS = sim.Server(step_times=sim.LinearStepTimes(step_time=0.01))


def _config(n=200, rate=1.0, policy=None):
    return sim.SimulationConfig(TEN_MS, Workload.fixed(n, 16, 8), sim.Poisson(rate),
                                policy or sim.ContinuousBatching())


# ---- rate_sweep ---------------------------------------------------------------------------------------
def test_sweep_of_a_constant_step_server_has_known_tpot():
    sweep = sched.rate_sweep(_config(), [0.5, 1.0], slos=[(0.1, 0.02)])
    np.testing.assert_allclose(sweep.tpot_p50, 0.01, rtol=1e-12)   # every step takes 10 ms
    np.testing.assert_allclose(sweep.ttft_p50, 0.01, rtol=1e-9)     # the median request waits for nothing
    assert sweep.attainment.shape == (1, 2) and sweep.goodput.shape == (1, 2)
    assert len(sweep.results) == 2


def test_sweep_per_gpu_runs_the_deployment_at_n_times_the_rate():
    config = _config(rate=1.0)
    two = sched.rate_sweep(config, [2.0], n_gpus=2, slos=[(0.5, 0.05)])
    direct = sim.simulate(dataclasses.replace(config, arrivals=sim.Poisson(4.0)), 0)
    np.testing.assert_array_equal(two.results[0].records.ttft, direct.records.ttft)
    assert math.isclose(two.throughput[0], len(direct.records) / direct.duration / 2)
    assert math.isclose(two.goodput[0, 0], direct.goodput(ttft_slo=0.5, tpot_slo=0.05) / 2)
    assert math.isclose(two.attainment[0, 0], direct.slo_attainment(ttft_slo=0.5, tpot_slo=0.05))


def test_sweep_percentiles_match_the_records_and_the_itl_values():
    sweep = sched.rate_sweep(_config(rate=20.0), [20.0])
    rec = sweep.results[0].records
    assert math.isclose(sweep.ttft_p99[0], float(np.percentile(rec.ttft, 99)))
    assert math.isclose(sweep.tpot_p50[0], float(np.nanpercentile(rec.tpot, 50)))
    values, weights = sweep.results[0].itl_values()
    assert math.isclose(sweep.itl_p99[0], float(np.percentile(np.repeat(values, weights), 99)))
    assert sweep.percentile("itl", 99) is sweep.itl_p99
    assert sweep.at(20.0) is sweep.results[0]


def test_latency_grows_with_the_load():
    sweep = sched.rate_sweep(_config(n=300), [1.0, 10.0, 40.0])
    assert np.all(np.diff(sweep.ttft_p99) >= 0)


@pytest.mark.parametrize("kwargs, match", [
    (dict(rates=[0.0]), "rates"), (dict(rates=[]), "rates"), (dict(rates=[1.0], n_gpus=0), "n_gpus"),
    (dict(rates=[1.0], slos=[(0.1,)]), "slos"), (dict(rates=[1.0], slos=[(0.1, -1.0)]), "slos"),
])
def test_sweep_rejects_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        sched.rate_sweep(_config(n=5), **kwargs)


def test_sweep_rejects_a_non_config_and_bad_lookups():
    with pytest.raises(ValueError, match="SimulationConfig"):
        sched.rate_sweep("config", [1.0])
    sweep = sched.rate_sweep(_config(n=20), [1.0])
    with pytest.raises(ValueError, match="metric"):
        sweep.percentile("e2e", 99)
    with pytest.raises(ValueError, match="q must be"):
        sweep.percentile("ttft", 95)
    with pytest.raises(ValueError, match="swept rates"):
        sweep.at(3.0)


# ---- two_class_traffic ------------------------------------------------------------------------------
def test_two_class_traffic_counts_order_and_window():
    work, arrivals, window = sched.two_class_traffic(200, 4.0, 12.0, seed=3)
    assert len(work) == len(arrivals.times) == 800
    assert (work.priorities == 0).sum() == 200 and (work.priorities == 1).sum() == 600
    assert np.all(np.diff(arrivals.times) >= 0)
    assert window == pytest.approx(arrivals.times[work.priorities == 0].max())
    assert 200 / window == pytest.approx(4.0, rel=0.2)        # Poisson at the given rate
    again = sched.two_class_traffic(200, 4.0, 12.0, seed=3)
    np.testing.assert_array_equal(again[1].times, arrivals.times)
    other = sched.two_class_traffic(200, 4.0, 12.0, seed=4)
    assert not np.array_equal(other[1].times, arrivals.times)


def test_two_class_traffic_without_batch_and_bad_input():
    work, _, _ = sched.two_class_traffic(10, 4.0, 0.0)
    assert (work.priorities == 0).all() and len(work) == 10
    with pytest.raises(ValueError, match="interactive_rate"):
        sched.two_class_traffic(10, 0.0, 1.0)
    with pytest.raises(ValueError, match="n_interactive"):
        sched.two_class_traffic(0, 1.0, 1.0)


# ---- long_prompt_probe: the chapter's formulas ------------------------------------------------------
@settings(max_examples=25)
@given(prompt_len=st.integers(1, 3000), batch=st.integers(1, 64), budget=st.integers(128, 1024))
def test_probe_matches_the_chunked_and_prefill_first_formulas(prompt_len, batch, budget):
    pf = sched.long_prompt_probe(TOY, sim.ContinuousBatching(), prompt_len, batch)
    assert pf["service"] == pytest.approx(T_W + C_TOK * prompt_len, rel=1e-9)
    assert pf["stall"] == pytest.approx(2 * T_W + C_TOK * (prompt_len + batch + 1), rel=1e-9)
    ch = sched.long_prompt_probe(TOY, sim.ChunkedPrefill(budget, max_batch_size=128), prompt_len, batch)
    k = math.ceil(prompt_len / (budget - batch))
    assert ch["service"] == pytest.approx(k * (T_W + C_TOK * batch) + C_TOK * prompt_len, rel=1e-9)
    assert ch["stall"] == pytest.approx(T_W + C_TOK * (batch + min(prompt_len, budget - batch)), rel=1e-9)
    assert ch["stall"] < pf["stall"]                       # chunking always shortens the stall


def test_probe_without_decoders_and_with_too_short_decodes():
    alone = sched.long_prompt_probe(TOY, sim.ContinuousBatching(), 1000, 0)
    assert alone["service"] == pytest.approx(T_W + C_TOK * 1000) and math.isnan(alone["stall"])
    with pytest.raises(ValueError, match="decode_output_len"):
        sched.long_prompt_probe(TOY, sim.ContinuousBatching(), 1000, 4, decode_output_len=3)
    with pytest.raises(ValueError, match="prompt_len"):
        sched.long_prompt_probe(TOY, sim.ContinuousBatching(), 0, 4)


# ---- per-request summaries -----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def small_run():
    work = Workload.from_lists([100, 200, 300], [5, 3, 4], priorities=[0, 1, 0])
    arrivals = sim.Timestamps([0.0, 0.0, 1.0])
    return sim.simulate(sim.SimulationConfig(TEN_MS, work, arrivals, sim.ContinuousBatching()), 0)


def test_latency_summary_by_ids_or_mask(small_run):
    by_ids = sched.latency_summary(small_run, [0, 2])
    by_mask = sched.latency_summary(small_run, small_run.records.priority == 0)
    assert by_ids == by_mask
    gaps = np.concatenate([np.diff(small_run.token_times(i)) for i in (0, 2)])
    assert by_ids["itl_max"] == pytest.approx(gaps.max())
    assert by_ids["ttft_p50"] == pytest.approx(np.median(small_run.records.ttft[[0, 2]]))
    whole = sched.latency_summary(small_run)
    assert whole["ttft_mean"] == pytest.approx(small_run.records.ttft.mean())


@pytest.mark.parametrize("ids, match", [([], "no request"), ([5], r"\[0, 3\)"), (np.ones(2, bool), "mask")])
def test_latency_summary_rejects_bad_ids(small_run, ids, match):
    with pytest.raises(ValueError, match=match):
        sched.latency_summary(small_run, ids)


def test_tokens_before_counts_emitted_tokens(small_run):
    total = int(small_run.records.output_len.sum())
    assert sched.tokens_before(small_run, None, 1e9) == total
    assert sched.tokens_before(small_run, None, 0.0) == 0
    first = small_run.records.first_token[2]
    assert sched.tokens_before(small_run, [2], first) == 1
    with pytest.raises(ValueError, match="time"):
        sched.tokens_before(small_run, None, -1.0)


def test_request_traces_carry_the_records(small_run):
    traces = sched.request_traces(small_run, [0, 2], names=["a", "b"])
    assert all(isinstance(t, RequestTrace) for t in traces)
    assert traces[1].arrival == 1.0 and traces[1].prefill_start == small_run.records.scheduled[2]
    assert traces[1].token_times == small_run.token_times(2).tolist()
    assert sched.request_traces(small_run, [1])[0].name == "#1 (200 in)"
    with pytest.raises(ValueError, match="names"):
        sched.request_traces(small_run, [0, 1], names=["only one"])


# ---- figures -------------------------------------------------------------------------------------------
def test_plot_percentiles_draws_two_lines_per_sweep():
    sweep = sched.rate_sweep(_config(n=50), [1.0, 2.0])
    fig, ax = plt.subplots()
    sched.plot_percentiles(ax, {"a": sweep, "b": sweep}, "ttft")
    assert len(ax.lines) == 4 and ax.get_yscale() == "log"
    assert ax.yaxis.get_major_formatter()(100.0, 0) == "100"
    ax2 = sched.plot_percentiles(fig.add_subplot(2, 1, 2), {"a": sweep}, "tpot", log=False)
    assert ax2.get_yscale() == "linear"
    with pytest.raises(ValueError, match="sweeps"):
        sched.plot_percentiles(ax, {}, "ttft")
    plt.close(fig)


def test_plot_cdf_reaches_one_and_marks_percentiles():
    fig, ax = plt.subplots()
    sched.plot_cdf(ax, [0.010, 0.020, 0.030, 0.040], label="x")
    step = ax.lines[0]
    assert step.get_ydata()[-1] == 1.0 and step.get_xdata()[0] == pytest.approx(10.0)
    assert len(ax.lines) == 3                                # the CDF and two percentile dots
    with pytest.raises(ValueError, match="values"):
        sched.plot_cdf(ax, [-1.0])
    plt.close(fig)


# ---- several seeds -------------------------------------------------------------------------------------
def test_seed_interval_is_students_t_over_the_runs():
    values = np.array([10.0, 12.0, 11.0, 9.0, 13.0])
    mean, half = sched.seed_interval(values)
    assert mean == pytest.approx(11.0)
    assert half == pytest.approx(2.776 * values.std(ddof=1) / math.sqrt(5))
    # two seeds: t = 12.706; arrays: one interval per column
    m2, h2 = sched.seed_interval(np.array([[1.0, 5.0], [3.0, 5.0]]))
    np.testing.assert_allclose(m2, [2.0, 5.0])
    np.testing.assert_allclose(h2, [12.706 * math.sqrt(2) / math.sqrt(2), 0.0])
    # many seeds: the normal 1.96
    big = np.arange(100.0)
    assert sched.seed_interval(big)[1] == pytest.approx(1.96 * big.std(ddof=1) / 10)


@pytest.mark.parametrize("values", [[1.0], 3.0, np.zeros((1, 4))])
def test_seed_interval_needs_two_runs(values):
    with pytest.raises(ValueError, match="at least 2 runs"):
        sched.seed_interval(values)


def test_rate_sweeps_give_each_seed_its_own_requests_and_arrivals():
    config = _config(n=80)
    sweeps = sched.rate_sweeps(config, [4.0], seeds=[0, 1, 2],
                               workload=lambda s: Workload.fixed(80 + 10 * s, 16, 8))
    assert [len(s.results[0].records) for s in sweeps] == [80, 90, 100]
    # the same workload for every seed: only the arrivals differ, so the runs differ
    same = sched.rate_sweeps(config, [4.0], seeds=[0, 1])
    assert same[0].results[0].records.arrival[-1] != same[1].results[0].records.arrival[-1]
    assert sched.rate_sweep(config, [4.0], seed=1).ttft_mean[0] == same[1].ttft_mean[0]


def test_rate_sweeps_reject_bad_input():
    with pytest.raises(ValueError, match="at least one seed"):
        sched.rate_sweeps(_config(), [1.0], seeds=[])
    with pytest.raises(ValueError, match="workload must be a function"):
        sched.rate_sweeps(_config(), [1.0], seeds=[0], workload=Workload.fixed(10, 16, 8))


def test_plot_percentiles_of_several_seeds_draws_the_mean_and_a_band():
    sweeps = sched.rate_sweeps(_config(n=60), [1.0, 8.0], seeds=[0, 1, 2])
    fig, ax = plt.subplots()
    sched.plot_percentiles(ax, {"toy": sweeps}, "ttft")
    means = np.mean([s.ttft_p99 for s in sweeps], axis=0) * 1e3
    p99_line = [line for line in ax.get_lines() if line.get_label() == "toy P99"][0]
    np.testing.assert_allclose(p99_line.get_ydata(), means)
    assert len(ax.collections) == 2        # one band per percentile
    plt.close(fig)
