"""Write the sample benchmark files of this folder (run: python make_samples.py).

The per-request values are invented for the book, small and round so the tests can check them
by hand. Each tool's *summary* numbers are then computed here the way that tool computes them
(formulas read from its source; README.md names the files and commits), so a sample file is
internally consistent in exactly the way a real one is, including the places where a tool's
definition differs from the book's. This script is the book's own code, not the tools'.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent

# ---- one set of requests, reused by several tools ---------------------------------------------
# start (s, on the client's clock), prompt tokens, TTFT (s), chunk gaps (s), tokens in each chunk
REQUESTS = [
    dict(start=0.000, prompt=512, ttft=0.150, gaps=[0.020, 0.022, 0.018, 0.020], tokens=[1, 1, 1, 1, 1]),
    dict(start=0.250, prompt=1024, ttft=0.300, gaps=[0.025, 0.025, 0.030], tokens=[1, 1, 1, 2]),
    dict(start=0.500, prompt=256, ttft=0.100, gaps=[], tokens=[1]),
    dict(start=0.750, prompt=768, ttft=0.200, gaps=[0.030, 0.040, 0.050, 0.030, 0.050], tokens=[1] * 6),
]
FAILED = dict(start=1.000, prompt=300, error="Internal Server Error")
DURATION = 1.2          # the client's wall clock from the first dispatch to the last response
PERF_COUNTER_ORIGIN = 5012.345678    # vLLM's start_times are time.perf_counter() readings
EPOCH = 1764576000.0                 # 2025-12-01T08:00:00Z: AIPerf and guidellm use wall-clock times
DONE_DELAY = 0.002      # SGLang's latency runs to the "[DONE]" line, this long after the last token


def n_tokens(r):
    return sum(r["tokens"])


def latency(r):
    return r["ttft"] + sum(r["gaps"])


def dump_lines(path, objects):
    path.write_text("".join(json.dumps(o) + "\n" for o in objects), encoding="utf-8")


def stats_ms(values, percentiles=(99,)):
    v = np.asarray(values, dtype=float) * 1e3
    out = {"mean": float(np.mean(v)), "median": float(np.median(v)), "std": float(np.std(v))}
    for p in percentiles:
        out[f"p{p}"] = float(np.percentile(v, p))
    return out


# ---- vllm bench serve -----------------------------------------------------------------------------
def vllm_metrics(outputs, duration, goodput=None):
    """calculate_metrics of vllm/benchmarks/serve.py: TPOT over requests with > 1 token, ITL pooled."""
    ok = [o for o in outputs if o["success"]]
    ttfts = [o["ttft"] for o in ok]
    e2els = [o["latency"] for o in ok]
    tpots = [(o["latency"] - o["ttft"]) / (o["output_len"] - 1) for o in ok if o["output_len"] > 1]
    all_tpots = [(o["latency"] - o["ttft"]) / (o["output_len"] - 1) if o["output_len"] > 1 else 0.0 for o in ok]
    itls = [x for o in ok for x in o["itl"]]
    total_in = sum(o["prompt_len"] for o in ok)
    total_out = sum(o["output_len"] for o in ok)
    result = {"completed": len(ok), "failed": len(outputs) - len(ok), "total_input_tokens": total_in,
              "total_output_tokens": total_out, "request_throughput": len(ok) / duration,
              "output_throughput": total_out / duration,
              "total_token_throughput": (total_in + total_out) / duration}
    if goodput:
        good = sum(1 for t, p, e in zip(ttfts, all_tpots, e2els)
                   if t <= goodput["ttft"] / 1e3 and p <= goodput["tpot"] / 1e3)
        result["request_goodput"] = good / duration
    else:
        result["request_goodput"] = None
    for name, values in (("ttft", ttfts), ("tpot", tpots), ("itl", itls), ("e2el", e2els)):
        s = stats_ms(values)
        result.update({f"mean_{name}_ms": s["mean"], f"median_{name}_ms": s["median"],
                       f"std_{name}_ms": s["std"], f"p99_{name}_ms": s["p99"]})
    # peak output tokens/s in one-second buckets (one event per *chunk*) and peak concurrency
    t0 = min(o["start_time"] for o in ok)
    buckets = np.zeros(int(np.ceil(max(o["start_time"] + o["latency"] for o in ok) - t0)) + 1)
    for o in ok:
        t = o["start_time"] + o["ttft"]
        times = [t] + list(o["start_time"] + o["ttft"] + np.cumsum(o["itl"]))
        for x in times:
            buckets[int(x - t0)] += 1
    events = sorted([(o["start_time"], 1) for o in ok] + [(o["start_time"] + o["latency"], -1) for o in ok])
    level = peak = 0
    for _, d in events:
        level += d
        peak = max(peak, level)
    result["max_output_tokens_per_s"] = float(buckets.max())
    result["max_concurrent_requests"] = peak
    return result


def vllm_outputs(requests=REQUESTS, failed=FAILED):
    outs = []
    for r in requests:
        outs.append(dict(success=True, prompt_len=r["prompt"], output_len=n_tokens(r), ttft=r["ttft"],
                         itl=list(r["gaps"]), latency=latency(r), start_time=PERF_COUNTER_ORIGIN + r["start"],
                         queue_time=0.0, text="x" * n_tokens(r), error=""))
    if failed:
        outs.append(dict(success=False, prompt_len=failed["prompt"], output_len=0, ttft=0.0, itl=[],
                         latency=0.0, start_time=PERF_COUNTER_ORIGIN + failed["start"], queue_time=0.0,
                         text="", error=failed["error"]))
    return outs


def vllm_result(outputs, duration, *, request_rate, max_concurrency, detailed, goodput=None,
                num_prompts=None, date="20251201-080000"):
    header = {"date": date, "endpoint_type": "openai-chat", "backend": "openai-chat", "label": None,
              "model_id": "meta-llama/Llama-3.1-8B-Instruct", "tokenizer_id": "meta-llama/Llama-3.1-8B-Instruct",
              "num_prompts": num_prompts or len(outputs), "request_rate": request_rate, "burstiness": 1.0,
              "max_concurrency": max_concurrency, "duration": duration}
    metrics = vllm_metrics(outputs, duration, goodput)
    ordered = {k: metrics[k] for k in ("completed", "failed", "total_input_tokens", "total_output_tokens",
                                       "request_throughput", "request_goodput", "output_throughput",
                                       "total_token_throughput")}
    body = {**header, **ordered}
    body.update({"input_lens": [o["prompt_len"] for o in outputs],
                 "output_lens": [o["output_len"] for o in outputs],
                 "ttfts": [o["ttft"] for o in outputs], "itls": [o["itl"] for o in outputs],
                 "latencies": [o["latency"] for o in outputs],
                 "start_times": [o["start_time"] for o in outputs],
                 "queue_times": [o["queue_time"] for o in outputs],
                 "generated_texts": [o["text"] for o in outputs], "errors": [o["error"] for o in outputs],
                 "max_output_tokens_per_s": metrics["max_output_tokens_per_s"],
                 "max_concurrent_requests": metrics["max_concurrent_requests"], "rtfx": 0.0})
    for name in ("ttft", "tpot", "itl", "e2el"):
        for stat in ("mean", "median", "std"):
            body[f"{stat}_{name}_ms"] = metrics[f"{stat}_{name}_ms"]
        body[f"p99_{name}_ms"] = metrics[f"p99_{name}_ms"]
    if not detailed:      # what serve.py deletes without --save-detailed (latencies and queue_times stay)
        for field in ("input_lens", "output_lens", "start_times", "ttfts", "itls", "generated_texts", "errors"):
            del body[field]
    return body


def write_vllm():
    detailed = vllm_result(vllm_outputs(), DURATION, request_rate=4.0, max_concurrency=None, detailed=True,
                           goodput={"ttft": 200, "tpot": 50})
    (HERE / "vllm_detailed.json").write_text(json.dumps(detailed), encoding="utf-8")
    # a two-point concurrency sweep saved with --append-result (one JSON object a line), summary only
    rng = np.random.default_rng(17)
    levels = []
    for concurrency, n, duration, mean_e2e in ((1, 10, 20.0, 1.98), (8, 40, 12.5, 2.40)):
        reqs = []
        for i in range(n):
            out_len = int(rng.integers(100, 140))
            ttft = round(float(rng.uniform(0.05, 0.25)) * (1 + concurrency / 8), 4)
            reqs.append(dict(start=0.0, prompt=int(rng.integers(400, 600)), ttft=ttft, gaps=[], tokens=[out_len]))
        outs = vllm_outputs(reqs, None)
        lat = rng.uniform(0.8, 1.2, n)
        lat = lat / lat.mean() * mean_e2e
        slot_free = [0.0] * concurrency            # closed loop: each client sends when its last one ends
        for i, (o, L, r) in enumerate(zip(outs, lat, reqs)):
            o["latency"] = float(L)
            o["itl"] = [float((L - r["ttft"]) / (o["output_len"] - 1))] * (o["output_len"] - 1)
            o["start_time"] = PERF_COUNTER_ORIGIN + slot_free[i % concurrency]
            slot_free[i % concurrency] += float(L) + 0.001
        levels.append(vllm_result(outs, duration, request_rate="inf", max_concurrency=concurrency,
                                  detailed=False, num_prompts=n))
    dump_lines(HERE / "vllm_sweep.json", levels)


# ---- SGLang bench_serving ----------------------------------------------------------------------
def write_sglang():
    lines = []
    # level 1: --request-rate 4 --output-details, native "sglang" backend: a chunk's gap is split
    # evenly over the tokens it carries; latency runs to the "[DONE]" line
    outs = []
    for r in REQUESTS:
        itl = []
        for gap, k in zip(r["gaps"], r["tokens"][1:]):
            itl += [gap / k] * k
        outs.append(dict(ttft=r["ttft"], itl=itl, latency=latency(r) + DONE_DELAY, prompt_len=r["prompt"],
                         output_len=n_tokens(r), retok=n_tokens(r), error="", success=True))
    outs.append(dict(ttft=0.0, itl=[], latency=0.0, prompt_len=FAILED["prompt"], output_len=0, retok=0,
                     error=FAILED["error"], success=False))
    lines.append(sglang_result(outs, DURATION, request_rate=4.0, details=True))
    # level 2: every request at once (request rate inf), summary only, 3 requests of 64 tokens
    outs = []
    for i in range(3):
        ttft = 0.120 + 0.040 * i
        lat = ttft + 63 * 0.012 + DONE_DELAY
        outs.append(dict(ttft=ttft, itl=[0.012] * 63, latency=lat, prompt_len=1024, output_len=64, retok=64,
                         error="", success=True))
    lines.append(sglang_result(outs, 0.95, request_rate=float("inf"), details=False))
    # json.dumps writes the infinite rate as the bare token Infinity, as bench_serving's file has it
    dump_lines(HERE / "sglang.jsonl", lines)


def sglang_result(outs, duration, *, request_rate, details):
    ok = [o for o in outs if o["success"]]
    ttfts, e2e = [o["ttft"] for o in ok], [o["latency"] for o in ok]
    tpots = [(o["latency"] - o["ttft"]) / (o["output_len"] - 1) for o in ok if o["output_len"] > 1]
    itls = [x for o in ok for x in o["itl"]]
    total_in, total_out = sum(o["prompt_len"] for o in ok), sum(o["output_len"] for o in ok)
    result = {"backend": "sglang", "dataset_name": "random", "request_rate": request_rate, "max_concurrency": None,
              "sharegpt_output_len": None, "random_input_len": 1024, "random_output_len": 1024,
              "random_range_ratio": 0.0, "duration": duration, "completed": len(ok),
              "total_input_tokens": total_in, "total_output_tokens": total_out,
              "total_output_tokens_retokenized": sum(o["retok"] for o in ok),
              "request_throughput": len(ok) / duration, "input_throughput": total_in / duration,
              "output_throughput": total_out / duration}
    e, t, p, i = stats_ms(e2e), stats_ms(ttfts), stats_ms(tpots), stats_ms(itls, (95, 99))
    result.update({"mean_e2e_latency_ms": e["mean"], "median_e2e_latency_ms": e["median"],
                   "std_e2e_latency_ms": e["std"], "p99_e2e_latency_ms": e["p99"],
                   "mean_ttft_ms": t["mean"], "median_ttft_ms": t["median"], "std_ttft_ms": t["std"],
                   "p99_ttft_ms": t["p99"], "mean_tpot_ms": p["mean"], "median_tpot_ms": p["median"],
                   "std_tpot_ms": p["std"], "p99_tpot_ms": p["p99"], "mean_itl_ms": i["mean"],
                   "median_itl_ms": i["median"], "std_itl_ms": i["std"], "p95_itl_ms": i["p95"],
                   "p99_itl_ms": i["p99"], "concurrency": float(np.sum(e2e) / duration), "accept_length": None})
    if details:
        result.update({"input_lens": [o["prompt_len"] for o in outs], "output_lens": [o["output_len"] for o in outs],
                       "ttfts": [o["ttft"] for o in outs], "itls": [o["itl"] for o in outs],
                       "generated_texts": ["x" * o["output_len"] for o in outs],
                       "errors": [o["error"] for o in outs]})
    return result


# ---- NVIDIA AIPerf ---------------------------------------------------------------------------------
def aiperf_stats(values, unit):
    a = np.asarray(values, dtype=float)
    ps = np.percentile(a, [1, 5, 10, 25, 50, 75, 90, 95, 99])
    out = {"unit": unit, "avg": float(a.mean())}
    out.update({f"p{p}": float(v) for p, v in zip([1, 5, 10, 25, 50, 75, 90, 95, 99], ps)})
    out.update({"min": float(a.min()), "max": float(a.max()), "std": float(a.std())})
    return out


def write_aiperf():
    folder = HERE / "aiperf"
    folder.mkdir(exist_ok=True)
    records = []
    ns = lambda t: int(round((EPOCH + t) * 1e9))      # noqa: E731
    for i, r in enumerate(REQUESTS):
        osl = n_tokens(r)
        start, end = r["start"], r["start"] + latency(r)
        metrics = {"input_sequence_length": {"value": r["prompt"], "unit": "tokens"},
                   "time_to_first_token": {"value": r["ttft"] * 1e3, "unit": "ms"},
                   "request_latency": {"value": latency(r) * 1e3, "unit": "ms"},
                   "output_token_count": {"value": osl, "unit": "tokens"}}
        if r["gaps"]:
            metrics["time_to_second_token"] = {"value": r["gaps"][0] * 1e3, "unit": "ms"}
            metrics["inter_chunk_latency"] = {"value": [g * 1e3 for g in r["gaps"]], "unit": "ms"}
        metrics["output_sequence_length"] = {"value": osl, "unit": "tokens"}
        if osl >= 2:        # InterTokenLatencyMetric: (request_latency - TTFT) / (OSL - 1)
            itl = (latency(r) - r["ttft"]) / (osl - 1)
            metrics["inter_token_latency"] = {"value": itl * 1e3, "unit": "ms"}
            metrics["output_token_throughput_per_user"] = {"value": 1 / itl, "unit": "tokens/sec/user"}
        records.append({"metadata": {"session_num": i, "x_request_id": f"req-{i:04d}", "x_correlation_id": f"corr-{i:04d}",
                                     "conversation_id": f"conv-{i:04d}", "turn_index": 0,
                                     "request_start_ns": ns(start), "request_ack_ns": ns(start + 0.004),
                                     "request_end_ns": ns(end), "worker_id": "worker_0a1b2c3d",
                                     "record_processor_id": "record_processor_4e5f6a7b",
                                     "benchmark_phase": "profiling", "was_cancelled": False,
                                     "cancellation_time_ns": None},
                        "metrics": metrics, "error": None})
    f = FAILED
    records.append({"metadata": {"session_num": 4, "x_request_id": "req-0004", "x_correlation_id": "corr-0004",
                                 "conversation_id": "conv-0004", "turn_index": 0, "request_start_ns": ns(f["start"]),
                                 "request_ack_ns": None, "request_end_ns": ns(f["start"] + 0.010),
                                 "worker_id": "worker_0a1b2c3d", "record_processor_id": "record_processor_4e5f6a7b",
                                 "benchmark_phase": "profiling", "was_cancelled": False, "cancellation_time_ns": None},
                    "metrics": {"error_isl": {"value": f["prompt"], "unit": "tokens"}},
                    "error": {"code": 500, "type": "HTTPError", "message": f["error"]}})
    dump_lines(folder / "profile_export.jsonl", records)

    # profile_export_aiperf.json: display units, benchmark duration = last response - first request
    ok = REQUESTS
    first = min(r["start"] for r in ok)
    last = max(r["start"] + latency(r) for r in ok)
    duration = last - first
    osl = [n_tokens(r) for r in ok]
    itl = [(latency(r) - r["ttft"]) / (n_tokens(r) - 1) for r in ok if n_tokens(r) >= 2]
    icl = [g for r in ok for g in r["gaps"]]
    summary = {
        "request_throughput": {"unit": "requests/sec", "avg": len(ok) / duration},
        "request_latency": aiperf_stats([latency(r) * 1e3 for r in ok], "ms"),
        "request_count": {"unit": "requests", "avg": len(ok)},
        "time_to_first_token": aiperf_stats([r["ttft"] * 1e3 for r in ok], "ms"),
        "time_to_second_token": aiperf_stats([r["gaps"][0] * 1e3 for r in ok if r["gaps"]], "ms"),
        "inter_token_latency": aiperf_stats([x * 1e3 for x in itl], "ms"),
        "output_token_throughput": {"unit": "tokens/sec", "avg": sum(osl) / duration},
        "output_token_throughput_per_user": aiperf_stats([1 / x for x in itl], "tokens/sec/user"),
        "output_sequence_length": aiperf_stats(osl, "tokens"),
        "input_sequence_length": aiperf_stats([r["prompt"] for r in ok], "tokens"),
        "output_token_count": aiperf_stats(osl, "tokens"),
        "min_request_timestamp": {"unit": "ns", "avg": ns(first)},
        "max_response_timestamp": {"unit": "ns", "avg": ns(last)},
        "inter_chunk_latency": aiperf_stats([g * 1e3 for g in icl], "ms"),
        "total_output_tokens": {"unit": "tokens", "avg": sum(osl)},
        "benchmark_duration": {"unit": "sec", "avg": duration},
        "total_isl": {"unit": "tokens", "avg": sum(r["prompt"] for r in ok)},
        "total_osl": {"unit": "tokens", "avg": sum(osl)},
        "error_request_count": {"unit": "requests", "avg": 1},
        "error_isl": aiperf_stats([FAILED["prompt"]], "tokens"),
        "total_error_isl": {"unit": "tokens", "avg": FAILED["prompt"]},
        "input_config": {"endpoint": {"model_names": ["meta-llama/Llama-3.1-8B-Instruct"], "type": "chat",
                                      "streaming": True, "url": "localhost:8000"},
                         "loadgen": {"request_rate": 4.0, "request_count": 5},
                         "cli_command": "aiperf profile --model meta-llama/Llama-3.1-8B-Instruct --endpoint-type chat "
                                        "--streaming --request-rate 4 --request-count 5"},
        "was_cancelled": False,
        "error_summary": [{"error_details": {"code": 500, "type": "HTTPError", "message": FAILED["error"]},
                           "count": 1}],
        "start_time": "2025-12-01T08:00:00.000000",
        "end_time": "2025-12-01T08:00:01.250000",
    }
    (folder / "profile_export_aiperf.json").write_text(json.dumps(summary, indent=2), encoding="utf-8")


# ---- genai-perf (summary only) --------------------------------------------------------------------
def write_genai_perf():
    def block(unit, avg, p50, p90, p99, lo, hi, std):
        d = {"unit": unit, "avg": avg, "p1": lo * 1.01, "p5": lo * 1.03, "p10": lo * 1.06, "p25": p50 * 0.95,
             "p50": p50, "p75": p50 * 1.05, "p90": p90, "p95": (p90 + p99) / 2, "p99": p99, "min": lo, "max": hi,
             "std": std}
        return d
    data = {
        "request_throughput": {"unit": "requests/sec", "avg": 1.96},
        "request_latency": block("ms", 2000.0, 1985.0, 2210.0, 2480.0, 1650.0, 2530.0, 150.0),
        "time_to_first_token": block("ms", 120.0, 110.0, 180.0, 260.0, 60.0, 270.0, 40.0),
        "time_to_second_token": block("ms", 11.0, 10.5, 13.0, 17.0, 8.0, 18.0, 2.0),
        "inter_token_latency": block("ms", 9.45, 9.40, 10.3, 11.6, 8.2, 11.9, 0.6),
        "output_token_throughput": {"unit": "tokens/sec", "avg": 392.0},
        "output_token_throughput_per_user": block("tokens/sec/user", 106.0, 106.4, 118.0, 121.0, 84.0, 122.0, 6.5),
        "output_sequence_length": block("tokens", 200.0, 200.0, 212.0, 224.0, 180.0, 226.0, 9.0),
        "input_sequence_length": block("tokens", 550.0, 550.0, 551.0, 552.0, 548.0, 552.0, 1.0),
        "input_config": {"model_names": ["meta-llama/Llama-3.1-8B-Instruct"],
                         "endpoint": {"type": "chat", "streaming": True, "url": "localhost:8000"},
                         "perf_analyzer": {"stimulus": {"concurrency": 4}, "measurement": {"mode": "request_count",
                                                                                           "num": 100}},
                         "tokenizer": {"name": "meta-llama/Llama-3.1-8B-Instruct"}},
    }
    (HERE / "genai_perf_profile_export_genai_perf.json").write_text(json.dumps(data, indent=2), encoding="utf-8")


# ---- guidellm ---------------------------------------------------------------------------------------
def inverted_cdf(values, weights, p):
    """guidellm's Percentiles.from_pdf: the first value whose cumulative probability reaches p."""
    order = np.argsort(values, kind="stable")
    v, w = np.asarray(values, float)[order], np.asarray(weights, float)[order]
    u, inv = np.unique(v, return_inverse=True)
    ww = np.zeros(len(u))
    np.add.at(ww, inv, w)
    keep = ww > 0
    u, ww = u[keep], ww[keep]
    cdf = np.cumsum(ww / ww.sum())
    return float(u[np.searchsorted(cdf, p, side="left")])


