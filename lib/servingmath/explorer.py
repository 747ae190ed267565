"""The interactive Pareto-front explorer: its data, its figure and its widgets.

:func:`frontier_data` computes, for one model on one accelerator at one
context length, every decode configuration of the design space (weight data
type x KV data type x tensor-parallel degree x batch size), its Pareto front
(TPOT down, throughput per GPU up), and the curve of the configuration the
reader selected. It is pure numpy and takes a few milliseconds, so the widget
can recompute on every slider move. :func:`plot_frontier` draws it on an Axes
you pass (the chapter uses it for the static figure too). :class:`FrontierExplorer`
wires ipywidgets dropdowns and a slider to the two. :func:`select` re-selects a
configuration without recomputing the space, and :func:`fit_frame` gives the axes'
limits that hold a space; the static HTML book's explorer (``tools/explorer_data.py``)
precomputes the same data and summaries with them.

ipywidgets is imported only when a :class:`FrontierExplorer` is built, and
matplotlib only when a figure is drawn, so importing this module costs nothing.

Examples
--------
>>> d = frontier_data("Llama-3.1-8B", "H100", weight_dtype="bf16", kv_dtype="bf16",
...                   tensor_parallel=1, context_len=2048)
>>> int(d["selected"].sum()) > 0, bool(d["front"].any())
(True, True)
"""

from __future__ import annotations

import base64
import struct
import zlib

import numpy as np

from ._validation import check_choice, check_integer
from .datatypes import check_dtype
from .hardware import get_accelerator
from .memory import valid_tensor_parallel_degrees
from .models import get_model
from .pareto import decode_design_space, pareto_mask
from .plotting import log_axis

__all__ = ["DEFAULT_BATCH_SIZES", "WEIGHT_DTYPES", "KV_DTYPES", "TENSOR_PARALLEL", "CONTEXT_LENS",
           "DEFAULT_MODELS", "DEFAULT_ACCELERATORS", "frontier_data", "select", "summary", "fit_frame",
           "plot_frontier", "FrontierExplorer"]

#: batch sizes of the explorer: 1 to 1024, about 8 per doubling
DEFAULT_BATCH_SIZES = np.unique(np.round(np.geomspace(1, 1024, 81)).astype(np.int64))
WEIGHT_DTYPES = ("bf16", "fp8", "int8", "int4")
KV_DTYPES = ("bf16", "fp8")
TENSOR_PARALLEL = (1, 2, 4, 8)
CONTEXT_LENS = (512, 1024, 2048, 4096, 8192, 16384, 32768)
#: the explorer's choices of model and accelerator
DEFAULT_MODELS = ("Llama-3.1-8B", "Llama-3.1-70B", "Qwen2.5-72B", "Mixtral-8x7B")
DEFAULT_ACCELERATORS = ("H100-SXM5-80GB", "H200-SXM-141GB", "A100-SXM4-80GB", "L40S", "MI300X")


