"""The napkin-math calculator, run as a reader would from a fresh clone: `python -m servingmath.estimate`
in a subprocess (from a temporary folder, so only the installed package is found), on a catalog name,
on totals and on a config.json, and every error message with the options that fix it."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT
from servingmath import decode, memory, prefill, settings
from servingmath.estimate import FORMULAS, estimate
from servingmath.models import model_from_totals
from servingmath.sharding import pooled_slice


def run(tmp_path, *args):
    proc = subprocess.run([sys.executable, "-m", "servingmath.estimate", *args], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    return proc.returncode, proc.stdout, proc.stderr


def cell(out: str, label: str, column: int = 0) -> str:
    """The value of one line of the table (0: physical, 1: realistic)."""
    line = next(li for li in out.splitlines() if li.startswith(label))
    values = re.findall(r"(\S+ (?:ms|s|tok/s|GB)|HBM \(\w+\)|compute(?: \(attn\))?|interconnect|overhead|"
                        r"memory \(\w+\)|never|[\d,]+)(?=\s{2,}|\s*$)", line[32:])
    return values[column]


def ms(text: str) -> float:
    value, unit = text.split()
    return float(value) * (1e-3 if unit == "ms" else 1.0)


def test_catalog_model_from_the_command_line(tmp_path):
    rc, out, err = run(tmp_path, "--model", "Llama-3.1-70B", "--gpu", "H100", "--tp", "4", "--batch", "64",
                       "--context", "4096")
    assert rc == 0, err
    assert ms(cell(out, "TPOT, hybrid")) == pytest.approx(
        decode.decode_step_time("Llama-3.1-70B", "H100", 64, 4096, tensor_parallel=4), abs=5e-6)
    realistic = decode.decode_step_time("Llama-3.1-70B", "H100", 64, 4096, tensor_parallel=4, setting="realistic")
    assert ms(cell(out, "TPOT, hybrid", 1)) == pytest.approx(realistic, abs=5e-6)
    assert ms(cell(out, "TTFT")) == pytest.approx(prefill.prefill_time("Llama-3.1-70B", "H100", 4096,
                                                                       tensor_parallel=4), abs=5e-6)
    assert int(cell(out, "largest batch").replace(",", "")) == memory.max_batch_size(
        "Llama-3.1-70B", "H100", 4096, tensor_parallel=4)
    assert cell(out, "wall that binds") == "HBM (weights)"
    for _key, label, _fn, formula in FORMULAS:
        assert label in out and formula in out          # every line carries its formula


def test_totals_from_the_command_line_pooled_and_tensor_parallel(tmp_path):
    # How to Scale Your Model's pop quiz: 30B int8, 100 kB of int8 KV per token, 4x4 TPU v5e, batch 4 at 8192
    rc, out, err = run(tmp_path, "--params", "30e9", "--kv-per-token", "100kB", "--weights", "int8", "--kv", "int8",
                       "--compute", "bf16", "--gpu", "TPU-v5e", "--tp", "16", "--pooled", "--batch", "4",
                       "--context", "8192", "--setting", "physical")
    assert rc == 0, err
    assert "realistic" not in out and "ignored: input embedding" in out
    m = model_from_totals(parameters=30e9, kv_bytes_per_token=100e3, kv_dtype="int8")
    expected = decode.decode_step_time(m, pooled_slice("TPU-v5e", 16), 4, 8192, weight_dtype="int8", kv_dtype="int8")
    assert ms(cell(out, "TPOT, hybrid")) == pytest.approx(expected, abs=5e-6)
    # with shapes, tensor parallelism counts its all-reduces and the GPUs' memory
    rc, out, err = run(tmp_path, "--params", "70B", "--weights", "int8", "--kv-per-token", "320kB", "--gpu", "H100",
                       "--tp", "4", "--batch", "64", "--context", "4096", "--layers", "80", "--hidden", "8192")
    assert rc == 0, err
    m = model_from_totals(parameters=70e9, kv_bytes_per_token=320e3, n_layers=80, hidden_size=8192)
    t = decode.decode_step_time(m, "H100", 64, 4096, tensor_parallel=4, weight_dtype="int8")
    assert ms(cell(out, "TPOT, hybrid")) == pytest.approx(t, abs=5e-6)
    assert "all-reduces counted" in out


def test_config_json_from_the_command_line(tmp_path):
    config = json.loads((ROOT / "lib/servingmath/data/models/llama-3_1-8b.json").read_text())
    config.pop("servingmath", None)
    folder = tmp_path / "my-checkpoint"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config))
    rc, out, err = run(tmp_path, "--config", str(folder), "--gpu", "A100", "--batch", "8", "--context", "2048")
    assert rc == 0, err
    assert out.startswith("my-checkpoint on 1 x A100-SXM4-80GB")
    assert ms(cell(out, "TPOT, hybrid")) == pytest.approx(
        decode.decode_step_time("Llama-3.1-8B", "A100", 8, 2048), abs=5e-6)


@pytest.mark.parametrize("args, needles", [
    ((), ["missing --gpu, --batch, --context"]),
    (("--gpu", "H100", "--batch", "1", "--context", "10"), ["--model NAME", "--config PATH", "--params N"]),
    (("--model", "Llama-3.1-8B", "--params", "8e9", "--gpu", "H100", "--batch", "1", "--context", "10"),
     ["only one of --model, --config, --params"]),
    (("--params", "70e9", "--gpu", "H100", "--batch", "1", "--context", "10"), ["--kv-per-token", "--layers"]),
    (("--model", "Llama-3.1-7B", "--gpu", "H100", "--batch", "1", "--context", "10"), ["Did you mean", "--list"]),
    (("--model", "Llama-3.1-8B", "--gpu", "H1OO", "--batch", "1", "--context", "10"), ["'H100'"]),
    (("--model", "Llama-3.1-8B", "--gpu", "H100", "--tp", "3", "--batch", "1", "--context", "10"),
     ["Allowed degrees: 1, 2, 4, 8"]),
    (("--model", "Llama-3.1-8B", "--gpu", "H100", "--weights", "fp6", "--batch", "1", "--context", "10"),
     ["fp6", "fp8"]),
    (("--model", "Llama-3.1-8B", "--gpu", "H100", "--batch", "1", "--context", "999999"), ["131072"]),
    (("--params", "70x", "--kv-per-token", "1kB", "--gpu", "H100", "--batch", "1", "--context", "10"), ["70e9 or 70B"]),
    (("--params", "7e9", "--kv-per-token", "2ms", "--gpu", "H100", "--batch", "1", "--context", "10"), ["320kB"]),
    (("--config", "no/such/config.json", "--gpu", "H100", "--batch", "1", "--context", "10"), ["config.json"]),
])
def test_bad_or_missing_input_gets_the_options_that_fix_it(tmp_path, args, needles):
    rc, out, err = run(tmp_path, *args)
    assert rc == 2 and out == ""
    assert err.startswith("estimate: error:") and "Traceback" not in err
    for needle in needles:
        assert needle in err, (needle, err)


def test_the_issues_example_runs_and_says_the_gpus_are_pooled(tmp_path):
    # totals and --tp without layer shapes: the references' pooled-slice convention, stated on the first line
    rc, out, err = run(tmp_path, "--params", "70e9", "--weights", "int8", "--kv-per-token", "320kB", "--gpu", "H100",
                       "--tp", "4", "--batch", "64", "--context", "4096")
    assert rc == 0, err
    first = out.splitlines()[0]
    assert first.startswith("note: --tp 4 with totals only") and "--layers L --hidden D" in first
    m = model_from_totals(parameters=70e9, kv_bytes_per_token=320e3)
    expected = decode.decode_step_time(m, pooled_slice("H100", 4), 64, 4096, weight_dtype="int8")
    assert ms(cell(out, "TPOT, hybrid")) == pytest.approx(expected, abs=5e-6)


def test_list_and_help(tmp_path):
    rc, out, _ = run(tmp_path, "--list")
    assert rc == 0 and "Llama-3.1-8B" in out and "H100-SXM5-80GB" in out
    rc, out, _ = run(tmp_path, "--help")
    assert rc == 0 and "--kv-per-token" in out and "--pooled" in out


def test_the_notebook_function_is_the_same_table():
    e = estimate("Llama-3.1-8B", "H100", batch_size=600, context_len=16, weight_dtype="fp8")
    phys, real = e.values["physical"], e.values["realistic"]
    opts = dict(weight_dtype="fp8", compute_dtype="fp8")     # compute "auto": fp8 math on H100
    assert phys["tpot_roofline"] == pytest.approx(
        decode.decode_step_time("Llama-3.1-8B", "H100", 600, 16, overlap="roofline", **opts))
    assert phys["tpot_additive"] >= phys["tpot_hybrid"] >= phys["tpot_roofline"]
    assert real["tpot_hybrid"] > phys["tpot_hybrid"]
    assert real["knee"] == pytest.approx(decode.knee_batch_size("Llama-3.1-8B", "H100", 16, setting="realistic",
                                                                **opts))
    assert phys["binds"] == "compute"   # B = 600 is past the knee (296 in fp8), the KV cache is short
    assert repr(e) == str(e) == e.text
    assert settings.SETTINGS and set(e.values) == {"physical", "realistic"}
    tight = estimate("Llama-3.1-8B", "H100", batch_size=500, context_len=8192)
    assert tight.values["physical"]["binds"] == "memory (KV)"
    with pytest.raises(ValueError, match="batch_size"):
        estimate("Llama-3.1-8B", "H100", batch_size=0, context_len=10)


def test_the_module_is_installed_not_found_by_path(tmp_path):
    # fresh-clone style: the calculator runs from an unrelated folder, with no repository on sys.path
    assert not (tmp_path / "servingmath").exists() and shutil.which(sys.executable)
    rc, out, _ = run(tmp_path, "--model", "Llama-3.2-1B", "--gpu", "L40S", "--batch", "1", "--context", "128")
    assert rc == 0 and "Llama-3.2-1B on 1 x L40S" in out
