"""The built documentation site, opened in a real headless browser (Chromium, driven by Playwright).

On every page: no JavaScript error and no failed request, nothing fetched from outside the
site (no CDN), every picture loaded, every formula typeset by MathJax (no raw TeX left in
the text, no TeX error), and no horizontal scroll at a phone's width (375 px). The search
box finds ``layer_norm``, served over HTTP and opened from the file system.

The site is not built here (the demos run while it builds, minutes): build it first with
the README's command, as ``.ci/run`` does,

    pip install -e ".[docs]" && sphinx-build -W --keep-going -n docs docs/_build/html

then ``pip install -e ".[browser]"`` and Debian's ``chromium`` (``apt-get install chromium``),
and run ``pytest tests/test_docs_site.py``. Without a built site, Playwright or a Chromium
every test here skips and says which is missing. ``MINITORCH_ATTN_DOCS`` points at another
built site; ``MINITORCH_ATTN_CHROMIUM`` at another Chromium; with
``MINITORCH_ATTN_DOCS_SCREENSHOTS=DIR`` the page test also saves a screenshot of three pages.
"""

import contextlib
import functools
import http.server
import os
import shutil
import threading
from pathlib import Path
from urllib.parse import urlparse

import pytest

ROOT = Path(__file__).resolve().parents[1]
SITE = Path(os.environ.get("MINITORCH_ATTN_DOCS", ROOT / "docs" / "_build" / "html"))
BUILD = 'pip install -e ".[docs]" && sphinx-build -W --keep-going -n docs docs/_build/html'
PHONE = {"width": 375, "height": 812}
SCREENSHOTS = {
    "index.html": "start.png",
    "engine/norms.html": "layernorm.png",
    "tour/demos/03_layernorm.html": "tour.png",
}

# Raw TeX that MathJax would have replaced: its delimiters and the commands our formulas use.
RAW_TEX = r"\\\(|\\\)|\\\[|\\\]|\$\$|\\(frac|partial|sum|mathrm|hat|delta|odot|sqrt|top|cdot)\b"

# What each page reports: errors, pictures not loaded, raw TeX outside code, its width.
INSPECT = """async () => {
  for (const img of document.images) { img.loading = 'eager'; }
  await Promise.all(Array.from(document.images).map(img => img.decode().catch(() => null)));
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) { await MathJax.startup.promise; }
  const text = document.querySelector('article') || document.body;
  const copy = text.cloneNode(true);
  copy.querySelectorAll('pre, code, script, style, mjx-container, .highlight, textarea').forEach(n => n.remove());
  return {
    broken: Array.from(document.images).filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.src),
    mathUntypeset: Array.from(document.querySelectorAll('.math')).filter(m => !m.querySelector('mjx-container'))
                        .map(m => m.textContent.slice(0, 80)),
    texErrors: Array.from(document.querySelectorAll('mjx-merror')).map(m => m.textContent.slice(0, 80)),
    text: copy.textContent,
    scrollWidth: document.documentElement.scrollWidth,
    innerWidth: window.innerWidth,
  };
}"""


def _chromium():
    path = os.environ.get("MINITORCH_ATTN_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    return path if path and os.access(path, os.X_OK) else None


@pytest.fixture(scope="module")
def browser():
    if not (SITE / "index.html").is_file():
        pytest.skip(f"no built site at {SITE}: build it first with `{BUILD}`")
    sync_api = pytest.importorskip("playwright.sync_api", reason='the browser test needs pip install -e ".[browser]"')
    chromium = _chromium()
    if chromium is None:
        pytest.skip("no Chromium: apt-get install chromium (or set MINITORCH_ATTN_CHROMIUM)")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=chromium, headless=True)
        yield b
        b.close()


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def server():
    """The site served on a free port of the loopback address, for the test's duration."""
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(SITE)))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    httpd.shutdown()
    httpd.server_close()


def _pages():
    return sorted(p.relative_to(SITE).as_posix() for p in SITE.rglob("*.html") if "_static" not in p.parts)


