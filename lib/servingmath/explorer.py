"""The interactive Pareto-front explorer: its data, its figure and its widgets.

:func:`frontier_data` computes, for one model on one accelerator at one
context length, every decode configuration of the design space (weight data
type x KV data type x tensor-parallel degree x batch size), its Pareto front
(TPOT down, throughput per GPU up), and the curve of the configuration the
reader selected. It is pure numpy and takes a few milliseconds, so the widget
can recompute on every slider move. :func:`plot_frontier` draws it on an Axes
you pass (the chapter uses it for the static figure too). :class:`FrontierExplorer`
wires ipywidgets dropdowns and a slider to the two.

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

import io

import numpy as np

from ._validation import check_choice, check_integer
from .datatypes import check_dtype
from .hardware import get_accelerator
from .memory import valid_tensor_parallel_degrees
from .models import get_model
from .pareto import decode_design_space, pareto_mask
from .plotting import log_axis

__all__ = ["DEFAULT_BATCH_SIZES", "WEIGHT_DTYPES", "KV_DTYPES", "TENSOR_PARALLEL", "CONTEXT_LENS",
           "frontier_data", "summary", "plot_frontier", "FrontierExplorer"]

#: batch sizes of the explorer: 1 to 1024, about 8 per doubling
DEFAULT_BATCH_SIZES = np.unique(np.round(np.geomspace(1, 1024, 81)).astype(np.int64))
WEIGHT_DTYPES = ("bf16", "fp8", "int8", "int4")
KV_DTYPES = ("bf16", "fp8")
TENSOR_PARALLEL = (1, 2, 4, 8)
CONTEXT_LENS = (512, 1024, 2048, 4096, 8192, 16384, 32768)


def frontier_data(model, accelerator, weight_dtype="bf16", kv_dtype="bf16", tensor_parallel=1,
                  context_len=2048, batch_sizes=None, weight_dtypes=WEIGHT_DTYPES,
                  kv_dtypes=KV_DTYPES, tensor_parallel_options=TENSOR_PARALLEL, **kwargs) -> dict:
    """The design space of one model on one accelerator, its Pareto front and one selected configuration.

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


def summary(data, tpot_slo=0.05) -> str:
    """One paragraph on the selected configuration: does it fit, is it on the front, its best point under ``tpot_slo``.

    >>> d = frontier_data("Llama-3.1-8B", "H100", context_len=2048)
    >>> print(summary(d).splitlines()[0])
    Llama-3.1-8B on H100-SXM5-80GB, context 2048 tokens: 1869 feasible configurations, 61 on the front.
    """
    space, front, sel = data["space"], data["front"], data["selected"]
    c = data["selection"]
    name = f"{c['weight_dtype']} weights, {c['kv_dtype']} KV, TP {c['tensor_parallel']}"
    lines = [f"{data['model']} on {data['accelerator']}, context {data['context_len']} tokens"
             + (" (clamped to the model's maximum)" if data["clamped"] else "")
             + f": {space['tpot'].size} feasible configurations, {int(front.sum())} on the front."]
    if not sel.any():
        lines.append(f"Selected ({name}): does not fit in memory at this context length.")
        return "\n".join(lines)
    b_max = int(space["max_batch"][sel][0])
    on_front = int((sel & front).sum())
    lines.append(f"Selected ({name}): fits up to batch {b_max}; "
                 f"{on_front} of its {int(sel.sum())} batch sizes are on the front.")
    ok = sel & (space["tpot"] <= tpot_slo)
    if ok.any():
        i = np.flatnonzero(ok)[np.argmax(space["throughput_per_gpu"][ok])]
        lines.append(f"Best under TPOT {tpot_slo * 1e3:.0f} ms: batch {int(space['batch_size'][i])}, "
                     f"TPOT {space['tpot'][i] * 1e3:.1f} ms, "
                     f"{space['throughput_per_gpu'][i]:,.0f} tok/s per GPU.")
    else:
        lines.append(f"No batch size meets TPOT {tpot_slo * 1e3:.0f} ms.")
    return "\n".join(lines)


