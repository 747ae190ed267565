"""The README's 'open the book' command really serves the first page (headless check),
and the setup script refuses an old Python with a clear message."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from conftest import ROOT, load_tool

book = load_tool("book")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str):
    with urllib.request.urlopen(url, timeout=5) as response:
        return response.status, response.read().decode("utf-8", "replace")


def test_lab_command_serves_the_first_page_headless(tmp_path):
    if not book.PYTHON.exists():
        pytest.skip("run through `make test`, which sets up .venv first")
    port, token = _free_port(), "booktest"
    env = {k: v for k, v in os.environ.items() if k != "DISPLAY"}
    env["JUPYTER_RUNTIME_DIR"] = str(tmp_path / "runtime")
    env["JUPYTER_CONFIG_DIR"] = str(tmp_path / "config")
    log = open(tmp_path / "lab.log", "w+")
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "tools" / "book.py"), "lab", f"--port={port}", "--ip=127.0.0.1",
         f"--IdentityProvider.token={token}", "--ServerApp.open_browser=False"],
        cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.time() + 90
        while True:
            try:
                status, body = _get(f"{base}/api/contents/{book.FIRST_PAGE}?content=0&token={token}")
                break
            except OSError:
                if proc.poll() is not None or time.time() > deadline:
                    log.seek(0)
                    pytest.fail("JupyterLab did not start:\n" + log.read()[-3000:])
                time.sleep(0.5)
        assert status == 200 and json.loads(body)["type"] == "notebook"
        status, page = _get(f"{base}/lab/tree/{book.FIRST_PAGE}?token={token}")
        assert status == 200 and "JupyterLab" in page
        log.seek(0)
        output = log.read()
        assert "no display found" in output  # headless: it prints the URL instead of opening a browser
        assert f"/lab/tree/{book.FIRST_PAGE}" in output or "http://127.0.0.1" in output
    finally:
        os.killpg(proc.pid, 15)
        proc.wait(timeout=20)
        log.close()


def test_setup_refuses_old_python(monkeypatch):
    monkeypatch.setattr(sys, "version_info", (3, 10, 0))
    with pytest.raises(SystemExit, match="3.11 or newer"):
        book.setup()


def test_unknown_command_is_reported():
    assert book.main(["serve"]) == 2


def test_bytecode_is_cached_in_the_venv_where_the_shell_turns_it_off():
    environ = {"PYTHONDONTWRITEBYTECODE": "1", "PATH": "/bin"}
    book._keep_bytecode(environ)
    assert environ == {"PATH": "/bin", "PYTHONPYCACHEPREFIX": str(book.VENV / "pycache")}
    untouched = {"PATH": "/bin"}
    book._keep_bytecode(untouched)                 # not set: Python's own default, nothing changes
    assert untouched == {"PATH": "/bin"}


def test_make_passes_args_through():
    makefile = (ROOT / "Makefile").read_text()
    for target in ("lab", "test", "book", "browser-test", "exercises"):
        recipe = makefile.split(f"\n{target}:", 1)[1].split("\n", 2)[1]
        assert recipe.rstrip().endswith("$(ARGS)"), target


def test_lab_passes_its_arguments_to_jupyter(monkeypatch):
    calls = []
    monkeypatch.setattr(book, "setup", lambda quiet=False: None)
    monkeypatch.setattr(book, "_run", lambda args, **kw: calls.append((args, kw)) or 0)
    assert book.lab(["--port", "8890", "--no-browser"]) == 0
    args, kwargs = calls[0]
    assert args[-3:] == ["--port", "8890", "--no-browser"]
    assert args.count("--no-browser") == 1                     # not added twice when headless
    assert kwargs["env"]["JUPYTER_CONFIG_PATH"].split(os.pathsep)[0] == str(book.LAB_CONFIG)


def test_the_test_command_lists_skip_reasons_and_leaves_student_work_alone(monkeypatch, capsys):
    mine = str(ROOT / "exercises" / "04_decode.ipynb")
    calls = []
    monkeypatch.setattr(book, "setup", lambda quiet=False: None)
    monkeypatch.setattr(book, "_student_work", lambda: {mine: "edited"})
    monkeypatch.setattr(book, "_run", lambda args, **kw: calls.append([str(a) for a in args]) or 0)
    assert book.test([]) == 0
    assert all("-rs" in call for call in calls)                 # skip reasons printed
    assert len(calls) == 3 and f"--ignore={mine}" in calls[2] and "exercises" in calls[2]
    assert "exercises/04_decode.ipynb: edited by you, left alone" in capsys.readouterr().out


def test_the_test_command_leaves_out_the_exercise_stage_when_every_notebook_is_a_students(monkeypatch):
    work = {str(p): "run" for p in (ROOT / "exercises").glob("*.ipynb")}
    calls = []
    monkeypatch.setattr(book, "setup", lambda quiet=False: None)
    monkeypatch.setattr(book, "_student_work", lambda: work)
    monkeypatch.setattr(book, "_run", lambda args, **kw: calls.append(args) or 0)
    assert book.test([]) == 0 and len(calls) == 2              # pytest would exit 5 on no tests


def test_the_binder_link_pattern_points_to_files_that_exist():
    import re

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    links = re.findall(r"https://mybinder\.org/v2/gh/OWNER/REPO/BRANCH\?urlpath=lab/tree/(\S+?)`", readme)
    assert links, "the README gives no Binder link pattern"
    for path in links:
        assert (ROOT / path).is_file(), path
    assert "<owner>" not in readme and "<repo>" not in readme           # no bare placeholder left
    for name in ("requirements.txt", "runtime.txt", "postBuild", "pyproject.toml"):
        assert (ROOT / name).exists(), name                          # what Binder builds from


def test_teachers_and_students_folders_are_git_ignored():
    import re
    import shutil as _shutil

    if _shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("no git checkout here: nothing to ignore")
    documented = set()
    for text in ((ROOT / "TEACHING.md").read_text(encoding="utf-8"),
                 (ROOT / "lib" / "servingmath" / "assignments.py").read_text(encoding="utf-8")):
        documented |= set(re.findall(r"--(?:out|submissions)\s+([\w.-]+)/", text))
    assert {"handout", "collected", "grades"} <= documented
    paths = [f"{folder}/alice.ipynb" for folder in sorted(documented)] + ["handout/roster.csv",
                                                                          "grades/scores.csv", "mywork/alice.ipynb"]
    found = subprocess.run(["git", "check-ignore", "--no-index", *paths], cwd=ROOT, capture_output=True, text=True)
    assert sorted(found.stdout.split()) == sorted(paths), found.stdout
    kept = subprocess.run(["git", "check-ignore", "--no-index", "notebooks/04_decode.ipynb", "exercises/x.ipynb"],
                          cwd=ROOT, capture_output=True, text=True)
    assert kept.stdout == ""                                         # the book itself is not ignored


def test_the_readme_says_how_to_reach_the_lab_over_ssh():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert 'make lab ARGS="--port 8890 --no-browser"' in readme
    assert "ssh -N -L 8890:localhost:8890" in readme
