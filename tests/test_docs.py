"""The examples in the package's docstrings and in the documentation run and give what they say.

Every ```python block of README.md runs as written, each on its own (the Spark section's
blocks run in tests/test_spark.py, with a Spark session); so does every ```sh block that needs
no installation or server, with ``walcdc`` being this checkout's command line."""

from __future__ import annotations

import doctest
import importlib
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
README = (REPO / "README.md").read_text()

MODULES = [
    "walcdc",
    "walcdc.lsa",
    "walcdc.logset",
    "walcdc.testing",
    "walcdc.table_changes",
    "walcdc.sinks",
    "walcdc.sinks.tables",
    "walcdc.mirrors",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name))
    assert result.attempted > 0 and result.failed == 0


@pytest.mark.parametrize("doc", ["typed.md", "debezium.md", "mirror.md"])
def test_documentation_examples(doc):
    path = REPO / "docs" / doc
    result = doctest.testfile(str(path), module_relative=False)
    assert result.attempted > 0 and result.failed == 0


def blocks(language: str):
    """``(line, code)`` of every fenced block of README.md in ``language``, dedented (a block
    in a list item is indented with it)."""
    fence = re.compile(rf"^([ \t]*)```{language}\n(.*?)^\1```$", re.S | re.M)
    return [
        (README.count("\n", 0, m.start()) + 1, textwrap.dedent(m.group(2)))
        for m in fence.finditer(README)
    ]


def in_spark_section(line: int) -> bool:
    first = README.count("\n", 0, README.index("## Spark")) + 1
    last = README.count("\n", 0, README.index("## Command line")) + 1
    return first < line < last


PYTHON = [(line, code) for line, code in blocks("python") if not in_spark_section(line)]
#: sh blocks that are not run here, by their first line: why.
NOT_RUN = {
    "pip install . && walcdc inspect --sample --stats": "installs the package",
    "bash .ci/test-all": "runs every test",
    "pip install '.[bench,spark]'": "installs the benchmarks and generates gigabytes",
    "python -m venv walcdc-env && walcdc-env/bin/pip install walcdc pyarrow venv-pack": (
        "installs from PyPI and packs an environment"
    ),
}
SH = [(line, code) for line, code in blocks("sh") if code.splitlines()[0] not in NOT_RUN]


def test_every_block_is_run_somewhere():
    spark = [line for line, _ in blocks("python") if in_spark_section(line)]
    assert len(spark) == 4  # test_spark.py's test_the_readmes_spark_examples_run
    assert len(PYTHON) >= 4 and len(SH) >= 3
    first_lines = [code.splitlines()[0] for _, code in blocks("sh")]
    assert all(skipped in first_lines for skipped in NOT_RUN)  # no stale entry
    # Every block says its language, so that none escapes the tests above unseen.
    openings = re.findall(r"^[ \t]*```(\S*)", README, re.M)[0::2]
    assert set(openings) <= {"python", "sh", "text"}, openings


@pytest.fixture(scope="module")
def s3_environment():
    """For the examples that read ``s3://archive/cubrid/demodb/log/``: an S3 API server on
    127.0.0.1 holding the bundled sample there, and the environment variables that point the
    examples at it (the way a user's AWS_* variables point them at their store)."""
    from s3server import ACCESS_KEY, SECRET_KEY, S3Server

    import walcdc

    server = S3Server()
    try:
        server.client.create_bucket(Bucket="archive")
        for f in sorted(Path(walcdc.samples.sample_path()).iterdir()):
            server.client.upload_file(str(f), "archive", f"cubrid/demodb/log/{f.name}")
        yield {
            "AWS_ENDPOINT": server.endpoint,
            "AWS_ALLOW_HTTP": "true",
            "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
        }
    finally:
        server.stop()


def _environment(code: str, request) -> dict:
    """The environment an example needs: the S3 server's for one that reads s3:// URLs."""
    return request.getfixturevalue("s3_environment") if "s3://" in code else {}


@pytest.mark.parametrize("line, code", PYTHON, ids=[f"line{line}" for line, _ in PYTHON])
def test_the_readmes_python_examples_run(line, code, tmp_path, monkeypatch, request):
    monkeypatch.chdir(tmp_path)  # where the examples write their files
    for key, value in _environment(code, request).items():
        monkeypatch.setenv(key, value)
    exec(compile(code, f"README.md:{line}", "exec"), {"__name__": "__readme__"})


@pytest.mark.parametrize("line, code", SH, ids=[f"line{line}" for line, _ in SH])
def test_the_readmes_shell_examples_run(line, code, tmp_path, request):
    # "walcdc" is this checkout's command line, whatever is installed.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "walcdc"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m walcdc.cli "$@"\n')
    shim.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
    env.update(_environment(code, request))
    work = tmp_path / "work"
    work.mkdir()
    r = subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", code],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert r.returncode == 0, f"README.md:{line}\n{code}\n{r.stderr}"
