"""A seeded campaign of random valid-checksum edits of one fixture, each read back with a
silent-loss oracle (tests/test_corruption.py starts it with a memory cap and a time limit per
case, as for corruption_worker.py).

Each case writes a few random bytes into a random place of one record (its header, data header
or payload) or of its page's header and recomputes the page's checksum, or swaps its page with
the next one of the volume, or copies the next one over it (whole pages: their checksums
hold); reads the committed stream over a window that holds the edit (from the reader state a
pristine read left at an anchor before it, so nothing before the anchor is read again); then
puts the bytes back. Outcomes, one JSON line per case after ``{"start": i}``:

- ``error``: a :class:`walcdc.LogError` naming the file and the LSA;
- ``clean``: read to the end with as many committed events as the pristine window, or fewer
  with the difference explained: a warning, or a count that grew (transactions aborted,
  restarted, partial or left open, changes undone, records unplaced, pages skipped);
- ``loss``: fewer committed events and nothing said: a silent loss;
- ``bad``: any other exception, or a LogError that names no file or LSA.

Usage: ``python campaign_worker.py LOG_DIR CASES SEED``
"""

from __future__ import annotations

import json
import os
import random
import resource
import sys
import warnings
from pathlib import Path

import walcdc
from walcdc import lsa as L
from walcdc.testing import PAGE_HEADER_SIZE, page_locations, patch_page

ANCHORS = 24
WINDOW_RECORDS = 400
#: Counters whose growth explains fewer committed events.
EXPLAINING = (
    "aborted_transactions",
    "undone_events",
    "restarted_transactions",
    "partial_transactions",
    "pages_beyond_end",
)


def read_window(log_dir: Path, state, end: int):
    """(committed events, what explains a difference) of the window from ``state`` to
    ``end``."""
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        stream = walcdc.read_changes(log_dir, state=state, end=end, mode="id", decode=False)
        events = stream.read_all().num_rows
        stats = stream.stats
    explain = {k: stats.get(k, 0) for k in EXPLAINING}
    explain["pending"] = len(stream.pending)
    explain["unplaced"] = len(stream.unplaced)
    explain["skipped"] = len(stream.skipped)
    return events, explain, [type(w.message).__name__ for w in said]


def judge(log_dir: Path, state, end: int, pristine) -> dict:
    """The outcome of reading the edited window (see the module's documentation)."""
    try:
        events, explain, said = read_window(log_dir, state, end)
    except walcdc.LogError as e:
        named = e.file is not None and e.lsa is not None
        return {
            "outcome": "error" if named else "bad",
            "error": type(e).__name__,
            "message": str(e)[:200],
        }
    except BaseException as e:  # noqa: BLE001 -- everything else is reported
        return {"outcome": "bad", "error": type(e).__name__, "message": str(e)[:300]}
    want, explain0, _ = pristine
    grew = [x for x in explain if explain[x] > explain0[x]]
    if events >= want or said or grew:
        return {"outcome": "clean", "events": events - want, "said": said, "grew": grew}
    return {"outcome": "loss", "lost": want - events}


def pages_case(log_dir: Path, path, page_at: int, page_size: int, kind: str, state, end, pristine):
    """Swaps the page at ``page_at`` with the next one of its volume, or copies the next one
    over it; judges the read; puts both back."""
    with open(path, "r+b") as fh:
        fh.seek(page_at)
        both = fh.read(2 * page_size)
        if len(both) < 2 * page_size:
            return {"outcome": "clean", "events": 0, "said": [], "grew": []}
        this, nxt = both[:page_size], both[page_size:]
        fh.seek(page_at)
        fh.write(nxt + this if kind == "swap" else nxt + nxt)
        fh.flush()
        try:
            return judge(log_dir, state, end, pristine)
        finally:
            fh.seek(page_at)
            fh.write(both)
            fh.flush()


