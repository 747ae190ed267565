"""The rendered book: its table of contents, its offline configuration, the Binder files, and
(when a fresh build exists) its links and a headless-browser check of every page.

Fast by default: the build-dependent tests skip, with the command to run, when book/_build/html
is missing or older than the notebooks. Build and check with `python3 tools/build_book.py --check`.
"""

from __future__ import annotations

import json
import re
import stat

import pytest
import yaml

from conftest import ROOT, load_tool

build_book = load_tool("build_book")
browser_check = load_tool("browser_check")

CDN = re.compile(r"https?://[^\s\"'<>)]*(cdn|jsdelivr|unpkg|cdnjs|googleapis|gstatic|mathjax\.org)", re.I)
BUILD_HINT = "build it with `python3 tools/build_book.py` (or `make book`)"


def _notebook(path, title="# Title"):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"cells": [{"cell_type": "markdown", "metadata": {}, "source": [title]}],
                                "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))


# --------------------------------------------------------------------------- table of contents

def test_toc_lists_every_chapter_exercise_set_and_solution_in_order():
    toc = build_book.toc_yaml(ROOT)
    files = build_book.toc_files(toc)
    assert files[0] == "book/intro"
    for folder in ("notebooks", "exercises", "solutions"):
        on_disk = sorted(p.stem for p in (ROOT / folder).glob("[0-9][0-9]_*.ipynb"))
        listed = [f.split("/", 1)[1] for f in files if f.startswith(folder + "/")]
        assert listed == on_disk, folder
    # parts in reading order: chapters, then exercises, then solutions
    order = [f.split("/", 1)[0] for f in files[1:]]
    assert order == sorted(order, key=["notebooks", "exercises", "solutions"].index)
    parsed = yaml.safe_load(toc)
    assert parsed["format"] == "jb-book" and parsed["root"] == "book/intro"
    assert [part["caption"] for part in parsed["parts"]][0] == "Chapters"


def test_toc_generator_on_a_synthetic_book(tmp_path):
    for name in ("10_later", "02_second", "00_first"):
        _notebook(tmp_path / "notebooks" / f"{name}.ipynb", f"# {name[:2]} · Chapter {name}")
    _notebook(tmp_path / "notebooks" / "scratch.ipynb")          # no NN_ prefix: not a chapter
    _notebook(tmp_path / "notebooks" / "1_bad.ipynb")            # one digit: not a chapter
    (tmp_path / "notebooks" / "README.md").write_text("not a notebook")
    _notebook(tmp_path / "exercises" / "02_second.ipynb", "# Exercises 02 · whatever")
    toc = build_book.toc_yaml(tmp_path)
    assert build_book.toc_files(toc) == ["book/intro", "notebooks/00_first", "notebooks/02_second",
                                         "notebooks/10_later", "exercises/02_second"]
    parsed = yaml.safe_load(toc)
    assert [p["caption"] for p in parsed["parts"]] == ["Chapters", "Exercises"]   # no solutions: no part
    assert parsed["parts"][1]["chapters"][0]["title"] == "02 · Chapter 02_second"


def test_toc_without_solutions_leaves_only_the_solutions_out():
    full = build_book.toc_files(build_book.toc_yaml(ROOT))
    teacher = build_book.toc_files(build_book.toc_yaml(ROOT, solutions=False))
    assert teacher == [f for f in full if not f.startswith("solutions/")]
    assert len(teacher) < len(full) and "Worked solutions" not in build_book.toc_yaml(ROOT, solutions=False)
    assert build_book.inputs_hash(ROOT) != build_book.inputs_hash(ROOT, solutions=False)


def test_toc_is_valid_for_jupyter_book(tmp_path):
    external_toc = pytest.importorskip("sphinx_external_toc.parsing",
                                       reason="jupyter-book is not installed: " + BUILD_HINT)
    path = tmp_path / "_toc.yml"
    path.write_text(build_book.toc_yaml(ROOT))
    site_map = external_toc.parse_toc_yaml(path)
    assert "notebooks/00_how_to_use_this_book" in site_map
    assert site_map["exercises/01_anatomy_of_a_request"]


# --------------------------------------------------------------------------- offline configuration

