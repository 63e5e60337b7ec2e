#!/usr/bin/env python3
"""The import graph of a package, measured: cycles between modules, imports pointing up the layers,
modules left at the top level, and the longest functions (docs/architecture.md, "Checking the layers").

Usage: `.venv/bin/python scripts/import_graph.py [--package aql_mcp] [--path src] [--pyproject pyproject.toml]
[--max-cycles N] [--max-up-imports N] [--max-top-level N] [--max-function-lines N | --warn-function-lines N]`
(`make lint` runs it with the project's thresholds). It prints what it finds and exits 1 when a
measurement is over its threshold, so a new cycle fails the build.

import-linter (`lint-imports`, the contracts in pyproject.toml) says which rule an import breaks; this
says how far the graph is from the goal, in the numbers issue 21 asks for. Both read the same graph:
grimp's, built from the source without importing it, with every import counted (those under
`if TYPE_CHECKING:` and those inside functions too, since each is a dependency a reader must follow).
The layers are the `layers` contract's, read from pyproject.toml, so there is one list of them.
"""

from __future__ import annotations

import argparse
import ast
import sys
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import grimp

LAYERS_CONTRACT = "layers"


@dataclass(frozen=True, slots=True)
class Import:
    importer: str
    imported: str
    line: int

    def __str__(self) -> str:
        return f"{self.importer} -> {self.imported} (l.{self.line})"


@dataclass(frozen=True, slots=True)
class Function:
    module: str
    name: str
    lines: int


@dataclass(frozen=True, slots=True)
class Measures:
    cycles: list[list[str]]
    up_imports: list[Import]
    top_level: list[str]
    functions: list[Function]


def cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    edges = {m: sorted(graph.find_modules_directly_imported_by(m)) for m in sorted(graph.modules)}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in edges:
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            node, child = work.pop()
            if child == 0:
                index[node] = low[node] = len(index)
                stack.append(node)
                on_stack.add(node)
            if child < len(edges[node]):
                work.append((node, child + 1))
                nxt = edges[node][child]
                if nxt not in index:
                    work.append((nxt, 0))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    return sorted(found)


def read_layers(pyproject: Path) -> tuple[str, list[list[str]]]:
    """The container and the layers (top first, each a list of sibling names) of the `layers` contract."""
    config = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    for contract in config["tool"]["importlinter"]["contracts"]:
        if contract.get("id") == LAYERS_CONTRACT:
            [container] = contract["containers"]
            layers = [[name.strip() for name in layer.replace(":", "|").split("|")] for layer in contract["layers"]]
            return container, layers
    raise SystemExit(f"{pyproject}: no import-linter contract with id = {LAYERS_CONTRACT!r}")


def up_imports(graph: grimp.ImportGraph, container: str, layers: Sequence[Sequence[str]]) -> list[Import]:
    """Every direct import from a module to one in a layer above its own (the layers listed top first)."""
    rank = {f"{container}.{name}": depth for depth, layer in enumerate(layers) for name in layer}

    def layer_of(module: str) -> int | None:
        parts = module.split(".")
        for size in range(len(parts), 0, -1):
            found = rank.get(".".join(parts[:size]))
            if found is not None:
                return found
        return None

    found = []
    for importer in sorted(graph.modules):
        below = layer_of(importer)
        for imported in sorted(graph.find_modules_directly_imported_by(importer)):
            above = layer_of(imported)
            if below is not None and above is not None and above < below:
                details = graph.get_import_details(importer=importer, imported=imported)
                found.append(Import(importer, imported, min(d["line_number"] for d in details)))
    return found


def top_level(package_dir: Path) -> list[str]:
    """The modules directly in the package (not its subpackages, not its `__init__`)."""
    return sorted(p.stem for p in package_dir.glob("*.py") if p.stem != "__init__")


def functions(package: str, package_dir: Path) -> list[Function]:
    """Every function and method with its length in lines (from `def` to its last line), longest first."""
    found = []
    for path in sorted(package_dir.rglob("*.py")):
        module = ".".join((package, *path.relative_to(package_dir).with_suffix("").parts)).removesuffix(".__init__")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                end = node.end_lineno if node.end_lineno is not None else node.lineno
                found.append(Function(module, node.name, end - node.lineno + 1))
    return sorted(found, key=lambda f: (-f.lines, f.module, f.name))


def measure(package: str, path: Path, pyproject: Path) -> Measures:
    sys.path.insert(0, str(path.resolve()))
    graph = grimp.build_graph(package, cache_dir=None)
    container, layers = read_layers(pyproject)
    package_dir = path / package.replace(".", "/")
    return Measures(
        cycles=cycles(graph),
        up_imports=up_imports(graph, container, layers),
        top_level=top_level(package_dir),
        functions=functions(package, package_dir),
    )


def report(measures: Measures, limits: Mapping[str, int | None], warn_function_lines: int | None) -> list[str]:
    """Prints the measurements; returns the names of those over their threshold."""
    over = []

    def line(name: str, count: int, items: Iterable[object]) -> None:
        limit = limits[name]
        verdict = "" if limit is None else (f" (at most {limit}: OVER)" if count > limit else f" (at most {limit})")
        if limit is not None and count > limit:
            over.append(name)
        print(f"{name}: {count}{verdict}")
        for item in items:
            print(f"  {item}")

    line("cycles", len(measures.cycles), (" <-> ".join(c) for c in measures.cycles))
    line("up imports", len(measures.up_imports), measures.up_imports)
    line("top-level modules", len(measures.top_level), [", ".join(measures.top_level)])
    function_limit = limits["longest function"] if limits["longest function"] is not None else warn_function_lines
    longest = measures.functions[0].lines if measures.functions else 0
    long_ones = [f for f in measures.functions if function_limit is not None and f.lines > function_limit]
    line("longest function", longest, (f"{f.module}.{f.name}: {f.lines} lines" for f in long_ones))
    if warn_function_lines is not None and long_ones:
        print(f"  (reported only: {len(long_ones)} over {warn_function_lines} lines)")
    return over


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--package", default="aql_mcp")
    parser.add_argument("--path", type=Path, default=Path("src"), help="the directory the package is in")
    parser.add_argument("--pyproject", type=Path, default=Path("pyproject.toml"))
    parser.add_argument("--max-cycles", type=int)
    parser.add_argument("--max-up-imports", type=int)
    parser.add_argument("--max-top-level", type=int)
    lengths = parser.add_mutually_exclusive_group()
    lengths.add_argument("--max-function-lines", type=int)
    lengths.add_argument("--warn-function-lines", type=int, help="lists longer functions without failing")
    args = parser.parse_args(argv)
    measures = measure(args.package, args.path, args.pyproject)
    limits = {
        "cycles": args.max_cycles,
        "up imports": args.max_up_imports,
        "top-level modules": args.max_top_level,
        "longest function": args.max_function_lines,
    }
    over = report(measures, limits, args.warn_function_lines)
    if over:
        print(f"import_graph: over the threshold: {', '.join(over)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
