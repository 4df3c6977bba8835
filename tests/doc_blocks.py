"""The code blocks of README.md and docs/*.md, as tests/test_docs_run.py runs them.

Every fenced block names its language. ``console``/``sh``/``bash`` blocks are run
by bash; in a ``console`` block a line ``$ command`` is run and the lines under it are
the output it shows (compared by their leading words). ``python`` blocks are run by
the venv's Python. ``toml`` blocks must be valid configuration. ``text`` and ``json``
blocks show output or formats and are not run. An HTML comment on the line before
the fence changes that, and says why:

    <!-- doc-test: skip (why) -->                   not run (S3, GPU, many nodes, pip)
    <!-- doc-test: skip-lines "PAT" ... (why) -->   the lines containing PAT are not run
    <!-- doc-test: file NAME -->                     also written to NAME in the sandbox
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
RUN = ("console", "sh", "bash")
LANGUAGES = (*RUN, "python", "toml", "text", "json")
_MARK = re.compile(r"<!--\s*doc-test:\s*(skip-lines|skip|file)\b(.*?)-->")
_FENCE = re.compile(r"^(\s*)```(\S*)\s*$")


@dataclass
class Block:
    """One fenced block: where it is, its language, its text and its markers."""

    doc: Path
    line: int  # of the opening fence, 1-based
    lang: str
    body: str
    skip: str | None = None  # the reason, when the whole block is not run
    skip_lines: list[str] = field(default_factory=list)
    file: str | None = None

    @property
    def id(self) -> str:
        return f"{self.doc.relative_to(ROOT)}:{self.line}"


def apply_marker(block: Block, previous: str) -> None:
    m = _MARK.search(previous)
    if m is None:
        return
    kind, rest = m.group(1), m.group(2).strip()
    if kind == "skip":
        block.skip = rest.strip("() ") or "?"
    elif kind == "skip-lines":
        block.skip_lines = re.findall(r'"([^"]+)"', rest)
    else:
        block.file = rest.split()[0]


def blocks(doc: Path) -> list[Block]:
    """The fenced blocks of ``doc``, with the marker on the line before each."""
    out: list[Block] = []
    lines = doc.read_text().splitlines()
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if m is None:
            i += 1
            continue
        indent, start = len(m.group(1)), i
        i += 1
        while i < len(lines) and lines[i].strip() != "```":
            i += 1
        body = "\n".join(line[indent:] for line in lines[start + 1 : i]) + "\n"
        block = Block(doc, start + 1, m.group(2), body)
        apply_marker(block, lines[start - 1] if start else "")
        out.append(block)
        i += 1
    return out


def all_blocks() -> list[Block]:
    return [b for doc in DOCS for b in blocks(doc)]


def runnable(lang: tuple[str, ...]) -> list[Block]:
    """The blocks of these languages that are run (skipped ones included: they say why)."""
    return [b for b in all_blocks() if b.lang in lang]


@dataclass
class Segment:
    """A command (maybe several lines) and the output the doc shows under it."""

    command: str
    shown: list[str]


def segments(block: Block) -> list[Segment]:
    """A console block with ``$`` lines: one segment per ``$``; else one for it all."""
    lines = [
        line for line in block.body.splitlines() if not any(p in line for p in block.skip_lines)
    ]
    if block.lang != "console" or not any(line.startswith("$ ") for line in lines):
        return [Segment(c, []) for c in commands(lines)]
    out: list[Segment] = []
    for line in lines:
        if line.startswith("$ "):
            out.append(Segment(line[2:], []))
        elif out:
            out[-1].shown.append(line)
    return out


def commands(lines: list[str]) -> list[str]:
    """The commands of a script's lines: a line ending in ``\\`` or an indented line
    continues the one before; blank and comment-only lines are dropped."""
    out: list[str] = []
    joined = False
    for line in lines:
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if out and (joined or line[:1].isspace()):
            out[-1] += "\n" + line
        else:
            out.append(line)
        joined = line.rstrip().endswith("\\")
    return out


def key(line: str) -> str:
    """The stable head of an output line: its words up to the first with a digit, a
    path or an ellipsis (times, sizes and paths differ between runs), at most three."""
    words = []
    for word in line.split():
        if re.search(r"\d|/|\.\.\.|…", word) or len(words) == 3:
            break
        words.append(word)
    return " ".join(words)


def missing_output(shown: list[str], actual: str) -> list[str]:
    """The keys of ``shown`` not found, in order, at the start of ``actual``'s lines."""
    got = [" ".join(line.split()) for line in actual.splitlines()]  # columns: one space
    missing, at = [], 0
    for k in (key(line) for line in shown):
        if not k:
            continue
        found = next((i for i in range(at, len(got)) if got[i].startswith(k)), None)
        if found is None:
            missing.append(k)
        else:
            at = found + 1
    return missing
