"""Plot helpers shared by the chapters. They draw on an ``Axes`` you pass and change no global state."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["RequestTrace", "request_timeline", "COLORS"]

COLORS = {"queue": "#d9d9d9", "prefill": "#f28e2b", "decode": "#4e79a7", "token": "#1f3b5a"}


@dataclass
class RequestTrace:
    """What happened to one request, for a timeline: times in seconds."""

    name: str
    arrival: float
    prefill_start: float
    token_times: list = field(default_factory=list)


def request_timeline(ax, traces, time_unit: float = 1e-3, unit_label: str = "ms"):
    """Draw a Gantt chart: one row per request, queue -> prefill -> decode with a tick per token.

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
