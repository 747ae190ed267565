"""Build and (re-)execute the book's notebooks.

    python tools/notebooks.py execute notebooks/01_anatomy_of_a_request.ipynb [...]
        Run each notebook top to bottom in a fresh python3 kernel and store
        its outputs in place (what nbval later compares against).
    python tools/notebooks.py build SCRIPT.py OUT.ipynb
        Convert a percent-format script (cells separated by '# %%' lines,
        '# %% [markdown]' for Markdown, '# %% tags=["raises-exception"]' for
        tags) into a notebook, then execute it. An authoring convenience: the
        notebook, not the script, is the source that is committed.

Executed notebooks get the kernelspec ``python3``, execution counts 1..n, no
per-cell timing metadata, and figures as PNG (compared by nothing, so their
bytes may vary between machines without failing a test).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parent.parent
KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
CELL_TIMEOUT = 300


def script_to_notebook(text: str) -> nbformat.NotebookNode:
    """Parse a percent-format script into a notebook (no outputs)."""
    nb = nbformat.v4.new_notebook()
    header = re.compile(r"^# %%(?P<md> \[markdown\])?(?: tags=(?P<tags>\[.*\]))?\s*$")
    cells: list[tuple[str, list[str], list[str]]] = []
    for line in text.splitlines():
        match = header.match(line)
        if match:
            kind = "markdown" if match.group("md") else "code"
            tags = json.loads(match.group("tags")) if match.group("tags") else []
            cells.append((kind, tags, []))
        elif cells:
            cells[-1][2].append(line)
    for kind, tags, lines in cells:
        while lines and not lines[-1].strip():
            lines.pop()
        while lines and not lines[0].strip():
            lines.pop(0)
        if kind == "markdown":
            source = "\n".join(re.sub(r"^# ?", "", l) if l.startswith("#") else l for l in lines)
            cell = nbformat.v4.new_markdown_cell(source)
        else:
            cell = nbformat.v4.new_code_cell("\n".join(lines))
        if tags:
            cell.metadata["tags"] = tags
        nb.cells.append(cell)
    return nb


def normalise(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """Fix the metadata that must not vary: kernelspec, language info, cell ids, timing."""
    nb.metadata["kernelspec"] = dict(KERNELSPEC)
    nb.metadata["language_info"] = {"name": "python"}
    for index, cell in enumerate(nb.cells):
        cell.metadata.pop("execution", None)
        cell["id"] = f"cell-{index:03d}"
        if cell.cell_type == "code":
            for output in cell.get("outputs", []):
                output.get("metadata", {}).pop("execution", None)
    nb.nbformat, nb.nbformat_minor = 4, 5
    return nb


def execute(path: Path, timeout: int = CELL_TIMEOUT) -> None:
    """Execute ``path`` in place in a fresh kernel, from its own folder."""
    nb = nbformat.read(path, as_version=4)
    normalise(nb)
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}})
    client.execute()
    normalise(nb)
    nbformat.write(nb, path)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    ex = sub.add_parser("execute", help="execute notebooks in place")
    ex.add_argument("paths", nargs="+", type=Path)
    build = sub.add_parser("build", help="percent script -> executed notebook")
    build.add_argument("script", type=Path)
    build.add_argument("out", type=Path)
    build.add_argument("--no-execute", action="store_true")
    args = parser.parse_args(argv)
    if args.command == "execute":
        for path in args.paths:
            print(f"executing {path}", flush=True)
            execute(path)
        return 0
    nb = normalise(script_to_notebook(args.script.read_text(encoding="utf-8")))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, args.out)
    if not args.no_execute:
        execute(args.out)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
