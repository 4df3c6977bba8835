#!/usr/bin/env python3
"""Count ``Any`` in the function signatures of a package, per sub-package and in total.

Usage::

    python scripts/any_per_function.py src/stepscope [--max 0.15] [--exclude agent]

Every ``Any`` in a parameter annotation (``*args`` and ``**kwargs`` included) or a
return annotation counts once, divided by the number of functions (methods, nested
functions and lambdas' enclosing functions alike; lambdas have no annotations).
A type alias that hides ``Any`` counts as the ``Any`` it holds wherever it is used:
module-level ``JsonDict = dict[str, Any]`` (or ``X: TypeAlias = ...``) makes every
``JsonDict`` in an annotation count 1, also where it is imported by another module
of the package (``from stepscope.jobfolder import JsonDict``). String annotations
are parsed as expressions. ``object`` is not ``Any`` and does not count. Type stubs
(``.pyi``, e.g. of a C extension) count like modules.

Prints one line per top-level part (``(root)`` for the package's own modules) and
the total; with ``--max``, exits 1 when the total ratio is above it.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Module:
    """One parsed module: its dotted name, part, tree and the names it imports."""

    name: str
    part: str
    tree: ast.Module
    imports: dict[str, tuple[str, str]] = field(default_factory=dict)  # local -> (mod, name)


def _modules(root: Path) -> list[Module]:
    out = []
    for path in sorted([*root.rglob("*.py"), *root.rglob("*.pyi")]):
        rel = path.relative_to(root)
        parts = list(rel.with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        name = ".".join([root.name, *parts])
        part = rel.parts[0] if len(rel.parts) > 1 else "(root)"
        tree = ast.parse(path.read_text(), str(path))
        module = Module(name, part, tree)
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in tree.body:
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    base = ".".join([*up, base] if base else up)
                for alias in node.names:
                    module.imports[alias.asname or alias.name] = (base, alias.name)
        out.append(module)
    return out


def _names(node: ast.AST | None) -> Iterator[str]:
    """Every name an annotation uses (``Any``, ``typing.Any``, names in strings)."""
    if node is None:
        return
    for n in ast.walk(node):
        if isinstance(n, ast.Name):
            yield n.id
        elif isinstance(n, ast.Attribute):
            yield n.attr
        elif isinstance(n, ast.Constant) and isinstance(n.value, str):
            try:
                yield from _names(ast.parse(n.value, mode="eval"))
            except SyntaxError:
                continue


def _alias_values(module: Module) -> dict[str, ast.expr]:
    """Module-level assignments that may be type aliases: ``X = <expr>``."""
    out: dict[str, ast.expr] = {}
    for node in module.tree.body:
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
        ):
            out[node.targets[0].id] = node.value
        elif (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and node.value is not None
            and "TypeAlias" in set(_names(node.annotation))
        ):
            out[node.target.id] = node.value
    return out


def alias_weights(modules: list[Module]) -> dict[tuple[str, str], int]:
    """``(module, name) -> number of Any`` of every alias that hides ``Any``, resolved
    through other aliases and through imports (re-exports), to a fixed point."""
    by_name = {m.name: m for m in modules}
    values = {m.name: _alias_values(m) for m in modules}
    weights: dict[tuple[str, str], int] = {}
    changed = True
    while changed:
        changed = False
        for m in modules:
            for local, (src, name) in m.imports.items():
                w = weights.get((src, name), 0) if src in by_name else 0
                if w and weights.get((m.name, local)) != w:
                    weights[(m.name, local)], changed = w, True
            for alias, value in values[m.name].items():
                w = weight(value, m, weights)
                if w and weights.get((m.name, alias)) != w:
                    weights[(m.name, alias)], changed = w, True
    return weights


def weight(annotation: ast.AST | None, module: Module, aliases: dict[tuple[str, str], int]) -> int:
    """The number of ``Any`` an annotation holds, aliases expanded."""
    return sum(1 if n == "Any" else aliases.get((module.name, n), 0) for n in _names(annotation))


def count(root: Path) -> tuple[Counter[str], Counter[str]]:
    """``(Any per part, functions per part)`` of the package at ``root``."""
    modules = _modules(root)
    aliases = alias_weights(modules)
    anys: Counter[str] = Counter()
    funcs: Counter[str] = Counter()
    for m in modules:
        for node in ast.walk(m.tree):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            funcs[m.part] += 1
            a = node.args
            params = [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg]
            anys[m.part] += sum(weight(p.annotation, m, aliases) for p in params if p)
            anys[m.part] += weight(node.returns, m, aliases)
    return anys, funcs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("package", type=Path, help="the package folder, e.g. src/stepscope")
    parser.add_argument("--max", type=float, help="exit 1 when the total ratio is above this")
    parser.add_argument("--exclude", action="append", default=[], help="a part to leave out")
    args = parser.parse_args(argv)
    if not (args.package / "__init__.py").is_file():
        parser.error(f"{args.package} is not a package folder (no __init__.py)")
    anys, funcs = count(args.package)
    for part in args.exclude:
        anys.pop(part, None), funcs.pop(part, None)
    for part in sorted(funcs, key=lambda p: (-anys[p], p)):
        print(f"{part:12s} {anys[part]:4d} / {funcs[part]:4d} = {anys[part] / funcs[part]:.2f}")
    total_a, total_f = sum(anys.values()), sum(funcs.values())
    ratio = total_a / total_f if total_f else 0.0
    print(f"{'total':12s} {total_a:4d} / {total_f:4d} = {ratio:.2f}")
    if args.max is not None and ratio > args.max:
        print(f"Any per function {ratio:.3f} is above --max {args.max}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
