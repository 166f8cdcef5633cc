"""The code's layers are visible and acyclic: the Rust core names every path by its layer
(nothing re-exported at the crate root) and no module of the core, nor of the Python package,
depends on a module that depends on it (docs/design.md)."""

import ast
import re
from pathlib import Path
from typing import Dict, List, Set

ROOT = Path(__file__).resolve().parent.parent
CORE = ROOT / "rust" / "walcdc-core" / "src"
PACKAGE = ROOT / "python" / "walcdc"


def _cycles(edges: Dict[str, Set[str]]) -> List[List[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on: Set[str] = set()
    found: List[List[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = []
            while True:
                w = stack.pop()
                on.discard(w)
                part.append(w)
                if w == v:
                    break
            if len(part) > 1:
                found.append(sorted(part))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def _rust_modules() -> Dict[str, Path]:
    out = {}
    for f in CORE.rglob("*.rs"):
        parts = list(f.relative_to(CORE).with_suffix("").parts)
        if parts[-1] in ("mod", "lib"):
            parts = parts[:-1]
        out["::".join(parts)] = f
    return out


def _rust_code(text: str) -> str:
    """The code of a module without its tests, comments and doc comments."""
    # `#[cfg(test)]`, or a cfg that needs `test` among others (`all(test, target_os = ...)`).
    text = re.split(r"#\[cfg\((?:test|all\(test\b[^\]]*)\)\]\s*mod tests\b", text)[0]
    return "\n".join(line.split("//")[0] for line in text.splitlines())


def rust_edges() -> Dict[str, Set[str]]:
    modules = _rust_modules()
    edges: Dict[str, Set[str]] = {}
    for name, f in modules.items():
        deps = set()
        code = _rust_code(f.read_text())
        for m in re.finditer(r"\bcrate::((?:[a-z_0-9]+::)*[A-Za-z_0-9]+)", code):
            parts = m.group(1).split("::")
            # the longest module prefix of the path
            for n in range(len(parts), 0, -1):
                target = "::".join(parts[:n])
                if target in modules:
                    break
            else:
                continue
            if target and target != name and not name.startswith(target + "::"):
                deps.add(target)
        edges[name] = deps
    return edges


def test_the_crate_root_re_exports_nothing():
    lib = (CORE / "lib.rs").read_text()
    assert not re.search(r"^\s*pub use ", lib, re.M), "lib.rs re-exports: name the layer instead"


def test_rust_modules_form_no_cycle():
    edges = rust_edges()
    assert "cdc::changes" in edges and "cdc::event" in edges["cdc::changes"]  # the scan works
    assert _cycles(edges) == []


def python_edges() -> Dict[str, Set[str]]:
    """Imports between the package's modules, at module level and inside functions alike."""
    modules = {}
    for f in PACKAGE.rglob("*.py"):
        parts = list(f.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = f
    edges: Dict[str, Set[str]] = {}
    for name, f in modules.items():
        deps = set()
        package = name if f.name == "__init__.py" else name.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(f.read_text())):
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(up + ([base] if base else []))
                targets = [base] + [f"{base}.{a.name}" for a in node.names]
            for t in targets:
                while t and t not in modules:
                    t = t.rsplit(".", 1)[0] if "." in t else ""
                # a package's own __init__ is what every submodule import runs first: not an edge
                if t and t != name and not name.startswith(t + "."):
                    deps.add(t)
        edges[name] = deps
    return edges


def test_python_modules_form_no_cycle():
    edges = python_edges()
    assert "walcdc.logset" in edges["walcdc.changes"]  # the scan works
    assert _cycles(edges) == []
