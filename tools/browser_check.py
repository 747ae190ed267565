"""Check the built book: in the files, and in a real headless browser.

    .venv/bin/python tools/browser_check.py [--site book/_build/html] [--artifacts test-artifacts/book]
    python3 tools/build_book.py --check     # the usual way: builds first, installs Chromium if needed

Static checks (pure Python, every HTML page of the site):

* every relative ``href``/``src`` points to a file that exists, and its
  ``#fragment``, if any, to an ``id`` on that page;
* nothing is loaded from the network: no ``<script src>``, stylesheet, image,
  iframe or CSS ``url()`` pointing to ``http(s)://`` or ``//`` (links *to*
  references elsewhere are fine: they are not loaded).

Browser checks (Debian's ``chromium`` driven over the DevTools protocol with
``websocket-client``, the site served by a local ``http.server`` on
127.0.0.1), on every page of the table of contents:

* MathJax ran and typeset the math: ``mjx-container`` elements exist where
  the page has math, no ``\\(``, ``\\[``, ``$$`` or ``\\frac`` is left in the
  rendered text (code blocks aside), no MathJax error nodes;
* every image has loaded (``naturalWidth > 0``);
* no request left 127.0.0.1, no request failed, no JavaScript exception;
* on a page with the static Pareto-front explorer, moving a control (the model) changes
  both its front and its summary (screenshots before and after);
* the code cells' width in characters (``code_columns``) and how many of them scroll.

Screenshots of a few pages (the first page, the first displayed formula, the
first figure, an exercise page, the explorer before and after moving a control) and
``report.json`` go to ``--artifacts``.
Exit status 1 when a problem is found.
"""

from __future__ import annotations

import argparse
import base64
import functools
import html.parser
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SITE = ROOT / "book" / "_build" / "html"
ARTIFACTS = ROOT / "test-artifacts" / "book"
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic",
                  "--disable-default-apps", "--disable-extensions", "--mute-audio",
                  "--hide-scrollbars", "--window-size=1280,900"]
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.\-]*:")
CSS_URL = re.compile(r"url\(\s*['\"]?([^'\")]+)['\"]?\s*\)")
CDN_HOSTS = re.compile(r"https?://[^\s\"'<>)]*(?:cdn|jsdelivr|unpkg|cdnjs|googleapis|gstatic|"
                       r"fontawesome|mathjax\.org|polyfill\.io|bootstrapcdn)[^\s\"'<>)]*", re.I)
# Elements whose URL attribute the browser loads by itself (as opposed to links a reader follows).
LOADED = {("script", "src"), ("img", "src"), ("iframe", "src"), ("source", "src"), ("video", "src"),
          ("audio", "src"), ("embed", "src"), ("object", "data"), ("input", "src")}
LOADED_LINK_RELS = {"stylesheet", "preload", "modulepreload", "icon", "shortcut", "prefetch",
                    "apple-touch-icon", "manifest"}


def find_chromium() -> str | None:
    """Path of a Chromium/Chrome executable: $CHROMIUM, else the first one on PATH."""
    explicit = os.environ.get("CHROMIUM")
    if explicit and Path(explicit).exists():
        return explicit
    for name in CHROMIUM_NAMES:
        found = shutil.which(name)
        if found:
            return found
    return None


# --------------------------------------------------------------------------- static checks

