"""A CUBRID-like workload written straight into log volumes, at any size, in constant memory.

    python benches/workload.py DIR --size 1GB [--seed 1] [--page-size 16384] [--archive-mb 64]

Twenty typed tables (``dba.w_00`` .. ``dba.w_19``) with the fixtures' type mix: integer keys,
BIGINT, DOUBLE, NUMERIC, DATETIME, short and long VARCHAR (long ones repetitive, as text is, so
CUBRID's LZ4 compresses them), CHAR, JSON documents and SETs; four sessions interleaving small
transactions (1 to 30 changes) with a 20,000-change one every 256 MB; inserts, updates and
deletes of live rows; one transaction in twenty aborted; savepoint rollbacks and failed
statements now and then; an ALTER TABLE ... ADD COLUMN on some table every 128 MB (rows of the
old representation stay in the log, updated rows take the new one); trids reused. Archives are
written as they fill (``LogWriter(stream_to=)``): memory is that of a ring, an archive and the
live rows (at most 500 per table). Deterministic from the seed.

With ``keep_model`` the generator keeps what every committed transaction changed
(``Workload.committed``: op, class OID, row OID, images), which reading the log back must give
exactly (tests/test_workload.py); large runs leave it off.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

HERE = Path(__file__).resolve().parent

TABLES = 20
MAX_LIVE = 500  # live rows kept per table (to update and delete them)
WORDS = (
    "order customer invoice shipped pending payment refund warehouse seoul busan daejeon "
    "product quantity price discount total status active archived note review priority"
).split()


def parse_size(text: str) -> int:
    """``"1GB"``, ``"512MB"``, ``"64KiB"``, ``"1000000"`` in bytes."""
    t = text.strip().upper().replace("IB", "B")
    for suffix, factor in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10), ("B", 1)):
        if t.endswith(suffix):
            return int(float(t[: -len(suffix)]) * factor)
    return int(t)


def table_columns(rnd: random.Random, i: int) -> List[Dict[str, Any]]:
    """A table of the fixtures' type mix: a key, then some of the usual columns."""
    cols = [{"name": "id", "type": "INTEGER", "primary_key": True}]
    palette = [
        {"name": "amount", "type": "BIGINT"},
        {"name": "ratio", "type": "DOUBLE"},
        {"name": "price", "type": "NUMERIC", "precision": 15, "scale": 4},
        {"name": "created", "type": "DATETIME"},
        {"name": "tag", "type": "VARCHAR", "precision": 40},
        {"name": "note", "type": "VARCHAR", "precision": 4000},
        {"name": "code", "type": "CHAR", "precision": 10},
        {"name": "doc", "type": "JSON"},
        {"name": "flags", "type": "SET", "set_domains": [{"type": "INTEGER"}]},
    ]
    # Every table has a tag and a long note (the fixtures' rows are mostly text); the rest vary.
    chosen = [palette[4], palette[5]] + rnd.sample(
        [p for j, p in enumerate(palette) if j not in (4, 5)], 3 + i % 4
    )
    return cols + [dict(c) for c in chosen]


def value(rnd: random.Random, col: Dict[str, Any], key: int) -> Any:
    """A value of ``col`` in its CDC form (what the change stream reports)."""
    t = col["type"]
    if col["name"] == "id":
        return key
    if rnd.random() < 0.05:
        return None
    if t == "INTEGER":
        return rnd.randint(-(2**31), 2**31 - 1)
    if t == "BIGINT":
        return rnd.randint(-(2**40), 2**40)
    if t == "DOUBLE":
        return round(rnd.uniform(-1e6, 1e6), 3)
    if t == "NUMERIC":
        return f"{rnd.randint(0, 10**10)}.{rnd.randint(0, 9999):04d}"
    if t == "DATETIME":
        return (
            f"20{rnd.randint(10, 29)}-{rnd.randint(1, 12):02d}-{rnd.randint(1, 28):02d} "
            f"{rnd.randint(0, 23):02d}:{rnd.randint(0, 59):02d}:{rnd.randint(0, 59):02d}."
            f"{rnd.randint(0, 999):03d}"
        )
    if t == "VARCHAR" and col["precision"] > 100:
        n = rnd.choice([0, 1, 2, 3, 8, 30])  # most notes short, some long enough to be zipped
        return " ".join(rnd.choice(WORDS) for _ in range(n * 10 + 1))
    if t == "VARCHAR":
        return f"{rnd.choice(WORDS)}-{rnd.randint(0, 99999)}"
    if t == "CHAR":
        return f"{rnd.choice(WORDS)[:10]:<10}"
    if t == "JSON":
        return {"k": key, "w": rnd.choice(WORDS), "n": [rnd.randint(0, 9) for _ in range(3)]}
    if t == "SET":
        return sorted({rnd.randint(0, 50) for _ in range(rnd.randint(0, 4))})
    raise ValueError(t)


