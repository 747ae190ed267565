"""The library's layers: no import cycles (lazy imports included), no module reaching into another's
private names, and every module in the layer order the developers' guide gives.

The order, lowest first (a module may import only from lower layers or its own layer, never upwards):
facts (units, datatypes, _validation, symbolic, plotting) -> catalogs (hardware, models) -> sharding,
settings -> deployment -> step -> decode, prefill, roofline, memory -> speculative, slo, queueing, metrics,
workloads, benchmarks -> parallelism, quantization, pareto, moe -> simulate, capacity, validation, ... ->
the question bank (question types are low: they need only units) -> the book's tools (checks, drill,
assignments and its sandbox, explorer, estimate, validate).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import servingmath

ROOT = Path(servingmath.__file__).parent

LAYERS = [
    {"units", "datatypes", "_validation", "symbolic", "plotting", "__init__", "answers"},
    {"hardware", "models", "question"},
    {"sharding", "settings"},
    {"deployment"},
    {"step"},
    {"decode", "prefill", "roofline", "memory"},
    {"speculative", "slo", "queueing", "metrics", "workloads", "benchmarks"},
    {"parallelism", "quantization", "pareto", "moe"},
    {"simulate", "capacity", "validation", "scheduling_plots", "fleet"},
    {"questions"},
    {"checks", "drill", "assignments", "sandbox", "_runner", "explorer", "estimate", "validate", "conventions"},
]


def _layer(name: str) -> int:
    for i, layer in enumerate(LAYERS):
        if name in layer:
            return i
    raise AssertionError(f"module servingmath.{name} is in no layer of tests/test_layers.py: add it there")


def _top(dotted: str) -> str:
    """servingmath.simulate.engine -> simulate; servingmath -> __init__."""
    parts = dotted.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _imports(path: Path):
    """(target module, imported names, line) for every servingmath import in a file, lazy ones included."""
    rel = path.relative_to(ROOT.parent).with_suffix("")
    module = ".".join(rel.parts)
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    if module.endswith(".__init__"):
        package = module[: -len(".__init__")]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if not target.startswith("servingmath"):
                continue
            if node.module is None:          # from . import x
                for alias in node.names:
                    yield f"{target}.{alias.name}", [], node.lineno
            else:
                yield target, [a.name for a in node.names], node.lineno
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("servingmath"):
                    yield alias.name, [], node.lineno


def _graph():
    edges = {}
    for path in ROOT.rglob("*.py"):
        src = _top(".".join(path.relative_to(ROOT.parent).with_suffix("").parts))
        for target, names, line in _imports(path):
            dst = _top(target)
            if dst != src:
                edges.setdefault(src, {}).setdefault(dst, []).append(f"{path.relative_to(ROOT)}:{line}")
    return edges


def test_no_import_cycles_lazy_imports_included():
    edges = _graph()
    state, stack, cycles = {}, [], []

    def visit(u):
        state[u] = 1
        stack.append(u)
        for v in sorted(edges.get(u, {})):
            if state.get(v) == 1:
                cycles.append(" -> ".join(stack[stack.index(v):] + [v]))
            elif v not in state:
                visit(v)
        stack.pop()
        state[u] = 2

    for u in sorted(edges):
        if u not in state:
            visit(u)
    assert not cycles, "import cycles: " + "; ".join(cycles)


def test_every_import_goes_down_the_layers():
    upward = []
    for src, targets in _graph().items():
        for dst, where in targets.items():
            if _layer(dst) > _layer(src):
                upward.append(f"{src} (layer {_layer(src)}) imports {dst} (layer {_layer(dst)}) at {where[0]}")
    assert not upward, "\n".join(upward)


def test_no_module_imports_another_modules_private_names():
    bad = []
    for path in ROOT.rglob("*.py"):
        here = _top(".".join(path.relative_to(ROOT.parent).with_suffix("").parts))
        for target, names, line in _imports(path):
            if target.endswith("._validation") or _top(target) == here:
                continue                      # the shared checks module; a package's own internals
            for name in names:
                if name.startswith("_") and not name.startswith("__"):
                    bad.append(f"{path.relative_to(ROOT)}:{line} imports {name} from {target}")
    assert not bad, "\n".join(bad)


def test_the_layer_test_itself_catches_a_cycle(tmp_path, monkeypatch):
    """A test that must be able to fail: a fake package with a lazy cycle is found."""
    pkg = tmp_path / "servingmath"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "units.py").write_text("def f():\n    from .hardware import g\n")
    (pkg / "hardware.py").write_text("from .units import f\n")
    monkeypatch.setattr(__import__(__name__), "ROOT", pkg)
    with pytest.raises(AssertionError, match="import cycles"):
        test_no_import_cycles_lazy_imports_included()
    with pytest.raises(AssertionError, match="imports hardware"):
        test_every_import_goes_down_the_layers()
