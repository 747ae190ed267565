"""Navigation: chapter 00's contents, previous/next links, exercise titles, and the README's table.

tools/navigation.py writes them; these tests fail when a notebook is out of date (run
`.venv/bin/python tools/navigation.py`), and check the tool itself on a small synthetic book.
"""

from __future__ import annotations

import json
import re
import shutil

import nbformat
import pytest

from conftest import ROOT, load_tool

navigation = load_tool("navigation")

CHAPTERS = navigation.notebooks(ROOT, "notebooks")
SETS = navigation.notebooks(ROOT, "solutions")
LINK = re.compile(r"\[([^\]]+)\]\(([^)\s]+)\)")


def _cells(path):
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def _markdown(path) -> str:
    return "\n".join("".join(c["source"]) for c in _cells(path) if c["cell_type"] == "markdown")


def test_every_notebook_is_up_to_date():
    stale = [p.relative_to(ROOT).as_posix() for p, _ in navigation.out_of_date(ROOT)]
    assert not stale, f"run .venv/bin/python tools/navigation.py: out of date: {stale}"


def test_chapter_00_lists_every_chapter_in_order():
    contents = [c for c in _cells(ROOT / "notebooks" / navigation.FIRST)
                if c.get("metadata", {}).get("servingmath", {}).get("generated") == "contents"]
    assert len(contents) == 1
    text = "".join(contents[0]["source"])
    rows = [line for line in text.splitlines() if re.match(r"^\| \d\d \|", line)]
    assert [row[2:4] for row in rows] == [p.name[:2] for p in CHAPTERS]
    linked = [target for row in rows[1:] for _, target in LINK.findall(row) if not target.startswith("..")]
    assert linked == [p.name for p in CHAPTERS[1:]]
    for row, path in zip(rows, CHAPTERS):
        assert navigation.title(nbformat.read(path, as_version=4)) in row


