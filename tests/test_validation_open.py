"""The open loader of published measurements, the three prediction paths, calibration families with
their fallback, leave-one-source-out, the realistic setting's provenance and the continuous-batching
checks (Little's law, the knee)."""

from __future__ import annotations

import csv
import dataclasses
import math
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from servingmath import memory, settings, validation
from servingmath.hardware import get_accelerator, list_accelerators
from servingmath.models import get_model, load_model_config
from servingmath.validation import (BASELINE, PHYSICAL, Efficiency, engine_scheduler, load_published_measurements,
                                    parallel_layout, parse_parallelism, predict, resolve_accelerator, resolve_model)

ROOT = Path(__file__).resolve().parents[1]
FIELDS = ["source_title", "source_location", "model", "params_B", "n_layers", "n_kv_heads", "head_dim", "hardware",
          "n_gpus", "tp", "framework", "dtype_weights", "dtype_kv", "batch_size_or_concurrency", "request_rate",
          "prompt_len", "output_len", "metric", "value", "units", "notes"]


@pytest.fixture(scope="module")
def open_data():
    return load_published_measurements(validation.open_data_path())


@pytest.fixture(scope="module")
def open_rows():
    with validation.open_data_path().open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def write_csv(path, rows):
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=FIELDS)
        writer.writeheader()
        for row in rows:
            writer.writerow({k: row.get(k, "") for k in FIELDS})
    return path


def row(**kw):
    base = dict(source_title="My bench (2026)", model="Llama-3.1-8B", hardware="H100", n_gpus="1", tp="1",
                framework="vLLM 0.11", dtype_weights="bf16", dtype_kv="bf16", batch_size_or_concurrency="1",
                request_rate="static batch", prompt_len="512", output_len="128", metric="itl_ms", value="6.0",
                units="ms (p50)")
    base.update(kw)
    return base


# ---- names ----------------------------------------------------------------------------------------

def test_the_general_resolver_reproduces_every_documented_spelling_of_the_book():
    for text, (name, _) in validation.HARDWARE_MAP.items():
        assert resolve_accelerator(text)[0].name == name, text
    for text, (target, _) in validation.MODEL_MAP.items():
        model, _, _ = resolve_model(text, config_dir=ROOT / "data" / "model-configs")
        expected = get_model(target).name if not target.endswith(".json") else \
            load_model_config(ROOT / target).name
        assert model.name == expected, text


@pytest.mark.parametrize("text, name, stated", [
    ("8xH100", "H100-SXM5-80GB", False), ("H100 SXM 80GB (DGX H100)", "H100-SXM5-80GB", True),
    ("AMD Instinct MI300X", "MI300X", True), ("TPU v5e-8", "TPU-v5e", True), ("TPU v5e-1", "TPU-v5e", True),
    ("1 x A100 80G", "A100-SXM4-80GB", False), ("A100 (40GB per rest of blog)", "A100-SXM4-40GB", False),
    ("4 x H200", "H200-SXM-141GB", False), ("GB200 192GB (GB200 NVL72)", "GB200", True),
    ("NVIDIA A10G", "A10G", True), ("TPU v6e-8", "TPU-v6e", True), ("Trillium", "TPU-v6e", True),
    ("v5p-8", "TPU-v5p", True), ("NVIDIA L4", "L4", True), ("H100-80GB-HBM3", "H100-SXM5-80GB", False),
    ("p5.48xlarge", "H100-SXM5-80GB", True), ("p4d.24xlarge", "A100-SXM4-40GB", True),
    ("g6e.12xlarge", "L40S", True), ("a3-highgpu-8g", "H100-SXM5-80GB", True),
    ("a2-ultragpu-1g", "A100-SXM4-80GB", True), ("Standard_ND96isr_H100_v5", "H100-SXM5-80GB", True)])
def test_hardware_spellings_benchmarks_use(text, name, stated):
    acc, note = resolve_accelerator(text)
    assert acc.name == name
    assert ("form factor not stated" not in note) == stated, note


def test_unknown_hardware_names_the_text_and_extra_accelerators_resolve_it():
    with pytest.raises(KeyError, match="RTX 5880 Ada.*not in the accelerator catalog"):
        resolve_accelerator("RTX 5880 Ada Generation")
    mine = validation.Accelerator.from_numbers("rtx-5880", memory_bytes=48e9, memory_bandwidth=0.96e12,
                                               peak_flops={"bf16": 300e12})
    acc, note = resolve_accelerator("RTX 5880 Ada Generation", accelerators={"RTX 5880 Ada Generation": mine})
    assert acc is mine and "accelerators=" in note


def test_model_names_from_hugging_face_ids_same_shapes_and_config_folders(tmp_path):
    m, note, dtype = resolve_model("nvidia/Llama-3.1-8B-Instruct-FP8")
    assert (m.name, dtype) == ("Llama-3.1-8B", "fp8")
    assert resolve_model("meta-llama/Llama-3.3-70B-Instruct-FP4")[2] == "nvfp4"
    m, note, _ = resolve_model("meta-llama/Llama-3.3-70B-Instruct")
    assert m.name == "Llama-3.1-70B" and "same architecture" in note
    with pytest.raises(KeyError, match="gemma-7b.*config_dir"):
        resolve_model("google/gemma-7b-it", config_dir=tmp_path)       # an empty folder
    shutil.copy(ROOT / "data" / "model-configs" / "gemma-7b.json", tmp_path / "gemma-7b.json")
    m, note, _ = resolve_model("google/gemma-7b-it", config_dir=tmp_path)
    assert (m.name, m.n_kv_heads, m.head_dim, m.tied_embeddings) == ("Gemma-7B", 16, 256, True)
    folder = tmp_path / "gemma-2b"
    folder.mkdir()
    shutil.copy(ROOT / "data" / "model-configs" / "gemma-2b.json", folder / "config.json")
    assert resolve_model("gemma-2b", config_dir=[tmp_path])[0].n_kv_heads == 1


@pytest.mark.parametrize("tp, gpus, expected", [("4", "", (4, 1)), ("TP4", "4", (4, 1)), ("4x2", "8", (4, 2)),
                                                ("TP4xDP2", "", (4, 2)), ("tp=4,dp=2", "", (4, 2)),
                                                ("2", "8", (2, 4)), ("TP1,PP1", "1", (1, 1)), ("", "2", (2, 1))])
def test_parallelism_as_benchmarks_write_it(tp, gpus, expected):
    assert parse_parallelism(tp, gpus) == expected


@pytest.mark.parametrize("tp, gpus, expected", [("TP1,PP2", "2", (1, 2, 1)), ("TP2xPP2", "8", (2, 2, 2)),
                                                ("tp=2,pp=2,dp=2", "", (2, 2, 2)), ("PP4", "", (1, 4, 1)),
                                                ("TP4xDP2", "", (4, 1, 2)), ("TP1,PP1", "1", (1, 1, 1)),
                                                ("2", "8", (2, 1, 4)), ("not stated", "8", (8, 1, 1)),
                                                ("", "4", (4, 1, 1)), ("n/a", "2", (2, 1, 1))])
def test_parallel_layouts_with_pipeline_stages(tp, gpus, expected):
    assert parallel_layout(tp, gpus) == expected


@pytest.mark.parametrize("tp, gpus, message", [("TP2,PP2,TP2", "", "each degree once"), ("TP2,PP", "", "labelled"),
                                               ("TP2,PP2,DP2", "4", "tp x pp x dp"), ("PP2", "3", "multiple"),
                                               ("not stated", "", "n_gpus is blank")])
def test_parallel_layouts_that_do_not_add_up_are_refused(tp, gpus, message):
    with pytest.raises(ValueError, match=message):
        parallel_layout(tp, gpus)


