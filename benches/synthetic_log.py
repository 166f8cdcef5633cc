"""A large synthetic log set for benchmarks, written the way CUBRID logs transactions.

    python benches/synthetic_log.py DIR [--mb 400] [--seed 1] [--page-size 16384]

Written with :class:`walcdc.testing.Workload`: four interleaved sessions; transactions of 1 to
40 changes (inserts, updates, deletes of rows of 100 to 2,000 bytes, half of them repetitive
enough for LZ4), one in ten aborted, savepoint rollbacks and failed statements now and then,
one 20,000-change transaction per 100 MB, trids reused; archives of 32 MiB, written as they
fill (constant memory). Its tables have no
class records (rows are not decoded to typed values), so it measures reading, chasing and
assembling, and how Spark scales with the size of the log; the workload generator of the scale
issue adds schemas and the fixtures' record mix.
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path


def write(directory: str, mb: int, seed: int, page_size: int) -> dict:
    from walcdc.testing import LogWriter, Workload, cdc_oid, heap_row

    rnd = random.Random(seed)
    pages = (32 << 20) // page_size
    # Archives go to disk as they fill: memory stays at about two of them, whatever the size.
    w = LogWriter(page_size=page_size, active_pages=pages, archive_pages=pages, stream_to=directory)
    wl = Workload(w)
    classes = [cdc_oid(0, 229, i) for i in range(1, 21)]
    bodies = []
    for i in range(64):
        n = rnd.randint(100, 2000)
        seed_bytes = rnd.randbytes(rnd.randint(1, 8))
        bodies.append((seed_bytes * (n // len(seed_bytes) + 1))[:n] if i % 2 else rnd.randbytes(n))
    target = mb << 20
    at_time = 1_700_000_000
    slot = 0
    free = list(range(1, 9))
    sessions: list = []
    next_huge = 100 << 20
    while True:
        written = w.end_lsa() >> 16
        if written * page_size >= target and not sessions:
            break
        while len(sessions) < 4 and written * page_size < target:
            size = rnd.randint(1, 40)
            if written * page_size >= next_huge:
                size, next_huge = 20_000, next_huge + (100 << 20)
            sessions.append([wl.begin(free.pop(0)), size, []])
        s = sessions[rnd.randrange(len(sessions))]
        t, left, sps = s
        if left == 0:
            at_time += 1
            if rnd.random() < 0.1:
                t.abort(at_time)
            else:
                t.commit(at_time)
                wl.committed.clear()  # the model is not needed here: memory stays flat
            sessions.remove(s)
            free.append(t.trid)
            continue
        s[1] -= 1
        slot += 1
        body = bodies[slot % len(bodies)]
        cls = classes[slot % len(classes)]
        r = rnd.random()
        if r < 0.55:
            t.insert(cls, body, page=1000 + slot // 60, slot=slot % 60 + 1)
        elif r < 0.8:
            t.update(cls, heap_row(1, body), heap_row(1, body[::-1]), page=900, slot=slot % 60 + 1)
        elif r < 0.95:
            t.delete(cls, heap_row(1, body), page=800, slot=slot % 60 + 1)
        elif r < 0.97:
            sps.append(t.savepoint())
        elif r < 0.99 and sps:
            t.rollback_to(sps.pop())
        else:
            t.failed_statement(cls, body, page=700, slot=slot % 60 + 1)
    out = w.finish(directory)
    return {"end_lsa": out["end_lsa"], "volumes": len(list(Path(directory).glob("*_lg*")))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("directory")
    ap.add_argument("--mb", type=int, default=400)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--page-size", type=int, default=16384)
    args = ap.parse_args()
    print(write(args.directory, args.mb, args.seed, args.page_size))


if __name__ == "__main__":
    main()
