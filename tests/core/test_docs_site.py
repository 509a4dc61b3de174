"""The documentation site (mkdocs.yml): built strictly as CI builds it, failing on a planted broken
link and a planted unknown command, and looked at in a real headless Chromium (navigation, search).

The site is built once per module (about 20 s: every sub-command's parser is filled for the command
reference, and the API pages read the sources). The planted build runs on a copy of mkdocs.yml and
docs/ beside links to the real package folders, so the tree itself is never edited.
"""

from __future__ import annotations

import http.server
import os
import shutil
import subprocess
import sys
import threading
from functools import partial
from pathlib import Path

import pytest

from conceptforge.commands.reference import check_command, filled_parser, reference_markdown, unknown_commands
from tests.browser import needs_chromium

ROOT = Path(__file__).resolve().parents[2]
PACKAGE_FOLDERS = ("conceptforge", "generators", "filters", "cards", "loaders")


def build(root: Path, site: Path) -> subprocess.CompletedProcess[str]:
    """``mkdocs build --strict`` of the site whose mkdocs.yml is in ``root`` (what `make docs` runs)."""
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(root / "mkdocs.yml"), "-d", str(site)],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site") / "site"
    result = build(ROOT, out)
    assert result.returncode == 0, result.stdout + result.stderr
    return out


def test_site_builds_strictly_with_generated_pages(site):
    # the command reference comes from the parsers: a sub-command and one of its flags are in it
    commands = (site / "commands" / "index.html").read_text()
    assert "conceptforge leaderboard" in commands and "--bootstrap-resamples" in commands
    assert "conceptforge generate binding" in commands and "--min-pixels" in commands
    # the API page of a stage config lists its fields, read from the code
    stages = (site / "api" / "stages" / "index.html").read_text()
    for field in ("images_per_pair", "save_guidance", "reference_selection"):  # SubStageConfig's fields
        assert field in stages
    errors = (site / "api" / "errors" / "index.html").read_text()
    assert "InvalidArgumentError" in errors and "DataNotFoundError" in errors
    # a nav entry pointing at a section of binding.md became the page's URL plus the anchor
    home = (site / "index.html").read_text()
    assert 'href="binding/#your-own-binding-vocabulary"' in home
    # evaluation is split into pages a reader can finish, each in the Evaluate section of the nav
    for page in ("evaluation", "evaluation-served", "evaluation-scale", "evaluation-by-answer", "evaluation-exports"):
        assert f'href="{page}/"' in home, page


def site_copy(tmp_path: Path) -> Path:
    """mkdocs.yml, pyproject.toml and docs/ copied, the package folders linked: a tree to plant faults in."""
    copy = tmp_path / "repo"
    copy.mkdir()
    shutil.copy(ROOT / "mkdocs.yml", copy)
    shutil.copy(ROOT / "pyproject.toml", copy)
    shutil.copytree(ROOT / "docs", copy / "docs", ignore=shutil.ignore_patterns("__pycache__"))
    for name in PACKAGE_FOLDERS:
        (copy / name).symlink_to(ROOT / name)
    return copy


@pytest.mark.heavy
def test_planted_broken_link_unknown_command_and_nav_anchor_fail_the_build(tmp_path):
    copy = site_copy(tmp_path)
    install = copy / "docs" / "install.md"
    install.write_text(
        install.read_text()
        + "\nSee [the missing page](no-such-page.md).\n\n```bash\nconceptforge evaluate --no-such-flag 3\n```\n"
    )
    # a nav entry into a section that does not exist (our hook checks it once the page has headings)
    config = copy / "mkdocs.yml"
    config.write_text(config.read_text().replace("#your-own-binding-vocabulary", "#no-such-section"))
    result = build(copy, tmp_path / "site")
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert "no-such-page.md" in output  # mkdocs' own link check
    assert "install.md" in output and "conceptforge evaluate has no option --no-such-flag" in output  # ours
    assert "points at #no-such-section, which is no heading of binding.md" in output  # ours


@pytest.mark.heavy
def test_planted_missing_api_object_fails_the_build(tmp_path):
    copy = site_copy(tmp_path)
    errors = copy / "docs" / "api" / "errors.md"
    errors.write_text(errors.read_text() + "\n::: conceptforge.errors.NoSuchError\n")
    result = build(copy, tmp_path / "site")
    assert result.returncode != 0
    assert "conceptforge.errors.NoSuchError could not be found" in result.stdout + result.stderr