@contextlib.contextmanager
def _watched_context(browser, base, **options):
    """A browser context that lets through only the site itself and records what went wrong:
    script errors, console errors, failed requests and requests to any other host."""
    context = browser.new_context(**options)
    problems = []

    def route(route):
        url = route.request.url
        if url.startswith(base) or urlparse(url).scheme in ("data", "blob", "about"):
            route.continue_()
        else:
            problems.append(f"request outside the site: {url}")
            route.abort()

    context.route("**/*", route)

    def watch(page):
        page.on("pageerror", lambda exc: problems.append(f"JavaScript error: {exc}"))
        page.on("console", lambda msg: problems.append(f"console error: {msg.text}") if msg.type == "error" else None)
        page.on("requestfailed", lambda req: problems.append(f"failed request: {req.url} ({req.failure})"))

    context.on("page", watch)
    try:
        yield context, problems
    finally:
        context.close()


def _check(page, url, problems, width_only=False):
    page.goto(url, wait_until="load")
    seen = page.evaluate(INSPECT)
    found = []
    if seen["scrollWidth"] > seen["innerWidth"] + 1:
        found.append(f"scrolls sideways: {seen['scrollWidth']} px wide in a {seen['innerWidth']} px window")
    if not width_only:
        import re

        found += [f"picture not loaded: {src}" for src in seen["broken"]]
        found += [f"formula not typeset: {m!r}" for m in seen["mathUntypeset"]]
        found += [f"TeX error in a formula: {m!r}" for m in seen["texErrors"]]
        raw = re.search(RAW_TEX, seen["text"])
        if raw:
            around = seen["text"][max(raw.start() - 60, 0) : raw.end() + 60].replace("\n", " ")
            found.append(f"raw TeX in the text: ...{around}...")
    found += problems
    problems.clear()
    return found


def test_every_page_loads_cleanly_with_its_pictures_and_formulas(browser, server):
    pages = _pages()
    assert len(pages) > 20, f"the site at {SITE} has only {len(pages)} pages"
    shots = os.environ.get("MINITORCH_ATTN_DOCS_SCREENSHOTS")
    failures = {}
    with _watched_context(browser, server, viewport={"width": 1280, "height": 900}) as (context, problems):
        page = context.new_page()
        for name in pages:
            found = _check(page, server + name, problems)
            if found:
                failures[name] = found
            if shots and name in SCREENSHOTS:
                Path(shots).mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(Path(shots) / SCREENSHOTS[name]), full_page=False)
    assert not failures, "\n".join(f"{name}: {p}" for name, found in failures.items() for p in found)


def test_no_page_scrolls_sideways_at_a_phone_width(browser, server):
    failures = {}
    with _watched_context(browser, server, viewport=PHONE, is_mobile=True, has_touch=True) as (context, problems):
        page = context.new_page()
        for name in _pages():
            found = _check(page, server + name, problems, width_only=True)
            if found:
                failures[name] = found
    assert not failures, "\n".join(f"{name}: {p}" for name, found in failures.items() for p in found)


def _search(page, base):
    """Type ``layer_norm`` into the search box of the start page; the result links."""
    page.goto(base + "index.html", wait_until="load")
    box = page.locator("input[name=q]").first
    if not box.is_visible():  # a narrow window hides the sidebar's box
        page.set_viewport_size({"width": 1280, "height": 900})
    box.fill("layer_norm")
    box.press("Enter")
    page.wait_for_url("**/search.html*")
    page.wait_for_function("() => document.querySelectorAll('#search-results ul.search li').length > 0", timeout=15_000)
    return page.eval_on_selector_all("#search-results ul.search li a", "links => links.map(a => a.href)")


def test_the_search_box_finds_layer_norm(browser, server):
    with _watched_context(browser, server) as (context, problems):
        links = _search(context.new_page(), server)
        assert not problems, problems
    assert any("engine/norms.html" in link for link in links), f"no result on the norms page: {links}"


def test_the_site_works_from_the_file_system(browser):
    """Opened as files (no server), as a newcomer may: the start page, a page of formulas, search."""
    base = SITE.as_uri() + "/"
    with _watched_context(browser, base) as (context, problems):
        page = context.new_page()
        for name in ("index.html", "engine/norms.html"):
            found = _check(page, base + name, problems)
            assert not found, f"{name} from the file system: {found}"
        links = _search(page, base)
        assert not problems, problems
    assert any("engine/norms.html" in link for link in links), f"no result on the norms page: {links}"
