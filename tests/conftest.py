"""Shared test set-up: headless matplotlib, paths, and the helper that loads tools/ scripts."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # tests only; the notebooks keep their inline backend

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK_DIRS = ("notebooks", "solutions", "exercises")


def load_tool(name: str):
    """Import tools/<name>.py as a module (tools are scripts, not a package)."""
    spec = importlib.util.spec_from_file_location(f"tools_{name}", ROOT / "tools" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


os.environ.pop("SERVINGMATH_STRICT_CHECKS", None)


import pytest  # noqa: E402


@pytest.fixture(scope="session", autouse=True)
def _simulator_compiled():
    """The simulator's compiled loop, loaded (or compiled) before any test: a test's first simulation
    would otherwise carry that time (tools/book.py compiles it once before the tests start)."""
    from servingmath.simulate import compiled

    compiled.warm_up()

# Property tests explore the same examples on every run (reproducible CI), with no per-example deadline
# (these machines are shared and noisy: speed is measured in benchmarks, never asserted in tests).
from hypothesis import settings  # noqa: E402

settings.register_profile("book", derandomize=True, deadline=None)
settings.load_profile("book")
