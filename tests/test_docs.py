"""README is the front door: short, its two commands, a link to every page of docs/; README and
docs link only to files inside the repository and cite no issue number."""

from __future__ import annotations

import re
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parent.parent
README = CHECKOUT / "README.md"
PAGES = sorted((CHECKOUT / "docs").glob("*.md"))
INSTALL = "pip install -e . && kubeplace plan fixtures/demo"
TEST = "pip install -e '.[test]' && python -m pytest"
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def test_readme_is_short_and_holds_its_two_commands() -> None:
    text = README.read_text()
    assert len(text.splitlines()) <= 200
    assert f"\n{INSTALL}\n" in text and f"\n{TEST}\n" in text
    assert f"\n{TEST}\n" in (CHECKOUT / ".ci" / "run").read_text()  # CI runs it verbatim


def test_every_docs_page_is_linked_from_the_readme() -> None:
    linked = {(README.parent / target).resolve() for target in LINK.findall(README.read_text())}
    assert PAGES and [p for p in PAGES if p.resolve() not in linked] == []


def test_links_stay_inside_the_repository_and_resolve() -> None:
    broken = []
    for page in (README, *PAGES):
        for target in LINK.findall(page.read_text()):
            if "://" in target:
                continue
            path = (page.parent / target).resolve()
            if not path.is_relative_to(CHECKOUT) or not path.exists():
                broken.append(f"{page.relative_to(CHECKOUT)}: {target}")
    assert broken == []


def test_no_issue_number_nor_path_outside_the_repository() -> None:
    found = [f"{page.relative_to(CHECKOUT)}: {m.group(0)}" for page in (README, *PAGES)
             for m in re.finditer(r"\bissues? \d+|\.\./shared\b", page.read_text(), re.IGNORECASE)]
    assert found == []


def test_code_comments_cite_no_issue_number_nor_internal_design_name() -> None:
    """Comments and docstrings point at what the repository holds: an issue number or the section
    of a design note that is not in it tells a reader nothing."""
    sources = [path for folder in ("kube", "models", "solver", "plan", "serve", "rebalance", "report", "simulate",
                                   "cli", "bench", "tests") for path in (CHECKOUT / folder).rglob("*.py")]
    found = [f"{path.relative_to(CHECKOUT)}: {m.group(0)}" for path in sources
             for m in re.finditer(r"\bdesign-\d+|\b[Ii]ssues? \d+\b", path.read_text())]
    assert found == []
