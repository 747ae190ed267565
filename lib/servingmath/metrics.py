"""Request latency metrics, defined exactly as vLLM's serving benchmark defines them.

For one request that arrives at ``t_arrival`` and receives output tokens at
times ``t_1 < t_2 < ... < t_n``:

* **TTFT** (time to first token) = t_1 - t_arrival (queueing + prefill);
* **E2E** (end-to-end latency) = t_n - t_arrival;
* **TPOT** (time per output token) = (E2E - TTFT) / (n - 1): the mean gap
  *after* the first token, so TTFT is not counted twice. Defined for n >= 2;
  vLLM leaves one-token requests out of its TPOT statistics;
* **ITL** (inter-token latencies) = the list t_{i+1} - t_i. vLLM's mean ITL
  averages over all gaps of all requests (token-weighted); its mean TPOT
  averages per request (request-weighted). They differ when output lengths vary.

Other definitions in use: "TPOT" = E2E / n (counts the first token, common in
older blog posts; vLLM's paper calls E2E / n the *normalized latency*), and
"time per token" that divides by prompt + output tokens. This book uses
vLLM's.

References
----------
vLLM, ``benchmarks/benchmark_serving.py`` (``calculate_metrics``), read 2026-11.

Examples
--------
>>> times = [0.35, 0.37, 0.39, 0.41]          # four tokens, 20 ms apart
>>> round(time_to_first_token(0.0, times), 3)
0.35
>>> round(time_per_output_token(0.0, times), 3)
0.02
>>> round(normalized_latency(0.0, times), 4)   # E2E / n: a different number
0.1025
"""

from __future__ import annotations

import numpy as np

from ._validation import (as_array, check_choice, check_fraction, check_integer, check_nonnegative,
                          check_positive, check_scalar)

__all__ = [
    "time_to_first_token",
    "end_to_end_latency",
    "time_per_output_token",
    "inter_token_latencies",
    "normalized_latency",
    "e2e_from_ttft_tpot",
    "percentile",
    "output_throughput",
    "DECODE_STEP_COUNTS",
]

#: How many TPOT gaps a request of n output tokens has: "n-1" (the first token comes out of the
#: prefill: vLLM's benchmark, the book) or "n" (Databricks: "latency = TTFT + TPOT x the number of
#: tokens to be generated"; E2E / n, the "normalized latency" of the vLLM paper).
DECODE_STEP_COUNTS = ("n-1", "n")


def _token_times(arrival_time, token_times) -> tuple[float, np.ndarray]:
    arrival = float(as_array("arrival_time", check_scalar("arrival_time", arrival_time)))
    times = as_array("token_times", token_times)
    if times.ndim != 1 or times.size == 0:
        raise ValueError(f"token_times must be a non-empty 1-D list of times, got shape {times.shape}")
    if times[0] < arrival:
        raise ValueError(f"token_times[0] = {times[0]:g} is before arrival_time = {arrival:g}")
    if np.any(np.diff(times) < 0):
        raise ValueError("token_times must be non-decreasing")
    return arrival, times


def time_to_first_token(arrival_time, token_times) -> float:
    """TTFT = t_1 - t_arrival, seconds.

    Derived in the chapter "Anatomy of a request" (notebooks/01_anatomy_of_a_request.ipynb).

    Examples
    --------
    >>> time_to_first_token(0.0, [0.2, 0.25, 0.3])
    0.2
    """
    arrival, times = _token_times(arrival_time, token_times)
    return float(times[0] - arrival)


def end_to_end_latency(arrival_time, token_times) -> float:
    """E2E = t_n - t_arrival, seconds.

    Derived in the chapter "Anatomy of a request" (notebooks/01_anatomy_of_a_request.ipynb).

    Examples
    --------
    >>> end_to_end_latency(0.0, [0.2, 0.25, 0.3])
    0.3
    """
    arrival, times = _token_times(arrival_time, token_times)
    return float(times[-1] - arrival)


