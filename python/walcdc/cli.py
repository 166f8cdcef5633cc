"""The ``walcdc`` command line.

``walcdc inspect PATH`` prints a log set's volumes and page ranges and walks its records to the
end of the log; ``--stats`` adds per-record-type counts and bytes (like ``pg_waldump --stats``).
"""

from __future__ import annotations

import sys
import warnings
from collections import defaultdict
from typing import Dict, List, Optional

import click
import pyarrow as pa
import pyarrow.compute as pc

import walcdc
from walcdc import lsa as L
from walcdc.errors import LogError
from walcdc.schemas import CODESETS as _CODESET_IDS
from walcdc.schemas import TYPE_NAMES as DB_TYPE_NAMES


def _lsa_arg(ctx, param, value: Optional[str]):
    if value is None:
        return None
    try:
        return L.parse(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from exc


def _fmt(key: Optional[int]) -> str:
    return L.format_lsa(key) if key is not None else "-"


@click.group()
@click.version_option(walcdc.__version__, prog_name="walcdc")
def main() -> None:
    """Change data capture for CUBRID, read offline from its write-ahead log volumes."""


@main.command()
@click.argument("paths", nargs=-1, type=click.Path(exists=True))
@click.option("--sample", is_flag=True, help="Inspect the small real log shipped with walcdc.")
@click.option("--stats", is_flag=True, help="Per record type: count and bytes.")
@click.option("--from", "start", callback=_lsa_arg, help="First LSA (pageid|offset).")
@click.option("--to", "end", callback=_lsa_arg, help="Stop before this LSA (pageid|offset).")
@click.option(
    "--on-encrypted",
    type=click.Choice(["raise", "skip"]),
    default="skip",
    show_default=True,
    help="What to do at TDE-encrypted pages.",
)
@click.option("--progress/--no-progress", default=None, help="Progress bar (default: on a tty).")
def inspect(paths, sample, stats, start, end, on_encrypted, progress) -> None:
    """Volumes, page ranges and records of a log set (a directory or volume files)."""
    if sample:
        paths = (str(walcdc.samples.sample_path()),)
    if not paths:
        raise click.UsageError("give a log directory or volume files, or --sample")
    try:
        _inspect(list(paths), stats, start, end, on_encrypted, progress)
    except LogError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)


def _inspect(paths: List[str], stats: bool, start, end, on_encrypted: str, progress) -> None:
    log = walcdc.open_log(paths if len(paths) > 1 else paths[0])
    info = log._native.header_info()
    click.echo(
        f"log set: {info.get('prefix', '?')}  page size {info['page_size']} B  "
        f"db_creation {info['db_creation']}  release {info.get('release', '?')}"
    )
    if "is_shutdown" in info:
        click.echo(
            f"header: {'clean shutdown' if info['is_shutdown'] else 'NOT shut down cleanly'}"
            f", append {_fmt(info['header_append_lsa'])}"
            f", checkpoint {_fmt(info['chkpt_lsa'])}"
            + (f", archived below page {info['nxarv_pageid']}" if info["nxarv_pageid"] else "")
        )
    click.echo("volumes:")
    for v in info["volumes"]:
        if v["kind"] == "active":
            click.echo(f"  {v['file']:<24} active   ring of {v['pages']} pages")
        else:
            click.echo(
                f"  {v['file']:<24} archive {v['number']:>4}  pages "
                f"{v['first_pageid']}..{v['last_pageid']}"
            )

    total_pages = max(info.get("header_append_lsa") or 0, 0) >> 16
    total_pages = max(total_pages, info.get("nxarv_pageid", 0)) - info["first_pageid"]
    first_page = (start >> 16) if start is not None else info["first_pageid"]
    if progress is None:
        progress = sys.stderr.isatty()
    counts: Dict[str, List[int]] = defaultdict(lambda: [0, 0])
    n = 0
    nbytes = 0
    first = last = None
    # Skipped encrypted pages are reported below, not as warnings.
    warnings.simplefilter("ignore", walcdc.EncryptedPagesSkipped)
    reader = log.records(start=start, end=end, on_encrypted=on_encrypted)
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=max(total_pages, 1), unit="page", desc="walking", leave=False)
    done_page = first_page
    for batch in reader:
        if batch.num_rows == 0:
            continue
        lsas = batch.column("lsa")
        if first is None:
            first = lsas[0].as_py()
        last = lsas[-1].as_py()
        n += batch.num_rows
        nbytes += pc.sum(batch.column("size")).as_py()
        if stats:
            t = (
                pa.Table.from_batches([batch])
                .group_by("type")
                .aggregate([("size", "sum"), ("size", "count")])
            )
            for name, size, count in zip(
                t.column("type").to_pylist(),
                t.column("size_sum").to_pylist(),
                t.column("size_count").to_pylist(),
            ):
                counts[name][0] += count
                counts[name][1] += size
        if bar is not None:
            page = last >> 16
            bar.update(max(0, min(page - done_page, bar.total - bar.n)))
            done_page = page
    if bar is not None:
        bar.close()
    walk = log.last_walk or {}
    click.echo(f"records: {n:,}  ({nbytes:,} bytes of log)  first {_fmt(first)}  last {_fmt(last)}")
    click.echo(f"end: {_fmt(walk.get('end_lsa'))} ({walk.get('end_reason', '?')})")
    for s in walk.get("skipped", []):
        click.echo(
            f"skipped encrypted pages {s['first_pageid']}..{s['last_pageid']} "
            f"from {_fmt(s['from_lsa'])}, resumed at {_fmt(s['resume_lsa'])}"
        )
    if stats and n:
        click.echo("")
        click.echo(f"{'type':<32} {'count':>10} {'(%)':>8} {'bytes':>14} {'(%)':>8}")
        click.echo(f"{'----':<32} {'-----':>10} {'---':>8} {'-----':>14} {'---':>8}")
        for name, (count, size) in sorted(counts.items(), key=lambda kv: -kv[1][1]):
            click.echo(
                f"{name:<32} {count:>10,} {100 * count / n:>7.2f}% "
                f"{size:>14,} {100 * size / max(nbytes, 1):>7.2f}%"
            )
        click.echo(f"{'total':<32} {n:>10,} {100:>7.2f}% {nbytes:>14,} {100:>7.2f}%")


