"""Plot helpers shared by the chapters. They draw on an ``Axes`` you pass and change no global state,
except :func:`book_style`, which a chapter calls once in its import cell to set the book's figure style."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from matplotlib.ticker import FuncFormatter, LogLocator, NullLocator

__all__ = ["RequestTrace", "request_timeline", "COLORS", "log_axis", "PlainLogLocator", "book_style",
           "LEGEND_FONTSIZE"]

#: legend text size of the book's figures, points (matplotlib's default is 10; the chapters used 7-8)
LEGEND_FONTSIZE = 9.0

COLORS = {"queue": "#d9d9d9", "prefill": "#f28e2b", "decode": "#4e79a7", "token": "#1f3b5a"}


@dataclass
class RequestTrace:
    """What happened to one request, for a timeline: times in seconds.

    Derived in the chapter "Anatomy of a request" (notebooks/01_anatomy_of_a_request.ipynb).
    """

    name: str
    arrival: float
    prefill_start: float
    token_times: list = field(default_factory=list)


def request_timeline(ax, traces, time_unit: float = 1e-3, unit_label: str = "ms"):
    """Draw a Gantt chart: one row per request, queue -> prefill -> decode with a tick per token.

    Derived in the chapter "Anatomy of a request" (notebooks/01_anatomy_of_a_request.ipynb).

    Parameters
    ----------
    ax : matplotlib Axes
    traces : list of RequestTrace
    time_unit : float
        Seconds per axis unit (1e-3 draws milliseconds).
    """
    if not traces:
        raise ValueError("traces must hold at least one RequestTrace")
    seen = set()

    def label(name):
        if name in seen:
            return None
        seen.add(name)
        return name

    for row, trace in enumerate(reversed(traces)):
        if not trace.token_times:
            raise ValueError(f"trace {trace.name!r} has no token_times")
        t = np.asarray(trace.token_times) / time_unit
        a, p = trace.arrival / time_unit, trace.prefill_start / time_unit
        if p > a:
            ax.barh(row, p - a, left=a, color=COLORS["queue"], height=0.5,
                    label=label("waiting"))
        ax.barh(row, t[0] - p, left=p, color=COLORS["prefill"], height=0.5,
                label=label("prefill"))
        if len(t) > 1:
            ax.barh(row, t[-1] - t[0], left=t[0], color=COLORS["decode"], height=0.5, alpha=0.35,
                    label=label("decode"))
        ax.plot(t, np.full_like(t, row), "|", color=COLORS["token"], markersize=12,
                label=label("output token"))
    ax.set_yticks(range(len(traces)), [tr.name for tr in reversed(traces)])
    ax.set_xlabel(f"time ({unit_label})")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.25), ncol=4, frameon=False)
    return ax


def _plain_number(value, _position=None) -> str:
    """A tick label without mathtext: 0.5, 1, 20, 500, 2000, 1e+06."""
    return f"{value:g}"


class PlainLogLocator(LogLocator):
    """Major ticks of a log axis at 1, 2 and 5 per decade over short spans, at decades over long ones.

    Derived in the chapter "How to use this book" (notebooks/00_how_to_use_this_book.ipynb).

    ``max_decades_for_125`` is the widest span (in decades) still ticked at 1-2-5.
    """

    def __init__(self, max_decades_for_125: float = 3.0):
        super().__init__(base=10.0, subs=(1.0, 2.0, 5.0))
        self.max_decades_for_125 = max_decades_for_125

    def tick_values(self, vmin, vmax):
        if vmin > 0 and vmax > 0:
            decades = abs(np.log10(vmax) - np.log10(vmin))
            self.set_params(subs=(1.0, 2.0, 5.0) if decades <= self.max_decades_for_125 else (1.0,))
        return super().tick_values(vmin, vmax)


def log_axis(ax, which: str = "x", max_decades_for_125: float = 3.0):
    """Put one axis of ``ax`` on a log scale with plain tick labels and no minor ticks.

    Derived in the chapter "Rooflines: why decoding is bandwidth-bound" (notebooks/02_rooflines.ipynb).

    Labels read 1, 2, 5, 10, 20, 50, ... over spans of up to ``max_decades_for_125``
    decades and 1, 10, 100, ... over wider ones, instead of matplotlib's default powers of
    ten with eight unlabelled minor ticks per decade. Plain numbers read faster for batch
    sizes and milliseconds, and a log axis without minor ticks draws two to three times
    faster (each tick is an artist matplotlib has to create and lay out).

    Parameters
    ----------
    ax : matplotlib Axes
    which : {"x", "y", "both"}
        The axis (or axes) to set.

    Returns ``ax``.
    """
    if which not in ("x", "y", "both"):
        raise ValueError(f"which must be 'x', 'y' or 'both', got {which!r}")
    for name in (("x", "y") if which == "both" else (which,)):
        getattr(ax, f"set_{name}scale")("log")
        axis = getattr(ax, f"{name}axis")
        axis.set_major_locator(PlainLogLocator(max_decades_for_125))
        axis.set_major_formatter(FuncFormatter(_plain_number))
        axis.set_minor_locator(NullLocator())
    return ax


def book_style(legend_fontsize: float = LEGEND_FONTSIZE, retina: bool = True) -> None:
    """The book's figure style: retina figures and legends at ``legend_fontsize`` points.

    Derived in the chapter "Anatomy of a request" (notebooks/01_anatomy_of_a_request.ipynb).

    Every chapter calls it once in its import cell (``tools/figure_style.py`` writes that line),
    so one place decides how the book's figures look. Importing this module changes nothing.

    * ``legend.fontsize`` and ``legend.title_fontsize`` (matplotlib's rcParams) are set to
      ``legend_fontsize``: chapters call ``ax.legend()`` without a size.
    * In a Jupyter kernel, the inline backend renders figures as ``"retina"`` PNGs: twice the
      pixels, shown at the same size, so text and lines stay sharp on high-density screens and
      in the HTML book. The inline backend's other settings (``print_figure_kwargs``, which
      several chapters set to ``{"bbox_inches": None}`` to draw each figure once) are kept.
      Outside IPython only the rcParams change.

    Parameters
    ----------
    legend_fontsize : float
        Points; 9 to 10 reads well at the book's figure widths (7 to 7.5 inches).
    retina : bool
        Switch the inline backend to retina PNGs (where there is one).

    Examples
    --------
    >>> import matplotlib
    >>> saved = matplotlib.rcParams["legend.fontsize"]
    >>> book_style()
    >>> matplotlib.rcParams["legend.fontsize"]
    9.0
    >>> matplotlib.rcParams["legend.fontsize"] = saved
    """
    import matplotlib

    if not isinstance(legend_fontsize, (int, float)) or isinstance(legend_fontsize, bool) \
            or not 4 <= legend_fontsize <= 30:
        raise ValueError(f"legend_fontsize must be a number of points from 4 to 30, got {legend_fontsize!r}")
    matplotlib.rcParams["legend.fontsize"] = float(legend_fontsize)
    matplotlib.rcParams["legend.title_fontsize"] = float(legend_fontsize)
    if not retina:
        return
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is None or not hasattr(shell, "display_formatter"):
        return
    from matplotlib_inline.backend_inline import InlineBackend

    config = InlineBackend.instance(parent=shell)
    if config.shell is None:
        config.shell = shell
    config.figure_formats = {"retina"}
