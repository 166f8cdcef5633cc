"""A server stand-in for the follow tests: appends transactions to a live log and flushes it
as CUBRID does (pages into their ring slots, an end-of-log marker, the header last; archives as
the ring fills), in its own process, while a test follows the log.

Deterministic from the seed. Between flushes it sleeps a little, so the follower polls in the
middle of transactions and of pages; some flushes are cut short (``torn``: only part of the
last page written, no header) and completed by the next. At the end it writes the model of what
a reader must report (every event of every committed transaction, in commit order) to
``<dir>/model.json`` and leaves the log as a running server would (no shutdown).

Usage: ``python live_writer.py DIR SEED TRANSACTIONS [RING_PAGES]``
"""

from __future__ import annotations

import json
import random
import sys
import time
from pathlib import Path

from walcdc.testing import LogWriter, Workload, cdc_oid


def main(directory: str, seed: int, transactions: int, ring_pages: int = 24) -> None:
    rnd = random.Random(seed)
    out = Path(directory)
    writer = LogWriter(
        page_size=4096, active_pages=ring_pages, archive_pages=ring_pages // 2, stream_to=out
    )
    workload = Workload(writer)
    writer.flush()  # the volume exists (empty) before the first transaction
    live: dict = {}
    open_txns: list = []
    free = list(range(1, 30))
    done = 0
    while done < transactions or open_txns:
        if done + len(open_txns) < transactions and len(open_txns) < 3 and rnd.random() < 0.4:
            open_txns.append(
                [workload.begin(free.pop(rnd.randrange(len(free)))), rnd.randint(1, 12)]
            )
        if not open_txns:
            continue
        s = rnd.choice(open_txns)
        t, left = s
        if left == 0:
            if rnd.random() < 0.15:
                t.abort()
            else:
                t.commit()
            open_txns.remove(s)
            free.append(t.trid)
            done += 1
        else:
            s[1] -= 1
            table = rnd.randrange(4)
            klass = cdc_oid(0, 200 + table, 1)
            page = 1000 + table
            slot = rnd.randrange(1, 60)
            body = bytes(rnd.getrandbits(8) for _ in range(rnd.choice([20, 80, 300, 1500])))
            key = (table, slot)
            if key in live and rnd.random() < 0.5:
                if rnd.random() < 0.5:
                    new = bytes(rnd.getrandbits(8) for _ in range(len(body)))
                    t.update(klass, live[key], new, page, slot)
                    live[key] = new
                else:
                    t.delete(klass, live.pop(key), page, slot)
            else:
                t.insert(klass, body, page, slot)
                live[key] = body  # the model is the log's: images as the reader rebuilds them
        r = rnd.random()
        if r < 0.15:
            writer.flush(torn=rnd.randrange(16, 4096))
        elif r < 0.6:
            writer.flush()
            time.sleep(rnd.choice([0, 0, 0.002, 0.01]))
    writer.flush()
    model = [
        {k: (v.hex() if isinstance(v, bytes) else v) for k, v in e.items()}
        for txn in workload.committed
        for e in txn
    ]
    tmp = out / "model.json.tmp"
    tmp.write_text(json.dumps(model))
    tmp.rename(out / "model.json")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), *map(int, sys.argv[4:5]))
