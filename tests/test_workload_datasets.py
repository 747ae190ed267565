"""Named public datasets' length distributions: the shipped statistics and the samplers."""

from __future__ import annotations

import math

import numpy as np
import pytest

from servingmath import workloads
from servingmath.workloads import QuantileTable, Workload, dataset_lengths, dataset_names, workload_from_dataset


def test_every_dataset_has_a_source_a_tokenizer_and_a_sampler():
    names = dataset_names()
    assert {"arxiv-summarization", "sharegpt4", "lmsys-chat-1m", "vllm-random", "sglang-random",
            "azure-conversation-2023", "azure-code-2023", "sharegpt4-vllm-filter"} <= set(names)
    for name in names:
        d = dataset_lengths(name)
        assert {"repository", "path", "commit", "date", "method"} <= set(d.source), name
        assert d.source["repository"].startswith("github:") and len(d.source["commit"]) == 40
        assert d.tokenizer and d.checked.startswith("2026-"), name
        assert d.methods(), name
        w = workload_from_dataset(name, 50, seed=3)
        assert len(w) == 50 and w.prompt_lens.min() >= 1 and w.output_lens.min() >= 1


def test_arxiv_matches_vidurs_published_table():
    # Vidur's workload table, Arxiv-Summarization-4K: prefill (mean, median, P90) = 2588, 2730, 3702,
    # decode = 291, 167, 372 (vidur/config_optimizer/analyzer/dashboard/intro_page.py)
    d = dataset_lengths("arxiv-summarization")
    assert (round(d.prompt["mean"]), d.prompt["median"], d.prompt["p90"]) == (2588, 2730, 3702)
    assert (round(d.output["mean"]), d.output["median"], d.output["p90"]) == (291, 167, 372)


def test_quantile_tables_are_consistent_with_the_summaries():
    for name in dataset_names():
        d = dataset_lengths(name)
        for side in (d.prompt, d.output):
            if "quantiles" not in side:
                continue
            q = {float(k): v for k, v in side["quantiles"].items()}
            assert q[0.5] == side["median"] and q[0.9] == side["p90"]
            assert q[0.0] == side["min"] and q[1.0] == side["max"]
            assert side["min"] <= side["median"] <= side["mean"] * 3 and side["mean"] <= side["max"]


def test_lmsys_lognormal_goes_through_the_median_and_p90():
    d = dataset_lengths("lmsys-chat-1m")
    z90 = 1.2815516
    for side in (d.prompt, d.output):
        mu, sigma = side["lognormal"]["mu"], side["lognormal"]["sigma"]
        assert mu == pytest.approx(math.log(side["median"]), abs=1e-4)
        assert sigma == pytest.approx(math.log(side["p90"] / side["median"]) / z90, abs=1e-4)
    assert d.methods() == ("lognormal",)


def test_sampling_reproduces_the_quantiles():
    d = dataset_lengths("sharegpt4")
    w = Workload.from_dataset("sharegpt4", 40_000, seed=0)
    for lens, side in ((w.prompt_lens, d.prompt), (w.output_lens, d.output)):
        for p in (0.25, 0.5, 0.75, 0.9):
            expected = side["quantiles"][f"{p:g}"]
            assert np.quantile(lens, p) == pytest.approx(expected, rel=0.04, abs=3)
        assert lens.min() >= side["min"] and lens.max() <= side["max"]


def test_lognormal_method_matches_its_fit_and_clips():
    w = workload_from_dataset("lmsys-chat-1m", 40_000, seed=2)
    assert np.median(w.prompt_lens) == pytest.approx(417, rel=0.03)
    assert np.quantile(w.output_lens, 0.9) == pytest.approx(484, rel=0.04)
    assert w.prompt_lens.max() <= 4096
    lognormal = workload_from_dataset("arxiv-summarization", 40_000, seed=2, method="lognormal")
    fit = dataset_lengths("arxiv-summarization").prompt["lognormal"]
    assert np.median(lognormal.prompt_lens) == pytest.approx(math.exp(fit["mu"]), rel=0.03)
    assert lognormal.name == "arxiv-summarization (lognormal)"


def test_the_tools_random_defaults():
    fixed = Workload.from_dataset("vllm-random", 10, seed=5)
    assert set(fixed.prompt_lens.tolist()) == {1024} and set(fixed.output_lens.tolist()) == {128}
    sgl = Workload.from_dataset("sglang-random", 20_000, seed=5)
    assert sgl.prompt_lens.min() >= 1 and sgl.prompt_lens.max() <= 1024
    assert sgl.output_lens.min() >= 1                       # 0-token outputs are not simulated
    assert sgl.prompt_lens.mean() == pytest.approx(512.5, rel=0.02)


def test_sampling_is_deterministic_given_the_seed():
    a = workload_from_dataset("azure-code-2023", 500, seed=7)
    b = workload_from_dataset("azure-code-2023", 500, seed=7)
    c = workload_from_dataset("azure-code-2023", 500, seed=8)
    assert np.array_equal(a.prompt_lens, b.prompt_lens) and np.array_equal(a.output_lens, b.output_lens)
    assert not np.array_equal(a.prompt_lens, c.prompt_lens)


def test_traces_with_timestamps_report_their_burstiness():
    code, conv = dataset_lengths("azure-code-2023"), dataset_lengths("azure-conversation-2023")
    assert code.arrivals["interarrival_cv2"] > 100 > conv.arrivals["interarrival_cv2"] > 1


def test_bad_input():
    with pytest.raises(KeyError, match="sharegpt4"):
        dataset_lengths("sharegpt")
    with pytest.raises(ValueError, match="not available for dataset 'lmsys-chat-1m'"):
        workload_from_dataset("lmsys-chat-1m", 10, method="quantiles")
    with pytest.raises(ValueError, match="method"):
        dataset_lengths("sharegpt4").distribution("prompt", "histogram")
    with pytest.raises(ValueError, match="which"):
        dataset_lengths("sharegpt4").distribution("answer")
    with pytest.raises(ValueError, match="n_requests"):
        workload_from_dataset("sharegpt4", 0)
    with pytest.raises(ValueError, match="probabilities"):
        QuantileTable(np.array([0.1, 1.0]), np.array([1.0, 5.0]))
    with pytest.raises(ValueError, match="values"):
        QuantileTable(np.array([0.0, 1.0]), np.array([5.0, 1.0]))


def test_left_out_datasets_say_why():
    left = workloads._datasets()["left_out"]
    assert "alpaca" in left and "could not" in left["sharegpt-vllm-paper"]