def frontier_data(model, accelerator, *, weight_dtype="bf16", kv_dtype="bf16", tensor_parallel=1,
                  context_len=2048, batch_sizes=None, weight_dtypes=WEIGHT_DTYPES,
                  kv_dtypes=KV_DTYPES, tensor_parallel_options=TENSOR_PARALLEL, **kwargs) -> dict:
    """The design space of one model on one accelerator, its Pareto front and one selected configuration.

    Derived in the chapter "The Pareto frontier" (notebooks/06_pareto_frontier.ipynb).

    Parameters
    ----------
    model, accelerator : str
    weight_dtype, kv_dtype, tensor_parallel
        The selected configuration, drawn as a curve over the batch sizes.
    context_len : int
        Tokens per sequence; clamped to the model's maximum (``clamped`` says so).
    batch_sizes : array of int, optional
        Default :data:`DEFAULT_BATCH_SIZES` (1 to 1024).
    weight_dtypes, kv_dtypes, tensor_parallel_options
        The design space the front is taken over (degrees that do not split
        the model evenly are dropped).
    **kwargs
        ``mfu``, ``mbu``, ``overlap``, ``allreduce_latency`` for the step time.

    Returns
    -------
    dict
        ``space`` (the dict of :func:`servingmath.pareto.decode_design_space`,
        feasible points only), ``front`` (bool mask over the space),
        ``selected`` (bool mask: the selected configuration's points),
        ``model``, ``accelerator``, ``context_len``, ``clamped`` (bool),
        ``selection`` (dict of the selected weight_dtype, kv_dtype, tensor_parallel).
    """
    m = get_model(model)
    acc = get_accelerator(accelerator)
    check_dtype(weight_dtype, "weight_dtype")
    check_dtype(kv_dtype, "kv_dtype")
    n = int(check_integer("tensor_parallel", tensor_parallel, minimum=1))
    s = int(check_integer("context_len", context_len, minimum=1))
    clamped = s > m.max_context_len
    s = min(s, m.max_context_len)
    b = DEFAULT_BATCH_SIZES if batch_sizes is None else batch_sizes
    valid = valid_tensor_parallel_degrees(m)
    degrees = sorted({d for d in tensor_parallel_options if d in valid} | ({n} if n in valid else set()))
    if n not in valid:
        raise ValueError(f"tensor_parallel = {n} cannot split {m.name}; allowed: "
                         f"{', '.join(map(str, valid))}")
    wds = list(dict.fromkeys(list(weight_dtypes) + [weight_dtype]))
    kds = list(dict.fromkeys(list(kv_dtypes) + [kv_dtype]))
    space = decode_design_space(m, acc, b, s, tensor_parallel=degrees, weight_dtypes=wds,
                                kv_dtypes=kds, **kwargs)
    front = pareto_mask(space["tpot"], space["throughput_per_gpu"])
    selected = ((space["weight_dtype"] == weight_dtype) & (space["kv_dtype"] == kv_dtype)
                & (space["tensor_parallel"] == n))
    return {"space": space, "front": front, "selected": selected, "model": m.name,
            "accelerator": acc.name, "context_len": s, "clamped": clamped,
            "selection": {"weight_dtype": weight_dtype, "kv_dtype": kv_dtype, "tensor_parallel": n}}


def select(data, weight_dtype, kv_dtype, tensor_parallel) -> dict:
    """``data`` with another configuration selected, without recomputing the space.

    Derived in the chapter "The Pareto frontier" (notebooks/06_pareto_frontier.ipynb).

    >>> d = frontier_data("Llama-3.1-8B", "H100", context_len=2048)
    >>> e = select(d, "fp8", "fp8", 2)
    >>> e["selection"]["tensor_parallel"], bool(e["selected"].any()), e["front"] is d["front"]
    (2, True, True)
    """
    space = data["space"]
    n = int(check_integer("tensor_parallel", tensor_parallel, minimum=1))
    check_dtype(weight_dtype, "weight_dtype")
    check_dtype(kv_dtype, "kv_dtype")
    selected = ((space["weight_dtype"] == weight_dtype) & (space["kv_dtype"] == kv_dtype)
                & (space["tensor_parallel"] == n))
    return {**data, "selected": selected,
            "selection": {"weight_dtype": weight_dtype, "kv_dtype": kv_dtype, "tensor_parallel": n}}