@pytest.mark.parametrize("tp, gpus, message", [("TP2,PP2", "4", "pipeline"), ("4x2", "4", "n_gpus 4"),
                                               ("3", "8", "multiple"), ("four", "", "not a tensor-parallel")])
def test_parallelism_refuses_what_it_cannot_model(tp, gpus, message):
    with pytest.raises(ValueError, match=message):
        parse_parallelism(tp, gpus)


# ---- the loader -----------------------------------------------------------------------------------------

def test_every_row_is_a_measurement_or_a_counted_reason(open_data, open_rows):
    rows = sorted([m.row for m in open_data.measurements] + [u.row for u in open_data.unexpressible])
    assert rows == list(range(len(open_rows)))
    assert sum(open_data.reasons().values()) == len(open_data.unexpressible)
    assert 0 < open_data.expressible_share == len(open_data.measurements) / len(open_rows)
    # each refusal names its cause; every part of the file is in the catalog (the RTX PRO 6000 was added)
    for u in open_data.unexpressible:
        assert u.reason and u.category
        assert u.category == "simulation budget", (u.category, u.reason)
    # the TPU rows over OpenOrca, a dataset the library does not ship, run at the means their notes state
    orca = [m for m in open_data.measurements if open_rows[m.row]["prompt_len"] == "OpenOrca"]
    assert len(orca) == 7 and all(any("'OpenOrca' is not a dataset" in a for a in m.assumptions) for m in orca)
    # the RTX PRO 6000 rows on 2, 4 and 8 pipeline stages are expressed (they were refused before)
    rtx = [m for m in open_data.measurements if m.accelerator.name.startswith("RTX-PRO-6000")]
    stages = sorted({m.pipeline_parallel for m in rtx})
    assert stages == [1, 2, 4, 8]
    for m in rtx:
        assert m.pipeline_parallel == (int(open_rows[m.row]["tp"].split("PP")[1]) if "PP" in open_rows[m.row]["tp"]
                                       else 1)
        assert m.n_gpus == m.gpus_per_replica * m.data_parallel == int(open_rows[m.row]["n_gpus"])


def test_sources_are_identified_by_title_without_a_fixed_list(tmp_path):
    path = write_csv(tmp_path / "mine.csv", [row(), row(source_title="Someone else's blog - part 2", value="7")])
    data = load_published_measurements(path)
    assert [m.source_title for m in data.measurements] == ["My bench (2026)", "Someone else's blog - part 2"]
    assert data.measurements[1].source == "Someone else's blog"
    assert len(data.sources()) == 2


def test_each_row_takes_the_path_it_was_measured_by(open_data, open_rows):
    for m in open_data.measurements:
        raw = open_rows[m.row]
        rate = raw["request_rate"]
        if rate == "static batch":
            assert m.path == "step model"
        elif re.fullmatch(r"runtime-chosen|max batch \d+", raw["batch_size_or_concurrency"]) \
                and raw["prompt_len"].isdigit() and m.kind == "throughput":
            assert m.path == "memory wall"
        else:
            assert m.path == "simulator" and m.sim is not None
    paths = open_data.by_path()
    assert set(paths) == {"step model", "memory wall", "simulator"}


