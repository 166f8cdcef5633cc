"""A CUBRID-like workload written straight into log volumes, at any size, in constant memory.

    python benches/workload.py DIR --size 1GB [--seed 1] [--page-size 16384] [--archive-mb 64]
                               [--compare FIXTURE_LOG]

Twenty typed tables (``dba.w_00`` .. ``dba.w_19``) with the fixtures' type mix: integer keys,
BIGINT, DOUBLE, NUMERIC, DATETIME, CHAR, JSON documents, SETs and text (rows of about 500
bytes that CUBRID's LZ4 compresses in the log, one in sixteen with a long, in-row compressed
string). Four sessions, as the fixtures' driver: small transactions (1 to 30 changes, 13 %
rolled back, with savepoint rollbacks and failed statements) interleaved with bulk loads of 500
rows and a 20,000-change transaction every 256 MB; 96 % inserts, 3 % updates (one or two
columns, logged as DIFF records where the engine would), 1 % deletes; an ALTER TABLE ... ADD
COLUMN every 128 MB (rows of the old representation stay in the log); trids reused. Around the
heap and CDC records it writes what the engine writes (``EngineRecords``: B-tree entries and
leaf splits, heap pages allocated in system operations, vacuum, statistics at commit), so that
the record mix and sizes are the fixtures' (``--compare``; tests/test_workload.py, docs/scale.md).
Archives are written as they fill (``LogWriter(stream_to=)``): memory is that of a ring, an
archive and the rows kept for updates (at most 500 per table). Deterministic from the seed.

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
# Bumped when the generated log changes: benchmark caches keep logs by version.
VERSION = 2
MAX_LIVE = 500  # live rows kept per table (to update and delete them)
POOL_BITS = 12
POOL = 1 << POOL_BITS  # values drawn per column kind
PAGE_STRIDE = 10_000_000  # heap page ids of table i start at PAGE_STRIDE * (i + 1)
# Shares of inserts, updates and deletes among row changes: the fixtures' sessions mostly insert.
MIX = (0.96, 0.03, 0.01)
# Lengths of the two text columns: under 255 bytes (longer strings CUBRID compresses inside the
# row) so that rows are of about 500 bytes, as the fixtures' bulk rows; one in sixteen longer.
NOTE = {"name": "note", "type": "VARCHAR", "precision": 4000}
NOTE_LENGTHS = [200, 210, 220, 230, 240] * 3 + [2000]
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
        {"name": "memo", "type": "VARCHAR", "precision": 3000},
        {"name": "code", "type": "CHAR", "precision": 10},
        {"name": "doc", "type": "JSON"},
        {"name": "flags", "type": "SET", "set_domains": [{"type": "INTEGER"}]},
    ]
    # Every table has a tag and two texts (the fixtures' rows are mostly text); the rest vary.
    chosen = palette[4:7] + rnd.sample(
        [p for j, p in enumerate(palette) if j not in (4, 5, 6)], 1 + i % 3
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
        # Notes repeat a phrase, as generated text does (the fixtures' ``lz4-<tag>-`` strings):
        # CUBRID stores them LZ4-compressed; a few are long.
        phrase = f"{rnd.choice(WORDS)}-{rnd.choice(WORDS)}-{rnd.randint(0, 9999)} "
        return (phrase * (rnd.choice(NOTE_LENGTHS) // len(phrase) + 1)).strip()
    if t == "VARCHAR":
        return f"{rnd.choice(WORDS)}-{rnd.randint(0, 99999)}"
    if t == "CHAR":
        return f"{rnd.choice(WORDS)[:10]:<10}"
    if t == "JSON":
        return {"k": key, "w": rnd.choice(WORDS), "n": [rnd.randint(0, 9) for _ in range(3)]}
    if t == "SET":
        return sorted({rnd.randint(0, 50) for _ in range(rnd.randint(0, 4))})
    raise ValueError(t)


class EngineRecords:
    """The records CUBRID writes around each row change besides the heap record and the CDC
    supplemental records, with the sizes the fixtures show (``walcdc inspect --stats`` of p4k and
    p16k, by recovery index): the primary key's B-tree entry, a new heap page when a table's
    page fills (file allocation, chaining, heap statistics, inside a system operation), vacuum
    of heap pages by the vacuum workers, unique-index statistics at commit. walcdc reads past
    them; they are here so that a generated log has the engine's record mix and sizes."""

    VACUUM_TRID = -6  # the fixtures' vacuum workers log under negative trids

    def __init__(self, rnd: random.Random, page_size: int):
        from walcdc.testing import RCV_INDEXES

        self.rv = RCV_INDEXES
        self.page_size = page_size
        blob = bytes(rnd.getrandbits(8) for _ in range(256))
        self.blob = blob
        stats = bytearray(blob[:130])
        self.stats_before, self.stats_after = (
            bytes(stats),
            bytes(stats[:40]) + b"\x01" + bytes(stats[41:]),
        )
        self.rnd = rnd
        self.index_page = 5_000
        # A leaf page's bytes: keys and OIDs, half of each entry alike from key to key (so that
        # LZ4 halves a copied page, as in the fixtures).
        self.leaf = b"".join(
            rnd.getrandbits(64).to_bytes(8, "little") + b"\x00\x00\x00\x01\x00\x00\x02\x00"
            for _ in range(page_size // 16)
        )
        self.inserts = 0

    def _data(self, t, rectype, rcv, undo=b"", redo=b"", page=0, offset=0, **kw):
        return t._append(
            rectype,
            rcvindex=self.rv[rcv],
            volid=1,
            pageid=page,
            offset=offset,
            mvccid=t.mvccid,
            undo=undo,
            redo=redo,
            **kw,
        )

    def index_insert(self, t, slot: int) -> None:
        """The key's B-tree entry (MVCC insert) and the leaf record's redo-only modification;
        a leaf split every ``page_size / 26`` keys (the fixtures' rate at 4 and 16 KiB)."""
        self.inserts += 1
        if self.inserts % (self.page_size // 26) == 0:
            self.index_split(t)
        self._data(
            t,
            "LOG_MVCC_UNDOREDO_DATA",
            "RVBT_MVCC_INSERT_OBJECT",
            self.blob[:24],
            self.blob[24:44],
            self.index_page,
            slot,
        )
        self._data(
            t,
            "LOG_REDO_DATA",
            "RVBT_RECORD_MODIFY_NO_UNDO",
            redo=self.blob[44:56],
            page=self.index_page,
            offset=slot,
        )

    def index_delete(self, t, slot: int) -> None:
        self._data(
            t,
            "LOG_MVCC_UNDOREDO_DATA",
            "RVBT_MVCC_DELETE_OBJECT",
            self.blob[:32],
            self.blob[32:52],
            self.index_page,
            slot,
        )

    def new_page(self, t, page: int) -> None:
        """A heap page allocated and chained in, as one atomic system operation."""
        before = t.last
        t._append("LOG_SYSOP_ATOMIC_START")
        self._data(
            t, "LOG_UNDOREDO_DATA", "RVFL_PARTSECT_ALLOC", self.blob[:4], self.blob[4:8], 512, 232
        )
        self._data(t, "LOG_UNDOREDO_DATA", "RVFL_FHEAD_ALLOC", self.blob[:3], self.blob[3:6], 512)
        self._data(t, "LOG_UNDOREDO_DATA", "RVHF_NEWPAGE", redo=self.blob[:40], page=page)
        t._append(
            "LOG_SYSOP_END",
            sysop_type=2,
            rcvindex=self.rv["RVFL_ALLOC"],
            undo=self.blob[:16],
            lsa=before,
        )
        self._data(t, "LOG_UNDOREDO_DATA", "RVHF_CHAIN", self.blob[:40], self.blob[40:80], page - 1)
        self._data(
            t,
            "LOG_DIFF_UNDOREDO_DATA",
            "RVHF_STATS",
            self.stats_before,
            self.stats_after,
            513,
            zip_undo=True,
        )
        t._append("LOG_SYSOP_END", sysop_type=0, lsa=before)

    def vacuum(self, writer, page: int) -> None:
        """A vacuum worker cleaning a heap page (outside any user transaction)."""
        n = 13 + self.rnd.getrandbits(5)
        writer.append(
            self.VACUUM_TRID,
            "LOG_REDO_DATA",
            rcvindex=self.rv["RVVAC_HEAP_PAGE_VACUUM"],
            volid=1,
            pageid=page,
            redo=self.blob[:n],
        )

    def index_split(self, t) -> None:
        """A B-tree leaf split: a new page, half the leaf copied (logged whole, zipped), the
        node headers and the separator key, as one system operation."""
        before = t.last
        half = self.page_size // 2
        self._data(t, "LOG_UNDOREDO_DATA", "RVBT_GET_NEWPAGE", page=self.index_page + 1)
        self._data(
            t,
            "LOG_UNDO_DATA",
            "RVBT_COPYPAGE",
            undo=self.leaf[:half],
            page=self.index_page,
            zip_undo=True,
        )
        for _ in range(2):
            self._data(
                t,
                "LOG_REDO_DATA",
                "RVBT_COPYPAGE",
                redo=self.leaf[: half // 2],
                page=self.index_page,
                zip_redo=True,
            )
        self._data(
            t, "LOG_UNDO_DATA", "RVBT_NDHEADER_UPD", undo=self.blob[:57], page=self.index_page
        )
        self._data(
            t, "LOG_REDO_DATA", "RVBT_NDHEADER_UPD", redo=self.blob[57:114], page=self.index_page
        )
        self._data(
            t,
            "LOG_UNDOREDO_DATA",
            "RVBT_NDRECORD_INS",
            self.blob[:2],
            self.blob[2:18],
            self.index_page,
        )
        t._append("LOG_SYSOP_END", sysop_type=0, lsa=before)
        self.index_page += 2

    def before_commit(self, t) -> None:
        """The index statistics a committing transaction updates."""
        for _ in range(2):
            self._data(
                t,
                "LOG_UNDO_DATA",
                "RVBT_MVCC_INCREMENTS_UPD",
                undo=self.blob[:36],
                page=self.index_page,
            )
        for _ in range(3):
            self._data(t, "LOG_UNDO_DATA", "RVCT_UPDATE", undo=self.blob[:34], page=600)
            self._data(t, "LOG_REDO_DATA", "RVCT_UPDATE", redo=self.blob[34:68], page=600)
        self._data(
            t,
            "LOG_UNDOREDO_DATA",
            "RVBT_LOG_GLOBAL_UNIQUE_STATS_COMMIT",
            self.blob[:36],
            self.blob[36:72],
            self.index_page,
        )


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
        mix=MIX,
        bulk_share: float = 0.4,
    ):
        from walcdc.testing import LogWriter, Table, Workload, cdc_oid, row_encoder

        self.directory = Path(directory)
        self.size = size
        self.rnd = random.Random(seed)
        self.page_size = page_size
        pages = max(8, (archive_mb << 20) // page_size)
        self.writer = LogWriter(
            page_size=page_size, active_pages=pages, archive_pages=pages, stream_to=self.directory
        )
        self.workload = Workload(self.writer)
        self.engine = EngineRecords(self.rnd, page_size)
        self.keep_model = keep_model
        self.alter_every, self.huge_every, self.huge_size = alter_every, huge_every, huge_size
        self.mix = (mix[0], mix[0] + mix[1])
        self.bulk_share = bulk_share
        self.tables = [
            Table.create(f"dba.w_{i:02d}", cdc_oid(0, 300 + i, 1), table_columns(self.rnd, i))
            for i in range(TABLES)
        ]
        self.encoders = [row_encoder(table.representation()) for table in self.tables]
        # Rows that updates and deletes pick from: key -> (page, slot, row), at most MAX_LIVE
        # per table (older rows stay in the table, untouched).
        self.live: List[Dict[int, tuple]] = [{} for _ in range(TABLES)]
        self.next_key = [1] * TABLES
        # Each table's heap: the page being filled, its next slot and the bytes it holds.
        self.heap = [[PAGE_STRIDE * (i + 1), 0, 0] for i in range(TABLES)]
        self.at_time = 1_700_000_000
        self.pools: Dict[tuple, List[Optional[str]]] = {}
        self.stats = {"transactions": 0, "committed": 0, "aborted": 0, "changes": 0, "alters": 0}

    def written(self) -> int:
        return (self.writer.end_lsa() >> 16) * self.page_size

    def _pool(self, col: Dict[str, Any]) -> List[Optional[str]]:
        """Values of ``col``'s kind as JSON texts, drawn once: a row takes one of them per column
        (one random draw instead of a dozen; the values stay as varied as a table's are)."""
        kind = (col["type"], col.get("precision"))
        pool = self.pools.get(kind)
        if pool is None:
            drawn = (value(self.rnd, col, 0) for _ in range(POOL))
            pool = self.pools[kind] = [None if v is None else json.dumps(v) for v in drawn]
        return pool

    def _texts(self, i: int, key: int) -> Dict[str, Optional[str]]:
        """A row of table ``i`` (current columns) as JSON texts of the CDC forms."""
        texts = {}
        note = self._pool(NOTE)[self.rnd.getrandbits(POOL_BITS)]
        for c in self.tables[i].representation()[1]:
            name = c["name"]
            if name == "id":
                texts["id"] = str(key)
            elif name in ("note", "memo"):  # the memo repeats the note, as generated rows do
                texts[name] = note
            elif c["type"] == "JSON":  # documents name their row
                w = WORDS[self.rnd.getrandbits(4)]
                texts[name] = f'{{"k":{key},"w":"{w}","n":[{key % 10},{key % 7},{key % 3}]}}'
            else:
                texts[name] = self._pool(c)[self.rnd.getrandbits(POOL_BITS)]
        return texts

    def _place(self, t, i: int, size: int) -> tuple:
        """Where table ``i``'s next row goes: the page being filled, or a new one."""
        heap = self.heap[i]
        if heap[2] + size + 4 > self.page_size - 128:
            heap[0] += 1
            heap[1] = heap[2] = 0
            self.engine.new_page(t, heap[0])
            self.engine.vacuum(self.writer, heap[0] - 1)
        heap[1] += 1
        heap[2] += size + 4
        return heap[0], heap[1]

    def _change(self, t) -> None:
        i = self.rnd.randrange(TABLES)
        table, live = self.tables[i], self.live[i]
        r = self.rnd.random()
        if not live or r < self.mix[0]:
            key = self.next_key[i]
            self.next_key[i] += 1
            rep = table.representation()
            texts = self._texts(i, key)
            row = self.encoders[i].encode(texts, mvcc_insid=t.mvccid)
            page, slot = self._place(t, i, len(row))
            t.insert_row(table.class_oid, rep, None, page, slot, row=row)
            self.engine.index_insert(t, key & 0x7FFF)
            live[key] = (page, slot, row, texts)
            if len(live) > MAX_LIVE:
                del live[next(iter(live))]
        elif r < self.mix[1]:
            key = self.rnd.choice(list(live))
            page, slot, old, texts = live[key]
            # One or two columns change (the rest as they were, new columns filled).
            fresh = self._texts(i, key)
            texts = {c: texts.get(c, v) for c, v in fresh.items()}
            for c in self.rnd.sample(sorted(c for c in fresh if c != "id"), 2):
                texts[c] = fresh[c]
            new = self.encoders[i].encode(texts, mvcc_insid=t.mvccid, prev_version=True)
            t.update(table.class_oid, old, new, page, slot, diff=True)
            live[key] = (page, slot, new, texts)
        else:
            key = self.rnd.choice(list(live))
            page, slot, old, _ = live.pop(key)
            t.delete(table.class_oid, old, page, slot)
            self.engine.index_delete(t, key & 0x7FFF)
        self.stats["changes"] += 1

    def _alter(self, t) -> None:
        """ALTER TABLE ... ADD COLUMN on a random table: new rows take the new representation."""
        from walcdc.testing import row_encoder

        i = self.rnd.randrange(TABLES)
        old = self.tables[i]
        name = f"added_{old.repid}"
        new = old.add_column({"name": name, "type": "VARCHAR", "precision": 100})
        t.alter_table(old, new, statement=f"ALTER TABLE {old.name} ADD COLUMN {name} VARCHAR(100)")
        self.tables[i] = new
        self.encoders[i] = row_encoder(new.representation())
        self.stats["alters"] += 1

    def _size(self, written: int) -> int:
        """Changes in the next transaction: small ones (1 to 30) and bulk loads of 500, as the
        fixtures' sessions; a huge one every ``huge_every`` bytes."""
        if self.rnd.random() < self.bulk_share:
            return 500
        return self.rnd.randint(1, 30)

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
            if written - done >= 1 << 20:
                bar.update(written - done)
                done = written
            if written >= self.size and not sessions:
                break
            while len(sessions) < 4 and written < self.size:
                size = self._size(written)
                if written >= next_huge:
                    size, next_huge = self.huge_size, next_huge + self.huge_every
                t = self.workload.begin(free.pop(self.rnd.randrange(len(free))))
                alter = written >= next_alter
                if alter:
                    next_alter += self.alter_every
                sessions.append([t, size, [], alter, size < 500])
            s = sessions[self.rnd.randrange(len(sessions))]
            t, left, savepoints, alter, small = s
            if alter:
                self._alter(t)
                # An ALTER is a transaction of its own, committed at once (CUBRID locks the
                # table until it commits: no other session writes rows of the new representation
                # before).
                s[1] = left = 0
                s[3] = s[4] = small = False
            if left == 0:
                self.at_time += 1
                self.stats["transactions"] += 1
                if small and self.rnd.random() < 0.13:  # as the fixtures: small work rolled back
                    t.abort(self.at_time)
                    self.stats["aborted"] += 1
                else:
                    self.engine.before_commit(t)
                    t.commit(self.at_time)
                    self.stats["committed"] += 1
                    if not self.keep_model:
                        self.workload.committed.clear()
                sessions.remove(s)
                free.append(t.trid)
                continue
            s[1] -= 1
            r = self.rnd.random() if small else 0.0  # bulk loads only insert
            if r < 0.97:
                self._change(t)
            elif r < 0.98:
                savepoints.append(t.savepoint())
            elif r < 0.99 and savepoints:
                t.rollback_to(savepoints.pop())
            elif r >= 0.99:
                i = self.rnd.randrange(TABLES)  # a duplicate key: the statement fails
                t.failed_statement(self.tables[i].class_oid, b"\x00" * 40, 9_000 + i, 1)
        bar.update(self.written() - done)
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


def record_mix(path) -> Dict[str, tuple]:
    """Per record type of the log set at ``path``: (share of records %, share of bytes %,
    average bytes), as ``walcdc inspect --stats`` counts them."""
    import pyarrow as pa

    import walcdc

    counts: Dict[str, List[int]] = {}
    for batch in walcdc.open_log(path).records(columns=["type", "size"]):
        t = (
            pa.Table.from_batches([batch])
            .group_by("type")
            .aggregate([("size", "sum"), ("size", "count")])
        )
        for name, size, count in zip(
            *(t.column(c).to_pylist() for c in ("type", "size_sum", "size_count"))
        ):
            c = counts.setdefault(name, [0, 0])
            c[0] += count
            c[1] += size
    n = sum(c for c, _ in counts.values())
    b = sum(s for _, s in counts.values())
    return {k: (100 * c / n, 100 * s / b, s / c) for k, (c, s) in counts.items()}


def compare_mix(fixture, generated, floor: float = 0.5) -> List[tuple]:
    """Rows (type, records % fixture, generated, bytes % fixture, generated, average bytes
    fixture, generated) for the types holding at least ``floor`` % of either log's records or
    bytes, the largest first."""
    a, g = record_mix(fixture), record_mix(generated)
    zero = (0.0, 0.0, 0.0)
    rows = []
    for t in sorted(set(a) | set(g), key=lambda t: -a.get(t, zero)[1]):
        x, y = a.get(t, zero), g.get(t, zero)
        if max(x[0], y[0], x[1], y[1]) >= floor:
            rows.append((t, x[0], y[0], x[1], y[1], x[2], y[2]))
    return rows


def mix_table(rows) -> str:
    out = [
        "| record type | records % (fixture) | (generated) | bytes % (fixture) | (generated) "
        "| avg bytes (fixture) | (generated) |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for t, *v in rows:
        out.append(
            f"| {t} | " + " | ".join(f"{x:.2f}" for x in v[:4]) + f" | {v[4]:.0f} | {v[5]:.0f} |"
        )
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("directory")
    ap.add_argument("--size", default="1GB", help="log size, e.g. 512MB, 1GB, 16GB")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--page-size", type=int, default=16384, choices=[4096, 8192, 16384])
    ap.add_argument("--archive-mb", type=int, default=64)
    ap.add_argument(
        "--compare", metavar="LOG", help="then print the record mix beside this log's (a fixture)"
    )
    args = ap.parse_args(argv)
    gen = Generator(
        args.directory, parse_size(args.size), args.seed, args.page_size, args.archive_mb
    )
    print(json.dumps(gen.run()))
    if args.compare:
        print(mix_table(compare_mix(args.compare, args.directory)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
