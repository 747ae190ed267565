"""Importers of benchmark result files: each on its sample (values worked out by hand here), the
differences of definition, cross-checks (Little's law, throughput), detection and bad files."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from servingmath import benchmarks
from servingmath.benchmarks import BenchmarkFileError, LoadLevel, detect_tool, read_benchmark

DATA = Path(__file__).resolve().parent / "data" / "benchmarks"

# The four completed requests behind most samples (tests/data/benchmarks/make_samples.py):
#   R0: 512 prompt tokens, TTFT 150 ms, chunk gaps 20, 22, 18, 20 ms, 5 tokens (one a chunk)
#   R1: 1024 tokens, TTFT 300 ms, gaps 25, 25, 30 ms, 5 tokens (the last chunk carries 2)
#   R2: 256 tokens, TTFT 100 ms, 1 token
#   R3: 768 tokens, TTFT 200 ms, gaps 30, 40, 50, 30, 50 ms, 6 tokens
# plus one failed request; sent 250 ms apart (rate 4 req/s); the client's run took 1.2 s.
TTFT = [0.150, 0.300, 0.100, 0.200]
E2E = [0.150 + 0.080, 0.300 + 0.080, 0.100, 0.200 + 0.200]          # TTFT + sum of gaps
N_OUT = [5, 5, 1, 6]
N_IN = [512, 1024, 256, 768]


# ---- vLLM -----------------------------------------------------------------------------------------
def test_vllm_detailed_file_by_hand():
    [lv] = read_benchmark(DATA / "vllm_detailed.json")
    assert (lv.tool, lv.mode, lv.request_rate, lv.concurrency) == ("vllm", "rate", 4.0, None)
    assert (lv.n_completed, lv.n_failed, lv.duration) == (4, 1, 1.2)
    assert lv.has_requests and lv.missing() == ()
    assert lv.ttft.tolist() == TTFT and lv.output_lens.tolist() == N_OUT and lv.prompt_lens.tolist() == N_IN
    assert np.allclose(lv.e2el, E2E)
    assert np.allclose(lv.start_times, [0.0, 0.25, 0.5, 0.75])      # relative to the first send
    m = lv.book_metrics()
    assert m["ttft.mean"] == pytest.approx((0.15 + 0.30 + 0.10 + 0.20) / 4)
    # TPOT: R0 0.080 / 4, R1 0.080 / 4, R3 0.200 / 5; the one-token R2 is left out
    assert m["tpot.mean"] == pytest.approx((0.020 + 0.020 + 0.040) / 3)
    assert m["tpot.median"] == pytest.approx(0.020)
    # ITL: 12 chunk gaps pooled, summing to 0.36 s
    assert m["itl.mean"] == pytest.approx(0.36 / 12)
    # by tokens instead: sum(E2E - TTFT) / sum(n - 1) = 0.36 / 13 (R1's two-token chunk)
    assert m["tpot.token_weighted_mean"] == pytest.approx(0.36 / 13)
    assert m["request_throughput"] == pytest.approx(4 / 1.2)
    assert m["output_throughput"] == pytest.approx(17 / 1.2)
    assert m["total_token_throughput"] == pytest.approx((2560 + 17) / 1.2)


def test_vllm_summary_agrees_with_the_book_where_definitions_match():
    [lv] = read_benchmark(DATA / "vllm_detailed.json")
    rows = lv.comparison()
    assert len(rows) >= 12
    for row in rows:
        assert row["same_definition"], row["tool_name"]         # vLLM's metrics are the book's
        assert row["book_value"] == pytest.approx(row["tool_value"], rel=1e-9), row["tool_name"]
    assert lv.summary["mean_tpot"] == pytest.approx(0.08 / 3)    # the file's own mean_tpot_ms / 1000


def test_vllm_goodput_by_request_and_by_token():
    [lv] = read_benchmark(DATA / "vllm_detailed.json")
    # --goodput ttft:200 tpot:50: R1 misses TTFT (300 ms); R2 (one token, TPOT 0) passes; 3 good in 1.2 s
    assert lv.goodput(ttft_slo=0.2, tpot_slo=0.05) == pytest.approx(3 / 1.2)
    assert lv.goodput(ttft_slo=0.2, tpot_slo=0.05) == pytest.approx(lv.summary["request_goodput"])
    assert lv.goodput(ttft_slo=0.2, tpot_slo=0.05, by="token") == pytest.approx((5 + 1 + 6) / 1.2)
    assert lv.goodput(tpot_slo=0.03) == pytest.approx(3 / 1.2)   # R3's TPOT is 40 ms
    with pytest.raises(ValueError, match="by"):
        lv.goodput(ttft_slo=0.2, by="tokens")


def test_vllm_sweep_of_appended_summaries():
    levels = read_benchmark(DATA / "vllm_sweep.json")
    assert [(lv.mode, lv.concurrency, lv.n_completed) for lv in levels] == [("concurrency", 1, 10),
                                                                           ("concurrency", 8, 40)]
    for lv in levels:
        assert math.isinf(lv.request_rate)
        assert not lv.has_requests and lv.ttft is None and lv.e2el is not None   # latencies survive
        assert "summary only" in " ".join(lv.notes)
        m = lv.book_metrics()
        assert "ttft.mean" not in m and m["e2el.mean"] == pytest.approx(lv.summary["mean_e2el"])
        # Little's law: requests in flight on average = throughput x mean E2E <= the clients
        assert m["mean_concurrency"] == pytest.approx(lv.summary["request_throughput"] * lv.summary["mean_e2el"])
        assert m["mean_concurrency"] <= lv.concurrency
        assert lv.summary["max_concurrent_requests"] == lv.concurrency
        with pytest.raises(ValueError, match="no per-request ttft.*--save-detailed"):
            lv.tpot
    assert levels[0].book_metrics()["mean_concurrency"] == pytest.approx(0.5 * 1.98)
    assert levels[1].book_metrics()["mean_concurrency"] == pytest.approx(3.2 * 2.40)


# ---- SGLang ---------------------------------------------------------------------------------------
def test_sglang_per_request_lines_by_hand():
    detailed, burst = read_benchmark(DATA / "sglang.jsonl")
    assert (detailed.tool, detailed.mode, detailed.n_completed, detailed.n_failed) == ("sglang", "rate", 4, 1)
    assert detailed.start_times is None                       # bench_serving saves no send times
    assert np.allclose(detailed.e2el, E2E)                    # rebuilt as TTFT + sum(ITL)
    # the native backend splits R1's 30 ms two-token chunk into two 15 ms gaps: 13 per-token gaps
    assert detailed.itls[1].tolist() == [0.025, 0.025, 0.015, 0.015]
    assert detailed.book_metrics()["itl.mean"] == pytest.approx(0.36 / 13)
    assert detailed.summary["mean_itl"] == pytest.approx(0.36 / 13)
    # SGLang's own E2E runs 2 ms longer (to the [DONE] line): its TPOT is larger by 2 ms / (n - 1)
    assert detailed.summary["mean_e2e_latency"] - detailed.book_metrics()["e2el.mean"] == pytest.approx(0.002)
    tpot_gap = detailed.summary["mean_tpot"] - detailed.book_metrics()["tpot.mean"]
    assert tpot_gap == pytest.approx((0.002 / 4 + 0.002 / 4 + 0.002 / 5) / 3)
    rows = {r["tool_name"]: r for r in detailed.comparison()}
    assert not rows["mean_tpot"]["same_definition"] and rows["mean_ttft"]["same_definition"]
    assert math.isinf(burst.request_rate) and burst.mode == "all-at-once" and not burst.has_requests


def test_sglang_concurrency_is_littles_law():
    for lv in read_benchmark(DATA / "sglang.jsonl"):
        # bench_serving's "concurrency" = sum of E2E / duration = request throughput x mean E2E
        assert lv.summary["concurrency"] == pytest.approx(
            lv.summary["request_throughput"] * lv.summary["mean_e2e_latency"])
        assert lv.summary["output_throughput"] == pytest.approx(lv.summary["total_output_tokens"] / lv.duration)


# ---- AIPerf and genai-perf ------------------------------------------------------------------------------
def test_aiperf_records_by_hand():
    [lv] = read_benchmark(DATA / "aiperf" / "profile_export.jsonl")
    assert (lv.tool, lv.n_completed, lv.n_failed, lv.mode, lv.request_rate) == ("aiperf", 4, 1, "rate", 4.0)
    assert np.allclose(lv.ttft, TTFT) and np.allclose(lv.e2el, E2E) and lv.output_lens.tolist() == N_OUT
    assert np.allclose(lv.start_times, [0.0, 0.25, 0.5, 0.75], atol=1e-9)
    # AIPerf's duration: last response (R3 at 0.75 + 0.40 s) - first request start
    assert lv.duration == pytest.approx(1.15)
    assert lv.book_metrics()["request_throughput"] == pytest.approx(4 / 1.15)
    # AIPerf's "inter-token latency" is the book's TPOT; its inter-chunk latency is vLLM's ITL
    assert lv.summary["inter_token_latency.avg"] == pytest.approx(0.08 / 3)
    assert lv.summary["inter_chunk_latency.avg"] == pytest.approx(0.36 / 12)
    for row in lv.comparison():
        assert row["book_value"] == pytest.approx(row["tool_value"], rel=1e-6), row["tool_name"]


def test_aiperf_folder_and_aggregate_file():
    [folder] = read_benchmark(DATA / "aiperf")
    [records] = read_benchmark(DATA / "aiperf" / "profile_export.jsonl")
    assert folder.has_requests and folder.duration == records.duration
    [agg] = read_benchmark(DATA / "aiperf" / "profile_export_aiperf.json")
    assert not agg.has_requests and agg.n_completed == 4 and agg.n_failed == 1
    assert agg.summary["time_to_first_token.avg"] == pytest.approx(0.1875)        # ms -> s
    assert agg.summary["benchmark_duration.avg"] == pytest.approx(1.15)           # sec
    with pytest.raises(ValueError, match="only summary statistics.*profile_export.jsonl"):
        agg.book_metrics()


def test_genai_perf_summary_cross_checks():
    [lv] = read_benchmark(DATA / "genai_perf_profile_export_genai_perf.json")
    assert (lv.tool, lv.mode, lv.concurrency, lv.n_completed) == ("genai-perf", "concurrency", 4, None)
    s = lv.summary
    # throughput = requests/s x mean output tokens; Little's law: 4 clients, L = X W <= 4
    assert s["output_token_throughput.avg"] == pytest.approx(s["request_throughput.avg"]
                                                              * s["output_sequence_length.avg"])
    assert s["request_throughput.avg"] * s["request_latency.avg"] == pytest.approx(3.92)
    # its ITL is the book's TPOT: about (E2E - TTFT) / (n - 1) of the means
    assert s["inter_token_latency.avg"] == pytest.approx((2.0 - 0.12) / 199, rel=0.01)
    assert all(r["book_value"] is None for r in lv.comparison())


# ---- guidellm -------------------------------------------------------------------------------------------
def test_guidellm_report_by_hand():
    sync, rate = read_benchmark(DATA / "guidellm_benchmarks.json")
    assert (sync.mode, sync.concurrency, sync.n_completed) == ("synchronous", 1, 2)
    assert (rate.mode, rate.request_rate, rate.n_completed, rate.n_failed) == ("rate", 4.0, 4, 1)
    assert np.allclose(rate.ttft, TTFT, atol=1e-6) and np.allclose(rate.e2el, E2E, atol=1e-6)
    s = rate.summary
    # guidellm's ITL mean: sum(last - first) / sum(n - 1) = 0.36 / 13 (the book's TPOT, token-weighted)
    assert s["inter_token_latency.mean"] == pytest.approx(0.36 / 13)
    # its TPOT counts the first token: sum(last - start) / sum(n) = 1.11 / 17
    assert s["time_per_output_token.mean"] == pytest.approx(sum(E2E) / 17)
    # the book's request-weighted TPOT is a different number
    assert rate.book_metrics()["tpot.mean"] == pytest.approx(0.08 / 3)
    assert s["inter_token_latency.mean"] - rate.book_metrics()["tpot.mean"] == pytest.approx(0.36 / 13 - 0.08 / 3, abs=1e-6)
    # request_latency ends when the response closes (3 ms after the last token here)
    assert s["request_latency.mean"] - rate.book_metrics()["e2el.mean"] == pytest.approx(0.003, abs=1e-6)
    # percentiles: the inverted CDF picks a sample (150 ms), numpy interpolates (175 ms)
    assert s["time_to_first_token.p50"] == pytest.approx(0.150, abs=1e-6)
    assert rate.book_metrics()["ttft.median"] == pytest.approx(0.175, abs=1e-6)
    for row in rate.comparison():
        if row["same_definition"]:
            assert row["book_value"] == pytest.approx(row["tool_value"], rel=1e-5), row["tool_name"]
    assert rate.itls is None and "ITL gaps are not saved" in " ".join(rate.notes)


def test_guidellm_sampled_records_scale_the_totals(tmp_path):
    report = json.loads((DATA / "guidellm_benchmarks.json").read_text())
    bench = report["benchmarks"][1]
    bench["requests"]["successful"] = bench["requests"]["successful"][:2]      # sample_size = 2 of 4
    path = tmp_path / "benchmarks.json"
    path.write_text(json.dumps(report))
    lv = read_benchmark(path)[1]
    assert lv.n_completed == 4 and lv.ttft.size == 2
    assert "a sample: 2 of 4" in " ".join(lv.notes)
    m = lv.book_metrics()
    assert m["request_throughput"] == pytest.approx(4 / 1.2)
    assert m["output_throughput"] == pytest.approx((5 + 5) / 2 * 4 / 1.2)


# ---- the same requests through every tool ------------------------------------------------------------
def test_the_same_requests_give_the_same_book_metrics_in_every_tool():
    levels = [read_benchmark(DATA / "vllm_detailed.json")[0], read_benchmark(DATA / "sglang.jsonl")[0],
              read_benchmark(DATA / "aiperf")[0], read_benchmark(DATA / "guidellm_benchmarks.json")[1]]
    for key in ("ttft.mean", "ttft.p99", "tpot.mean", "e2el.mean", "tpot.token_weighted_mean"):
        values = [lv.book_metrics()[key] for lv in levels]
        assert np.allclose(values, values[0], rtol=1e-5), key
    # while the tools' own "TPOT-like" numbers differ: 26.7 ms (vLLM, AIPerf), 27.1 (SGLang), 27.7 (guidellm ITL)
    tool_tpot = [levels[0].summary["mean_tpot"], levels[1].summary["mean_tpot"],
                 levels[2].summary["inter_token_latency.avg"], levels[3].summary["inter_token_latency.mean"]]
    assert tool_tpot[0] == pytest.approx(tool_tpot[2]) and len({round(x, 5) for x in tool_tpot}) == 3


def test_definitions_table_covers_every_tool_and_quantity():
    md = benchmarks.definitions_table()
    for word in ("TTFT", "TPOT", "ITL", "E2E", "output tokens", "goodput", "duration", "percentiles"):
        assert f"| {word} |" in md
    header = md.splitlines()[0]
    assert all(t in header for t in ("vllm", "sglang", "aiperf / genai-perf", "guidellm"))
    assert "inverted CDF" in md and "vllm:time_to_first_token_seconds" in md
    assert benchmarks.definitions_table("text").count("\n") > 40
    with pytest.raises(ValueError, match="fmt"):
        benchmarks.definitions_table("html")


# ---- detection and bad files -------------------------------------------------------------------------------
@pytest.mark.parametrize("name, tool", [("vllm_detailed.json", "vllm"), ("vllm_sweep.json", "vllm"),
                                        ("sglang.jsonl", "sglang"), ("aiperf", "aiperf"),
                                        ("aiperf/profile_export.jsonl", "aiperf"),
                                        ("aiperf/profile_export_aiperf.json", "aiperf"),
                                        ("genai_perf_profile_export_genai_perf.json", "genai-perf"),
                                        ("guidellm_benchmarks.json", "guidellm")])
def test_detection_from_content(name, tool, tmp_path):
    assert detect_tool(DATA / name) == tool
    if (DATA / name).is_file():                 # the name does not matter, the content does
        copy = tmp_path / "results.txt"
        copy.write_bytes((DATA / name).read_bytes())
        assert detect_tool(copy) == tool


def test_forcing_the_wrong_tool_names_what_is_missing():
    with pytest.raises(BenchmarkFileError, match=r"guidellm_benchmarks.json: read as vllm.*'duration'"):
        read_benchmark(DATA / "guidellm_benchmarks.json", tool="vllm")
    with pytest.raises(BenchmarkFileError, match=r"read as guidellm.*'benchmarks'"):
        read_benchmark(DATA / "vllm_detailed.json", tool="guidellm")
    with pytest.raises(ValueError, match="tool must be one of"):
        read_benchmark(DATA / "vllm_detailed.json", tool="locust")


def test_bad_files(tmp_path):
    missing = tmp_path / "nothing.json"
    with pytest.raises(BenchmarkFileError, match="'nothing.json' does not exist"):
        read_benchmark(missing)
    text = tmp_path / "log.txt"
    text.write_text("============ Serving Benchmark Result ============\nSuccessful requests: 10\n")
    with pytest.raises(BenchmarkFileError, match="log.txt: not JSON or JSON lines"):
        read_benchmark(text)
    empty = tmp_path / "empty.json"
    empty.write_text("  \n")
    with pytest.raises(BenchmarkFileError, match="empty"):
        read_benchmark(empty)
    array = tmp_path / "array.json"
    array.write_text("[1, 2, 3]")
    with pytest.raises(BenchmarkFileError, match="JSON list, not an object"):
        read_benchmark(array)
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"mean_ttft_ms": 10.0, "median_ttft_ms": 9.0, "model": "x"}))
    with pytest.raises(BenchmarkFileError, match=r"other.json: no importer recognises.*looks most like.*lacks"):
        read_benchmark(other)
    raw = tmp_path / "profile_export.json"
    raw.write_text(json.dumps({"experiments": [{"experiment": {"mode": "concurrency", "value": 4},
                                                "requests": []}], "version": ""}))
    with pytest.raises(BenchmarkFileError, match="raw profile_export.json.*tokenizer"):
        read_benchmark(raw)
    with pytest.raises(TypeError, match="path"):
        read_benchmark(3)
    with pytest.raises(BenchmarkFileError, match="path is empty"):
        read_benchmark("")
    folder = tmp_path / "run"
    folder.mkdir()
    with pytest.raises(BenchmarkFileError, match="not an AIPerf artifacts folder"):
        read_benchmark(folder)


def test_inconsistent_files_are_refused(tmp_path):
    data = json.loads((DATA / "vllm_detailed.json").read_text())
    data["ttfts"] = data["ttfts"][:3]
    bad = tmp_path / "short.json"
    bad.write_text(json.dumps(data))
    with pytest.raises(BenchmarkFileError, match="lists .* must be lists of one length"):
        read_benchmark(bad)
    data = json.loads((DATA / "vllm_detailed.json").read_text())
    data["completed"] = 5
    bad.write_text(json.dumps(data))
    with pytest.raises(BenchmarkFileError, match="completed = 5 but its per-request lists hold 4"):
        read_benchmark(bad)
    lines = (DATA / "sglang.jsonl").read_text().splitlines()
    bad.write_text(lines[0] + "\n{\"duration\": 1.0\n")
    with pytest.raises(BenchmarkFileError, match="not JSON"):
        read_benchmark(bad, tool="sglang")


def test_load_level_validates_its_arrays():
    with pytest.raises(ValueError, match="ttft has 2 requests"):
        LoadLevel(tool="vllm", file="x.json", index=0, mode="rate", request_rate=1.0, concurrency=None,
                  duration=1.0, n_completed=3, output_lens=[1, 2, 3], ttft=[0.1, 0.2])
    lv = LoadLevel(tool="vllm", file="x.json", index=0, mode="rate", request_rate=1.0, concurrency=None,
                   duration=1.0, n_completed=1, ttft=[0.1], e2el=[0.5], output_lens=[3])
    assert lv.tpot.tolist() == pytest.approx([0.2])
    with pytest.raises(ValueError, match="percentiles"):
        lv.book_metrics(percentiles=(0,))
    assert "summary only" not in repr(lv)
