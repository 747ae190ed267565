"""Known values (with sources), invariants and bad input for units, data types, catalogs, metrics."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from servingmath import datatypes, hardware, metrics, models, roofline, units
from servingmath.decode import decode_step_parts, decode_step_time
from servingmath.prefill import prefill_time
from servingmath.speculative import verification_step_time


# ---- models: values from the models' public configs and model cards --------------------------
@pytest.mark.parametrize("name, params_billions", [
    ("Llama-2-7B", 6.74),      # Llama 2 paper, Table 1 ("7B"); HF model card 6.74B
    ("Llama-2-13B", 13.02),
    ("Llama-2-70B", 68.98),
    ("Llama-3.1-8B", 8.03),    # HF model card
    ("Llama-3.1-70B", 70.55),
    ("Llama-3.1-405B", 405.85),
    ("Mistral-7B", 7.24),      # Mistral 7B paper: 7.3B (rounded up); HF 7.24B
    ("Mixtral-8x7B", 46.70),   # Mixtral paper: 47B total, 13B active
    ("Qwen2.5-7B", 7.62),      # Qwen2.5 model card: 7.61B
    ("Qwen2.5-72B", 72.71),    # Qwen2.5 model card: 72.7B
    ("GPT-J-6B", 6.05),        # GPT-J card: 6,053,381,344 (0.04 % above the shape count: not explained here)
])
def test_parameter_counts_match_published_sizes(name, params_billions):
    assert models.parameter_count(name) / 1e9 == pytest.approx(params_billions, abs=0.011)


def test_exact_counts_and_kv_bytes_from_the_issue():
    assert models.parameter_count("Llama-2-7B") == 6_738_415_616
    assert models.kv_bytes_per_token("Llama-2-7B", "bf16") == 524_288
    assert models.kv_bytes_per_token("Llama-3.1-70B", "bf16") == 327_680
    assert models.active_parameter_count("Mixtral-8x7B") / 1e9 == pytest.approx(12.88, abs=0.01)


def test_attention_types():
    assert models.get_model("Llama-2-7B").attention_type == "MHA"
    assert models.get_model("Llama-3.1-8B").attention_type == "GQA"
    assert models.get_model("Llama-3.1-8B").group_size == 4


def test_load_model_config_from_a_user_file(tmp_path):
    config = {"model_type": "llama", "hidden_size": 4096, "intermediate_size": 11008,
              "num_hidden_layers": 32, "num_attention_heads": 32, "vocab_size": 32000,
              "max_position_embeddings": 4096}
    folder = tmp_path / "my-llama"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config))
    model = models.load_model_config(folder)
    assert model.name == "my-llama"
    assert models.parameter_count(model) == models.parameter_count("Llama-2-7B")
    assert models.get_model(str(folder / "config.json")).n_kv_heads == 32


def test_load_model_config_errors_name_the_problem(tmp_path):
    with pytest.raises(FileNotFoundError, match="config.json"):
        models.load_model_config(tmp_path / "nope")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        models.load_model_config(bad)
    partial = tmp_path / "partial.json"
    partial.write_text(json.dumps({"hidden_size": 10}))
    with pytest.raises(ValueError, match="num_hidden_layers"):
        models.load_model_config(partial)


def test_flops_per_token_is_two_per_parameter_plus_attention():
    m = models.get_model("Llama-2-7B")
    p = models.parameter_count(m) - m.vocab_size * m.hidden_size
    assert models.flops_per_token(m) == 2 * p
    assert models.flops_per_token(m, 1000) == 2 * p + 4 * 32 * 4096 * 1000


# ---- hardware -----------------------------------------------------------------------------
def test_catalog_has_every_required_accelerator_with_provenance():
    names = set(hardware.list_accelerators())
    for required in ["A100-SXM4-40GB", "A100-SXM4-80GB", "H100-SXM5-80GB", "H100-PCIe-80GB",
                     "H200-SXM-141GB", "L40S", "A10G", "MI300X", "TPU-v5e"]:
        assert required in names
    for acc in hardware.accelerator_catalog().values():
        assert acc.source and acc.as_of and acc.verified


def test_dense_peaks_are_half_the_sparse_headlines():
    # H100 SXM datasheet: 1,979 TFLOPS bf16 "with sparsity"; dense is half
    assert hardware.get_accelerator("H100").peak_flops("bf16") == pytest.approx(1978.9e12 / 2, rel=1e-4)
    assert hardware.get_accelerator("A100").peak_flops("fp16") == 312e12


def test_ridge_points():
    assert roofline.ridge_point("A100-SXM4-80GB") == pytest.approx(153.0, abs=0.05)
    assert roofline.ridge_point("H100") == pytest.approx(295.3, abs=0.05)


def test_interconnect_is_one_way():
    assert hardware.get_accelerator("H100").interconnect_bandwidth == 450e9


def test_unknown_accelerator_suggests_close_names():
    with pytest.raises(KeyError, match="H100"):
        hardware.get_accelerator("H1000")


def test_missing_peak_names_the_dtype_and_what_exists():
    with pytest.raises(ValueError, match="fp8.*A100"):
        hardware.get_accelerator("A100").peak_flops("fp8")
    with pytest.raises(ValueError, match="A10G"):
        hardware.get_accelerator("A10G").peak_flops("bf16")


def test_user_defined_accelerator_is_validated():
    with pytest.raises(ValueError, match="memory_bandwidth"):
        hardware.Accelerator.from_numbers("x", 1e9, -1.0, {"bf16": 1e12})
    with pytest.raises(KeyError, match="peak_flops key"):
        hardware.Accelerator.from_numbers("x", 1e9, 1e12, {"bf17": 1e12})


# ---- units --------------------------------------------------------------------------------
def test_decimal_and_binary_are_different():
    assert units.GB == 1e9 and units.GiB == 2**30
    assert units.parse_quantity("80 GB")[0] == 80e9
    assert units.parse_quantity("80 GiB")[0] == 80 * 2**30


def test_parse_quantity_rejects_garbage_clearly():
    with pytest.raises(ValueError, match="unknown unit"):
        units.parse_quantity("3 furlongs")
    with pytest.raises(ValueError, match="could not read"):
        units.parse_quantity("fast")


@given(st.floats(min_value=1e-9, max_value=1e15))
def test_format_bytes_round_trips_to_three_digits(x):
    text = units.format_bytes(x, digits=3)
    value, dim = units.parse_quantity(text)
    assert dim == "B" and value == pytest.approx(x, rel=5e-3)


# ---- metrics ------------------------------------------------------------------------------
def test_vllm_tpot_definition_and_its_alternatives():
    times = [0.35 + 0.02 * i for i in range(20)]
    assert metrics.time_per_output_token(0.0, times) == pytest.approx(0.02)
    assert metrics.normalized_latency(0.0, times) == pytest.approx(0.73 / 20)
    assert metrics.end_to_end_latency(0.0, times) == pytest.approx(
        metrics.e2e_from_ttft_tpot(0.35, 0.02, 20))
    assert metrics.inter_token_latencies(times) == pytest.approx([0.02] * 19)


@given(st.lists(st.floats(min_value=0, max_value=10), min_size=2, max_size=50))
def test_tpot_is_the_mean_itl_of_one_request(gaps):
    times = np.cumsum([0.1] + gaps)
    assert metrics.time_per_output_token(0.0, times) == pytest.approx(
        np.mean(metrics.inter_token_latencies(times)), abs=1e-12)


def test_metrics_bad_input():
    with pytest.raises(ValueError, match="at least 2"):
        metrics.time_per_output_token(0.0, [0.1])
    with pytest.raises(ValueError, match="before arrival"):
        metrics.time_to_first_token(1.0, [0.5, 0.6])
    with pytest.raises(ValueError, match="non-decreasing"):
        metrics.inter_token_latencies([0.5, 0.4])


# ---- bad input across the public functions --------------------------------------------------
@pytest.mark.parametrize("call, match", [
    (lambda: decode_step_time("Llama-2-7B", "H100", 0, 100), "batch_size must be an integer >= 1, got 0"),
    (lambda: decode_step_time("Llama-2-7B", "H100", -4, 100), "batch_size"),
    (lambda: decode_step_time("Llama-2-7B", "H100", 2.5, 100), "batch_size must be a whole number, got 2.5"),
    (lambda: decode_step_time("Llama-2-7B", "H100", float("nan"), 100), "batch_size must be finite"),
    (lambda: decode_step_time("Llama-2-7B", "H100", 8, 5000), "exceeds Llama-2-7B's maximum context of 4096"),
    (lambda: decode_step_time("Llama-2-7B", "H100", 8, 100, weight_dtype="bf61"), "weight_dtype 'bf61'"),
    (lambda: decode_step_time("Llama-2-7B", "H100", 8, 100, mbu=1.5), r"mbu must be in \(0, 1\], got 1.5"),
    (lambda: decode_step_time("Llama-2-7", "H100", 8, 100), "Did you mean 'Llama-2-7B'"),
    (lambda: decode_step_time("Llama-2-7B", "H100", 8, 100, overlap="max"), "overlap 'max'"),
    (lambda: decode_step_time("Llama-2-7B", "H100", "8", 100), "batch_size must be a number"),
    (lambda: prefill_time("Llama-2-7B", "H100", 0), "prompt_len must be an integer >= 1"),
    # the step model's "sequences" is the caller's batch_size: the message names what the caller passed
    (lambda: decode_step_time("Llama-2-7B", "H100", -4, 100), "batch_size must be an integer >= 1, got -4"),
    (lambda: decode_step_parts("Llama-2-7B", "H100", 2.5, 100), "batch_size must be a whole number, got 2.5"),
    (lambda: verification_step_time("Llama-3.1-8B", "H100", 0, 100, 4), "batch_size must be an integer >= 1"),
    (lambda: verification_step_time("Llama-3.1-8B", "H100", 2.5, 100, 4), "batch_size must be a whole number"),
    (lambda: roofline.decode_step_intensity("Llama-3.1-8B", "8", 100), "batch_size must be a number"),
    (lambda: roofline.decode_step_intensity("Llama-3.1-8B", 2.5, 100), "batch_size must be a whole number"),
    (lambda: models.kv_bytes_per_token("Llama-2-7B", "fp6"), "dtype 'fp6'"),
    (lambda: roofline.memory_time(-1.0, "H100"), "bytes_moved must be >= 0"),
])
def test_bad_input_names_parameter_value_and_what_is_allowed(call, match):
    with pytest.raises((ValueError, KeyError), match=match):
        call()


# ---- broadcasting ---------------------------------------------------------------------------
def test_scalar_in_scalar_out_and_arrays_broadcast():
    t = decode_step_time("Llama-2-7B", "H100", 8, 100)
    assert isinstance(t, float)
    grid = decode_step_time("Llama-2-7B", "H100", np.array([[1], [8]]), np.array([0, 100, 1000]))
    assert grid.shape == (2, 3)
    assert grid[1, 1] == pytest.approx(t)


@settings(max_examples=50, deadline=None)
@given(st.integers(1, 512), st.integers(0, 4096), st.sampled_from(["A100", "H100", "MI300X"]))
def test_overlap_models_are_ordered(batch, context, gpu):
    kw = dict(model="Llama-2-7B", accelerator=gpu, batch_size=batch, context_len=context)
    lower = decode_step_time(**kw, overlap="roofline")
    hybrid = decode_step_time(**kw, overlap="hybrid")
    upper = decode_step_time(**kw, overlap="additive")
    assert lower <= hybrid * (1 + 1e-12) and hybrid <= upper * (1 + 1e-12)
    assert upper <= 2 * lower * (1 + 1e-12)


def test_mpt_style_configs_are_read_with_their_own_key_names(tmp_path):
    # MPT's config.json: d_model, n_layers, n_heads, expansion_ratio, max_seq_len; plain (not gated) FFN
    mpt = {"model_type": "mpt", "d_model": 4096, "n_layers": 32, "n_heads": 32, "expansion_ratio": 4,
           "max_seq_len": 2048, "vocab_size": 50432, "tie_word_embeddings": True}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(mpt))
    model = models.load_model_config(path)
    assert (model.ffn_size, model.ffn_gated, model.max_context_len, model.n_layers) == (16384, False, 2048, 32)
    assert models.parameter_count(model) / 1e9 == pytest.approx(6.65, abs=0.01)  # model card: 6.7B


def test_an_explicit_ffn_gated_statement_overrides_the_guess(tmp_path):
    config = {"model_type": "newarch", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
              "intermediate_size": 256, "vocab_size": 100, "servingmath": {"ffn_gated": False}}
    path = tmp_path / "c.json"
    path.write_text(json.dumps(config))
    assert models.load_model_config(path).ffn_gated is False
    config["servingmath"]["ffn_gated"] = True
    path.write_text(json.dumps(config))
    assert models.load_model_config(path).ffn_gated is True
