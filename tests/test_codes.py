"""Codes (record types, supplemental types, fact kinds) have one table each, in the Rust core,
and Python reads them from it (``walcdc._native.record_types()``, ``fact_kinds()``, ...): no
module of the package spells a code as an integer literal."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Iterator, Set, Tuple

import pytest

from walcdc import _native

PACKAGE = Path(__file__).resolve().parent.parent / "python" / "walcdc"

#: Names of what holds a code (a column, a variable or an attribute).
CODE_HOLDERS = {"kind", "end_kind", "type", "rectype", "record_type", "supplement_type"}
CODE_HOLDERS |= {"ddl_type", "object_type"}
#: Modules that are a code table themselves: CUBRID's CDC codes of DDL events, which the Rust
#: core passes through as they are.
TABLES = {"walcdc/ddl.py"}


def _code_names() -> Set[str]:
    names = {name for _, name in _native.fact_kinds()}
    names |= {name.lower() for _, name in _native.record_types()}
    names |= {name.lower() for _, name in _native.supplement_types()}
    return names


def _int(node: ast.AST) -> bool:
    return (isinstance(node, ast.Constant) and isinstance(node.value, int)) and not isinstance(
        node.value, bool
    )


def _holder(node: ast.AST) -> bool:
    """A column ``F.col("kind")`` / ``col("type")`` / ``e["ddl_type"]``, or a name or attribute
    called so."""
    if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
        func = node.func
        called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        return called in ("col", "column") and node.args[0].value in CODE_HOLDERS
    if isinstance(node, ast.Name):
        return node.id in CODE_HOLDERS
    if isinstance(node, ast.Attribute):
        return node.attr in CODE_HOLDERS
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
        return node.slice.value in CODE_HOLDERS  # e["ddl_type"]
    return False


def literal_codes(source: str, codes: Set[str]) -> Iterator[Tuple[int, str]]:
    """``(line, what)`` for each code spelled as an integer literal in ``source``."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Tuple) and isinstance(node.value, ast.Call):
                    if getattr(node.value.func, "id", None) == "range":
                        yield node.lineno, "codes numbered by range()"
                if isinstance(target, ast.Name) and _int(node.value):
                    if target.id.strip("_").lower() in codes:
                        yield node.lineno, f"{target.id} = {node.value.value}"
        elif isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            if any(_holder(o) for o in operands) and any(_int(o) for o in operands):
                yield node.lineno, "a code compared with an integer literal"
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr == "isin" and _holder(node.func.value):
                if any(_int(a) for a in node.args):
                    yield node.lineno, "a code matched against integer literals"


@pytest.mark.parametrize(
    "source",
    [
        "_START, _COMMIT, _ABORT = range(3)",
        "_COUNTS = 15",
        "LOG_COMMIT = 17",
        "facts.where(F.col('kind') == 1)",
        "facts.where(F.col('kind').isin(0, 1, 2))",
        "if rec.rectype == 17: pass",
        "if e['ddl_type'] == 4: pass",
    ],
)
def test_the_check_finds_literal_codes(source):
    assert list(literal_codes(source, _code_names()))


def test_no_module_spells_a_code_as_an_integer():
    codes = _code_names()
    assert {"start", "commit", "counts", "log_commit", "tran_user"} <= codes
    found = [
        f"{path.relative_to(PACKAGE.parent)}:{line}: {what}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if str(path.relative_to(PACKAGE.parent)) not in TABLES
        for line, what in literal_codes(path.read_text(), codes)
    ]
    assert not found, "\n".join(found)


def test_fact_kinds_are_one_table():
    kinds = _native.fact_kinds()
    codes = [c for c, _ in kinds]
    names = [n for _, n in kinds]
    assert len(set(codes)) == len(codes) and len(set(names)) == len(names)
    assert names[-1] == "counts"
