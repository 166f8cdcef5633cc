"""Runs valid-checksum corruption cases on a copy of one fixture, one after another, in a
process of its own (tests/test_corruption.py starts it with a memory cap and watches each case
with a time limit).

A case writes a few bytes into one record (a field of its header or data header, or a byte of
its payload) or into its page's header, recomputes that page's checksum so the edit reaches the
decoders, reads around it, then puts the bytes back. Each outcome is one JSON line on stdout:
``{"case": i, "outcome": ..., ...}`` after ``{"start": i}``; the parent knows which case a
crash or hang belongs to.

Allowed outcomes: ``clean`` (read to the end, perhaps with rows carrying ``decode_error`` or
warnings), ``error`` (a :class:`walcdc.LogError` naming the file and the LSA). Anything else is
reported as ``bad`` with what happened.

Usage: ``python corruption_worker.py LOG_DIR CASES_PER_RECORD SEED [RECORDS_PER_KIND]``
"""

from __future__ import annotations

import json
import os
import random
import resource
import struct
import sys
import warnings
from collections import defaultdict
from pathlib import Path

import walcdc
from walcdc import lsa as L
from walcdc.testing import page_with_checksum

PAGE_HEADER = 16  # logical pageid (8), first-record offset (2), flags (2), checksum (4)
RECORD_HEADER = 32
# Record header fields: prev_tranlsa, back_lsa, forw_lsa (LSAs), trid, type.
HEADER_FIELDS = [(0, 8), (8, 8), (16, 8), (24, 4), (28, 4)]
WINDOW_RECORDS = 300


