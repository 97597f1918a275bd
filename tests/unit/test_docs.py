"""The docs' links: every relative Markdown link in README.md, docs/, config/README.md and
BENCHMARKS.md points at a file that exists and, with `#anchor`, at a heading of that file (as
GitHub makes anchors of headings); docs/index.md links every page; the README stays short and
leads to the guide."""

import re
from collections import Counter

import pytest
from helpers import ROOT

DOCS = ROOT / "docs"
PAGES = [ROOT / "README.md", *sorted(DOCS.glob("*.md")), ROOT / "config/README.md"]
PAGES += [ROOT / "BENCHMARKS.md"]
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def links(page):
    """The targets of the page's Markdown links, code blocks left out."""
    return LINK.findall(FENCE.sub("", page.read_text()))


def anchors(page):
    """GitHub's anchors of the page's headings: lowercase, punctuation but `-` and `_` dropped,
    spaces to `-`; a repeated one gets -1, -2, ..."""
    seen, found = Counter(), set()
    for heading in re.findall(r"^#{1,6} +(.+?) *#* *$", FENCE.sub("", page.read_text()), re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        found.add(slug if not seen[slug] else f"{slug}-{seen[slug]}")
        seen[slug] += 1
    return found


def broken(page):
    """The page's relative links whose file or anchor does not exist."""
    for link in links(page):
        if re.match(r"[a-z]+:", link):  # https:, mailto:
            continue
        path, _, anchor = link.partition("#")
        target = (page.parent / path).resolve() if path else page
        if not target.exists() or (anchor and anchor not in anchors(target)):
            yield link


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_every_link_and_anchor_exists(page):
    assert list(broken(page)) == []


def test_the_index_links_every_page_and_the_readme_links_the_index():
    listed = {(DOCS / link).resolve() for link in links(DOCS / "index.md")}
    assert set(DOCS.glob("*.md")) - {DOCS / "index.md"} <= listed
    assert "docs/index.md" in links(ROOT / "README.md")


def test_the_readme_is_short():
    assert len((ROOT / "README.md").read_text().splitlines()) <= 260