CODESETS = {i: n for n, i in _CODESET_IDS.items() if i in (3, 4, 5)}


def _type_text(c) -> str:
    t = DB_TYPE_NAMES.get(c["type"], f"type#{c['type']}")
    if t == "NUMERIC":
        t += f"({c['precision']},{c['scale']})"
    elif t in ("CHAR", "NCHAR", "BIT", "VARBIT") or (
        t in ("VARCHAR", "VARNCHAR") and c["precision"] not in (-1, 1073741823)
    ):
        t += f"({c['precision']})"
    elif t == "VARCHAR":
        t = "STRING"
    if (
        t.startswith(("CHAR", "VARCHAR", "STRING", "NCHAR", "VARNCHAR"))
        and c["codeset"] in CODESETS
    ):
        t += f" {CODESETS[c['codeset']]}"
    if c["enum_labels"]:
        t += "(" + ", ".join(repr(x) for x in c["enum_labels"]) + ")"
    if c["set_domains"]:
        t += "(" + ", ".join(_type_text(d) for d in c["set_domains"]) + ")"
    return t


@main.command()
@click.argument("paths", nargs=-1, type=click.Path(exists=True))
@click.option("--sample", is_flag=True, help="The small real log shipped with walcdc.")
@click.option(
    "--all", "show_all", is_flag=True, help="Also system classes and old representations."
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def schema(paths, sample, show_all, as_json) -> None:
    """Table schemas learned from the log's class records: tables, OIDs, representations,
    columns and types."""
    import json as _json

    if sample:
        paths = (str(walcdc.samples.sample_path()),)
    if not paths:
        raise click.UsageError("give a log directory or volume files, or --sample")
    try:
        log = walcdc.open_log(list(paths) if len(paths) > 1 else paths[0])
        classes = log.schemas()
    except LogError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
    if not show_all:
        # System classes and views (the catalog) have no owner in their name.
        classes = [c for c in classes if not c["flags"] & 1 and "." in c["name"]]
    if as_json:
        click.echo(_json.dumps(classes, indent=2))
        return
    for c in classes:
        kind = "view" if c["class_type"] == 1 else "table"
        state = " (dropped)" if c["dropped"] else ""
        click.echo(
            f"{c['name']}  {kind}  class OID {c['class_oid_text']}  "
            f"representation {c['current_repid']}{state}"
        )
        reps = sorted(c["representations"], key=lambda r: -r["repid"])
        for r in reps:
            if not r["columns"] or (r["repid"] != c["current_repid"] and not show_all):
                continue
            if r["repid"] != c["current_repid"]:
                click.echo(f"  representation {r['repid']}:")
            for col in sorted(r["columns"], key=lambda x: (x["def_order"] < 0, x["def_order"])):
                pk = "  PRIMARY KEY" if col["primary_key"] else ""
                click.echo(f"    {col['name']:<24} {_type_text(col)}{pk}")
        if c["subclasses"]:
            click.echo(f"  partitions: {len(c['subclasses'])}")
        others = [r["repid"] for r in reps if r["repid"] != c["current_repid"] and r["columns"]]
        if others and not show_all:
            click.echo(f"  older representations: {', '.join(map(str, others))} (--all shows them)")


def _position_arg(ctx, param, value: Optional[str]):
    """An LSA (``pageid|offset``) or a time (ISO 8601; UTC when no zone is given)."""
    import datetime

    if value is None:
        return None
    if "|" in value:
        return _lsa_arg(ctx, param, value)
    try:
        t = datetime.datetime.fromisoformat(value)
    except ValueError as exc:
        raise click.BadParameter(f"not an LSA (pageid|offset) or an ISO time: {value!r}") from exc
    if t.tzinfo is None:
        t = t.replace(tzinfo=datetime.timezone.utc)
    return t


@main.command()
@click.argument("paths", nargs=-1, type=click.Path(exists=True))
@click.option("-o", "--output", required=True, type=click.Path(), help="Parquet file to write.")
@click.option("--sample", is_flag=True, help="Extract from the small real log shipped with walcdc.")
@click.option("--tables", multiple=True, help="Only these class OIDs (volid|pageid|slotid or int).")
@click.option("--exclude-tables", multiple=True, help="Not these class OIDs.")
@click.option("--users", multiple=True, help="Only changes by these users.")
@click.option("--ops", multiple=True, help="Only these operations (insert, update, delete, ddl).")
@click.option("--from", "start", callback=_position_arg, help="Start: LSA or ISO time.")
@click.option("--to", "end", callback=_position_arg, help="End: LSA or ISO time.")
@click.option("--cursor", "cursor_file", type=click.Path(), help="Resume from, and save, a cursor.")
@click.option("--engine", is_flag=True, help="CUBRID's own CDC stream (uncommitted work too).")
@click.option(
    "--mode",
    type=click.Choice(["id", "before", "after", "full"]),
    default="full",
    show_default=True,
    help="Which row images to keep.",
)
@click.option(
    "--on-encrypted", type=click.Choice(["raise", "skip"]), default="raise", show_default=True
)
@click.option("--progress/--no-progress", default=None, help="Progress bar (default: on a tty).")
def extract(
    paths,
    output,
    sample,
    tables,
    exclude_tables,
    users,
    ops,
    start,
    end,
    cursor_file,
    engine,
    mode,
    on_encrypted,
    progress,
) -> None:
    """Writes the change events of a log set to a Parquet file.

    With --cursor FILE, the extraction resumes where the cursor in FILE says (if it exists) and
    the new cursor is written to FILE, atomically, once the output file is on disk.
    """
    import os

    import pyarrow.parquet as pq

    from walcdc.changes import Cursor

    if sample:
        paths = (str(walcdc.samples.sample_path()),)
    if not paths:
        raise click.UsageError("give a log directory or volume files, or --sample")
    cursor = None
    if cursor_file and os.path.exists(cursor_file):
        cursor = Cursor.load(cursor_file)
        if start is not None:
            raise click.UsageError("--from and an existing --cursor file exclude each other")
    try:
        log = walcdc.open_log(list(paths) if len(paths) > 1 else paths[0])
        info = log._native.header_info()
        stream = walcdc.read_changes(
            log,
            start=start,
            end=end,
            tables=list(tables) or None,
            exclude_tables=list(exclude_tables) or None,
            users=list(users) or None,
            ops=list(ops) or None,
            committed_only=not engine,
            mode=mode,
            cursor=cursor,
            on_encrypted=on_encrypted,
        )
        if progress is None:
            progress = sys.stderr.isatty()
        bar = None
        if progress:
            from tqdm import tqdm

            last_page = max((info.get("header_append_lsa") or 0) >> 16, info.get("nxarv_pageid", 0))
            bar = tqdm(
                total=max(last_page - info["first_pageid"], 1),
                unit="page",
                desc="extracting",
                leave=False,
            )
        rows = 0
        tmp = f"{output}.tmp-{os.getpid()}"
        with pq.ParquetWriter(tmp, stream.schema) as writer:
            done_page = info["first_pageid"]
            for batch in stream:
                writer.write_batch(batch)
                rows += batch.num_rows
                if bar is not None and batch.num_rows:
                    page = batch.column("lsa")[-1].as_py() >> 16
                    bar.update(max(0, min(page - done_page, bar.total - bar.n)))
                    done_page = max(done_page, page)
        if bar is not None:
            bar.close()
        # The output is durable before the cursor moves past it.
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, output)
        if cursor_file:
            stream.cursor.save(cursor_file)
    except LogError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
    pending = stream.pending
    click.echo(
        f"{rows:,} events written to {output}"
        + (f"; {len(pending)} transaction(s) still open at the end" if pending else "")
    )
    if cursor_file:
        click.echo(f"cursor saved to {cursor_file}: {stream.cursor.to_json()}")


if __name__ == "__main__":  # pragma: no cover
    main()
