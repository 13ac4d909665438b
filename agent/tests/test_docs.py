"""The repository's Markdown holds together: every relative link resolves to
a file of the repository and every #fragment to a heading of its target (as
GitHub makes heading anchors); BENCHMARKS.md opens with its table of current
figures, each row linked to the run it came from; and every file kept in
bench/results/ is quoted by a document or read by a test."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from conftest import REPO

RESULTS = REPO / "bench" / "results"


def tracked(*patterns: str) -> list[Path]:
    out = subprocess.run(["git", "ls-files", "-z", *patterns], cwd=REPO, capture_output=True, text=True, check=True)
    return [REPO / p for p in out.stdout.split("\0") if p and (REPO / p).exists()]


DOCS = tracked("*.md")
FENCE = re.compile(r"^(```|~~~).*?^\1[ \t]*$", re.M | re.S)
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def prose(text: str) -> str:
    """The text without its code blocks and inline code, where brackets are
    code, not links."""
    return re.sub(r"`[^`\n]*`", "", FENCE.sub("", text))


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, inline markup and
    punctuation dropped (hyphens and underscores kept), spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link keeps its text
    text = re.sub(r"[^\w\- ]", "", text.strip().lower())
    return text.replace(" ", "-")


def anchors(doc: Path) -> set[str]:
    out: set[str] = set()
    seen: dict[str, int] = {}
    for m in re.finditer(r"^#{1,6}[ \t]+(.+?)[ \t]*#*[ \t]*$", FENCE.sub("", doc.read_text()), re.M):
        s = slug(m.group(1))
        n = seen.get(s, 0)
        seen[s] = n + 1
        out.add(s if n == 0 else f"{s}-{n}")
    out |= set(re.findall(r'<a (?:name|id)="([^"]+)"', doc.read_text()))
    return out


def test_slug_is_githubs():
    assert slug("2026-12-01 13:50, H200: one Ingest, against the build before") == \
        "2026-12-01-1350-h200-one-ingest-against-the-build-before"
    assert slug("gputop run: no code change") == "gputop-run-no-code-change"
    assert slug("The TUI's `--help`") == "the-tuis---help"
    assert slug("Compared with nvidia-smi, nvtop and nvitop") == "compared-with-nvidia-smi-nvtop-and-nvitop"


def test_docs_found():
    names = {str(p.relative_to(REPO)) for p in DOCS}
    assert {"README.md", "ARCHITECTURE.md", "BENCHMARKS.md", "bench/README.md", "agent/README.md"} <= names


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(REPO)))
def test_links_resolve(doc: Path):
    bad = []
    for target in LINK.findall(prose(doc.read_text())):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
            continue
        path, _, fragment = target.partition("#")
        dest = (doc.parent / path).resolve() if path else doc
        if not dest.exists() or REPO.resolve() not in (dest, *dest.parents):
            bad.append(f"{target}: no such file")
        elif fragment and dest.suffix == ".md" and fragment not in anchors(dest):
            bad.append(f"{target}: no heading with that anchor in {dest.name}")
    assert bad == [], f"{doc.relative_to(REPO)} links to what is not there"


def current_rows() -> list[str]:
    text = (REPO / "BENCHMARKS.md").read_text()
    sections = re.split(r"^## ", text, flags=re.M)
    assert sections[1].startswith("Current figures\n"), "BENCHMARKS.md's first section is not its current figures"
    rows = [l for l in sections[1].splitlines() if l.startswith("| ") and not l.startswith("| ---")]
    assert rows[0].split(" | ")[-1].strip(" |") == "run", rows[0]
    return rows[1:]


def test_every_current_figure_names_its_run():
    rows = current_rows()
    assert len(rows) >= 20
    for row in rows:
        run = row.rstrip(" |").split(" | ")[-1]
        links = LINK.findall(run)
        assert links, f"no run linked: {row}"
        for target in links:
            assert target.startswith(("bench/results/", "#")), f"{target}: not a result file or a section: {row}"


def test_every_result_is_quoted_or_read():
    # a result file belongs to a figure some document gives, or to a test
    # that derives figures from it
    quoting = [p for p in [*DOCS, *tracked("*.py", "*.go", "*.sh")] if RESULTS not in p.parents]
    text = "\n".join(p.read_text(errors="replace") for p in quoting)
    kept = sorted(p.name for p in RESULTS.iterdir())
    assert len(kept) >= 20
    assert [n for n in kept if n not in text] == [], "files in bench/results/ that nothing quotes or reads"


def units(text: str) -> list[str]:
    """The text cut where a claim ends: a code block's lines one by one, the
    prose between them by paragraph."""
    out, at = [], 0
    for m in FENCE.finditer(text):
        out += text[at:m.start()].split("\n\n") + m.group(0).splitlines()
        at = m.end()
    return out + text[at:].split("\n\n")


@pytest.mark.parametrize("name", ["README.md", "agent/README.md",
                                  *sorted(str(p.relative_to(REPO)) for p in (REPO / "docs").glob("*.md"))])
def test_install_says_what_works_today(name: str):
    """Nothing is on PyPI yet, and PyPI's `gputop` is an unrelated project
    with the same command and import name: a doc may name `pip install
    gputop-profiler` (or uvx) from PyPI only as what is not yet there, and
    `pip install gputop` only beside the warning."""
    bad = []
    for unit in units((REPO / name).read_text()):
        flat = " ".join(unit.split())
        if re.search(r"pip install gputop(?![\w-])", flat) and "unrelated" not in flat:
            bad.append(f"`pip install gputop` without the warning that it is an unrelated project: {flat[:120]}")
        from_pypi = re.search(r"(pip install|uvx --from) gputop-profiler", flat) and "--find-links" not in flat
        if from_pypi and "not yet" not in flat:
            bad.append(f"installs gputop-profiler from PyPI, where no release is yet, without saying so: {flat[:120]}")
    assert bad == []


def test_release_workflow():
    """The README's future `uvx`/PyPI install is what the release workflow
    publishes: the wheels of scripts/build-wheels.sh, by trusted publishing."""
    readme = (REPO / "README.md").read_text()
    assert "uvx --from gputop-profiler gputop" in " ".join(readme.split())
    flow = (REPO / ".github/workflows/release.yml").read_text()
    for want in ["bash scripts/build-wheels.sh", "scripts/wheels/test_wheels.py", "id-token: write",
                 "pypa/gh-action-pypi-publish", "SHA256SUMS"]:
        assert want in flow, f"release.yml does not have {want!r}"
    assert "password" not in flow and "PYPI_TOKEN" not in flow.upper(), "trusted publishing takes no token"