def summary(data, tpot_slo=0.05) -> str:
    """What the explorer says: the space, the selected configuration, and the best of all under ``tpot_slo``.

    Derived in the chapter "The Pareto frontier" (notebooks/06_pareto_frontier.ipynb).

    Four lines: the space (feasible configurations, how many on the front); the selected
    configuration (does it fit, how far, how many of its batch sizes are on the front); the
    selected configuration's best batch under the TPOT target; the best of *all* the
    configurations under the same target (the point of the front at the target).

    >>> d = frontier_data("Llama-3.1-8B", "H100", context_len=2048)
    >>> print(summary(d).splitlines()[0])
    Llama-3.1-8B on H100-SXM5-80GB, context 2048 tokens: 1869 feasible configurations, 61 on the front.
    """
    space, front, sel = data["space"], data["front"], data["selected"]
    c = data["selection"]
    name = f"{c['weight_dtype']} weights, {c['kv_dtype']} KV, TP {c['tensor_parallel']}"
    target = f"TPOT {tpot_slo * 1e3:.0f} ms"
    lines = [f"{data['model']} on {data['accelerator']}, context {data['context_len']} tokens"
             + (" (clamped to the model's maximum)" if data["clamped"] else "")
             + f": {space['tpot'].size} feasible configurations, {int(front.sum())} on the front."]
    if not sel.any():
        lines.append(f"Selected configuration ({name}): does not fit in memory at this context length.")
    else:
        b_max = int(space["max_batch"][sel][0])
        on_front = int((sel & front).sum())
        lines.append(f"Selected configuration ({name}): fits up to batch {b_max}; "
                     f"{on_front} of its {int(sel.sum())} batch sizes are on the front.")
        ok = sel & (space["tpot"] <= tpot_slo)
        if ok.any():
            i = np.flatnonzero(ok)[np.argmax(space["throughput_per_gpu"][ok])]
            lines.append(f"Selected configuration, best under {target}: batch {int(space['batch_size'][i])}, "
                         f"TPOT {space['tpot'][i] * 1e3:.1f} ms, "
                         f"{space['throughput_per_gpu'][i]:,.0f} tok/s per GPU.")
        else:
            lines.append(f"Selected configuration: no batch size meets {target}.")
    ok = space["tpot"] <= tpot_slo
    if ok.any():
        i = np.flatnonzero(ok)[np.argmax(space["throughput_per_gpu"][ok])]
        lines.append(f"Best of all configurations under {target}: {space['weight_dtype'][i]} weights, "
                     f"{space['kv_dtype'][i]} KV, TP {int(space['tensor_parallel'][i])}, "
                     f"batch {int(space['batch_size'][i])}: TPOT {space['tpot'][i] * 1e3:.1f} ms, "
                     f"{space['throughput_per_gpu'][i]:,.0f} tok/s per GPU.")
    else:
        lines.append(f"No configuration meets {target}.")
    return "\n".join(lines)


def _nice(value, up: bool) -> float:
    """The nearest 1-2-5 number at or above (``up``) or at or below ``value`` (> 0)."""
    exponent = np.floor(np.log10(value))
    candidates = [m * 10.0 ** (exponent + k) for k in (-1, 0, 1) for m in (1.0, 2.0, 5.0)]
    if up:
        return float(min(c for c in candidates if c >= value * (1 - 1e-12)))
    return float(max(c for c in candidates if c <= value * (1 + 1e-12)))


def fit_frame(space, margin=1.15, tpot_slo=None):
    """Log-axis limits that hold every point of ``space``: ((TPOT ms low, high), (tok/s per GPU low, high)).

    Derived in the chapter "The Pareto frontier" (notebooks/06_pareto_frontier.ipynb).

    Each limit is a 1-2-5 number at least ``margin`` beyond the data, so the ticks land on
    the frame's edges; ``tpot_slo`` (seconds), if given, is kept inside the TPOT range too.

    >>> fit_frame({"tpot": np.array([0.004, 0.09]), "throughput_per_gpu": np.array([300.0, 7000.0])})
    ((2.0, 200.0), (200.0, 10000.0))
    """
    x = np.asarray(space["tpot"], dtype=float) * 1e3
    y = np.asarray(space["throughput_per_gpu"], dtype=float)
    if x.size == 0:
        return FRAME_TPOT_MS, FRAME_THROUGHPUT
    x_lo, x_hi = x.min(), x.max()
    if tpot_slo is not None:
        x_lo, x_hi = min(x_lo, tpot_slo * 1e3), max(x_hi, tpot_slo * 1e3)
    return ((_nice(x_lo / margin, up=False), _nice(x_hi * margin, up=True)),
            (_nice(y.min() / margin, up=False), _nice(y.max() * margin, up=True)))


