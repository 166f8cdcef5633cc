"""A server stand-in for the follow tests: appends transactions to a live log and flushes it
as CUBRID does (pages into their ring slots, an end-of-log marker, the header last; archives as
the ring fills), in its own process, while a test follows the log.

Deterministic from the seed. Between flushes it sleeps a little, so the follower polls in the
middle of transactions and of pages; some flushes are cut short (``torn``: only part of the
last page written, no header) and completed by the next. Every committed transaction's events
(what a reader must report) are appended to ``<dir>/model.jsonl`` as it commits; at the end it
writes ``<dir>/done`` and leaves the log as a running server would (no shutdown).

With ``--resume`` it goes on with the log after a writer was killed (``LogWriter(resume=True)``,
as a server restarting after a crash): the transactions the crash left open are aborted, and
the model keeps only the transactions whose commit record made it to disk.

Usage: ``python live_writer.py DIR SEED TRANSACTIONS [RING_PAGES] [--resume]``
"""

from __future__ import annotations

import json
import os
import random
import sys
import time
from pathlib import Path

from walcdc.testing import LogWriter, Workload, cdc_oid


def _event_json(e: dict) -> str:
    return json.dumps({k: (v.hex() if isinstance(v, bytes) else v) for k, v in e.items()})


def main(
    directory: str, seed: int, transactions: int, ring_pages: int = 24, resume: bool = False
) -> None:
    rnd = random.Random(seed)
    out = Path(directory)
    writer = LogWriter(
        page_size=4096,
        active_pages=ring_pages,
        archive_pages=ring_pages // 2,
        stream_to=out,
        resume=resume,
    )
    model = out / "model.jsonl"
    if resume:
        # Commits past the end the crash left never happened; open transactions are aborted.
        end = writer.end_lsa()
        kept = [x for x in model.read_text().splitlines() if json.loads(x)["commit_lsa"] < end]
        model.write_text("".join(x + "\n" for x in kept))
        for trid in writer.open_transactions():
            writer.append(trid, "LOG_ABORT", at_time=1_700_000_000)
    workload = Workload(writer)
    writer.flush()  # the volume exists (empty) before the first transaction
    log_model = open(model, "a")  # noqa: SIM115
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
                # The model first (durable), then the log: a crash in between leaves a commit
                # in the model that --resume drops.
                log_model.write("".join(_event_json(e) + "\n" for e in t.commit()))
                log_model.flush()
                os.fsync(log_model.fileno())
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
    log_model.close()
    (out / "done").write_text("")


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--resume"]
    main(args[0], int(args[1]), int(args[2]), *map(int, args[3:4]), resume="--resume" in sys.argv)