def guidellm_summary(values, weights=None):
    values = np.asarray(values, float)
    weights = np.ones_like(values) if weights is None else np.asarray(weights, float)
    keep = weights > 0
    v, w = values[keep], weights[keep]
    mean = float(np.sum(v * w) / np.sum(w))
    pct = {k: inverted_cdf(v, w, p) for k, p in (("p001", .001), ("p01", .01), ("p05", .05), ("p10", .1),
                                                  ("p25", .25), ("p50", .5), ("p75", .75), ("p90", .9),
                                                  ("p95", .95), ("p99", .99), ("p999", .999))}
    var = float(np.sum((v - mean) ** 2 * w) / np.sum(w))
    return {"mean": mean, "median": pct["p50"], "mode": float(v[np.argmax(w)]), "variance": var,
            "std_dev": var ** 0.5, "min": float(v.min()), "max": float(v.max()), "count": int(round(w.sum())),
            "total_sum": float(np.sum(v * w)), "percentiles": pct, "pdf": None}


def status(summary):
    empty = guidellm_summary([0.0])
    empty.update({"count": 0, "total_sum": 0.0})
    return {"successful": summary, "incomplete": empty, "errored": empty, "total": summary}


def guidellm_request(i, r, t0, end_delay=0.003):
    start = t0 + r["start"]
    first = start + r["ttft"]
    last = start + latency(r)
    n = n_tokens(r)
    iters = len(r["tokens"])
    return {"type_": "generative_request_stats", "request_id": f"r{i}", "response_id": f"chatcmpl-{i}",
            "request_args": None, "output": "x" * n, "reasoning_output": None, "tool_calls": None,
            "info": {"request_id": f"r{i}", "status": "completed", "error": None, "traceback": None,
                     "timings": {"targeted_start": start, "queued": start - 0.001, "dequeued": start - 0.0005,
                                 "scheduled_at": start - 0.0002, "resolve_start": start - 0.0001,
                                 "request_start": start, "first_request_iteration": first,
                                 "first_token_iteration": first, "first_output_token_iteration": first,
                                 "last_token_iteration": last, "last_request_iteration": last,
                                 "request_iterations": iters, "token_iterations": iters,
                                 "request_end": last + end_delay, "resolve_end": last + end_delay + 0.0001,
                                 "finalized": last + end_delay + 0.0002}},
            "input_metrics": {"text_tokens": r["prompt"], "cached_tokens": None},
            "output_metrics": {"text_tokens": n, "cached_tokens": None},
            # computed fields, as model_dump(mode="json") writes them
            "request_start_time": start, "request_end_time": last + end_delay,
            "request_latency": latency(r) + end_delay, "prompt_tokens": r["prompt"], "cached_tokens": None,
            "output_tokens": n, "total_tokens": r["prompt"] + n,
            "time_to_first_token_ms": 1e3 * r["ttft"],
            "time_per_output_token_ms": 1e3 * latency(r) / n,
            "inter_token_latency_ms": None if n <= 1 else 1e3 * sum(r["gaps"]) / (n - 1),
            "tokens_per_second": (r["prompt"] + n) / (latency(r) + end_delay),
            "output_tokens_per_second": n / (latency(r) + end_delay),
            "time_to_first_output_token_ms": 1e3 * r["ttft"],
            "iter_tokens_per_iteration": None if n <= 1 or iters <= 1 else (n - 1) / (iters - 1),
            "output_tokens_per_iteration": n / iters}