def plot_frontier(ax, data, tpot_slo=None):
    """Draw the design space faded, its front highlighted and the selected configuration as a line.

    Derived in the chapter "The Pareto frontier" (notebooks/06_pareto_frontier.ipynb).

    x: TPOT in ms (log scale); y: output tokens/s per GPU. Returns ``ax``.
    """
    space, front, sel = data["space"], data["front"], data["selected"]
    x, y = space["tpot"] * 1e3, space["throughput_per_gpu"]
    ax.scatter(x[~front], y[~front], s=6, color="0.75", alpha=0.5, label="dominated", zorder=1,
               rasterized=True)
    order = np.argsort(x[front])
    ax.step(x[front][order], y[front][order], where="post", color="#e15759", lw=1.2, zorder=2)
    ax.scatter(x[front], y[front], s=14, color="#e15759", label="Pareto front", zorder=3)
    if sel.any():
        c = data["selection"]
        o = np.argsort(space["batch_size"][sel])
        ax.plot(x[sel][o], y[sel][o], color="#4e79a7", lw=2, zorder=4,
                label=f"selected: {c['weight_dtype']}/{c['kv_dtype']} KV, TP {c['tensor_parallel']}")
    if tpot_slo is not None:
        ax.axvline(tpot_slo * 1e3, color="k", ls="--", lw=1, label=f"TPOT SLO {tpot_slo * 1e3:.0f} ms")
    log_axis(ax, "x")
    ax.set_xlabel("TPOT (ms, log scale)")
    ax.set_ylabel("output tokens/s per GPU")
    ax.set_title(f"{data['model']} on {data['accelerator']}, S = {data['context_len']}", fontsize=10)
    ax.legend(fontsize=9, loc="upper left")
    return ax


#: at most this many dominated points in the explorer's cloud (a thinned, evenly spaced subset)
CLOUD_POINTS = 400
#: a TPOT range (ms) and a throughput range (output tokens/s per GPU) that hold every configuration
#: of the default models and GPUs at every context length (a test checks). The live explorer fits
#: its frame to the data instead (:func:`fit_frame`); these are its frame when there are no data.
FRAME_TPOT_MS = (0.05, 1000.0)
FRAME_THROUGHPUT = (1.0, 1e5)
#: the explorer's figure: its size on the page in CSS pixels and its pixels per CSS pixel. The PNG
#: is drawn at twice the size it is shown, so it stays sharp on a high-density (retina) screen and
#: is never stretched: the image widget is told the displayed width.
DISPLAY_SIZE_PX = (700, 420)
PIXEL_RATIO = 2


def _png(rgba) -> bytes:
    """An RGB PNG of an (height, width, 4) uint8 array: rows unfiltered, zlib level 1.

    Twice as fast as Pillow's encoder on the explorer's 1400 x 840 figure (26 ms against 58 ms
    here), for about the same size (100 kB): its adaptive row filters buy little on a figure that
    is mostly white, and the encoding is most of a redraw.
    """
    height, width = rgba.shape[:2]
    raw = np.empty((height, 1 + 3 * width), dtype=np.uint8)
    raw[:, 0] = 0                                          # filter type 0 (None) for every row
    raw[:, 1:] = rgba[:, :, :3].reshape(height, 3 * width)

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)   # 8-bit RGB, no interlace
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header)
            + chunk(b"IDAT", zlib.compress(raw.tobytes(), 1)) + chunk(b"IEND", b""))


def _thin(index, n_max=CLOUD_POINTS):
    """At most ``n_max`` evenly spaced entries of ``index``."""
    if index.size <= n_max:
        return index
    return index[np.linspace(0, index.size - 1, n_max).round().astype(np.int64)]


