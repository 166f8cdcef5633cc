"""The suite itself: every test file is collected with at least the tests it had, and every
case the full tier takes from the default one names a real test. A file that silently stops
being collected (an import that fails quietly, a module-level skip) fails here."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import conftest

TESTS = Path(__file__).resolve().parent
#: Tests the default tier collects per file, at least. Update it (WALCDC_UPDATE_COUNTS=1) when
#: a test is removed or moved to the full tier on purpose.
COUNTS = TESTS / "collected.json"


def _collected(config, tier: str) -> list:
    """The test ids of a tier (``default`` or ``full``): this session's own collection when it
    collected the whole suite (the README's command; each xdist worker collects it all), else
    a collection of the suite in a subprocess."""
    every, default = config.stash.get(conftest.COLLECTED, ([], []))
    here = config.invocation_params.dir
    if {(here / a.split("::")[0]).resolve() for a in config.args} == {TESTS}:
        return every if tier == "full" else default
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env.pop("WALCDC_TIER", None)
    args = ["-m", "full"] if tier == "full" else []
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"]
        + ["tests", *args],
        cwd=TESTS.parent,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return [line for line in r.stdout.splitlines() if "::" in line]


def test_every_file_is_collected_with_its_tests(pytestconfig):
    ids = _collected(pytestconfig, "default")
    per_file = Counter(i.split("::")[0] for i in ids)
    files = {f"tests/{p.name}" for p in TESTS.glob("test_*.py")}
    assert files == set(per_file), f"not collected: {sorted(files - set(per_file))}"
    if os.environ.get("WALCDC_UPDATE_COUNTS"):
        COUNTS.write_text(json.dumps(dict(sorted(per_file.items())), indent=1) + "\n")
    want = json.loads(COUNTS.read_text())
    fewer = {f: (per_file.get(f, 0), n) for f, n in want.items() if per_file.get(f, 0) < n}
    assert not fewer, f"fewer tests than recorded in {COUNTS.name} (collected, recorded): {fewer}"
    assert not set(per_file) - set(want), f"files missing from {COUNTS.name}"


def test_the_full_tier_names_real_tests(pytestconfig):
    ids = set(_collected(pytestconfig, "full"))
    stale = sorted(set(conftest.FULL_ONLY) - ids)
    assert not stale, f"FULL_ONLY names no test: {stale}"
