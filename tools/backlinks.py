"""Back-links between the library and the chapters, both ways (d2l's "Defined in :numref:").

    python tools/backlinks.py            # write what is missing
    python tools/backlinks.py --check    # exit 1 if anything is missing (used by the tests)

* **Function -> chapter.** Every public function and class of ``servingmath`` (its module's
  ``__all__``) names, in its docstring, the chapter that derives it: a line
  ``Derived in the chapter "<title>" (notebooks/NN_slug.ipynb).`` The chapter is the first one,
  in reading order, whose code calls the function; a function no chapter calls gets the chapter
  of its module (:data:`MODULE_CHAPTER`). A docstring that already names a chapter in words
  (``the chapter "..."``) is left as it is.
* **Chapter -> functions.** Every chapter ends (before its previous/next links) with a generated
  Markdown cell, ``metadata.servingmath.generated = "library"``, that lists the library functions
  it is the first to call, each as ``module.function``.

Both are idempotent: a second run changes nothing.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import inspect
import pkgutil
import re
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "lib"))

import servingmath  # noqa: E402

LIBRARY = "library"
NAME = re.compile(r"^(\d\d)_[A-Za-z0-9_\-]+\.ipynb$")
SKIP = ("servingmath.questions", "servingmath.__main__")
#: Where a function that no chapter calls is derived: its module's chapter (file stem).
MODULE_CHAPTER = {
    "units": "00_how_to_use_this_book", "datatypes": "00_how_to_use_this_book",
    "_validation": "00_how_to_use_this_book", "settings": "00_how_to_use_this_book",
    "deployment": "00_how_to_use_this_book", "symbolic": "00_how_to_use_this_book",
    "plotting": "00_how_to_use_this_book", "metrics": "01_anatomy_of_a_request",
    "models": "01_anatomy_of_a_request", "hardware": "02_rooflines", "roofline": "02_rooflines",
    "step": "04_decode", "decode": "04_decode", "memory": "03_memory", "prefill": "05_prefill",
    "pareto": "06_pareto_frontier", "explorer": "06_pareto_frontier", "slo": "07_slos_and_goodput",
    "sharding": "08_tensor_parallelism", "parallelism": "08_tensor_parallelism",
    "queueing": "09_queueing", "workloads": "10_scheduling", "simulate": "10_scheduling",
    "scheduling_plots": "10_scheduling", "quantization": "11_quantization",
    "speculative": "12_speculative_decoding", "capacity": "13_capacity_planning",
    "validation": "14_validation", "benchmarks": "14_validation", "validate": "14_validation",
    "fleet": "15_fleet", "pipeline": "15_fleet", "moe": "16_mixture_of_experts",
    "conventions": "00_how_to_use_this_book", "question": "00_how_to_use_this_book",
    "sandbox": "00_how_to_use_this_book", "_runner": "00_how_to_use_this_book",
    "navigation": "00_how_to_use_this_book",
    "checks": "00_how_to_use_this_book", "answers": "00_how_to_use_this_book",
    "assignments": "00_how_to_use_this_book", "drill": "17_interview_rehearsal",
    "estimate": "00_how_to_use_this_book",
}
NAMES_A_CHAPTER = re.compile(r"""chapter\s+["'“]""", re.I)


def chapters() -> list[Path]:
    return sorted(p for p in (ROOT / "notebooks").glob("*.ipynb") if NAME.match(p.name))


def _title(nb) -> str:
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                if line.startswith("# "):
                    return re.sub(r"^\d\d\s*[·:.-]\s*", "", line[2:].strip())
    return "?"


def public_objects():
    """(module name without the package, object name, object) of every public function and class."""
    out = []
    seen = set()
    for info in pkgutil.walk_packages(servingmath.__path__, prefix="servingmath."):
        if info.name.startswith(SKIP):
            continue
        module = importlib.import_module(info.name)
        for name in getattr(module, "__all__", []):
            obj = getattr(module, name, None)
            if not (inspect.isfunction(obj) or inspect.isclass(obj)):
                continue
            home = getattr(obj, "__module__", "")
            if home != info.name:            # a re-export: the defining module lists it
                continue
            key = (home, name)
            if key not in seen:
                seen.add(key)
                out.append((home, name, obj))
    return out


def _calls_in(nb) -> set[tuple[str, str]]:
    """(module, name) pairs a notebook's code refers to: ``alias.name`` or an imported ``name``."""
    aliases, direct, used = {}, {}, set()
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    code = "\n".join(line for line in code.splitlines() if not line.lstrip().startswith(("%", "!")))
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return used
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("servingmath"):
            for a in node.names:
                if node.module == "servingmath":
                    aliases[a.asname or a.name] = f"servingmath.{a.name}"
                else:
                    direct[a.asname or a.name] = (node.module, a.name)
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("servingmath"):
                    aliases[a.asname or a.name] = a.name
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases:
            used.add((aliases[node.value.id], node.attr))
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute) \
                and isinstance(node.value.value, ast.Name) and node.value.value.id in aliases:
            used.add((f"{aliases[node.value.value.id]}.{node.value.attr}", node.attr))
        elif isinstance(node, ast.Name) and node.id in direct:
            used.add(direct[node.id])
    return used


