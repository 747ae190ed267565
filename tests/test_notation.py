"""The book's one notation: chapter 00's table and ``servingmath.symbolic.NOTATION`` agree symbol by symbol.

Chapter 00 writes the table by hand (readable in the static book, with the symbols typeset); this test
parses its rows and compares each one with NOTATION: the same symbols in the same order, and for each
the same library name, meaning and unit. It also checks that every library name in NOTATION exists:
a dotted name resolves to an attribute of the library, a plain one is a parameter of a public function
or a field of the Deployment.
"""

from __future__ import annotations

import importlib
import inspect
import json
import pkgutil
import re
from dataclasses import fields
from pathlib import Path

import pytest
import sympy as sp

import servingmath
from servingmath import symbolic
from servingmath.deployment import Deployment

ROOT = Path(__file__).resolve().parent.parent
CHAPTER = ROOT / "notebooks" / "00_how_to_use_this_book.ipynb"
ROW = re.compile(r"^\|\s*\$(?P<symbol>[^$]+)\$\s*\|(?P<meaning>[^|]*)\|(?P<unit>[^|]*)\|(?P<name>[^|]*)\|\s*$")


def _normal(text: str) -> str:
    """Text with typesetting removed: no whitespace, dollars, backslashes, braces or backticks."""
    return re.sub(r"[\s$\\{}`]", "", text)


def chapter_rows(path: Path = CHAPTER) -> list[dict]:
    """The notation rows of chapter 00, in order: symbol (LaTeX), meaning, unit, library name."""
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    rows = []
    for cell in cells:
        if cell["cell_type"] != "markdown":
            continue
        for line in "".join(cell["source"]).splitlines():
            match = ROW.match(line.strip())
            if match:
                rows.append({k: v.strip() for k, v in match.groupdict().items()})
    return rows


def compare(rows: list[dict], notation: dict) -> list[str]:
    """Every disagreement between the chapter's rows and ``notation``, as sentences (empty: they agree)."""
    problems = []
    want = [sp.latex(symbol) for symbol in notation]
    got = [row["symbol"] for row in rows]
    for latex in want:
        if latex not in got:
            problems.append(f"${latex}$ is in NOTATION but not in chapter 00's table")
    for latex in got:
        if latex not in want:
            problems.append(f"${latex}$ is in chapter 00's table but not in NOTATION")
        elif got.count(latex) > 1:
            problems.append(f"${latex}$ appears {got.count(latex)} times in chapter 00's table")
    if not problems and got != want:
        problems.append(f"the order differs: chapter {got}, NOTATION {want}")
    by_symbol = {row["symbol"]: row for row in rows}
    for symbol, (name, meaning, unit) in notation.items():
        row = by_symbol.get(sp.latex(symbol))
        if row is None:
            continue
        for column, expected in (("name", name), ("meaning", meaning), ("unit", unit)):
            if _normal(row[column]) != _normal(expected):
                problems.append(f"${sp.latex(symbol)}$: chapter 00 says {column} {row[column]!r}, "
                                f"NOTATION {expected!r}")
    return problems


def test_chapter_00_table_is_notation():
    rows = chapter_rows()
    assert len(rows) >= 40, f"found only {len(rows)} notation rows in chapter 00"
    assert compare(rows, symbolic.NOTATION) == []


def test_compare_finds_each_kind_of_disagreement():
    rows = chapter_rows()
    notation = dict(symbolic.NOTATION)
    assert compare(rows, notation) == []
    # a changed meaning, a changed library name, a changed unit
    for index in (1, 0, 2):
        changed = dict(notation)
        entry = list(changed[symbolic.R])
        entry[index] = entry[index] + " (changed)"
        changed[symbolic.R] = tuple(entry)
        assert any("$R$" in p for p in compare(rows, changed))
    # a symbol missing from the chapter, one missing from NOTATION, and a swapped order
    extra = {**notation, sp.Symbol("Z_new"): ("x", "y", "1")}
    assert any("Z_{new}" in p and "not in chapter" in p for p in compare(rows, extra))
    fewer = {k: v for k, v in notation.items() if k is not symbolic.W_q}
    assert any("W_{q}" in p and "not in NOTATION" in p for p in compare(rows, fewer))
    items = list(notation.items())
    swapped = dict([items[1], items[0], *items[2:]])
    assert any("order" in p for p in compare(rows, swapped))


def test_every_symbol_has_one_meaning():
    names = [str(symbol) for symbol in symbolic.NOTATION]
    assert len(names) == len(set(names))
    # the two meanings issue 15 found: R is the ridge point (the reserve is M_res), W the bandwidth (the wait is W_q)
    assert "ridge" in symbolic.NOTATION[symbolic.R][1]
    assert "reserve" in symbolic.NOTATION[symbolic.M_res][0]
    assert "bandwidth" in symbolic.NOTATION[symbolic.W][1]
    assert "wait" in symbolic.NOTATION[symbolic.W_q][1]
    assert "all parameters" in symbolic.NOTATION[symbolic.P][1]


def _public_parameter_names() -> set[str]:
    names = {f.name for f in fields(Deployment)}
    for info in pkgutil.iter_modules(servingmath.__path__):
        if info.name.startswith("_") or info.name in {"drill", "explorer", "estimate"}:
            continue
        try:
            module = importlib.import_module(f"servingmath.{info.name}")
        except ImportError:  # pragma: no cover - an optional dependency missing
            continue
        for value in vars(module).values():
            if callable(value) and getattr(value, "__module__", "").startswith("servingmath"):
                try:
                    names |= set(inspect.signature(value).parameters)
                except (TypeError, ValueError):
                    pass
    return names


@pytest.mark.parametrize("symbol", list(symbolic.NOTATION), ids=str)
def test_library_names_exist(symbol):
    name = symbolic.NOTATION[symbol][0]
    if "." not in name:
        assert name in _PARAMETERS, f"{name!r} is no parameter of a public function nor a Deployment field"
        return
    head, attribute = name.rsplit(".", 1)
    if head in {"ModelConfig", "Accelerator"}:
        from servingmath.hardware import Accelerator
        from servingmath.models import ModelConfig
        owner = {"ModelConfig": ModelConfig, "Accelerator": Accelerator}[head]
        assert attribute in {f.name for f in fields(owner)} or hasattr(owner, attribute), name
        return
    module, _, klass = head.partition(".")
    owner = importlib.import_module(f"servingmath.{module}")
    if klass:
        owner = getattr(owner, klass)
        assert attribute in {f.name for f in fields(owner)} or hasattr(owner, attribute), name
    else:
        assert callable(getattr(owner, attribute, None)), name


_PARAMETERS = _public_parameter_names()
