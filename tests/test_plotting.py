"""servingmath.plotting: the shared log axis and the request timeline."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from servingmath import plotting  # noqa: E402


@pytest.fixture
def ax():
    fig, ax = plt.subplots()
    yield ax
    plt.close(fig)


def _labels(ax, which):
    ax.figure.canvas.draw()
    axis = getattr(ax, f"{which}axis")
    lo, hi = getattr(ax, f"get_{which}lim")()
    ticks = [t for t in axis.get_majorticklocs() if lo <= t <= hi]
    return [axis.get_major_formatter()(t, i) for i, t in enumerate(ticks)]


def test_log_axis_short_span_has_plain_1_2_5_labels(ax):
    ax.plot([1, 500], [1, 2])
    plotting.log_axis(ax, "x")
    assert ax.get_xscale() == "log" and ax.get_yscale() == "linear"
    labels = _labels(ax, "x")
    assert labels[:6] == ["1", "2", "5", "10", "20", "50"]
    assert not any("$" in label or "^" in label for label in labels)
    assert len(ax.xaxis.get_minorticklocs()) == 0


def test_log_axis_long_span_keeps_only_decades(ax):
    ax.plot([1, 1e6], [1, 2])
    plotting.log_axis(ax, "x")
    labels = _labels(ax, "x")
    assert "2" not in labels and "5" not in labels
    assert {"1", "10", "100", "1000"} <= set(labels)


def test_log_axis_both(ax):
    ax.plot([0.5, 50], [2, 2000])
    plotting.log_axis(ax, "both")
    assert ax.get_xscale() == ax.get_yscale() == "log"
    assert "0.5" in _labels(ax, "x")
    assert len(ax.yaxis.get_minorticklocs()) == 0


@pytest.mark.parametrize("bad", ["z", "X", "", None])
def test_log_axis_rejects_unknown_axis(ax, bad):
    with pytest.raises(ValueError, match="which must be 'x', 'y' or 'both'"):
        plotting.log_axis(ax, bad)


def test_plain_log_locator_switches_at_the_threshold():
    locator = plotting.PlainLogLocator(max_decades_for_125=2.0)
    short = locator.tick_values(1.0, 99.0)
    assert np.isclose(short, 2.0).any() and np.isclose(short, 50.0).any()
    long = locator.tick_values(1.0, 1e3)
    assert not np.isclose(long, 2.0).any() and np.isclose(long, 100.0).any()


# --------------------------------------------------------------------------- the book's figure style

def test_importing_plotting_changes_no_rcparams():
    import subprocess
    import sys

    code = ("import matplotlib; before = dict(matplotlib.rcParams); import servingmath.plotting; "
            "assert dict(matplotlib.rcParams) == before; print('same')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "same"


def test_book_style_sets_the_legend_size_and_validates():
    import matplotlib

    saved = {k: matplotlib.rcParams[k] for k in ("legend.fontsize", "legend.title_fontsize")}
    try:
        plotting.book_style(retina=False)
        assert matplotlib.rcParams["legend.fontsize"] == plotting.LEGEND_FONTSIZE == 9.0
        fig, ax = plt.subplots()
        ax.plot([1, 2], label="a")
        assert ax.legend().get_texts()[0].get_fontsize() == 9.0
        plt.close(fig)
        for bad in (2, 40, "9", True, None):
            with pytest.raises(ValueError, match="legend_fontsize must be a number of points"):
                plotting.book_style(legend_fontsize=bad)
    finally:
        matplotlib.rcParams.update(saved)


def test_book_style_in_a_kernel_draws_retina_and_keeps_the_chapters_print_settings():
    import base64
    import io

    import nbformat
    from nbclient import NotebookClient
    from PIL import Image

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(
                    "import matplotlib.pyplot as plt\n"
                    "from servingmath.plotting import book_style\n"
                    '%config InlineBackend.print_figure_kwargs = {"bbox_inches": None}\n'
                    "book_style()"),
                nbformat.v4.new_code_cell(
                    "fig, ax = plt.subplots(figsize=(4, 3))\nax.plot([1, 2], label='a')\nax.legend()\nplt.show()")]
    NotebookClient(nb, timeout=60, kernel_name="python3").execute()
    (output,) = [o for o in nb.cells[1].outputs if "image/png" in o.get("data", {})]
    png = Image.open(io.BytesIO(base64.b64decode(output["data"]["image/png"])))
    assert png.size == (800, 600)                       # 4 x 3 in at 2 x 100 dpi, not cropped (bbox None kept)
    assert output["metadata"]["image/png"] == {"width": 400, "height": 300}   # shown at its size


def test_every_chapter_is_in_the_book_style():
    from conftest import ROOT, load_tool

    style = load_tool("figure_style")
    stale = [p.name for p, _ in style.out_of_date(ROOT)]
    assert not stale, f"run .venv/bin/python tools/figure_style.py, then re-execute: {stale}"


def test_figure_style_tool_edits():
    from conftest import load_tool

    style = load_tool("figure_style")
    drop = style.drop_small_legend_sizes
    assert drop("ax.legend(fontsize=8)") == "ax.legend()"
    assert drop('ax.legend(fontsize=8, loc="upper left")') == 'ax.legend(loc="upper left")'
    assert drop('ax.legend(loc="upper left", fontsize=7)') == 'ax.legend(loc="upper left")'
    assert drop("ax.legend(h, l, ncol=4, fontsize=8, frameon=False)") == "ax.legend(h, l, ncol=4, frameon=False)"
    assert drop("ax.legend(fontsize=10)") == "ax.legend(fontsize=10)"             # big enough: kept
    assert drop("ax.set_title('x', fontsize=8)") == "ax.set_title('x', fontsize=8)"   # not a legend
    assert drop("a.legend(fontsize=8); b.legend(loc=1, fontsize=6.5)") == "a.legend(); b.legend(loc=1)"
    cell = "import numpy as np\nfrom servingmath.x import (a,\n    b)\n\nprint(1)"
    styled = style.styled_import_cell(cell)
    assert styled.split("\n")[3] == style.IMPORT_LINE and styled.endswith(style.CALL_LINE)
    assert style.styled_import_cell(styled) == styled                              # idempotent


def test_long_code_lines_are_listed(tmp_path):
    import nbformat

    from conftest import load_tool

    style = load_tool("figure_style")
    (tmp_path / "notebooks").mkdir()
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("x = 1\n" + "y = " + "1 + " * 30 + "1"),
                nbformat.v4.new_markdown_cell("z" * 200)]
    nbformat.write(nb, tmp_path / "notebooks" / "01_a.ipynb")
    found = style.long_lines(tmp_path, width=77)
    assert [(cell, length) for cell, length, _ in found["01_a.ipynb"]] == [(0, 125)]
    assert style.long_lines(tmp_path, width=200) == {"01_a.ipynb": []}
