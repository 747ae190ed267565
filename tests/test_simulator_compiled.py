"""The compiled event loop (servingmath.simulate.compiled) against the reference loop, bit for bit.

The compiled loop transcribes the reference's paths for plain replicas (continuous batching or
chunked prefill, no KV options, no speculation, no sliding window): one server, the replicas of a
decoupled fleet, and a least-loaded fleet. For each configuration both loops run from the same
seed and every output must be identical: the per-request records, the decode segments and time
series of every instance, the token stints (so every ITL). Each case also checks which loop ran:
the compiled one where it applies (else the comparison would test nothing), the reference where
it does not or where a replica would preempt.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from servingmath import simulate as sim
from servingmath.settings import REALISTIC
from servingmath.simulate import compiled
from servingmath.simulate.engine import Engine
from servingmath.simulate.results import SimulationResult
from servingmath.workloads import ClosedLoop, LogNormal, PiecewisePoisson, Poisson, Timestamps, Workload

pytestmark = pytest.mark.skipif(not compiled.available(), reason="numba is not installed")

L8, H100 = "Llama-3.1-8B", "H100"
SRV = sim.Server(L8, H100)
SMALL_KV = sim.Server(L8, H100, kv_capacity_tokens=20_000)
TOY = sim.Server(step_times=sim.LinearStepTimes(0.01, 1e-5, 1e-7))
FIXED = Workload.fixed(1500, 512, 128)
MIXED = Workload.sample(1500, LogNormal(600, 0.8, 16, 2048), LogNormal(250, 0.6, 8, 1024), seed=1)
PRIO = MIXED.with_priorities(0.5, seed=2)
CB = sim.ContinuousBatching(max_batch_size=64)
CH = sim.ChunkedPrefill(token_budget=512, max_batch_size=64)
WHOLE = sim.ChunkedPrefill(token_budget=1024, max_batch_size=64, chunk_prompts=False)
SC, FC, R = sim.SimulationConfig, sim.FleetConfig, sim.Replica


def _fleet(policy, router, n=4, rate=40.0, work=MIXED, server=SRV):
    return FC(replicas=[R(server, policy)] * n, router=router, workload=work, arrivals=Poisson(rate))


# (configuration, instances the compiled loop must simulate)
CASES = {
    "continuous": (SC(SRV, FIXED, Poisson(30.0), CB), 1),
    "continuous-mixed": (SC(SRV, MIXED, Poisson(12.0), CB), 1),
    "chunked": (SC(SRV, MIXED, Poisson(12.0), CH), 1),
    "chunked-whole-prompts": (SC(SRV, MIXED, Poisson(12.0), WHOLE), 1),
    "priorities-continuous": (SC(SRV, PRIO, Poisson(14.0), CB), 1),
    "priorities-chunked": (SC(SRV, PRIO, Poisson(14.0), CH), 1),
    "overload": (SC(SRV, MIXED, Poisson(60.0), sim.ContinuousBatching(max_batch_size=16)), 1),
    "bursty": (SC(SRV, FIXED, Poisson(30.0, burstiness=0.3), CB), 1),
    "piecewise": (SC(SRV, FIXED, PiecewisePoisson([0.0, 20.0, 40.0], [10.0, 60.0, 20.0]), CB), 1),
    "timestamps-ties": (SC(TOY, Workload.fixed(300, 10, 20), Timestamps(np.repeat(np.arange(60.0), 5)),
                           sim.ContinuousBatching(max_batch_size=8)), 1),
    "roofline-overlap": (SC(sim.Server(L8, H100, overlap="roofline"), MIXED, Poisson(12.0), CB), 1),
    "additive-overlap": (SC(sim.Server(L8, H100, overlap="additive"), MIXED, Poisson(12.0), CH), 1),
    "moe-tables": (SC(sim.Server("Mixtral-8x7B", H100, tensor_parallel=2), MIXED, Poisson(8.0), CH), 1),
    "nccl-tables": (SC(sim.Server("Llama-3.1-70B", H100, tensor_parallel=4, **REALISTIC), MIXED,
                       Poisson(6.0), CB), 1),
    "fleet-random": (_fleet(CB, sim.Random()), 4),
    "fleet-round-robin": (_fleet(CH, sim.RoundRobin()), 4),
    "fleet-least-tokens": (_fleet(CB, sim.LeastLoaded()), 4),
    "fleet-least-requests": (_fleet(CH, sim.LeastLoaded(measure="requests"), work=PRIO), 4),
    "fleet-least-whole": (_fleet(WHOLE, sim.LeastLoaded()), 4),
    "fleet-heterogeneous": (FC(replicas=[R(SRV, CB), R(sim.Server(L8, "A100"), CH)], router=sim.LeastLoaded(),
                               workload=MIXED, arrivals=Poisson(20.0)), 2),
    # the reference loop: a replica that preempts, options the compiled loop does not transcribe
    "preempts": (SC(SMALL_KV, MIXED, Poisson(10.0), sim.ContinuousBatching()), 0),
    "fleet-preempts": (_fleet(sim.ContinuousBatching(), sim.LeastLoaded(), n=3, rate=45.0, server=SMALL_KV), 0),
    "blocks": (SC(SRV, MIXED, Poisson(10.0), sim.ContinuousBatching(block_size=16)), 0),
    "window": (SC(sim.Server("Mistral-7B", H100), Workload.fixed(200, 3500, 1200), Poisson(2.0), CB), 0),
    "closed-loop": (SC(SRV, MIXED, ClosedLoop(clients=16, think_time=0.5), CB), 0),
    "static": (SC(SRV, FIXED, Poisson(30.0), sim.StaticBatching(batch_size=32, timeout=0.05)), 0),
    "speculative": (SC(SRV, MIXED, Poisson(8.0), CB,
                       speculative=sim.Speculative(num_draft_tokens=4, acceptance_rate=0.7,
                                                   draft_step_time=1e-3)), 0),
    "multi-step": (SC(SRV, MIXED, Poisson(12.0), sim.ContinuousBatching(scheduler_steps=8)), 0),
    "fleet-central-queue": (_fleet(CB, sim.CentralQueue(), n=3), 0),
    "fleet-prefix-affinity": (_fleet(CB, sim.PrefixAffinity(), n=3), 0),
    # autoscaled fleets: the replicas interact (one loop), the decisions are worked out beforehand
    "fleet-scheduled-scaling": (FC(replicas=[R(SRV, CB)] * 3, router=sim.LeastLoaded(), workload=MIXED,
                                   arrivals=Poisson(30.0),
                                   autoscaler=sim.ScheduledScaling([0.0, 10.0, 25.0, 40.0], [1, 3, 2, 3],
                                                                   warmup=2.0)), 3),
    "fleet-rate-scaling": (FC(replicas=[R(SRV, CH)] * 4, router=sim.LeastLoaded(measure="requests"), workload=MIXED,
                              arrivals=PiecewisePoisson([0.0, 15.0, 30.0], [10.0, 60.0, 15.0]),
                              autoscaler=sim.RateScaling(rate_per_replica=15.0, interval=5.0, headroom=1,
                                                         warmup=3.0)), 4),
    "fleet-rate-scaling-random": (FC(replicas=[R(SRV, CB)] * 4, router=sim.Random(), workload=MIXED,
                                     arrivals=PiecewisePoisson([0.0, 15.0, 30.0], [10.0, 60.0, 15.0]),
                                     autoscaler=sim.RateScaling(rate_per_replica=15.0, interval=4.0,
                                                                window=8.0, warmup=0.0)), 4),
    "fleet-scaling-round-robin": (FC(replicas=[R(SRV, CB)] * 3, router=sim.RoundRobin(), workload=MIXED,
                                     arrivals=Poisson(30.0),
                                     autoscaler=sim.ScheduledScaling([0.0, 20.0], [2, 1], warmup=1.0)), 3),
}


def _run(config, seed, use_compiled):
    engine = Engine(config, seed, use_compiled=use_compiled).run()
    return engine, SimulationResult(config, seed, engine)


def _differences(a, b):
    """The outputs in which two results differ (empty: identical, NaN where NaN)."""
    out = []
    for name in ("arrival", "scheduled", "first_token", "finish", "preemptions", "replica", "prompt_len",
                 "output_len", "priority"):
        x, y = getattr(a.records, name), getattr(b.records, name)
        if (x is None) != (y is None) or (x is not None and not np.array_equal(x, y, equal_nan=True)):
            out.append(name)
    logs = [(a._seg(i), b._seg(i)) for i in range(len(a.instances))] + [
        (a._ser(i), b._ser(i)) for i in range(len(a.instances))]
    for i, (sa, sb) in enumerate(logs):
        out += [f"log {i} {key}" for key in sa if not np.array_equal(sa[key], sb[key], equal_nan=True)]
    out += [name for name in ("_st_inst", "_st_g0", "_st_n") if not np.array_equal(getattr(a, name), getattr(b, name))]
    if a._extra != b._extra:
        out.append("stints after preemptions")
    if a._scale_log != b._scale_log:
        out.append("scale log")
    return out


@pytest.mark.parametrize("name", list(CASES))
def test_the_compiled_loop_gives_the_reference_results_bit_for_bit(name):
    config, compiled_instances = CASES[name]
    ref_engine, ref = _run(config, 3, False)
    engine, new = _run(config, 3, True)
    assert ref_engine.compiled_instances == 0
    assert engine.compiled_instances == compiled_instances
    assert _differences(ref, new) == []
    m_ref, m_new = ref.metrics(), new.metrics()
    assert m_ref == m_new


def test_the_comparison_sees_a_difference():
    """The check above can fail: a result from another seed, or with one step time changed, differs."""
    config = CASES["chunked"][0]
    _, a = _run(config, 3, True)
    _, b = _run(config, 4, True)
    assert "arrival" in _differences(a, b)
    slower = SC(sim.Server(L8, H100, step_overhead=1e-4), MIXED, Poisson(12.0), CH)
    _, c = _run(slower, 3, True)
    found = _differences(a, c)
    assert "first_token" in found and "finish" in found and "arrival" not in found


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(1, 120), prompt=st.integers(1, 900), out=st.integers(1, 300),
       rate=st.floats(0.5, 80.0), batch=st.integers(1, 48), budget_extra=st.integers(0, 600),
       chunked=st.sampled_from(["continuous", "chunked", "whole"]), classes=st.booleans(),
       kv=st.sampled_from([None, 12_000, 40_000]), replicas=st.integers(1, 3),
       router=st.sampled_from(["random", "round-robin", "tokens", "requests"]), seed=st.integers(0, 10))
def test_random_configurations_agree(n, prompt, out, rate, batch, budget_extra, chunked, classes, kv, replicas,
                                     router, seed):
    work = Workload.sample(n, LogNormal(prompt, 0.7, 1, 2 * prompt + 8), LogNormal(out, 0.7, 1, 2 * out + 8),
                           seed=seed)
    if classes:
        work = work.with_priorities(0.4, seed=seed)
    if chunked == "continuous":
        policy = sim.ContinuousBatching(max_batch_size=batch)
    else:
        policy = sim.ChunkedPrefill(token_budget=max(batch, 64) + budget_extra, max_batch_size=batch,
                                    chunk_prompts=chunked == "chunked")
    need = int((work.prompt_lens + work.output_lens).max())
    server = SRV if kv is None else sim.Server(L8, H100, kv_capacity_tokens=max(kv, need))
    if replicas == 1:
        config = SC(server, work, Poisson(rate), policy)
    else:
        chosen = {"random": sim.Random(), "round-robin": sim.RoundRobin(), "tokens": sim.LeastLoaded(),
                  "requests": sim.LeastLoaded(measure="requests")}[router]
        config = FC(replicas=[R(server, policy)] * replicas, router=chosen, workload=work,
                    arrivals=Poisson(rate * replicas))
    _, ref = _run(config, seed, False)
    _, new = _run(config, seed, True)
    assert _differences(ref, new) == []


def test_switched_off_by_the_environment(monkeypatch):
    monkeypatch.setenv("SERVINGMATH_COMPILED", "0")
    assert not compiled.available()
    engine = Engine(CASES["continuous"][0], 0).run()
    assert engine.compiled_instances == 0 and engine.n_done == len(FIXED)
    monkeypatch.setenv("SERVINGMATH_COMPILED", "1")
    assert compiled.available()


def test_simulate_uses_it_and_workers_keep_the_result():
    config = _fleet(CB, sim.Random(), n=3, rate=30.0)
    one = sim.simulate(config, 1)
    two = sim.simulate(config, 1, workers=2)
    assert _differences(one, two) == []
    assert one.records.replica.tolist() == two.records.replica.tolist()
    assert set(one.records.replica.tolist()) == {0, 1, 2}


def test_a_numba_failure_falls_back_to_the_reference_loop(monkeypatch):
    """numba broken on a reader's machine: a warning, then the reference loop, the same results."""
    from numba.core.errors import TypingError

    def broken(*args):
        raise TypingError("a compile that fails here")

    config = CASES["chunked"][0]
    _, ref = _run(config, 3, False)
    monkeypatch.setattr(compiled, "_run", broken)
    monkeypatch.setattr(compiled, "_BROKEN", [])
    with pytest.warns(RuntimeWarning, match="reference loop"):
        engine, new = _run(config, 3, True)
    assert engine.compiled_instances == 0 and not compiled.available()
    assert _differences(ref, new) == []