def test_the_memory_wall_batch_from_first_principles(open_data):
    # TensorRT-LLM 1.0, Llama-3.1-8B FP8 on one H100, 2048 + 128 tokens: min(max_batch_size 2048,
    # KV tokens / whole sequence) with the KV cache 0.9 of the memory left after the weights
    m = next(m for m in open_data.measurements if m.path == "memory wall" and m.model.name == "Llama-3.1-8B"
             and m.accelerator.name == "H100-SXM5-80GB" and m.prompt_len == 2048 and m.output_len == 128)
    assert (m.weight_dtype, m.kv_dtype, m.compute_dtype) == ("fp8", "fp8", "fp8")
    weights = memory.weight_bytes_per_gpu(m.model, weight_dtype="fp8", tensor_parallel=1)
    kv_bytes = 0.9 * (80e9 - weights)
    per_token = memory.kv_bytes_per_token_per_gpu(m.model, kv_dtype="fp8", tensor_parallel=1)
    assert m.batch_size == min(2048, int(kv_bytes // per_token) // (2048 + 128))
    assert any("runtime-chosen batch" in a for a in m.assumptions)
    # its prediction is the static run at that batch
    t = validation.static_batch_time(m.model, m.accelerator, m.batch_size, 2048, 128, weight_dtype="fp8",
                                     kv_dtype="fp8", compute_dtype="fp8")
    assert predict(m) == pytest.approx(m.batch_size * 128 / t, rel=1e-9)


def test_a_pipelined_memory_wall_row_from_first_principles(open_data):
    # TensorRT-LLM 1.0, Llama-3.3-70B FP4 on 4 RTX PRO 6000 as TP1 x PP4, 1000 + 1000 tokens
    m = next(m for m in open_data.measurements if m.pipeline_parallel == 4 and m.prompt_len == 1000
             and m.output_len == 1000)
    p, lp, lo = 4, 1000, 1000
    acc = m.accelerator
    # the KV cache spans the stages: each holds 1/P of the weights and 1/P of every token's KV
    weights = memory.weight_bytes_per_gpu(m.model, weight_dtype="nvfp4", tensor_parallel=1)
    share = (weights / p + 0.9 * (acc.memory_bytes - weights / p)) / acc.memory_bytes
    usable = memory.usable_memory(acc, gpu_memory_utilization=share)
    per_token = memory.kv_bytes_per_token_per_gpu(m.model, kv_dtype="fp8", tensor_parallel=1)
    tokens = int((p * usable - weights) // per_token)
    wall = tokens // (lp + lo)
    assert m.batch_size == min(2048 * p, wall - wall % p)
    assert any(f"{p} micro-batches of {m.batch_size // p}" in a for a in m.assumptions)
    # a round (each micro-batch one step) = the whole model's step for one micro-batch, P - 1 more step
    # overheads, P activation sends of T x D x 2 bytes over the interconnect
    e = Efficiency(mbu=0.8, mfu=0.4, step_overhead=0.01)
    b = m.batch_size // p
    t = validation.static_batch_time(m.model, acc, b, lp, lo, weight_dtype="nvfp4", kv_dtype="fp8",
                                     compute_dtype="nvfp4", mbu=0.8, mfu=0.4, step_overhead=0.01)
    sends = p * (b * lp + b * (lo - 1)) * m.model.hidden_size * 2 / acc.interconnect_bandwidth / e.link_efficiency
    run = t + (p - 1) * 0.01 * lo + sends
    assert predict(m, e) == pytest.approx(m.batch_size * lo / run, rel=1e-9)
    # per GPU divides by the replica's P x TP GPUs
    per_gpu = dataclasses.replace(m, basis="per_gpu")
    assert predict(per_gpu, e) == pytest.approx(predict(m, e) / p, rel=1e-12)
    # one stage less of overhead is a faster run: the overheads are counted, not ignored
    assert predict(m, Efficiency(mbu=0.8, mfu=0.4, step_overhead=0.02)) < predict(m, e)


@pytest.mark.parametrize("text, dtype", [("FP8 (E4M3)", "fp8"), ("fp8_e5m2", "fp8"), ("INT4-AWQ", "int4"),
                                         ("GPTQ-int4", "int4"), ("int4 (GPTQ)", "int4"), ("FP8 dynamic", "fp8"),
                                         ("bf16 / fp16", "bf16"), ("W8A16", "int8")])
def test_data_types_as_benchmarks_spell_them(text, dtype):
    assert validation.parse_dtype(text) == (dtype, True)


@pytest.mark.parametrize("text, message", [("int4 weights, fp8 kv", "several types"), ("fp7", "not one the")])
def test_data_types_that_name_several_or_none_are_refused(text, message):
    with pytest.raises(ValueError, match=message):
        validation.parse_dtype(text)


@pytest.mark.parametrize("name, model, implied", [
    ("RedHatAI/Meta-Llama-3.1-8B-Instruct-quantized.w8a8", "Llama-3.1-8B", "int8"),
    ("RedHatAI/Llama-3.3-70B-Instruct-quantized.w4a16", "Llama-3.1-70B", "int4"),
    ("neuralmagic/Meta-Llama-3.1-8B-Instruct-FP8-dynamic", "Llama-3.1-8B", "fp8"),
    ("nvidia/Llama-3.1-Nemotron-70B-Instruct-HF", "Llama-3.1-70B", None)])
def test_quantised_and_fine_tuned_checkpoint_names_resolve(name, model, implied):
    m, _note, dtype = resolve_model(name)
    assert (m.name, dtype) == (model, implied)


@pytest.mark.parametrize("batch, rate, load", [
    ("c=64", "", ("closed", 64)), ("64 concurrent users", "", ("closed", 64)), ("concurrency: 64", "", ("closed", 64)),
    ("--max-concurrency 64", "", ("closed", 64)), ("64 clients", "", ("closed", 64)), ("64", "inf", ("closed", 64)),
    ("", "10 req/s", ("poisson", 10.0)), ("", "4 QPS", ("poisson", 4.0)), ("", "poisson 4", ("poisson", 4.0)),
    ("", "rate=2.5", ("poisson", 2.5)), ("", "\u221e", ("offline", None)), ("32", "static batch", ("static", 32)),
    ("concurrency 64", "4 req/s", ("capped", (4.0, 64))), ("64", "4", ("capped", (4.0, 64)))])
def test_loads_as_benchmarks_write_them(batch, rate, load):
    assert validation._load({"batch_size_or_concurrency": batch, "request_rate": rate}) == load


def test_latency_percentiles_the_simulator_reports_and_one_it_does_not(tmp_path):
    base = dict(batch_size_or_concurrency="concurrency 4", request_rate="", metric="ttft_ms", prompt_len="512",
                output_len="64")
    rows = [row(**base, units="ms (P95)"), row(**base, units="ms (p99)"), row(**base, units="ms (p99.9)")]
    data = load_published_measurements(write_csv(tmp_path / "pct.csv", rows))
    assert [m.statistic for m in data.measurements] == ["p95", "p99"]
    assert [(u.category, "p99.9" in u.reason) for u in data.unexpressible] == [("statistic", True)]
    metrics = validation._simulate_metrics(data.measurements[0].sim, BASELINE, 0)
    assert predict(data.measurements[0], BASELINE, seeds=(0,)) == pytest.approx(metrics["ttft.p95"])
    assert metrics["ttft.p50"] <= metrics["ttft.p95"] <= metrics["ttft.p99"]


def test_a_rate_capped_by_a_concurrency_runs_the_benchmarks_semaphore(tmp_path):
    rows = [row(batch_size_or_concurrency="max concurrency 8", request_rate="4", metric="ttft_ms", units="ms (mean)",
                prompt_len="512", output_len="128", tp="1", n_gpus="2")]
    data = load_published_measurements(write_csv(tmp_path / "capped.csv", rows))
    (m,) = data.measurements
    assert m.sim.load == ("capped", (2.0, 4))                  # two replicas share the stream and the cap
    assert "at most 4 in flight" in m.sim.describe()
    assert any("CappedPoisson" in a for a in m.assumptions)
    capped = validation._simulate_metrics(m.sim, BASELINE, 0)
    free = validation._simulate_metrics(dataclasses.replace(m.sim, load=("poisson", 2.0)), BASELINE, 0)
    assert capped["ttft.mean"] <= free["ttft.mean"] and capped["request_throughput"] > 0


def test_an_unstated_tp_is_one_replica_over_the_gpus_and_the_row_says_so(tmp_path):
    rows = [row(tp="not stated", n_gpus="2"), row(tp="", n_gpus="4"), row(tp="TP2", n_gpus="2")]
    data = load_published_measurements(write_csv(tmp_path / "tp.csv", rows))
    assert [(m.tensor_parallel, m.data_parallel) for m in data.measurements] == [(2, 1), (4, 1), (2, 1)]
    noted = [any(a.startswith("tp not stated -> TP") for a in m.assumptions) for m in data.measurements]
    assert noted == [True, True, False]


def test_the_pipelined_memory_wall_is_the_simulators_pipeline_with_the_overhead_on_every_stage():
    # the closed form of a pipelined offline run against the event simulation of the same run: P virtual
    # engines of b sequences each, all requests at t = 0, fixed lengths, whole prompts
    from servingmath import simulate as sim
    from servingmath.workloads import Timestamps, Workload

    p, b, lp, lo, o = 4, 32, 256, 256, 0.005
    model, acc = get_model("Llama-3.1-8B"), get_accelerator("H100")
    e = Efficiency(mbu=0.8, mfu=0.5, step_overhead=o)
    t = validation.static_batch_time(model, acc, b, lp, lo, mbu=0.8, mfu=0.5, step_overhead=o)
    sends = p * (b * lp + b * (lo - 1)) * model.hidden_size * 2 / acc.interconnect_bandwidth
    closed = p * b * lo / (t + (p - 1) * o * lo + sends)
    simulated = {}
    for where in ("stage", "host"):
        server = sim.Server(model, acc, pipeline_parallel=p, pipeline_overhead=where,
                            **e.options(n_layers=model.n_layers))
        work = Workload(prompt_lens=np.full(p * b, lp), output_lens=np.full(p * b, lo))
        policy = sim.ContinuousBatching(max_batch_size=b, max_prefill_tokens=b * lp)
        run = sim.simulate(sim.SimulationConfig(server=server, workload=work, arrivals=Timestamps(np.zeros(p * b)),
                                                policy=policy), seed=0)
        simulated[where] = run.metrics(itl=False).output_throughput
    # the same run within a few per cent (the simulation has a start-up bubble and a drain the closed form has not)
    assert simulated["stage"] == pytest.approx(closed, rel=0.05)
    # where the overhead falls decides the answer: paid once on the host, P micro-batches hide it
    assert simulated["host"] > 1.5 * simulated["stage"]
    with pytest.raises(ValueError, match="pipeline_overhead"):
        sim.Server(model, acc, pipeline_parallel=p, pipeline_overhead="everywhere")


def test_an_unversioned_vllm_row_runs_the_scheduler_of_its_date(tmp_path):
    # vLLM 0.8.0 (March 2025) made V1 the default: a row that leaves the version unstated runs V0 if the
    # source predates it, V1 if it is dated after, and V0 (the book's older default) when undated
    base = dict(framework="vLLM", batch_size_or_concurrency="concurrency 8", request_rate="", metric="ttft_ms",
                units="ms (mean)", prompt_len="1000", output_len="100")
    rows = [row(**base, source_date="2024-10-10; read 2026-12-01"), row(**base, source_date="2025-12-03 (commit)"),
            row(**base), row(**dict(base, framework="vLLM 0.6.3"), source_date="2025-12-03")]
    fields = FIELDS + ["source_date"]
    path = tmp_path / "dated.csv"
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=fields)
        writer.writeheader()
        for r in rows:
            writer.writerow({k: r.get(k, "") for k in fields})
    data = load_published_measurements(path)
    engines = [("(V1)" in m.scheduler["label"], "(V0)" in m.scheduler["label"], m.sim.token_budget)
               for m in data.measurements]
    # Llama-3.1-8B's 128K context: V0 chunks prefills at 512 tokens; V1 on an H100 API server at 8192
    assert engines == [(False, True, 512), (True, False, 8192), (False, True, 512), (False, True, 512)]
    assert "dated 2025-12, after vLLM 0.8.0 made V1 the default" in data.measurements[1].scheduler["label"]
    assert validation.source_month("29 Jan 2025 (blog date); read 2026-12-01") == (2025, 1)
    assert validation.source_month("read 2026-12-01") is None


def test_a_dataset_the_library_lacks_runs_at_the_means_the_row_states(tmp_path):
    base = dict(batch_size_or_concurrency="concurrency 4", request_rate="", metric="ttft_ms", units="ms (mean)",
                prompt_len="OpenOrca", output_len="OpenOrca")
    rows = [row(**base, notes="100 requests (mean lengths: 218.9 in, 188.0 out)"), row(**base, notes="100 requests")]
    data = load_published_measurements(write_csv(tmp_path / "orca.csv", rows))
    (m,) = data.measurements
    assert m.sim.workload[:2] == ("dataset", "sharegpt4-vllm-filter")
    assert (m.prompt_len, m.output_len) == (219, 188)
    assert any("'OpenOrca' is not a dataset" in a and "(218.9 in, 188 out)" in a for a in m.assumptions)
    # without its means the row is refused, and the reason says what would express it
    assert [u.category for u in data.unexpressible] == ["lengths"]
    assert "mean lengths" in data.unexpressible[0].reason


def test_pipeline_stages_are_refused_where_they_are_not_modelled(tmp_path):
    rows = [row(tp="TP1,PP2", n_gpus="2"),                                        # a static batch's ITL
            row(tp="TP1,PP2", n_gpus="2", batch_size_or_concurrency="concurrency 8", request_rate="",
                metric="ttft_ms", units="ms (mean)"),
            row(tp="TP1,PP2", n_gpus="2", batch_size_or_concurrency="runtime-chosen", request_rate="inf (offline)",
                metric="throughput_tok_s", units="output tok/s", value="3000")]
    data = load_published_measurements(write_csv(tmp_path / "pp.csv", rows))
    assert [u.category for u in data.unexpressible][:2] == ["pipeline parallel", "pipeline parallel"]
    assert all("offline runs of fixed lengths" in u.reason for u in data.unexpressible)
    assert [(m.pipeline_parallel, m.scenario) for m in data.measurements] == [(2, "memory_wall")]


def test_unstated_data_types_follow_the_stated_policy_and_say_so(tmp_path):
    rows = [row(dtype_weights="", dtype_kv="", model="meta-llama/Llama-3.1-8B-Instruct"),
            row(dtype_weights="fp8", dtype_kv="", framework="TensorRT-LLM 1.0"),
            row(dtype_weights="fp8", dtype_kv="", framework="vLLM 0.11"),
            row(dtype_weights="", dtype_kv="", model="nvidia/Llama-3.1-8B-Instruct-FP8", framework="NIM 1.8")]
    data = load_published_measurements(write_csv(tmp_path / "d.csv", rows))
    got = [(m.weight_dtype, m.kv_dtype) for m in data.measurements]
    assert got == [("bf16", "bf16"), ("fp8", "fp8"), ("fp8", "bf16"), ("fp8", "fp8")]
    for m in data.measurements:
        assert any("dtype policy 'engine-default'" in a for a in m.assumptions)
    refused = load_published_measurements(tmp_path / "d.csv", dtype_policy="reject")
    assert not refused.measurements and refused.reasons() == {"data type unstated": 4}
    with pytest.raises(ValueError, match="dtype_policy"):
        load_published_measurements(tmp_path / "d.csv", dtype_policy="guess")


def test_bad_input_is_refused_with_its_reason_or_raised_when_strict(tmp_path):
    rows = [row(hardware="Quantum GPU 9000"), row(model="Mystery-13B"), row(metric="joules"), row(value="-3"),
            row(tp="TP2,PP2", n_gpus="4"), row(dtype_weights="fp7"), row(prompt_len="a few"),
            row(request_rate="sometimes"), row(n_layers="33")]
    data = load_published_measurements(write_csv(tmp_path / "bad.csv", rows))
    assert not data.measurements
    assert [u.category for u in data.unexpressible] == ["hardware", "model", "metric", "value",
                                                        "pipeline parallel", "data type", "lengths", "load", "shape"]
    assert "Quantum GPU 9000" in data.unexpressible[0].reason and "n_layers = 33" in data.unexpressible[-1].reason
    with pytest.raises(KeyError, match="Quantum GPU 9000"):
        load_published_measurements(tmp_path / "bad.csv", strict=True)
    with pytest.raises(FileNotFoundError, match="not a CSV"):
        load_published_measurements(tmp_path / "none.csv")
    (tmp_path / "cols.csv").write_text("model,value\nLlama-3.1-8B,3\n", encoding="utf-8")
    with pytest.raises(ValueError, match="lacks the columns .*hardware"):
        load_published_measurements(tmp_path / "cols.csv")


def test_tensor_and_data_parallel_rows_split_the_load(tmp_path):
    rows = [row(tp="TP1xDP2", n_gpus="2", request_rate="inf", batch_size_or_concurrency="concurrency 8",
                metric="throughput_tok_s", units="output tok/s", value="2000"),
            row(tp="1", n_gpus="1", request_rate="inf", batch_size_or_concurrency="concurrency 4",
                metric="throughput_tok_s", units="output tok/s", value="1000")]
    two, one = load_published_measurements(write_csv(tmp_path / "dp.csv", rows)).measurements
    assert (two.tensor_parallel, two.data_parallel, two.sim.load) == (1, 2, ("closed", 4))
    assert two.sim is one.sim or two.sim == one.sim          # one replica of 4 clients, simulated once
    assert predict(two, BASELINE, seeds=(0,)) == pytest.approx(2 * predict(one, BASELINE, seeds=(0,)), rel=1e-12)


# ---- engines, families, fallbacks -------------------------------------------------------------------------

@pytest.mark.parametrize("framework, gpu, offline, policy, budget, seqs", [
    ("vLLM 0.11", "H100", False, "chunked", 8192, 1024), ("vLLM 0.11", "H100", True, "chunked", 16384, 1024),
    ("vLLM 0.11", "A100-SXM4-80GB", False, "chunked", 2048, 256), ("vLLM 0.11", "L40S", False, "chunked", 2048, 256),
    ("vLLM 0.11", "MI300X", False, "chunked", 8192, 1024), ("TensorRT-LLM 1.0", "H200", True, "chunked", 8192, 2048),
    ("SGLang v0.3.0", "A100", False, "prefill-first", 8192, 4096), ("SGLang v0.3.0", "A10", False, "prefill-first",
                                                                       2048, 4096)])
def test_engine_scheduler_defaults_by_engine_version_and_gpu_class(framework, gpu, offline, policy, budget, seqs):
    s = engine_scheduler(framework, gpu, "Llama-3.1-8B", offline=offline)
    assert (s["policy"], s["token_budget"], s["max_seqs"]) == (policy, budget, seqs)
    assert s["label"] and s["source"]
    if framework.startswith("vLLM"):
        assert "99d7eb5d6a512cfcc5a2b104f24ebf2d6cda772b" in s["source"]


def test_vllm_v0_without_chunked_prefill_takes_the_whole_context_as_its_budget():
    s = engine_scheduler("vLLM v0.6.0", "A100", "Llama-3.1-8B", max_model_len=4096)
    assert (s["policy"], s["token_budget"], s["max_seqs"]) == ("prefill-first", 4096, 256)
    assert engine_scheduler("vLLM v0.6.0", "A100", "Llama-2-7B")["token_budget"] == 4096   # max(4096, 2048)
    assert "0004438383ee731a6e44708609d175c48528a8d0" in s["source"]
    assert engine_scheduler("my-engine", "A100", "Llama-2-7B")["label"].startswith("engine 'my-engine' not recognised")


def test_every_catalog_accelerator_has_a_family_and_the_table_says_fitted_or_fallback(open_data):
    families = validation.catalog_families()
    assert set(families) == set(list_accelerators()) and all(families.values())
    assert families["MI300X"] == families["MI325X"] and families["B200-SXM-180GB"] == families["GB200"]
    assert families["H200-SXM-141GB"] == families["H100-SXM5-80GB"] == "Hopper"
    fitted = validation.calibrate([m for m in open_data.measurements if m.family == "Hopper"], basis="per_gpu")
    table = {r["family"]: r for r in validation.calibration_table(fitted)}
    assert set(table) >= set(families.values())
    assert table["Hopper"]["status"] == "fitted" and table["Hopper"]["efficiency"] is fitted["Hopper"]
    assert table["TPU-v5e"]["status"].startswith("fallback") and table["TPU-v5e"]["efficiency"] == BASELINE


def test_a10g_gets_its_stated_tensor_peak_fallback(tmp_path):
    acc, note = validation.with_tensor_peak(get_accelerator("A10G"), "fp16")
    assert acc.peak_flops("fp16") == get_accelerator("A10").peak_flops("fp16") and "A10G" in note
    path = write_csv(tmp_path / "a10g.csv", [row(hardware="NVIDIA A10G", metric="ttft_ms", value="200",
                                                 prompt_len="1024", output_len="1", model="Llama-2-7B",
                                                 dtype_weights="fp16", dtype_kv="fp16", units="ms")])
    m = load_published_measurements(path).measurements[0]
    assert any("publishes no A10G datasheet" in a for a in m.assumptions)
    from servingmath.prefill import prefill_time

    assert predict(m) == pytest.approx(prefill_time(m.model, acc, 1024, weight_dtype="fp16", kv_dtype="fp16",
                                                    compute_dtype="fp16"), rel=1e-12)


def test_the_baseline_is_the_books_realistic_setting_exactly(open_data):
    r = settings.REALISTIC
    assert (BASELINE.mbu, BASELINE.mfu, BASELINE.step_overhead, BASELINE.allreduce_latency,
            BASELINE.allreduce_base_latency, BASELINE.link_efficiency) == (
        r["mbu"], r["mfu"], r["step_overhead"], r["allreduce_latency"], r["allreduce_base_latency"],
        r["link_efficiency"])
    book = load_published_measurements()
    m = book.by_row(10)            # TensorRT-LLM Llama-2-70B on 2 x H100: all-reduces matter
    assert m.tensor_parallel == 2
    t = validation.static_batch_time(m.model, m.accelerator, m.batch_size, m.prompt_len, m.output_len,
                                     weight_dtype=m.weight_dtype, kv_dtype=m.kv_dtype, compute_dtype=m.compute_dtype,
                                     tensor_parallel=2, setting="realistic")
    assert predict(m, BASELINE, "per_gpu") == pytest.approx(m.batch_size * m.output_len / t / 2, rel=1e-9)
    assert predict(m, "realistic", "per_gpu") == predict(m, BASELINE, "per_gpu")


# ---- leave one source out ----------------------------------------------------------------------------------

def test_a_held_out_source_never_trains_its_own_prediction(tmp_path):
    book = load_published_measurements()
    ms = [m for m in book.measurements if m.path == "step model" and m.family == "A100"]
    base = validation.leave_one_source_out(ms, bound=False)
    lmdeploy = [i for i, m in enumerate(ms) if m.source == "LMDeploy"]
    # change every LMDeploy value tenfold: LMDeploy's own LOSO predictions must not move
    moved = [m if m.source != "LMDeploy" else dataclasses.replace(m, value=m.value * 10) for m in ms]
    again = validation.leave_one_source_out(moved, bound=False)
    assert np.allclose(base.loso[lmdeploy], again.loso[lmdeploy], rtol=1e-12)
    others = [i for i in range(len(ms)) if i not in lmdeploy]
    assert not np.allclose(base.loso[others], again.loso[others])
    assert np.allclose(base.baseline, again.baseline)


def test_a_family_without_rows_elsewhere_falls_back_to_the_baseline(open_data):
    tpu = [m for m in open_data.measurements if m.family == "TPU-v5e"][:3]
    result = validation.leave_one_source_out(tpu, bound=False)
    assert result.fallback.all()
    assert np.allclose(result.loso, result.baseline, rtol=1e-12)
    summary = result.summary("source")
    assert list(summary) == [tpu[0].source] and summary[tpu[0].source]["rows"] == 3


def test_realistic_setting_provenance_matches_the_numbers_settings_quotes():
    """settings.py quotes medians from data/published-measurements.csv; this recomputes them and
    fails if the data, the loader or the step model moves them."""
    text = Path(settings.__file__).read_text(encoding="utf-8")
    decode = re.search(r"batch <= 16 reaches a median ([\d.]+) of its physical bound\s*#:\s*\((\d+) rows", text)
    prefill = re.search(r">= 512 tokens a median ([\d.]+)\s*\((\d+) rows", text)
    check = re.search(r"= ([\d.]+) of the bound\)", text)
    assert decode and prefill and check, "settings.py no longer states its provenance in the expected words"
    p = validation.realistic_provenance()
    assert (round(p["decode_fraction"], 2), p["decode_rows"]) == (float(decode.group(1)), int(decode.group(2)))
    assert (round(p["prefill_fraction"], 2), p["prefill_rows"]) == (float(prefill.group(1)), int(prefill.group(2)))
    assert round(p["check_7b"], 2) == float(check.group(1))
    assert p["decode_sources"] == ["LMDeploy", "kipply/FasterTransformer"]
    assert set(p["prefill_sources"]) == {"TensorRT-LLM doc", "LMDeploy", "Databricks", "kipply/FasterTransformer"}


# ---- the simulator path -----------------------------------------------------------------------------------

def test_simulated_rows_come_with_seeds_an_interval_and_a_cache(open_data):
    m = next(m for m in open_data.measurements if m.sim is not None and m.sim.load[0] == "poisson"
             and m.metric == "ttft_ms")
    validation._simulate_metrics.cache_clear()
    r = validation.simulate_measurement(m, BASELINE, seeds=(0, 1, 2))
    assert r["low"] <= r["mean"] <= r["high"] and len(set(r["values"])) == 3     # Poisson: seeds differ
    assert r["mean"] == pytest.approx(predict(m, BASELINE, seeds=(0, 1, 2)))
    hits = validation._simulate_metrics.cache_info().hits
    predict(m, BASELINE, seeds=(0, 1, 2))
    assert validation._simulate_metrics.cache_info().hits == hits + 3
    with pytest.raises(ValueError, match="simulated Measurement"):
        validation.simulate_measurement(load_published_measurements().by_row(48))


def test_a_small_simulation_budget_refuses_offline_latencies_over_long_queues():
    full = load_published_measurements(validation.open_data_path())
    small = load_published_measurements(validation.open_data_path(), simulation="small")
    refused = {u.row for u in small.unexpressible if u.category == "simulation budget"}
    assert refused and refused.isdisjoint({u.row for u in full.unexpressible})
    for r in refused:
        m = full.by_row(r)
        assert m.kind == "time" and m.sim.load[0] == "offline" and m.sim.n_requests > 600
    caps = validation.SIM_REQUESTS["small"]
    for m in small.measurements:
        if m.sim is not None:
            cap = {"offline": caps["offline_max"], "closed": caps["closed_max"], "poisson": caps["poisson_max"]}
            assert m.sim.n_requests <= cap[m.sim.load[0]]


# ---- continuous batching: Little's law and the knee ------------------------------------------------------------

def nim_sweep(data):
    [sweep] = [s for s in validation.concurrency_sweeps(data.measurements) if "NIM" in s["key"]]
    return sweep


def test_littles_law_checks_the_published_sweep_against_itself(open_data):
    sweep = nim_sweep(open_data)
    c = np.array(sweep["concurrency"], dtype=float)
    tok = np.array([m.value for m in sweep["throughput_tok_s"]])
    ttft = np.array([m.value for m in sweep["ttft_ms"]])
    tpot = np.array([m.value for m in sweep["tpot_ms"]])
    in_flight = validation.littles_law_concurrency(tok, 500, ttft, tpot)
    assert np.allclose(in_flight, c, rtol=0.05)            # a closed loop keeps every client busy
    assert validation.littles_law_concurrency(100.0, 100, 0.5, 0.0) == pytest.approx(0.5)
    with pytest.raises(ValueError, match="output_throughput"):
        validation.littles_law_concurrency(0.0, 100, 0.1, 0.01)


def test_fit_knee_recovers_a_hinge_and_refuses_too_few_points():
    x = np.array([1, 5, 25, 50, 100, 150, 200, 250], dtype=float)
    y = np.where(x < 80, 0.4 + 0.001 * x, 0.48 + 0.5 * (x - 80))
    assert validation.fit_knee(x, y)["knee"] == pytest.approx(80, abs=2)
    with pytest.raises(ValueError, match="at least 4"):
        validation.fit_knee([1, 2, 3], [1, 1, 2])
    with pytest.raises(ValueError, match="increasing"):
        validation.fit_knee([1, 3, 2, 4], [1, 1, 2, 3])


def test_the_nim_knee_sits_at_the_batch_its_kv_cache_holds(open_data):
    sweep = nim_sweep(open_data)
    c = np.array(sweep["concurrency"], dtype=float)
    ttft = np.array([m.value for m in sweep["ttft_ms"]])
    knee = validation.fit_knee(c, ttft)["knee"]
    assert 50 <= knee <= 100
    spec = sweep["ttft_ms"][0].sim
    assert 50 <= spec.max_seqs <= 100          # the KV cache of 2 x H100 holds that many 5,500-token requests
    tokens = memory.max_kv_tokens(spec.model, spec.accelerator, weight_dtype="fp8", kv_dtype="fp8",
                                  tensor_parallel=2, gpu_memory_utilization=spec.memory_fraction)
    assert spec.max_seqs == tokens // 5500


def test_a_family_no_other_source_measured_gets_the_pooled_fit_of_the_other_sources(open_data):
    book = load_published_measurements()
    a100 = [m for m in book.measurements if m.path == "step model" and m.family == "A100"]
    tpu = [m for m in open_data.measurements if m.family == "TPU-v5e"][:2]
    result = validation.leave_one_source_out(a100 + tpu, bound=False)
    held = [i for i, m in enumerate(result.measurements) if m.family == "TPU-v5e"]
    assert result.fallback[held].all() and not result.fallback[:len(a100)].any()
    # the TPU rows are predicted by one fit of every other source's rows, pooled over families
    pooled = validation.calibrate(a100, basis="per_gpu", pooled=True)
    assert list(pooled) == [validation.POOLED]
    for i in held:
        m = result.measurements[i]
        assert result.loso[i] == pytest.approx(predict(m, pooled[validation.POOLED], "per_gpu", seeds=(0,)), rel=1e-9)
        assert result.loso[i] != pytest.approx(result.baseline[i], rel=1e-3)
    # the fixed guess is still there on request, and a bad fallback is refused by name
    fixed = validation.leave_one_source_out(a100 + tpu, bound=False, fallback=BASELINE)
    assert np.allclose(fixed.loso[held], fixed.baseline[held], rtol=1e-12)
    with pytest.raises(ValueError, match="fallback must be 'pooled' or an Efficiency"):
        validation.leave_one_source_out(a100, fallback="guess")
    e, note = validation.family_efficiency("TPU-v5e", {}, pooled[validation.POOLED])
    assert note.startswith("fallback: a pooled fit")


def test_comm_per_layer_over_nccls_model_reaches_the_simulator_as_a_per_step_cost(open_data):
    e = dataclasses.replace(BASELINE, comm_per_layer=50e-6)
    opts = e.options(n_layers=80, tensor_parallel=4)
    assert opts["step_overhead"] == pytest.approx(BASELINE.step_overhead + 80 * 50e-6)
    assert opts["allreduce_base_latency"] == 0.0 and opts["allreduce_protocol"] == "auto"
    assert e.options(n_layers=80, tensor_parallel=1)["step_overhead"] == BASELINE.step_overhead
    with pytest.raises(ValueError, match="needs n_layers"):
        e.options(tensor_parallel=4)
    # on the plain ring it stays half a latency per call, as before
    ring = validation.Efficiency(mbu=0.8, comm_per_layer=50e-6)
    assert ring.options()["allreduce_base_latency"] == pytest.approx(25e-6)
    # a simulated tensor-parallel row runs with it, and the extra cost slows its ITL
    row = next(m for m in open_data.measurements
               if m.path == "simulator" and m.tensor_parallel > 1 and m.metric == "itl_ms")
    slower = predict(row, e, "per_gpu", seeds=(0,))
    assert slower > predict(row, BASELINE, "per_gpu", seeds=(0,))


def test_a_poisson_run_is_replayed_at_the_number_of_requests_it_states(open_data):
    # sglang.bench_serving --num-prompts 2400 --request-rate 8: the throughput is all output over the whole
    # run (arrivals plus the drain), and a load past capacity builds a queue that grows with the run, so
    # the simulation replays the 2400 requests, not 40 s of arrivals (320)
    stated = [m for m in open_data.measurements if m.sim is not None and m.sim.load[0] == "poisson"
              and validation._stated_requests(m.raw)]
    assert stated
    for m in stated:
        want = min(validation._stated_requests(m.raw) // m.data_parallel,
                   validation.SIM_REQUESTS["full"]["poisson_stated_max"])
        assert m.sim.n_requests == want, m.describe()
    m = open_data.by_row(191)          # DataCrunch, Poisson 4 req/s, 1200 prompts, 2048 output tok/s measured
    assert m.sim.n_requests == 1200 and m.metric == "throughput_tok_s"
    assert abs(predict(m, BASELINE, seeds=(0,)) / m.value - 1) < 0.1   # 40 s of arrivals gave -25 %: the drain
    small = load_published_measurements(validation.open_data_path(), simulation="small").by_row(191)
    assert small.sim.n_requests == 150 and any("a shorter run than measured" in a for a in small.assumptions)


def test_tensorrt_llm_prefills_whole_contexts_beside_the_generations():
    # TensorRT-LLM's default: chunked context off (llm_args.py enable_chunked_prefill=False); in-flight
    # batching adds whole context requests beside the generations while max_num_tokens lasts
    from servingmath import simulate as sim
    from servingmath.prefill import prefill_time
    from servingmath.workloads import Timestamps, Workload

    for framework in ("TensorRT-LLM 1.0", "NIM 1.8.0 (TensorRT-LLM backend)"):
        s = engine_scheduler(framework, "H100", "Llama-3.1-8B")
        assert (s["policy"], s["chunk_prompts"], s["token_budget"]) == ("chunked", False, 8192)
        assert "enable_chunked_prefill" in s["source"] and "chunked context off" in s["label"]
    assert engine_scheduler("vLLM 0.11", "H100", "Llama-3.1-8B")["chunk_prompts"] is True
    server = sim.Server("Llama-3.1-8B", "H100-SXM5-80GB")

    def first_tokens(chunk):
        policy = sim.ChunkedPrefill(token_budget=8192, max_batch_size=8, chunk_prompts=chunk)
        config = sim.SimulationConfig(server, Workload.fixed(3, 5000, 4), Timestamps([0.0, 0.0, 0.0]), policy)
        return sim.simulate(config, 0).records.first_token

    whole, split = first_tokens(False), first_tokens(True)
    alone = prefill_time("Llama-3.1-8B", "H100-SXM5-80GB", 5000)
    # whole: one prompt per iteration (5000 + 5000 > 8192), the first tokens one prefill apart
    assert whole[0] == pytest.approx(alone, rel=1e-9)
    assert np.diff(whole).min() > 0.95 * alone
    # chunked: 3192 tokens of the second prompt share the first iteration, and the second and third
    # prompts end in the same iteration: their first tokens (and so their finishes) bunch
    assert split[0] > 1.4 * alone and split[1] == split[2]
    with pytest.raises(ValueError, match="chunk_prompts"):
        sim.ChunkedPrefill(chunk_prompts="no")


def test_nim_closed_loop_rows_run_tensorrt_llms_whole_context_batching(open_data):
    rows = [m for m in open_data.measurements if m.sim is not None and "NIM" in m.source]
    assert rows and all(m.sim.chunk_prompts is False and "whole prompts" in m.describe() for m in rows)


def test_a_checkpoint_that_quantises_only_its_experts_keeps_the_rest_in_16_bits(tmp_path):
    # gpt-oss: "mxfp4" names the experts' dtype; attention, router, embeddings and LM head stay bf16
    rows = [row(model="openai/gpt-oss-120b", dtype_weights="mxfp4", dtype_kv=""),
            row(model="openai/gpt-oss-120b", dtype_weights="", dtype_kv=""),
            row(model="openai/gpt-oss-120b", dtype_weights="nvfp4", dtype_kv="fp8"),
            row(model="openai/gpt-oss-120b", dtype_weights="fp8", dtype_kv="fp8")]
    data = load_published_measurements(write_csv(tmp_path / "oss.csv", rows))
    assert not data.unexpressible
    got = [(m.model.expert_dtype, m.weight_dtype, m.kv_dtype) for m in data.measurements]
    assert got == [("mxfp4", "bf16", "bf16"), ("mxfp4", "bf16", "bf16"), ("nvfp4", "bf16", "fp8"),
                   ("mxfp4", "fp8", "fp8")]
    for m in data.measurements:
        assert any("quantises only its experts" in a for a in m.assumptions)
    # the prediction reads 0.53-byte experts: far faster than an all-bf16 reading of the same row
    dense = dataclasses.replace(get_model("gpt-oss-120b"), expert_dtype=None)
    (bf16,) = load_published_measurements(write_csv(tmp_path / "bf16.csv", [row(model="oss-bf16")]),
                                          models={"oss-bf16": dense}).measurements
    assert bf16.weight_dtype == "bf16" and bf16.model.expert_dtype is None
    assert predict(data.measurements[0]) < 0.6 * predict(bf16)


def test_a_windowed_models_runtime_chosen_batch_counts_the_window_it_keeps(tmp_path):
    base = dict(model="openai/gpt-oss-120b", dtype_weights="mxfp4", dtype_kv="", batch_size_or_concurrency="max",
                request_rate="inf (offline)", metric="throughput_tok_s", units="output tok/s", value="5000",
                prompt_len="2000", output_len="2000", framework="vLLM 0.11")
    (m,) = load_published_measurements(write_csv(tmp_path / "wall.csv", [row(**base)])).measurements
    assert m.scenario == "memory_wall"
    assert any("sliding-window layers keep 128 tokens" in a for a in m.assumptions)


def test_the_files_beyond_the_proxy_load_with_their_refusals_counted():
    gpustack = load_published_measurements(ROOT / "data" / "gpustack-measurements.csv")
    assert len(gpustack.measurements) == 447
    assert gpustack.reasons() == {"simulator": 8, "pipeline parallel": 3, "memory": 2}
    oss = [m for m in gpustack.measurements if m.model.name.startswith("gpt-oss")]
    assert len(oss) == 148
    assert all(m.model.expert_dtype == "mxfp4" and m.weight_dtype == "bf16" for m in oss)
    moe = load_published_measurements(ROOT / "data" / "moe-measurements.csv")
    assert len(moe.measurements) == 371 and not moe.unexpressible
    assert all(m.model.is_moe for m in moe.measurements)
    assert resolve_model("Qwen/Qwen3-235B-A22B-Instruct-2507-FP8")[0].name == "Qwen3-235B-A22B"


def test_expert_parallel_layouts_are_read_and_run_as_the_librarys_expert_parallelism(tmp_path):
    base = dict(model="deepseek-ai/DeepSeek-R1", hardware="H200", n_gpus="8", framework="SGLang 0.4.6",
                dtype_weights="fp8", dtype_kv="", batch_size_or_concurrency="runtime-chosen",
                request_rate="inf (offline)", prompt_len="1000", output_len="1000", metric="throughput_tok_s",
                value="5000", units="output tok/s", notes="500 requests")
    rows = [row(**base, tp=t) for t in ("TP8", "DP8xEP8", "TP8,EP8", "TP8,EP4")]
    rows.append(row(**dict(base, model="Llama-3.1-8B"), tp="TP1,EP8"))
    data = load_published_measurements(write_csv(tmp_path / "ep.csv", rows))
    layouts = [(m.tensor_parallel, m.expert_parallel, m.data_parallel, m.n_gpus) for m in data.measurements]
    assert layouts == [(8, 1, 1, 8), (1, 8, 1, 8), (8, 8, 1, 8), (8, 1, 1, 8)]
    plain, dp_ep, tp_ep, folded = data.measurements
    assert any("as under plain TP 8" in a for a in folded.assumptions)
    assert any("8 data-parallel groups of TP 1" in a for a in dp_ep.assumptions)
    # the memory wall holds what memory.max_kv_tokens says the expert-parallel instance holds
    frac = validation.engine_memory_fraction(dp_ep.scheduler, dp_ep.model, dp_ep.accelerator, "fp8", 1,
                                             expert_parallel=8)
    tokens = int(memory.max_kv_tokens(dp_ep.model, dp_ep.accelerator, weight_dtype="fp8", kv_dtype="bf16",
                                      tensor_parallel=1, expert_parallel=8, gpu_memory_utilization=frac))
    assert any(f"KV cache {tokens:,} tokens" in a for a in dp_ep.assumptions)
    # eight attention groups each keep their own latent cache: more room than one TP-8 group's copies
    plain_tokens = int(memory.max_kv_tokens(plain.model, plain.accelerator, weight_dtype="fp8", kv_dtype="bf16",
                                            tensor_parallel=8, gpu_memory_utilization=validation.engine_memory_fraction(
                                                plain.scheduler, plain.model, plain.accelerator, "fp8", 8)))
    assert tokens > 5 * plain_tokens
    assert predict(dp_ep) != predict(plain) and predict(folded) == predict(plain)
    (refused,) = data.unexpressible
    assert refused.category == "parallelism" and "dense" in refused.reason
    with pytest.raises(ValueError, match="expert_parallel=True"):
        parallel_layout("TP8,EP8", "8")
    for text in ("TP8,EP3", "TP2,EP3", "TP4,PP2,EP8"):
        with pytest.raises(ValueError):
            parallel_layout(text, "", expert_parallel=True)


def test_a_vllm_row_that_names_its_engine_runs_that_engines_scheduler():
    def policy(framework, **kw):
        s = engine_scheduler(framework, "H100", "Llama-3.1-8B", **kw)
        return "V1" if "(V1)" in s["label"] else "V0"
    assert policy("vLLM (V1 engine)") == "V1"
    assert policy("vLLM 0.6.6, VLLM_USE_V1=1") == "V1"
    assert policy("vLLM 0.8.4 with VLLM_USE_V1=0") == "V0"
    assert policy("vLLM 0.9.1 (V0 engine)") == "V0"
    # a version is not an engine: v0.6.3 is V0 by its version, v0.10.1 V1 by its version
    assert policy("vLLM v0.6.3.post1") == "V0" and policy("vLLM v0.10.1") == "V1"
    assert "the row says the V1 engine ran" in engine_scheduler("vLLM (V1 engine)", "H100", "Llama-3.1-8B")["label"]


def test_other_spellings_of_the_schemas_metrics_are_read_and_say_so(tmp_path):
    base = dict(batch_size_or_concurrency="concurrency 4", request_rate="", units="")
    rows = [row(**base, metric="ttft_s", value="0.05"), row(**base, metric="mean_ttft_ms", value="50"),
            row(**base, metric="p99_itl_ms", value="9"), row(**base, metric="median_tpot_ms", value="8"),
            row(**dict(base, units="output tok/s"), metric="output_throughput", value="900"),
            row(**base, metric="goodput", value="3"), row(**base, metric="ttft", value="50")]
    data = load_published_measurements(write_csv(tmp_path / "spell.csv", rows))
    got = [(m.metric, m.statistic, round(m.value, 6)) for m in data.measurements]
    assert got == [("ttft_ms", "mean", 0.05), ("ttft_ms", "mean", 0.05), ("itl_ms", "p99", 0.009),
                   ("tpot_ms", "p50", 0.008), ("throughput_tok_s", "mean", 900.0)]
    assert any("metric 'ttft_s' read as ttft_ms (x 1000 to ms)" in a for a in data.measurements[0].assumptions)
    # the first two are one measurement written two ways: one prediction
    assert predict(data.measurements[0]) == predict(data.measurements[1])
    assert [u.category for u in data.unexpressible] == ["metric", "metric"]   # goodput; a time without its unit


def test_a_release_the_catalog_holds_apart_is_not_read_as_another():
    # Mistral-7B v0.1 attends within 4096 tokens; v0.2 and v0.3 do not, and v0.3 has 768 more tokens
    v1, v2, v3 = (resolve_model(f"mistralai/Mistral-7B-Instruct-v0.{k}")[0] for k in (1, 2, 3))
    assert (v1.name, v1.sliding_window, v1.vocab_size) == ("Mistral-7B", 4096, 32000)
    assert (v2.name, v2.sliding_window, v2.vocab_size) == ("Mistral-7B-v0.2", None, 32000)
    assert (v3.name, v3.sliding_window, v3.vocab_size) == ("Mistral-7B-v0.3", None, 32768)
    assert resolve_model("Mistral-7B")[0].name == "Mistral-7B"
    assert resolve_model("mistralai/Mixtral-8x7B-Instruct-v0.1")[0].name == "Mixtral-8x7B"
    # the same 8k-token sequence: v0.1's cache stops at its window, v0.3's does not
    assert memory.kv_tokens_held(v1, 8192) == 4096 and memory.kv_tokens_held(v3, 8192) == 8192


@pytest.mark.parametrize("text, name", [("8x H100 80GB SXM5", "H100-SXM5-80GB"), ("8 x A100 80GB SXM4", "A100-SXM4-80GB"),
                                        ("H100 94GB NVL", "H100-NVL-94GB"), ("H100 80GB PCIe", "H100-PCIe-80GB")])
def test_a_memory_size_between_the_part_and_its_form_factor_still_resolves(text, name):
    acc, note = resolve_accelerator(text)
    assert acc.name == name and note.startswith("stated")


#: Cell values a file might hold, as (well-formed, malformed): every mix loads as a row or is refused with a reason.
_CELLS = dict(
    model=(["Llama-3.1-8B", "meta-llama/Llama-3.3-70B-Instruct-FP8", "openai/gpt-oss-120b", "Qwen/Qwen3-30B-A3B",
            "deepseek-ai/DeepSeek-R1", "google/gemma-2-9b-it", "mistralai/Mistral-7B-Instruct-v0.3"], ["unknown-13b", ""]),
    hardware=(["H100", "8x H100 80GB SXM5", "MI300X", "TPU v6e-8", "B200", "A100 40GB PCIe", "L4", "Gaudi3"],
              ["weird", ""]),
    n_gpus=(["1", "2", "8", ""], ["x", "0"]),
    tp=(["1", "TP2", "TP8", "TP4xDP2", "TP1,PP2", "DP8xEP8", "TP8,EP4", "EP8", "", "tp=2,dp=2"], ["TP3", "TPx"]),
    framework=(["vLLM 0.6.3", "vLLM (V1 engine)", "SGLang 0.4.6", "TensorRT-LLM 1.0", "TGI 2.0", "JetStream", ""], []),
    dtype_weights=(["bf16", "fp8", "FP8 (E4M3)", "mxfp4", "nvfp4", "", "AWQ"], ["int4 weights, fp8 kv", "fp6"]),
    dtype_kv=(["", "fp8", "bf16"], ["fp5"]),
    batch_size_or_concurrency=(["1", "64", "concurrency 32", "runtime-chosen", "max", "c=16", ""], ["-3", "abc"]),
    request_rate=(["static batch", "inf (offline)", "inf", "4 QPS", "poisson 2.5", ""], ["0", "soon"]),
    prompt_len=(["128", "2048", "ShareGPT", "OpenOrca"], ["random", "0", "", "100000"]),
    output_len=(["128", "1", "2048", "ShareGPT"], ["", "0"]),
    metric=(["ttft_ms", "itl_ms", "tpot_ms", "e2e_ms", "throughput_tok_s", "throughput_tok_s_per_gpu",
             "throughput_req_s", "throughput_total_tok_s", "ttft_s"], ["goodput", "mbu", ""]),
    value=(["1", "12.5", "0.3", "250", "5000", "1e9"], ["nan", "0", "-1", "abc"]),
    units=(["ms", "ms (p99)", "tok/s", "output tok/s", "req/s", "", "ms (median)"], ["ms (p99.9)"]),
    notes=(["", "500 requests", "mean lengths: 219 in, 292 out", "per GPU"], []),
    source_date=(["2025-06", "", "2024"], ["garbage"]),
)


def test_any_mix_of_cells_loads_as_a_row_or_is_refused_with_a_reason_never_an_exception(tmp_path):
    import random
    rng = random.Random(17)

    def cell(good, bad):
        return rng.choice(bad) if bad and rng.random() < 0.1 else rng.choice(good)
    rows = [dict(source_title="mix", **{k: cell(*v) for k, v in _CELLS.items()}) for _ in range(300)]
    data = load_published_measurements(write_csv(tmp_path / "mix.csv", rows))
    assert len(data.measurements) + len(data.unexpressible) == len(rows)
    assert all(u.category and u.reason for u in data.unexpressible)
    assert len(data.measurements) >= 15          # many combinations are legitimately refused, not all
    for m in data.measurements:
        value = predict(m, BASELINE)
        assert math.isfinite(value) and value > 0, m.raw
