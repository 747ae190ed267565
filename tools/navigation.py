"""Write the book's navigation into its notebooks: chapter 00's contents, previous/next links, titles.

    python tools/navigation.py            # write what is out of date (then regenerates exercises/)
    python tools/navigation.py --check    # exit 1 if any notebook is out of date (used by the tests)

What it writes, all from the notebooks themselves (their file names and their H1 titles):

* chapter 00's **contents table** (the cell that starts with ``## Contents``): every chapter,
  linked, with its number of checked exercise questions (the ``check(...)`` calls of its
  solutions notebook);
* a last cell in every chapter and every exercise set with **previous / next** links (chapters:
  the neighbouring chapters, the contents and the chapter's exercises; exercise sets: the
  neighbouring sets and the chapter). The exercise sets get theirs through ``solutions/``, the
  source, and ``tools/make_exercises.py``, which this tool runs after writing; the links are
  relative to the notebook's own folder, so they work in ``exercises/`` and in ``solutions/``;
* the **title** of every exercise set, ``# Exercises NN · <chapter title>`` (the book's HTML
  pages of the worked solutions read ``Solutions NN · ...``: ``book/_ext``).

Cells it writes carry ``metadata.servingmath.generated`` ("contents" or "navigation"), so a
second run replaces them instead of adding more: the tool is idempotent, and can be run again
after the chapters are re-executed or a chapter is added. Markdown cells only: no stored output
changes, and ``tools/notebooks.py execute`` keeps them.
"""

from __future__ import annotations

import argparse
import copy
import functools
import importlib.util
import io
import json
import re
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK_NAME = re.compile(r"^(\d\d)_[A-Za-z0-9_\-]+\.ipynb$")
FIRST = "00_how_to_use_this_book.ipynb"
CONTENTS, NAVIGATION = "contents", "navigation"
CHECK_CALL = re.compile(r"^\s*check\(", re.M)
OLD_NEXT_LINE = re.compile(r"\n*^Next: \[[^\]]*\]\([^)]*\.ipynb\)\.?\s*\Z", re.M)


