"""mkdocs hooks: the repository's Markdown pages outside docs/ join the site.

README.md becomes the site's home page, ARCHITECTURE.md and tests/flink/README.md pages of it,
so that each page has one source, which reads right on GitHub too. Relative links to `.md` files
are written as GitHub resolves them, from the file's place in the repository; here they are
rewritten to the site's pages. A link to any other file outside docs/ is left as it is, and
`mkdocs build --strict` fails on it.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

# Repository path -> page of the site.
PAGES = {
    "README.md": "index.md",
    "ARCHITECTURE.md": "architecture.md",
    "tests/flink/README.md": "flink-tests.md",
}
_REPO_PATH = {page: path for path, page in PAGES.items()}

# A Markdown link's target: ](path.md) or ](path.md#anchor).
_LINK = re.compile(r"\]\(([^)\s#:]+\.md)(#[^)\s]*)?\)")


def github_slug(value: str, separator: str = "-") -> str:
    """The anchor GitHub gives a heading of this text: lower case, every character but letters,
    digits, `_`, `-` and spaces dropped, each space a separator."""
    return re.sub(r"[^\w\- ]", "", value.strip().lower()).replace(" ", separator)


def on_config(config: Any) -> Any:
    config["mdx_configs"].setdefault("toc", {})["slugify"] = github_slug
    return config


def on_files(files: Files, config: Any) -> Files:
    root = Path(config["config_file_path"]).parent
    for path, page in PAGES.items():
        files.append(File.generated(config, page, abs_src_path=str(root / path)))
    return files


def site_page(repo_path: str) -> str | None:
    """The site's page of a repository file, or None when the site has none."""
    if repo_path in PAGES:
        return PAGES[repo_path]
    if repo_path.startswith("docs/"):
        return repo_path.removeprefix("docs/")
    return None


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    src = page.file.src_uri
    here = _REPO_PATH.get(src, "docs/" + src)

    def rewrite(match: re.Match[str]) -> str:
        target = posixpath.normpath(posixpath.join(posixpath.dirname(here), match[1]))
        page_path = site_page(target)
        if page_path is None:
            return match[0]
        link = posixpath.relpath(page_path, posixpath.dirname(src) or ".")
        return f"]({link}{match[2] or ''})"

    return _LINK.sub(rewrite, markdown)