def time_per_output_token(arrival_time, token_times, *, decode_steps: str = "n-1") -> float:
    """vLLM's TPOT = (E2E - TTFT) / (n - 1), seconds; needs n >= 2 tokens.

    ``decode_steps="n"`` divides by n instead (the convention of sources that
    write E2E = TTFT + n x TPOT, e.g. Databricks' inference guide); it is
    smaller by the factor (n - 1) / n. Derived in the chapter "Anatomy of a request".

    >>> round(time_per_output_token(0.0, [0.35, 0.37, 0.39, 0.41]), 3)
    0.02
    >>> round(time_per_output_token(0.0, [0.35, 0.37, 0.39, 0.41], decode_steps="n"), 3)
    0.015
    """
    arrival, times = _token_times(arrival_time, token_times)
    check_choice("decode_steps", decode_steps, DECODE_STEP_COUNTS)
    if times.size < 2:
        raise ValueError("token_times must hold at least 2 tokens for TPOT "
                         "(vLLM leaves one-token requests out of TPOT)")
    steps = times.size - 1 if decode_steps == "n-1" else times.size
    return float((times[-1] - times[0]) / steps)


def inter_token_latencies(token_times) -> np.ndarray:
    """ITL: the gaps between consecutive output tokens, seconds (n - 1 values).

    Derived in the chapter "Anatomy of a request" (notebooks/01_anatomy_of_a_request.ipynb).

    Examples
    --------
    >>> inter_token_latencies([0.2, 0.25, 0.3]).round(3).tolist()
    [0.05, 0.05]
    """
    times = as_array("token_times", token_times)
    if times.ndim != 1 or times.size == 0:
        raise ValueError(f"token_times must be a non-empty 1-D list of times, got shape {times.shape}")
    gaps = np.diff(times)
    if np.any(gaps < 0):
        raise ValueError("token_times must be non-decreasing")
    return gaps


def normalized_latency(arrival_time, token_times) -> float:
    """E2E / n: the "per-token latency" that counts the first token (not vLLM's TPOT).

    Derived in the chapter "Anatomy of a request" (notebooks/01_anatomy_of_a_request.ipynb).

    Examples
    --------
    >>> round(normalized_latency(0.0, [0.2, 0.25, 0.3]), 3)    # 0.3 s / 3 tokens
    0.1
    """
    arrival, times = _token_times(arrival_time, token_times)
    return float((times[-1] - arrival) / times.size)


def e2e_from_ttft_tpot(ttft, tpot, output_tokens, *, decode_steps: str = "n-1"):
    """E2E = TTFT + (n - 1) x TPOT: the inverse of vLLM's TPOT definition.

    Parameters
    ----------
    ttft, tpot : float or array
        Seconds.
    output_tokens : int or array
        n, tokens the request produces (the first one included).
    decode_steps : {"n-1", "n"}
        ``"n-1"`` (the book, vLLM): the first token comes out of the prefill,
        so n - 1 decode steps follow it. ``"n"``: E2E = TTFT + n x TPOT, the
        convention of Databricks' guide ("Latency = TTFT + TPOT x (the number
        of tokens to be generated)"); one TPOT longer.

    Notes
    -----
    E2E = TTFT + (n - 1) TPOT, or TTFT + n TPOT. Derived in the chapter "Anatomy of a request".

    >>> round(e2e_from_ttft_tpot(0.35, 0.02, 20), 3)
    0.73
    >>> round(e2e_from_ttft_tpot(0.35, 0.02, 20, decode_steps="n"), 3)
    0.75
    """
    t1 = check_nonnegative("ttft", ttft)
    t = check_nonnegative("tpot", tpot)
    n = check_integer("output_tokens", output_tokens, minimum=1)
    check_choice("decode_steps", decode_steps, DECODE_STEP_COUNTS)
    result = t1 + (n - 1 if decode_steps == "n-1" else n) * t
    return float(result) if np.ndim(result) == 0 else result


def percentile(values, q) -> float:
    """The q-th percentile (q in (0, 100]) with numpy's linear interpolation, as vLLM reports P50/P99.

    Derived in the chapter "Anatomy of a request" (notebooks/01_anatomy_of_a_request.ipynb).

    >>> percentile([1.0, 2.0, 3.0, 4.0], 50)
    2.5
    """
    v = as_array("values", values)
    if v.size == 0:
        raise ValueError("values must not be empty")
    q = float(as_array("q", check_scalar("q", q)))
    check_fraction("q / 100", q / 100.0)
    return float(np.percentile(v, q))


def output_throughput(total_output_tokens, duration) -> float:
    """Output tokens per second over a run: tokens / duration.

    Derived in the chapter "Anatomy of a request" (notebooks/01_anatomy_of_a_request.ipynb).

    Examples
    --------
    >>> output_throughput(6000, 60.0)
    100.0
    """
    n = check_nonnegative("total_output_tokens", total_output_tokens, scalar=True)
    d = check_positive("duration", duration, scalar=True)
    return n / d
