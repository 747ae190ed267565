"""The book's own Sphinx extension (Jupyter Book 1 loads it through ``local_extensions``).

* **Titles.** The worked solutions are the exercise sets with their answers, so their notebooks'
  titles read "Exercises NN · ..." too; on the site their pages are titled "Solutions NN · ...",
  so a search result or a browser tab tells the two apart.
* **A book without the solutions.** ``tools/build_book.py --without-solutions`` leaves
  ``solutions/`` out of the table of contents and sets ``SERVINGMATH_BOOK_SOLUTIONS=0``; links
  from the chapters to a solutions notebook then become plain text saying so (otherwise MyST
  would leave a broken reference, or copy the notebook into the site as a download).
* **The explorer.** A notebook output of ``servingmath.explorer.FrontierExplorer.widget()`` is an
  ipywidgets view (it needs a kernel) whose payload names the explorer and its selection. Here its
  still picture (the PNG in the same output) is shown instead of the inert widget, and the static
  explorer is placed after it: ``_static/explorer.js`` on Plotly, with the data that
  ``tools/explorer_data.py`` precomputed into ``_static/explorer/``.
"""

from __future__ import annotations

import json
import os
import re

from docutils import nodes
from sphinx import addnodes
from sphinx.transforms.post_transforms import SphinxPostTransform

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
EXPLORER_KEY = "servingmath_explorer"
SCRIPT = re.compile(r"<script[^>]*>(.*?)</script>", re.S)
PLOTLY_FILE = "explorer/plotly-basic.min.js"
NOT_IN_THIS_EDITION = " (the worked solutions are not part of this edition)"


def solutions_included() -> bool:
    return os.environ.get("SERVINGMATH_BOOK_SOLUTIONS", "1") != "0"


def _retitle(title: str) -> str:
    return re.sub(r"^Exercises\b", "Solutions", title.strip())


def on_doctree_read(app, doctree):
    docname = app.env.docname
    if docname.startswith("solutions/"):
        for title in doctree.findall(nodes.title):
            text = title.astext()
            if text.startswith("Exercises"):
                title.children = [nodes.Text(_retitle(text))]
            break
    if not solutions_included():
        for node in list(doctree.findall(lambda n: isinstance(n, (addnodes.pending_xref,
                                                                    addnodes.download_reference)))):
            target = str(node.get("reftarget", ""))
            if re.match(r"^(\.\./)*solutions/", target):
                node.replace_self(nodes.inline("", node.astext() + NOT_IN_THIS_EDITION,
                                               classes=["sm-not-in-edition"]))


class StaticExplorer(SphinxPostTransform):
    """Show the explorer's still picture and the static explorer instead of its inert widget."""

    default_priority = 3                    # before myst-nb's SelectMimeType (4) picks a mime type
    formats = ("html",)

    def run(self, **kwargs):
        def is_bundle(node):
            return isinstance(node, nodes.container) and node.get("nb_element") == "mime_bundle"

        depth = self.env.docname.count("/")
        static = "../" * depth + "_static/"
        for bundle in list(self.document.findall(is_bundle)):
            widget = [c for c in bundle.children if c.get("mime_type") == WIDGET_MIME]
            if not widget:
                continue
            match = SCRIPT.search(widget[0].astext())
            try:
                payload = json.loads(match.group(1)) if match else {}
            except ValueError:
                continue
            selection = payload.get(EXPLORER_KEY)
            if not isinstance(selection, dict):
                continue
            bundle.remove(widget[0])         # the PNG beside it is shown where no script runs
            initial = json.dumps(selection, sort_keys=True).replace("&", "&amp;").replace("'", "&#39;")
            html = (f"<div class=\"sm-explorer\" data-initial='{initial}'></div>\n"
                    f"<script src=\"{static}{PLOTLY_FILE}\"></script>\n"
                    f"<script src=\"{static}explorer/explorer-index.js\"></script>\n"
                    f"<script src=\"{static}explorer.js\"></script>\n")
            bundle.parent.insert(bundle.parent.index(bundle) + 1, nodes.raw("", html, format="html"))


def setup(app):
    app.connect("doctree-read", on_doctree_read, priority=100)   # before Sphinx records titles (500)
    app.add_post_transform(StaticExplorer)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
