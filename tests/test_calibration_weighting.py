"""How calibrate weighs its training rows (every source alike, or every row), and which vLLM defaults a
row that sends all its requests at once runs with (a server's, or the offline LLM class's)."""

from __future__ import annotations

import csv
import dataclasses

import numpy as np
import pytest

from servingmath import validation
from servingmath.validation import calibrate, load_published_measurements, predict, row_weights

FIELDS = ["source_title", "source_location", "model", "params_B", "n_layers", "n_kv_heads", "head_dim", "hardware",
          "n_gpus", "tp", "framework", "dtype_weights", "dtype_kv", "batch_size_or_concurrency", "request_rate",
          "prompt_len", "output_len", "metric", "value", "units", "notes"]


@pytest.fixture(scope="module")
def decode_rows():
    """The book's A100 decode-step rows (step model): one engine's ITLs at many batches and lengths."""
    rows = [m for m in load_published_measurements().measurements
            if m.family == "A100" and m.path == "step model" and m.kind == "time" and m.fits]
    # memory-bound ones: their time moves with MBU everywhere between 0.5 and 1 (not just below a knee)
    e = validation.BASELINE
    rows = [m for m in rows if all(predict(m, dataclasses.replace(e, mbu=a), "per_gpu")
                                   > 1.05 * predict(m, dataclasses.replace(e, mbu=a + 0.05), "per_gpu")
                                   for a in (0.5, 0.7, 0.9))]
    assert len(rows) >= 14
    return rows


def synthetic_sources(rows, truths):
    """Rows relabelled into sources, each source's values what its own MBU predicts.

    ``truths``: (title, number of rows, MBU) per source; the rows are taken in order."""
    out, start = [], 0
    for title, n, mbu in truths:
        truth = dataclasses.replace(validation.BASELINE, mbu=mbu)     # calibrate's base, but its MBU
        for m in rows[start:start + n]:
            out.append(dataclasses.replace(m, source_title=title, value=predict(m, truth, "per_gpu")))
        start += n
    assert start <= len(rows)
    return out


def test_source_weights_give_every_source_the_same_total(decode_rows):
    rows = synthetic_sources(decode_rows, [("big", 8, 0.6), ("small", 2, 0.6), ("one", 1, 0.6)])
    w = row_weights(rows)
    assert w.sum() == pytest.approx(1.0)
    by_source = {t: w[[m.source_title == t for m in rows]].sum() for t in ("big", "small", "one")}
    assert all(v == pytest.approx(1 / 3) for v in by_source.values())
    # a row of the 8-row source weighs an eighth of the one-row source's row
    assert w[0] == pytest.approx(w[-1] / 8)
    assert np.allclose(row_weights(rows, "row"), 1 / len(rows))


def test_one_prolific_source_cannot_outvote_the_others(decode_rows):
    # 8 rows of a source at MBU 0.9, then two sources of 2 rows each at 0.6: rows alike, the prolific source
    # wins (8 of 12 rows); sources alike, the two that agree win (2 of 3 sources)
    rows = synthetic_sources(decode_rows, [("prolific", 8, 0.9), ("second", 2, 0.6), ("third", 2, 0.6)])
    by_row = calibrate(rows, basis="per_gpu", parameters=("mbu",), weighting="row")["A100"]
    by_source = calibrate(rows, basis="per_gpu", parameters=("mbu",), weighting="source")["A100"]
    assert by_row.mbu == pytest.approx(0.9, rel=0.02)
    assert by_source.mbu == pytest.approx(0.6, rel=0.02)
    assert calibrate(rows, basis="per_gpu", parameters=("mbu",))["A100"] == by_source    # the default


def test_one_source_fits_the_same_either_way(decode_rows):
    rows = synthetic_sources(decode_rows, [("only", 10, 0.7)])
    a = calibrate(rows, basis="per_gpu", parameters=("mbu",), weighting="row")["A100"]
    b = calibrate(rows, basis="per_gpu", parameters=("mbu",), weighting="source")["A100"]
    assert a.mbu == pytest.approx(b.mbu, rel=1e-6) and a.mbu == pytest.approx(0.7, rel=0.01)


