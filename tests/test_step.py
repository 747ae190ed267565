"""The one step model (servingmath.step): every time the library computes is step.step_time of the
iteration's counts. Decode, prefill, a chunk after cached tokens, a mixed iteration, the speculative
verification and the simulator's LibraryStepTimes against it (TP 1 and 8, dense, MoE, a sliding
window, all-reduce latencies and a step overhead); the embedding table is gathered, not streamed;
settings broadcast; bad degrees are refused; the simulator's KV capacity is the memory budget's."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from servingmath import decode, hardware, memory, models, prefill, speculative
from servingmath import simulate as sim
from servingmath.deployment import Deployment
from servingmath.simulate import LibraryStepTimes
from servingmath.step import Iteration, iteration_work, step_time

H100 = "H100-SXM5-80GB"
# every part of the step model at work: compute below peak, NCCL-like all-reduce latencies (per hop and per
# call) on a link at 80 %, and a fixed overhead per step
REAL = dict(mfu=0.6, mbu=0.8, allreduce_latency=0.6e-6, allreduce_base_latency=6.6e-6, link_efficiency=0.8,
            step_overhead=1.5e-3)
CASES = [("Llama-3.1-70B", 1), ("Llama-3.1-70B", 8),     # dense, GQA
         ("Mixtral-8x7B", 1), ("Mixtral-8x7B", 8),       # mixture of experts
         ("Mistral-7B", 1), ("Mistral-7B", 8)]           # sliding window of 4096 tokens
OVERLAPS = ["hybrid", "roofline", "additive"]


def _reference(dep, iteration):
    return step_time(dep, iteration_work(dep, iteration))


@pytest.fixture(params=[(m, n, o) for m, n in CASES for o in OVERLAPS],
                ids=lambda p: f"{p[0]}-tp{p[1]}-{p[2]}")
def dep(request):
    model, n, overlap = request.param
    return Deployment.build(model, H100, tensor_parallel=n, overlap=overlap, **REAL)


# ---------------------------------------------------------------- the counts

@settings(max_examples=80, deadline=None)
@given(model=st.sampled_from(["Llama-3.1-8B", "Mistral-7B", "Mixtral-8x7B", "Llama-3.2-1B"]),
       b=st.integers(0, 512), s=st.integers(1, 32768))
def test_a_decode_step_is_one_new_token_after_s_minus_one_cached(model, b, s):
    decode_it = Iteration.decode(model, sequences=b, context_len=s)
    assert decode_it == Iteration.of(model, sequences=b, new_tokens=1, cached_tokens=s - 1)
    w = models.get_model(model).sliding_window
    keys = s if w is None else min(s, w)
    assert (decode_it.tokens, decode_it.kv_tokens, decode_it.attention_pairs, decode_it.logits) == (b, b * keys,
                                                                                                    b * keys, b)


def test_decode_counts_broadcast_like_the_one_new_token_form():
    b, s = np.array([[1], [16]]), np.array([1, 2048, 6000])
    one = Iteration.decode("Mistral-7B", sequences=b, context_len=s)
    other = Iteration.of("Mistral-7B", sequences=b, new_tokens=1, cached_tokens=s - 1)
    for a, c in zip(one._values(), other._values()):
        np.testing.assert_array_equal(*np.broadcast_arrays(a, c))
    np.testing.assert_array_equal(one.kv_tokens, b * np.minimum(s, 4096))


# ---------------------------------------------------------------- every path is step_time

@pytest.mark.parametrize("b, s", [(1, 1), (32, 2048), (256, 6000)])
def test_decode_is_step_time(dep, b, s):
    it = Iteration.of(dep.model, sequences=b, new_tokens=1, cached_tokens=s - 1)
    assert decode.decode_step_time(dep, b, s) == pytest.approx(_reference(dep, it), rel=1e-12)
    parts = decode.decode_step_parts(dep, b, s)
    assert parts["overhead"] == 1.5e-3
    assert (parts["communication"] > 0) == (dep.tensor_parallel > 1)


@pytest.mark.parametrize("prompt, b", [(1, 1), (512, 4), (6000, 2)])
def test_prefill_is_step_time(dep, prompt, b):
    it = Iteration.of(dep.model, sequences=b, new_tokens=prompt, cached_tokens=0, logits=1)
    assert prefill.prefill_time(dep, prompt, batch_size=b) == pytest.approx(_reference(dep, it), rel=1e-12)
    every = Iteration.of(dep.model, sequences=b, new_tokens=prompt, logits=prompt)
    assert prefill.prefill_time(dep, prompt, batch_size=b, all_logits=True) == pytest.approx(
        _reference(dep, every), rel=1e-12)


@pytest.mark.parametrize("chunk, cached", [(512, 5000), (1, 8191), (2048, 100)])
def test_a_chunk_after_cached_tokens_is_step_time(dep, chunk, cached):
    it = Iteration.of(dep.model, sequences=1, new_tokens=chunk, cached_tokens=cached, logits=1)
    assert prefill.prefill_time(dep, chunk, cached_len=cached) == pytest.approx(_reference(dep, it), rel=1e-12)


@pytest.mark.parametrize("b, s, g", [(1, 1, 1), (64, 1024, 4), (16, 6000, 7)])
def test_the_speculative_verification_is_step_time(dep, b, s, g):
    it = Iteration.of(dep.model, sequences=b, new_tokens=g + 1, cached_tokens=s - 1, logits=g + 1)
    assert speculative.verification_step_time(dep, b, s, g) == pytest.approx(_reference(dep, it), rel=1e-12)


def test_the_simulators_step_times_are_step_time(dep):
    steps = LibraryStepTimes.for_deployment(dep)
    built = LibraryStepTimes(dep.model, dep.accelerator, tensor_parallel=dep.tensor_parallel,
                             overlap=dep.overlap, **REAL)
    m = dep.model
    decodes = [6000] * 16 + [300] * 8
    cases = [
        # (what the simulator is given, the same iteration as counts)
        ({"decode_contexts": [2048] * 32}, Iteration.decode(m, sequences=32, context_len=2048)),
        ({"chunks": [(512, 0)] * 4}, Iteration.of(m, sequences=4, new_tokens=512)),
        ({"chunks": [(512, 5000)]}, Iteration.of(m, new_tokens=512, cached_tokens=5000)),
        ({"decode_contexts": decodes, "chunks": [(512, 5000), (256, 0, False)]},
         Iteration.decode(m, sequences=16, context_len=6000) + Iteration.decode(m, sequences=8, context_len=300)
         + Iteration.of(m, new_tokens=512, cached_tokens=5000) + Iteration.of(m, new_tokens=256, logits=0)),
    ]
    for given_, it in cases:
        expected = _reference(dep, it)
        assert steps.iteration(**given_) == pytest.approx(expected, rel=1e-12)
        assert built.iteration(**given_) == pytest.approx(expected, rel=1e-12)
        mine, theirs = steps.check_against_step_model(it)
        assert mine == pytest.approx(theirs, rel=1e-12)
    # the mixed iteration reads the weights once: cheaper than its decodes and its chunks apart
    apart = (steps.iteration(decode_contexts=decodes)
             + steps.iteration(chunks=[(512, 5000), (256, 0, False)]))
    assert steps.iteration(decode_contexts=decodes, chunks=[(512, 5000), (256, 0, False)]) < apart


def test_mistral_decode_past_the_window_is_a_one_token_prefill_after_the_cache():
    # Mistral-7B v0.1 attends to the last 4096 tokens (HF config.json, sliding_window = 4096): a decode step
    # at S = 16,000 is a one-token prefill after 15,999 cached tokens, and costs what one at S = 4096 costs
    for overlap in OVERLAPS:
        opts = dict(overlap=overlap, **REAL)
        t = decode.decode_step_time("Mistral-7B", H100, 32, 16000, **opts)
        assert t == pytest.approx(prefill.prefill_time("Mistral-7B", H100, 1, batch_size=32, cached_len=15999,
                                                       **opts), rel=1e-12)
        assert t == pytest.approx(decode.decode_step_time("Mistral-7B", H100, 32, 4096, **opts), rel=1e-12)
        assert t < decode.decode_step_time("Llama-3.1-8B", H100, 32, 16000, **opts)   # same KV per token, no window
    assert models.kv_bytes_per_token("Mistral-7B") == models.kv_bytes_per_token("Llama-3.1-8B")


# ---------------------------------------------------------------- the embedding table is gathered

def test_the_input_embedding_table_is_not_streamed_by_a_step():
    # Llama-3.1-8B (HF config.json: V = 128,256, D = 4096, untied), batch 1 on an H100 (3.35 TB/s, NVIDIA
    # product page 2023): the step reads every weight but the V x D input table, (P - V D) x 2 B / W
    m = models.get_model("Llama-3.1-8B")
    w = hardware.get_accelerator(H100).memory_bandwidth
    assert w == 3.35e12 and not m.tied_embeddings
    p, vd = models.parameter_count(m), m.vocab_size * m.hidden_size
    t = decode.decode_step_time(m, H100, 1, 0)
    assert t == pytest.approx((p - vd) * 2 / w, rel=1e-4)
    assert t < 0.95 * p * 2 / w                 # the old P x 2 B / W (4.79 ms) streamed the table too
    # the table is still stored: the memory budget counts all P parameters
    assert memory.weight_bytes_per_gpu(m) == p * 2


def test_a_tied_embedding_is_streamed_once_as_the_lm_head():
    # Llama-3.2-1B ties its embedding and LM head (HF config.json, tie_word_embeddings = true): the shared
    # V x D matrix is read once, as the LM head, so the step reads all P parameters
    m = models.get_model("Llama-3.2-1B")
    assert m.tied_embeddings
    t = decode.decode_step_time(m, H100, 1, 0)
    assert t == pytest.approx(models.parameter_count(m) * 2 / 3.35e12, rel=1e-4)


# ---------------------------------------------------------------- settings broadcast, bad degrees

def test_an_array_allreduce_latency_broadcasts():
    # Llama-3.1-70B on 8 GPUs: 2 all-reduces per layer x 80 layers, each 2 (N - 1) = 14 hops of alpha
    alphas = np.array([0.0, 1e-6, 2e-6])
    t = decode.decode_step_time("Llama-3.1-70B", H100, 64, 2048, tensor_parallel=8, allreduce_latency=alphas)
    assert t.shape == (3,)
    for a, x in zip(alphas, t):
        assert x == decode.decode_step_time("Llama-3.1-70B", H100, 64, 2048, tensor_parallel=8,
                                            allreduce_latency=float(a))
    np.testing.assert_allclose(np.diff(t), 160 * 14 * 1e-6, rtol=1e-9)
    grid = decode.decode_step_time("Llama-3.1-70B", H100, np.array([[1], [64]]), 2048, tensor_parallel=8,
                                   allreduce_latency=alphas)
    assert grid.shape == (2, 3)
    np.testing.assert_allclose(grid[1], t, rtol=1e-12)


def test_a_degree_that_does_not_split_the_heads_is_refused_by_name():
    with pytest.raises(ValueError, match="tensor_parallel = 3 cannot split Llama-3.1-8B: 3 does not divide its "
                                         "32 query heads. Allowed degrees: 1, 2, 4, 8, 16, 32"):
        decode.decode_step_time("Llama-3.1-8B", H100, 1, 0, tensor_parallel=3)
    with pytest.raises(ValueError, match="tensor_parallel"):
        decode.decode_step_time("Llama-3.1-8B", H100, 1, 0, tensor_parallel=[1, 3])


# ---------------------------------------------------------------- the simulator's KV capacity

def test_the_simulators_kv_capacity_is_the_memory_budget_with_replicated_kv_heads():
    # Llama-3.1-405B (HF config.json: L = 126, K = 8 KV heads of d_h = 128) on 16 H100s: N > K, so each GPU
    # keeps one whole KV head (replicated twice) and the K/V projections of it
    m = models.get_model("Llama-3.1-405B")
    server = sim.Server(m, H100, tensor_parallel=16)
    tokens = server.kv_capacity()
    assert tokens == memory.max_kv_tokens(m, H100, tensor_parallel=16)
    p, p_kv = models.parameter_count(m), models.kv_projection_parameter_count(m)
    weights_per_gpu = ((p - p_kv) / 16 + p_kv / 8) * 2
    kv_per_token_per_gpu = 2 * m.n_layers * 1 * m.head_dim * 2          # one KV head per GPU
    assert tokens == int((0.9 * 80e9 - weights_per_gpu) // kv_per_token_per_gpu)
    # pooling the 16 GPUs' memory, as the simulator used to, would claim twice the KV heads' room
    pooled = (16 * 0.9 * 80e9 - p * 2) / models.kv_bytes_per_token(m)
    assert tokens < 0.6 * pooled


def test_the_core_issue_cases_now_agree(capsys):
    # tools/issue_checks.py re-runs the cases where two parts of the library used to disagree
    import importlib.util
    from pathlib import Path
    spec = importlib.util.spec_from_file_location("issue_checks", Path(__file__).parent.parent / "tools" /
                                                  "issue_checks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.main()
    lines = capsys.readouterr().out.splitlines()
    import re
    for line in lines[:3]:       # the two numbers of each case are the same
        numbers = re.findall(r"(\d[\d,]*\.?\d*) (?:ms|tokens)", line)
        assert len(numbers) == 2 and numbers[0] == numbers[1], line
    assert "ValueError" in lines[3] and "Allowed degrees: 1, 2, 4, 8" in lines[3]
    assert "4.48 ms" in lines[5] and "knee 295.4 vs ridge 295.3" in lines[5]
