"""One entry point for the book: set up, open, test, benchmark. Needs only Python 3.11+.

    python3 tools/book.py lab     # set up .venv (first time), open the book in JupyterLab
    python3 tools/book.py test    # set up .venv (first time), run every test
    python3 tools/book.py setup   # only create/refresh .venv
    python3 tools/book.py lock    # regenerate requirements.txt (exact pins) from requirements.in
    python3 tools/book.py book    # build the static HTML book (book/_build/html), offline
    python3 tools/book.py browser-test   # build it, check every page in headless Chromium, then the lab
    python3 tools/book.py bench   # benchmarks (never fail): bench-results/results.json

``make lab`` and ``make test`` call the first two. Setup creates ``.venv`` in
the repository, installs the exact pins of ``requirements.txt`` and the
library (``pip install -e .``), and records a hash so later runs reuse it.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
PYTHON = BIN / ("python.exe" if os.name == "nt" else "python")
STAMP = VENV / ".servingmath-setup"
PYCACHE = VENV / "pycache"
FIRST_PAGE = "notebooks/00_how_to_use_this_book.ipynb"
LAB_CONFIG = ROOT / "tools" / "jupyter"   # jupyter_server_config.py: the save hook of `make lab`
CELL_TIMEOUT = "300"


def _say(message: str) -> None:
    print(f"[book] {message}", flush=True)


def _run(args, **kwargs) -> int:
    return subprocess.call([str(a) for a in args], cwd=ROOT, **kwargs)


def _keep_bytecode(environ) -> None:
    """Where ``PYTHONDONTWRITEBYTECODE`` is set, cache compiled bytecode in .venv/pycache instead.

    Some shells and containers set it so that no ``__pycache__`` folder appears beside the
    sources. Then every process the book starts (each pytest worker, each notebook's kernel,
    each graded submission) compiles the library, the tests and, for pytest's assertion
    rewriting, every test module from source again: that cost the test command about 20 s
    here (pytest's collection took 12 s instead of 7). Keeping the cache inside .venv (Python's
    ``PYTHONPYCACHEPREFIX``) keeps the sources free of ``__pycache__`` all the same. Where the
    variable is not set, nothing changes. Changes ``environ`` (``os.environ``) in place.
    """
    if environ.get("PYTHONDONTWRITEBYTECODE"):
        del environ["PYTHONDONTWRITEBYTECODE"]
        environ["PYTHONPYCACHEPREFIX"] = str(PYCACHE)


def _setup_hash() -> str:
    digest = hashlib.sha256()
    for name in ("requirements.txt", "pyproject.toml"):
        digest.update((ROOT / name).read_bytes())
    digest.update(sys.version.encode())
    return digest.hexdigest()


def setup(quiet: bool = False) -> None:
    """Create .venv and install the pinned environment, unless already done."""
    if sys.version_info < (3, 11):
        sys.exit(f"[book] Python 3.11 or newer is needed; this is {sys.version.split()[0]}. "
                 "Run with python3.11 (or newer) instead.")
    if STAMP.exists() and STAMP.read_text().strip() == _setup_hash() and PYTHON.exists():
        return
    start = time.time()
    if not PYTHON.exists():
        _say(f"creating a virtual environment in {VENV.relative_to(ROOT)}/")
        venv.EnvBuilder(with_pip=True, clear=True).create(VENV)
    _say("installing the pinned packages of requirements.txt (first time: about a minute)")
    pip = [PYTHON, "-m", "pip", "install", "--disable-pip-version-check"]
    if quiet:
        pip.append("-q")
    if _run(pip + ["-r", "requirements.txt"]) != 0:
        sys.exit("[book] installing requirements.txt failed (see pip's message above)")
    if _run(pip + ["--no-deps", "--no-build-isolation", "-e", "."]) != 0:
        sys.exit("[book] installing the servingmath library failed (see pip's message above)")
    STAMP.write_text(_setup_hash() + "\n")
    _say(f"environment ready in {time.time() - start:.0f} s")
    _say("compiling the simulator's event loop (numba; once, about half a minute)")
    warm_up_simulator()


def warm_up_simulator() -> None:
    """Compile the simulator's event loop (numba, servingmath/simulate/compiled.py) once, now, so that
    the first simulation in a chapter or in each test process loads it instead (about 20 s the first
    time after a change to that file, under a second from its cache)."""
    code = "from servingmath.simulate import compiled; compiled.warm_up()"
    if not PYTHON.exists() or subprocess.run([str(PYTHON), "-c", code], cwd=ROOT).returncode != 0:
        _say("compiling the simulator's loop failed: simulations will run the reference loop (slower)")


def lab(extra: list[str]) -> int:
    setup()
    args = [BIN / "jupyter", "lab", f"--ServerApp.root_dir={ROOT}",
            f"--LabApp.default_url=/lab/tree/{FIRST_PAGE}"]
    headless = not os.environ.get("DISPLAY") and sys.platform.startswith("linux")
    if headless and "--no-browser" not in extra:
        args.append("--no-browser")
        _say("no display found: open the URL printed below in your browser")
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        args.append("--allow-root")
    _say(f"opening the book at {FIRST_PAGE}")
    return _run(args + extra, env=lab_environment(os.environ))


def lab_environment(environ) -> dict:
    """The environment of ``make lab``: ``environ`` with tools/jupyter first on JUPYTER_CONFIG_PATH.

    Jupyter then reads tools/jupyter/jupyter_server_config.py beside the reader's own
    configuration: its save hook writes a notebook the reader has not edited back exactly as
    committed, so reading and running a chapter leaves ``git status`` clean.
    """
    env = dict(environ)
    paths = [str(LAB_CONFIG)] + [p for p in env.get("JUPYTER_CONFIG_PATH", "").split(os.pathsep)
                                 if p and p != str(LAB_CONFIG)]
    env["JUPYTER_CONFIG_PATH"] = os.pathsep.join(paths)
    return env


def test(extra: list[str]) -> int:
    """Run every test: library and tools, then the chapters and solutions (nbval), then exercises."""
    setup(quiet=True)
    warm_up_simulator()                     # one process compiles; the test processes load the cache
    env = dict(os.environ)
    env.pop("MPLBACKEND", None)
    # -rs: every skipped test is listed at the end with its reason (no Chromium, no book build,
    # an exercise you are working on...)
    pytest = [PYTHON, "-m", "pytest", "-n", "2", "-rs"]
    nbval = ["--nbval-current-env", f"--nbval-cell-timeout={CELL_TIMEOUT}", "--dist", "loadfile"]
    stages = [
        ("library, tools, checker and notebook hygiene",
         pytest + ["tests", "lib/servingmath", "--doctest-modules"] + extra, env),
        ("chapters and solutions: every cell runs and every stored output matches (nbval)",
         pytest + ["--nbval"] + nbval + ["notebooks", "solutions"] + extra,
         {**env, "SERVINGMATH_STRICT_CHECKS": "1"}),
    ]
    work = _student_work()
    exercises = sorted(str(p) for p in (ROOT / "exercises").glob("*.ipynb"))
    for path, state in work.items():
        _say(f"{Path(path).relative_to(ROOT)}: {state} by you, left alone (the exercises stage does not "
             "run it; its check in the first stage is skipped, and says so)")
    if set(exercises) - set(work):
        stages.append(("exercises: run with their blanks unfilled (nbval-lax)",
                       pytest + ["--nbval-lax"] + nbval + ["exercises"]
                       + [f"--ignore={p}" for p in work] + extra, env))
    start = time.time()
    failed = []
    for title, args, stage_env in stages:
        _say(f"stage: {title}")
        if _run(args, env=stage_env) != 0:
            failed.append(title)
    _say(f"all stages done in {time.time() - start:.0f} s")
    if failed:
        _say("FAILED: " + "; ".join(failed))
        return 1
    return 0


def _student_work() -> dict[str, str]:
    """The exercise notebooks a student has edited or run, with that state (none under CI).

    Doing the exercises in place is how the README says to do them: the test command says
    which notebooks it leaves alone instead of failing on a half-finished answer.
    """
    found = subprocess.run([str(PYTHON), str(ROOT / "tools" / "make_exercises.py"), "--student-work"],
                           cwd=ROOT, capture_output=True, text=True)
    work = {}
    for line in found.stdout.splitlines():
        state, _, path = line.partition("\t")
        if path and Path(path).exists():
            work[path] = state
    return work


def lock() -> int:
    """Resolve requirements.in in a scratch venv and write exact pins to requirements.txt."""
    with tempfile.TemporaryDirectory() as scratch:
        venv.EnvBuilder(with_pip=True).create(scratch)
        python = Path(scratch) / "bin" / "python"
        if _run([python, "-m", "pip", "install", "-q", "-r", "requirements.in"]) != 0:
            return 1
        frozen = subprocess.run([python, "-m", "pip", "freeze", "--all"], capture_output=True,
                                text=True, check=True).stdout
    pins = sorted((l for l in frozen.splitlines() if l and not l.startswith(("-e", "pip=="))),
                  key=str.lower)
    header = ("# Exact pins, generated by `python3 tools/book.py lock` from requirements.in.\n"
              "# Stored notebook outputs depend on these versions: change them only by relocking,\n"
              "# then re-execute the notebooks (python tools/notebooks.py execute ...).\n")
    (ROOT / "requirements.txt").write_text(header + "\n".join(pins) + "\n")
    _say(f"wrote requirements.txt with {len(pins)} pins")
    return 0


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in {"-h", "--help"}:
        print(__doc__)
        return 0
    command, extra = argv[0], argv[1:]
    if command not in {"setup", "lab", "test", "lock", "book", "browser-test", "bench"}:
        print(f"[book] unknown command {command!r}; use lab, test, setup, lock, book, browser-test or bench",
              file=sys.stderr)
        return 2
    _keep_bytecode(os.environ)              # for every process started below
    if command == "setup":
        setup()
        return 0
    if command == "lab":
        return lab(extra)
    if command == "test":
        return test(extra)
    if command == "lock":
        return lock()
    if command == "book":
        return _run([sys.executable, ROOT / "tools" / "build_book.py"] + extra)
    if command == "browser-test":
        pages = _run([sys.executable, ROOT / "tools" / "build_book.py", "--check"] + extra)
        _say("reading a chapter in JupyterLab on a fresh clone leaves git status clean (headless Chromium)")
        lab_check = _run([PYTHON, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider",
                          "tests/test_book_lab.py::test_reading_and_running_a_chapter_in_the_lab_leaves_git_status_clean"])
        return pages or lab_check
    setup()                                 # bench
    return _run([PYTHON, ROOT / "tools" / "bench.py"] + extra)


if __name__ == "__main__":
    sys.exit(main())
