"""docs/design.md is the design the code cites (issue 54.3): every ``design.md §N`` names one of
its sections, every link into it names one of its anchors, and no citation of the former
specification, which the repository never held, is left."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DESIGN = ROOT / "docs" / "design.md"
#: the old citations, spelled in two parts so that this file does not cite them
OLD = ("SPEC" + " §", "SPEC" + ".md")
#: where code, tests, recipes and docs live
PLACES = ("src", "tests", "docs", "scripts", "benchmarks", "configs")
SUFFIXES = {".py", ".md", ".yaml", ".yml", ".toml", ".txt", ".sh", ".cfg", ".ini"}
#: ``design.md §6``, ``design.md §10.3-4``, ``design.md §3-§5``, ``design.md §7, §12``
CITATION = re.compile(r"design\.md §(\d+(?:\.\d+)?(?:(?:-§?|, §)\d+(?:\.\d+)?)*)")
#: a markdown link into it: design.md#6-generator, docs/design.md#6-generator, in brackets
LINK = re.compile(r"\((?:[./\w-]*/)?design\.md#([^)\s]+)\)")
HEADING = re.compile(r"^(#{2,3}) (\d+(?:\.\d+)?)\.? (.+)$")


def _files() -> Iterator[Path]:
    for place in PLACES:
        for path in sorted((ROOT / place).rglob("*")):
            if path.is_file() and path.suffix in SUFFIXES and "__pycache__" not in path.parts:
                yield path
    yield ROOT / "README.md"


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _sections() -> tuple[set[str], set[str]]:
    """The section numbers (``6``, ``10.2``) and the anchors of docs/design.md."""
    numbers, anchors = set(), set()
    for line in DESIGN.read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):
            anchors.add(_slug(line.lstrip("#")))
        match = HEADING.match(line)
        if match:
            numbers.add(match.group(2))
    return numbers, anchors


def _cited(text: str) -> set[str]:
    """The section numbers a citation names: ``10.3-4`` → 10.3 and 10.4, ``3-§5`` → 3 and 5."""
    out = set()
    for part in re.split(r", §", text):
        first, _, last = part.partition("-")
        last = last.lstrip("§")
        out.add(first)
        if last:
            major = first.split(".")[0]
            out.add(f"{major}.{last}" if "." in first and "." not in last else last)
    return out


def test_sections_and_anchors_parse() -> None:
    numbers, anchors = _sections()
    assert {str(n) for n in range(1, 15)} <= numbers
    assert {"10.1", "10.2", "10.3", "10.4", "10.5", "10.6"} <= numbers
    assert {"3-z-statistics", "13-shortcut-splits-and-comparisons", "102-infiller"} <= anchors
    assert _cited("10.3-4") == {"10.3", "10.4"} and _cited("3-§5") == {"3", "5"}
    assert _cited("7, §12") == {"7", "12"}


def test_no_file_cites_the_old_specification() -> None:
    hits = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in _files()
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if any(old in line for old in OLD)
    ]
    assert hits == []


def test_every_design_citation_names_a_section() -> None:
    numbers, anchors = _sections()
    missing = []
    for path in _files():
        text = path.read_text(encoding="utf-8")
        for match in CITATION.finditer(text):
            missing += [(str(path.relative_to(ROOT)), s) for s in _cited(match[1]) - numbers]
        for match in LINK.finditer(text):
            if match[1] not in anchors:
                missing.append((str(path.relative_to(ROOT)), "#" + match[1]))
    inner = re.findall(r"\]\(#([^)\s]+)\)", DESIGN.read_text(encoding="utf-8"))
    missing += [("docs/design.md", "#" + a) for a in inner if a not in anchors]
    assert missing == []
    # the citations are there to check: code, tests and docs use them
    cited = {
        s
        for path in _files()
        for m in CITATION.finditer(path.read_text(encoding="utf-8"))
        for s in _cited(m[1])
    }
    assert {"2", "3", "6", "10.2", "13", "14"} <= cited
