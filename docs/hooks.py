"""mkdocs hooks of the conceptforge site (``mkdocs.yml``): the command reference and the command check.

Why a hook of our own: the command reference must come from the argparse parsers (never a copy),
and a page showing a ``conceptforge`` command or flag the parsers do not know must fail the strict
build, as a broken link does. Both read the parsers through :mod:`conceptforge.commands.reference`.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

from mkdocs.plugins import event_priority
from mkdocs.structure.files import File, Files

logger = logging.getLogger("mkdocs.plugins.conceptforge")

COMMANDS_PAGE = "commands.md"
#: Where :func:`on_config` lays out the package as it is installed, for the API pages (mkdocs.yml's ``paths``).
API_SOURCE = Path("build/api-src")


@event_priority(100)  # before mkdocstrings' on_config, which resolves the handler's paths
def on_config(config):
    """Lay out ``conceptforge`` as installed (``conceptforge.loaders`` is ``loaders/``, …) with links.

    Why: pyproject.toml maps the design card's top-level folders into the one namespace
    (``package-dir``); an installed wheel has that layout, but griffe, which reads the source for
    the API pages, cannot follow the mapping of an editable install. The links make the same tree
    from the checkout, read from pyproject.toml so it cannot disagree with the install."""
    import tomllib

    root = Path(config.config_file_path).parent
    package_dir = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    target = root / API_SOURCE / "conceptforge"
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    for entry in (root / package_dir["conceptforge"]).iterdir():
        if entry.name == "__init__.py":  # a copy: griffe looks for submodules beside the resolved file
            shutil.copyfile(entry, target / entry.name)
        elif entry.name != "__pycache__":
            (target / entry.name).symlink_to(entry.resolve())
    for name, folder in package_dir.items():
        if name.count(".") == 1:  # conceptforge.generators = generators/
            (target / name.split(".", 1)[1]).symlink_to((root / folder).resolve())
    return config


def on_files(files: Files, config) -> Files:
    """Add the generated command reference page (it has no file on disk, so it cannot drift)."""
    from conceptforge.commands.reference import reference_markdown

    files.append(File.generated(config, COMMANDS_PAGE, content=reference_markdown()))
    return files


def on_page_markdown(markdown: str, page, config, files) -> str:
    """Warn (an error under ``--strict``) for every documented command the parsers refuse."""
    from conceptforge.commands.reference import unknown_commands

    for found in unknown_commands(markdown):
        logger.warning(f"{page.file.src_uri}:{found.line}: {found.problem}: `{found.command}`")
    return markdown


def on_nav(nav, config, files):
    """Resolve nav entries that point at a section of a page (``binding.md#the-vocabulary…``).

    mkdocs takes them for external links and would keep the ``.md`` in the URL; here each becomes
    the page's URL plus the anchor, and a missing page is an error. The anchor itself is checked
    in :func:`on_page_context`, once the page's headings exist."""
    for link in _links(nav.items):
        path, _, anchor = link.url.partition("#")
        if "://" in path or not path.endswith(".md"):
            continue
        target = files.get_file_from_path(path)
        if target is None:
            logger.warning(f"nav entry '{link.title}' points at {path}, which is not a page")
            continue
        _SECTION_LINKS.append((link.title, target.src_uri, anchor))
        link.url = target.url + (f"#{anchor}" if anchor else "")
    return nav


_SECTION_LINKS: list[tuple[str, str, str]] = []


def _links(items):
    from mkdocs.structure.nav import Link, Section

    for item in items:
        if isinstance(item, Section):
            yield from _links(item.children)
        elif isinstance(item, Link):
            yield item


def on_page_context(context, page, config, nav):
    """Check that every nav entry pointing into this page names one of its headings."""
    anchors = set(_anchors(page.toc))
    for title, src_uri, anchor in _SECTION_LINKS:
        if src_uri == page.file.src_uri and anchor and anchor not in anchors:
            logger.warning(f"nav entry '{title}' points at #{anchor}, which is no heading of {src_uri}")
    return context


def _anchors(toc):
    for item in toc:
        yield item.id
        yield from _anchors(item.children)