def test_config_loads_nothing_from_a_cdn():
    text = (ROOT / "book" / "_config.yml").read_text()
    assert not re.findall(r"https?://", text), "the book's config names a URL"
    config = yaml.safe_load(text)
    sphinx = config["sphinx"]["config"]
    assert config["execute"]["execute_notebooks"] == "off"     # stored outputs, as nbval checks them
    assert not sphinx["mathjax_path"].startswith(("http", "//"))
    assert sphinx["mathjax_path"].startswith("mathjax/")
    assert "book/_build/static" in sphinx["html_static_path"]
    assert sphinx["nb_ipywidgets_js"] == {}                      # no require.js / html-manager from a CDN
    assert "sphinx_thebe" not in sphinx["extensions"]            # its loader points to unpkg
    for pattern in (".venv", "_build", "**/_build", "lib", "tests", "tools"):
        assert pattern in config["exclude_patterns"]
    for name in ("intro.md", "_static/book.css"):
        assert not CDN.search((ROOT / "book" / name).read_text()), name


def test_mathjax_file_matches_the_config():
    config = yaml.safe_load((ROOT / "book" / "_config.yml").read_text())
    assert config["sphinx"]["config"]["mathjax_path"] == f"mathjax/{build_book.MATHJAX_FILE}"
    assert build_book.STATIC.relative_to(ROOT).as_posix() in config["sphinx"]["config"]["html_static_path"]
    assert re.fullmatch(r"mathjax@3\.\d+\.\d+", build_book.MATHJAX_PACKAGE)   # pinned, version 3


def test_book_requirements_are_exact_pins_disjoint_from_requirements_txt():
    def pins(name):
        lines = [l for l in (ROOT / name).read_text().splitlines() if l.strip() and not l.startswith("#")]
        assert all(re.fullmatch(r"[A-Za-z0-9_.\-]+==[^=\s]+", l) for l in lines), name
        return {re.sub(r"[-_.]+", "-", l.split("==")[0]).lower(): l.split("==")[1] for l in lines}

    base, book = pins("requirements.txt"), pins("requirements-book.txt")
    assert "jupyter-book" in book and book["jupyter-book"].startswith("1.")
    assert not set(base) & set(book), "requirements-book.txt repeats packages pinned in requirements.txt"


def test_binder_files():
    assert (ROOT / "runtime.txt").read_text().strip() == "python-3.11"
    post = ROOT / "postBuild"
    text = post.read_text()
    assert text.startswith("#!")
    assert "pip install --no-deps -e ." in text
    assert post.stat().st_mode & stat.S_IXUSR, "postBuild must be executable"


# --------------------------------------------------------------------------- the book's Sphinx extension

