"""The Pareto explorer's update logic, driven as a reader would drive it, without a browser or kernel.

ipywidgets 8 widgets work without a kernel: setting ``.value`` runs the observers at once.
"""

from __future__ import annotations


import matplotlib.pyplot as plt
import numpy as np
import pytest

from servingmath import explorer, pareto
from servingmath.decode import decode_step_time


def test_moving_the_controls_recomputes_the_frontier():
    ex = explorer.FrontierExplorer(draw=False)
    assert ex.updates == 1 and ex.data["model"] == "Llama-3.1-8B"
    before = ex.data["space"]["tpot"].size

    ex.model.value = "Llama-3.1-70B"
    assert ex.updates == 2 and ex.data["model"] == "Llama-3.1-70B"
    assert "does not fit" in ex.text            # 70B in bf16 on one 80 GB GPU (TP 1 selected)

    ex.tensor_parallel.value = 4
    assert ex.data["selection"]["tensor_parallel"] == 4 and ex.data["selected"].any()
    assert "fits up to batch" in ex.text

    ex.context_len.value = 8192
    assert ex.data["context_len"] == 8192
    ex.weight_dtype.value = "fp8"
    ex.kv_dtype.value = "fp8"
    ex.accelerator.value = "H200-SXM-141GB"
    assert ex.updates == 7
    sel = ex.data["selected"]
    space = ex.data["space"]
    assert set(space["weight_dtype"][sel]) == {"fp8"} and set(space["kv_dtype"][sel]) == {"fp8"}
    assert set(space["accelerator"]) == {"H200-SXM-141GB"}
    assert space["tpot"].size != before
    # the message widget shows the summary
    assert "Llama-3.1-70B on H200-SXM-141GB" in ex.message.value


def test_the_selected_curve_is_the_library_curve():
    ex = explorer.FrontierExplorer(model="Llama-3.1-70B", tensor_parallel=4, draw=False)
    d = ex.data
    sel = d["selected"]
    b = d["space"]["batch_size"][sel]
    want = decode_step_time("Llama-3.1-70B", "H100", b, 2048, tensor_parallel=4)
    np.testing.assert_allclose(d["space"]["tpot"][sel], want, rtol=1e-12)
    np.testing.assert_array_equal(d["front"], pareto.pareto_mask(d["space"]["tpot"],
                                                                 d["space"]["throughput_per_gpu"]))


def test_an_impossible_degree_is_reported_not_raised():
    ex = explorer.FrontierExplorer(draw=False, models=["Llama-3.1-8B", "Qwen2.5-7B"])
    ex.tensor_parallel.value = 8
    ex.model.value = "Qwen2.5-7B"                  # 28 query heads: TP 8 does not divide them
    assert ex.data is None and "cannot split Qwen2.5-7B" in ex.text
    ex.tensor_parallel.value = 4
    assert ex.data is not None and ex.data["model"] == "Qwen2.5-7B"


def test_each_context_change_recomputes_the_frontier():
    # speed (target < 50 ms per redraw) is measured by `make bench`, never asserted in a test
    ex = explorer.FrontierExplorer(model="Llama-3.1-70B", tensor_parallel=4, draw=False)
    before = ex.updates
    summaries = set()
    for value in [1024, 4096, 2048, 8192, 512]:
        ex.context_len.value = value
        summaries.add(ex.text)
    assert ex.updates == before + 5 and len(summaries) == 5


def test_drawing_without_a_kernel_does_not_fail():
    ex = explorer.FrontierExplorer(draw=True)
    ex.kv_dtype.value = "fp8"
    assert ex.updates == 2
    plt.close("all")