class Generator:
    def __init__(
        self,
        directory,
        size: int,
        seed: int = 1,
        page_size: int = 16384,
        archive_mb: int = 64,
        keep_model: bool = False,
        alter_every: int = 128 << 20,
        huge_every: int = 256 << 20,
        huge_size: int = 20_000,
    ):
        from walcdc.testing import LogWriter, Table, Workload, cdc_oid

        self.directory = Path(directory)
        self.size = size
        self.rnd = random.Random(seed)
        self.page_size = page_size
        pages = max(8, (archive_mb << 20) // page_size)
        self.writer = LogWriter(
            page_size=page_size, active_pages=pages, archive_pages=pages, stream_to=self.directory
        )
        self.workload = Workload(self.writer)
        self.keep_model = keep_model
        self.alter_every, self.huge_every, self.huge_size = alter_every, huge_every, huge_size
        self.tables = [
            Table.create(f"dba.w_{i:02d}", cdc_oid(0, 300 + i, 1), table_columns(self.rnd, i))
            for i in range(TABLES)
        ]
        self.live: List[Dict[int, tuple]] = [{} for _ in range(TABLES)]  # slot -> (key, row)
        self.next_key = [1] * TABLES
        self.at_time = 1_700_000_000
        self.stats = {"transactions": 0, "committed": 0, "aborted": 0, "changes": 0, "alters": 0}

    def written(self) -> int:
        return (self.writer.end_lsa() >> 16) * self.page_size

    def _texts(self, i: int, key: int) -> Dict[str, Optional[str]]:
        """A row of table ``i`` (current columns) as JSON texts of the CDC forms."""
        cols = self.tables[i].representation()[1]
        values = {c["name"]: value(self.rnd, c, key) for c in cols}
        return {k: None if v is None else json.dumps(v) for k, v in values.items()}

    def _change(self, t) -> None:
        from walcdc.testing import typed_row

        i = self.rnd.randrange(TABLES)
        table, live = self.tables[i], self.live[i]
        page = 10_000 + i * 1_000
        r = self.rnd.random()
        if not live or r < 0.5:
            key = self.next_key[i]
            self.next_key[i] += 1
            slot = key % MAX_LIVE + 1
            if slot in live:  # the slot's old row goes first
                t.delete(table.class_oid, live.pop(slot)[1], page, slot)
            row = t.insert_row(
                table.class_oid, table.representation(), self._texts(i, key), page, slot
            )
            live[slot] = (key, row)
        elif r < 0.85:
            slot = self.rnd.choice(list(live))
            key, old = live[slot]
            new = typed_row(table.representation(), self._texts(i, key), t.mvccid, True)
            t.update(table.class_oid, old, new, page, slot)
            live[slot] = (key, new)
        else:
            slot = self.rnd.choice(list(live))
            t.delete(table.class_oid, live.pop(slot)[1], page, slot)
        self.stats["changes"] += 1

    def _alter(self, t) -> None:
        """ALTER TABLE ... ADD COLUMN on a random table: new rows take the new representation."""
        i = self.rnd.randrange(TABLES)
        old = self.tables[i]
        name = f"added_{old.repid}"
        new = old.add_column({"name": name, "type": "VARCHAR", "precision": 100})
        t.alter_table(old, new, statement=f"ALTER TABLE {old.name} ADD COLUMN {name} VARCHAR(100)")
        self.tables[i] = new
        self.stats["alters"] += 1

    def run(self, progress: bool = True) -> Dict[str, Any]:
        from tqdm import tqdm

        started = time.perf_counter()
        bar = tqdm(total=self.size, unit="B", unit_scale=True, desc="writing", disable=not progress)
        t = self.workload.begin(1)
        for table in self.tables:
            cols = ", ".join(c["name"] for c in table.columns)
            t.create_table(table, statement=f"CREATE TABLE {table.name} ({cols})")
        t.commit(self.at_time)
        if not self.keep_model:
            self.workload.committed.clear()
        sessions: List[list] = []
        free = list(range(1, 40))
        next_huge, next_alter = self.huge_every, self.alter_every
        done = 0
        while True:
            written = self.written()
            bar.update(written - done)
            done = written
            if written >= self.size and not sessions:
                break
            while len(sessions) < 4 and written < self.size:
                size = self.rnd.randint(1, 30)
                if written >= next_huge:
                    size, next_huge = self.huge_size, next_huge + self.huge_every
                t = self.workload.begin(free.pop(self.rnd.randrange(len(free))))
                alter = written >= next_alter
                if alter:
                    next_alter += self.alter_every
                sessions.append([t, size, [], alter])
            s = sessions[self.rnd.randrange(len(sessions))]
            t, left, savepoints, alter = s
            if alter:
                self._alter(t)
                s[3] = False
            if left == 0:
                self.at_time += 1
                self.stats["transactions"] += 1
                if self.rnd.random() < 0.05:
                    t.abort(self.at_time)
                    self.stats["aborted"] += 1
                else:
                    t.commit(self.at_time)
                    self.stats["committed"] += 1
                    if not self.keep_model:
                        self.workload.committed.clear()
                sessions.remove(s)
                free.append(t.trid)
                continue
            s[1] -= 1
            r = self.rnd.random()
            if r < 0.97:
                self._change(t)
            elif r < 0.98:
                savepoints.append(t.savepoint())
            elif r < 0.99 and savepoints:
                t.rollback_to(savepoints.pop())
            elif r >= 0.99:
                i = self.rnd.randrange(TABLES)  # a duplicate key: the statement fails
                t.failed_statement(self.tables[i].class_oid, b"\x00" * 40, 9_000 + i, 1)
        bar.close()
        written = self.written()
        out = self.writer.finish(self.directory)
        return {
            **self.stats,
            "bytes": written,
            "end_lsa": out["end_lsa"],
            "volumes": len(out["archives"]) + 1,
            "seconds": round(time.perf_counter() - started, 1),
        }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("directory")
    ap.add_argument("--size", default="1GB", help="log size, e.g. 512MB, 1GB, 16GB")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--page-size", type=int, default=16384, choices=[4096, 8192, 16384])
    ap.add_argument("--archive-mb", type=int, default=64)
    args = ap.parse_args(argv)
    gen = Generator(
        args.directory, parse_size(args.size), args.seed, args.page_size, args.archive_mb
    )
    print(json.dumps(gen.run()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
