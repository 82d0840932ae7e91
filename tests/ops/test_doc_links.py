"""Every relative link and every repository path named in README.md and docs/*.md exists, so a
reader never follows a path that moved."""
from __future__ import annotations

import glob
import os
import re

import pytest

from tests.conftest import REPO

PAGES = ["README.md", *sorted(os.path.relpath(p, REPO)
                              for p in glob.glob(os.path.join(REPO, "docs", "*.md")))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
# A path of the repository named in prose or code: from a top-level folder, ending in a name.
PATH = re.compile(r"(?<![\w/.:-])((?:docs|jobs|infra|tests|dags|lab)/[\w./*-]*[\w*/])")


def links(page: str) -> list[str]:
    text = open(os.path.join(REPO, page)).read()
    return [t for t in LINK.findall(text) if not re.match(r"[a-z]+:|#", t)]


def repo_paths(page: str) -> list[str]:
    text = re.sub(r"https?://\S+", "", open(os.path.join(REPO, page)).read())
    return sorted({m.rstrip(".") for m in PATH.findall(text)})


def exists(path: str) -> bool:
    return bool(glob.glob(path)) if "*" in path else os.path.exists(path)


@pytest.mark.parametrize("page", PAGES)
def test_every_relative_link_resolves(page):
    base = os.path.dirname(os.path.join(REPO, page))
    missing = [t for t in links(page) if not exists(os.path.join(base, t.split("#")[0]))]
    assert not missing, f"{page} links to missing {missing}"


@pytest.mark.parametrize("page", PAGES)
def test_every_repository_path_named_exists(page):
    missing = [p for p in repo_paths(page) if not exists(os.path.join(REPO, p))]
    assert not missing, f"{page} names missing {missing}"


def test_the_checks_find_links_and_paths():
    assert "config.md" in links("docs/getting-started.md")
    assert "jobs/fleet/fingerprint.py" in repo_paths("README.md")


@pytest.mark.parametrize("page", PAGES)
def test_user_pages_carry_no_dated_history(page):
    """Dated runs and what changed when live in lab/notes/, not in a user's page."""
    text = open(os.path.join(REPO, page)).read()
    history = re.compile(r"\bissue \d+|\b(until|before|since|at) [0-9a-f]{7}\b"
                         r"|\b20\d\d-\d\d-\d\d[ ,]+\d\d:\d\d", re.I)
    assert not [m.group(0) for m in history.finditer(text)], page
