"""No layer violations: every import inside ``src/stepscope`` goes in an allowed direction.

The table of allowed directions is ``tests/layers.toml``, beside this file: for each
part of stepscope (a top-level module or package), the parts it may import. Every
import counts: at module level, inside functions, under ``TYPE_CHECKING``, relative
ones; ``from stepscope import open`` counts as an import of what the root package
resolves the name to (its ``_LAZY`` table). Two rules:

* a part imports only the parts its row lists;
* a part never imports another part's private module (a module path with a
  component that starts with ``_``): it uses the names the part exports publicly.

A forbidden import fails the test unless ``layers.toml`` lists it, with why, under
``exceptions`` (kept for good) or ``pending`` (waiting for a fix in a part someone is
changing). An entry that no longer matches an import fails too, so both lists shrink.
The walk is static (``ast``): nothing of stepscope is imported.
"""

from __future__ import annotations

import ast
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
TABLE = Path(__file__).with_name("layers.toml")
ROOT = "stepscope"


@dataclass(frozen=True)
class Edge:
    """One import: ``source`` (module) imports ``target`` (module), at ``where``."""

    source: str
    target: str
    where: str


def part(module: str) -> str:
    """The part a module belongs to: ``stepscope.store._store`` -> ``store``."""
    names = module.split(".")
    return names[1] if len(names) > 1 else ROOT


def is_private(module: str) -> bool:
    """A module path with a ``_name`` component (``__init__``-style names excepted)."""
    return any(n.startswith("_") and not n.endswith("__") for n in module.split(".")[1:])


def modules(src: Path) -> dict[str, Path]:
    """Every module of the package under ``src``, by dotted name."""
    found = {}
    for path in sorted((src / ROOT).rglob("*.py")):
        names = list(path.relative_to(src).with_suffix("").parts)
        if names[-1] == "__init__":
            names.pop()
        found[".".join(names)] = path
    return found


def _lazy_names(src: Path) -> dict[str, str]:
    """The root package's lazy names (``_LAZY = {"open": ("stepscope.read", "open")}``)."""
    for node in ast.parse((src / ROOT / "__init__.py").read_text()).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "_LAZY" for t in node.targets
        ):
            return {name: target for name, (target, _) in ast.literal_eval(node.value).items()}
    return {}


def imports(src: Path) -> Iterator[Edge]:
    """Every import of a stepscope module by a stepscope module under ``src``."""
    known, lazy = modules(src), _lazy_names(src)
    for source, path in known.items():
        package = source if path.name == "__init__.py" else source.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            where = f"{path.relative_to(src.parent)}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    module = ".".join([*base, *([node.module] if node.module else [])])
                else:
                    module = node.module or ""
                targets = []
                for alias in node.names:
                    if f"{module}.{alias.name}" in known:  # from pkg import _module
                        targets.append(f"{module}.{alias.name}")
                    elif module == ROOT and alias.name in lazy:  # from stepscope import open
                        targets.append(lazy[alias.name])
                    elif module != ROOT:  # the root's own names (__version__) are no part
                        targets.append(module)
            else:
                continue
            for target in dict.fromkeys(targets):
                if target == ROOT or target.startswith(ROOT + "."):
                    yield Edge(source, target, where)


def violations(edges: Iterator[Edge], allowed: dict[str, list[str]]) -> dict[Edge, str]:
    """The forbidden edges, each with why it is forbidden."""
    found = {}
    for edge in edges:
        src_part, dst_part = part(edge.source), part(edge.target)
        if src_part == dst_part:
            continue
        if dst_part not in allowed.get(src_part, []):
            found[edge] = f"part {src_part} may not import part {dst_part}"
        elif is_private(edge.target):
            found[edge] = f"private module of part {dst_part}: import what it exports"
    return found


def _table() -> dict[str, object]:
    with TABLE.open("rb") as f:
        return tomllib.load(f)


def _listed(table: dict[str, object], key: str) -> set[tuple[str, str]]:
    entries = table.get(key, [])
    assert isinstance(entries, list)
    for e in entries:
        assert e.get("why"), f"layers.toml: {key} entry {e} needs a why"
    return {(e["from"], e["to"]) for e in entries}


def test_no_layer_violations() -> None:
    table = _table()
    allowed = table["allowed"]
    assert isinstance(allowed, dict)
    listed = _listed(table, "exceptions") | _listed(table, "pending")
    found = violations(imports(SRC), allowed)
    bad = sorted(
        f"{e.source} -> {e.target} ({why}) at {e.where}"
        for e, why in found.items()
        if (e.source, e.target) not in listed
    )
    assert not bad, "forbidden imports (see tests/layers.toml):\n" + "\n".join(bad)
    stale = sorted(listed - {(e.source, e.target) for e in found})
    assert not stale, "layers.toml lists imports that are gone or allowed now:\n" + "\n".join(
        f"{a} -> {b}" for a, b in stale
    )


def test_table_names_every_part() -> None:
    allowed = _table()["allowed"]
    assert isinstance(allowed, dict)
    parts = {part(m) for m in modules(SRC)}
    assert parts == set(allowed), (
        f"layers.toml [allowed] misses {sorted(parts - set(allowed))}, "
        f"names no part {sorted(set(allowed) - parts)}"
    )
    unknown = {p for row in allowed.values() for p in row} - parts
    assert not unknown, f"layers.toml [allowed] names unknown parts {sorted(unknown)}"
    assert not any("cli" in row for name, row in allowed.items() if name != "cli")


PLANTED = {
    "__init__.py": '_LAZY = {"open": ("stepscope.read", "open")}\n',
    "read/__init__.py": "",
    "read/_job.py": "from .. import __version__\nfrom stepscope import errors\n",
    "errors.py": "",
    "cli/__init__.py": "",
    "store/__init__.py": "",
    "store/_store.py": "",
    "report/__init__.py": "from . import _charts\nfrom ._charts import x\n",
    "report/_charts.py": (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from stepscope.store._store import Store\n"
        "def f():\n    from ..cli import main\n"
        "import stepscope.read._job as job\n"
        "from stepscope import open\n"
    ),
}


@pytest.fixture
def planted(tmp_path: Path) -> Path:
    for name, text in PLANTED.items():
        path = tmp_path / ROOT / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


def test_the_walk_finds_every_kind_of_import(planted: Path) -> None:
    edges = {(e.source, e.target) for e in imports(planted)}
    assert edges == {
        ("stepscope.read._job", "stepscope.errors"),
        ("stepscope.report", "stepscope.report._charts"),
        ("stepscope.report._charts", "stepscope.store._store"),
        ("stepscope.report._charts", "stepscope.cli"),
        ("stepscope.report._charts", "stepscope.read._job"),
        ("stepscope.report._charts", "stepscope.read"),
    }


def test_forbidden_and_private_imports_are_found(planted: Path) -> None:
    allowed = {"report": ["read", "store"], "read": []}
    found = {(e.source, e.target): why for e, why in violations(imports(planted), allowed).items()}
    assert found == {
        ("stepscope.read._job", "stepscope.errors"): "part read may not import part errors",
        ("stepscope.report._charts", "stepscope.cli"): "part report may not import part cli",
        ("stepscope.report._charts", "stepscope.store._store"): (
            "private module of part store: import what it exports"
        ),
        ("stepscope.report._charts", "stepscope.read._job"): (
            "private module of part read: import what it exports"
        ),
    }