def _load_tool(name: str):
    spec = importlib.util.spec_from_file_location(f"tools_{name}", ROOT / "tools" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def notebooks(root: Path, folder: str) -> list[Path]:
    """``folder/NN_*.ipynb`` in reading order."""
    return sorted(p for p in (root / folder).glob("*.ipynb") if NOTEBOOK_NAME.match(p.name))


@functools.lru_cache(maxsize=256)
def _read(path: Path, mtime_ns: int):
    """A notebook, read once per run (titles are read many times); do not modify what it returns."""
    return nbformat.read(path, as_version=4)


def _source(cell) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else source


def title(nb) -> str:
    """A notebook's first Markdown H1, without a leading 'NN ·' or 'Exercises NN ·'."""
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            for line in _source(cell).splitlines():
                if line.startswith("# "):
                    return re.sub(r"^(exercises\s*)?(\d\d\s*[·:.-]\s*)?", "", line[2:].strip(), flags=re.I)
    raise ValueError("no '# ' title in the notebook")


def short(text: str) -> str:
    """A title up to its first colon: 'Rooflines: why decoding is bandwidth-bound' -> 'Rooflines'."""
    return text.split(":", 1)[0].strip()


def checked_questions(nb) -> int:
    return sum(len(CHECK_CALL.findall(_source(c))) for c in nb.cells if c.cell_type == "code")


def _generated(cell) -> str | None:
    return cell.get("metadata", {}).get("servingmath", {}).get("generated")


def _markdown(source: str, kind: str):
    cell = nbformat.v4.new_markdown_cell(source)
    cell.metadata["servingmath"] = {"generated": kind}
    return cell


def contents_source(root: Path) -> str:
    """Chapter 00's contents table."""
    lines = ["## Contents", "", "| # | chapter | exercises |", "|---|---|---|"]
    for path in notebooks(root, "notebooks"):
        number = path.name[:2]
        name = title(_read(path, path.stat().st_mtime_ns))
        solution = root / "solutions" / path.name
        if path.name == FIRST:
            lines.append(f"| {number} | {name} (this page) | – |")
            continue
        if solution.exists():
            n = checked_questions(_read(solution, solution.stat().st_mtime_ns))
            exercises = f"[{n} checked questions](../exercises/{path.name})"
        else:
            exercises = "–"
        lines.append(f"| {number} | [{name}]({path.name}) | {exercises} |")
    lines += ["", "Every chapter ends with links to the previous and the next one. The exercise sets are in "
              "`exercises/` and their worked solutions in `solutions/`, under the chapter's file name."]
    return "\n".join(lines)


def _link(root: Path, folder: str, path: Path) -> str:
    chapter = root / "notebooks" / path.name
    name = title(_read(chapter, chapter.stat().st_mtime_ns))
    return f"[{path.name[:2]} · {short(name)}]({path.name})"


def chapter_navigation(root: Path, path: Path) -> str:
    chapters = notebooks(root, "notebooks")
    i = [p.name for p in chapters].index(path.name)
    parts = []
    if i > 0:
        parts.append("← " + _link(root, "notebooks", chapters[i - 1]))
    if path.name != FIRST:
        parts.append(f"[Contents]({FIRST})")
    if (root / "solutions" / path.name).exists():
        parts.append(f"[Exercises {path.name[:2]}](../exercises/{path.name})")
    if i + 1 < len(chapters):
        parts.append(_link(root, "notebooks", chapters[i + 1]) + " →")
    return "---\n\n" + " · ".join(parts)


def exercise_navigation(root: Path, path: Path) -> str:
    sets = notebooks(root, "solutions")
    i = [p.name for p in sets].index(path.name)
    chapter = root / "notebooks" / path.name
    parts = []
    if i > 0:
        parts.append("← " + _link(root, "solutions", sets[i - 1]))
    if chapter.exists():
        parts.append(f"back to [chapter {path.name[:2]} · {short(title(_read(chapter, chapter.stat().st_mtime_ns)))}]"
                     f"(../notebooks/{path.name})")
    if i + 1 < len(sets):
        parts.append(_link(root, "solutions", sets[i + 1]) + " →")
    return "---\n\n" + " · ".join(parts)


def _set_last(nb, source: str) -> None:
    """Make the last cell the navigation cell with ``source`` (replacing an older one, keeping its id)."""
    old = [c for c in nb.cells if _generated(c) == NAVIGATION]
    nb.cells = [c for c in nb.cells if _generated(c) != NAVIGATION]
    cell = _markdown(source, NAVIGATION)
    taken = {c.get("id") for c in nb.cells}
    cell["id"] = old[0].get("id") if old else next(
        f"cell-{n:03d}" for n in range(len(nb.cells), 10 * len(nb.cells) + 1000) if f"cell-{n:03d}" not in taken)
    nb.cells.append(cell)


def _fix_ids(nb, original_ids: list[str]) -> None:
    """Where the ids follow the book's convention (``cell-NNN``, the cell's position, as
    tools/notebooks.py writes them), keep it; elsewhere the ids are left as they are."""
    if all(i == f"cell-{k:03d}" for k, i in enumerate(original_ids)):
        for index, cell in enumerate(nb.cells):
            cell["id"] = f"cell-{index:03d}"


def expected(root: Path, path: Path):
    """The notebook ``path`` (in notebooks/ or solutions/) with its navigation as it should be."""
    nb = nbformat.read(path, as_version=4)
    ids = [c.get("id") for c in nb.cells]
    out = copy.deepcopy(nb)
    folder = path.parent.name
    if folder == "notebooks":
        if path.name == FIRST:
            for index, cell in enumerate(out.cells):
                if _generated(cell) == CONTENTS or (cell.cell_type == "markdown"
                                                    and _source(cell).startswith("## Contents")):
                    out.cells[index] = _markdown(contents_source(root), CONTENTS)
                    out.cells[index]["id"] = cell["id"]
                    break
            else:
                raise ValueError(f"{path}: no '## Contents' cell to fill in")
            last = [c for c in out.cells if _generated(c) != NAVIGATION][-1]
            if last.cell_type == "markdown":     # the hand-written 'Next:' line the navigation replaces
                last.source = OLD_NEXT_LINE.sub("", _source(last))
        _set_last(out, chapter_navigation(root, path))
    elif folder == "solutions":
        for cell in out.cells:
            if cell.cell_type == "markdown":
                lines = _source(cell).splitlines()
                for k, line in enumerate(lines):
                    if line.startswith("# "):
                        chapter = root / "notebooks" / path.name
                        name = title(_read(chapter, chapter.stat().st_mtime_ns)) if chapter.exists() else title(nb)
                        lines[k] = f"# Exercises {path.name[:2]} · {name}"
                        cell.source = "\n".join(lines)
                        break
                else:
                    continue
                break
        _set_last(out, exercise_navigation(root, path))
    else:
        raise ValueError(f"{path}: only notebooks/ and solutions/ hold navigation (exercises/ is generated)")
    _fix_ids(out, ids)
    return out


def _text(nb) -> str:
    return nbformat.writes(nb, version=nbformat.NO_CONVERT) + "\n"


def out_of_date(root: Path = ROOT) -> list[tuple[Path, str]]:
    """(path, the text it should have) for every chapter and solutions notebook not up to date."""
    _read.cache_clear()
    stale = []
    for folder in ("notebooks", "solutions"):
        for path in notebooks(root, folder):
            text = _text(expected(root, path))
            if path.read_text(encoding="utf-8") != text:
                stale.append((path, text))
    return stale


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="only report notebooks out of date")
    parser.add_argument("--root", type=Path, default=ROOT)
    args = parser.parse_args(argv)
    stale = out_of_date(args.root)
    if args.check:
        for path, _ in stale:
            print(f"{path}: its navigation is out of date (run .venv/bin/python tools/navigation.py)")
        return 1 if stale else 0
    for path, text in stale:
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path}")
    out = io.StringIO()
    status = _load_tool("make_exercises").generate(args.root / "solutions", args.root / "exercises", out=out)
    print(out.getvalue(), end="")
    return status


if __name__ == "__main__":
    sys.exit(main())
