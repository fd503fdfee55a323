"""Checks the built site in a headless Chromium, as a reader's browser shows it.

Serves `site/` on 127.0.0.1 and opens every page at 1280 x 800 pixels with Playwright,
driving the system's Chromium (`chromium` on the PATH, e.g. Debian's package). It fails,
naming each problem, unless:

- every image of every page has loaded (`naturalWidth > 0`), and the gallery shows some;
- every link within the site leads to a page or file that answers 200, and every link
  with a fragment to an element with that id;
- no API signature is wider than its box (`scrollWidth <= clientWidth`), so none needs a
  scroll bar;
- the search box finds `check_env`.

`nox -s docs` runs this after building the site.

    python docs/check_site.py
"""

import functools
import http.server
import pathlib
import shutil
import sys
import threading
import urllib.error
import urllib.parse
import urllib.request

from playwright.sync_api import TimeoutError as PlaywrightTimeoutError, ViewportSize, sync_playwright


SITE = pathlib.Path(__file__).parent.parent / "site"
VIEWPORT: ViewportSize = {"width": 1280, "height": 800}
SEARCH = "check_env"

# What the checks read from each page, in the browser.
PAGE_FACTS = """() => ({
    ids: Array.from(document.querySelectorAll("[id]"), element => element.id),
    links: Array.from(document.querySelectorAll("a[href]"), a => a.href),
    images: Array.from(document.images, image => ({src: image.src, width: image.naturalWidth})),
    signatures: Array.from(document.querySelectorAll(".doc-signature code"), code => ({
        text: code.textContent.split("\\n")[0],
        scrollWidth: code.scrollWidth,
        clientWidth: code.clientWidth,
    })),
})"""


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):
        pass


class QuietServer(http.server.ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        pass  # the browser drops connections it no longer needs; a missing page is a 404


def page_paths() -> list[str]:
    """The URL path of every page of the site (`/`, `/api/envs/`, ...)."""
    folders = sorted(page.parent.relative_to(SITE).as_posix() for page in SITE.rglob("index.html"))
    return ["/" if folder == "." else f"/{folder}/" for folder in folders]


def status(url: str) -> int:
    try:
        with urllib.request.urlopen(url) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


def main() -> None:
    chromium = shutil.which("chromium")
    if chromium is None:
        sys.exit("check_site needs Chromium on the PATH: apt-get install chromium")
    handler = functools.partial(QuietHandler, directory=str(SITE))
    server = QuietServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    origin = f"http://127.0.0.1:{server.server_address[1]}"

    facts = {}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium)
        page = browser.new_page(viewport=VIEWPORT)
        for path in page_paths():
            page.goto(origin + path, wait_until="load")
            facts[path] = page.evaluate(PAGE_FACTS)
        page.fill("input.md-search__input", SEARCH)
        try:
            page.wait_for_selector(".md-search-result__item", timeout=10_000)
        except PlaywrightTimeoutError:
            search_results = 0
        else:
            search_results = page.locator(".md-search-result__item").count()
        browser.close()
    links = {(path, link) for path, found in facts.items() for link in found["links"] if link.startswith(origin)}
    targets = {link.removeprefix(origin).partition("#")[0] for _, link in links}
    statuses = {target: status(origin + target) for target in targets}
    server.shutdown()

    problems, num_images, num_signatures = [], 0, 0
    for path, found in facts.items():
        for image in found["images"]:
            num_images += 1
            if image["width"] == 0:
                problems.append(f"{path}: the image {image['src']} did not load")
        for signature in found["signatures"]:
            num_signatures += 1
            if signature["scrollWidth"] > signature["clientWidth"]:
                problems.append(
                    f"{path}: the signature {signature['text']!r} is {signature['scrollWidth']} px wide "
                    f"in a box of {signature['clientWidth']} px"
                )
    if not facts["/gallery/"]["images"]:
        problems.append("/gallery/: the gallery shows no images")
    if not search_results:
        problems.append(f"the search for {SEARCH!r} lists no results")
    for path, link in sorted(links):
        target, _, fragment = link.removeprefix(origin).partition("#")
        if statuses[target] != 200:
            problems.append(f"{path}: the link {link} answers {statuses[target]}")
        elif fragment and target in facts and urllib.parse.unquote(fragment) not in facts[target]["ids"]:
            problems.append(f"{path}: the link {link} names no element of {target}")

    print(
        f"check_site: {len(facts)} pages, {len(links)} links to {len(targets)} addresses in the site, "
        f"{num_images} images, {num_signatures} signatures at {VIEWPORT['width']} px, "
        f"{search_results} search results for {SEARCH!r}"
    )
    if problems:
        sys.exit("\n".join(problems))


if __name__ == "__main__":
    main()