def page_map(log_dir: Path, page_size: int):
    """Logical page id -> (volume path, file offset of the page)."""
    where = {}
    for vol in sorted(log_dir.iterdir()):
        data = vol.read_bytes()
        for phys in range(1, len(data) // page_size):
            pid = struct.unpack_from("<q", data, phys * page_size)[0]
            if pid >= 0:
                where.setdefault(pid, (vol, phys * page_size))
    return where


def values_for(old: bytes, rnd: random.Random):
    n = len(old)
    v = int.from_bytes(old, "little")
    mask = (1 << (8 * n)) - 1
    cands = [0, mask, v ^ (1 << (8 * n - 1)), (v + 1) & mask, (v - 1) & mask, v ^ 0xFF]
    if n == 8:  # LSAs: NULL, the next page, a far page
        pid, off = v & 0xFFFFFFFFFFFF, v >> 48
        cands += [
            0xFFFF_FFFF_FFFF_FFFF,
            ((off << 48) | (pid + 1)) & mask,
            (off << 48) | 0x7FFF_FFFF,
        ]
    else:
        cands += [0x7FFFFFFF, rnd.randrange(1 << (8 * n))]
    out = []
    for c in cands:
        b = (c & mask).to_bytes(n, "little")
        if b != old and b not in out:
            out.append(b)
    return out


def cases_for(log, log_dir: Path, per_record: int, seed: int, per_kind: int):
    page_size = log.header()["page_size"]
    where = page_map(log_dir, page_size)
    recs = log.records().read_all()
    kinds = defaultdict(list)
    cols = [recs.column(c).to_pylist() for c in ("lsa", "type", "rcvindex", "supplement_type")]
    size = recs.column("size").to_pylist()
    for i, (_lsa, typ, rcv, sup) in enumerate(zip(*cols)):
        kinds[(typ, rcv, sup)].append(i)
    rnd = random.Random(seed)
    cases = []
    lsas = cols[0]
    for key in sorted(kinds, key=str):
        idx = kinds[key]
        picks = sorted({idx[0], idx[len(idx) // 2], idx[-1]})[:per_kind]
        for i in picks:
            lsa = lsas[i]
            pid, off = L.split(lsa)
            if pid not in where:
                continue
            vol, page_at = where[pid]
            at = page_at + PAGE_HEADER + off
            in_page = min(size[i], page_size - PAGE_HEADER - off)
            with open(vol, "rb") as fh:
                fh.seek(at)
                data = fh.read(in_page)
            # Start on an earlier page: a damaged page must be reached by the walk, not by
            # checking where the caller's start lies.
            j = i
            while j > 0 and L.split(lsas[j])[0] >= pid:
                j -= 1
            start = lsas[j]
            end = lsas[min(len(lsas) - 1, i + WINDOW_RECORDS)]
            edits = []
            for fo, n in HEADER_FIELDS:
                for v in values_for(data[fo : fo + n], rnd):
                    edits.append((fo, v))
            # Data header and payload: aligned words and single bytes.
            for fo in range(RECORD_HEADER, min(len(data), 128) - 3, 4):
                for v in values_for(data[fo : fo + 4], rnd):
                    edits.append((fo, v))
            for _ in range(8):
                if len(data) > RECORD_HEADER:
                    fo = rnd.randrange(RECORD_HEADER, len(data))
                    edits.append((fo, bytes([data[fo] ^ (1 << rnd.randrange(8))])))
            rnd.shuffle(edits)
            for fo, v in edits[:per_record]:
                cases.append(
                    dict(
                        vol=str(vol),
                        page=page_at,
                        at=at + fo,
                        data=v.hex(),
                        lsa=lsa,
                        start=start,
                        end=end,
                        what=f"{key} +{fo}",
                    )
                )
            # The page header's first-record offset.
            for v in (b"\xff\xff", b"\x00\x00", struct.pack("<h", off + 8), b"\xff\x7f"):
                cases.append(
                    dict(
                        vol=str(vol),
                        page=page_at,
                        at=page_at + 8,
                        data=v.hex(),
                        lsa=lsa,
                        start=start,
                        end=end,
                        what=f"{key} page offset",
                    )
                )
    return cases, page_size


def start_states(log_dir: Path, starts):
    """Reader states of the pristine log at each of ``starts`` (both streams), each read on
    from the one before: a case goes on from its start's state instead of learning the
    catalog again from the beginning of the log (nothing before a case's start is edited)."""
    out = {}
    for committed in (False, True):
        state = None
        for start in sorted(set(starts)):
            kw = {"state": state} if state is not None else {}
            head = walcdc.read_changes(log_dir, end=start, committed_only=committed, **kw)
            head.read_all()
            state = head.state()
            out[(start, committed)] = state
    return out


def run_case(log_dir: Path, c, states):
    """Applies the edit, reads around it; returns the outcome dict."""
    found = {"decode_errors": 0}
    log = walcdc.open_log(log_dir)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        log.records(start=c["start"], end=c["end"], payloads=True).read_all()
        for committed in (False, True):
            t = walcdc.read_changes(
                log_dir,
                state=states[(c["start"], committed)],
                end=c["end"],
                committed_only=committed,
            ).read_all()
            errs = t.column("decode_error").null_count
            found["decode_errors"] += t.num_rows - errs
    return found


def main() -> None:
    log_dir = Path(sys.argv[1])
    per_record = int(sys.argv[2])
    seed = int(sys.argv[3])
    per_kind = int(sys.argv[4]) if len(sys.argv) > 4 else 2
    log = walcdc.open_log(log_dir)
    cases, page_size = cases_for(log, log_dir, per_record, seed, per_kind)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        states = start_states(log_dir, [c["start"] for c in cases])
    print(json.dumps({"cases": len(cases)}), flush=True)
    base_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    for i, c in enumerate(cases):
        print(json.dumps({"start": i, "what": c["what"]}), flush=True)
        with open(c["vol"], "r+b") as fh:
            fh.seek(c["page"])
            page = fh.read(page_size)
            edited = bytearray(page)
            off = c["at"] - c["page"]
            new = bytes.fromhex(c["data"])
            edited[off : off + len(new)] = new
            fh.seek(c["page"])
            fh.write(page_with_checksum(bytes(edited)))
            fh.flush()
            try:
                found = run_case(log_dir, c, states)
                out = {"outcome": "clean", **found}
            except walcdc.LogError as e:
                named = e.file is not None and e.lsa is not None
                out = {
                    "outcome": "error" if named else "bad",
                    "error": type(e).__name__,
                    "message": str(e)[:300],
                }
            except BaseException as e:  # noqa: BLE001 -- everything else is reported
                out = {"outcome": "bad", "error": type(e).__name__, "message": str(e)[:300]}
            finally:
                fh.seek(c["page"])
                fh.write(page)
                fh.flush()
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        out.update(
            case=i,
            what=c["what"],
            lsa=L.format_lsa(c["lsa"]),
            at=c["at"],
            data=c["data"],
            rss_growth_mb=(rss - base_rss) // 1024,
        )
        print(json.dumps(out), flush=True)
    os._exit(0)


if __name__ == "__main__":
    main()
