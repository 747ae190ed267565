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
    d = explorer.frontier_data("Llama-3.1-70B", "H100", weight_dtype="fp8", kv_dtype="fp8", tensor_parallel=2, context_len=4096)
    fig, ax = plt.subplots()
    explorer.plot_frontier(ax, d, tpot_slo=0.05)
    assert ax.get_xscale() == "log" and "TPOT" in ax.get_xlabel() and "per GPU" in ax.get_ylabel()
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "Pareto front" in labels and any(l.startswith("selected") for l in labels)
    plt.close(fig)
    text = explorer.summary(d, 0.05)
    assert text.startswith("Llama-3.1-70B on H100-SXM5-80GB, context 4096 tokens")
    lines = text.splitlines()
    assert len(lines) == 4
    assert lines[1].startswith("Selected configuration (fp8 weights, fp8 KV, TP 2): fits up to batch")
    assert lines[2].startswith("Selected configuration, best under TPOT 50 ms: batch ")
    assert lines[3].startswith("Best of all configurations under TPOT 50 ms: ")


def test_the_best_lines_are_the_best_points_under_the_target():
    d = explorer.frontier_data("Llama-3.1-70B", "H100", weight_dtype="fp8", kv_dtype="fp8", tensor_parallel=2, context_len=4096)
    space, sel = d["space"], d["selected"]
    ok = space["tpot"] <= 0.05
    best_sel = max(np.flatnonzero(ok & sel), key=lambda i: space["throughput_per_gpu"][i])
    best_all = max(np.flatnonzero(ok), key=lambda i: space["throughput_per_gpu"][i])
    lines = explorer.summary(d, 0.05).splitlines()
    assert f"batch {space['batch_size'][best_sel]}, TPOT {space['tpot'][best_sel] * 1e3:.1f} ms" in lines[2]
    assert (f"{space['weight_dtype'][best_all]} weights, {space['kv_dtype'][best_all]} KV, "
            f"TP {space['tensor_parallel'][best_all]}, batch {space['batch_size'][best_all]}") in lines[3]
    assert space["throughput_per_gpu"][best_all] >= space["throughput_per_gpu"][best_sel]
    assert d["front"][best_all]                                  # the best under a target is on the front
    none = explorer.summary(d, 1e-4).splitlines()
    assert none[2] == "Selected configuration: no batch size meets TPOT 0 ms."
    assert none[3] == "No configuration meets TPOT 0 ms."


def test_select_is_frontier_data_with_another_selection():
    d = explorer.frontier_data("Llama-3.1-70B", "H100", weight_dtype="bf16", kv_dtype="bf16", tensor_parallel=4, context_len=2048)
    for wd, kd, tp in [("fp8", "fp8", 2), ("int4", "bf16", 8), ("bf16", "fp8", 1)]:
        fresh = explorer.frontier_data("Llama-3.1-70B", "H100", weight_dtype=wd, kv_dtype=kd, tensor_parallel=tp, context_len=2048)
        picked = explorer.select(d, wd, kd, tp)
        np.testing.assert_array_equal(picked["selected"], fresh["selected"])
        assert explorer.summary(picked) == explorer.summary(fresh)
    with pytest.raises(KeyError, match="weight_dtype"):
        explorer.select(d, "fp6", "bf16", 1)


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
    # FRAME_* is the frame when there are no data, and a range every default space fits in
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


def test_the_frame_fits_the_data():
    for model, context in [("Llama-3.1-8B", 512), ("Llama-3.1-70B", 32768), ("Mixtral-8x7B", 4096)]:
        space = explorer.frontier_data(model, "H100", context_len=context)["space"]
        (x_lo, x_hi), (y_lo, y_hi) = explorer.fit_frame(space)
        x, y = space["tpot"] * 1e3, space["throughput_per_gpu"]
        assert x_lo < x.min() and x.max() < x_hi and y_lo < y.min() and y.max() < y_hi
        # tight: within a 1-2-5 step (at most 2.5x) plus the margin of each side of the data
        assert x.min() / x_lo < 2.5 * 1.15 and x_hi / x.max() < 2.5 * 1.15
        assert y.min() / y_lo < 2.5 * 1.15 and y_hi / y.max() < 2.5 * 1.15
        # much tighter than the fixed range the explorer used to draw in
        frame = np.log10(x_hi / x_lo) * np.log10(y_hi / y_lo)
        fixed = np.log10(explorer.FRAME_TPOT_MS[1] / explorer.FRAME_TPOT_MS[0]) * 5
        assert frame < fixed / 2
    (x_lo, x_hi), _ = explorer.fit_frame({"tpot": np.array([1e-3]), "throughput_per_gpu": np.array([9.0])},
                                         tpot_slo=0.05)
    assert x_lo < 1 and 50 < x_hi <= 100                       # the target stays in view
    assert explorer.fit_frame({"tpot": np.zeros(0), "throughput_per_gpu": np.zeros(0)}) == (
        explorer.FRAME_TPOT_MS, explorer.FRAME_THROUGHPUT)


