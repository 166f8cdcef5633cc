"""Valid-checksum corruption: the fixtures edited field by field (record header LSAs, trid and
type; data header words: rcvindex, page, offset, lengths, supplement types; payload bytes:
zip prefixes, row headers, MVCC flags, representation ids, variable offsets, DDL lengths; the
page header's first-record offset), each page's checksum recomputed so the edit reaches the
decoders. Every case must end in a clean read (rows may carry ``decode_error``) or a
:class:`walcdc.LogError` naming the file and the LSA: never a panic, another exception, a hang
or a memory blow-up.

The cases run in a worker process (``corruption_worker.py``) with an address-space cap; each
case has a time limit, so a hang or a blow-up fails this test with the case that caused it
instead of stopping the suite."""

from __future__ import annotations

import collections
import json
import os
import resource
import selectors
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import fixture_dir, tiered

WORKER = Path(__file__).with_name("corruption_worker.py")
CAMPAIGN = Path(__file__).with_name("campaign_worker.py")
MEMORY_CAP = 3 << 30  # bytes of address space for the worker
CASE_SECONDS = 30
# fixture: (cases per record, seed, records per kind of record). The default tier edits one
# record of every kind twice (and its page header's offset four times), ~2,000 cases; the full
# tier two or three records of every kind six to eight times, ~7,600.
PLAN = tiered(
    default={"breadth": (2, 1, 1), "v11_2": (2, 2, 1), "crash": (2, 3, 1)},
    full={"breadth": (8, 1, 3), "v11_2": (6, 2, 2), "crash": (6, 3, 2)},
)


def _cap_memory():
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))


def run_worker(log_dir: Path, *args, worker: Path = WORKER):
    """Outcome lines of every case; fails naming the case that hangs or kills the worker."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    proc = subprocess.Popen(
        [sys.executable, str(worker), str(log_dir), *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        preexec_fn=_cap_memory,
    )
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    outcomes, current, started = [], None, 0
    deadline = time.monotonic() + 120  # case generation
    try:
        while True:
            if not sel.select(timeout=max(0.0, deadline - time.monotonic())):
                pytest.fail(f"{log_dir.name}: case {current} ran over {CASE_SECONDS} s (a hang?)")
            line = proc.stdout.readline()
            if not line:
                break
            msg = json.loads(line)
            if "start" in msg:
                current = msg
                started += 1
                deadline = time.monotonic() + CASE_SECONDS
            elif "outcome" in msg:
                outcomes.append(msg)
    finally:
        proc.kill()
        proc.wait()
        stderr = proc.stderr.read()
        proc.stdout.close()
        proc.stderr.close()
    if proc.returncode not in (0, -9) or (
        # Every case started has its outcome (case numbers may skip: the random campaign
        # passes over an edit that changes nothing).
        started != len(outcomes)
    ):
        pytest.fail(
            f"{log_dir.name}: the worker died (status {proc.returncode}) in case {current}:\n"
            f"{stderr[-3000:]}"
        )
    return outcomes


@pytest.mark.parametrize("name", sorted(PLAN))
def test_valid_checksum_corruption(name, tmp_path):
    src = fixture_dir(name)
    log_dir = tmp_path / name
    shutil.copytree(src, log_dir)
    outcomes = run_worker(log_dir, *PLAN[name])
    classes = collections.Counter(o["outcome"] for o in outcomes)
    errors = collections.Counter(o.get("error") for o in outcomes if o["outcome"] == "error")
    decode_errors = sum(1 for o in outcomes if o["outcome"] == "clean" and o["decode_errors"])
    print(
        f"{name}: {len(outcomes)} cases {dict(classes)} {dict(errors)}; "
        f"{decode_errors} clean reads with decode_error rows"
    )
    bad = [o for o in outcomes if o["outcome"] != "clean" and o["outcome"] != "error"]
    assert not bad, json.dumps(bad[:10], indent=1)
    # The edits reach the decoders: some reads fail, with the errors the log format has.
    assert len(outcomes) >= tiered(500, 900)
    assert classes["clean"] and classes["error"]
    assert errors["CorruptRecordError"] > 0
    # A blow-up short of the cap is still a defect: no case may grow the worker by 512 MiB.
    grown = max(o["rss_growth_mb"] for o in outcomes)
    assert grown < 512, [o for o in outcomes if o["rss_growth_mb"] == grown][:1]
    # Every case restored the bytes it edited: the copy reads as the fixture.
    for f in src.iterdir():
        assert (log_dir / f.name).read_bytes() == f.read_bytes(), f.name


#: Random edits per fixture: a seeded sample here, a thousand and more in the full tier.
CAMPAIGN_CASES = tiered(default=60, full=1200)


@pytest.mark.parametrize("name", ["p4k", "p16k", "crash", "breadth", "v11_2"])
def test_random_edits_lose_nothing_silently(name, tmp_path):
    """The random campaign (campaign_worker.py): every edit under a valid checksum ends in a
    LogError naming the file and LSA, or a read whose committed events are those of the
    pristine log, or fewer with the difference said (a warning or a count); never fewer
    silently, never another exception."""
    src = fixture_dir(name)
    log_dir = tmp_path / name
    shutil.copytree(src, log_dir)
    seed = sorted(PLAN).index(name) if name in PLAN else len(PLAN) + len(name)
    outcomes = run_worker(log_dir, CAMPAIGN_CASES, seed, worker=CAMPAIGN)
    classes = collections.Counter(o["outcome"] for o in outcomes)
    print(f"{name}: {len(outcomes)} random edits {dict(classes)}")
    assert len(outcomes) >= CAMPAIGN_CASES * 0.9
    unexplained = [o for o in outcomes if o["outcome"] not in ("clean", "error")]
    assert not unexplained, json.dumps(unexplained[:10], indent=1)
    assert classes["error"] and classes["clean"]
    grown = max(o["rss_growth_mb"] for o in outcomes)
    assert grown < 512
    for f in src.iterdir():
        assert (log_dir / f.name).read_bytes() == f.read_bytes(), f.name