def test_static_figure_and_summary():
    d = explorer.frontier_data("Llama-3.1-70B", "H100", "fp8", "fp8", 2, 4096)
    fig, ax = plt.subplots()
    explorer.plot_frontier(ax, d, tpot_slo=0.05)
    assert ax.get_xscale() == "log" and "TPOT" in ax.get_xlabel() and "per GPU" in ax.get_ylabel()
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "Pareto front" in labels and any(l.startswith("selected") for l in labels)
    plt.close(fig)
    text = explorer.summary(d, 0.05)
    assert text.startswith("Llama-3.1-70B on H100-SXM5-80GB, context 4096 tokens")
    assert "Best under TPOT 50 ms" in text


def test_frontier_data_clamps_the_context_and_validates():
    d = explorer.frontier_data("Llama-2-7B", "A100", context_len=8192)
    assert d["clamped"] and d["context_len"] == 4096
    assert "clamped" in explorer.summary(d)
    with pytest.raises(ValueError, match="tensor_parallel = 3"):
        explorer.frontier_data("Llama-3.1-8B", "H100", tensor_parallel=3)
    with pytest.raises(KeyError, match="weight_dtype"):
        explorer.frontier_data("Llama-3.1-8B", "H100", weight_dtype="fp6")
    with pytest.raises(KeyError, match="model"):
        explorer.FrontierExplorer(model="Llama-2-7B", draw=False)   # not among the dropdown's choices


def test_the_fixed_frame_holds_every_default_configuration():
    # the frame is drawn once; it must hold every model, GPU and context the dropdowns offer
    ex = explorer.FrontierExplorer(draw=False)
    (x_lo, x_hi), (y_lo, y_hi) = explorer.FRAME_TPOT_MS, explorer.FRAME_THROUGHPUT
    for model in ex.model.options:
        for accelerator in ex.accelerator.options:
            for context in explorer.CONTEXT_LENS:
                space = explorer.frontier_data(model, accelerator, context_len=context)["space"]
                assert space["tpot"].size > 0, (model, accelerator, context)
                tpot_ms, rate = space["tpot"] * 1e3, space["throughput_per_gpu"]
                assert x_lo <= tpot_ms.min() and tpot_ms.max() <= x_hi, (model, accelerator, context)
                assert y_lo <= rate.min() and rate.max() <= y_hi, (model, accelerator, context)


def test_moving_every_control_redraws_only_the_data():
    ex = explorer.FrontierExplorer(draw=True)
    assert ex.full_draws == 1 and ex.renders == 1
    first = ex.image.value
    changes = 0
    for control in ex.controls:
        start = control.value
        for value in [v for v in control.options if v != start] + [start]:
            control.value = value
            changes += 1
    assert ex.renders == 1 + changes and ex.full_draws == 1    # the frame was never redrawn
    assert ex.image.value == first            # back at the start: the same picture, pixel for pixel
    assert ex.message.value.startswith("Llama-3.1-8B on H100-SXM5-80GB")


def test_data_outside_the_frame_grow_it_to_the_next_decade():
    ex = explorer.FrontierExplorer(draw=True, mbu=0.02, mfu=0.02)   # 50x slower steps
    tpot_ms = ex.data["space"]["tpot"] * 1e3
    assert tpot_ms.max() > explorer.FRAME_TPOT_MS[1]
    (x_lo, x_hi), (y_lo, y_hi) = ex._frame
    assert (x_lo, x_hi) == (explorer.FRAME_TPOT_MS[0], 10.0 ** np.ceil(np.log10(tpot_ms.max())))
    assert x_lo <= tpot_ms.min() and y_lo <= ex.data["space"]["throughput_per_gpu"].min()
    assert ex._ax.get_xlim() == (x_lo, x_hi) and ex.full_draws == 1


def test_an_impossible_degree_empties_the_figure_and_says_why():
    ex = explorer.FrontierExplorer(draw=True, models=["Llama-3.1-8B", "Qwen2.5-7B"])
    ex.tensor_parallel.value = 8
    ex.model.value = "Qwen2.5-7B"
    assert ex.message.value.startswith("TP 8 cannot split Qwen2.5-7B")
    assert all(len(a.get_xdata()) == 0 for a in (ex._cloud, ex._front, ex._line))
    assert ex.full_draws == 1