@pytest.mark.parametrize("path", CHAPTERS + SETS + navigation.notebooks(ROOT, "exercises"),
                         ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_notebook_ends_with_previous_and_next_links(path):
    last = _cells(path)[-1]
    assert last["cell_type"] == "markdown"
    assert last["metadata"]["servingmath"]["generated"] == "navigation"
    links = [target for _, target in LINK.findall("".join(last["source"]))]
    siblings = CHAPTERS if path.parent.name == "notebooks" else SETS
    names = [p.name for p in siblings]
    i = names.index(path.name)
    if i > 0:
        assert links[0] == names[i - 1]                          # previous first
    if i + 1 < len(names):
        assert links[-1] == names[i + 1]                         # next last
    for target in links:
        assert (path.parent / target).exists(), target
    if path.parent.name != "notebooks":
        assert f"../notebooks/{path.name}" in links              # back to the chapter


@pytest.mark.parametrize("path", SETS, ids=lambda p: p.name)
def test_exercise_sets_are_titled_by_number_and_chapter(path):
    chapter = navigation.title(nbformat.read(ROOT / "notebooks" / path.name, as_version=4))
    first = _markdown(path).splitlines()[0]
    assert first == f"# Exercises {path.name[:2]} · {chapter}"


def test_the_readme_contents_table_is_in_sync_with_the_chapters():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    rows = [line for line in readme.splitlines() if re.match(r"^\| \d\d \| \[", line)]
    assert len(rows) == len(CHAPTERS), "the README's contents table lists another set of chapters"
    for row, path in zip(rows, CHAPTERS):
        cells = [c.strip() for c in row.strip("|").split("|")]
        number, chapter, exercises = cells[0], cells[1], cells[-1]
        assert number == path.name[:2]
        (name, target), = LINK.findall(chapter)
        assert target == f"notebooks/{path.name}"
        title = navigation.title(nbformat.read(path, as_version=4))
        assert name in (title, navigation.short(title)), f"README says {name!r}, the chapter {title!r}"
        solution = ROOT / "solutions" / path.name
        if solution.exists():
            (count, target), = LINK.findall(exercises)
            assert target == f"exercises/{path.name}"
            assert int(count) == navigation.checked_questions(nbformat.read(solution, as_version=4)), path.name
        else:
            assert exercises == "–"


# --------------------------------------------------------------------------- the tool itself

def _book(tmp_path, chapters):
    for folder in ("notebooks", "solutions"):
        (tmp_path / folder).mkdir()
    for number, name in chapters:
        nb = nbformat.v4.new_notebook()
        cells = [nbformat.v4.new_markdown_cell(f"# {number} · {name}: a subtitle"),
                 nbformat.v4.new_code_cell("x = 1")]
        if number == "00":
            cells.insert(1, nbformat.v4.new_markdown_cell("## Contents\nold table"))
            cells.append(nbformat.v4.new_markdown_cell("Last words.\n\nNext: [01 · A](01_a.ipynb)."))
        nb.cells = cells
        for index, cell in enumerate(nb.cells):
            cell["id"] = f"cell-{index:03d}"
        slug = "00_how_to_use_this_book" if number == "00" else f"{number}_{name.lower()}"
        nbformat.write(nb, tmp_path / "notebooks" / f"{slug}.ipynb")
        if number != "00":
            sol = nbformat.v4.new_notebook()
            sol.cells = [nbformat.v4.new_markdown_cell(f"# {name} exercises"),
                         nbformat.v4.new_code_cell('a = ...\ncheck("x.a", a)\ncheck("x.b", a)')]
            nbformat.write(sol, tmp_path / "solutions" / f"{slug}.ipynb")


def test_the_tool_on_a_small_book_is_idempotent_and_follows_a_new_chapter(tmp_path, capsys):
    _book(tmp_path, [("00", "How"), ("01", "A"), ("02", "B")])
    assert navigation.main(["--root", str(tmp_path)]) == 0
    first = {p: p.read_text() for p in tmp_path.rglob("*.ipynb")}
    assert (tmp_path / "exercises" / "02_b.ipynb").exists()          # exercises regenerated
    assert navigation.main(["--root", str(tmp_path), "--check"]) == 0
    assert navigation.main(["--root", str(tmp_path)]) == 0             # a second run changes nothing
    assert {p: p.read_text() for p in tmp_path.rglob("*.ipynb")} == first
    zero = (tmp_path / "notebooks" / "00_how_to_use_this_book.ipynb")
    text = _markdown(zero)
    assert "| 02 | [B: a subtitle](02_b.ipynb) | [2 checked questions](../exercises/02_b.ipynb) |" in text
    assert "Next: [01" not in text and "Last words." in text       # the hand-written line is replaced
    ids = [c["id"] for c in _cells(zero)]
    assert ids == [f"cell-{i:03d}" for i in range(len(ids))]
    assert "# Exercises 01 · A: a subtitle" in _markdown(tmp_path / "exercises" / "01_a.ipynb")
    # a chapter is added: its neighbours and the contents follow, and --check says so first
    _book_add = tmp_path / "more"
    _book_add.mkdir()
    _book(_book_add, [("03", "C")])
    shutil.copy(_book_add / "notebooks" / "03_c.ipynb", tmp_path / "notebooks")
    shutil.copy(_book_add / "solutions" / "03_c.ipynb", tmp_path / "solutions")
    capsys.readouterr()
    assert navigation.main(["--root", str(tmp_path), "--check"]) == 1
    assert "02_b.ipynb: its navigation is out of date" in capsys.readouterr().out
    assert navigation.main(["--root", str(tmp_path)]) == 0
    last = "".join(_cells(tmp_path / "notebooks" / "02_b.ipynb")[-1]["source"])
    assert last.endswith("[03 · C](03_c.ipynb) →") and last.count("---") == 1
    assert len([c for c in _cells(tmp_path / "notebooks" / "02_b.ipynb")
                if c["metadata"].get("servingmath")]) == 1                # replaced, not added again
    assert "| 03 | [C: a subtitle](03_c.ipynb)" in _markdown(zero)


def test_a_students_exercise_is_not_overwritten_by_the_tool(tmp_path):
    _book(tmp_path, [("00", "How"), ("01", "A")])
    navigation.main(["--root", str(tmp_path)])
    target = tmp_path / "exercises" / "01_a.ipynb"
    nb = nbformat.read(target, as_version=4)
    nb.cells[1].source = "a = 42  # mine"
    nbformat.write(nb, target)
    sol = nbformat.read(tmp_path / "solutions" / "01_a.ipynb", as_version=4)
    sol.cells.insert(1, nbformat.v4.new_markdown_cell("New text."))
    nbformat.write(sol, tmp_path / "solutions" / "01_a.ipynb")
    assert navigation.main(["--root", str(tmp_path)]) == 2            # make_exercises' "NOT overwritten"
    assert "a = 42  # mine" in target.read_text()


def test_a_chapter_00_without_a_contents_cell_is_an_error(tmp_path):
    _book(tmp_path, [("00", "How"), ("01", "A")])
    zero = tmp_path / "notebooks" / "00_how_to_use_this_book.ipynb"
    nb = nbformat.read(zero, as_version=4)
    del nb.cells[1]
    nbformat.write(nb, zero)
    with pytest.raises(ValueError, match="no '## Contents' cell"):
        navigation.out_of_date(tmp_path)