def test_data_types_and_tp_redraw_only_the_data_and_a_new_space_refits_the_frame():
    ex = explorer.FrontierExplorer(draw=True)
    assert ex.full_draws == 1 and ex.renders == 1
    first = ex.image.value
    changes = 0
    for control in (ex.weight_dtype, ex.kv_dtype, ex.tensor_parallel):
        start = control.value
        for value in [v for v in control.options if v != start] + [start]:
            control.value = value
            changes += 1
    assert ex.renders == 1 + changes and ex.full_draws == 1    # same space, same frame: blitted
    assert ex.image.value == first            # back at the start: the same picture, pixel for pixel
    ex.context_len.value = 32768                               # another space: a frame fitted to it
    assert ex.full_draws == 2 and ex._frame == explorer.fit_frame(ex.data["space"], tpot_slo=0.05)
    assert ex._ax.get_xlim() == ex._frame[0]
    ex.context_len.value = 2048                                # back: its frame was kept
    assert ex.full_draws == 2 and ex.image.value == first
    assert ex.message.value.startswith("Llama-3.1-8B on H100-SXM5-80GB")


def test_the_picture_is_sharp_and_the_widget_shows_it_at_its_size():
    from PIL import Image
    import io

    ex = explorer.FrontierExplorer(draw=True)
    png = Image.open(io.BytesIO(ex.image.value))
    png.load()
    width, height = explorer.DISPLAY_SIZE_PX
    assert png.size == (width * explorer.PIXEL_RATIO, height * explorer.PIXEL_RATIO)
    # the PNG holds exactly the pixels matplotlib drew
    np.testing.assert_array_equal(np.asarray(png.convert("RGB")),
                                  np.asarray(ex._figure.canvas.buffer_rgba())[:, :, :3])
    assert (ex.image.width, ex.image.height) == (str(width), str(height)) or \
        (ex.image.width, ex.image.height) == (width, height)


def test_an_unexecuted_view_shows_a_picture_not_the_widget_repr():
    import base64

    ex = explorer.FrontierExplorer(draw=False)
    box = ex.widget()
    data, metadata = box._repr_mimebundle_()
    view = data["application/vnd.jupyter.widget-view+json"]                # live: the widget
    assert view["model_id"] == box.model_id
    assert view["servingmath_explorer"] == {"model": "Llama-3.1-8B", "accelerator": "H100-SXM5-80GB",
                                            "weight_dtype": "bf16", "kv_dtype": "bf16",
                                            "tensor_parallel": 1, "context_len": 2048}
    assert base64.b64decode(data["image/png"])[:8] == b"\x89PNG\r\n\x1a\n"  # otherwise: the figure
    assert "VBox" not in data["text/plain"] and "Pareto-front explorer" in data["text/plain"]
    assert metadata["image/png"]["width"] == explorer.DISPLAY_SIZE_PX[0]


def test_an_impossible_degree_empties_the_figure_and_says_why():
    ex = explorer.FrontierExplorer(draw=True, models=["Llama-3.1-8B", "Qwen2.5-7B"])
    ex.tensor_parallel.value = 8
    ex.model.value = "Qwen2.5-7B"
    assert ex.message.value.startswith("TP 8 cannot split Qwen2.5-7B")
    assert all(len(a.get_xdata()) == 0 for a in (ex._cloud, ex._front, ex._line))


# --------------------------------------------------------------------------- the static book's explorer data

def _explorer_data():
    from conftest import load_tool

    return load_tool("explorer_data")


