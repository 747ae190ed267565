"""``python -m servingmath.validate``: every importer's sample file through the command, its predictions
against the library's own functions, the knee of a real published sweep, and clear errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from servingmath import validate, validation
from servingmath.benchmarks import read_benchmark
from servingmath.deployment import Deployment
from servingmath.decode import decode_step_time
from servingmath.prefill import prefill_time

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "tests" / "data" / "benchmarks"
REAL = ROOT / "data" / "benchmarks" / "sglang_llama-3.3-70b_4xh200_online.jsonl"


@pytest.mark.parametrize("name", ["vllm_detailed.json", "vllm_sweep.json", "sglang.jsonl", "aiperf",
                                  "aiperf/profile_export_aiperf.json", "genai_perf_profile_export_genai_perf.json",
                                  "guidellm_benchmarks.json"])
def test_every_sample_file_runs_through_the_command_and_writes_a_figure(name, tmp_path, capsys):
    figure = tmp_path / "out.png"
    rc = validate.main([str(SAMPLES / name), "--model", "Llama-3.1-8B", "--gpu", "H100", "--seeds", "2",
                        "--max-requests", "200", "--figure", str(figure)])
    out = capsys.readouterr().out
    assert rc == 0
    assert "measured" in out and "step model" in out and "simulator" in out and "knee in TTFT" in out
    assert out.count("level ") == len(read_benchmark(SAMPLES / name))
    assert figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_figure_goes_beside_the_input_by_default(tmp_path, capsys):
    copy = tmp_path / "run.json"
    copy.write_bytes((SAMPLES / "vllm_sweep.json").read_bytes())
    assert validate.main([str(copy), "--model", "Llama-3.1-8B", "--gpu", "H100", "--seeds", "1"]) == 0
    assert (tmp_path / "run.validate.png").is_file()
    assert "figure:" in capsys.readouterr().out


def test_predictions_are_the_librarys_own_step_model_and_simulator():
    report = validate.validate_file(SAMPLES / "vllm_sweep.json", model="Llama-3.1-8B", gpu="H100", seeds=(0,))
    dep = Deployment.build("Llama-3.1-8B", "H100", setting="realistic", gpu_memory_utilization=0.9)
    for level in report["levels"]:
        lp, lo = round(level["mean_in"]), round(level["mean_out"])
        b = max(round(level["running"]), 1)
        m = level["metrics"]
        assert m["ttft.mean"]["step_model"] == pytest.approx(prefill_time(dep, lp), rel=1e-12)
        assert m["tpot.mean"]["step_model"] == pytest.approx(decode_step_time(dep, b, lp + lo // 2), rel=1e-12)
        # Little's law gives the batch: requests in flight = request rate x mean E2E of the file
        assert level["running"] == pytest.approx(m["request_throughput"]["measured"] * m["e2el.mean"]["measured"])
        assert m["ttft.mean"]["simulator"] is not None
    # the tool's own summary is what is measured when the file has no per-request data
    s = read_benchmark(SAMPLES / "vllm_sweep.json")[1].summary
    assert report["levels"][1]["metrics"]["ttft.mean"]["measured"] == pytest.approx(s["mean_ttft"])


def test_the_calibrated_setting_predicts_with_the_familys_fit_on_the_books_data():
    fitted, pooled, rows = validation.book_calibration()
    assert rows > 300 and {"Hopper", "A100", "MI300", "Blackwell"} <= set(fitted)
    report = validate.validate_file(SAMPLES / "vllm_sweep.json", model="Llama-3.1-8B", gpu="H100", seeds=(0,),
                                    setting="calibrated")
    e = fitted["Hopper"]
    dep = Deployment.build("Llama-3.1-8B", "H100", gpu_memory_utilization=0.9, **e.options(n_layers=32))
    level = report["levels"][0]
    lp, lo = round(level["mean_in"]), round(level["mean_out"])
    assert level["metrics"]["tpot.mean"]["step_model"] == pytest.approx(decode_step_time(dep, 1, lp + lo // 2),
                                                                        rel=1e-12)
    realistic = validate.validate_file(SAMPLES / "vllm_sweep.json", model="Llama-3.1-8B", gpu="H100", seeds=(0,))
    assert level["metrics"]["tpot.mean"]["step_model"] != realistic["levels"][0]["metrics"]["tpot.mean"]["step_model"]
    assert report["calibration"].startswith("calibrated: family Hopper, fitted")
    assert "calibrated: family Hopper" in validate.format_report(report)
    # a family the data lacks takes the pooled fit, and says so
    tpu = validate.validate_file(SAMPLES / "vllm_sweep.json", model="Llama-3.1-8B", gpu="TPU-v6e", seeds=(0,),
                                 setting="calibrated")
    assert "fallback: a pooled fit" in tpu["calibration"]
    with pytest.raises(ValueError, match="'calibrated'"):
        validate.validate_file(SAMPLES / "vllm_sweep.json", model="Llama-3.1-8B", gpu="H100", setting="fitted")


def test_a_rate_capped_by_a_concurrency_is_replayed_behind_the_semaphore(tmp_path):
    # vllm bench serve --request-rate 4 --max-concurrency 2: the level is a Poisson stream behind a semaphore
    line = json.loads((SAMPLES / "vllm_sweep.json").read_text().splitlines()[0])
    line.update(request_rate=4.0, max_concurrency=2)
    path = tmp_path / "capped.json"
    path.write_text(json.dumps(line) + "\n")
    (level,) = read_benchmark(path)
    assert level.mode == "rate+concurrency"
    arrivals, how = validate.level_arrivals(level, 20)
    assert (type(arrivals).__name__, arrivals.rate, arrivals.max_concurrency) == ("CappedPoisson", 4.0, 2)
    assert "at most 2 in flight" in how
    report = validate.validate_file(path, model="Llama-3.1-8B", gpu="H100", seeds=(0,))
    assert report["levels"][0]["metrics"]["ttft.mean"]["simulator"] is not None


def test_recorded_send_times_and_lengths_are_replayed():
    report = validate.validate_file(SAMPLES / "vllm_detailed.json", model="Llama-3.1-8B", gpu="H100", seeds=(0, 1))
    sim = report["levels"][0]["simulation"]
    assert sim["arrivals"] == "the file's recorded send times" and sim["workload"] == "the file's own 4 requests"
    level = read_benchmark(SAMPLES / "vllm_detailed.json")[0]
    arrivals, how = validate.level_arrivals(level, 4)
    assert list(arrivals.times) == sorted(level.start_times)


def test_dataset_lengths_from_the_files_metadata():
    sharegpt, random_ = read_benchmark(REAL)[5], read_benchmark(REAL)[0]
    w, how = validate.level_workload(random_, 2000, seed=0)
    assert w.prompt_lens.min() >= 1 and w.prompt_lens.max() <= 1024 and "uniform 1..1024" in how
    assert abs(w.prompt_lens.mean() - 512.5) < 15                 # SGLang random, range ratio 0
    w, how = validate.level_workload(sharegpt, 4000, seed=0)
    mean_in, mean_out = 269081 / 1200, 226901 / 1200              # the file's own totals
    assert w.prompt_lens.mean() == pytest.approx(mean_in, rel=0.05)
    assert w.output_lens.mean() == pytest.approx(mean_out, rel=0.05)


def test_the_knee_of_a_real_published_rate_sweep():
    report = validate.validate_file(REAL, model="meta-llama/Llama-3.3-70B-Instruct", gpu="H200", tp=4,
                                    seeds=(0,), max_requests=800)
    knee = report["knee"]
    assert knee["axis"] == "request rate" and knee["levels"] == [0, 1, 2, 3, 4]   # the random-length sweep
    assert 4 < knee["fitted"] < 16                    # TTFT turns up between 4 and 16 req/s
    assert knee["simulated"] is not None
    dep = Deployment.build("Llama-3.1-70B", "H200", tensor_parallel=4, setting="realistic",
                           gpu_memory_utilization=report["scheduler"]["memory_fraction"])
    b, rate = validate.saturation(dep, report["scheduler"], report["levels"][0]["mean_in"],
                                  report["levels"][0]["mean_out"])
    assert (knee["derived_batch"], knee["derived"]) == (b, pytest.approx(rate))
    lp, lo = round(report["levels"][0]["mean_in"]), round(report["levels"][0]["mean_out"])
    by_hand = 1 / (prefill_time(dep, lp) + lo * decode_step_time(dep, b, lp + lo // 2) / b)
    assert rate == pytest.approx(by_hand)             # SGLang prefills apart: each prompt stalls the batch
    assert "implied MBU" in validate.format_report(report)


def test_clear_errors_for_files_models_and_gpus(tmp_path, capsys):
    assert validate.main([str(tmp_path / "missing.json"), "--model", "Llama-3.1-8B", "--gpu", "H100"]) == 2
    assert "cannot read" in capsys.readouterr().err
    text = tmp_path / "log.txt"
    text.write_text("Successful requests: 10\n", encoding="utf-8")
    assert validate.main([str(text), "--model", "Llama-3.1-8B", "--gpu", "H100"]) == 2
    assert "not JSON" in capsys.readouterr().err
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"hello": 1}), encoding="utf-8")
    assert validate.main([str(other), "--model", "Llama-3.1-8B", "--gpu", "H100"]) == 2
    assert "no importer recognises" in capsys.readouterr().err
    assert validate.main([str(SAMPLES / "vllm_sweep.json"), "--model", "Mystery-9B", "--gpu", "H100"]) == 2
    assert "Mystery-9B" in capsys.readouterr().err
    assert validate.main([str(SAMPLES / "vllm_sweep.json"), "--model", "Llama-3.1-8B", "--gpu", "Z9000"]) == 2
    assert "Z9000" in capsys.readouterr().err
    assert validate.main([str(SAMPLES / "vllm_sweep.json"), "--model", "Llama-3.1-8B", "--gpu", "H100",
                          "--tp", "0"]) == 2
    with pytest.raises(ValueError, match="setting"):
        validate.validate_file(SAMPLES / "vllm_sweep.json", model="Llama-3.1-8B", gpu="H100", setting="optimistic")


def test_the_module_runs_as_a_command_in_a_fresh_process(tmp_path):
    result = subprocess.run([sys.executable, "-m", "servingmath.validate", str(SAMPLES / "vllm_sweep.json"),
                             "--model", "Llama-3.1-8B", "--gpu", "H100", "--seeds", "1", "--figure",
                             str(tmp_path / "f.png")], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "vllm_sweep.json (vllm): Llama-3.1-8B on 1 x H100-SXM5-80GB" in result.stdout
    assert (tmp_path / "f.png").is_file()


def test_a_checkpoint_that_quantises_only_its_experts_is_validated_as_the_loader_reads_it():
    # gpt-oss: "--weight-dtype mxfp4" names its experts'; attention, router, embeddings and head stay bf16
    stated = validate.validate_file(SAMPLES / "vllm_sweep.json", model="openai/gpt-oss-120b", gpu="H100",
                                    weight_dtype="mxfp4", seeds=(0,))
    unstated = validate.validate_file(SAMPLES / "vllm_sweep.json", model="openai/gpt-oss-120b", gpu="H100",
                                      seeds=(0,))
    for report in (stated, unstated):
        assert report["weight_dtype"] == "bf16"
        assert any("quantises only its experts" in n for n in report["notes"])
    tpot = [lvl["metrics"]["tpot.mean"]["step_model"] for lvl in stated["levels"]]
    assert tpot == [lvl["metrics"]["tpot.mean"]["step_model"] for lvl in unstated["levels"]]