def test_leave_one_source_out_passes_the_weighting_to_every_fold(decode_rows):
    rows = synthetic_sources(decode_rows, [("prolific", 8, 0.9), ("second", 2, 0.6), ("third", 2, 0.6),
                                           ("held", 2, 0.6)])
    params = ("mbu",)
    src = validation.leave_one_source_out(rows, parameters=params, bound=False)
    row = validation.leave_one_source_out(rows, parameters=params, bound=False, weighting="row")
    assert src.folds["held"]["A100"].mbu == pytest.approx(0.6, rel=0.02)
    assert row.folds["held"]["A100"].mbu == pytest.approx(0.9, rel=0.02)
    held = [i for i, m in enumerate(rows) if m.source_title == "held"]
    assert np.abs(src.errors()[held]).max() < 0.02 < np.abs(row.errors()[held]).min()


@pytest.mark.parametrize("bad", ["rows", "", None, 1])
def test_a_weighting_it_does_not_know_is_refused_by_name(decode_rows, bad):
    with pytest.raises((ValueError, TypeError), match="weighting"):
        row_weights(decode_rows, bad)
    with pytest.raises((ValueError, TypeError), match="weighting"):
        calibrate(decode_rows, basis="per_gpu", weighting=bad)
    with pytest.raises((ValueError, TypeError), match="weighting"):
        validation.leave_one_source_out(decode_rows[:2], weighting=bad, bound=False)


def test_row_weights_refuses_an_empty_list():
    with pytest.raises(ValueError, match="at least one"):
        row_weights([])


def test_the_books_calibration_weighs_sources_alike_and_says_so():
    fitted, pooled, n = validation.book_calibration()
    by_row = validation.book_calibration(weighting="row")
    assert n == by_row[2]
    assert fitted != by_row[0]          # the weighting changes some family's fit


# ---- all requests at once: sent to a server, or run offline ---------------------------------------

def one_row_file(tmp_path, framework, notes):
    path = tmp_path / "rows.csv"
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=FIELDS)
        writer.writeheader()
        writer.writerow(dict(source_title="My lab (2026)", model="Llama-3.1-8B", hardware="H100", n_gpus="1", tp="1",
                             framework=framework, dtype_weights="bf16", dtype_kv="bf16",
                             batch_size_or_concurrency="runtime-chosen", request_rate="inf (offline)",
                             prompt_len="ShareGPT", output_len="ShareGPT", metric="throughput_tok_s", value="5000",
                             units="output tok/s", notes=notes, source_location="", params_B="", n_layers="",
                             n_kv_heads="", head_dim=""))
    (m,) = load_published_measurements(path).measurements
    return m


@pytest.mark.parametrize("framework, notes, server", [
    ("vLLM v0.11.0; `vllm serve meta-llama/Llama-3.1-8B`", "1000 requests at once: vllm bench serve", True),
    ("vLLM 0.11", "benchmark_serving.py --request-rate inf against the OpenAI endpoint /v1/completions", True),
    ("vLLM 0.11 (benchmark_throughput.py)", "1000 prompts", False),
    ("vLLM 0.11", "vllm bench throughput, the LLM class", False),
    ("vLLM 0.11", "1000 prompts", False),                 # nothing said: offline, as before
    ("vLLM 0.11", "as run for openai/gpt-oss-120b, 1000 prompts", False),     # a model name, not an API
])
def test_all_at_once_to_a_server_runs_the_api_servers_defaults(tmp_path, framework, notes, server):
    m = one_row_file(tmp_path, framework, notes)
    # vLLM V1 on an H100 (>= 70 GiB, not an A100): API server 8192 tokens per step, LLM class 16384
    assert m.sim.token_budget == (8192 if server else 16384)
    assert ("API server" in m.scheduler["label"]) is server
    assert ("LLM class" in m.scheduler["label"]) is not server
    said = any("sent to a server" in a for a in m.assumptions)
    assert said is server
    assert m.sim.load == ("offline", 0)                 # still every request at once


def test_an_engine_without_separate_server_defaults_records_no_such_assumption(tmp_path):
    m = one_row_file(tmp_path, "SGLang v0.5.5; `python3 -m sglang.launch_server`", "vllm bench serve, 1000 at once")
    assert m.scheduler["engine"] == "sglang"
    assert not any("sent to a server" in a for a in m.assumptions)