def _extension():
    import importlib.util

    pytest.importorskip("docutils", reason="docutils (a Jupyter Book dependency) is not installed: "
                                           "`make book` installs requirements-book.txt")
    spec = importlib.util.spec_from_file_location("servingmath_book", ROOT / "book" / "_ext" / "servingmath_book.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _doctree(docname):
    from docutils import nodes
    from docutils.frontend import get_default_settings
    from docutils.parsers.rst import Parser
    from docutils.utils import new_document
    from sphinx import addnodes
    from types import SimpleNamespace

    document = new_document("test", get_default_settings(Parser))
    section = nodes.section()
    section += nodes.title("", "Exercises 04 · Decode")
    link = addnodes.pending_xref("", nodes.inline("", "the worked solutions"), reftarget="solutions/04_decode",
                                 refdomain="doc", reftype="myst")
    download = addnodes.download_reference("", nodes.inline("", "solutions/04_decode.ipynb"),
                                           reftarget="../solutions/04_decode.ipynb")
    other = addnodes.pending_xref("", nodes.inline("", "chapter 05"), reftarget="notebooks/05_prefill")
    section += nodes.paragraph("", "", link, download, other)
    document += section
    app = SimpleNamespace(env=SimpleNamespace(docname=docname))
    return document, app


def test_solution_pages_are_titled_solutions(monkeypatch):
    ext = _extension()
    monkeypatch.setenv("SERVINGMATH_BOOK_SOLUTIONS", "1")
    document, app = _doctree("solutions/04_decode")
    ext.on_doctree_read(app, document)
    assert next(iter(document.findall(lambda n: n.tagname == "title"))).astext() == "Solutions 04 · Decode"
    document, app = _doctree("exercises/04_decode")
    ext.on_doctree_read(app, document)
    assert next(iter(document.findall(lambda n: n.tagname == "title"))).astext() == "Exercises 04 · Decode"
    assert len(list(document.findall(lambda n: n.tagname == "pending_xref"))) == 2    # links untouched


def test_without_solutions_links_to_them_become_text_and_nothing_is_copied(monkeypatch):
    ext = _extension()
    monkeypatch.setenv("SERVINGMATH_BOOK_SOLUTIONS", "0")
    document, app = _doctree("notebooks/04_decode")
    ext.on_doctree_read(app, document)
    refs = [n["reftarget"] for n in document.findall(lambda n: n.tagname in ("pending_xref", "download_reference"))]
    assert refs == ["notebooks/05_prefill"]                        # only the link to a chapter is left
    text = document.astext()
    assert "the worked solutions (the worked solutions are not part of this edition)" in text


def test_the_explorer_widget_gives_way_to_its_picture_and_the_static_explorer():
    import json as _json
    from types import SimpleNamespace

    ext = _extension()
    from docutils import nodes

    document, _ = _doctree("notebooks/06_pareto_frontier")
    output = nodes.container(classes=["cell_output"])

    def bundle(payload):
        b = nodes.container(nb_element="mime_bundle")
        view = nodes.container(mime_type=ext.WIDGET_MIME)
        view += nodes.raw("", f'<script type="{ext.WIDGET_MIME}">{_json.dumps(payload)}</script>', format="html")
        b += view
        png = nodes.container(mime_type="image/png")
        png += nodes.image(uri="fig.png")
        b += png
        return b

    ours = bundle({"model_id": "abc", "servingmath_explorer": {"model": "Llama-3.1-70B", "tensor_parallel": 2}})
    other = bundle({"model_id": "def"})                                  # some other widget: left alone
    output += ours
    output += other
    document += output
    document.settings.env = SimpleNamespace(docname="notebooks/06_pareto_frontier")
    transform = ext.StaticExplorer(document)
    transform.run()
    assert [c.get("mime_type") for c in ours.children] == ["image/png"]
    assert [c.get("mime_type") for c in other.children] == [ext.WIDGET_MIME, "image/png"]
    raw = output.children[output.index(ours) + 1]
    html = raw.astext()
    assert html.startswith('<div class="sm-explorer" data-initial=\'{"model": "Llama-3.1-70B", "tensor_parallel": 2}\'>')
    for script in ("../_static/explorer/plotly-basic.min.js", "../_static/explorer/explorer-index.js",
                   "../_static/explorer.js"):
        assert f'<script src="{script}"></script>' in html


# --------------------------------------------------------------------------- the checker itself

def test_static_checker_finds_broken_links_and_network_loads(tmp_path):
    site = tmp_path / "html"
    (site / "sub").mkdir(parents=True)
    (site / "_static").mkdir()
    (site / "_static" / "ok.css").write_text("body { background: url(missing.png); }")
    (site / "index.html").write_text('<a id="top" href="sub/page.html#here">ok</a>')
    (site / "sub" / "page.html").write_text(
        '<link rel="stylesheet" href="../_static/ok.css">'
        '<p id="here"></p>'
        '<a href="https://example.org/paper.pdf">a reference: a link, not a load</a>'
        '<a href="../index.html#top">ok</a>'
        '<a href="gone.html">broken</a>'
        '<a href="../index.html#nowhere">broken fragment</a>'
        '<script src="https://cdn.jsdelivr.net/npm/mathjax@3/es5/tex-svg.js"></script>'
        '<img src="../_images/fig.png">')
    problems = browser_check.static_problems(site)
    text = "\n".join(problems)
    assert len(problems) == 5, text
    assert "gone.html" in text and "nowhere" in text and "fig.png" in text
    assert "jsdelivr" in text and "missing.png" in text
    assert "example.org" not in text


def _chromium_or_skip():
    if browser_check.find_chromium() is None:
        pytest.skip("Chromium is not installed: run `python3 tools/build_book.py --check` "
                    "(installs it as root with apt-get) or apt-get install -y chromium")
    pytest.importorskip("websocket", reason="websocket-client is missing from the environment")


def test_browser_checker_catches_raw_math_and_broken_images(tmp_path):
    """The browser check can fail: a page whose MathJax is missing and whose figure is gone."""
    _chromium_or_skip()
    site = tmp_path / "html"
    site.mkdir()
    (site / "index.html").write_text(
        '<html><head><title>t</title><script src="_static/mathjax/missing.js"></script></head>'
        '<body><main><p>Inline <span class="math notranslate nohighlight">\\(B^2\\)</span> and</p>'
        '<div class="math notranslate nohighlight">\\[T = \\frac{W}{B}\\]</div>'
        '<pre>print("\\(code is not checked\\)")</pre>'
        '<img src="_images/gone.png"></main></body></html>')
    problems, report = browser_check.browser_problems(site, tmp_path / "shots", pages=["index.html"],
                                                      log=lambda *_: None)
    text = "\n".join(problems)
    assert "MathJax did not load" in text
    assert "raw TeX left in the text" in text and "code is not checked" not in text
    assert "gone.png" in text and "failed requests" in text
    assert report["index.html"]["mathElements"] == 2 and report["index.html"]["images"] == 1
    assert (tmp_path / "shots" / "01_first_page.png").exists()


# --------------------------------------------------------------------------- the built site

def _fresh_build():
    state = build_book.build_state(ROOT)
    if state != "fresh":
        reason = "no book build" if state == "missing" else "the book build is older than its sources"
        pytest.skip(f"{reason}: {BUILD_HINT}")
    return build_book.HTML


def test_built_site_links_resolve_and_nothing_loads_from_the_network():
    site = _fresh_build()
    problems = browser_check.static_problems(site)
    assert not problems, "\n".join(problems[:20])


def test_built_site_is_the_edition_it_says():
    """With the worked solutions: their pages, titled 'Solutions NN'. Without: no page, link or copy of one."""
    site = _fresh_build()
    if build_book.built_with_solutions(ROOT):
        for path in sorted((ROOT / "solutions").glob("[0-9][0-9]_*.ipynb")):
            page = (site / "solutions" / f"{path.stem}.html").read_text(encoding="utf-8")
            assert re.search(r"<title>Solutions \d\d · ", page), path.name
            exercise = (site / "exercises" / f"{path.stem}.html").read_text(encoding="utf-8")
            assert re.search(r"<title>Exercises \d\d · ", exercise), path.name
        return
    assert not (site / "solutions").exists()
    leaked = [p.relative_to(site).as_posix() for p in site.rglob("*")
              if "solutions" in p.as_posix().lower() and p.suffix in (".ipynb", ".html", ".txt")]
    assert not leaked, leaked
    for page in browser_check.html_pages(site):
        assert 'href="../solutions/' not in page.read_text(encoding="utf-8"), page.name


def test_built_site_has_every_page_and_no_cdn_url():
    site = _fresh_build()
    solutions = build_book.built_with_solutions(ROOT)
    for doc in build_book.toc_files(build_book.toc_yaml(ROOT, solutions=solutions)):
        assert (site / f"{doc}.html").exists(), doc
    offenders = []
    for page in browser_check.html_pages(site):
        for match in CDN.finditer(page.read_text(encoding="utf-8", errors="replace")):
            offenders.append(f"{page.relative_to(site)}: {match.group(0)}")
    assert not offenders, "\n".join(offenders[:20])
    assert (site / "_static" / "mathjax" / build_book.MATHJAX_FILE).stat().st_size > 100_000


def test_widget_outputs_are_inert_and_have_a_static_figure():
    """A widget output needs a kernel: on the site it is an inert placeholder (no widget
    JavaScript is loaded) and its page carries static figures."""
    site = _fresh_build()
    for page in browser_check.html_pages(site):
        text = page.read_text(encoding="utf-8", errors="replace")
        assert "html-manager" not in text and "require.min.js" not in text, page.name
        if "application/vnd.jupyter.widget-view+json" in text:
            assert "<img" in text, f"{page.relative_to(site)} shows a widget without a static figure"


def test_build_log_has_no_unresolved_references():
    _fresh_build()
    log = (build_book.BUILD / "build.log").read_text()
    missing = [l for l in log.splitlines() if "xref_missing" in l or "toc.not_included" in l]
    assert not missing, "\n".join(missing)


def test_every_page_in_a_headless_browser():
    """Math typeset by MathJax, every image loaded, no request leaves 127.0.0.1, no JS error."""
    site = _fresh_build()
    _chromium_or_skip()
    artifacts = ROOT / "test-artifacts" / "book"
    problems, report = browser_check.browser_problems(site, artifacts, log=lambda *_: None)
    assert not problems, "\n".join(problems[:20])
    assert sum(r["mjxContainers"] for r in report.values()) > 0          # the book has math, typeset
    assert sum(r["images"] for r in report.values()) > 0                 # and figures, loaded
    assert (artifacts / "01_first_page.png").stat().st_size > 10_000
    # the static explorer: a control moved, the front and the summary changed, and what it says is
    # what the library says for that selection (the check above saw no request leave the site)
    from servingmath import explorer

    moved = [r["explorer"] for r in report.values() if r.get("explorer")]
    assert moved, "no page with the static explorer"
    for state in (moved[0]["before"], moved[0]["after"]):
        s = state["selection"]
        assert s["setting"] == "physical bound"
        data = explorer.frontier_data(s["model"], s["accelerator"], s["weight_dtype"], s["kv_dtype"],
                                      s["tensor_parallel"], s["context_len"])
        assert state["summary"] == explorer.summary(data, 0.05)
        assert state["front_points"] == int(data["front"].sum())
    assert moved[0]["before"]["selection"]["model"] != moved[0]["after"]["selection"]["model"]
    for name in ("05_explorer_before.png", "06_explorer_after.png"):
        assert (artifacts / name).stat().st_size > 10_000