def guidellm_benchmark(requests, duration, strategy, t0, *, errored=0, run_index=0):
    reqs = [guidellm_request(i, r, t0) for i, r in enumerate(requests)]
    n = [n_tokens(r) for r in requests]
    lat = [latency(r) for r in requests]
    ttft = [r["ttft"] * 1e3 for r in requests]
    itl = [1e3 * sum(r["gaps"]) / (k - 1) if k > 1 else 0.0 for r, k in zip(requests, n)]
    tpot = [1e3 * L / k for L, k in zip(lat, n)]
    metrics = {
        "request_totals": {"successful": len(requests), "incomplete": 0, "errored": errored,
                           "total": len(requests) + errored},
        "requests_per_second": status(guidellm_summary([len(requests) / duration])),
        "request_concurrency": status(guidellm_summary([float(np.sum(lat) / duration)])),
        "request_latency": status(guidellm_summary([L + 0.003 for L in lat])),
        "prompt_token_count": status(guidellm_summary([r["prompt"] for r in requests])),
        "output_token_count": status(guidellm_summary(n)),
        "time_to_first_token_ms": status(guidellm_summary(ttft)),
        "time_per_output_token_ms": status(guidellm_summary(tpot, n)),
        "inter_token_latency_ms": status(guidellm_summary(itl, [k - 1 for k in n])),
        "output_tokens_per_second": status(guidellm_summary([sum(n) / duration])),
    }
    errored_list = []
    for j in range(errored):
        errored_list.append({"type_": "generative_request_stats", "request_id": f"e{j}",
                             "info": {"request_id": f"e{j}", "status": "errored", "error": FAILED["error"],
                                      "timings": {"request_start": t0 + FAILED["start"], "request_end":
                                                  t0 + FAILED["start"] + 0.01, "resolve_end":
                                                  t0 + FAILED["start"] + 0.0101, "token_iterations": 0}},
                             "input_metrics": {"text_tokens": FAILED["prompt"]}, "output_metrics": {}})
    return {"type_": "generative_benchmark", "id_": f"bench-{run_index}", "run_id": "run-20251201",
            "config": {"id_": f"bench-{run_index}", "run_id": "run-20251201", "run_index": run_index,
                       "strategy": strategy, "constraints": {}, "sample_size": None,
                       "profile": {"type_": "sweep"}, "requests": {"data": ["prompt_tokens=512,output_tokens=5"]},
                       "backend": {"type_": "openai_http", "target": "http://localhost:8000"}, "environment": {}},
            "scheduler_metrics": {"start_time": t0 - 0.05, "request_start_time": t0, "measure_start_time": t0,
                                  "measure_end_time": t0 + duration, "request_end_time": t0 + duration,
                                  "end_time": t0 + duration + 0.05,
                                  "requests_made": {"successful": len(requests), "incomplete": 0,
                                                    "errored": errored, "total": len(requests) + errored}},
            "metrics": metrics,
            "requests": {"successful": reqs, "incomplete": [], "errored": errored_list, "total": None},
            "start_time": t0, "end_time": t0 + duration, "duration": duration,
            "warmup_duration": 0.0, "cooldown_duration": 0.0}


