"""Validate your own server: a benchmark result file beside the book's step model and simulator.

``python -m servingmath.validate RESULTS --model MODEL --gpu GPU [--tp N]`` reads a result
file of ``vllm bench serve``, SGLang's ``bench_serving``, AIPerf/genai-perf or guidellm
(:mod:`servingmath.benchmarks`), and for every load level (a request rate or a concurrency) prints
what the tool measured beside

* the **step model**: TTFT = one prefill of the mean prompt; TPOT and ITL = one decode step of
  the batch the level kept running (Little's law: requests in flight = sum of E2E / duration)
  at the mean context; throughput = that batch over one request's prefill plus decode;
* the **simulator** (:mod:`servingmath.simulate`): the level replayed with its own arrivals
  (the recorded send times where the file has them, else Poisson at the rate or a closed loop
  of the concurrency), its own lengths (per request where saved, else the dataset the file
  names, else fixed at the mean) and the engine's scheduler
  (:func:`servingmath.validation.engine_scheduler`), over several seeds with a 95 % interval;

then the MBU and MFU the measured TPOT and TTFT imply, the knee fitted from the sweep (where TTFT
turns up, :func:`servingmath.validation.fit_knee`) next to the one the model derives (the
concurrency the KV cache and ``max_num_seqs`` hold, or the request rate that saturates the
batch), and writes a figure.

The functions below are what the command runs; chapter 14 ("Validation") walks through one file
with them.

Examples
--------
>>> from pathlib import Path
>>> path = Path(__file__).resolve().parents[2] / "tests/data/benchmarks/vllm_sweep.json"
>>> report = validate_file(path, model="Llama-3.1-8B", gpu="H100", seeds=(0,))
>>> [round(lv["load"]) for lv in report["levels"]], report["levels"][0]["mode"]
([1, 8], 'concurrency')
>>> sorted(report["levels"][0]["metrics"])[:3]
['e2el.mean', 'e2el.median', 'itl.mean']
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

from . import benchmarks, validation
from ._validation import (check_argv, check_instance, check_integer, check_nonnegative, check_positive, check_real,
                          check_seeds)
from .benchmarks import BenchmarkFileError
from .deployment import Deployment
from .hardware import Accelerator, get_accelerator
from .models import get_model

__all__ = ["level_workload", "level_arrivals", "step_model_predictions", "simulate_level",
           "implied_efficiencies", "knees", "saturation", "validate_file", "format_report", "write_figure",
           "plot_report", "main"]

#: The metrics compared: the book's names (:meth:`servingmath.benchmarks.LoadLevel.book_metrics`),
#: the tool's summary name that means the same where the file has no per-request data.
METRICS = [
    ("ttft.mean", "TTFT mean", "s"), ("ttft.median", "TTFT median", "s"), ("tpot.mean", "TPOT mean", "s"),
    ("itl.mean", "ITL mean", "s"), ("itl.median", "ITL median", "s"), ("e2el.mean", "E2E mean", "s"),
    ("e2el.median", "E2E median", "s"), ("output_throughput", "output tok/s", "tok/s"),
    ("request_throughput", "requests/s", "req/s"),
]

# tool summary keys that mean the book's metric exactly, per tool (from benchmarks' comparison table,
# plus the SGLang/vLLM summaries whose definitions match the book's)
_SUMMARY = {
    "vllm": {"ttft.mean": "mean_ttft", "ttft.median": "median_ttft", "tpot.mean": "mean_tpot",
             "itl.mean": "mean_itl", "itl.median": "median_itl", "e2el.mean": "mean_e2el",
             "e2el.median": "median_e2el", "output_throughput": "output_throughput",
             "request_throughput": "request_throughput"},
    "sglang": {"ttft.mean": "mean_ttft", "ttft.median": "median_ttft", "itl.mean": "mean_itl",
               "itl.median": "median_itl", "e2el.mean": "mean_e2e_latency", "e2el.median": "median_e2e_latency",
               "output_throughput": "output_throughput", "request_throughput": "request_throughput"},
    "aiperf": {"ttft.mean": "time_to_first_token.avg", "ttft.median": "time_to_first_token.p50",
               "tpot.mean": "inter_token_latency.avg", "itl.mean": "inter_chunk_latency.avg",
               "e2el.mean": "request_latency.avg", "output_throughput": "output_token_throughput.avg",
               "request_throughput": "request_throughput.avg"},
    "genai-perf": {"ttft.mean": "time_to_first_token.avg", "tpot.mean": "inter_token_latency.avg",
                   "e2el.mean": "request_latency.avg", "output_throughput": "output_token_throughput.avg",
                   "request_throughput": "request_throughput.avg"},
    "guidellm": {"ttft.mean": "time_to_first_token.mean"},
}


def _measured(level) -> dict:
    """The book's metrics of a level: recomputed from per-request data, else the tool's equivalents."""
    out = {}
    try:
        out.update(level.book_metrics(percentiles=(50, 99)))
    except ValueError:
        pass
    for book, tool in _SUMMARY.get(level.tool, {}).items():
        if book not in out and tool in level.summary:
            out[book] = float(level.summary[tool])
    if "request_throughput" not in out and level.n_completed and level.duration:
        out["request_throughput"] = level.n_completed / level.duration
    if "mean_concurrency" not in out and "e2el.mean" in out and "request_throughput" in out:
        out["mean_concurrency"] = out["e2el.mean"] * out["request_throughput"]   # Little's law
    return {k: v for k, v in out.items() if isinstance(v, float) and math.isfinite(v)}


def _mean_lengths(level):
    """(mean prompt, mean output) tokens of a level."""
    if level.prompt_lens is not None and level.output_lens is not None and level.output_lens.size:
        return float(np.mean(level.prompt_lens)), float(np.mean(level.output_lens))
    s, n = level.summary, level.n_completed
    if n and "total_output_tokens" in s:
        inp = s.get("total_input_tokens")
        return (float(inp) / n if inp else None), float(s["total_output_tokens"]) / n
    for a, b in (("input_sequence_length.avg", "output_sequence_length.avg"),):
        if b in s:
            return (float(s[a]) if a in s else None), float(s[b])
    return None, None


def level_workload(level, n_requests: int, seed: int = 0):
    """The requests of a level to replay: its own lengths if saved, else the dataset its metadata
    names (SGLang/vLLM ``random`` with its range ratio; ShareGPT rescaled to the measured means),
    else fixed at the measured means.

    Derived in the chapter "Validation: how good is the model?" (notebooks/14_validation.ipynb).

    Returns
    -------
    (Workload, str)
        The workload and how it was built.

    Raises
    ------
    ValueError
        When the file gives neither per-request lengths nor mean lengths.

    Examples
    --------
    >>> sample = Path(__file__).resolve().parents[2] / "tests/data/benchmarks/vllm_sweep.json"
    >>> level = benchmarks.read_vllm(sample)[0]          # concurrency 1, summary only
    >>> level_workload(level, 10)
    (Workload('fixed 490/119', 10 requests, mean prompt 490 tokens, mean output 119 tokens), "fixed at the file's means 490 in, 119 out")
    """
    from .workloads import Uniform, Workload

    _check_level(level)
    n_requests = check_integer("n_requests", n_requests, minimum=1, scalar=True)
    seed = check_integer("seed", seed, minimum=0, scalar=True)
    if level.prompt_lens is not None and level.output_lens is not None and level.output_lens.size:
        keep = level.output_lens >= 1
        w = Workload.from_lists(np.maximum(level.prompt_lens[keep], 1), level.output_lens[keep], name="as recorded")
        return w, f"the file's own {int(keep.sum())} requests"
    mean_in, mean_out = _mean_lengths(level)
    if mean_out is None:
        raise ValueError(f"{level.file} (level {level.index}) gives neither per-request lengths nor the total "
                         "input and output tokens: the lengths cannot be replayed")
    mean_in = mean_in if mean_in else 1.0
    meta = level.metadata or {}
    dataset = str(meta.get("dataset_name") or "").lower()
    if dataset == "random" and meta.get("random_input_len"):
        il, ol, r = int(meta["random_input_len"]), int(meta["random_output_len"]), float(meta.get("random_range_ratio") or 0)
        if level.tool == "sglang":      # SGLang: uniform in [max(1, L r), L]
            p, o = Uniform(max(int(il * r), 1), il), Uniform(max(int(ol * r), 1), ol)
            how = f"SGLang random: uniform {max(int(il * r), 1)}..{il} in, {max(int(ol * r), 1)}..{ol} out"
        else:                           # vLLM: uniform in [L (1 - r), L (1 + r)]
            p = Uniform(max(int(il * (1 - r)), 1), max(int(il * (1 + r)), 1))
            o = Uniform(max(int(ol * (1 - r)), 1), max(int(ol * (1 + r)), 1))
            how = f"vLLM random: {il} in, {ol} out, range ratio {r:g}"
        return Workload.sample(n_requests, p, o, seed=seed, name="random"), how
    if dataset == "sharegpt":
        from .workloads import dataset_lengths

        base = Workload.from_dataset("sharegpt4-vllm-filter", n_requests, seed)
        d = dataset_lengths("sharegpt4-vllm-filter")
        sp, so = mean_in / d.prompt["mean"], mean_out / d.output["mean"]
        w = Workload(np.maximum(1, np.rint(base.prompt_lens * sp)).astype(int),
                     np.maximum(1, np.rint(base.output_lens * so)).astype(int), name="sharegpt (rescaled)")
        return w, f"ShareGPT: sharegpt4-vllm-filter's shape rescaled to the file's means {mean_in:.0f} in, {mean_out:.0f} out"
    return (Workload.fixed(n_requests, prompt_len=max(int(round(mean_in)), 1), output_len=max(int(round(mean_out)), 1)),
            f"fixed at the file's means {mean_in:.0f} in, {mean_out:.0f} out")


def level_arrivals(level, n_requests: int):
    """The arrival process of a level: its recorded send times, a Poisson rate, a closed loop or all at once.

    Derived in the chapter "Validation: how good is the model?" (notebooks/14_validation.ipynb).

    Returns
    -------
    (arrivals, str)

    Raises
    ------
    ValueError
        For a load the simulator does not replay (guidellm's throughput mode without recorded
        times).

    Examples
    --------
    >>> sample = Path(__file__).resolve().parents[2] / "tests/data/benchmarks/vllm_sweep.json"
    >>> level = benchmarks.read_vllm(sample)[0]
    >>> level_arrivals(level, 10)
    (ClosedLoop(clients=1, think_time=0.0, think_time_distribution='fixed'), 'closed loop of 1 client')
    """
    from .workloads import CappedPoisson, ClosedLoop, Poisson, Timestamps

    _check_level(level)
    n_requests = check_integer("n_requests", n_requests, minimum=1, scalar=True)
    if level.start_times is not None and level.start_times.size >= n_requests:
        return Timestamps(np.sort(level.start_times)[:n_requests]), "the file's recorded send times"
    mode = level.mode
    if mode == "concurrency" or mode == "synchronous":
        c = int(level.concurrency or 1)
        return ClosedLoop(clients=c), f"closed loop of {c} client{'s' if c > 1 else ''}"
    if mode in ("rate", "rate+concurrency") and level.request_rate and math.isfinite(level.request_rate):
        burst = float((level.metadata or {}).get("burstiness") or 1.0)
        if mode == "rate+concurrency":
            c = int(level.concurrency)
            return (CappedPoisson(float(level.request_rate), c, burstiness=burst),
                    f"Poisson {level.request_rate:g} req/s, at most {c} in flight (the client's semaphore)")
        return Poisson(float(level.request_rate), burstiness=burst), f"Poisson {level.request_rate:g} req/s"
    if mode == "all-at-once" or (mode == "rate" and level.request_rate is not None
                                 and math.isinf(level.request_rate)):
        return Timestamps(np.zeros(n_requests)), "all requests at once"
    raise ValueError(f"{level.file} (level {level.index}): load mode {mode!r} is not replayed by the simulator")


def _check_level(level):
    return check_instance("level", level, benchmarks.LoadLevel, "LoadLevel (servingmath.benchmarks.read_benchmark)")


def _check_scheduler(scheduler):
    if not isinstance(scheduler, dict) or not {"max_seqs", "policy", "token_budget"} <= set(scheduler):
        raise TypeError(f"scheduler must be engine_scheduler()'s dict (policy, token_budget, max_seqs), "
                        f"got {scheduler!r:.60}")
    return scheduler


_NO_RUNNING = object()


def _check_lengths(mean_in, mean_out, running=_NO_RUNNING):
    for name, value in (("mean_in", mean_in), ("mean_out", mean_out)):
        check_positive(name, value, scalar=True)
        if float(value) > 1e9:
            raise ValueError(f"{name} must be at most 1e9 tokens, got {value!r}")
    if running is not _NO_RUNNING:
        check_nonnegative("running", running, scalar=True)
        if float(running) > 1e9:
            raise ValueError(f"running must be at most 1e9 requests in flight, got {running!r}")


def _load_value(level):
    if level.mode in ("concurrency", "synchronous"):
        return float(level.concurrency or 1)
    if level.request_rate is not None and math.isfinite(level.request_rate):
        return float(level.request_rate)
    return float("inf")


def _deployment(model, gpu, tp, weight_dtype, kv_dtype, efficiency, memory_fraction):
    acc = get_accelerator(gpu)
    cd = validation.compute_dtype_for(weight_dtype, acc)[0]
    acc, _ = validation.with_tensor_peak(acc, cd)
    model = get_model(model)
    return Deployment.build(model, acc, tensor_parallel=tp, weight_dtype=weight_dtype, kv_dtype=kv_dtype,
                            compute_dtype=cd, gpu_memory_utilization=memory_fraction,
                            **efficiency.options(n_layers=model.n_layers, tensor_parallel=tp))


def step_model_predictions(dep, measured: dict, mean_in: float, mean_out: float, running: float, *,
                           max_batch=None, offered_rate=None) -> dict:
    """The step model's TTFT, TPOT/ITL, E2E and throughputs for a level (seconds, per second).

    Derived in the chapter "Validation: how good is the model?" (notebooks/14_validation.ipynb).

    TTFT = one prefill of the mean prompt (no queueing); a decode step of B sequences at the mean
    context L_p + L_o / 2 for TPOT and ITL, with B = the requests in flight (``running``) capped
    at the batch the engine holds (``max_batch``: the rest wait); E2E = TTFT + (L_o - 1) steps;
    throughput = B / E2E requests per second (x L_o for tokens), at most the ``offered_rate`` of
    an open-loop level (a stable server serves what it is offered).

    Examples
    --------
    >>> dep = Deployment.build("Llama-3.1-8B", "H100", setting="realistic")
    >>> p = step_model_predictions(dep, {}, 1000, 200, 4)
    >>> round(p["ttft.mean"] * 1e3, 1), round(p["tpot.mean"] * 1e3, 2), round(p["request_throughput"], 2)
    (29.2, 6.6, 2.98)
    """
    from .decode import decode_step_time
    from .prefill import prefill_time

    check_instance("dep", dep, Deployment)
    check_instance("measured", measured, dict)
    _check_lengths(mean_in, mean_out, running)
    lp, lo = max(int(round(mean_in)), 1), max(int(round(mean_out)), 1)
    b = max(int(round(running)), 1)
    if max_batch is not None:
        b = min(b, check_integer("max_batch", max_batch, minimum=1, scalar=True))
    if offered_rate is not None and not check_real("offered_rate", offered_rate) > 0:
        raise ValueError(f"offered_rate must be > 0 requests/s (inf: all at once), got {offered_rate!r}")
    ttft = float(prefill_time(dep, lp))
    step = float(decode_step_time(dep, b, lp + lo // 2))
    e2e = ttft + (lo - 1) * step
    rate = b / e2e
    if offered_rate is not None and math.isfinite(offered_rate):
        rate = min(rate, float(offered_rate))
    return {"ttft.mean": ttft, "ttft.median": ttft, "tpot.mean": step, "itl.mean": step, "itl.median": step,
            "e2el.mean": e2e, "e2el.median": e2e, "request_throughput": rate, "output_throughput": rate * lo}


def simulate_level(level, dep, scheduler: dict, *, seeds=(0, 1, 2), max_requests=4000) -> dict:
    """The simulator's metrics for a level: per metric mean, low, high over the seeds (a 95 % Student-t
    interval of the seeds' mean, its lower end clipped at 0: every metric is positive).

    Derived in the chapter "Validation: how good is the model?" (notebooks/14_validation.ipynb).

    ``scheduler``: :func:`servingmath.validation.engine_scheduler`'s dict (policy, token budget,
    max sequences).

    Examples
    --------
    >>> sample = Path(__file__).resolve().parents[2] / "tests/data/benchmarks/vllm_sweep.json"
    >>> level = benchmarks.read_vllm(sample)[0]
    >>> dep = Deployment.build("Llama-3.1-8B", "H100", setting="realistic")
    >>> scheduler = validation.engine_scheduler("vLLM 0.11", "H100", "Llama-3.1-8B")
    >>> s = simulate_level(level, dep, scheduler, seeds=(0,))
    >>> round(s["ttft.mean"]["mean"] * 1e3, 1), round(s["tpot.mean"]["mean"] * 1e3, 2), s["_notes"]["requests"]
    (14.4, 6.4, 10)
    """
    from . import simulate as sim

    _check_level(level)
    check_instance("dep", dep, Deployment)
    _check_scheduler(scheduler)
    seeds = check_seeds("seeds", seeds)
    max_requests = check_integer("max_requests", max_requests, minimum=1, scalar=True)
    n = int(min(level.n_completed or max(200, 20 * int(level.concurrency or 10)), max_requests))
    if level.prompt_lens is not None and level.output_lens is not None:
        n = int(min(n, int(np.sum(level.output_lens >= 1))))
    server = sim.Server(dep)
    runs = []
    notes = {}
    for seed in seeds:
        workload, how = level_workload(level, n, seed)
        workload = workload.head(min(n, len(workload)))
        arrivals, arr = level_arrivals(level, len(workload))
        if scheduler["policy"] == "chunked":
            policy = sim.ChunkedPrefill(token_budget=max(scheduler["token_budget"], scheduler["max_seqs"]),
                                        max_batch_size=scheduler["max_seqs"])
        else:
            policy = sim.ContinuousBatching(max_batch_size=scheduler["max_seqs"],
                                            max_prefill_tokens=max(scheduler["token_budget"],
                                                                   int(workload.prompt_lens.max())),
                                            scheduler_steps=scheduler.get("scheduler_steps", 1))
        result = sim.simulate(sim.SimulationConfig(server=server, workload=workload, arrivals=arrivals,
                                                   policy=policy), seed=int(seed))
        m = result.metrics()
        runs.append({"ttft.mean": m.ttft.mean, "ttft.median": m.ttft.p50, "tpot.mean": m.tpot.mean,
                     "itl.mean": m.itl.mean, "itl.median": m.itl.p50, "e2el.mean": m.e2e.mean,
                     "e2el.median": m.e2e.p50, "output_throughput": m.output_throughput,
                     "request_throughput": m.request_throughput,
                     "mean_concurrency": float(np.sum(result.records.e2e)) / m.duration})
        notes = {"workload": how, "arrivals": arr, "requests": len(workload)}
    out = {}
    t = {1: 0.0, 2: 12.706, 3: 4.303, 4: 3.182, 5: 2.776}.get(len(runs), 2.262)
    for key in runs[0]:
        values = np.array([r[key] for r in runs], dtype=float)
        half = t * float(values.std(ddof=1)) / math.sqrt(len(values)) if len(values) > 1 else 0.0
        out[key] = {"mean": float(values.mean()), "low": max(float(values.mean() - half), 0.0),
                    "high": float(values.mean() + half)}
    out["_notes"] = notes
    return out


def implied_efficiencies(dep, measured: dict, mean_in: float, mean_out: float, running: float) -> dict:
    """MBU from the measured TPOT (else median ITL) at the running batch; MFU from the measured TTFT
    (a prefill of the mean prompt: an upper-bound time, queueing included, so a lower-bound MFU).

    Derived in the chapter "Validation: how good is the model?" (notebooks/14_validation.ipynb).

    Examples
    --------
    >>> dep = Deployment.build("Llama-3.1-8B", "H100", setting="realistic")
    >>> e = implied_efficiencies(dep, {"tpot.mean": 0.0158, "ttft.median": 0.141}, 1000, 200, 4)
    >>> round(e["mbu"], 3), round(e["mfu"], 3)
    (0.294, 0.102)
    """
    check_instance("dep", dep, Deployment)
    check_instance("measured", measured, dict)
    _check_lengths(mean_in, mean_out, running)
    out = {}
    lp, lo = max(int(round(mean_in)), 1), max(int(round(mean_out)), 1)
    step = measured.get("tpot.mean", measured.get("itl.median"))
    if step:
        e = validation.implied_efficiency(dep, step, batch_size=max(int(round(running)), 1),
                                          context_len=lp + lo // 2)
        out["mbu"], out["decode_fraction_of_bound"] = float(e.mbu), float(e.fraction_of_bound)
    ttft = measured.get("ttft.median", measured.get("ttft.mean"))
    if ttft:
        e = validation.implied_efficiency(dep, ttft, phase="prefill", prompt_len=lp)
        out["mfu"], out["prefill_fraction_of_bound"] = float(e.mfu), float(e.fraction_of_bound)
    return out


def knees(levels: list, *, dep=None, scheduler=None) -> dict:
    """The knee of the sweep: fitted from the measured TTFT and from the simulated one
    (:func:`servingmath.validation.fit_knee`, 4 levels or more), and derived from the model.

    Derived in the chapter "Validation: how good is the model?" (notebooks/14_validation.ipynb).

    Derived (:func:`saturation`): for a concurrency sweep, the sequences the engine holds at
    once, min(max_num_seqs, KV-cache tokens / (mean prompt + mean output)) -- beyond it clients
    queue and TTFT grows by (C - B) / X (Little's law); for a rate sweep, the request rate that
    batch sustains.

    Examples
    --------
    >>> sample = Path(__file__).resolve().parents[2] / "tests/data/benchmarks/vllm_sweep.json"
    >>> report = validate_file(sample, model="Llama-3.1-8B", gpu="H100", seeds=(0,))
    >>> knees(report["levels"])       # two levels: too few to fit a knee (4 or more)
    {'fitted': None, 'simulated': None, 'derived': None, 'axis': 'concurrency'}
    """

    if isinstance(levels, (str, bytes)) or not isinstance(levels, (list, tuple)) \
            or not all(isinstance(lv, dict) and "measured_key" in lv for lv in levels):
        raise TypeError(f"levels must be a list of the level entries of validate_file()['levels'], "
                        f"got {levels!r:.60}")
    out = {"fitted": None, "simulated": None, "derived": None, "axis": None}
    usable = [lv for lv in levels if "ttft" in lv["measured_key"]]
    if not usable:
        return out
    axis = "concurrency" if usable[0]["mode"] in ("concurrency", "synchronous") else "request rate"
    out["axis"] = axis
    pts = sorted((lv["load"], lv["metrics"][lv["measured_key"]]["measured"], lv["metrics"][lv["measured_key"]].get(
        "simulator")) for lv in usable if math.isfinite(lv["load"]))
    if len(pts) >= 4:
        x = [p[0] for p in pts]
        out["fitted"] = validation.fit_knee(x, [p[1] for p in pts])["knee"]
        if all(p[2] is not None for p in pts):
            out["simulated"] = validation.fit_knee(x, [p[2] for p in pts])["knee"]
    if dep is not None and scheduler is not None:
        lv = usable[0]
        b, rate = saturation(dep, scheduler, lv["mean_in"], lv["mean_out"])
        out["derived"] = float(b) if axis == "concurrency" else rate
        out["derived_batch"], out["derived_rate"] = b, rate
    return out


def saturation(dep, scheduler: dict, mean_in: float, mean_out: float) -> tuple:
    """(B, X_max): the sequences an engine holds at once and the request rate that batch sustains.

    Derived in the chapter "Validation: how good is the model?" (notebooks/14_validation.ipynb).

    B = min(max_num_seqs, KV-cache tokens / (L_p + L_o)). In steady state each request costs its
    prefill and L_o shares of a decode step of B sequences, so
    X_max = 1 / (T_prefill + L_o T_decode(B, L_p + L_o / 2) / B); with chunked prefill the
    prompt's weight read rides on the decode steps and only its compute counts in T_prefill.

    >>> dep = Deployment.build("Llama-3.1-8B", "H100", setting="realistic")
    >>> b, x = saturation(dep, validation.engine_scheduler("vLLM 0.11", "H100", "Llama-3.1-8B"), 1000, 200)
    >>> b, round(x, 1)
    (355, 21.5)
    """
    if not isinstance(dep, Deployment):
        raise TypeError(f"dep must be a Deployment (Deployment.build(model, accelerator, ...)), got {dep!r}")
    _check_scheduler(scheduler)
    _check_lengths(mean_in, mean_out)
    from .decode import decode_step_time
    from .memory import max_kv_tokens
    from .prefill import prefill_step_parts, prefill_time

    lp, lo = max(int(round(mean_in)), 1), max(int(round(mean_out)), 1)
    wall = int(max_kv_tokens(dep)) // (lp + lo)
    b = max(1, min(int(scheduler["max_seqs"]), wall))
    if scheduler["policy"] == "chunked":
        parts = prefill_step_parts(dep, lp)
        t_p = float(parts["linear_compute"]) + float(parts["attention_compute"])
    else:
        t_p = float(prefill_time(dep, lp))
    t_d = float(decode_step_time(dep, b, lp + lo // 2))
    return b, 1.0 / (t_p + lo * t_d / b)


def validate_file(path, *, model, gpu, tp=1, weight_dtype="bf16", kv_dtype=None, engine=None,
                  setting="realistic", seeds=(0, 1, 2), max_requests=4000, tool=None) -> dict:
    """Everything the command prints, as a dict: per load level the measured, step-model and simulated
    metrics, the implied efficiencies, and the knees.

    Derived in the chapter "Validation: how good is the model?" (notebooks/14_validation.ipynb).

    Parameters
    ----------
    path : str or Path
        A result file (or AIPerf artifacts folder).
    model, gpu : str
        Catalog names or the spellings benchmarks use (:func:`servingmath.validation.resolve_model`,
        :func:`~servingmath.validation.resolve_accelerator`).
    tp : int
        Tensor-parallel degree.
    weight_dtype, kv_dtype : str
        Default bf16 weights; the KV cache in the weights' dtype when 16-bit, else bf16.
    engine : str, optional
        The serving engine and version, for its scheduler defaults
        (:func:`servingmath.validation.engine_scheduler`). Default: SGLang for a bench_serving file,
        else vLLM 0.11 (AIPerf, genai-perf and guidellm can measure any server: say which).
    setting : {"realistic", "physical", "calibrated"}
        The efficiencies of the predictions: the book's fixed guess
        (:data:`servingmath.validation.BASELINE`), the bound, or the accelerator family's
        calibration on the book's published measurements
        (:func:`servingmath.validation.book_calibration`; the pooled fit for a family they lack,
        and the report's notes say which).
    seeds : sequence of int
        Simulator seeds.
    max_requests : int
        Requests replayed per level at most (default 4000: the whole run of most files; an
        overloaded level's queue grows with the run, so a shorter replay under-predicts it).

    Raises
    ------
    BenchmarkFileError
        For a file no importer can read (the message names what is missing).
    KeyError
        For a model or accelerator that does not resolve.

    Examples
    --------
    >>> sample = Path(__file__).resolve().parents[2] / "tests/data/benchmarks/vllm_sweep.json"
    >>> report = validate_file(sample, model="Llama-3.1-8B", gpu="H100", seeds=(0,))
    >>> [(lv["mode"], lv["load"], lv["requests"]) for lv in report["levels"]]
    [('concurrency', 1.0, 10), ('concurrency', 8.0, 40)]
    """
    seeds = check_seeds("seeds", seeds)
    if not isinstance(gpu, (str, Accelerator)) or not str(getattr(gpu, "name", gpu)).strip():
        raise TypeError(f"gpu must be an accelerator name such as 'H100' (or an Accelerator), got {gpu!r:.60}")
    levels = benchmarks.read_benchmark(path, tool=tool)
    if engine is None:
        engine = "SGLang" if levels and levels[0].tool == "sglang" else "vLLM 0.11"
    acc, acc_note = validation.resolve_accelerator(gpu)
    mod, mod_note, implied = validation.resolve_model(model)
    wd = validation.parse_dtype(weight_dtype)[0] or implied or "bf16"
    kd = validation.parse_dtype(kv_dtype)[0] if kv_dtype else (wd if wd in ("fp16", "bf16") else "bf16")
    expert_notes = []
    if mod.expert_dtype is not None:   # a checkpoint that quantises only its experts (gpt-oss): as the loader reads it
        mod, wd = validation.expert_dtypes(mod, wd, bool(weight_dtype), expert_notes)
    if setting not in ("realistic", "physical", "calibrated"):
        raise ValueError(f"setting must be 'realistic', 'physical' or 'calibrated', got {setting!r}")
    efficiency = validation.BASELINE if setting == "realistic" else validation.PHYSICAL
    calibration_note = None
    if setting == "calibrated":
        fitted, pooled, rows = validation.book_calibration()
        family = validation.accelerator_family(acc)
        efficiency, status = validation.family_efficiency(family, fitted, pooled)
        calibration_note = (f"calibrated: family {family}, {status} (MBU {efficiency.mbu:.2f}, MFU "
                            f"{efficiency.mfu:.2f}, {efficiency.step_overhead * 1e3:.2f} ms per step; fitted on "
                            f"{rows} rows of the book's published measurements, chapter 14)")
    scheduler = validation.engine_scheduler(engine, acc, mod, tensor_parallel=int(tp))
    frac = validation.engine_memory_fraction(scheduler, mod, acc, wd, int(tp))
    dep = _deployment(mod, acc, int(tp), wd, kd, efficiency, frac)
    report = {"file": Path(path).name, "tool": levels[0].tool if levels else None, "model": mod.name,
              "accelerator": acc.name, "tensor_parallel": int(tp), "weight_dtype": wd, "kv_dtype": kd,
              "setting": setting, "scheduler": scheduler, "notes": [acc_note, mod_note] + expert_notes, "levels": []}
    if calibration_note:
        report["calibration"] = calibration_note
    for level in levels:
        measured = _measured(level)
        mean_in, mean_out = _mean_lengths(level)
        entry = {"index": level.index, "mode": level.mode, "load": _load_value(level),
                 "requests": level.n_completed, "mean_in": mean_in or 1.0, "mean_out": mean_out, "metrics": {},
                 "notes": list(level.notes)}
        if mean_out is None:
            entry["error"] = "no lengths in the file: nothing to predict"
            report["levels"].append(entry)
            continue
        running = measured.get("mean_concurrency") or (level.concurrency or 1)
        wall, _ = saturation(dep, scheduler, entry["mean_in"], mean_out)
        steps = step_model_predictions(dep, measured, entry["mean_in"], mean_out, running, max_batch=wall,
                                       offered_rate=level.request_rate if level.mode == "rate" else None)
        try:
            simulated = simulate_level(level, dep, scheduler, seeds=seeds, max_requests=max_requests)
            entry["simulation"] = simulated.pop("_notes")
        except ValueError as exc:
            simulated, entry["simulation"] = {}, {"error": str(exc)}
        for key, label, unit in METRICS:
            if key not in measured:
                continue
            row = {"label": label, "unit": unit, "measured": measured[key], "step_model": steps.get(key)}
            if key in simulated:
                row.update(simulator=simulated[key]["mean"], simulator_low=simulated[key]["low"],
                           simulator_high=simulated[key]["high"])
            entry["metrics"][key] = row
        entry["measured_key"] = "ttft.median" if "ttft.median" in entry["metrics"] else (
            "ttft.mean" if "ttft.mean" in entry["metrics"] else "")
        entry["running"] = float(running)
        entry["implied"] = implied_efficiencies(dep, measured, entry["mean_in"], mean_out, running)
        report["levels"].append(entry)
    groups = {}
    for entry, level in zip(report["levels"], levels):
        if "error" not in entry:
            meta = level.metadata or {}
            key = (entry["mode"] in ("concurrency", "synchronous"), meta.get("dataset_name"),
                   meta.get("random_input_len"), meta.get("random_output_len"))
            groups.setdefault(key, []).append(entry)
    biggest = max(groups.values(), key=len) if groups else []
    report["knee"] = knees(biggest, dep=dep, scheduler=scheduler)
    report["knee"]["levels"] = [e["index"] for e in biggest]
    return report


def _fmt(value, unit):
    if value is None:
        return "-"
    if unit == "s":
        return f"{value * 1e3:,.1f} ms" if value < 100 else f"{value:,.1f} s"
    return f"{value:,.1f}"


def format_report(report: dict) -> str:
    """The report as text: one table per load level, then the implied efficiencies and the knee.

    Derived in the chapter "Validation: how good is the model?" (notebooks/14_validation.ipynb).

    Examples
    --------
    >>> sample = Path(__file__).resolve().parents[2] / "tests/data/benchmarks/vllm_sweep.json"
    >>> report = validate_file(sample, model="Llama-3.1-8B", gpu="H100", seeds=(0,))
    >>> print(format_report(report).splitlines()[0])
    vllm_sweep.json (vllm): Llama-3.1-8B on 1 x H100-SXM5-80GB, weights bf16, KV bf16, setting 'realistic'
    """
    if not isinstance(report, dict) or not {"file", "tool", "model", "scheduler", "levels"} <= set(report):
        raise TypeError(f"report must be validate_file()'s dict, got {report!r:.60}")
    s = report["scheduler"]
    lines = [f"{report['file']} ({report['tool']}): {report['model']} on {report['tensor_parallel']} x "
             f"{report['accelerator']}, weights {report['weight_dtype']}, KV {report['kv_dtype']}, "
             f"setting '{report['setting']}'",
             f"scheduler: {s['label']}"] + ([report["calibration"]] if report.get("calibration") else [])
    for entry in report["levels"]:
        load = (f"concurrency {entry['load']:g}" if entry["mode"] in ("concurrency", "synchronous")
                else f"rate {entry['load']:g} req/s" if math.isfinite(entry["load"]) else entry["mode"])
        lines.append("")
        count = "?" if entry["requests"] is None else entry["requests"]
        lines.append(f"level {entry['index']}: {load}, {count} requests, mean {entry['mean_in']:.0f} in / "
                     f"{entry['mean_out']:.0f} out tokens" + (f", {entry['running']:.1f} in flight"
                                                             if "running" in entry else ""))
        if "error" in entry:
            lines.append(f"  {entry['error']}")
            continue
        sim = entry.get("simulation", {})
        if "error" in sim:
            lines.append(f"  simulator: {sim['error']}")
        else:
            lines.append(f"  simulated: {sim.get('requests')} requests, {sim.get('workload')}, {sim.get('arrivals')}")
        lines.append(f"  {'metric':14s} {'measured':>12s} {'step model':>12s} {'simulator':>12s} {'95% interval':>23s}")
        for key, row in entry["metrics"].items():
            interval = ""
            if row.get("simulator") is not None:
                interval = f"{_fmt(row['simulator_low'], row['unit'])} - {_fmt(row['simulator_high'], row['unit'])}"
            lines.append(f"  {row['label']:14s} {_fmt(row['measured'], row['unit']):>12s} "
                         f"{_fmt(row['step_model'], row['unit']):>12s} {_fmt(row.get('simulator'), row['unit']):>12s} "
                         f"{interval:>23s}")
        imp = entry.get("implied", {})
        if imp:
            parts = []
            if "mbu" in imp:
                parts.append(f"implied MBU {imp['mbu']:.2f} (decode at {imp['decode_fraction_of_bound']:.2f} of its bound)")
            if "mfu" in imp:
                parts.append(f"implied MFU {imp['mfu']:.2f} (TTFT at {imp['prefill_fraction_of_bound']:.2f} of the "
                             "prefill bound)")
            lines.append("  " + "; ".join(parts))
    k = report["knee"]
    lines.append("")
    if k.get("axis") is None:
        lines.append("knee: no TTFT in the file")
    else:
        unit = "" if k["axis"] == "concurrency" else " req/s"
        fitted = f"{k['fitted']:.3g}{unit}" if k["fitted"] is not None else "not fitted (fewer than 4 levels)"
        simulated = f"{k['simulated']:.3g}{unit}" if k["simulated"] is not None else "-"
        derived = f"{k['derived']:.3g}{unit}" if k["derived"] is not None else "-"
        lines.append(f"knee in TTFT vs {k['axis']} (levels {', '.join(map(str, k['levels']))}): fitted from the "
                     f"sweep {fitted}; from the simulated sweep {simulated}; derived {derived} "
                     f"({k.get('derived_batch', '-')} sequences held at once)")
    return "\n".join(lines)


def write_figure(report: dict, path, *, levels=None) -> Path:
    """Measured (markers), step model (dashed) and simulator (line, 95 % band) against the load:

    Derived in the chapter "Validation: how good is the model?" (notebooks/14_validation.ipynb).
    TTFT, TPOT/ITL and output throughput, written to ``path``. Returns the path written."""
    import matplotlib

    if "matplotlib.pyplot" not in sys.modules:      # the command line: draw without a display
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = plot_report(report, levels=levels)
    path = Path(path)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def plot_report(report: dict, *, levels=None):
    """The figure of :func:`write_figure` as a matplotlib Figure (``levels``: the indices to draw,

    Derived in the chapter "Validation: how good is the model?" (notebooks/14_validation.ipynb).
    default the levels of the knee's sweep). Returns the Figure."""
    import matplotlib.pyplot as plt

    chosen = report["knee"].get("levels") if levels is None else levels
    levels = [e for e in report["levels"] if "error" not in e and math.isfinite(e["load"])
              and (not chosen or e["index"] in chosen)]
    panels = [("ttft", ["ttft.median", "ttft.mean"], "TTFT (ms)", 1e3),
              ("decode", ["tpot.mean", "itl.median", "itl.mean"], "TPOT / ITL (ms)", 1e3),
              ("throughput", ["output_throughput"], "output tokens/s", 1.0)]
    fig, axes = plt.subplots(1, 3, figsize=(11, 3.6))
    xlabel = "concurrency" if levels and levels[0]["mode"] in ("concurrency", "synchronous") else "request rate (req/s)"
    for ax, (_, keys, label, scale) in zip(axes, panels):
        key = next((k for k in keys if all(k in e["metrics"] for e in levels)), None)
        if key is None or not levels:
            ax.set_axis_off()
            continue
        x = np.array([e["load"] for e in levels])
        order = np.argsort(x)
        rows = [levels[i]["metrics"][key] for i in order]
        x = x[order]
        ax.plot(x, [r["measured"] * scale for r in rows], "o", color="black", label="measured")
        ax.plot(x, [r["step_model"] * scale for r in rows], "--", color="#f28e2b", label="step model")
        if all(r.get("simulator") is not None for r in rows):
            ax.plot(x, [r["simulator"] * scale for r in rows], "-", color="#4e79a7", label="simulator")
            ax.fill_between(x, [r["simulator_low"] * scale for r in rows], [r["simulator_high"] * scale for r in rows],
                            color="#4e79a7", alpha=0.2)
        ax.set(xlabel=xlabel, ylabel=label, title=rows[0]["label"])
    axes[0].legend(fontsize=8)
    fig.suptitle(f"{report['file']}: {report['model']} on {report['tensor_parallel']} x {report['accelerator']}",
                 fontsize=10)
    fig.subplots_adjust(left=0.07, right=0.98, bottom=0.16, top=0.84, wspace=0.32)
    return fig


def main(argv=None) -> int:
    """The command line: ``python -m servingmath.validate RESULTS --model M --gpu G [--tp N]``.

    Derived in the chapter "Validation: how good is the model?" (notebooks/14_validation.ipynb).

    Returns the exit status: 0, or 2 for bad input (the reason printed to stderr).

    Examples
    --------
    >>> import contextlib, io
    >>> sample = Path(__file__).resolve().parents[2] / "tests/data/benchmarks/vllm_sweep.json"
    >>> out = io.StringIO()
    >>> with contextlib.redirect_stdout(out):
    ...     status = main([str(sample), "--model", "Llama-3.1-8B", "--gpu", "H100", "--seeds", "1", "--no-figure"])
    >>> status, out.getvalue().splitlines()[0]
    (0, "vllm_sweep.json (vllm): Llama-3.1-8B on 1 x H100-SXM5-80GB, weights bf16, KV bf16, setting 'realistic'")
    """
    check_argv(argv)
    parser = argparse.ArgumentParser(prog="python -m servingmath.validate",
                                     description="A benchmark result file beside the book's step model and "
                                                 "simulator (chapter 14).")
    parser.add_argument("results", help="a vllm bench serve / sglang bench_serving / AIPerf / genai-perf / "
                                        "guidellm result file (or AIPerf artifacts folder)")
    parser.add_argument("--model", required=True, help="model (catalog name or Hugging Face id)")
    parser.add_argument("--gpu", required=True, help="accelerator (catalog name or alias, e.g. H100, 'NVIDIA A100 80GB')")
    parser.add_argument("--tp", type=int, default=1, help="tensor-parallel degree (default 1)")
    parser.add_argument("--weight-dtype", default="bf16", help="weights' data type (default bf16)")
    parser.add_argument("--kv-dtype", default=None, help="KV cache's data type (default: the weights' if 16-bit, else bf16)")
    parser.add_argument("--engine", default=None, help="engine and version for its scheduler defaults (default: "
                                                     "SGLang for an SGLang file, else 'vLLM 0.11'; e.g. 'SGLang 0.4', "
                                                     "'TensorRT-LLM 1.0')")
    parser.add_argument("--tool", default=None, choices=benchmarks.TOOLS, help="force the file's format")
    parser.add_argument("--setting", default="realistic", choices=("realistic", "physical", "calibrated"),
                        help="the predictions' efficiencies: the book's fixed guess (default), the physical bound, "
                             "or the accelerator family's calibration on the book's published measurements")
    parser.add_argument("--seeds", type=int, default=3, help="simulator seeds (default 3)")
    parser.add_argument("--max-requests", type=int, default=4000, help="requests replayed per level at most "
                                                                    "(default 4000)")
    parser.add_argument("--figure", default=None, help="where to write the figure (default: beside the input, "
                                                       "<name>.validate.png)")
    parser.add_argument("--no-figure", action="store_true", help="do not write a figure")
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:   # --help (0) or a word argparse refuses (2, its usage printed): the status
        return exc.code if isinstance(exc.code, int) else 2
    if args.tp < 1 or args.seeds < 1 or args.max_requests < 1:
        print("error: --tp, --seeds and --max-requests must be >= 1", file=sys.stderr)
        return 2
    try:
        report = validate_file(args.results, model=args.model, gpu=args.gpu, tp=args.tp,
                               weight_dtype=args.weight_dtype, kv_dtype=args.kv_dtype, engine=args.engine,
                               setting=args.setting, seeds=tuple(range(args.seeds)), max_requests=args.max_requests,
                               tool=args.tool)
    except BenchmarkFileError as exc:
        print(f"error: cannot read {args.results!r}: {exc}", file=sys.stderr)
        return 2
    except KeyError as exc:
        print(f"error: {exc.args[0] if exc.args else exc}", file=sys.stderr)
        return 2
    except (ValueError, TypeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(format_report(report))
    if not args.no_figure:
        source = Path(args.results)
        target = Path(args.figure) if args.figure else (source.parent / f"{source.stem}.validate.png")
        try:
            written = write_figure(report, target)
        except OSError as exc:
            print(f"error: cannot write the figure to {str(target)!r}: {exc}", file=sys.stderr)
            return 2
        print(f"figure: {written}")
    return 0


if __name__ == "__main__":          # pragma: no cover - the command line
    sys.exit(main())
