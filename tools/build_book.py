"""Build the book as a static HTML site, fully offline, and check it in a headless browser.

    python3 tools/build_book.py            # build book/_build/html (sets up what it needs first)
    python3 tools/build_book.py --without-solutions   # the same, without the worked solutions
    python3 tools/build_book.py --check    # build, then open every page in headless Chromium
    python3 tools/build_book.py --check-only   # only the browser check, on the existing build
    python3 tools/build_book.py --toc      # print the table of contents generated from the folders
    python3 tools/build_book.py --lock     # regenerate requirements-book.txt from requirements-book.in

The site is built by Jupyter Book 1 (Sphinx) from the repository root, with
``book/_config.yml`` as its configuration and a table of contents generated at
build time: ``book/intro.md``, then every ``notebooks/NN_*.ipynb`` in order, then
every ``exercises/NN_*.ipynb``, then every ``solutions/NN_*.ipynb`` (so the chapters'
links to both resolve). Notebooks are not executed: the pages show their stored
outputs, the same ones nbval checks. The build starts from scratch each time (about
20 s; ``--incremental`` re-reads only changed notebooks) and fails on nothing but a
crash: warnings, such as a link to an exercise set not written yet, are printed and
kept in ``book/_build/build.log`` (the tests and ``--check`` treat them as problems).

Set-up, done once and then reused:

* ``.venv`` from ``requirements.txt`` (``tools/book.py setup``), plus the exact
  pins of ``requirements-book.txt`` (jupyter-book 1.x and Sphinx). They add
  packages only: ``requirements.txt`` is passed as constraints, so no pinned
  version moves (pip refuses otherwise).
* MathJax 3 and Plotly's basic bundle (``plotly.js-basic-dist-min``, MIT: scatter
  plots with log axes, about 1 MB, for the Pareto-front explorer), installed with
  ``npm install --no-save`` at the exact versions below into ``book/_build/.cache/``
  and copied into the site, so math is typeset and the explorer drawn with nothing
  loaded from the network. Without ``npm`` the build stops and says so.
* The explorer's data: ``tools/explorer_data.py`` precomputes the design space with
  the library into ``book/_build/static/explorer/`` (about 10 s; redone only when the
  library changes). Nothing generated is committed.

``--without-solutions`` is for a teacher who hosts the book for a class: the worked
solutions are left out of the table of contents (so not built), and links to them from
the chapters become plain text. The build says which edition it made.

``--check`` also needs Debian's ``chromium`` (installed with apt-get when
missing and running as root); ``tools/browser_check.py`` does the checking and
writes screenshots and a report to ``test-artifacts/book/``.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BOOK = ROOT / "book"
BUILD = BOOK / "_build"
HTML = BUILD / "html"
TOC = BUILD / "_toc.yml"
STATIC = BUILD / "static"
CACHE = BUILD / ".cache"
STAMP = BUILD / "book-stamp.json"
CONFIG = BOOK / "_config.yml"
INTRO = "book/intro"
REQUIREMENTS = ROOT / "requirements-book.txt"
REQUIREMENTS_IN = ROOT / "requirements-book.in"
MATHJAX_PACKAGE = "mathjax@3.2.2"
MATHJAX_FILE = "tex-svg-full.js"   # TeX input with every extension, SVG output (no font files)
# Plotly's basic bundle (scatter, bar, pie; 1.0 MB): the explorer needs only scatter plots with log
# axes. Chosen over the full bundle in the plotly Python wheel (4.7 MB of JavaScript, and a Python
# package with its own dependencies, for a file we only copy) and over Vega-Lite (three npm
# packages, vega, vega-lite and vega-embed, and a spec compiled again on every control move).
PLOTLY_PACKAGE = "plotly.js-basic-dist-min@4.1.1"
PLOTLY_FILE = "plotly-basic.min.js"
EXPLORER_DATA = STATIC / "explorer"
NOTEBOOK_NAME = re.compile(r"^\d\d_[A-Za-z0-9_\-]+\.ipynb$")
ARTIFACTS = ROOT / "test-artifacts" / "book"
# The parts of the book, in order: (caption, folder of NN_*.ipynb notebooks).
PARTS = (("Chapters", "notebooks"), ("Exercises", "exercises"), ("Worked solutions", "solutions"))


def _say(message: str) -> None:
    print(f"[book] {message}", flush=True)


def _load_tool(name: str):
    spec = importlib.util.spec_from_file_location(f"tools_{name}", ROOT / "tools" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# --------------------------------------------------------------------------- table of contents

def chapter_files(root: Path = ROOT, folder: str = "notebooks") -> list[Path]:
    """The notebooks ``folder/NN_*.ipynb`` in reading order (by file name)."""
    return sorted(p for p in (root / folder).glob("*.ipynb") if NOTEBOOK_NAME.match(p.name))


def notebook_title(path: Path) -> str | None:
    """The first Markdown H1 of a notebook, without markup (None if it has none)."""
    try:
        cells = json.loads(path.read_text(encoding="utf-8")).get("cells", [])
    except (OSError, ValueError):
        return None
    for cell in cells:
        if cell.get("cell_type") != "markdown":
            continue
        source = cell.get("source", "")
        source = "".join(source) if isinstance(source, list) else source
        for line in source.splitlines():
            if line.startswith("# "):
                return line[2:].strip()
    return None


def chapter_label(root: Path, stem: str) -> str:
    """'NN · Chapter title' for the chapter notebooks/<stem>.ipynb (its H1 without a leading
    'NN ·' or 'Exercises'), used to name its exercise set and solutions in the navigation."""
    number = stem[:2]
    title = notebook_title(root / "notebooks" / f"{stem}.ipynb") or stem[3:].replace("_", " ").capitalize()
    title = re.sub(r"^(exercises\s*[:·-]?\s*)?\d\d\s*[·:.-]\s*", "", title, flags=re.I)
    return f"{number} · {title}"


def toc_yaml(root: Path = ROOT, solutions: bool = True) -> str:
    """The Jupyter Book table of contents (``jb-book`` format) for the folders as they are now.

    Paths are relative to the repository root (the book's source folder), without suffix.
    Chapters keep their own titles; exercise sets and solutions are listed in their parts
    as 'NN · <chapter title>'. ``solutions=False`` leaves the worked solutions out.
    """
    lines = [
        "# Generated by tools/build_book.py from notebooks/, exercises/ and solutions/: do not edit.",
        "format: jb-book",
        f"root: {INTRO}",
        "parts:",
    ]
    for caption, folder in PARTS:
        if folder == "solutions" and not solutions:
            continue
        files = chapter_files(root, folder)
        if not files:
            continue
        lines += [f"  - caption: {caption}", "    chapters:"]
        for p in files:
            lines.append(f"      - file: {folder}/{p.stem}")
            if folder != "notebooks":
                lines.append(f"        title: {json.dumps(chapter_label(root, p.stem), ensure_ascii=False)}")
    return "\n".join(lines) + "\n"


def toc_files(toc_text: str) -> list[str]:
    """The document paths listed in a table of contents, in order (root first)."""
    files = re.findall(r"^\s*(?:root|- file):\s*(\S+)\s*$", toc_text, flags=re.M)
    return files


def explorer_inputs_hash(root: Path = ROOT) -> str:
    """A hash of what the explorer's data are computed from: the library, its data and the generator."""
    digest = hashlib.sha256()
    files = sorted(p for p in (root / "lib" / "servingmath").rglob("*")
                   if p.is_file() and p.suffix in (".py", ".csv", ".json") and "__pycache__" not in p.parts)
    for path in files + [root / "tools" / "explorer_data.py", root / "requirements.txt"]:
        digest.update(path.relative_to(root).as_posix().encode())
        digest.update(path.read_bytes() if path.exists() else b"<missing>")
    return digest.hexdigest()


def inputs_hash(root: Path = ROOT, solutions: bool = True) -> str:
    """A hash of everything the site is built from (to tell whether a build is stale)."""
    digest = hashlib.sha256()
    toc = toc_yaml(root, solutions=solutions)
    digest.update(toc.encode())
    own = sorted(p.relative_to(root).as_posix() for p in (root / "book").rglob("*")
                 if p.is_file() and "_build" not in p.relative_to(root).parts
                 and "__pycache__" not in p.relative_to(root).parts)
    for name in own + [f + ".ipynb" for f in toc_files(toc)[1:]]:
        path = root / name
        digest.update(name.encode())
        digest.update(path.read_bytes() if path.exists() else b"<missing>")
    digest.update(explorer_inputs_hash(root).encode())
    return digest.hexdigest()


def built_with_solutions(root: Path = ROOT) -> bool:
    """Whether the existing build has the worked solutions (True when there is no build)."""
    try:
        return bool(json.loads((root / STAMP.relative_to(ROOT)).read_text()).get("solutions", True))
    except (OSError, ValueError):
        return True


def build_state(root: Path = ROOT) -> str:
    """'missing', 'stale' (inputs changed since the build) or 'fresh'."""
    stamp = root / STAMP.relative_to(ROOT)
    if not (root / HTML.relative_to(ROOT) / "index.html").exists() or not stamp.exists():
        return "missing"
    try:
        recorded = json.loads(stamp.read_text())
        inputs, solutions = recorded["inputs"], recorded.get("solutions", True)
    except (ValueError, KeyError):
        return "stale"
    return "fresh" if inputs == inputs_hash(root, solutions=solutions) else "stale"


# --------------------------------------------------------------------------- set-up

def _book_setup_hash() -> str:
    digest = hashlib.sha256()
    for path in (ROOT / "requirements.txt", REQUIREMENTS):
        digest.update(path.read_bytes())
    digest.update(sys.version.encode())
    return digest.hexdigest()


def ensure_python_env() -> Path:
    """.venv with requirements.txt (tools/book.py) plus requirements-book.txt; returns its bin/."""
    book = _load_tool("book")
    book.setup(quiet=True)
    stamp = book.VENV / ".servingmath-book-setup"
    if stamp.exists() and stamp.read_text().strip() == _book_setup_hash():
        return book.BIN
    _say("installing the book build's pinned packages (requirements-book.txt; first time: about a minute)")
    code = subprocess.call([str(book.PYTHON), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                            "-r", str(REQUIREMENTS), "-c", str(ROOT / "requirements.txt")], cwd=ROOT)
    if code != 0:
        sys.exit("[book] installing requirements-book.txt failed (see pip's message above). If pip reports "
                 "a conflict with requirements.txt, regenerate the pins: python3 tools/build_book.py --lock")
    stamp.write_text(_book_setup_hash() + "\n")
    return book.BIN


def _npm_prefix(package: str) -> Path:
    """Each npm package in a folder of its own: npm removes what a later ``--no-save`` install did not name."""
    return CACHE / re.sub(r"[^A-Za-z0-9.@-]+", "_", package)


def _npm_package(package: str, wanted: Path, purpose: str) -> Path:
    """``wanted`` (a file inside the npm package ``package``), installed into the cache once."""
    prefix = _npm_prefix(package)
    if not wanted.exists():
        npm = shutil.which("npm")
        if npm is None:
            sys.exit(f"[book] npm is needed once, to fetch {package} so that {purpose} with nothing loaded from "
                     "the network, and was not found. Install Node.js and npm (Debian/Ubuntu: apt-get install "
                     "-y npm), then rerun.")
        prefix.mkdir(parents=True, exist_ok=True)
        _say(f"fetching {package} with npm into {prefix.relative_to(ROOT)}/ (once)")
        code = subprocess.call([npm, "install", "--no-save", "--no-audit", "--no-fund", "--no-package-lock",
                                "--prefix", str(prefix), package], cwd=prefix)
        if code != 0 or not wanted.exists():
            sys.exit(f"[book] `npm install {package}` failed (see npm's message above)")
    return wanted


def ensure_mathjax() -> Path:
    """MathJax 3 from npm, cached in book/_build/.cache, copied into the site's static folder."""
    source = _npm_package(MATHJAX_PACKAGE, _npm_prefix(MATHJAX_PACKAGE) / "node_modules" / "mathjax" / "es5"
                          / MATHJAX_FILE,
                          "the pages typeset math")
    target = STATIC / "mathjax"
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    shutil.copy2(source, target / MATHJAX_FILE)
    return target / MATHJAX_FILE


def ensure_explorer(bin_dir: Path) -> Path:
    """Plotly (npm) and the explorer's data (tools/explorer_data.py) in book/_build/static/explorer."""
    name = PLOTLY_PACKAGE.rsplit("@", 1)[0]
    plotly = _npm_package(PLOTLY_PACKAGE, _npm_prefix(PLOTLY_PACKAGE) / "node_modules" / name / "plotly-basic.min.js",
                          "the explorer draws its plot")
    stamp = EXPLORER_DATA / ".inputs"
    wanted = explorer_inputs_hash()
    if not (stamp.exists() and stamp.read_text().strip() == wanted):
        shutil.rmtree(EXPLORER_DATA, ignore_errors=True)
        code = subprocess.call([str(bin_dir / "python"), str(ROOT / "tools" / "explorer_data.py"),
                                str(EXPLORER_DATA)], cwd=ROOT)
        if code != 0:
            sys.exit("[book] computing the explorer's data failed (see the message above)")
        stamp.write_text(wanted + "\n")
    shutil.copy2(plotly, EXPLORER_DATA / PLOTLY_FILE)
    return EXPLORER_DATA


# --------------------------------------------------------------------------- build

def build(bin_dir: Path, incremental: bool = False, solutions: bool = True) -> float:
    """Build book/_build/html (with or without the worked solutions); returns the seconds it took."""
    BUILD.mkdir(parents=True, exist_ok=True)
    ensure_mathjax()
    ensure_explorer(bin_dir)
    if STAMP.exists() and built_with_solutions() != solutions:
        incremental = False                 # another edition: never mix pages of the two
    toc = toc_yaml(solutions=solutions)
    TOC.write_text(toc)
    n_chapters = len(chapter_files(ROOT, "notebooks"))
    n_exercises = len(chapter_files(ROOT, "exercises"))
    n_solutions = len(chapter_files(ROOT, "solutions")) if solutions else 0
    shutil.rmtree(HTML / "_static", ignore_errors=True)   # Sphinx does not overwrite static files it copied
    if not incremental:
        # From scratch by default: an incremental Sphinx build keeps pages whose cross-references
        # would now resolve differently (a link to an exercise set written since), and its log
        # only shows the warnings of the pages it re-read.
        shutil.rmtree(HTML, ignore_errors=True)
        shutil.rmtree(BUILD / ".doctrees", ignore_errors=True)
        shutil.rmtree(BUILD / "jupyter_execute", ignore_errors=True)
    edition = (f"with the worked solutions ({n_solutions} pages)" if solutions
               else "WITHOUT the worked solutions (--without-solutions: links to them become plain text)")
    _say(f"building the site: intro, {n_chapters} chapters, {n_exercises} exercise sets, {edition} "
         "(stored outputs)")
    env = dict(os.environ)
    env.pop("MPLBACKEND", None)
    env["NO_COLOR"] = "1"
    env["SERVINGMATH_BOOK_SOLUTIONS"] = "1" if solutions else "0"      # read by book/_ext
    start = time.perf_counter()
    log = BUILD / "build.log"
    with open(log, "w") as out:
        code = subprocess.call(
            [str(bin_dir / "jupyter-book"), "build", str(ROOT), "--config", str(CONFIG), "--toc", str(TOC),
             "--path-output", str(BOOK), "--builder", "html", "--keep-going"],
            cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, env=env)
    seconds = time.perf_counter() - start
    text = re.sub(r"\x1b\[[0-9;]*m", "", log.read_text())
    log.write_text(text)
    warnings = [line for line in text.splitlines() if "WARNING" in line or "ERROR" in line]
    if code != 0 or not (HTML / "index.html").exists():
        print(text[-5000:])
        sys.exit(f"[book] the build failed (full log: {log.relative_to(ROOT)})")
    for line in warnings[:30]:
        print("  " + line.replace(str(ROOT) + "/", ""))
    if len(warnings) > 30:
        print(f"  ... and {len(warnings) - 30} more (see {log.relative_to(ROOT)})")
    STAMP.write_text(json.dumps({"inputs": inputs_hash(solutions=solutions), "seconds": round(seconds, 1),
                                 "chapters": n_chapters, "exercises": n_exercises, "solutions": solutions,
                                 "warnings": len(warnings)}, indent=1) + "\n")
    _say(f"built in {seconds:.1f} s with {len(warnings)} warning(s), {edition}: "
         f"open {(HTML / 'index.html').relative_to(ROOT)} in a browser")
    return seconds


# --------------------------------------------------------------------------- browser check

def ensure_chromium() -> str:
    browser_check = _load_tool("browser_check")
    found = browser_check.find_chromium()
    if found:
        return found
    if hasattr(os, "geteuid") and os.geteuid() == 0 and shutil.which("apt-get"):
        _say("installing Debian's chromium for the browser check (apt-get, once)")
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        subprocess.call(["apt-get", "update", "-qq"], env=env)
        subprocess.call(["apt-get", "install", "-y", "-qq", "chromium"], env=env)
        found = browser_check.find_chromium()
        if found:
            return found
    sys.exit("[book] the browser check needs Chromium (Debian/Ubuntu: apt-get install -y chromium; "
             "or set CHROMIUM=/path/to/chrome)")


def check(bin_dir: Path) -> int:
    ensure_chromium()
    state = build_state()
    if state != "fresh":
        _say(f"warning: the build is {state}: rebuild first (python3 tools/build_book.py)")
    return subprocess.call([str(bin_dir / "python"), str(ROOT / "tools" / "browser_check.py"),
                            "--site", str(HTML), "--artifacts", str(ARTIFACTS)], cwd=ROOT)


# --------------------------------------------------------------------------- lock

def lock() -> int:
    """Resolve requirements-book.in with requirements.txt as constraints; write the extra pins."""
    book = _load_tool("book")
    book.setup(quiet=True)
    with tempfile.TemporaryDirectory() as scratch:
        report = Path(scratch) / "report.json"
        code = subprocess.call([str(book.PYTHON), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                                "--dry-run", "--ignore-installed", "--report", str(report),
                                "-r", str(ROOT / "requirements.txt"), "-r", str(REQUIREMENTS_IN)], cwd=ROOT)
        if code != 0:
            return code
        resolved = json.loads(report.read_text())["install"]

    def key(name):
        return re.sub(r"[-_.]+", "-", name).lower()

    base = {key(line.split("==")[0]) for line in (ROOT / "requirements.txt").read_text().splitlines()
            if "==" in line and not line.startswith("#")}
    pins = sorted((f"{r['metadata']['name']}=={r['metadata']['version']}" for r in resolved
                   if key(r["metadata"]["name"]) not in base), key=str.lower)
    header = ("# Exact pins of the packages the book build adds to requirements.txt, generated by\n"
              "# `python3 tools/build_book.py --lock` from requirements-book.in (requirements.txt as constraints).\n")
    REQUIREMENTS.write_text(header + "\n".join(pins) + "\n")
    _say(f"wrote {REQUIREMENTS.name} with {len(pins)} pins")
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--check", action="store_true", help="build, then run the headless-browser check")
    group.add_argument("--check-only", action="store_true", help="browser check of the existing build")
    group.add_argument("--toc", action="store_true", help="print the generated table of contents")
    group.add_argument("--lock", action="store_true", help="regenerate requirements-book.txt")
    parser.add_argument("--incremental", action="store_true",
                        help="re-read only changed notebooks (faster; the default rebuilds from scratch)")
    parser.add_argument("--without-solutions", action="store_true",
                        help="leave the worked solutions out (a book a teacher hosts for a class)")
    args = parser.parse_args(argv)
    if args.toc:
        print(toc_yaml(solutions=not args.without_solutions), end="")
        return 0
    if args.lock:
        return lock()
    bin_dir = ensure_python_env()
    if not args.check_only:
        build(bin_dir, incremental=args.incremental, solutions=not args.without_solutions)
    if args.check or args.check_only:
        return check(bin_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