SYNC = [dict(start=0.000, prompt=128, ttft=0.100, gaps=[0.020, 0.020], tokens=[1, 1, 1]),
        dict(start=0.150, prompt=128, ttft=0.110, gaps=[0.020, 0.030], tokens=[1, 1, 1])]


def write_guidellm():
    report = {"metadata": {"version": 2, "guidellm_version": "0.7.3", "python_version": "3.12.3",
                           "platform": "Linux-6.8.0-x86_64-with-glibc2.39"},
              "config": {"target": "http://localhost:8000", "profile": "sweep", "rate": None,
                         "data": ["prompt_tokens=512,output_tokens=5"]},
              "benchmarks": [
                  guidellm_benchmark(SYNC, 0.32, {"type_": "synchronous", "worker_count": 1, "max_concurrency": 1},
                                     EPOCH, run_index=0),
                  guidellm_benchmark(REQUESTS, DURATION, {"type_": "constant", "rate": 4.0, "max_concurrency": None,
                                                          "rampup_duration": 0.0}, EPOCH + 10.0, errored=1,
                                     run_index=1)]}
    (HERE / "guidellm_benchmarks.json").write_text(json.dumps(report), encoding="utf-8")


if __name__ == "__main__":
    write_vllm()
    write_sglang()
    write_aiperf()
    write_genai_perf()
    write_guidellm()
