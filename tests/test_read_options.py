"""The read options are declared once (rust/walcdc-core/src/cdc/options.rs): every API's
signature, the CLI's flags, the Spark source and the README take them from that declaration."""

import inspect
import re
from pathlib import Path

import pytest

import walcdc
import walcdc.spark
from walcdc import _native
from walcdc.options import OPTION_DEFAULTS, READ_OPTIONS, options_table

ROOT = Path(__file__).resolve().parent.parent


def test_the_declaration_is_complete():
    assert list(READ_OPTIONS)[:2] == ["start", "end"]
    for name, option in READ_OPTIONS.items():
        assert option.doc.strip(), name
        if option.kind == "choice":
            assert option.default in option.choices, name
    # The Rust enums' names, listed by the core (one list per enum).
    assert READ_OPTIONS["mode"].choices == ("id", "before", "after", "full")
    assert READ_OPTIONS["ops"].choices == tuple(walcdc.options.OPS)


@pytest.mark.parametrize(
    "function, without",
    [
        (walcdc.read_changes, ()),
        (walcdc.spark.read_changes, ()),
        (walcdc.read_table_changes, ("tables", "exclude_tables", "keys")),
        (walcdc.spark.read_table_changes, ("tables", "exclude_tables", "keys")),
        (walcdc.read_changes_by_table, ("committed_only", "keys")),
    ],
)
def test_every_api_shows_every_option_with_its_default(function, without):
    params = inspect.signature(function).parameters
    for name, default in OPTION_DEFAULTS.items():
        if name in without:
            assert name not in params
            continue
        assert params[name].kind is inspect.Parameter.KEYWORD_ONLY, name
        assert params[name].default == default, name
        assert f"``{name}=" in function.__doc__, name


def test_an_unknown_option_is_refused_with_a_hint():
    hint = r"unexpected keyword argument 'mdoe' \(did you mean 'mode'"
    with pytest.raises(TypeError, match=hint):
        walcdc.read_changes(walcdc.samples.sample_path(), mdoe="id")
    log = walcdc.open_log(walcdc.samples.sample_path())
    with pytest.raises(walcdc.InvalidArgumentError, match="not a read option"):
        log._native.change_options(mdoe="id")
    with pytest.raises(walcdc.InvalidArgumentError, match="mode must be one of 'id', 'before'"):
        log._native.change_options(mode="all")
    with pytest.raises(TypeError, match="read option decode"):
        log._native.change_options(decode="yes")


def test_a_bad_choice_names_the_values():
    values = "on_partial= must be one of 'skip', 'emit'"
    with pytest.raises(walcdc.InvalidArgumentError, match=values):
        walcdc.read_changes(walcdc.samples.sample_path(), on_partial="keep")


def test_the_cli_flags_take_their_values_from_the_declaration():
    from walcdc.cli import main

    seen = set()
    for command in main.commands.values():
        for param in command.params:
            option = READ_OPTIONS.get(param.name)
            if option is None or not option.choices or not hasattr(param.type, "choices"):
                continue
            assert tuple(param.type.choices) == option.choices, (command.name, param.name)
            assert param.default == option.default, (command.name, param.name)
            seen.add(param.name)
    assert {"mode", "keys", "include_ddl", "on_error", "on_encrypted", "on_partial"} <= seen


def test_the_spark_source_reads_every_option_as_a_string():
    from walcdc.spark_source import _PLANNED, _read_options

    given = {
        "mode": "id",
        "decode": "false",
        "include_trigger": "FALSE",
        "memory_limit": "1024",
        "tables": "a,b",
        "start": "1|0",
    }
    assert _read_options(given) == {
        "mode": "id",
        "decode": False,
        "include_trigger": False,
        "memory_limit": 1024,
        "tables": "a,b",
    }
    assert "start" in _PLANNED
    with pytest.raises(walcdc.InvalidArgumentError, match="redact must be true or false"):
        _read_options({"redact": "no"})


def test_the_spark_source_reads_committed_only_as_strictly_as_the_rest():
    """The stream a source reads is chosen by ``committed_only`` (planned, not a range's
    option): ``"0"`` or ``"no"`` is refused, not taken for true."""
    from walcdc.spark_source import _bool_option

    assert _bool_option({}, "committed_only", True) is True
    assert _bool_option({"committed_only": "False"}, "committed_only", True) is False
    assert _bool_option({"committed_only": "TRUE"}, "committed_only", True) is True
    for text in ("0", "no", "yes"):
        with pytest.raises(walcdc.InvalidArgumentError, match="committed_only must be true"):
            _bool_option({"committed_only": text}, "committed_only", True)


def test_the_readme_table_is_the_declaration():
    text = (ROOT / "README.md").read_text()
    found = re.search(r"<!-- read-options -->\n(.*?)<!-- /read-options -->", text, re.S)
    assert found, "the README's read options table is missing"
    assert found.group(1) == options_table(), "regenerate it with walcdc.options.options_table()"


def test_the_native_list_is_what_python_holds():
    names = [o["name"] for o in _native.read_options()]
    assert names == list(READ_OPTIONS)
