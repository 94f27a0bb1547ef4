"""The README and the documentation under docs/: the README stays a front page, every relative
link and anchor resolves (as GitHub resolves them), each command's page names each of its
options, the library page every public name, and the site builds with `mkdocs build --strict`
(what `make docs` runs), offline."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import typer.main

import statectl
from statectl.cli.main import app

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
# Every Markdown page of the site: docs/ and the three pages docs/hooks.py adds.
PAGES = sorted(
    [
        *DOCS.rglob("*.md"),
        ROOT / "README.md",
        ROOT / "ARCHITECTURE.md",
        ROOT / "tests/flink/README.md",
    ]
)
README_MAX_LINES = 400

_FENCE = re.compile(r"^(```|~~~)")
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def _prose(path: Path) -> list[tuple[int, str]]:
    """The file's numbered lines outside fenced code blocks and with inline code removed."""
    lines, fenced = [], False
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if _FENCE.match(line.lstrip()):
            fenced = not fenced
            continue
        if not fenced:
            lines.append((number, re.sub(r"`[^`]*`", "``", line)))
    return lines


def _load_hooks() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_hooks", DOCS / "hooks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


hooks = _load_hooks()  # the site's link rewriting and anchors (mkdocs.yml `hooks:`)


def github_slug(heading: str) -> str:
    """The anchor of a Markdown heading: its text (a link's text, not its target, and the
    text of inline code), slugged as GitHub and the site (`hooks.github_slug`) slug it."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "")
    return str(hooks.github_slug(text))


def anchors(path: Path) -> set[str]:
    """The anchors of a Markdown file's headings (duplicates numbered as GitHub numbers them)."""
    seen: dict[str, int] = {}
    result = set()
    for _, line in _prose_with_code(path):
        match = _HEADING.match(line)
        if match is None:
            continue
        slug = github_slug(match[2])
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        result.add(slug if count == 0 else f"{slug}-{count}")
    return result


def _prose_with_code(path: Path) -> list[tuple[int, str]]:
    """Lines outside fenced code blocks, inline code kept (headings' anchors include it)."""
    lines, fenced = [], False
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if _FENCE.match(line.lstrip()):
            fenced = not fenced
        elif not fenced:
            lines.append((number, line))
    return lines


def relative_links(path: Path) -> list[tuple[int, str]]:
    """(line, target) of every relative link of a Markdown file (not in code)."""
    found = []
    for number, line in _prose_with_code(path):
        for target in _LINK.findall(re.sub(r"`[^`]*`", "``", line)):
            if not re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:, …
                found.append((number, target))
    return found


def test_readme_is_a_front_page() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, (
        f"README.md has {len(lines)} lines; at most {README_MAX_LINES}: move the reference to docs/"
    )


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page: Path) -> None:
    broken = []
    for number, target in relative_links(page):
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(f"{page.name}:{number}: {target}: no such file")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            broken.append(f"{page.name}:{number}: {target}: no heading with that anchor")
    assert not broken, "\n".join(broken)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_lists_start_after_a_blank_line(page: Path) -> None:
    """GitHub starts a list right after a paragraph line; Python-Markdown (the site) only after
    a blank line, and would render the list as part of the paragraph."""
    bad = []
    previous = ""
    for number, line in _prose(page):
        starts_list = re.match(r"(- |\* |\d+\. )", line) is not None
        in_list = re.match(r"(- |\* |\d+\. |\s)", previous) is not None
        if starts_list and previous.strip() and not in_list and not previous.startswith("|"):
            bad.append(f"{page.name}:{number}: {line[:60]}")
        previous = line
    assert not bad, "a list needs a blank line before it:\n" + "\n".join(bad)


def test_every_page_is_linked_from_the_nav() -> None:
    """mkdocs.yml's nav names every page under docs/ (strict mode fails on one left out, but
    only when the site is built: this says which)."""
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    missing = [
        str(page.relative_to(DOCS))
        for page in DOCS.rglob("*.md")
        if f": {page.relative_to(DOCS).as_posix()}" not in nav
    ]
    assert not missing, f"pages missing from the nav of mkdocs.yml: {missing}"


def _commands() -> dict[str, Any]:
    """The commands as click builds them (typer's own vendored click)."""
    return dict(typer.main.get_command(app).commands)  # type: ignore[attr-defined]


def test_each_command_has_a_page_naming_its_options() -> None:
    missing = []
    for name, command in _commands().items():
        page = DOCS / "commands" / f"{name}.md"
        if not page.exists():
            missing.append(f"{name}: no page {page.relative_to(ROOT)}")
            continue
        text = page.read_text(encoding="utf-8")
        for param in command.params:
            for option in param.opts:
                named = re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", text)
                if option.startswith("--") and option != "--help" and not named:
                    missing.append(f"{name}: {option} not on {page.relative_to(ROOT)}")
    assert not missing, "\n".join(missing)


def test_library_page_names_every_public_name() -> None:
    text = (DOCS / "library.md").read_text(encoding="utf-8")
    missing = [name for name in statectl.__all__ if name != "__version__" and name not in text]
    assert not missing, f"docs/library.md does not mention {missing}"


def test_site_builds_strict_offline(tmp_path: Path) -> None:
    """`make docs`: broken links or anchors, pages left out of the nav and any other warning
    fail the build (`strict` in mkdocs.yml, and --strict here)."""
    site = tmp_path / "site"
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert (site / "index.html").exists()
    assert (site / "commands" / "rescale.html").exists()
    home = (site / "index.html").read_text(encoding="utf-8")
    # README's links into docs/ point at the site's pages
    assert 'href="commands/rescale.html#head-start"' in home
    assert "docs/commands" not in home