def test_command_check_follows_sub_commands_and_flag_values():
    parser = filled_parser()
    # by hand: `--model` takes a value, so `Qwen/X` is not a sub-command; `--tasks list` likewise
    assert check_command(parser, ["evaluate", "--model", "Qwen/X", "--tasks", "list"]) is None
    assert check_command(parser, ["generate", "binding", "--preset", "demo", "--out", "o"]) is None
    assert check_command(parser, ["generat", "sub"]) == "conceptforge has no sub-command 'generat'"
    assert check_command(parser, ["generate", "binding", "--presets", "demo"]) == (
        "conceptforge generate binding has no option --presets"
    )
    # a flag of another sub-command is not accepted here
    assert check_command(parser, ["leaderboard", "r.json", "--cub-dir", "x"]) == (
        "conceptforge leaderboard has no option --cub-dir"
    )
    markdown = "text conceptforge --nope\n\n```python\nconceptforge --nope\n```\n\n```bash\nA=1 conceptforge status --nope \\\n  x\n```\n"
    found = unknown_commands(markdown, parser)  # prose and python blocks are not commands; continuations join
    assert [(f.line, f.problem) for f in found] == [
        (8, "conceptforge status has no option --nope")
    ]  # line 8: the bash block's first line


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:  # the page's requests are not the test's output
        pass


@pytest.fixture(scope="module")
def served_site(site):
    """The built site over HTTP: Material's search runs in a web worker, which file:// pages cannot start."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), partial(QuietHandler, directory=str(site)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def first_search_result(page, query: str) -> list[str]:
    """The links of the first page Material's search lists for ``query``: the page, then its
    matching sections, best first."""
    page.click("input.md-search__input")  # the header's search box (a wide window shows it)
    # a query typed before the search worker has built its index is never answered: wait until the
    # results header no longer says "Initializing search" (slow on a loaded machine)
    page.wait_for_function(
        "() => { const m = document.querySelector('.md-search-result__meta');"
        " return m !== null && m.textContent.trim() !== '' && !/initializ/i.test(m.textContent); }",
        timeout=180_000,
    )
    page.keyboard.type(query)
    first = page.locator(".md-search-result__list > li.md-search-result__item").first
    first.wait_for(state="visible", timeout=180_000)
    # read the list in one call (the search may re-render it between reads of single links), until
    # two reads agree: the list the page settled on
    read = "el => [...el.querySelectorAll('a.md-search-result__link')].map(a => a.getAttribute('href'))"
    links = first.evaluate(read)
    for _ in range(50):
        page.wait_for_timeout(100)
        again = page.locator(".md-search-result__list > li.md-search-result__item").first.evaluate(read)
        if again == links:
            break
        links = again
    return links


def title(page) -> str:
    """The page's h1 without the permalink sign the toc extension appends."""
    return page.locator("h1").first.inner_text().rstrip("¶").strip()


@needs_chromium
def test_navigation_and_search_in_chromium(browser, served_site):
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    try:
        page.goto(served_site + "/")
        assert title(page) == "conceptforge"
        page.locator(".md-nav--primary a.md-nav__link", has_text="Install").filter(visible=True).first.click()
        page.wait_for_url("**/install/")
        assert title(page) == "Installing conceptforge"

        # from another page, the Evaluate section's page on served models
        link = page.locator(".md-nav--primary a.md-nav__link", has_text="Served models").filter(visible=True).first
        link.click()
        page.wait_for_url("**/evaluation-served/")
        assert title(page).startswith("Served models: vLLM, SGLang, hosted APIs")
        # and the nav entry that points at a section of a page lands on that section
        link = page.locator(".md-nav--primary a.md-nav__link", has_text="Your own binding vocabulary")
        link.filter(visible=True).first.click()
        page.wait_for_url("**/binding/#your-own-binding-vocabulary")
        heading = page.locator("#your-own-binding-vocabulary")
        assert heading.inner_text().rstrip("¶").startswith("Your own binding vocabulary")

        # each question is answered by one page, first, with the section that answers it first
        page.goto(served_site + "/")
        links = first_search_result(page, "served model")
        assert links[0].split("?")[0].endswith("/evaluation-served/")  # the page itself (?h= highlights the words)
        assert all("/evaluation-served/" in link for link in links)
        page.goto(served_site + "/")
        links = first_search_result(page, "binding vocabulary")
        assert all("/binding/" in link for link in links)
        assert links[1].endswith("#your-own-binding-vocabulary")
    finally:
        page.close()


def test_command_reference_rows_come_from_the_parser():
    md = reference_markdown(filled_parser())
    section = md.split("## `conceptforge leaderboard`", 1)[1].split("\n## ", 1)[0]
    rows = {
        line.split(" | ")[0].strip("| ").split("`")[1]: line for line in section.splitlines() if line.startswith("| `-")
    }
    # leaderboard.py by hand: --bootstrap-seed defaults to 0 (shown although falsy), --hub has none
    assert rows["--bootstrap-seed"].endswith("| `0` |")
    assert rows["--hub"].endswith("|  |") and "`ORG/NAME`" in rows["--hub"]
    assert "&lt;stem&gt;.samples/" in rows["--html"]  # not taken for an HTML tag


def test_readme_and_benchmarks_commands_are_known():
    """The two Markdown files outside docs/ (not in the site) are checked the same way."""
    parser = filled_parser()
    for name in ("README.md", "BENCHMARKS.md"):
        assert unknown_commands((ROOT / name).read_text(), parser) == [], name
