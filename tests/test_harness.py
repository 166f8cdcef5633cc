"""The benchmark harness (benches/harness.py) on a tiny generated log, so that it cannot rot:
every case runs in its own process, and the JSON, Markdown and plot are written."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benches"))

import harness  # noqa: E402


def test_a_tiny_run_writes_every_output(tmp_path, capsys):
    cases = "walk,changes,typed,table_typed,filtered,engine,changes_N,table_typed_N"
    harness.main(
        ["--sizes", "1MB,2MB", "--cache", str(tmp_path / "cache"), "--out", str(tmp_path / "out")]
        + ["--cases", cases, "--page-size", "4096"]
    )
    result = json.loads((tmp_path / "out" / "results.json").read_text())
    rows = result["rows"]
    assert {r["case"] for r in rows} == {"read", *cases.split(",")}
    assert {r["size_bytes"] for r in rows} == {1 << 20, 2 << 20}
    for r in rows:
        assert r["seconds"] > 0 and r["peak_rss_mb"] > 0 and r["peak_anon_mb"] > 0
        assert r["case"] == "read" or r["items"] > 0
    text = (tmp_path / "out" / "results.md").read_text()
    assert "### 1 MB of log" in text and "| typed |" in text
    assert (tmp_path / "out" / "results.png").stat().st_size > 10_000
    # The logs are cached: a second run generates nothing.
    logs = sorted((tmp_path / "cache").iterdir())
    stamp = [p.stat().st_mtime for p in logs]
    harness.main(
        ["--sizes", "1MB", "--cache", str(tmp_path / "cache"), "--out", str(tmp_path / "out")]
        + ["--cases", "walk", "--page-size", "4096"]
    )
    assert [p.stat().st_mtime for p in sorted((tmp_path / "cache").iterdir())] == stamp
