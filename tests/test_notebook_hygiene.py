"""Static hygiene of the stored notebooks (nbval re-executes them in the other test stage).

Covers what nbval cannot see: stored errors, execution order, kernel name,
outputs that would leak paths or addresses, failed magics, raises-exception
cells that stopped raising (nbval lax hole #108), the chapter rhythm, links.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from conftest import ROOT, load_tool

make_exercises = load_tool("make_exercises")

CHAPTERS = sorted((ROOT / "notebooks").glob("*.ipynb"))
SOLUTIONS = sorted((ROOT / "solutions").glob("*.ipynb"))
EXERCISES = sorted((ROOT / "exercises").glob("*.ipynb"))
EXECUTED = CHAPTERS + SOLUTIONS
ALL = EXECUTED + EXERCISES

LEAKS = [
    (re.compile(r"(?<![\w.])/(?:tmp|home|root|work|Users|private|var/folders)/"), "an absolute path"),
    (re.compile(r"[A-Za-z]:\\\\"), "a Windows path"),
    (re.compile(r"\b0x[0-9a-fA-F]{6,}\b"), "a memory address"),
    (re.compile(r"UsageError|Line magic function .* not found|Cell magic .* not found"), "a failed magic"),
    (re.compile(r"Warning:"), "a warning"),
    (re.compile(r"\bnp\.float64\("), "a numpy scalar repr"),
]


def _id(path: Path) -> str:
    return f"{path.parent.name}/{path.name}"


def _load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def _text(output: dict) -> str:
    if output.get("output_type") == "stream":
        return "".join(output.get("text", ""))
    if output.get("output_type") == "error":
        return output.get("ename", "") + ": " + output.get("evalue", "")
    data = output.get("data", {})
    return "".join("".join(v) if isinstance(v, list) else str(v)
                   for k, v in data.items() if k.startswith("text/"))


def test_there_are_notebooks():
    assert CHAPTERS and SOLUTIONS and EXERCISES


@pytest.mark.parametrize("path", ALL, ids=_id)
def test_kernel_is_python3(path):
    assert _load(path)["metadata"]["kernelspec"]["name"] == "python3"


@pytest.mark.parametrize("path", EXECUTED, ids=_id)
def test_executed_top_to_bottom_in_one_fresh_kernel(path):
    code = [c for c in _load(path)["cells"] if c["cell_type"] == "code"]
    assert [c["execution_count"] for c in code] == list(range(1, len(code) + 1))


@pytest.mark.parametrize("path", EXECUTED, ids=_id)
def test_no_stored_errors_except_tagged_cells_and_tagged_cells_do_raise(path):
    for index, cell in enumerate(_load(path)["cells"]):
        if cell["cell_type"] != "code":
            continue
        tagged = "raises-exception" in cell.get("metadata", {}).get("tags", [])
        errors = [o for o in cell.get("outputs", []) if o["output_type"] == "error"]
        if tagged:
            assert errors, f"cell {index} is tagged raises-exception but stored no error"
        else:
            assert not errors, f"cell {index} stored {errors[0]['ename']}: {errors[0]['evalue']}"


@pytest.mark.parametrize("path", EXECUTED, ids=_id)
def test_outputs_leak_nothing_machine_specific(path):
    for index, cell in enumerate(_load(path)["cells"]):
        for output in cell.get("outputs", []):
            if output.get("output_type") == "stream" and output.get("name") == "stderr":
                pytest.fail(f"cell {index} wrote to stderr: {_text(output)[:200]!r}")
            text = _text(output)
            for pattern, what in LEAKS:
                match = pattern.search(text)
                assert not match, f"cell {index} output holds {what}: {match.group(0)!r}"


@pytest.mark.parametrize("path", EXERCISES, ids=_id)
def test_exercises_have_no_outputs_and_no_solutions(path):
    source = ROOT / "solutions" / path.name
    if source.exists():
        state, message, ok = make_exercises.check_exercise(source, path)
        if ok and state in ("edited", "run"):           # a student's work (never under CI)
            pytest.skip(message.replace(str(ROOT) + "/", ""))
    nb = _load(path)
    text = json.dumps(nb)
    assert "BEGIN SOLUTION" not in text and "END SOLUTION" not in text
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            assert not cell["outputs"] and cell["execution_count"] is None


@pytest.mark.parametrize("path", [p for p in CHAPTERS if not p.name.startswith("00_")], ids=_id)
def test_chapters_follow_the_rhythm(path):
    markdown = "\n".join("".join(c["source"]) for c in _load(path)["cells"] if c["cell_type"] == "markdown")
    for heading in ["Learning goals", "Takeaway", "Pitfalls", "Summary", "Exercises", "References"]:
        assert heading in markdown, f"{path.name} lacks a {heading!r} section"
    assert "<details>" in markdown, f"{path.name} has no pop quiz with a hidden answer"


@pytest.mark.parametrize("path", ALL + [ROOT / "README.md"], ids=lambda p: p.name)
def test_relative_links_resolve(path):
    if path.suffix == ".ipynb":
        text = "\n".join("".join(c["source"]) for c in _load(path)["cells"] if c["cell_type"] == "markdown")
    else:
        text = path.read_text(encoding="utf-8")
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
        if "://" in target or target.startswith("mailto:"):
            continue
        assert (path.parent / target).exists(), f"{path.name} links to missing {target}"


def test_every_solutions_notebook_has_a_chapter():
    chapters = {p.name for p in CHAPTERS}
    assert {p.name for p in SOLUTIONS} <= chapters