class _PageParser(html.parser.HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.ids: set[str] = set()
        self.urls: list[tuple[str, str, str, bool]] = []   # (tag, attribute, value, loaded)
        self.inline: list[str] = []                          # inline <script>/<style> text
        self._in_inline = False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        for key in ("id", "name"):
            if attrs.get(key) and (key == "id" or tag == "a"):
                self.ids.add(attrs[key])
        rel = set((attrs.get("rel") or "").lower().split())
        for attr in ("href", "src", "data", "poster"):
            value = attrs.get(attr)
            if value is None:
                continue
            loaded = (tag, attr) in LOADED or (tag == "link" and bool(rel & LOADED_LINK_RELS)) \
                or attr == "poster"
            self.urls.append((tag, attr, value.strip(), loaded))
        if attrs.get("style"):
            self.inline.append(attrs["style"])
        self._in_inline = tag in ("script", "style") and "src" not in attrs

    def handle_endtag(self, tag):
        if tag in ("script", "style"):
            self._in_inline = False

    def handle_data(self, data):
        if self._in_inline:
            self.inline.append(data)


@functools.lru_cache(maxsize=None)
def _parse(path: Path) -> _PageParser:
    parser = _PageParser()
    parser.feed(path.read_text(encoding="utf-8", errors="replace"))
    return parser


def _is_remote(url: str) -> bool:
    return url.startswith("//") or url.lower().startswith(("http://", "https://"))


def html_pages(site: Path) -> list[Path]:
    """Every HTML page of the site (the copies of the sources in _sources aside)."""
    return sorted(p for p in site.rglob("*.html")
                  if not {"_sources", "_static"} & set(p.relative_to(site).parts))


def static_problems(site: Path) -> list[str]:
    """Broken relative links/fragments and network loads in every HTML page of ``site``.

    Returns a list of human-readable problems (empty when the site is fine).
    """
    site = Path(site).resolve()
    _parse.cache_clear()
    problems = []
    checked_css: set[Path] = set()
    for page in html_pages(site):
        name = page.relative_to(site).as_posix()
        parsed = _parse(page)
        for tag, attr, value, loaded in parsed.urls:
            if not value or value.startswith(("data:", "mailto:", "javascript:", "tel:")):
                continue
            if _is_remote(value):
                if loaded:
                    problems.append(f"{name}: <{tag} {attr}> loads {value} from the network")
                continue
            if SCHEME.match(value):
                continue
            split = urllib.parse.urlsplit(value)
            target = page if not split.path else (page.parent / urllib.parse.unquote(split.path)).resolve()
            if target.is_dir():
                target = target / "index.html"
            if not target.exists():
                problems.append(f"{name}: <{tag} {attr}=\"{value}\"> points to a missing file")
                continue
            if site not in target.parents and target != site:
                problems.append(f"{name}: <{tag} {attr}=\"{value}\"> points outside the site")
                continue
            fragment = urllib.parse.unquote(split.fragment)
            if fragment and target.suffix == ".html" and fragment not in _parse(target).ids:
                problems.append(f"{name}: <{tag} {attr}=\"{value}\"> has no element id={fragment!r}")
            if target.suffix == ".css" and target not in checked_css:
                checked_css.add(target)
                problems += _css_problems(target, site)
        for text in parsed.inline:
            for match in CDN_HOSTS.finditer(text):
                problems.append(f"{name}: inline script/style refers to {match.group(0)}")
            for url in CSS_URL.findall(text):
                if _is_remote(url):
                    problems.append(f"{name}: inline style loads {url} from the network")
    return problems


def _css_problems(css: Path, site: Path) -> list[str]:
    problems = []
    name = css.relative_to(site).as_posix()
    text = css.read_text(encoding="utf-8", errors="replace")
    for url in CSS_URL.findall(text):
        url = url.strip()
        if url.startswith(("data:", "#")) or not url:
            continue
        if _is_remote(url):
            problems.append(f"{name}: loads {url} from the network")
        elif not SCHEME.match(url):
            path = urllib.parse.unquote(urllib.parse.urlsplit(url).path)
            if path and not (css.parent / path).resolve().exists():
                problems.append(f"{name}: url({url}) points to a missing file")
    for match in re.finditer(r"@import\s+(?:url\()?['\"]?(https?:)?//[^'\")\s;]+", text):
        problems.append(f"{name}: @import from the network: {match.group(0)}")
    return problems


# --------------------------------------------------------------------------- local server

class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


class LocalSite:
    """Serve a folder on 127.0.0.1 (a free port) in a background thread."""

    def __init__(self, folder: Path):
        handler = functools.partial(_QuietHandler, directory=str(folder))
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


# --------------------------------------------------------------------------- Chromium over CDP

class Browser:
    """A headless Chromium driven over the DevTools protocol (one page, flat sessions)."""

    def __init__(self, executable: str, timeout: float = 30.0):
        import websocket  # websocket-client, pinned in requirements.txt

        self.profile = tempfile.mkdtemp(prefix="book-chromium-")
        self.timeout = timeout
        self.process = subprocess.Popen(
            [executable, *CHROMIUM_FLAGS, f"--user-data-dir={self.profile}", "--remote-debugging-port=0",
             "--remote-allow-origins=*", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        port_file = Path(self.profile) / "DevToolsActivePort"
        deadline = time.time() + timeout
        while not (port_file.exists() and len(port_file.read_text().splitlines()) >= 2):
            if self.process.poll() is not None or time.time() > deadline:
                self.close()
                raise RuntimeError(f"Chromium ({executable}) did not start its DevTools endpoint")
            time.sleep(0.1)
        port, path = port_file.read_text().splitlines()[:2]
        self.ws = websocket.create_connection(f"ws://127.0.0.1:{port}{path}", timeout=timeout,
                                              suppress_origin=True, enable_multithread=False)
        self._timeout_error = websocket.WebSocketTimeoutException
        self._id = 0
        self.events: list[dict] = []
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Network", "Runtime"):
            self.call(f"{domain}.enable", session=True)
        self.call("Emulation.setDeviceMetricsOverride",
                  {"width": 1280, "height": 900, "deviceScaleFactor": 1, "mobile": False}, session=True)

    def call(self, method: str, params: dict | None = None, session: bool = False, timeout=None) -> dict:
        self._id += 1
        message = {"id": self._id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = self.session
        self.ws.send(json.dumps(message))
        deadline = time.time() + (timeout or self.timeout)
        while True:
            reply = self._receive(deadline)
            if reply.get("id") == self._id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})

    def _receive(self, deadline: float) -> dict:
        remaining = deadline - time.time()
        if remaining <= 0:
            raise TimeoutError("Chromium did not answer in time")
        self.ws.settimeout(remaining)
        try:
            reply = json.loads(self.ws.recv())
        except self._timeout_error as error:
            raise TimeoutError("Chromium did not answer in time") from error
        if "method" in reply:
            self.events.append(reply)
        return reply

    def wait_for(self, method: str, timeout: float) -> bool:
        deadline = time.time() + timeout
        seen = len(self.events)
        while True:
            for event in self.events[seen:]:
                if event["method"] == method:
                    return True
            seen = len(self.events)
            try:
                self._receive(deadline)
            except TimeoutError:
                return False

    def open(self, url: str, timeout: float = 20.0) -> bool:
        self.events.clear()
        self.call("Page.navigate", {"url": url}, session=True)
        return self.wait_for("Page.loadEventFired", timeout)

    def evaluate(self, expression: str, timeout: float = 30.0):
        result = self.call("Runtime.evaluate", {"expression": expression, "awaitPromise": True,
                                                "returnByValue": True}, session=True, timeout=timeout)
        if "exceptionDetails" in result:
            raise RuntimeError(f"page script failed: {result['exceptionDetails'].get('text')}")
        return result["result"].get("value")

    def screenshot(self, path: Path) -> None:
        data = self.call("Page.captureScreenshot", {"format": "png"}, session=True)["data"]
        path.write_bytes(base64.b64decode(data))

    def close(self) -> None:
        try:
            if getattr(self, "ws", None):
                self.ws.close()
        finally:
            if self.process.poll() is None:
                self.process.terminate()
                try:
                    self.process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self.process.kill()
                    self.process.wait()
            shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


PAGE_CHECK = r"""
(async () => {
  const settle = (p, ms) => Promise.race([p, new Promise(r => setTimeout(r, ms))]);
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
    await settle(MathJax.startup.promise, 15000);
  }
  const images = [...document.images];
  images.forEach(img => { img.loading = "eager"; });
  await settle(Promise.all(images.map(img => img.complete ? null :
      new Promise(r => { img.addEventListener("load", r); img.addEventListener("error", r); }))), 10000);
  const main = document.querySelector("main") || document.body;
  const skip = "pre, code, script, style, textarea, mjx-container, .highlight, .cell_input";
  const walker = document.createTreeWalker(main, NodeFilter.SHOW_TEXT, {acceptNode(node) {
    const parent = node.parentElement;
    return parent && !parent.closest(skip) ? NodeFilter.FILTER_ACCEPT : NodeFilter.FILTER_REJECT;
  }});
  const rawTex = [];
  const pattern = /\\\(|\\\)|\\\[|\\\]|\$\$|\\begin\{|\\frac|\\mathrm|\\cdot|\\text\{/;
  while (walker.nextNode()) {
    const text = walker.currentNode.nodeValue;
    if (pattern.test(text)) rawTex.push(text.trim().slice(0, 160));
  }
  const mathElements = [...main.querySelectorAll(".math")];
  return {
    title: document.title,
    mathjax: window.MathJax && MathJax.version ? MathJax.version : null,
    mathElements: mathElements.length,
    mjxContainers: document.querySelectorAll("mjx-container").length,
    untypeset: mathElements.filter(e => !e.querySelector("mjx-container")).map(e => e.textContent.slice(0, 100)),
    mathErrors: document.querySelectorAll("mjx-merror, [data-mml-node='merror']").length,
    rawTex: rawTex,
    images: images.length,
    brokenImages: images.filter(img => !(img.complete && img.naturalWidth > 0)).map(img => img.getAttribute("src")),
    firstFigureY: (() => { const f = main.querySelector(".cell_output img, figure img, img"); return f ? f.getBoundingClientRect().top + window.scrollY : null; })(),
    firstDisplayMathY: (() => { const m = main.querySelector("div.math mjx-container, mjx-container[display='true']"); return m ? m.getBoundingClientRect().top + window.scrollY : null; })(),
    codeColumns: (() => {   // characters a code cell shows without scrolling (tools/figure_style.py)
      const pre = main.querySelector("div.cell_input div.highlight pre");
      if (!pre) return null;
      const style = getComputedStyle(pre), probe = document.createElement("span");
      probe.textContent = "x".repeat(100); probe.style.font = style.font; probe.style.whiteSpace = "pre";
      pre.appendChild(probe); const char = probe.getBoundingClientRect().width / 100; probe.remove();
      return Math.floor((pre.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight)) / char);
    })(),
    codeCellsScrolling: [...main.querySelectorAll("div.cell_input pre")].filter(p => p.scrollWidth > p.clientWidth + 1).length,
    explorers: main.querySelectorAll(".sm-explorer").length,
  };
})()
"""


EXPLORER_STATE = r"""
(async (before) => {
  const box = document.querySelector(".sm-explorer");
  for (let i = 0; i < 200; i++) {
    const state = box && box.getAttribute("data-state");
    if (state && JSON.parse(state).updates > before) return JSON.parse(state);
    await new Promise(r => setTimeout(r, 100));
  }
  return null;
})(%d)
"""

EXPLORER_MOVE = r"""
(() => {
  const box = document.querySelector(".sm-explorer");
  const select = box.querySelector("select[name=%s]");
  const options = [...select.options].map(o => o.value);
  select.value = options[(options.indexOf(select.value) + 1) %% options.length];
  select.dispatchEvent(new Event("change"));
  return select.value;
})()
"""

#: the control the browser check moves, in the first explorer of a page (another model: another
#: data file is loaded, so the check also sees that loading it stays on the site)
EXPLORER_CONTROL = "model"


def explorer_problems(browser: "Browser", artifacts: Path, shoot: bool) -> tuple[list[str], dict]:
    """Move a control of the page's first static explorer: its front and its summary must change.

    Returns (problems, {"before": state, "after": state, "moved": value}); with ``shoot``,
    screenshots before and after go to ``artifacts`` (05_explorer_before.png, 06_explorer_after.png).
    """
    before = browser.evaluate(EXPLORER_STATE % 0, timeout=40)
    if not before:
        return ["the explorer did not draw (no data-state after 20 s)"], {}
    if shoot:
        y = browser.evaluate("document.querySelector('.sm-explorer').getBoundingClientRect().top + window.scrollY")
        browser.evaluate(f"window.scrollTo(0, {max(0, int(y) - 70)}); new Promise(r => setTimeout(r, 300))")
        browser.screenshot(artifacts / "05_explorer_before.png")
    moved = browser.evaluate(EXPLORER_MOVE % EXPLORER_CONTROL)
    after = browser.evaluate(EXPLORER_STATE % before["updates"], timeout=40)
    problems = []
    if not after:
        problems.append(f"moving the explorer's {EXPLORER_CONTROL} to {moved!r} drew nothing")
    else:
        if after["summary"] == before["summary"]:
            problems.append(f"moving the explorer's {EXPLORER_CONTROL} left its summary as it was")
        if (after["front_points"], after["front_first"]) == (before["front_points"], before["front_first"]):
            problems.append(f"moving the explorer's {EXPLORER_CONTROL} left its front as it was")
        if shoot:
            browser.evaluate("new Promise(r => setTimeout(r, 300))")
            browser.screenshot(artifacts / "06_explorer_after.png")
    browser.evaluate("window.scrollTo(0, 0)")
    return problems, {"before": before, "after": after, "moved": moved}


def toc_pages(site: Path) -> list[str]:
    """The site's pages in reading order: the generated toc if present, else every page."""
    toc = site.parent / "_toc.yml"
    if toc.exists():
        files = re.findall(r"^\s*(?:root|- file):\s*(\S+)\s*$", toc.read_text(), flags=re.M)
        pages = [f + ".html" for f in files if (site / (f + ".html")).exists()]
        if pages:
            return pages
    return [p.relative_to(site).as_posix() for p in html_pages(site)
            if p.name not in ("genindex.html", "search.html")]


def browser_problems(site: Path, artifacts: Path, executable: str | None = None,
                     pages: list[str] | None = None, log=print) -> tuple[list[str], dict]:
    """Open every page in headless Chromium; returns (problems, per-page report)."""
    executable = executable or find_chromium()
    if executable is None:
        raise RuntimeError("no Chromium found (apt-get install -y chromium, or set CHROMIUM=...)")
    site = Path(site).resolve()
    artifacts = Path(artifacts)
    artifacts.mkdir(parents=True, exist_ok=True)
    for old in artifacts.glob("*.png"):
        old.unlink()
    pages = pages or toc_pages(site)
    problems: list[str] = []
    report: dict = {}
    shots = {"first_page": pages[0]}
    with LocalSite(site) as server, Browser(executable) as browser:
        for page in pages:
            start = time.perf_counter()
            loaded = browser.open(f"{server.url}/{page}")
            result = browser.evaluate(PAGE_CHECK) if loaded else {}
            found = []
            explorer = {}
            if result and result.get("explorers"):
                found, explorer = explorer_problems(browser, artifacts, shoot="explorer" not in shots)
                shots.setdefault("explorer", page)
            seconds = time.perf_counter() - start
            events = list(browser.events)
            requests = {e["params"]["requestId"]: e["params"]["request"]["url"]
                        for e in events if e["method"] == "Network.requestWillBeSent"}
            remote = sorted({u for u in requests.values()
                             if not u.startswith((server.url, "data:", "blob:", "about:"))})
            implicit = f"{server.url}/favicon.ico"   # the browser asks for it by itself
            failed = sorted({requests.get(e["params"]["requestId"], "?") for e in events
                             if e["method"] == "Network.loadingFailed"
                             and not e["params"].get("canceled")} - {implicit})
            bad_status = sorted({e["params"]["response"]["url"] for e in events
                                 if e["method"] == "Network.responseReceived"
                                 and e["params"]["response"]["status"] >= 400} - {implicit})
            exceptions = [e["params"]["exceptionDetails"].get("exception", {}).get("description")
                          or e["params"]["exceptionDetails"].get("text")
                          for e in events if e["method"] == "Runtime.exceptionThrown"]
            entry = {**result, "loaded": loaded, "seconds": round(seconds, 2), "remote_requests": remote,
                     "failed_requests": failed + bad_status, "exceptions": exceptions}
            if explorer:
                entry["explorer"] = explorer
            report[page] = entry
            if not loaded:
                found.append("did not finish loading")
            if result:
                if result["mathElements"] and not result["mathjax"]:
                    found.append("MathJax did not load")
                if result["mathElements"] and result["mjxContainers"] == 0:
                    found.append("math present but no mjx-container: MathJax did not typeset")
                if result["untypeset"]:
                    found.append(f"{len(result['untypeset'])} math element(s) not typeset, "
                                 f"e.g. {result['untypeset'][0]!r}")
                if result["mathErrors"]:
                    found.append(f"{result['mathErrors']} MathJax error(s) (bad TeX)")
                if result["rawTex"]:
                    found.append(f"raw TeX left in the text, e.g. {result['rawTex'][0]!r}")
                if result["brokenImages"]:
                    found.append(f"image(s) did not load: {', '.join(result['brokenImages'][:3])}")
            if remote:
                found.append(f"requests left 127.0.0.1: {', '.join(remote[:3])}")
            if failed or bad_status:
                found.append(f"failed requests: {', '.join((failed + bad_status)[:3])}")
            if exceptions:
                found.append(f"JavaScript exception: {exceptions[0][:200]}")
            problems += [f"{page}: {p}" for p in found]
            log(f"  {'ok ' if not found else 'BAD'} {page}: {seconds:.1f} s, "
                f"{result.get('mjxContainers', 0)} formulas typeset, {result.get('images', 0)} images"
                + ("".join(f"\n      {p}" for p in found)))
            # Screenshots: the first page, the first displayed formula, the first figure, an exercise set.
            if page == shots["first_page"]:
                browser.screenshot(artifacts / "01_first_page.png")
            if result.get("firstDisplayMathY") is not None and "math" not in shots:
                shots["math"] = page
                _scroll_and_shoot(browser, result["firstDisplayMathY"], artifacts / "02_first_formula.png")
            if result.get("firstFigureY") is not None and result.get("images") and "figure" not in shots:
                shots["figure"] = page
                _scroll_and_shoot(browser, result["firstFigureY"], artifacts / "03_first_figure.png")
            if page.startswith("exercises/") and "exercise" not in shots:
                shots["exercise"] = page
                browser.screenshot(artifacts / "04_first_exercise_set.png")
    report_file = artifacts / "report.json"
    report_file.write_text(json.dumps({"problems": problems, "screenshots": shots, "pages": report},
                                      indent=1) + "\n")
    return problems, report


def _scroll_and_shoot(browser: Browser, y: float, path: Path) -> None:
    browser.evaluate(f"window.scrollTo(0, {max(0, int(y) - 150)}); new Promise(r => setTimeout(r, 300))")
    browser.screenshot(path)
    browser.evaluate("window.scrollTo(0, 0)")


def _short(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--site", type=Path, default=SITE)
    parser.add_argument("--artifacts", type=Path, default=ARTIFACTS)
    parser.add_argument("--static-only", action="store_true", help="skip the browser")
    args = parser.parse_args(argv)
    if not (args.site / "index.html").exists():
        print(f"[check] no site at {args.site}: build it first (python3 tools/build_book.py)")
        return 1
    start = time.perf_counter()
    problems = static_problems(args.site)
    n_pages = len(html_pages(args.site))
    print(f"[check] static: {n_pages} pages, {len(problems)} problem(s) (links, fragments, network loads)")
    for problem in problems[:50]:
        print("  " + _short(problem))
    if not args.static_only:
        print("[check] browser: headless Chromium on every page of the table of contents")
        found, report = browser_problems(args.site, args.artifacts)
        problems += found
        formulas = sum(r.get("mjxContainers", 0) for r in report.values())
        images = sum(r.get("images", 0) for r in report.values())
        print(f"[check] browser: {len(report)} pages, {formulas} formulas typeset, {images} images loaded, "
              f"{len(found)} problem(s); screenshots and report.json in {args.artifacts}")
        columns = sorted({r["codeColumns"] for r in report.values() if r.get("codeColumns")})
        scrolling = {p: r["codeCellsScrolling"] for p, r in report.items() if r.get("codeCellsScrolling")}
        print(f"[check] code cells show {'/'.join(map(str, columns)) or '?'} characters without scrolling; "
              f"{sum(scrolling.values())} code cells on {len(scrolling)} pages scroll sideways "
              "(python tools/figure_style.py --long-lines lists their lines)")
        for page, r in report.items():
            if r.get("explorer", {}).get("after"):
                before, after = r["explorer"]["before"], r["explorer"]["after"]
                print(f"[check] explorer on {page}: model {before['selection']['model']} -> "
                      f"{after['selection']['model']}: front {before['front_points']} -> {after['front_points']} "
                      f"points, summary changed: {before['summary'] != after['summary']}")
    print(f"[check] {'PASSED' if not problems else 'FAILED'}: {len(problems)} problem(s) "
          f"in {time.perf_counter() - start:.1f} s")
    return 0 if not problems else 1


if __name__ == "__main__":
    sys.exit(main())