def test_the_static_explorer_data_are_the_librarys_own():
    data_tool = _explorer_data()
    for setting in data_tool.SETTINGS:
        space = data_tool.one_space("Llama-3.1-70B", "H100-SXM5-80GB", 4096, setting)
        options = data_tool.SETTINGS[setting][0]
        d = explorer.frontier_data("Llama-3.1-70B", "H100-SXM5-80GB", context_len=4096, **options)
        assert space["points"] == d["space"]["tpot"].size
        assert len(space["front"]) == int(d["front"].sum())
        for key, middle in space["summaries"].items():
            wd, kd, tp = key.split("|")
            want = explorer.summary(explorer.select(d, wd, kd, int(tp)), data_tool.TPOT_SLO)
            assert "\n".join([space["summary_head"], middle, space["summary_tail"]]) == want
        # each curve: the library's TPOT and throughput to 4 significant digits, over the first batch sizes
        for key, curve in zip(space["configs"], space["curves"]):
            wd, kd, tp = key.split("|")
            sel = explorer.select(d, wd, kd, int(tp))["selected"]
            order = np.argsort(d["space"]["batch_size"][sel])
            np.testing.assert_allclose(curve["tpot_ms"], d["space"]["tpot"][sel][order] * 1e3, rtol=5e-4)
            np.testing.assert_allclose(curve["throughput_per_gpu"],
                                       d["space"]["throughput_per_gpu"][sel][order], rtol=5e-4)
            assert d["space"]["batch_size"][sel][order].tolist() == \
                explorer.DEFAULT_BATCH_SIZES[:len(curve["tpot_ms"])].tolist()
        # the front, as (configuration, batch) pairs, is the library's front
        want = {(f"{w}|{k}|{n}", int(b)) for w, k, n, b, f in zip(
            d["space"]["weight_dtype"], d["space"]["kv_dtype"], d["space"]["tensor_parallel"],
            d["space"]["batch_size"], d["front"]) if f}
        got = {(space["configs"][c], int(explorer.DEFAULT_BATCH_SIZES[b])) for c, b in space["front"]}
        assert got == want


def test_the_realistic_setting_is_the_librarys_one_constant_and_slower_than_the_bound():
    from servingmath import settings

    data_tool = _explorer_data()
    assert data_tool.SETTINGS["realistic"][0] is settings.REALISTIC
    assert data_tool.SETTINGS["physical bound"][0] is settings.PHYSICAL
    bound = data_tool.one_space("Llama-3.1-8B", "H100-SXM5-80GB", 2048, "physical bound")
    real = data_tool.one_space("Llama-3.1-8B", "H100-SXM5-80GB", 2048, "realistic")
    assert min(real["curves"][0]["tpot_ms"]) > min(bound["curves"][0]["tpot_ms"]) * 1.2
    assert f"realistic: mfu = {settings.REALISTIC['mfu']:g}, mbu = {settings.REALISTIC['mbu']:g}" in \
        data_tool.SETTINGS["realistic"][1]


def test_the_static_explorer_has_the_widgets_controls(tmp_path):
    data_tool = _explorer_data()
    index = data_tool.index_data()
    ex = explorer.FrontierExplorer(draw=False)
    assert index["models"] == list(ex.model.options)
    assert index["accelerators"] == list(ex.accelerator.options)
    assert index["weight_dtypes"] == list(ex.weight_dtype.options)
    assert index["kv_dtypes"] == list(ex.kv_dtype.options)
    assert index["tensor_parallel"] == list(ex.tensor_parallel.options)
    assert index["context_lens"] == list(ex.context_len.options)
    assert [s["name"] for s in index["settings"]] == ["physical bound", "realistic"]
    written = data_tool.write(tmp_path, models=["Llama-3.1-8B"], accelerators=["H100-SXM5-80GB"],
                              context_lens=[2048])
    assert [p.name for p in written] == ["explorer-index.js", "explorer-llama-3.1-8b.js"]
    text = written[1].read_text()
    assert text.startswith("// Generated by tools/explorer_data.py")
    assert 'window.SERVINGMATH_EXPLORER_DATA["Llama-3.1-8B"] = {' in text
    assert '"Llama-3.1-8B|H100-SXM5-80GB|2048|realistic":' in text