def first_chapters():
    """object key -> (chapter stem, title) of the first chapter that refers to it (re-exports resolved)."""
    objects = public_objects()
    by_identity = {}
    for home, name, obj in objects:
        by_identity[id(obj)] = (home, name)
    found = {}
    for path in chapters():
        nb = nbformat.read(path, as_version=4)
        for module, name in _calls_in(nb):
            try:
                obj = getattr(importlib.import_module(module), name)
            except (ImportError, AttributeError):
                continue
            key = by_identity.get(id(obj))
            if key and key not in found:
                found[key] = (path.stem, _title(nb))
    return objects, found


def _chapter_title(stem: str) -> str:
    path = ROOT / "notebooks" / f"{stem}.ipynb"
    return _title(nbformat.read(path, as_version=4)) if path.exists() else stem


def plan():
    """(object, chapter stem, title, needs a docstring line) for every public object."""
    objects, found = first_chapters()
    rows = []
    for home, name, obj in objects:
        short = home.split(".", 1)[1].split(".")[0] if "." in home else home
        stem, title = found.get((home, name), (None, None))
        if stem is None:
            stem = MODULE_CHAPTER.get(short)
            if stem is None:
                raise KeyError(f"module {short} has no chapter in tools/backlinks.py's MODULE_CHAPTER")
            title = _chapter_title(stem)
        doc = inspect.getdoc(obj) or ""
        rows.append((home, name, obj, stem, title, not NAMES_A_CHAPTER.search(doc)))
    return rows


def _docstring_edit(lines: list[str], start: int, line: str) -> None:
    """Insert ``line`` into the docstring of the definition at ``start`` (1-based), in place:
    after the docstring's first paragraph (a one-line docstring is opened up)."""
    i = start - 1
    while i < len(lines) and '"""' not in lines[i]:
        i += 1
    if i >= len(lines):
        raise ValueError(f"no docstring after line {start}")
    indent = re.match(r"\s*", lines[i]).group(0)
    stripped = lines[i].strip()
    if stripped.count('"""') == 2:                      # a one-line docstring
        text = stripped[stripped.index('"""') + 3: stripped.rindex('"""')]
        prefix = lines[i][: lines[i].index('"""')]
        lines[i: i + 1] = [f'{prefix}"""{text}', "", f"{indent}{line}", f'{indent}"""']
        return
    j = i + 1
    while j < len(lines) and lines[j].strip() and '"""' not in lines[j]:
        j += 1
    lines[j: j] = ["", f"{indent}{line}"]              # a paragraph of its own, after the first


def write_docstrings(check: bool) -> list[str]:
    missing, edits = [], {}
    for home, name, obj, stem, title, needs in plan():
        if not needs:
            continue
        missing.append(f"{home}.{name}")
        if obj.__doc__ is None:                          # nothing to add to: the check reports it
            continue
        target = inspect.unwrap(obj)
        path = Path(inspect.getsourcefile(target))
        start = inspect.getsourcelines(target)[1]
        edits.setdefault(path, []).append((start, f'Derived in the chapter "{title}" (notebooks/{stem}.ipynb).'))
    if check:
        return missing
    for path, items in edits.items():
        lines = path.read_text(encoding="utf-8").split("\n")
        for start, line in sorted(set(items), reverse=True):   # bottom-up: earlier line numbers stay right
            _docstring_edit(lines, start, line)
        path.write_text("\n".join(lines), encoding="utf-8")
    return missing


def chapter_cells():
    """chapter stem -> Markdown text of its library cell."""
    rows = plan()
    per = {}
    for home, name, obj, stem, title, _ in rows:
        per.setdefault(stem, []).append(f"`{home.replace('servingmath.', '')}.{name}`")
    out = {}
    for stem, names in per.items():
        out[stem] = ("**In the library.** This chapter derives (or is the first to use) "
                     + ", ".join(sorted(names)) + ". Each one's docstring links back here.")
    return out


def write_chapters(check: bool) -> list[str]:
    stale = []
    texts = chapter_cells()
    for path in chapters():
        nb = nbformat.read(path, as_version=4)
        text = texts.get(path.stem)
        cells = [c for c in nb.cells if c.get("metadata", {}).get("servingmath", {}).get("generated") == LIBRARY]
        current = cells[0].source if cells else None
        if current == text:
            continue
        stale.append(path.name)
        if check:
            continue
        nb.cells = [c for c in nb.cells
                    if c.get("metadata", {}).get("servingmath", {}).get("generated") != LIBRARY]
        if text:
            cell = nbformat.v4.new_markdown_cell(text)
            cell.metadata["servingmath"] = {"generated": LIBRARY}
            cell["id"] = "library-functions"
            nav = [i for i, c in enumerate(nb.cells)
                   if c.get("metadata", {}).get("servingmath", {}).get("generated") == "navigation"]
            nb.cells.insert(nav[0] if nav else len(nb.cells), cell)
        nbformat.write(nb, path)
    return stale


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args(argv)
    missing = write_docstrings(args.check)
    stale = write_chapters(args.check)
    if args.check:
        for m in missing:
            print(f"docstring names no chapter: {m}")
        for s in stale:
            print(f"library cell out of date: {s}")
        return 1 if missing or stale else 0
    print(f"added {len(missing)} docstring back-links; rewrote {len(stale)} chapter cells")
    return 0


if __name__ == "__main__":
    sys.exit(main())
