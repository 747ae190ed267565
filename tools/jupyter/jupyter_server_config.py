"""JupyterLab server settings for `make lab`: reading a chapter leaves the repository as it was.

`tools/book.py lab` puts this folder on ``JUPYTER_CONFIG_PATH``, so Jupyter reads this file
beside (not instead of) the reader's own configuration. ``jupyter lab`` started any other way
(Binder, a JupyterHub, ``.venv/bin/jupyter lab``) does not read it.

Why a save hook. Opening and running a chapter in JupyterLab changes what it would save, even
when the reader changed nothing: the kernel fills in ``metadata.language_info`` (with the
reader's own Python version, 3.11.7 here), every widget output gets a new random model id, and
JupyterLab joins consecutive printed outputs that nbclient stored apart (how they split depends
on timing). Autosave then writes all that back every two minutes, and ``git status`` shows the
chapter modified. No stored form can match every reader's kernel, so instead the server, before
it saves a notebook that git tracks, compares what the reader can edit (each cell's type, source
and attachments) with the committed version: if nothing differs it saves the committed notebook
unchanged, byte for byte (the tests check that every stored notebook is in the form Jupyter
writes). A reader's edit, however small, is saved in full, with the outputs of the run.

Notebooks that git does not track (a reader's own) and folders without git are saved as usual.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path


def committed_text(path: Path) -> str | None:
    """The text of ``path`` as committed at git's HEAD, or None (untracked, no git, not a repository)."""
    path = Path(path)
    try:
        result = subprocess.run(["git", "-C", str(path.parent), "show", f"HEAD:./{path.name}"],
                                capture_output=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    if result.returncode != 0:
        return None
    try:
        return result.stdout.decode("utf-8")
    except UnicodeDecodeError:
        return None


def reader_edits(notebook: dict) -> list:
    """What a reader edits in a notebook: each cell's type, source and attachments, in order."""
    cells = []
    for cell in notebook.get("cells", []):
        source = cell.get("source", "")
        cells.append((cell.get("cell_type"), "".join(source) if isinstance(source, list) else source,
                      json.dumps(cell.get("attachments") or {}, sort_keys=True)))
    return cells


def keep_the_book_as_committed(model, path, contents_manager, **kwargs):
    """Jupyter's pre-save hook: a tracked notebook the reader has not edited is saved as committed."""
    if model.get("type") != "notebook" or not isinstance(model.get("content"), dict):
        return
    text = committed_text(Path(contents_manager.root_dir) / path)
    if text is None:
        return
    try:
        committed = json.loads(text)
    except ValueError:
        return
    if reader_edits(committed) != reader_edits(model["content"]):
        return                                    # the reader's edits: saved in full
    model["content"] = committed
    contents_manager.log.info("[book] %s: no edits, saved as committed (this run's outputs and "
                              "kernel metadata are not written)", path)


if "get_config" in globals():                     # read by Jupyter as a configuration file
    import warnings

    # jupyter_server applies its configuration twice (once more when the extensions load), and the
    # second time warns that the hook replaces itself.
    warnings.filterwarnings("ignore", message=r"Overriding existing pre_save_hook "
                            r"\(keep_the_book_as_committed\) with a new one")
    c = get_config()  # noqa: F821
    c.ContentsManager.pre_save_hook = keep_the_book_as_committed
