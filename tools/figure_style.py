"""Give every chapter the book's figure style, from one place: ``servingmath.plotting.book_style``.

    python tools/figure_style.py            # write the chapters that are not in style
    python tools/figure_style.py --check    # exit 1 if one is not (used by the tests)
    python tools/figure_style.py --long-lines [--width N]   # list code lines wider than the book shows

What it writes, in every chapter that imports matplotlib (``notebooks/NN_*.ipynb``):

* in the import cell (the first code cell), ``from servingmath.plotting import book_style``
  after the last ``servingmath`` import, and ``book_style()`` as the cell's last line: retina
  figures, 9-pt legends (see its docstring);
* every ``.legend(...)`` call loses an explicit ``fontsize=`` smaller than the book's
  (``plotting.LEGEND_FONTSIZE``), so the size is set once, by ``book_style``.

Code cells change, outputs do not: re-execute the chapters afterwards
(``.venv/bin/python tools/notebooks.py execute notebooks/*.ipynb``) for the new figures. Running the
tool again changes nothing (it is idempotent), so it can be run after a merge.

``--long-lines`` lists the code lines longer than :data:`BOOK_CODE_COLUMNS` characters, the widest
line a code cell of the HTML book shows without a horizontal scroll bar (measured in headless
Chromium: ``tools/browser_check.py`` reports ``code_columns``), per chapter.
"""

from __future__ import annotations

import argparse
import copy
import re
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK_NAME = re.compile(r"^\d\d_[A-Za-z0-9_\-]+\.ipynb$")
IMPORT_LINE = "from servingmath.plotting import book_style"
CALL_LINE = "book_style()  # retina figures, 9-pt legends: servingmath.plotting.book_style"
LEGEND_FONTSIZE = 9.0      # servingmath.plotting.LEGEND_FONTSIZE (not imported: the tool runs without it)
#: characters of code a code cell of the HTML book shows without a horizontal scroll bar: its <pre>
#: is 684 px wide, 652 px inside its padding, and a character of its 14 px monospace font is 8.43 px
#: wide, so 77 fit (headless Chromium, 1280 x 900 window, sphinx-book-theme 1.3.0, 2026-12-01).
#: tools/browser_check.py measures it again on every page ("code_columns" in report.json).
BOOK_CODE_COLUMNS = 77
LEGEND_CALL = re.compile(r"\.legend\(")
SMALL_SIZE = re.compile(r"(,\s*)?\bfontsize\s*=\s*(\d+(?:\.\d+)?)\s*(,\s*)?")


def chapters(root: Path = ROOT) -> list[Path]:
    return sorted(p for p in (root / "notebooks").glob("*.ipynb") if NOTEBOOK_NAME.match(p.name))


def _call_span(line: str, start: int) -> int:
    """Index just past the parenthesis that closes the one opened at ``start`` (or len(line))."""
    depth = 0
    for i in range(start, len(line)):
        if line[i] == "(":
            depth += 1
        elif line[i] == ")":
            depth -= 1
            if depth == 0:
                return i + 1
    return len(line)


def drop_small_legend_sizes(source: str, minimum: float = LEGEND_FONTSIZE) -> str:
    """``source`` with every ``fontsize=N`` (N < ``minimum``) removed from ``.legend(...)`` calls on one line."""
    lines = source.split("\n")
    for k, line in enumerate(lines):
        position = 0
        while True:
            match = LEGEND_CALL.search(line, position)
            if not match:
                break
            open_at = match.end() - 1
            close_at = _call_span(line, open_at)
            inner = line[open_at + 1:close_at - 1]

            def drop(m):
                if float(m.group(2)) >= minimum:
                    return m.group(0)
                return ", " if (m.group(1) and m.group(3)) else ""

            new_inner = SMALL_SIZE.sub(drop, inner).strip()
            new_inner = re.sub(r"^,\s*|,\s*$", "", new_inner)
            line = line[:open_at + 1] + new_inner + line[close_at - 1:]
            position = open_at + 1 + len(new_inner) + 1
        lines[k] = line
    return "\n".join(lines)


def styled_import_cell(source: str) -> str:
    """The import cell with the book_style import and call (added once)."""
    lines = source.split("\n")
    if IMPORT_LINE not in lines:
        # statements as (first line, last line): an import in parentheses spans several lines
        statements, depth, start = [], 0, None
        for i, line in enumerate(lines):
            if depth == 0:
                start = i
            depth += line.count("(") - line.count(")")
            if depth <= 0:
                depth = 0
                statements.append((start, i))
        imports = [(a, b) for a, b in statements if re.match(r"^(from|import) ", lines[a])]
        ours = [(a, b) for a, b in imports if re.match(r"^(from servingmath\b|import servingmath\b)", lines[a])]
        last = (ours or imports or [(-1, -1)])[-1][1]
        lines.insert(last + 1, IMPORT_LINE)
    if CALL_LINE not in lines:
        while lines and not lines[-1].strip():
            lines.pop()
        lines += ["", CALL_LINE]
    return "\n".join(lines)


def _uses_matplotlib(nb) -> bool:
    return any(c.cell_type == "code" and re.search(r"^\s*(import matplotlib|from matplotlib)", c.source, re.M)
               for c in nb.cells)


def expected(path: Path):
    nb = nbformat.read(path, as_version=4)
    out = copy.deepcopy(nb)
    if not _uses_matplotlib(out):
        return out
    code = [c for c in out.cells if c.cell_type == "code"]
    code[0].source = styled_import_cell(code[0].source)
    for cell in code:
        cell.source = drop_small_legend_sizes(cell.source)
    return out


def _text(nb) -> str:
    return nbformat.writes(nb, version=nbformat.NO_CONVERT) + "\n"


def out_of_date(root: Path = ROOT) -> list[tuple[Path, str]]:
    stale = []
    for path in chapters(root):
        text = _text(expected(path))
        if path.read_text(encoding="utf-8") != text:
            stale.append((path, text))
    return stale


def long_lines(root: Path = ROOT, width: int = BOOK_CODE_COLUMNS) -> dict[str, list[tuple[int, int, str]]]:
    """Per chapter: (cell index, length, line) of every code line longer than ``width`` characters."""
    found = {}
    for path in chapters(root):
        nb = nbformat.read(path, as_version=4)
        rows = [(i, len(line), line) for i, cell in enumerate(nb.cells) if cell.cell_type == "code"
                for line in cell.source.split("\n") if len(line) > width]
        found[path.name] = rows
    return found


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--long-lines", action="store_true")
    parser.add_argument("--width", type=int, default=BOOK_CODE_COLUMNS)
    parser.add_argument("--root", type=Path, default=ROOT)
    args = parser.parse_args(argv)
    if args.long_lines:
        found = long_lines(args.root, args.width)
        total = sum(len(v) for v in found.values())
        print(f"code lines longer than {args.width} characters (what a code cell of the HTML book shows "
              f"without scrolling): {total}")
        for name, rows in found.items():
            print(f"  {name}: {len(rows)}")
            for cell, length, line in rows:
                print(f"      cell {cell}, {length} chars: {line.strip()[:70]}...")
        return 0
    stale = out_of_date(args.root)
    if args.check:
        for path, _ in stale:
            print(f"{path}: not in the book's figure style (run .venv/bin/python tools/figure_style.py, "
                  "then re-execute it)")
        return 1 if stale else 0
    for path, text in stale:
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path} (re-execute it: .venv/bin/python tools/notebooks.py execute {path})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