def anchors(log_dir: Path, lsas):
    """Reader states of the pristine log at evenly spaced records: ``[(index, state)]``, each
    read on from the one before."""
    out, state = [], None
    for i in sorted({k * len(lsas) // ANCHORS for k in range(1, ANCHORS)}):
        kw = {"state": state} if state is not None else {}
        head = walcdc.read_changes(log_dir, end=lsas[i], mode="id", decode=False, **kw)
        head.read_all()
        state = head.state()
        out.append((i, state))
    return out


def main() -> None:
    log_dir, count, seed = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    rnd = random.Random(seed)
    log = walcdc.open_log(log_dir)
    page_size = log.header()["page_size"]
    where = page_locations(log_dir, page_size)
    recs = log.records(columns=["lsa", "size"]).read_all()
    lsas, sizes = recs.column("lsa").to_pylist(), recs.column("size").to_pylist()
    points = anchors(log_dir, lsas)
    pristine = {}
    print(json.dumps({"cases": count}), flush=True)
    base_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    for case in range(count):
        k = rnd.randrange(len(points))
        first, state = points[k]
        i = rnd.randrange(first, min(len(lsas), first + 20 * WINDOW_RECORDS))
        lsa = lsas[i]
        end = lsas[min(len(lsas) - 1, i + WINDOW_RECORDS)]
        if (k, end) not in pristine:
            pristine[(k, end)] = read_window(log_dir, state, end)
        pid, off = L.split(lsa)
        if pid not in where:
            continue
        path, page_at = where[pid]
        span = max(1, min(sizes[i], page_size - PAGE_HEADER_SIZE - off))
        kind = rnd.choice(["header", "header", "data", "payload", "page", "swap", "copy"])
        if kind in ("swap", "copy"):
            print(json.dumps({"start": case, "what": f"{kind} page {pid}"}), flush=True)
            out = pages_case(
                log_dir, path, page_at, page_size, kind, state, end, pristine[(k, end)]
            )
            out.update(case=case, what=f"{kind} page {pid}", new="")
            rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            out["rss_growth_mb"] = (rss - base_rss) // 1024
            print(json.dumps(out), flush=True)
            continue
        if kind == "page":
            at_byte, n = rnd.choice([(0, 8), (8, 2), (10, 2)])
        elif kind == "header":
            field_at = rnd.choice([0, 8, 16, 24, 28])
            at_byte, n = PAGE_HEADER_SIZE + off + field_at, 8 if field_at < 24 else 4
        else:
            lo = 32 if kind == "data" else min(span - 1, 32)
            hi = min(span, 96) if kind == "data" else span
            rel = rnd.randrange(lo, max(lo + 1, hi))
            at_byte, n = PAGE_HEADER_SIZE + off + rel, rnd.choice([1, 1, 2, 4])
        n = min(n, page_size - at_byte)
        with open(path, "rb") as fh:
            fh.seek(page_at + at_byte)
            old = fh.read(n)
        new = bytes(rnd.randrange(256) for _ in range(n))
        if rnd.random() < 0.3:  # a flipped bit: the nearest wrong value
            b = bytearray(old)
            b[rnd.randrange(n)] ^= 1 << rnd.randrange(8)
            new = bytes(b)
        if new == old:
            continue
        what = f"{kind} +{at_byte - PAGE_HEADER_SIZE - off} of {L.format_lsa(lsa)}"
        print(json.dumps({"start": case, "what": what}), flush=True)
        page = patch_page(path, page_at, page_size, at_byte, new)
        try:
            out = judge(log_dir, state, end, pristine[(k, end)])
        finally:
            with open(path, "r+b") as fh:
                fh.seek(page_at)
                fh.write(page)
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        out.update(case=case, what=what, new=new.hex(), rss_growth_mb=(rss - base_rss) // 1024)
        print(json.dumps(out), flush=True)
    os._exit(0)


if __name__ == "__main__":
    main()
