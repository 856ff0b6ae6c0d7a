"""The documentation holds together: every relative link and image in README.md, CHANGELOG.md
and docs/*.md points at a file or folder of the repository (and at a heading that exists,
when it names one), every page and the generated tables they link are small enough for a
forge to render whole, and every sub-command of the real ``lambdasegment`` parser has its
section in docs/cli.md."""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from LambdaSegmentLib.cli import build_parser

REPO = Path(__file__).resolve().parents[1]
PAGES = sorted([REPO / "README.md", REPO / "CHANGELOG.md", *(REPO / "docs").glob("*.md")])
# [text](target) and ![alt](target), target up to the first space or ")"; <img src="...">.
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HTML_IMAGE = re.compile(r"<img[^>]*\bsrc=\"([^\"]+)\"")
EXTERNAL = ("http://", "https://", "mailto:")
# GitHub renders only the first 512 KiB of a Markdown file (isaacs/github#1610), so a page past
# it loses its last sections without a warning (the model card's Known limits did, at 833 KiB).
RENDER_LIMIT_BYTES = 512 * 1024


def prose(text: str) -> str:
    """The page without fenced code blocks (their brackets are not links)."""
    return re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)


def links(page: Path) -> list[str]:
    text = prose(page.read_text(encoding="utf-8"))
    text = re.sub(r"`[^`\n]*`", "", text)  # inline code is not a link either
    return LINK.findall(text) + HTML_IMAGE.findall(text)


def heading_anchors(page: Path) -> set[str]:
    """Anchors a forge (GitHub/GitLab) makes from a page's headings: lower case, punctuation
    dropped, spaces to hyphens; repeated headings get -1, -2, ..."""
    anchors: set[str] = set()
    for line in prose(page.read_text(encoding="utf-8")).splitlines():
        match = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not match:
            continue
        title = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", match.group(1))
        slug = re.sub(r"[^\w\- ]", "", title.replace("`", "").lower()).replace(" ", "-")
        anchor, number = slug, 0
        while anchor in anchors:
            number += 1
            anchor = f"{slug}-{number}"
        anchors.add(anchor)
    return anchors


def git_ignored(path: Path) -> bool:
    if shutil.which("git") is None or not (REPO / ".git").exists():
        return False
    return subprocess.run(["git", "check-ignore", "-q", str(path)], cwd=REPO).returncode == 0


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_and_image_resolves(page: Path) -> None:
    problems = []
    for target in links(page):
        if target.startswith(EXTERNAL):
            continue
        path_part, _, anchor = target.partition("#")
        resolved = (page.parent / path_part).resolve() if path_part else page
        if REPO not in resolved.parents and resolved != REPO:
            problems.append(f"{target}: outside the repository")
        elif not resolved.exists():
            problems.append(f"{target}: no such file")
        elif git_ignored(resolved):
            problems.append(f"{target}: ignored by git, so missing from a clone")
        elif anchor and resolved.suffix == ".md" and anchor not in heading_anchors(resolved):
            problems.append(f"{target}: no heading with anchor #{anchor} in {resolved.name}")
    assert not problems, f"{page.relative_to(REPO)}: " + "; ".join(problems)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_page_and_linked_markdown_renders_whole(page: Path) -> None:
    targets = {target.partition("#")[0] for target in links(page) if not target.startswith(EXTERNAL)}
    linked = {(page.parent / target).resolve() for target in targets if target.endswith(".md")}
    too_big = {path for path in {page, *linked} if path.is_file() and path.stat().st_size >= RENDER_LIMIT_BYTES}
    assert not too_big, ", ".join(f"{path.relative_to(REPO)}: {path.stat().st_size} bytes" for path in sorted(too_big))


def test_pages_exist_and_the_readme_stays_short() -> None:
    for name in ("cli", "slicer", "inputs", "training", "performance", "architecture", "MODEL_CARD"):
        assert (REPO / "docs" / f"{name}.md").is_file()
    assert len((REPO / "README.md").read_text(encoding="utf-8")) <= 8000
    assert not (REPO / "notes").exists()


def test_every_subcommand_has_a_section_in_cli_md() -> None:
    parser = build_parser()
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    commands = sorted(subparsers.choices)
    assert {"segment", "segment-dir", "demo"} <= set(commands)
    headings = [line for line in prose((REPO / "docs" / "cli.md").read_text(encoding="utf-8")).splitlines()
                if line.startswith("#")]
    missing = [c for c in commands if not any(re.search(rf"`lambdasegment {re.escape(c)}`", h) for h in headings)]
    assert not missing, f"docs/cli.md has no section for: {', '.join(missing)}"


def test_link_checker_catches_a_broken_link_and_anchor(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# A `code` title: here\n[ok](#a-code-title-here) [bad](#nowhere) ![img](missing.png)\n", encoding="utf-8")
    assert heading_anchors(page) == {"a-code-title-here"}
    assert links(page) == ["#a-code-title-here", "#nowhere", "missing.png"]