def plot_frontier(ax, data, tpot_slo=None):
    """Draw the design space faded, its front highlighted and the selected configuration as a line.

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
    ax.legend(fontsize=8, loc="upper left")
    return ax


#: at most this many dominated points in the explorer's cloud (a thinned, evenly spaced subset)
CLOUD_POINTS = 400
#: the explorer's fixed frame: TPOT in ms and output tokens/s per GPU, both on log scales. It holds
#: every configuration of the default models and GPUs at every context length (a test checks), so
#: switching model or GPU moves the data against axes that stay put; a selection that falls
#: outside grows the frame to the next decades, and it never shrinks back.
FRAME_TPOT_MS = (0.05, 1000.0)
FRAME_THROUGHPUT = (1.0, 1e5)


def _grow(limits, values):
    """``limits`` (low, high), each side moved out to the next power of ten only if ``values`` cross it."""
    lo, hi = limits
    if values.min() < lo:
        lo = float(10.0 ** np.floor(np.log10(values.min())))
    if values.max() > hi:
        hi = float(10.0 ** np.ceil(np.log10(values.max())))
    return lo, hi


def _thin(index, n_max=CLOUD_POINTS):
    """At most ``n_max`` evenly spaced entries of ``index``."""
    if index.size <= n_max:
        return index
    return index[np.linspace(0, index.size - 1, n_max).round().astype(np.int64)]


class FrontierExplorer:
    """Dropdowns for model, GPU, data types and TP, a context slider, and the front they redraw.

    Parameters
    ----------
    model, accelerator, weight_dtype, kv_dtype, tensor_parallel, context_len
        Initial selection.
    models, accelerators : list of str, optional
        Choices (default: a few catalog entries).
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

    Notes
    -----
    A redraw is what a reader waits for, so it is kept cheap: one matplotlib
    figure (Agg, outside pyplot) is built once and its artists are updated in
    place (``set_data``); the dominated cloud is thinned to at most
    :data:`CLOUD_POINTS` markers. The frame is fixed (log-log,
    :data:`FRAME_TPOT_MS` by :data:`FRAME_THROUGHPUT`) and names no model, so
    its ticks, labels and legend are drawn once: each redraw restores that
    saved background and draws only the data on it (blitting); the model,
    GPU and context are named in the summary above the figure, since text is
    the slowest thing matplotlib draws (about 8 ms for two lines, a third of a
    redraw). Fixed axes also let the eye compare models and GPUs. The
    chapter's static figure (:func:`plot_frontier`) uses a linear throughput
    axis fitted to one model and GPU instead.

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

        models = list(models or ["Llama-3.1-8B", "Llama-3.1-70B", "Qwen2.5-72B", "Mixtral-8x7B"])
        accelerators = list(accelerators or ["H100-SXM5-80GB", "H200-SXM-141GB", "A100-SXM4-80GB",
                                             "L40S", "MI300X"])
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
        self.image = widgets.Image(format="png")
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
        if n not in valid:
            self.data = None
            self.text = (f"TP {n} cannot split {model.name} "
                         f"(allowed: {', '.join(str(d) for d in valid if d <= 8)}).")
        else:
            self.data = frontier_data(model, self.accelerator.value, self.weight_dtype.value,
                                      self.kv_dtype.value, n, self.context_len.value, **self.kwargs)
            self.text = summary(self.data, self.tpot_slo)
        self.updates += 1
        self.message.value = "<br>".join(self.text.splitlines())
        if self.draw:
            self.image.value = self.render()

    def _build_figure(self):
        """The figure and its artists, built once (Agg canvas, not registered with pyplot)."""
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure

        fig = Figure(figsize=(7, 4.2), dpi=100)
        FigureCanvasAgg(fig)
        ax = fig.add_axes((0.125, 0.12, 0.615, 0.8))   # room on the left for "100000" and the y label
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
        ax.set_xlim(*self._frame[0])
        ax.set_ylim(*self._frame[1])
        ax.set_xlabel("TPOT (ms, log scale)")
        ax.set_ylabel("output tokens/s per GPU (log scale)")
        ax.set_title("decode design space: data types × TP × batch 1-1024", fontsize=10)
        # the legend sits outside the axes, so the data drawn over the saved background never cover it
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0)
        self._dynamic = [self._cloud, self._step, self._front, self._line]
        for artist in self._dynamic:
            artist.set_animated(True)     # left out of the full draw, drawn on the background
        self._figure, self._ax = fig, ax
        self._background, self._background_key = None, None

    def _set_artists(self):
        ax, data = self._ax, self.data
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
        if x.size:
            self._frame = (_grow(self._frame[0], x), _grow(self._frame[1], y))
            ax.set_xlim(*self._frame[0])
            ax.set_ylim(*self._frame[1])

    def render(self) -> bytes:
        """Update the figure in place and return it as PNG bytes (what :attr:`image` shows)."""
        from PIL import Image

        if self._figure is None:
            self._build_figure()
        self._set_artists()
        fig, ax = self._figure, self._ax
        canvas = fig.canvas
        if self._frame != self._background_key:    # the frame grew: draw it once more
            canvas.draw()
            self._background, self._background_key = canvas.copy_from_bbox(fig.bbox), self._frame
            self.full_draws += 1
        else:
            canvas.restore_region(self._background)
        for artist in self._dynamic:
            ax.draw_artist(artist)
        width, height = canvas.get_width_height()
        buffer = io.BytesIO()
        Image.frombuffer("RGBA", (width, height), canvas.buffer_rgba(), "raw", "RGBA", 0, 1
                         ).convert("RGB").save(buffer, format="png", compress_level=1)
        self.renders += 1
        return buffer.getvalue()

    def widget(self):
        """The controls, the summary and the figure in one box, ready to display."""
        import ipywidgets as widgets

        return widgets.VBox([widgets.HBox(self.controls[:3]), widgets.HBox(self.controls[3:]),
                             self.message, self.image])
