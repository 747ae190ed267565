"""Read the result files of the common LLM-serving benchmarks onto one record and the book's definitions.

Four tools measure a server from the client side and save what they saw, each in its own format and
each with slightly different definitions of the same words:

* ``vllm bench serve`` (``--save-result``, with ``--save-detailed`` the per-request lists
  ``ttfts``, ``itls``, ``latencies``, ``start_times``, ``input_lens``, ``output_lens``, ``errors``;
  ``--append-result`` writes one JSON object a line, one per run): :func:`read_vllm`;
* SGLang's ``python -m sglang.bench_serving`` (a JSON-lines file, one line per run; with
  ``--output-details`` the per-request ``ttfts``, ``itls``, ``input_lens``, ``output_lens``):
  :func:`read_sglang`;
* NVIDIA AIPerf (``artifacts/<run>/profile_export.jsonl``, one record per request, and
  ``profile_export_aiperf.json``, the aggregated statistics) and its predecessor genai-perf
  (``profile_export_genai_perf.json``, aggregated statistics in the same layout):
  :func:`read_aiperf`, :func:`read_genai_perf`;
* guidellm (``benchmarks.json``: a report of several benchmarks, each with metric summaries and
  per-request statistics): :func:`read_guidellm`.

:func:`read_benchmark` recognises the tool from the file's content and returns one :class:`LoadLevel`
per load level (request rate or concurrency). A load level holds the tool's own summary numbers
(:attr:`LoadLevel.summary`, in SI units under the tool's own names) and, where the file has them,
the per-request data, from which :meth:`LoadLevel.book_metrics` recomputes TTFT, TPOT, ITL, E2E,
throughput and goodput by the book's definitions (:mod:`servingmath.metrics`, :mod:`servingmath.slo`).
:meth:`LoadLevel.comparison` puts the two side by side and says which pairs are the same quantity.

The definitions differ (the table :data:`DEFINITIONS`, printed by :func:`definitions_table`):

* **TPOT.** The book and vLLM: (E2E - TTFT) / (n - 1), averaged over requests with n >= 2.
  SGLang: the same formula, but its E2E ends at the last line received, "[DONE]" included.
  AIPerf and genai-perf call that same per-request number *inter-token latency*. guidellm's
  ``time_per_output_token`` is (last token - start) / n, the first token *included* (the book's
  normalised latency), and its summary weights requests by n; in guidellm 0.3 it was
  (last - first) / n.
* **ITL.** vLLM and SGLang pool every gap between streamed *chunks* of every request (a chunk can
  carry several tokens); SGLang's native ``sglang`` backend splits a chunk's gap evenly over its
  tokens. AIPerf's pooled chunk gaps are ``inter_chunk_latency``. guidellm's
  ``inter_token_latency`` is per request (last - first) / (n - 1) = the book's TPOT, averaged
  weighted by n - 1, i.e. sum(last - first) / sum(n - 1).
* **TTFT.** All four: first streamed content chunk minus the moment the client sent the request.
  vLLM has a second TTFT, its *server* metric ``vllm:time_to_first_token_seconds``: from the
  request's arrival in the engine front end (after HTTP parsing) to the output-processing
  iteration that emitted the first token, before detokenisation, streaming and the network; so it
  is shorter than the benchmark's. (Its server-side ``inter_token_latency`` / formerly
  ``time_per_output_token_seconds`` histogram is per engine iteration, an ITL; the finished
  request's ``mean_time_per_output_token`` is decode time / (n - 1), the book's TPOT without the
  network.) With ``--max-concurrency`` the client's wait for a free slot is in neither TTFT
  (vLLM's benchmark saves it as ``queue_times``).
* **E2E.** vLLM, AIPerf, genai-perf: last token chunk minus send time (the book's t_n - t_arrival).
  SGLang: to the final "[DONE]" line. guidellm's ``request_latency`` ends when the response closes.
* **Output tokens.** vLLM: the server's ``usage.completion_tokens`` (it asks for it), else the
  generated text re-tokenised. SGLang: the server's count (native backend, or ``usage`` when the
  server sends it), else the *requested* length; a re-tokenised total beside it. AIPerf and
  genai-perf: the concatenated text re-tokenised on the client (reasoning tokens included).
  guidellm: the server's usage, else the number of streamed chunks.
* **Goodput.** vLLM and AIPerf: requests meeting every SLO per second of the run (vLLM counts a
  one-token request's TPOT as 0, so it passes a TPOT SLO; AIPerf counts a request without the
  metric as failing it). The book has both that and a token goodput; DistServe's goodput is a rate
  found by a sweep. SGLang and guidellm report none.
* **Duration.** vLLM and SGLang: the client's wall clock from the first dispatch to the last
  response. AIPerf and genai-perf: last response minus first request start. guidellm: the
  measurement window after warm-up and before cool-down.
* **Percentiles.** numpy's linear interpolation in vLLM, SGLang, AIPerf, genai-perf and the book;
  guidellm takes the first value whose cumulative weight reaches p (the inverted CDF), weighting
  TPOT and ITL by tokens.

References
----------
The schemas were read from each tool's source at a named commit (tests/data/benchmarks/README.md
lists repository, files, commit and date): vllm-project/vllm ``vllm/benchmarks/serve.py`` and
``vllm/benchmarks/lib/endpoint_request_func.py``; sgl-project/sglang ``python/sglang/bench_serving.py``;
ai-dynamo/aiperf ``aiperf/exporters/json_exporter.py``, ``aiperf/metrics/types/*``;
triton-inference-server/perf_analyzer ``genai-perf/genai_perf/export_data/json_exporter.py``;
vllm-project/guidellm ``src/guidellm/benchmark/schemas/*``, ``src/guidellm/schemas/request_stats.py``.
vLLM's server-side metrics: ``vllm/v1/metrics/stats.py`` @ 28ed1fb87ed5686e1d4d0cf4134b8e05d8a25a8a
(``first_token_latency = iteration time - arrival_time``). The book's definitions are derived in
chapter 01 (:mod:`servingmath.metrics`) and chapter 07 (goodput, :mod:`servingmath.slo`); chapter 14 (validation)
reads measurements against them.

Examples
--------
>>> from pathlib import Path
>>> path = Path(__file__).resolve().parents[2] / "tests/data/benchmarks/vllm_detailed.json"
>>> [level] = read_benchmark(path)
>>> level.tool, level.mode, level.request_rate, level.n_completed, level.n_failed
('vllm', 'rate', 4.0, 4, 1)
>>> m = level.book_metrics()
>>> round(m["ttft.mean"] * 1e3, 1), round(m["tpot.mean"] * 1e3, 2), round(m["itl.mean"] * 1e3, 1)
(187.5, 26.67, 30.0)
>>> round(level.summary["mean_tpot"] * 1e3, 2)          # vLLM's own number: the same definition
26.67
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from . import slo

__all__ = [
    "BenchmarkFileError",
    "LoadLevel",
    "TOOLS",
    "DEFINITIONS",
    "definitions_table",
    "detect_tool",
    "read_benchmark",
    "read_vllm",
    "read_sglang",
    "read_aiperf",
    "read_genai_perf",
    "read_guidellm",
]

TOOLS = ("vllm", "sglang", "aiperf", "genai-perf", "guidellm")


class BenchmarkFileError(ValueError):
    """A benchmark file that cannot be read: names the file, the tool guessed and what is missing.

    Derived in the chapter "Validation: how good is the model?" (notebooks/14_validation.ipynb).
    """


# ---- the common record --------------------------------------------------------------------------
def _frozen(values, name, dtype=float):
    if values is None:
        return None
    arr = np.asarray(values, dtype=dtype)
    arr.setflags(write=False)
    return arr


@dataclass(frozen=True, eq=False)
class LoadLevel:
    """One load level of one benchmark run (a request rate or a concurrency), in SI units.

    Derived in the chapter "Validation: how good is the model?" (notebooks/14_validation.ipynb).

    Attributes
    ----------
    tool : str
        ``"vllm"``, ``"sglang"``, ``"aiperf"``, ``"genai-perf"`` or ``"guidellm"``.
    file : str
        The file's name (no directory), for messages.
    index : int
        Position of this level in the file (0-based).
    mode : str
        How load was applied: ``"rate"`` (open loop, Poisson or gamma arrivals at
        :attr:`request_rate`), ``"concurrency"`` (closed loop, :attr:`concurrency` clients),
        ``"rate+concurrency"`` (a rate capped by a concurrency), ``"all-at-once"`` (every request
        sent at t = 0), ``"synchronous"`` (one at a time), ``"throughput"`` (guidellm: as many as
        the server takes) or ``"unknown"``.
    request_rate : float or None
        Requests per second configured (``inf`` = all at once).
    concurrency : int or None
        Maximum requests in flight configured (clients, streams).
    duration : float or None
        Seconds, as the tool measured it (its definitions differ; see the module docstring).
    n_completed, n_failed : int or None
        Requests that succeeded, and that failed (None when the file does not say).
    start_times : ndarray or None
        Send time of each completed request, seconds after the first one.
    prompt_lens, output_lens : ndarray of int or None
        Prompt and output tokens of each completed request, as the tool counted them.
    ttft, e2el : ndarray or None
        Time to first token and end-to-end latency of each completed request, seconds.
    itls : tuple of ndarray or None
        The gaps between streamed chunks of each completed request, seconds.
    summary : dict
        The tool's own summary numbers, under its own names, times in seconds
        (``"mean_tpot"`` for vLLM's ``mean_tpot_ms``; ``"inter_token_latency.avg"`` for AIPerf).
    metadata : dict
        What the file says about the run (model, backend, dataset, date...).
    notes : tuple of str
        Caveats of this file: definitions that differ, data that is missing or derived.
    """

    tool: str
    file: str
    index: int
    mode: str
    request_rate: float | None
    concurrency: int | None
    duration: float | None
    n_completed: int | None
    n_failed: int | None = None
    start_times: np.ndarray | None = None
    prompt_lens: np.ndarray | None = None
    output_lens: np.ndarray | None = None
    ttft: np.ndarray | None = None
    e2el: np.ndarray | None = None
    itls: tuple | None = None
    summary: dict = field(default_factory=dict)
    metadata: dict = field(default_factory=dict)
    notes: tuple = ()

    def __post_init__(self):
        n = None
        for name, dtype in (("start_times", float), ("prompt_lens", np.int64), ("output_lens", np.int64),
                            ("ttft", float), ("e2el", float)):
            arr = _frozen(getattr(self, name), name, dtype)
            if arr is not None:
                if arr.ndim != 1:
                    raise ValueError(f"{self.file}: {name} must be one value per request, got shape {arr.shape}")
                if n is not None and arr.size != n:
                    raise ValueError(f"{self.file}: {name} has {arr.size} requests, the other lists {n}")
                n = arr.size
            object.__setattr__(self, name, arr)
        if self.itls is not None:
            itls = tuple(_frozen(x, "itls") for x in self.itls)
            if n is not None and len(itls) != n:
                raise ValueError(f"{self.file}: itls has {len(itls)} requests, the other lists {n}")
            object.__setattr__(self, "itls", itls)
        object.__setattr__(self, "notes", tuple(self.notes))

    def __repr__(self) -> str:
        load = {"rate": f"rate {self.request_rate:g} req/s" if self.request_rate is not None else "rate",
                "concurrency": f"concurrency {self.concurrency}"}.get(self.mode, self.mode)
        if self.mode == "rate+concurrency":
            load = f"rate {self.request_rate:g} req/s, concurrency {self.concurrency}"
        kind = "per-request data" if self.has_requests else "summary only"
        count = "? requests" if self.n_completed is None else f"{self.n_completed} requests"
        return f"LoadLevel({self.tool}, {self.file}[{self.index}], {load}, {count}, {kind})"

    # -- what the file holds --
    @property
    def has_requests(self) -> bool:
        """True when the file has per-request TTFT, E2E and output lengths (the book's metrics follow)."""
        return self.ttft is not None and self.e2el is not None and self.output_lens is not None

    def missing(self) -> tuple[str, ...]:
        """The per-request fields this file lacks."""
        return tuple(name for name in ("start_times", "prompt_lens", "output_lens", "ttft", "e2el", "itls")
                     if getattr(self, name) is None)

    def _need(self, *names):
        absent = [n for n in names if getattr(self, n) is None]
        if absent:
            raise ValueError(
                f"{self.file} ({self.tool}, level {self.index}) has no per-request {', '.join(absent)}: "
                + ("it holds only summary statistics" if not self.has_requests else "the tool does not save them")
                + "; the tool's own numbers are in .summary" + _HINT.get(self.tool, ""))

    # -- the book's per-request quantities --
    @property
    def tpot(self) -> np.ndarray:
        """The book's (vLLM's) TPOT per request, (E2E - TTFT) / (n - 1); 0 for one-token requests.

        The 0 is vLLM's goodput convention (a one-token request meets any TPOT SLO);
        :meth:`book_metrics` leaves those requests out of the TPOT statistics, as vLLM does.
        """
        self._need("ttft", "e2el", "output_lens")
        n = self.output_lens
        out = np.zeros(n.size)
        many = n >= 2
        out[many] = (self.e2el[many] - self.ttft[many]) / (n[many] - 1)
        return out

    @property
    def itl_pooled(self) -> np.ndarray:
        """Every gap between streamed chunks of every completed request, seconds (vLLM's ITL)."""
        self._need("itls")
        return np.concatenate([np.asarray(x, float) for x in self.itls]) if self.itls else np.zeros(0)

    def book_metrics(self, percentiles=(50, 90, 99)) -> dict:
        """The book's metrics recomputed from the per-request data, seconds and per second.

        Parameters
        ----------
        percentiles : sequence of float
            Which percentiles to report (numpy's linear interpolation, as :func:`servingmath.metrics.percentile`).

        Returns
        -------
        dict
            Keys ``"<metric>.<statistic>"`` with metric one of ``ttft``, ``tpot`` (requests with
            n >= 2), ``itl`` (pooled chunk gaps), ``e2el``, ``normalized_latency`` (E2E / n) and
            statistic ``mean``, ``median``, ``pXX``; also ``tpot.token_weighted_mean``
            (sum(E2E - TTFT) / sum(n - 1)), ``itl.request_mean`` (the mean over requests of each
            request's mean chunk gap), ``normalized_latency.token_weighted_mean`` (sum E2E / sum n),
            ``request_throughput``, ``output_throughput``, ``total_token_throughput`` (over
            :attr:`duration`) and ``mean_concurrency`` = sum(E2E) / duration (Little's law: the time
            average of requests in flight). Entries whose inputs the file lacks are left out. When
            the per-request records are a sample of :attr:`n_completed` (guidellm's ``sample_size``)
            the token and concurrency totals are the sample's mean times the completed count.

        Raises
        ------
        ValueError
            For a file with only summary statistics (nothing to recompute).

        Notes
        -----
        TTFT = t_1 - t_send, E2E = t_n - t_send, TPOT = (E2E - TTFT) / (n - 1) (chapter 01;
        :mod:`servingmath.metrics`). With one token per chunk the pooled ITL mean equals the
        token-weighted TPOT mean; they part when chunks carry several tokens.
        """
        if self.ttft is None and self.e2el is None:
            self._need("ttft", "e2el")
        qs = [float(q) for q in percentiles]
        for q in qs:
            if not 0 < q <= 100:
                raise ValueError(f"percentiles must be in (0, 100], got {q:g}")
        out: dict = {}

        def describe(name, values):
            values = np.asarray(values, dtype=float)
            if values.size == 0:
                return
            out[f"{name}.mean"] = float(values.mean())
            out[f"{name}.median"] = float(np.median(values))
            for q in qs:
                out[f"{name}.p{q:g}"] = float(np.percentile(values, q))

        if self.ttft is not None:
            describe("ttft", self.ttft)
        if self.e2el is not None:
            describe("e2el", self.e2el)
        if self.has_requests:
            many = self.output_lens >= 2
            describe("tpot", self.tpot[many])
            if many.any():
                out["tpot.token_weighted_mean"] = float(
                    np.sum(self.e2el[many] - self.ttft[many]) / np.sum(self.output_lens[many] - 1))
            positive = self.output_lens >= 1
            describe("normalized_latency", self.e2el[positive] / self.output_lens[positive])
            out["normalized_latency.token_weighted_mean"] = float(
                np.sum(self.e2el[positive]) / np.sum(self.output_lens[positive]))
        if self.itls is not None:
            describe("itl", self.itl_pooled)
            means = [float(np.mean(x)) for x in self.itls if len(x)]
            if means:
                out["itl.request_mean"] = float(np.mean(means))
        if self.duration and self.n_completed:
            # per-request arrays may be a sample of the completed requests (guidellm's sample_size):
            # totals are then estimated as the sample mean x the completed count
            size = next((a.size for a in (self.output_lens, self.e2el, self.ttft) if a is not None), 0)
            scale = self.n_completed / size if 0 < size < self.n_completed else 1.0
            out["request_throughput"] = self.n_completed / self.duration
            if self.output_lens is not None:
                out["output_throughput"] = scale * float(self.output_lens.sum()) / self.duration
                if self.prompt_lens is not None:
                    out["total_token_throughput"] = scale * float(self.prompt_lens.sum() + self.output_lens.sum()) \
                        / self.duration
            if self.e2el is not None:
                out["mean_concurrency"] = scale * float(self.e2el.sum()) / self.duration
        return out

    def goodput(self, *, ttft_slo=None, tpot_slo=None, e2el_slo=None, by: str = "request") -> float:
        """Goodput by the book's definitions (:func:`servingmath.slo.request_goodput`, ``token_goodput``).

        ``by="request"``: completed requests meeting every SLO given, per second of
        :attr:`duration` (vLLM's ``request_goodput`` with ``--goodput``); ``by="token"``: their
        output tokens per second. One-token requests have TPOT 0 (vLLM's convention).
        """
        if by not in ("request", "token"):
            raise ValueError(f"by must be 'request' or 'token', got {by!r}")
        self._need("ttft", "e2el", "output_lens")
        if not self.duration:
            raise ValueError(f"{self.file} ({self.tool}, level {self.index}) has no duration: goodput is a rate")
        kwargs = dict(ttft=self.ttft, tpot=self.tpot, duration=self.duration, ttft_slo=ttft_slo,
                      tpot_slo=tpot_slo, e2el=self.e2el, e2el_slo=e2el_slo)
        if by == "request":
            return slo.request_goodput(**kwargs)
        return slo.token_goodput(self.output_lens, **kwargs)

    def comparison(self) -> list[dict]:
        """The tool's summary numbers beside the book's, recomputed from the same file.

        Returns
        -------
        list of dict
            One row per tool number that has a counterpart: ``tool_name``, ``tool_value``,
            ``book_metric`` (a key of :meth:`book_metrics`), ``book_value`` (None when the file
            has no per-request data), ``same_definition`` (True when the two are the same
            quantity computed the same way, so they agree up to rounding) and ``note``.
        """
        book = self.book_metrics(percentiles=(50, 90, 95, 99)) \
            if (self.ttft is not None or self.e2el is not None) else {}
        if self.tool == "guidellm" and self.ttft is not None:
            book["ttft.p50_inverted_cdf"] = float(np.percentile(self.ttft, 50, method="inverted_cdf"))
        rows = []
        for tool_name, book_metric, same, note in _COMPARE[self.tool]:
            if tool_name not in self.summary:
                continue
            rows.append(dict(tool_name=tool_name, tool_value=self.summary[tool_name], book_metric=book_metric,
                             book_value=book.get(book_metric), same_definition=same, note=note))
        return rows


_HINT = {
    "vllm": " (run vllm bench serve with --save-result --save-detailed for per-request data)",
    "sglang": " (run sglang.bench_serving with --output-details for per-request data)",
    "genai-perf": " (genai-perf's per-request file is profile_export.json, which needs the model's tokenizer)",
    "aiperf": " (AIPerf writes per-request records to profile_export.jsonl)",
}

# tool summary name -> (book metric, same definition?, note)
_COMPARE = {
    "vllm": [
        ("mean_ttft", "ttft.mean", True, ""), ("median_ttft", "ttft.median", True, ""),
        ("p99_ttft", "ttft.p99", True, ""),
        ("mean_tpot", "tpot.mean", True, "vLLM's TPOT is the book's (first token excluded, n >= 2)"),
        ("median_tpot", "tpot.median", True, ""), ("p99_tpot", "tpot.p99", True, ""),
        ("mean_itl", "itl.mean", True, "pooled over streamed chunks, not tokens"),
        ("median_itl", "itl.median", True, ""), ("p99_itl", "itl.p99", True, ""),
        ("mean_e2el", "e2el.mean", True, ""), ("median_e2el", "e2el.median", True, ""),
        ("p99_e2el", "e2el.p99", True, ""),
        ("request_throughput", "request_throughput", True, ""),
        ("output_throughput", "output_throughput", True, ""),
        ("total_token_throughput", "total_token_throughput", True, ""),
    ],
    "sglang": [
        ("mean_ttft", "ttft.mean", True, ""), ("median_ttft", "ttft.median", True, ""),
        ("p99_ttft", "ttft.p99", True, ""),
        ("mean_tpot", "tpot.mean", False, "SGLang's E2E ends at the [DONE] line, after the last token"),
        ("median_tpot", "tpot.median", False, "as mean_tpot"),
        ("mean_itl", "itl.mean", True, "pooled; the native backend splits a chunk's gap over its tokens"),
        ("median_itl", "itl.median", True, ""), ("p95_itl", "itl.p95", True, ""), ("p99_itl", "itl.p99", True, ""),
        ("mean_e2e_latency", "e2el.mean", False, "ends at the [DONE] line; the book's ends at the last token"),
        ("median_e2e_latency", "e2el.median", False, "as mean_e2e_latency"),
        ("request_throughput", "request_throughput", True, ""),
        ("output_throughput", "output_throughput", True, ""),
        ("concurrency", "mean_concurrency", False, "sum of SGLang's E2E / duration (Little's law)"),
    ],
    "aiperf": [
        ("time_to_first_token.avg", "ttft.mean", True, ""), ("time_to_first_token.p50", "ttft.median", True, ""),
        ("time_to_first_token.p90", "ttft.p90", True, ""), ("time_to_first_token.p99", "ttft.p99", True, ""),
        ("inter_token_latency.avg", "tpot.mean", True, "AIPerf's 'inter-token latency' is the book's TPOT"),
        ("inter_token_latency.p50", "tpot.median", True, ""), ("inter_token_latency.p99", "tpot.p99", True, ""),
        ("inter_chunk_latency.avg", "itl.mean", True, "pooled chunk gaps: vLLM's ITL"),
        ("request_latency.avg", "e2el.mean", True, ""), ("request_latency.p99", "e2el.p99", True, ""),
        ("request_throughput.avg", "request_throughput", True, "duration = last response - first request start"),
        ("output_token_throughput.avg", "output_throughput", True, "output tokens include reasoning tokens"),
    ],
    "genai-perf": [
        ("time_to_first_token.avg", "ttft.mean", True, ""), ("time_to_first_token.p99", "ttft.p99", True, ""),
        ("inter_token_latency.avg", "tpot.mean", True, "genai-perf's 'inter-token latency' is the book's TPOT"),
        ("inter_token_latency.p99", "tpot.p99", True, ""),
        ("request_latency.avg", "e2el.mean", True, ""),
        ("request_throughput.avg", "request_throughput", True, "counts every request sent, failed ones too"),
        ("output_token_throughput.avg", "output_throughput", True, ""),
    ],
    "guidellm": [
        ("time_to_first_token.mean", "ttft.mean", True, ""),
        ("time_to_first_token.p50", "ttft.p50_inverted_cdf", True, "guidellm's percentiles: inverted CDF, no "
                                                                   "interpolation"),
        ("inter_token_latency.mean", "tpot.token_weighted_mean", True,
         "guidellm's ITL per request is the book's TPOT; its mean weights requests by n - 1"),
        ("time_per_output_token.mean", "normalized_latency.token_weighted_mean", True,
         "guidellm's TPOT counts the first token: (last token - start) / n, weighted by n"),
        ("request_latency.mean", "e2el.mean", False, "ends when the response closes, after the last token"),
    ],
}


# ---- the definitions table ----------------------------------------------------------------------------
#: One row per quantity: how the book and each tool define it (the chapter prints this).
DEFINITIONS = [
    {"quantity": "TTFT",
     "book": "first token - arrival (client side)",
     "vllm": "first streamed chunk with choices - send; server metric vllm:time_to_first_token_seconds is engine arrival -> first token",
     "sglang": "first chunk with non-empty text - send",
     "aiperf / genai-perf": "first response - request start",
     "guidellm": "first token iteration - request start"},
    {"quantity": "TPOT",
     "book": "(E2E - TTFT) / (n - 1), mean over requests with n >= 2",
     "vllm": "same as the book",
     "sglang": "same formula, E2E to the [DONE] line",
     "aiperf / genai-perf": "called inter_token_latency: same as the book",
     "guidellm": "time_per_output_token = (last token - start) / n (first token included), weighted by n"},
    {"quantity": "ITL",
     "book": "gaps between consecutive tokens",
     "vllm": "gaps between streamed chunks, pooled over all requests",
     "sglang": "pooled chunk gaps; native backend splits a gap over the chunk's tokens",
     "aiperf / genai-perf": "inter_chunk_latency (pooled chunk gaps); their 'ITL' is the book's TPOT",
     "guidellm": "inter_token_latency = (last - first) / (n - 1) per request (the book's TPOT), weighted by n - 1"},
    {"quantity": "E2E",
     "book": "last token - arrival",
     "vllm": "last token chunk - send",
     "sglang": "last line received ([DONE]) - send",
     "aiperf / genai-perf": "last response - request start",
     "guidellm": "request_latency: response closed - request start"},
    {"quantity": "output tokens",
     "book": "tokens generated",
     "vllm": "server usage.completion_tokens, else re-tokenised text",
     "sglang": "server count (native) or usage, else the requested length; re-tokenised total beside",
     "aiperf / genai-perf": "client re-tokenises the text (reasoning included)",
     "guidellm": "server usage, else streamed chunks"},
    {"quantity": "goodput",
     "book": "requests (or tokens) meeting every SLO per second; DistServe: highest rate with >= 90 % attainment",
     "vllm": "requests meeting every SLO (<=) per second; TPOT 0 for one-token requests",
     "sglang": "not reported",
     "aiperf / genai-perf": "good requests per second; a request without the metric fails the SLO",
     "guidellm": "not reported"},
    {"quantity": "duration",
     "book": "the run's length in seconds",
     "vllm": "client wall clock, first dispatch to last response",
     "sglang": "client wall clock, first dispatch to last response",
     "aiperf / genai-perf": "last response - first request start",
     "guidellm": "measurement window (warm-up and cool-down excluded)"},
    {"quantity": "percentiles",
     "book": "numpy linear interpolation",
     "vllm": "numpy linear interpolation (std: population)",
     "sglang": "numpy linear interpolation",
     "aiperf / genai-perf": "numpy linear interpolation",
     "guidellm": "inverted CDF (first value reaching p), token-weighted for TPOT and ITL"},
    {"quantity": "per-request data",
     "book": "",
     "vllm": "--save-detailed: ttfts, itls, latencies, start_times, input_lens, output_lens, errors",
     "sglang": "--output-details: ttfts, itls, input_lens, output_lens, errors (no latencies, no start times)",
     "aiperf / genai-perf": "AIPerf: profile_export.jsonl; genai-perf aggregated file: none",
     "guidellm": "requests.successful (a sample when sample_size is set): timings and token counts"},
]

_DEF_COLUMNS = ("quantity", "book", "vllm", "sglang", "aiperf / genai-perf", "guidellm")


def definitions_table(fmt: str = "markdown") -> str:
    """:data:`DEFINITIONS` as a table: ``fmt="markdown"`` (for a chapter) or ``"text"`` (one block a quantity).

    Derived in the chapter "Validation: how good is the model?" (notebooks/14_validation.ipynb).

    >>> print(definitions_table("text").splitlines()[0])
    TTFT
    """
    if fmt == "markdown":
        lines = ["| " + " | ".join(_DEF_COLUMNS) + " |", "|" + "---|" * len(_DEF_COLUMNS)]
        lines += ["| " + " | ".join(row[c] for c in _DEF_COLUMNS) + " |" for row in DEFINITIONS]
        return "\n".join(lines)
    if fmt == "text":
        blocks = []
        for row in DEFINITIONS:
            blocks.append("\n".join([row["quantity"]] + [f"  {c:20s} {row[c]}" for c in _DEF_COLUMNS[1:]]))
        return "\n".join(blocks)
    raise ValueError(f"fmt must be 'markdown' or 'text', got {fmt!r}")


# ---- reading files ----------------------------------------------------------------------------------
def _path(path) -> Path:
    if not isinstance(path, (str, Path)):
        raise TypeError(f"path must be a file name (str or Path), got {type(path).__name__}")
    if not str(path).strip():
        raise BenchmarkFileError("path is empty: give the benchmark result file (or AIPerf artifacts folder)")
    p = Path(path)
    if not p.exists():
        raise BenchmarkFileError(f"path: benchmark file {p.name!r} does not exist (looked for {str(p)!r})")
    return p


def _objects(path: Path) -> list:
    """Every JSON value in a file: one document, JSON lines, or objects written one after another."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise BenchmarkFileError(f"{path.name}: not a text file (not UTF-8), so not a benchmark result") from None
    decoder, i, out = json.JSONDecoder(), 0, []
    while True:
        while i < len(text) and text[i].isspace():
            i += 1
        if i >= len(text):
            break
        try:
            value, i = decoder.raw_decode(text, i)
        except json.JSONDecodeError as err:
            raise BenchmarkFileError(f"{path.name}: not JSON or JSON lines ({err.msg} at line {err.lineno}, "
                                     f"column {err.colno}); no benchmark importer can read it") from None
        out.append(value)
    if not out:
        raise BenchmarkFileError(f"{path.name}: the file is empty")
    return out


# tool -> (keys a file of that tool has, keys it must have)
_SIGNATURES = {
    "vllm": ({"duration", "completed", "failed", "request_throughput", "output_throughput", "mean_ttft_ms",
              "mean_tpot_ms", "mean_itl_ms", "mean_e2el_ms", "num_prompts", "burstiness", "tokenizer_id",
              "total_token_throughput", "ttfts", "itls", "latencies", "start_times", "max_concurrent_requests"},
             ("duration", "completed")),
    "sglang": ({"duration", "completed", "request_throughput", "output_throughput", "input_throughput",
                "total_output_tokens_retokenized", "mean_e2e_latency_ms", "median_e2e_latency_ms", "mean_ttft_ms",
                "mean_tpot_ms", "mean_itl_ms", "p95_itl_ms", "concurrency", "accept_length", "dataset_name",
                "random_range_ratio"}, ("duration", "completed")),
    "aiperf": ({"request_throughput", "request_latency", "time_to_first_token", "inter_token_latency",
                "benchmark_duration", "input_config", "was_cancelled", "error_summary", "start_time", "end_time",
                "inter_chunk_latency", "request_count"}, ("request_throughput",)),
    "aiperf-records": ({"metadata", "metrics", "error"}, ("metadata", "metrics")),
    "genai-perf": ({"request_throughput", "request_latency", "time_to_first_token", "inter_token_latency",
                    "output_token_throughput", "output_sequence_length", "input_sequence_length", "input_config"},
                   ("request_throughput",)),
    "guidellm": ({"benchmarks", "metadata", "config"}, ("benchmarks",)),
}


def _keys(objects) -> set:
    first = objects[0]
    return set(first) if isinstance(first, dict) else set()


def _score(objects) -> list[tuple[float, str]]:
    keys = _keys(objects)
    scores = []
    for tool, (have, _) in _SIGNATURES.items():
        scores.append((len(keys & have) / len(have), tool))
    return sorted(scores, reverse=True)


def _detect(path: Path, objects) -> str:
    first = objects[0]
    if not isinstance(first, dict):
        raise BenchmarkFileError(f"{path.name}: the file holds a JSON {type(first).__name__}, not an object; "
                                 "no benchmark importer reads it")
    keys = set(first)
    if {"experiments", "version"} <= keys or "experiments" in keys:
        raise BenchmarkFileError(
            f"{path.name}: looks like genai-perf's raw profile_export.json (perf_analyzer's 'experiments' with "
            "response timestamps and raw SSE chunks): counting its output tokens needs the model's tokenizer. "
            "Read profile_export_genai_perf.json (the aggregated statistics) or an AIPerf profile_export.jsonl instead")
    if {"metadata", "metrics"} <= keys and isinstance(first.get("metadata"), dict) \
            and "request_start_ns" in first["metadata"]:
        return "aiperf"
    if "benchmarks" in keys and isinstance(first["benchmarks"], list):
        return "guidellm"
    if isinstance(first.get("request_throughput"), dict) and "unit" in first["request_throughput"]:
        config = first.get("input_config") or {}
        if "was_cancelled" in keys or "error_summary" in keys or "loadgen" in config \
                or "benchmark_duration" in keys:
            return "aiperf"
        return "genai-perf"
    if {"duration", "completed"} <= keys:
        sglang_only = {"total_output_tokens_retokenized", "mean_e2e_latency_ms", "input_throughput",
                       "concurrency", "dataset_name"}
        vllm_only = {"failed", "mean_e2el_ms", "num_prompts", "burstiness", "tokenizer_id", "latencies",
                     "max_concurrent_requests", "endpoint_type"}
        if keys & sglang_only and not keys & vllm_only:
            return "sglang"
        if keys & vllm_only:
            return "vllm"
    score, tool = _score(objects)[0]
    have, need = _SIGNATURES[tool]
    missing = sorted(k for k in need if k not in keys) or sorted(have - keys)[:6]
    tool = tool.replace("-records", "")
    raise BenchmarkFileError(
        f"{path.name}: no importer recognises this file. It looks most like {tool} ({score:.0%} of that tool's "
        f"usual keys) but lacks {', '.join(repr(k) for k in missing)}. Readable: "
        "vllm bench serve --save-result JSON, SGLang bench_serving JSONL, AIPerf profile_export.jsonl or "
        "profile_export_aiperf.json, genai-perf profile_export_genai_perf.json, guidellm benchmarks.json")


def detect_tool(path) -> str:
    """Which tool wrote a benchmark file, from its content: one of :data:`TOOLS`.

    Derived in the chapter "Validation: how good is the model?" (notebooks/14_validation.ipynb).

    A folder is read as an AIPerf artifacts folder (``profile_export.jsonl`` and/or
    ``profile_export_aiperf.json``). Raises :class:`BenchmarkFileError` for a file no importer reads.

    Examples
    --------
    >>> import json, pathlib, shutil, tempfile
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "result.json"
    >>> _ = path.write_text(json.dumps({"duration": 10.0, "completed": 40, "failed": 0, "request_rate": 4.0}))
    >>> detect_tool(path)
    'vllm'
    >>> shutil.rmtree(path.parent)
    """
    p = _path(path)
    if p.is_dir():
        _aiperf_files(p)
        return "aiperf"
    return _detect(p, _objects(p))


def read_benchmark(path, *, tool: str | None = None) -> list[LoadLevel]:
    """Read a benchmark result file (or an AIPerf artifacts folder) of any supported tool.

    Derived in the chapter "Validation: how good is the model?" (notebooks/14_validation.ipynb).

    Parameters
    ----------
    path : str or Path
        The file (or folder).
    tool : str, optional
        One of :data:`TOOLS` to skip detection; the file must then have that tool's fields.

    Returns
    -------
    list of LoadLevel
        One per load level, in the file's order.

    Raises
    ------
    BenchmarkFileError
        (a ``ValueError``) for a missing, non-JSON or unrecognised file, or one that lacks the
        fields the tool writes; the message names the file, the tool and what is missing.

    Examples
    --------
    >>> import json, pathlib, shutil, tempfile
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "sglang.jsonl"
    >>> _ = path.write_text(json.dumps({"backend": "sglang", "dataset_name": "random", "request_rate": 4.0,
    ...                                 "duration": 10.0, "completed": 40, "mean_ttft_ms": 120.0}) + "\\n")
    >>> read_benchmark(path)
    [LoadLevel(sglang, sglang.jsonl[0], rate 4 req/s, 40 requests, summary only)]
    >>> shutil.rmtree(path.parent)
    """
    if tool is not None and tool not in TOOLS:
        raise ValueError(f"tool must be one of {', '.join(TOOLS)}, got {tool!r}")
    name = tool or detect_tool(path)
    return _READERS[name](path)


def _require(path: Path, tool: str, obj, names, where=""):
    if not isinstance(obj, dict):
        raise BenchmarkFileError(f"{path.name}: read as {tool}, {where or 'the file'} is not a JSON object")
    missing = [n for n in names if n not in obj]
    if missing:
        raise BenchmarkFileError(f"{path.name}: read as {tool}, {where or 'the file'} lacks the field(s) "
                                 f"{', '.join(repr(m) for m in missing)} that {tool} always writes")


def _num(value, default=None):
    if value is None:
        return default
    if isinstance(value, str):
        if value.strip().lower() in ("inf", "infinity"):
            return math.inf
        try:
            return float(value)
        except ValueError:
            return default
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return default


def _mode(rate, concurrency) -> str:
    finite = rate is not None and math.isfinite(rate)
    if finite and concurrency:
        return "rate+concurrency"
    if finite:
        return "rate"
    if concurrency:
        return "concurrency"
    return "all-at-once" if rate is not None else "unknown"


def _ms_summary(obj: dict, skip=()) -> dict:
    """Numeric fields, ``*_ms`` converted to seconds and renamed without the suffix."""
    out = {}
    for key, value in obj.items():
        if key in skip or isinstance(value, (list, dict)) or isinstance(value, bool):
            continue
        v = _num(value)
        if v is None:
            continue
        if key.endswith("_ms"):
            out[key[:-3]] = v * 1e-3
        else:
            out[key] = v
    return out


def _per_request(path, tool, obj, fields):
    lists = {f: obj.get(f) for f in fields}
    present = {f: v for f, v in lists.items() if v is not None}
    sizes = {len(v) for v in present.values() if isinstance(v, list)}
    if any(not isinstance(v, list) for v in present.values()) or len(sizes) > 1:
        raise BenchmarkFileError(f"{path.name}: read as {tool}, the per-request lists "
                                 f"{', '.join(present)} must be lists of one length each, got lengths "
                                 f"{ {f: (len(v) if isinstance(v, list) else type(v).__name__) for f, v in present.items()} }")
    return present


# -- vLLM --
def read_vllm(path) -> list[LoadLevel]:
    """Read a ``vllm bench serve --save-result`` file (one JSON object per run; ``--append-result`` appends).

    Derived in the chapter "Validation: how good is the model?" (notebooks/14_validation.ipynb).

    Failed requests (a non-empty ``errors`` entry) are dropped from the per-request arrays and
    counted in :attr:`LoadLevel.n_failed`. Without ``--save-detailed`` the file keeps only the
    per-request ``latencies`` (recent versions), so E2E statistics, throughput and Little's law can
    still be recomputed but TTFT, TPOT and ITL cannot.

    Examples
    --------
    >>> import json, pathlib, shutil, tempfile
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "vllm.json"
    >>> _ = path.write_text(json.dumps({"duration": 10.0, "completed": 40, "failed": 0, "request_rate": 4.0,
    ...                                 "max_concurrency": None, "mean_ttft_ms": 120.0, "mean_tpot_ms": 25.0}))
    >>> [level] = read_vllm(path)
    >>> level.mode, level.n_completed, level.summary["mean_ttft"], level.summary["mean_tpot"]   # s
    ('rate', 40, 0.12, 0.025)
    >>> shutil.rmtree(path.parent)
    """
    p = _path(path)
    levels = []
    for index, obj in enumerate(_objects(p)):
        _require(p, "vllm", obj, ("duration", "completed"), f"run {index}")
        notes = []
        rate, concurrency = _num(obj.get("request_rate")), obj.get("max_concurrency")
        concurrency = int(concurrency) if concurrency is not None else None
        lists = _per_request(p, "vllm", obj, ("ttfts", "itls", "latencies", "start_times", "input_lens",
                                              "output_lens", "errors"))
        if "errors" in lists:
            ok = np.array([not e for e in lists["errors"]], dtype=bool)
        elif "output_lens" in lists:
            ok = np.array([n > 0 for n in lists["output_lens"]], dtype=bool)
        elif "latencies" in lists:
            ok = np.array([_num(x, 0.0) > 0 for x in lists["latencies"]], dtype=bool)
        else:
            ok = np.ones(len(next(iter(lists.values()))) if lists else 0, dtype=bool)

        def pick(name, dtype=float):
            if name not in lists:
                return None
            return np.asarray([v for v, good in zip(lists[name], ok) if good], dtype=dtype)

        ttft, e2el, itls = pick("ttfts"), pick("latencies"), None
        if "itls" in lists:
            itls = [np.asarray(x, float) for x, good in zip(lists["itls"], ok) if good]
        if e2el is None and ttft is not None and itls is not None:
            e2el = ttft + np.array([x.sum() for x in itls])
            notes.append("E2E per request = TTFT + sum of ITL (this vLLM version saves no latencies)")
        starts = pick("start_times")
        if starts is not None and starts.size:
            starts = starts - starts.min()
            notes.append("start_times are send times, after any wait for a free --max-concurrency slot "
                         "(that wait is queue_times)")
        if ttft is None:
            notes.append("summary only: saved without --save-detailed (per-request "
                         + ("latencies kept" if e2el is not None else "lists absent") + ")")
        completed = int(obj["completed"])
        if lists and int(ok.sum()) != completed:
            raise BenchmarkFileError(f"{p.name}: read as vllm, run {index} says completed = {completed} but its "
                                     f"per-request lists hold {int(ok.sum())} successful requests")
        metadata = {k: obj[k] for k in ("date", "backend", "endpoint_type", "label", "model_id", "tokenizer_id",
                                        "num_prompts", "burstiness") if k in obj}
        levels.append(LoadLevel(
            tool="vllm", file=p.name, index=index, mode=_mode(rate, concurrency), request_rate=rate,
            concurrency=concurrency, duration=float(obj["duration"]), n_completed=completed,
            n_failed=int(obj["failed"]) if obj.get("failed") is not None else None,
            start_times=starts, prompt_lens=pick("input_lens", np.int64), output_lens=pick("output_lens", np.int64),
            ttft=ttft, e2el=e2el, itls=itls,
            summary=_ms_summary(obj, skip=("request_rate", "max_concurrency", "date", "burstiness")),
            metadata=metadata, notes=tuple(notes)))
    return levels


# -- SGLang --
def read_sglang(path) -> list[LoadLevel]:
    """Read SGLang ``bench_serving`` output (JSON lines, one run a line; ``--output-details`` adds lists).

    Derived in the chapter "Validation: how good is the model?" (notebooks/14_validation.ipynb).

    The per-request lists have no latencies and no start times: E2E is rebuilt as
    TTFT + sum(ITL), which ends at the last token; SGLang's own E2E (and so its TPOT and
    ``concurrency``) runs to the final "[DONE]" line, a little later.

    Examples
    --------
    >>> import json, pathlib, shutil, tempfile
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "sglang.jsonl"
    >>> _ = path.write_text(json.dumps({"backend": "sglang", "dataset_name": "random", "request_rate": 4.0,
    ...                                 "duration": 10.0, "completed": 40, "mean_ttft_ms": 120.0}) + "\\n")
    >>> read_sglang(path)
    [LoadLevel(sglang, sglang.jsonl[0], rate 4 req/s, 40 requests, summary only)]
    >>> shutil.rmtree(path.parent)
    """
    p = _path(path)
    levels = []
    for index, obj in enumerate(_objects(p)):
        _require(p, "sglang", obj, ("duration", "completed"), f"line {index + 1}")
        rate = _num(obj.get("request_rate"))
        concurrency = obj.get("max_concurrency")
        concurrency = int(concurrency) if concurrency is not None else None
        lists = _per_request(p, "sglang", obj, ("ttfts", "itls", "input_lens", "output_lens", "errors"))
        notes = []
        ttft = e2el = itls = prompt = output = None
        if "ttfts" in lists:
            ok = np.array([not e for e in lists["errors"]]) if "errors" in lists else \
                np.array([n > 0 for n in lists.get("output_lens", [1] * len(lists["ttfts"]))])
            ttft = np.asarray([t for t, g in zip(lists["ttfts"], ok) if g], float)
            if "itls" in lists:
                itls = [np.asarray(x, float) for x, g in zip(lists["itls"], ok) if g]
                e2el = ttft + np.array([x.sum() for x in itls])
                notes.append("E2E per request = TTFT + sum of ITL (the file has no latencies); SGLang's own E2E "
                             "runs to the [DONE] line, so its TPOT and E2E are slightly larger")
            if "input_lens" in lists:
                prompt = np.asarray([n for n, g in zip(lists["input_lens"], ok) if g], np.int64)
            if "output_lens" in lists:
                output = np.asarray([n for n, g in zip(lists["output_lens"], ok) if g], np.int64)
            n_failed = int((~ok).sum())
            if int(ok.sum()) != int(obj["completed"]):
                raise BenchmarkFileError(f"{p.name}: read as sglang, line {index + 1} says completed = "
                                         f"{obj['completed']} but its lists hold {int(ok.sum())} successful requests")
        else:
            n_failed = None
            notes.append("summary only: run without --output-details")
        notes.append("output tokens: the server's count (native backend) or usage, else the requested length; "
                     "total_output_tokens_retokenized re-tokenises the text")
        if obj.get("backend", "sglang") in ("sglang", "sglang-native"):
            notes.append("native backend: a chunk's gap is split evenly over the tokens it carries (per-token ITL)")
        metadata = {k: obj[k] for k in ("backend", "dataset_name", "random_input_len", "random_output_len",
                                        "random_range_ratio", "sharegpt_output_len") if k in obj}
        levels.append(LoadLevel(
            tool="sglang", file=p.name, index=index, mode=_mode(rate, concurrency), request_rate=rate,
            concurrency=concurrency, duration=float(obj["duration"]), n_completed=int(obj["completed"]),
            n_failed=n_failed, prompt_lens=prompt, output_lens=output, ttft=ttft, e2el=e2el, itls=itls,
            summary=_ms_summary(obj, skip=("request_rate", "max_concurrency", "random_input_len",
                                           "random_output_len", "random_range_ratio", "sharegpt_output_len")),
            metadata=metadata, notes=tuple(notes)))
    return levels


# -- AIPerf and genai-perf --
_UNIT_SCALE = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "sec": 1.0, "s": 1.0}


def _value(path, tool, metric: dict, name: str):
    if not isinstance(metric, dict) or "value" not in metric:
        raise BenchmarkFileError(f"{path.name}: read as {tool}, metric {name!r} is not {{'value': ..., 'unit': ...}}")
    scale = _UNIT_SCALE.get(metric.get("unit", ""), 1.0)
    v = metric["value"]
    if isinstance(v, list):
        return np.asarray(v, float) * scale
    return float(v) * scale


def _aggregate_summary(obj: dict) -> dict:
    out = {}
    for name, block in obj.items():
        if not isinstance(block, dict) or "unit" not in block:
            continue
        scale = _UNIT_SCALE.get(block["unit"], 1.0)
        if name in ("min_request_timestamp", "max_response_timestamp"):
            scale = 1e-9 if block["unit"] == "ns" else scale
        for stat, value in block.items():
            v = _num(value)
            if stat != "unit" and v is not None:
                out[f"{name}.{stat}"] = v * scale
    return out


def _find(obj, key):
    """The first value of ``key`` anywhere in nested dicts (genai-perf keeps the load in stimulus)."""
    if isinstance(obj, dict):
        if key in obj and not isinstance(obj[key], dict):
            return obj[key]
        for value in obj.values():
            found = _find(value, key)
            if found is not None:
                return found
    return None


def _load_from_config(config: dict):
    rate, concurrency = _num(_find(config, "request_rate")), _find(config, "concurrency")
    concurrency = int(concurrency) if isinstance(concurrency, (int, float)) and not isinstance(concurrency, bool) \
        else None
    return rate, concurrency


def _aiperf_files(folder: Path):
    records, aggregate = folder / "profile_export.jsonl", folder / "profile_export_aiperf.json"
    if not records.exists() and not aggregate.exists():
        raise BenchmarkFileError(f"folder {folder.name!r} holds neither profile_export.jsonl nor "
                                 "profile_export_aiperf.json: not an AIPerf artifacts folder")
    return (records if records.exists() else None), (aggregate if aggregate.exists() else None)


def read_aiperf(path) -> list[LoadLevel]:
    """Read NVIDIA AIPerf output: ``profile_export.jsonl`` (per request), ``profile_export_aiperf.json``
    (aggregated) or the artifacts folder holding both (one load level).

    Derived in the chapter "Validation: how good is the model?" (notebooks/14_validation.ipynb).

    From the records alone the load setting is unknown and the duration is computed as AIPerf does
    (last response - first request start, profiling phase only).

    Examples
    --------
    >>> import json, pathlib, shutil, tempfile
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "profile_export_aiperf.json"
    >>> _ = path.write_text(json.dumps({"request_throughput": {"unit": "requests/sec", "avg": 1.96},
    ...                                 "benchmark_duration": {"unit": "sec", "avg": 10.0}}))
    >>> read_aiperf(path)
    [LoadLevel(aiperf, profile_export_aiperf.json[0], unknown, ? requests, summary only)]
    >>> shutil.rmtree(path.parent)
    """
    p = _path(path)
    records_file = aggregate_file = None
    parsed = {}
    if p.is_dir():
        records_file, aggregate_file = _aiperf_files(p)
    else:
        objects = _objects(p)
        parsed[p] = objects
        if isinstance(objects[0], dict) and "metadata" in objects[0]:
            records_file = p
            sibling = p.with_name("profile_export_aiperf.json")
            aggregate_file = sibling if sibling.exists() else None
        else:
            aggregate_file = p
    notes, summary, config, duration = [], {}, {}, None
    if aggregate_file is not None:
        agg = (parsed.get(aggregate_file) or _objects(aggregate_file))[0]
        _require(aggregate_file, "aiperf", agg, ("request_throughput",))
        summary = _aggregate_summary(agg)
        config = agg.get("input_config") or {}
        duration = summary.get("benchmark_duration.avg")
    rate, concurrency = _load_from_config(config)
    fields = dict(start_times=None, prompt_lens=None, output_lens=None, ttft=None, e2el=None, itls=None)
    n_completed = int(summary["request_count.avg"]) if "request_count.avg" in summary else None
    n_failed = int(summary["error_request_count.avg"]) if "error_request_count.avg" in summary else None
    name = (aggregate_file or records_file).name
    if records_file is not None:
        name = records_file.name
        starts, ends, ttft, e2el, isl, osl, itls, failed = [], [], [], [], [], [], [], 0
        for i, rec in enumerate(parsed.get(records_file) or _objects(records_file)):
            _require(records_file, "aiperf", rec, ("metadata", "metrics"), f"record {i}")
            meta, metrics = rec["metadata"], rec["metrics"] or {}
            if meta.get("benchmark_phase", "profiling") != "profiling":
                continue
            if rec.get("error"):
                failed += 1
                continue
            missing = [k for k in ("time_to_first_token", "request_latency", "output_sequence_length")
                       if k not in metrics]
            if missing:
                raise BenchmarkFileError(f"{records_file.name}: read as aiperf, record {i} (no error) lacks "
                                         f"{', '.join(missing)}: was the run streamed (--streaming)?")
            starts.append(meta["request_start_ns"] * 1e-9)
            ends.append(meta["request_end_ns"] * 1e-9)
            ttft.append(_value(records_file, "aiperf", metrics["time_to_first_token"], "time_to_first_token"))
            e2el.append(_value(records_file, "aiperf", metrics["request_latency"], "request_latency"))
            osl.append(int(_value(records_file, "aiperf", metrics["output_sequence_length"], "output_sequence_length")))
            isl.append(int(_value(records_file, "aiperf", metrics["input_sequence_length"], "input_sequence_length"))
                       if "input_sequence_length" in metrics else 0)
            itls.append(_value(records_file, "aiperf", metrics["inter_chunk_latency"], "inter_chunk_latency")
                        if "inter_chunk_latency" in metrics else np.zeros(0))
        if not starts:
            raise BenchmarkFileError(f"{records_file.name}: read as aiperf, no successful profiling-phase records")
        t0 = min(starts)
        fields = dict(start_times=np.asarray(starts) - t0, prompt_lens=np.asarray(isl, np.int64),
                      output_lens=np.asarray(osl, np.int64), ttft=np.asarray(ttft), e2el=np.asarray(e2el), itls=itls)
        if duration is None:
            duration = max(ends) - t0
            notes.append("duration = last response - first request start, computed as AIPerf does "
                         "(no profile_export_aiperf.json beside the records)")
        if aggregate_file is None:
            notes.append("load setting unknown: it is in profile_export_aiperf.json (input_config.loadgen)")
        n_completed, n_failed = len(starts), failed
    else:
        notes.append("summary only: profile_export_aiperf.json; the per-request records are in profile_export.jsonl")
    notes.append("output tokens: the client re-tokenises the streamed text (reasoning tokens included)")
    metadata = {}
    if config:
        metadata = {"model": _find(config, "model_names"), "endpoint_type": _find(config, "type"),
                    "streaming": _find(config, "streaming")}
    return [LoadLevel(tool="aiperf", file=name, index=0, mode=_mode(rate, concurrency), request_rate=rate,
                      concurrency=concurrency, duration=duration, n_completed=n_completed, n_failed=n_failed,
                      summary=summary, metadata=metadata, notes=tuple(notes), **fields)]


def read_genai_perf(path) -> list[LoadLevel]:
    """Read genai-perf's ``profile_export_genai_perf.json`` (aggregated statistics, one load level).

    Derived in the chapter "Validation: how good is the model?" (notebooks/14_validation.ipynb).

    It holds summaries only; genai-perf's per-request file (``profile_export.json``, perf_analyzer's
    raw response timestamps and SSE chunks) needs the model's tokenizer to count tokens and is
    refused with an explanation.

    Examples
    --------
    >>> import json, pathlib, shutil, tempfile
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "profile_export_genai_perf.json"
    >>> _ = path.write_text(json.dumps({"request_throughput": {"unit": "requests/sec", "avg": 1.96},
    ...                                 "time_to_first_token": {"unit": "ms", "avg": 120.0, "p50": 110.0}}))
    >>> [level] = read_genai_perf(path)
    >>> level.summary                        # ms read as s
    {'request_throughput.avg': 1.96, 'time_to_first_token.avg': 0.12, 'time_to_first_token.p50': 0.11}
    >>> shutil.rmtree(path.parent)
    """
    p = _path(path)
    obj = _objects(p)[0]
    if isinstance(obj, dict) and "experiments" in obj:
        _detect(p, [obj])
    _require(p, "genai-perf", obj, ("request_throughput",))
    summary = _aggregate_summary(obj)
    config = obj.get("input_config") or {}
    rate, concurrency = _load_from_config(config)
    n = summary.get("request_count.avg")
    notes = ["summary only: genai-perf's aggregated statistics",
             "output tokens: the client re-tokenises the streamed text",
             "request_throughput counts every request sent, failed ones too, over last response - first request"]
    return [LoadLevel(tool="genai-perf", file=p.name, index=0, mode=_mode(rate, concurrency), request_rate=rate,
                      concurrency=concurrency, duration=None, n_completed=int(n) if n is not None else None,
                      summary=summary, metadata={"model": _find(config, "model_names")}, notes=tuple(notes))]


# -- guidellm --
def _timing(req: dict, *names):
    timings = (req.get("info") or {}).get("timings") or {}
    for name in names:
        if timings.get(name) is not None:
            return float(timings[name])
    for name in names:                      # guidellm 0.3 kept them on the record itself
        if req.get(name) is not None:
            return float(req[name])
    return None


def _guidellm_tokens(req: dict, which: str):
    for key in (f"{which}_tokens",):
        if req.get(key) is not None:
            return int(req[key])
    metrics = req.get("input_metrics" if which == "prompt" else "output_metrics") or {}
    tokens = [metrics.get(k) for k in ("text_tokens", "image_tokens", "video_tokens", "audio_tokens")]
    if any(t is not None for t in tokens):
        return int(sum(t or 0 for t in tokens))
    if which == "output":
        iterations = ((req.get("info") or {}).get("timings") or {}).get("token_iterations")
        if iterations:
            return int(iterations)
    return None


def _guidellm_summary(metrics: dict) -> dict:
    out = {}
    for name, block in metrics.items():
        if name == "request_totals" and isinstance(block, dict):
            out.update({f"request_totals.{k}": float(v) for k, v in block.items() if _num(v) is not None})
            continue
        if not isinstance(block, dict) or "successful" not in block or not isinstance(block["successful"], dict):
            continue
        scale, base = (1e-3, name[:-3]) if name.endswith("_ms") else (1.0, name)
        stats = block["successful"]
        for stat in ("mean", "median", "min", "max", "std_dev"):
            if _num(stats.get(stat)) is not None:
                out[f"{base}.{stat}"] = _num(stats[stat]) * scale
        for key, value in (stats.get("percentiles") or {}).items():
            if _num(value) is not None:
                out[f"{base}.{key}"] = _num(value) * scale
    return out


def read_guidellm(path) -> list[LoadLevel]:
    """Read a guidellm report (``benchmarks.json``): one load level per benchmark.

    Derived in the chapter "Validation: how good is the model?" (notebooks/14_validation.ipynb).

    Per request: TTFT = first token iteration - request start and E2E = last token iteration -
    request start (the book's t_n - t_send; guidellm's ``request_latency`` ends when the response
    closes). The per-request ITL gaps are not saved (only the number of streamed iterations), so
    pooled ITL cannot be recomputed. Records may be a sample (``sample_size``): counts and
    durations come from the benchmark's totals.

    Examples
    --------
    >>> import json, pathlib, shutil, tempfile
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "benchmarks.json"
    >>> _ = path.write_text(json.dumps({"benchmarks": [{"config": {"strategy": {"type_": "constant", "rate": 4.0}},
    ...                                                 "metrics": {}}]}))
    >>> [level] = read_guidellm(path)
    >>> level.mode, level.request_rate
    ('rate', 4.0)
    >>> shutil.rmtree(path.parent)
    """
    p = _path(path)
    report = _objects(p)[0]
    _require(p, "guidellm", report, ("benchmarks",))
    if not isinstance(report["benchmarks"], list) or not report["benchmarks"]:
        raise BenchmarkFileError(f"{p.name}: read as guidellm, 'benchmarks' is empty: no load levels")
    levels = []
    for index, bench in enumerate(report["benchmarks"]):
        _require(p, "guidellm", bench, ("metrics",), f"benchmark {index}")
        config = bench.get("config") or bench.get("args") or {}
        strategy = config.get("strategy") or {}
        kind = strategy.get("type_", "unknown")
        rate = _num(strategy.get("rate"))
        concurrency = strategy.get("streams") or strategy.get("max_concurrency")
        concurrency = int(concurrency) if concurrency else None
        mode = {"synchronous": "synchronous", "concurrent": "concurrency", "throughput": "throughput",
                "constant": "rate", "poisson": "rate"}.get(kind, "unknown")
        if mode == "rate" and concurrency:
            mode = "rate+concurrency"
        if kind == "synchronous":
            concurrency = 1
        duration = _num(bench.get("duration"))
        if duration is None:
            sched = bench.get("scheduler_metrics") or {}
            if _num(sched.get("measure_end_time")) is not None:
                duration = _num(sched["measure_end_time"]) - _num(sched["measure_start_time"])
            elif _num(bench.get("end_time")) is not None:
                duration = _num(bench["end_time"]) - _num(bench["start_time"])
        totals = bench["metrics"].get("request_totals") or bench.get("request_totals") or {}
        records = ((bench.get("requests") or {}).get("successful")) or []
        notes = []
        starts, ttft, e2el, prompt, output = [], [], [], [], []
        for j, req in enumerate(records):
            start = _timing(req, "request_start", "start_time")
            first = _timing(req, "first_token_iteration", "first_token_time")
            last = _timing(req, "last_token_iteration", "last_token_time")
            n = _guidellm_tokens(req, "output")
            if None in (start, first, last, n):
                raise BenchmarkFileError(f"{p.name}: read as guidellm, benchmark {index} request {j} lacks "
                                         "request_start, first/last token times or output tokens")
            starts.append(start)
            ttft.append(first - start)
            e2el.append(last - start)
            output.append(n)
            prompt.append(_guidellm_tokens(req, "prompt") or 0)
        n_completed = int(totals.get("successful", len(records)))
        fields = {}
        if records:
            fields = dict(start_times=np.asarray(starts) - min(starts), prompt_lens=np.asarray(prompt, np.int64),
                          output_lens=np.asarray(output, np.int64), ttft=np.asarray(ttft), e2el=np.asarray(e2el))
            if len(records) < n_completed:
                notes.append(f"per-request records are a sample: {len(records)} of {n_completed} "
                             "(throughput uses the totals)")
        else:
            notes.append("summary only: the benchmark saved no per-request records")
        notes.append("E2E per request = last token - request start; guidellm's request_latency ends at the "
                     "response's close")
        notes.append("ITL gaps are not saved (only the streamed iteration count): pooled ITL unavailable")
        levels.append(LoadLevel(tool="guidellm", file=p.name, index=index, mode=mode, request_rate=rate,
                                concurrency=concurrency, duration=duration, n_completed=n_completed,
                                n_failed=int(totals["errored"]) if "errored" in totals else None,
                                summary=_guidellm_summary(bench["metrics"]),
                                metadata={"strategy": kind, "guidellm_version":
                                          (report.get("metadata") or {}).get("guidellm_version")},
                                notes=tuple(notes), **fields))
    return levels


_READERS = {"vllm": read_vllm, "sglang": read_sglang, "aiperf": read_aiperf, "genai-perf": read_genai_perf,
            "guidellm": read_guidellm}
