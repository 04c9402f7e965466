"""Read the built documentation as a reader does: every page in headless Chromium at 1400 x 900.

A page fails when

- it scrolls sideways, or something in its article is cut off at the right or needs a scroll bar
  of its own (a wide table, code block, equation or figure);
- a table has no header, or a header with no text in it;
- a figure is shown at less than 60 % of its pixel width without a link to the full-size image;
- its math is not rendered (MathJax must come with the site: nothing is fetched from the network);
- it loads anything from the network at all.

Usage, after ``make -C docs html``::

    python docs/check_pages.py            # or: python docs/check_pages.py docs/_build/html

It needs Debian's ``chromium`` and ``chromium-driver`` (``apt-get install chromium chromium-driver``)
and ``selenium``; it prints one line per problem and exits with status 1 if there is any.
"""

import argparse
import pathlib
import shutil
import sys
import tempfile

WIDTH, HEIGHT = 1400, 900
SKIPPED = {"genindex.html", "search.html", "py-modindex.html"}
FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    f"--window-size={WIDTH},{HEIGHT}",
]

# Runs in the page once MathJax has typeset it; returns one string per problem.
CHECK = """
const problems = [];
const root = document.documentElement;
if (root.scrollWidth > root.clientWidth + 1) {
  problems.push(`the page is ${root.scrollWidth} px wide in a ${root.clientWidth} px window`);
}
const article = document.querySelector('article.bd-article') || document.body;
const right = article.getBoundingClientRect().right;
const label = (el) => {
  const text = (el.textContent || el.getAttribute('src') || '').trim().replace(/\\s+/g, ' ');
  return `<${el.tagName.toLowerCase()}${el.className ? ' class="' + el.className + '"' : ''}> "${text.slice(0, 60)}"`;
};
const reported = [];
for (const el of article.querySelectorAll('*')) {
  // MathJax's copy of each formula for screen readers is clipped to nothing on purpose.
  if (el.closest('mjx-assistive-mml') || reported.some((outer) => outer.contains(el))) continue;
  const box = el.getBoundingClientRect();
  if (box.width === 0) continue;
  const overflowX = getComputedStyle(el).overflowX;
  if (el.scrollWidth > el.clientWidth + 1 && overflowX !== 'visible') {
    problems.push(`${label(el)} is ${el.scrollWidth} px wide in a ${el.clientWidth} px box (overflow-x: ${overflowX})`);
    reported.push(el);
  } else if (box.right > right + 1) {
    problems.push(`${label(el)} ends ${Math.round(box.right - right)} px right of the article`);
    reported.push(el);
  }
}
for (const table of article.querySelectorAll('table')) {
  const head = table.querySelector('thead');
  if (table.classList.contains('autosummary')) continue;  // a list of names and summaries
  if (!head) problems.push(`${label(table)} has no header row`);
  else if (![...head.querySelectorAll('th')].some((th) => th.textContent.trim())) {
    problems.push(`${label(table)} has an empty header row`);
  }
}
for (const img of article.querySelectorAll('img')) {
  if (!img.naturalWidth) { problems.push(`${label(img)} did not load`); continue; }
  if (img.closest('.sphx-glr-thumbcontainer')) continue;  // a thumbnail: its card opens the example
  const shown = img.getBoundingClientRect().width / img.naturalWidth;
  if (shown < 0.6 && !img.closest('a')) {
    problems.push(`${label(img)} is shown at ${Math.round(100 * shown)} % of its width with no link to full size`);
  }
}
for (const math of article.querySelectorAll('.math')) {
  if (!math.querySelector('mjx-container')) problems.push(`math not rendered: ${label(math)}`);
}
for (const entry of performance.getEntriesByType('resource')) {
  if (!entry.name.startsWith('file:')) problems.push(`loads ${entry.name} from the network`);
}
return problems;
"""

# MathJax typesets after the page has loaded: wait for it where the page has math.
WAIT_FOR_MATH = """
const done = arguments[arguments.length - 1];
if (!document.querySelector('.math')) { done(null); }
else if (!window.MathJax || !MathJax.startup) { done('math on the page but MathJax is not loaded'); }
else { MathJax.startup.promise.then(() => done(null), (error) => done('MathJax failed: ' + error)); }
"""


def pages(html_dir):
    """Every page a reader can open, skipping the search page and the indices."""
    for path in sorted(html_dir.rglob("*.html")):
        parts = path.relative_to(html_dir).parts
        if path.name not in SKIPPED and not any(part.startswith("_") for part in parts):
            yield path


def browser(profile):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    for program in ("chromium", "chromedriver"):
        if shutil.which(program) is None:
            sys.exit(f"{program} not found: apt-get install chromium chromium-driver")
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium")
    for flag in [*FLAGS, f"--user-data-dir={profile}"]:
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service(executable_path=shutil.which("chromedriver")))
    # The viewport itself is 1400 x 900, whatever the headless window adds around it.
    metrics = {"width": WIDTH, "height": HEIGHT, "deviceScaleFactor": 1, "mobile": False}
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", metrics)
    driver.set_script_timeout(30)
    return driver


def check(html_dir):
    """Problems of every page of ``html_dir``, as ``(page, problem)`` pairs."""
    html_dir = html_dir.resolve()
    found = []
    with tempfile.TemporaryDirectory() as profile:
        driver = browser(profile)
        try:
            for path in pages(html_dir):
                driver.get(path.as_uri())
                failure = driver.execute_async_script(WAIT_FOR_MATH)
                problems = ([failure] if failure else []) + driver.execute_script(CHECK)
                found += [(path.relative_to(html_dir), problem) for problem in problems]
        finally:
            driver.quit()
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default = pathlib.Path(__file__).parent / "_build" / "html"
    parser.add_argument("html_dir", nargs="?", type=pathlib.Path, default=default)
    html_dir = parser.parse_args().html_dir
    if not (html_dir / "index.html").is_file():
        sys.exit(f"{html_dir} holds no built documentation: run make -C docs html first")
    found = check(html_dir)
    for page, problem in found:
        print(f"{page}: {problem}")
    n_pages = len(list(pages(html_dir)))
    print(f"{n_pages} pages read at {WIDTH} x {HEIGHT}: {len(found)} problem(s)")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
