"""The protocol-aware all-reduce (NCCL's tuner): known values from NCCL's tuning.cc, the protocol
switch points, monotonicity and concavity, the deployment option, the consumers of a non-affine
communication time (step model, simulator, TPOT bound, throughput ceiling), bad input.

Source of the constants: NVIDIA/nccl src/graph/tuning.cc at commit
56a0c2299d0fda19b12e8a6b8a39b48d6054d22c (NCCL 2.29.7-1): baseLatencies (Ring: LL 6.6, LL128 14.0,
Simple 8.4 µs), hwLatencies[NVLINK][Ring] (0.6, 1.9, 3.4 µs per step), LL's busBw * .5 capped at
llMaxBws (Hopper, one node: 141.0 GB/s), LL128's busBw * 0.92; latency = base + 2 (N - 1) hw,
time = latency + bytes x 2 (N - 1) / N / busBw.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, strategies as st

from servingmath import decode, parallelism, settings, slo
from servingmath import simulate as sim
from servingmath.deployment import Deployment
from servingmath.models import get_model
from servingmath.sharding import (ALLREDUCE_PROTOCOLS, NCCL_LL_BANDWIDTH_CAP, NCCL_RING_ALLREDUCE,
                                  NCCL_RING_PROTOCOLS, AllReduce, allreduce_time, nccl_allreduce_time,
                                  nccl_protocol_crossover)
from servingmath.step import Iteration

US = 1e-6
LINK = 450e9                       # NVLink 4, one way
SIMPLE_BUS = 0.8 * LINK            # NCCL's 12 channels x 30 GB/s on 8 x H100
AUTO = AllReduce(protocol="auto", link_efficiency=0.8)

# tuning.cc, written out here rather than read from the library's table
BASE = {"LL": 6.6, "LL128": 14.0, "Simple": 8.4}
HOP = {"LL": 0.6, "LL128": 1.9, "Simple": 3.4}
BUS = {"LL": min(0.5 * SIMPLE_BUS, 141.0e9), "LL128": 0.92 * SIMPLE_BUS, "Simple": SIMPLE_BUS}


def by_hand(protocol, m, n):
    return (BASE[protocol] + 2 * (n - 1) * HOP[protocol]) * US + 2 * (n - 1) / n * m / BUS[protocol]


# ---------------------------------------------------------------- known values

@pytest.mark.parametrize("n, expected", [(2, (7.8, 17.8, 15.2)), (4, (10.2, 25.4, 28.8)), (8, (15.0, 40.6, 56.0))])
def test_zero_byte_latencies_are_tuning_cc_base_plus_2_n_minus_1_hops(n, expected):
    got = [nccl_allreduce_time(0, n, LINK, protocol=p) / US for p in ("LL", "LL128", "Simple")]
    assert got == pytest.approx(expected)


def test_bus_bandwidths_on_8_h100_are_141_331_and_360_gb_per_s():
    m = 1e9                         # large: the latency is a rounding error of the slope
    for p, bus in [("LL", 141.0e9), ("LL128", 331.2e9), ("Simple", 360e9)]:
        slope = (nccl_allreduce_time(2 * m, 8, LINK, protocol=p, link_efficiency=0.8)
                 - nccl_allreduce_time(m, 8, LINK, protocol=p, link_efficiency=0.8)) / m
        assert slope == pytest.approx(2 * 7 / 8 / bus)


def test_the_ll_cap_binds_on_hopper_and_is_141_over_450():
    assert NCCL_LL_BANDWIDTH_CAP * LINK == pytest.approx(141.0e9)
    # without the cap LL would move half of Simple's bus bandwidth, 180 GB/s
    uncapped = nccl_allreduce_time(1e8, 8, LINK, protocol="LL", link_efficiency=0.8, ll_cap=1.0)
    assert uncapped == pytest.approx((15.0 * US) + 1.75 * 1e8 / 180e9)


def test_amperes_ll_cap_can_be_given():
    # NCCL's Ampere llMaxBw is 87.7 GB/s on NVLink 3 (300 GB/s one way)
    t = nccl_allreduce_time(1e8, 8, 300e9, protocol="LL", link_efficiency=0.8, ll_cap=87.7 / 300)
    assert t == pytest.approx(15.0 * US + 1.75 * 1e8 / 87.7e9)


def test_every_protocol_matches_the_formula_by_hand():
    for p in ("LL", "LL128", "Simple"):
        for n in (2, 4, 8):
            for m in (0.0, 16e3, 1e6, 64e6):
                assert nccl_allreduce_time(m, n, LINK, protocol=p, link_efficiency=0.8) == \
                    pytest.approx(by_hand(p, m, n))


def test_auto_is_the_fastest_of_the_three():
    m = np.geomspace(1, 1e9, 200)
    for n in (2, 4, 8):
        best = np.min([by_hand(p, m, n) for p in ("LL", "LL128", "Simple")], axis=0)
        assert np.allclose(AUTO.time(m, n, LINK), best, rtol=1e-12)


def test_the_book_preset_is_auto_at_80_percent_of_the_link():
    assert NCCL_RING_ALLREDUCE == {"allreduce_protocol": "auto", "link_efficiency": 0.8}
    dep = Deployment.build("Llama-3.1-70B", "H100", tensor_parallel=8, **NCCL_RING_ALLREDUCE)
    assert dep.allreduce.protocol == "auto" and dep.allreduce.latency == 0.0


def test_the_old_pair_ll_latency_with_simples_bandwidth_is_a_lower_bound():
    # the book's first realistic all-reduce: LL's latencies and 80 % of the link, which NCCL never pairs
    m = np.geomspace(1, 1e9, 100)
    old = allreduce_time(m, 8, SIMPLE_BUS, latency=0.6e-6, base_latency=6.6e-6)
    new = AUTO.time(m, 8, LINK)
    assert np.all(new >= old * (1 - 1e-12))
    assert new[-1] / old[-1] > 1.0 and AUTO.time(0, 8, LINK) == pytest.approx(old[0], rel=1e-6)


# ---------------------------------------------------------------- switch points

def test_crossovers_on_8_h100_are_where_the_chosen_protocol_changes():
    ll_128 = (40.6 - 15.0) * US / (1.75 * (1 / BUS["LL"] - 1 / BUS["LL128"]))
    ll128_simple = (56.0 - 40.6) * US / (1.75 * (1 / BUS["LL128"] - 1 / BUS["Simple"]))
    assert nccl_protocol_crossover(8, LINK, link_efficiency=0.8) == pytest.approx(ll_128)
    assert nccl_protocol_crossover(8, LINK, first="LL128", second="Simple", link_efficiency=0.8) == \
        pytest.approx(ll128_simple)
    assert 3.5e6 < ll_128 < 3.7e6 and 36e6 < ll128_simple < 37e6
    for m, expected in [(ll_128 * 0.99, "LL"), (ll_128 * 1.01, "LL128"), (ll128_simple * 0.99, "LL128"),
                        (ll128_simple * 1.01, "Simple")]:
        assert AUTO.chosen_protocol(m, 8, LINK) == expected


def test_on_two_gpus_ll128_is_never_chosen():
    # N = 2: Simple's latency (15.2 µs) is below LL128's (17.8 µs) and its bandwidth above
    assert nccl_protocol_crossover(2, LINK, first="LL128", second="Simple", link_efficiency=0.8) == 0.0
    m = np.geomspace(1, 1e10, 400)
    chosen = AUTO.chosen_protocol(m, 2, LINK)
    assert set(chosen) == {"LL", "Simple"}
    switch = nccl_protocol_crossover(2, LINK, first="LL", second="Simple", link_efficiency=0.8)
    assert np.all(chosen[m < switch * 0.999] == "LL") and np.all(chosen[m > switch * 1.001] == "Simple")


def test_crossover_is_infinite_when_the_second_protocol_never_wins():
    # LL moves fewer bytes per second than LL128 and Simple: past some size it is never the faster
    assert np.isinf(nccl_protocol_crossover(8, LINK, first="LL128", second="LL", link_efficiency=0.8))
    assert np.isinf(nccl_protocol_crossover(8, LINK, first="Simple", second="LL", ll_cap=1.0))
    # and the reverse pair does cross, at the size where LL stops winning
    assert np.isfinite(nccl_protocol_crossover(8, LINK, first="LL", second="Simple", link_efficiency=0.8))


def test_a_decode_step_of_llama_70b_on_tp8_uses_ll_up_to_about_219_sequences():
    d = get_model("Llama-3.1-70B").hidden_size
    switch = nccl_protocol_crossover(8, LINK, link_efficiency=0.8) / (d * 2)
    assert 215 < switch < 225
    assert AUTO.chosen_protocol(128 * d * 2, 8, LINK) == "LL"
    assert AUTO.chosen_protocol(512 * d * 2, 8, LINK) == "LL128"


# ---------------------------------------------------------------- properties

@given(st.floats(0, 1e10), st.floats(0, 1e10), st.integers(1, 64))
def test_auto_grows_with_the_message(a, b, n):
    lo, hi = sorted((a, b))
    assert AUTO.time(lo, n, LINK) <= AUTO.time(hi, n, LINK) * (1 + 1e-12)


@given(st.floats(0, 1e10), st.integers(1, 63))
def test_auto_grows_with_the_ring(m, n):
    assert AUTO.time(m, n, LINK) <= AUTO.time(m, n + 1, LINK) * (1 + 1e-12)


@given(st.floats(0, 1e10), st.floats(0, 1e10), st.integers(2, 64))
def test_auto_is_concave_in_the_message(a, b, n):
    mid = AUTO.time((a + b) / 2, n, LINK)
    assert mid >= (AUTO.time(a, n, LINK) + AUTO.time(b, n, LINK)) / 2 * (1 - 1e-12)


@given(st.floats(0, 1e10), st.integers(1, 64), st.sampled_from(["LL", "LL128", "Simple"]))
def test_auto_never_exceeds_one_protocol(m, n, p):
    assert AUTO.time(m, n, LINK) <= AllReduce(protocol=p, link_efficiency=0.8).time(m, n, LINK) * (1 + 1e-12)


def test_one_gpu_needs_no_call():
    assert AUTO.time(1e9, 1, LINK) == 0.0
    assert AllReduce(protocol="Simple").alltoall_time(1e9, 1, LINK) == 0.0


def test_arrays_broadcast_and_a_scalar_gives_a_float():
    t = AUTO.time(np.array([1e3, 1e6, 1e8])[:, None], np.array([2, 8]), LINK)
    assert t.shape == (3, 2)
    assert isinstance(AUTO.time(1e6, 8, LINK), float)
    assert AUTO.chosen_protocol(np.array([1e3, 1e8]), 8, LINK).tolist() == ["LL", "Simple"]


def test_ring_factor_applies_to_every_protocol():
    a = AllReduce(protocol="Simple", ring_factor=False)
    assert a.time(1e9, 8, LINK) == pytest.approx(56.0 * US + 2 * 1e9 / LINK)


def test_fixed_protocols_are_the_affine_pieces():
    pieces = AUTO.fixed_protocols()
    assert [p.protocol for p in pieces] == ["LL", "LL128", "Simple"]
    assert all(p.is_affine for p in pieces) and not AUTO.is_affine and AllReduce().is_affine
    assert AllReduce(latency=1e-6).fixed_protocols()[0].latency == 1e-6
    assert AllReduce().chosen_protocol(1e6, 8, LINK) == "ring"


def test_alltoall_with_protocols_is_the_pairwise_exchange_with_their_constants():
    a = AllReduce(protocol="LL128", link_efficiency=0.8)
    assert a.alltoall_time(8e6, 8, LINK) == pytest.approx((14.0 + 7 * 1.9) * US + 7 / 8 * 8e6 / BUS["LL128"])
    auto = AUTO.alltoall_time(8e6, 8, LINK)
    assert auto == pytest.approx(min(p.alltoall_time(8e6, 8, LINK) for p in AUTO.fixed_protocols()))


# ---------------------------------------------------------------- the deployment and the settings

def test_realistic_setting_uses_the_protocol_model_and_physical_resets_it():
    real = Deployment.build("Llama-3.1-70B", "H100", tensor_parallel=8, setting="realistic")
    assert real.allreduce.protocol == "auto" and real.allreduce.link_efficiency == 0.8
    assert settings.REALISTIC["allreduce_protocol"] == "auto"
    back = decode.decode_step_time(real, 64, 2048, setting="physical")
    assert back == pytest.approx(decode.decode_step_time("Llama-3.1-70B", "H100", 64, 2048, tensor_parallel=8))


def test_the_step_model_charges_two_auto_all_reduces_per_layer():
    m = get_model("Llama-3.1-70B")
    kw = dict(tensor_parallel=8, **NCCL_RING_ALLREDUCE)
    for b in (1, 64, 256, 1024):
        comm = parallelism.tensor_parallel_communication_time("Llama-3.1-70B", "H100", b, **kw)
        assert comm == pytest.approx(2 * m.n_layers * min(by_hand(p, b * m.hidden_size * 2, 8) for p in BUS))


def test_latencies_and_a_protocol_together_are_refused():
    with pytest.raises(ValueError, match="allreduce_protocol = 'auto' brings NCCL's own latencies"):
        Deployment.build("Llama-3.1-70B", "H100", tensor_parallel=8, setting="realistic", allreduce_latency=1e-6)
    dep = Deployment.build("Llama-3.1-70B", "H100", tensor_parallel=8, setting="realistic")
    plain = dep.replace(allreduce_protocol=None, allreduce_latency=1e-6)
    assert plain.allreduce.protocol is None and plain.allreduce.latency == 1e-6


def test_the_simulator_tabulates_a_non_affine_all_reduce_exactly():
    st_ = sim.LibraryStepTimes("Llama-3.1-70B", "H100", tensor_parallel=8, setting="realistic")
    for tokens in (1, 100, 300, 2048, 8192):
        mine, step = st_.check_against_step_model(Iteration(tokens, tokens * 50.0, tokens * 50.0, 1))
        assert mine == pytest.approx(step, rel=1e-12)


def test_tpot_bound_with_auto_is_the_best_protocols_and_matches_the_numeric_search():
    kw = dict(tensor_parallel=8, setting="realistic", tpot_slo=0.05)
    closed = slo.max_batch_for_tpot("Llama-3.1-70B", "H100", 2048, **kw)
    numeric = slo.max_batch_for_tpot("Llama-3.1-70B", "H100", 2048, method="numeric", max_batch=4096, **kw)
    assert closed == numeric
    per_protocol = [slo.tpot_batch_bound("Llama-3.1-70B", "H100", 2048, tensor_parallel=8, tpot_slo=0.05,
                                         setting="realistic", allreduce_protocol=p) for p in ("LL", "LL128", "Simple")]
    assert slo.tpot_batch_bound("Llama-3.1-70B", "H100", 2048, **kw) == pytest.approx(max(per_protocol))
    with pytest.raises(ValueError, match="not a maximum of lines"):
        slo.step_time_pieces("Llama-3.1-70B", "H100", 2048, tensor_parallel=8, setting="realistic")


def test_the_throughput_ceiling_with_auto_is_simples():
    kw = dict(tensor_parallel=8, setting="realistic")
    auto = decode.max_decode_throughput("Llama-3.1-70B", "H100", 2048, **kw)
    simple = decode.max_decode_throughput("Llama-3.1-70B", "H100", 2048, allreduce_protocol="Simple", **kw)
    assert auto == pytest.approx(simple)
    big = 1_000_000
    assert big / decode.decode_step_time("Llama-3.1-70B", "H100", big, 2048, **kw) == pytest.approx(auto, rel=1e-2)


# ---------------------------------------------------------------- bad input

@pytest.mark.parametrize("kwargs, error, words", [
    (dict(protocol="ll"), KeyError, "allreduce_protocol"),
    (dict(protocol="auto", base_latency=1e-6), ValueError, "brings NCCL's own latencies"),
    (dict(ll_cap=0.0), ValueError, "ll_cap"),
    (dict(ll_cap=1.5), ValueError, "ll_cap"),
])
def test_allreduce_refuses_bad_settings(kwargs, error, words):
    with pytest.raises(error, match=words):
        AllReduce(**kwargs)


@pytest.mark.parametrize("kwargs, words", [
    (dict(message_bytes=-1.0), "message_bytes"),
    (dict(n_gpus=0), "n_gpus"),
    (dict(link_bandwidth=0.0), "link_bandwidth"),
    (dict(link_efficiency=1.2), "link_efficiency"),
    (dict(protocol="NVLS"), "allreduce_protocol"),
])
def test_nccl_allreduce_time_refuses_bad_input(kwargs, words):
    args = dict(message_bytes=1e6, n_gpus=8, link_bandwidth=LINK) | kwargs
    with pytest.raises((ValueError, KeyError), match=words):
        nccl_allreduce_time(args.pop("message_bytes"), args.pop("n_gpus"), args.pop("link_bandwidth"), **args)


def test_crossover_refuses_the_same_protocol_twice_and_one_gpu():
    with pytest.raises(ValueError, match="two different protocols"):
        nccl_protocol_crossover(8, LINK, first="LL", second="LL")
    with pytest.raises(ValueError, match="n_gpus"):
        nccl_protocol_crossover(1, LINK)
    with pytest.raises(KeyError, match="allreduce_protocol"):
        nccl_protocol_crossover(8, LINK, first="auto")


def test_the_protocol_table_and_the_choices_agree():
    assert set(NCCL_RING_PROTOCOLS) | {"auto"} == set(ALLREDUCE_PROTOCOLS)
    assert {p: c["base_latency"] / US for p, c in NCCL_RING_PROTOCOLS.items()} == pytest.approx(BASE)
    assert {p: c["latency"] / US for p, c in NCCL_RING_PROTOCOLS.items()} == pytest.approx(HOP)
