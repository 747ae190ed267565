"""Every public function names the chapter that derives it, and every chapter lists the functions it derives."""

from __future__ import annotations

import subprocess
import sys

from conftest import ROOT


def test_backlinks_are_in_sync():
    run = subprocess.run([sys.executable, str(ROOT / "tools" / "backlinks.py"), "--check"], capture_output=True,
                         text=True, cwd=ROOT)
    assert run.returncode == 0, "run .venv/bin/python tools/backlinks.py:\n" + run.stdout + run.stderr


def test_every_public_function_has_a_chapter_and_it_exists():
    # the plan the check uses: every public object with the chapter that derives it
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import backlinks
    finally:
        sys.path.remove(str(ROOT / "tools"))
    rows = backlinks.plan()
    assert rows and all(len(row) == 6 for row in rows)
    assert not [row for row in rows if row[5]], "some docstrings name no chapter"
    home, name, obj, stem, title, _ = rows[0]
    assert (ROOT / "notebooks" / f"{stem}.ipynb").exists() and title