class FrontierExplorer:
    """Dropdowns for model, GPU, data types and TP, a context slider, and the front they redraw.

    Derived in the chapter "The Pareto frontier" (notebooks/06_pareto_frontier.ipynb).

    Parameters
    ----------
    model, accelerator, weight_dtype, kv_dtype, tensor_parallel, context_len
        Initial selection.
    models, accelerators : list of str, optional
        Choices (default :data:`DEFAULT_MODELS`, :data:`DEFAULT_ACCELERATORS`).
    tpot_slo : float
        The TPOT target marked on the figure and used in the summary, seconds.
    draw : bool
        Render the figure into the image widget on every update (False: only
        compute; what most tests use).

    Attributes
    ----------
    data : dict
        The latest :func:`frontier_data`.
    text : str
        The latest :func:`summary`.
    updates : int
        How many times the data have been recomputed.
    image : ipywidgets.Image
        The figure, as PNG bytes (what :meth:`render` returns).
    full_draws : int
        How many times the frame (axes, ticks, labels, legend) was drawn.

    Notes
    -----
    A redraw is what a reader waits for, so it is kept cheap: one matplotlib
    figure (Agg, outside pyplot) is built once and its artists are updated in
    place (``set_data``); the dominated cloud is thinned to at most
    :data:`CLOUD_POINTS` markers. The frame (log-log) is fitted to the design
    space of the model, GPU and context shown (:func:`fit_frame`), so the data
    fill it. The data types and TP only choose the selected line within that
    space, so moving them keeps the frame: each such redraw restores the saved
    background and draws only the data on it (blitting). A new model, GPU or
    context re-fits the frame and draws it once (backgrounds are kept per
    frame, so going back is a blit again). The model, GPU and context are named
    in the summary above the figure, not in it: text is the slowest thing
    matplotlib draws. The PNG has :data:`PIXEL_RATIO` pixels per displayed
    pixel and the image widget is told its displayed width, so it is sharp on
    high-density screens. Displayed where no widget can run (a notebook viewed
    without its kernel, an untrusted notebook), the box shows that picture
    instead of the widgets' text.

    Examples
    --------
    >>> ex = FrontierExplorer(draw=False)
    >>> ex.tensor_parallel.value = 2          # observers run at once, no kernel needed
    >>> ex.data["selection"]["tensor_parallel"], ex.updates
    (2, 2)
    """

    def __init__(self, model="Llama-3.1-8B", accelerator="H100-SXM5-80GB", weight_dtype="bf16",
                 kv_dtype="bf16", tensor_parallel=1, context_len=2048, models=None,
                 accelerators=None, tpot_slo=0.05, draw=True, **kwargs):
        import ipywidgets as widgets

        models = list(models or DEFAULT_MODELS)
        accelerators = list(accelerators or DEFAULT_ACCELERATORS)
        check_choice("model", get_model(model).name, models)
        check_choice("accelerator", get_accelerator(accelerator).name, accelerators)
        self.kwargs = kwargs
        self.tpot_slo = tpot_slo
        self.draw = draw
        self.updates = 0
        self.renders = 0
        self.full_draws = 0
        self._figure = None
        self._frame = (FRAME_TPOT_MS, FRAME_THROUGHPUT)
        self._backgrounds = {}
        self._space_key = None
        self.model = widgets.Dropdown(options=models, value=get_model(model).name, description="model")
        self.accelerator = widgets.Dropdown(options=accelerators, value=get_accelerator(accelerator).name,
                                            description="GPU")
        self.weight_dtype = widgets.Dropdown(options=list(WEIGHT_DTYPES), value=weight_dtype,
                                             description="weights")
        self.kv_dtype = widgets.Dropdown(options=list(KV_DTYPES), value=kv_dtype, description="KV cache")
        self.tensor_parallel = widgets.Dropdown(options=list(TENSOR_PARALLEL), value=tensor_parallel,
                                                description="TP")
        self.context_len = widgets.SelectionSlider(options=list(CONTEXT_LENS), value=context_len,
                                                   description="context")
        self.message = widgets.HTML()
        self.image = widgets.Image(format="png", width=DISPLAY_SIZE_PX[0], height=DISPLAY_SIZE_PX[1])
        self.controls = [self.model, self.accelerator, self.weight_dtype, self.kv_dtype,
                         self.tensor_parallel, self.context_len]
        for control in self.controls:
            control.observe(self._on_change, names="value")
        self.update()

    def _on_change(self, change):
        self.update()

    def update(self):
        """Recompute the data from the widgets' values (and redraw if ``draw``)."""
        model = get_model(self.model.value)
        valid = valid_tensor_parallel_degrees(model)
        n = self.tensor_parallel.value
        key = (model.name, self.accelerator.value, self.context_len.value)
        if n not in valid:
            self.data = None
            self.text = (f"TP {n} cannot split {model.name} "
                         f"(allowed: {', '.join(str(d) for d in valid if d <= 8)}).")
        elif key == self._space_key and self.data is not None:
            # the same space: only the selected line moves
            self.data = select(self.data, self.weight_dtype.value, self.kv_dtype.value, n)
            self.text = summary(self.data, self.tpot_slo)
        else:
            self.data = frontier_data(model, self.accelerator.value, weight_dtype=self.weight_dtype.value,
                                      kv_dtype=self.kv_dtype.value, tensor_parallel=n,
                                      context_len=self.context_len.value, **self.kwargs)
            self.text = summary(self.data, self.tpot_slo)
            self._space_key = key
            self._frame = fit_frame(self.data["space"], tpot_slo=self.tpot_slo)
        self.updates += 1
        self.message.value = "<br>".join(self.text.splitlines())
        if self.draw:
            self.image.value = self.render()

    def _build_figure(self):
        """The figure and its artists, built once (Agg canvas, not registered with pyplot)."""
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure

        dpi = 100 * PIXEL_RATIO
        fig = Figure(figsize=(DISPLAY_SIZE_PX[0] / 100, DISPLAY_SIZE_PX[1] / 100), dpi=dpi)
        FigureCanvasAgg(fig)
        ax = fig.add_axes((0.125, 0.12, 0.565, 0.8))   # room for "100000" and the y label, and the legend
        # markers as Line2D (set_data, one draw_markers call each): cheaper to redraw than scatter
        (self._cloud,) = ax.plot([], [], "o", ms=2.4, mew=0, color="0.75", alpha=0.5,
                                 label="dominated", zorder=1, rasterized=True)
        (self._step,) = ax.step([], [], where="post", color="#e15759", lw=1.2, zorder=2)
        (self._front,) = ax.plot([], [], "o", ms=3.7, mew=0, color="#e15759", label="Pareto front", zorder=3)
        (self._line,) = ax.plot([], [], color="#4e79a7", lw=2, zorder=4, label="selected configuration")
        if self.tpot_slo is not None:
            ax.axvline(self.tpot_slo * 1e3, color="k", ls="--", lw=1,
                       label=f"TPOT SLO {self.tpot_slo * 1e3:.0f} ms")
        ax.set_autoscale_on(False)
        log_axis(ax, "both")
        ax.set_xlabel("TPOT (ms, log scale)")
        ax.set_ylabel("output tokens/s per GPU (log scale)")
        ax.set_title("decode design space: data types × TP × batch 1-1024", fontsize=10)
        # the legend sits outside the axes, so the data drawn over the saved background never cover it
        ax.legend(fontsize=9, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0)
        self._dynamic = [self._cloud, self._step, self._front, self._line]
        for artist in self._dynamic:
            artist.set_animated(True)     # left out of the full draw, drawn on the background
        self._figure, self._ax = fig, ax

    def _set_artists(self):
        data = self.data
        if data is None:
            for artist in self._dynamic:
                artist.set_data([], [])
            return
        space, front, sel = data["space"], data["front"], data["selected"]
        x, y = space["tpot"] * 1e3, space["throughput_per_gpu"]
        cloud = _thin(np.flatnonzero(~front))
        self._cloud.set_data(x[cloud], y[cloud])
        order = np.argsort(x[front])
        fx, fy = x[front][order], y[front][order]
        self._step.set_data(fx, fy)
        self._front.set_data(fx, fy)
        o = np.argsort(space["batch_size"][sel])
        self._line.set_data(x[sel][o], y[sel][o])

    def render(self) -> bytes:
        """Update the figure in place and return it as PNG bytes (what :attr:`image` shows)."""
        if self._figure is None:
            self._build_figure()
        self._set_artists()
        fig, ax = self._figure, self._ax
        canvas = fig.canvas
        background = self._backgrounds.get(self._frame)
        if background is None:                     # a frame not drawn yet: draw it once
            ax.set_xlim(*self._frame[0])
            ax.set_ylim(*self._frame[1])
            canvas.draw()
            background = canvas.copy_from_bbox(fig.bbox)
            if len(self._backgrounds) >= 16:
                self._backgrounds.pop(next(iter(self._backgrounds)))
            self._backgrounds[self._frame] = background
            self.full_draws += 1
        else:
            ax.set_xlim(*self._frame[0])
            ax.set_ylim(*self._frame[1])
            canvas.restore_region(background)
        for artist in self._dynamic:
            ax.draw_artist(artist)
        self.renders += 1
        return _png(np.asarray(canvas.buffer_rgba()))

    def selection(self) -> dict:
        """The controls' values: model, accelerator, weight_dtype, kv_dtype, tensor_parallel, context_len."""
        return {"model": self.model.value, "accelerator": self.accelerator.value,
                "weight_dtype": self.weight_dtype.value, "kv_dtype": self.kv_dtype.value,
                "tensor_parallel": int(self.tensor_parallel.value), "context_len": int(self.context_len.value)}

    def widget(self):
        """The controls, the summary and the figure in one box, ready to display.

        Where no widget can be shown (a notebook opened without running it, an untrusted
        notebook, a static page), the box displays the figure as a PNG instead of the text
        ``VBox(children=...)``.
        """
        import ipywidgets as widgets

        if not self.draw and not self.image.value:
            self.image.value = self.render()
        box = _explorer_box_class(widgets)([widgets.HBox(self.controls[:3]), widgets.HBox(self.controls[3:]),
                                            self.message, self.image])
        box.explorer = self
        return box


_BOX_CLASS = None
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def _explorer_box_class(widgets):
    """A VBox whose display carries a PNG of the figure (built on first use: ipywidgets is imported late)."""
    global _BOX_CLASS
    if _BOX_CLASS is None:
        class ExplorerBox(widgets.VBox):
            """The explorer's widgets, displayed with a still picture for viewers without a kernel."""

            explorer = None

            def _repr_mimebundle_(self, **kwargs):
                data = super()._repr_mimebundle_(**kwargs)
                explorer = self.explorer
                if explorer is None or not explorer.image.value:
                    return data
                data = dict(data)
                # the selection, for the static book's explorer (book/_ext): viewers ignore the key
                data[WIDGET_VIEW] = {**data[WIDGET_VIEW], "servingmath_explorer": explorer.selection()}
                data["image/png"] = base64.b64encode(explorer.image.value).decode("ascii")
                first = explorer.text.splitlines()[0] if explorer.text else ""
                data["text/plain"] = f"Pareto-front explorer (run the notebook to use its controls). {first}"
                width, height = DISPLAY_SIZE_PX
                return data, {"image/png": {"width": width, "height": height}}

        _BOX_CLASS = ExplorerBox
    return _BOX_CLASS
