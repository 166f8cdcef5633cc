"""The examples in the package's docstrings run and give what they say."""

from __future__ import annotations

import doctest
import importlib
from pathlib import Path

import pytest

MODULES = [
    "walcdc",
    "walcdc.lsa",
    "walcdc.logset",
    "walcdc.testing",
    "walcdc.table_changes",
    "walcdc.sinks",
    "walcdc.sinks.tables",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name))
    assert result.attempted > 0 and result.failed == 0


@pytest.mark.parametrize("doc", ["typed.md", "debezium.md"])
def test_documentation_examples(doc):
    path = Path(__file__).resolve().parent.parent / "docs" / doc
    result = doctest.testfile(str(path), module_relative=False)
    assert result.attempted > 0 and result.failed == 0
