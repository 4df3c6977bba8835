"""Count ``Any`` in function signatures, per function, per package.

    python scripts/any_count.py [ROOT] [--functions]

ROOT defaults to ``src/stepscope``. A signature's ``Any`` are the occurrences
of the name ``Any`` (or ``typing.Any``) in its parameters' and return
annotations, nested ones included: ``dict[str, Any]`` counts one, ``*args: Any,
**kwargs: Any`` two. String annotations are parsed. Every ``def`` counts as a
function (methods, nested functions); lambdas have no annotations and do not.
Type stubs (``.pyi``) count as modules. Packages are the folders under ROOT
(the root's own modules under its name); each line gives the package, its
functions, its ``Any``, and ``Any`` per function, then the total.
``--functions`` lists every function with an ``Any``.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

Function = ast.FunctionDef | ast.AsyncFunctionDef


@dataclass
class Count:
    """Functions and the ``Any`` in their signatures, for one package."""

    functions: int = 0
    anys: int = 0

    @property
    def per_function(self) -> float:
        return self.anys / self.functions if self.functions else 0.0


def _anys(annotation: ast.expr | None) -> int:
    if annotation is None:
        return 0
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        try:
            annotation = ast.parse(annotation.value, mode="eval").body
        except SyntaxError:
            return 0
    count = 0
    for node in ast.walk(annotation):
        name = node.id if isinstance(node, ast.Name) else getattr(node, "attr", None)
        if name == "Any":  # Any, typing.Any, t.Any
            count += 1
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            count += _anys(node)  # a quoted part of an annotation: list["Any"]
    return count


def signature_anys(fn: Function) -> int:
    """``Any`` in ``fn``'s parameters and return annotation."""
    args = fn.args
    params = [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
    return _anys(fn.returns) + sum(_anys(p.annotation) for p in params if p is not None)


def functions(path: Path) -> Iterator[Function]:
    """Every ``def`` of the module (or stub) at ``path``."""
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield node


def package_of(root: Path, path: Path) -> str:
    parts = path.relative_to(root).parts
    return root.name if len(parts) == 1 else f"{root.name}.{parts[0]}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", nargs="?", default="src/stepscope", type=Path)
    parser.add_argument("--functions", action="store_true", help="list functions with Any")
    opts = parser.parse_args(argv)
    root: Path = opts.root
    counts: dict[str, Count] = {}
    total = Count()
    for path in sorted(p for p in root.rglob("*.py*") if p.suffix in (".py", ".pyi")):
        count = counts.setdefault(package_of(root, path), Count())
        for fn in functions(path):
            n = signature_anys(fn)
            for c in (count, total):
                c.functions += 1
                c.anys += n
            if n and opts.functions:
                print(f"{path}:{fn.lineno}: {fn.name}: {n}")
    width = max(len(name) for name in [*counts, "total"])
    print(f"{'package':<{width}} functions  Any  Any/function")
    for name, c in sorted(counts.items()):
        print(f"{name:<{width}} {c.functions:9} {c.anys:4} {c.per_function:13.2f}")
    print(f"{'total':<{width}} {total.functions:9} {total.anys:4} {total.per_function:13.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
