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
