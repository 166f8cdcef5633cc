"""The ``walcdc`` command line.

``walcdc inspect PATH`` prints a log set's volumes and page ranges and walks its records to the
end of the log (``--stats``: per-record-type counts and bytes, like ``pg_waldump --stats``);
``walcdc extract PATH -o OUT`` writes change events (Parquet, JSON Lines or Arrow; a file, a
directory of parts, or stdout); ``walcdc schema PATH`` prints the tables the log defines.

Errors are one line on stderr and an exit status (README, "Command line"): 2 for a wrong
argument (click's own checks included), 3 for a log that cannot be read as asked, 4 for a file
that cannot be read or written (a log path that does not exist too), 70 for an internal error;
``--debug`` shows the traceback instead.
"""

from __future__ import annotations

import sys

try:
    import base64
    import functools
    import json
    import logging
    import os
    import re
    import signal
    import threading
    import warnings
    from collections import defaultdict
    from typing import Dict, List, Optional, Sequence

    import click
    import pyarrow as pa
    import pyarrow.compute as pc

    import walcdc
    import walcdc._native  # noqa: F401 - the slowest import: under this guard
    from walcdc import lsa as L
    from walcdc.changes import ENVELOPES
    from walcdc.errors import (
        InvalidArgumentError,
        LogError,
        LogIOError,
        OutputError,
    )
    from walcdc.options import KEYS, OPS, READ_OPTIONS
except KeyboardInterrupt:
    # Ctrl-C while the modules load (most of a short run's first second): as later on, one
    # line and status 130 (EXIT_INTERRUPTED), no traceback.
    sys.stderr.write("walcdc: interrupted\n")
    sys.exit(130)

#: Exit statuses.
EXIT_USAGE = 2
EXIT_LOG = 3
EXIT_IO = 4
EXIT_INTERNAL = 70
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143
EXIT_CLOSED_PIPE = 141  # 128 + SIGPIPE, what a shell reports for a tool ended by a closed pipe


class _Terminated(BaseException):
    """SIGTERM, raised where the program is, so that every ``finally`` runs (temporary files
    are removed, the cursor stays where it was) before the exit."""


def _terminate(signum, frame):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second SIGTERM must not cut the clean-up
    raise _Terminated()


def _exit_status(exc: LogError) -> int:
    if isinstance(exc, InvalidArgumentError):
        return EXIT_USAGE
    if isinstance(exc, (LogIOError, OutputError)):
        return EXIT_IO
    return EXIT_LOG


def _fail(text: str, status: int):
    _stop(f"error: {text}", status)


def _stop(text: str, status: int):
    click.echo(f"walcdc: {text}", err=True)
    sys.exit(status)


def _closed_stdout():
    """The reader of stdout went away (``walcdc schema | head -1``): end quietly, as other
    tools do, with 141 (the output was cut short: no cursor was saved)."""
    try:
        # Python flushes stdout at exit: that flush must find somewhere to write.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):  # no descriptor (tests)
        pass
    sys.exit(EXIT_CLOSED_PIPE)


def _command(fn):
    """Runs a command body: errors become one line and an exit status (``--debug``: the
    traceback); warnings become notes."""

    @functools.wraps(fn)
    def run(*args, **kwargs):
        ctx = click.get_current_context()
        debug = bool(ctx.find_root().params.get("debug"))
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            try:
                return fn(*args, **kwargs)
            except LogError as exc:
                if debug:
                    raise
                _fail(exc.cli_text(), _exit_status(exc))
            except BrokenPipeError:
                _closed_stdout()
            except OSError as exc:
                if debug:
                    raise
                where = f"{exc.filename}: " if getattr(exc, "filename", None) else ""
                _fail(f"{where}{exc.strerror or exc}", EXIT_IO)
            except KeyboardInterrupt:
                if debug:
                    raise
                _stop("interrupted", EXIT_INTERRUPTED)
            except (click.ClickException, click.exceptions.Exit, SystemExit):
                raise
            except Exception as exc:  # a defect: say so in one line
                if debug:
                    raise
                _fail(
                    f"internal error: {type(exc).__name__}: {exc} (run with --debug for the "
                    "traceback, and please report it)",
                    EXIT_INTERNAL,
                )
            finally:
                # Skipped encrypted pages are reported by the commands themselves; the
                # interpreter's own warnings (a file left open by an interrupted import) are
                # not the user's concern.
                for w in seen:
                    if w.category.__name__ != "EncryptedPagesSkipped" and not issubclass(
                        w.category, (ResourceWarning, DeprecationWarning, PendingDeprecationWarning)
                    ):
                        click.echo(f"walcdc: note: {w.message}", err=True)

    return run


class _Position(click.ParamType):
    """``--from`` / ``--to``: the positions ``read_changes(start=...)`` takes, written as text.
    ``pageid|offset`` and ISO 8601 times are passed as they are; as the API takes an ``int``
    for the order-preserving u64 LSA and a ``float`` for epoch seconds, a plain integer is the
    u64 LSA and a number with a decimal point (``1732339321.0``) is epoch seconds."""

    name = "LSA|TIME"

    def convert(self, value, param, ctx):
        if isinstance(value, str):
            if re.fullmatch(r"[0-9]+", value.strip()):
                return int(value)
            if re.fullmatch(r"[0-9]+\.[0-9]*", value.strip()):
                return float(value)
        return value


_POSITION = _Position()


class _LogLine(logging.Formatter):
    """A log record as the CLI's other lines: ``walcdc: warning: ...``."""

    def format(self, record: logging.LogRecord) -> str:
        return f"walcdc: {record.levelname.lower()}: {record.getMessage()}"


def _fmt(key: Optional[int]) -> str:
    return L.format_lsa(key) if key is not None else "-"


def _paths(paths, sample) -> List[str]:
    if sample:
        if paths:
            raise click.UsageError("give log paths or --sample, not both")
        return [str(walcdc.samples.sample_path())]
    if not paths:
        raise click.UsageError("give a log directory or volume files, or --sample")
    return list(paths)


def _key_values(items: Sequence[str], option: str) -> Dict[str, str]:
    """``KEY=VALUE`` items of a repeatable option, as a dict."""
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{item!r}: give KEY=VALUE", param_hint=option)
        out[key] = value
    return out


def _open(paths: List[str], storage_options: Sequence[str] = ()):
    options = _key_values(storage_options, "--storage-option")
    return walcdc.open_log(paths if len(paths) > 1 else paths[0], storage_options=options or None)


#: Where a path may be a URL of object storage: how to reach the store.
_storage_option = click.option(
    "--storage-option",
    "storage_options",
    multiple=True,
    metavar="KEY=VALUE",
    help="For volumes in object storage (s3://, gs://, az://, https:// URLs): an option of the "
    "store, as the object_store crate names it (aws_endpoint, aws_region, ...); repeatable. "
    "Credentials come from the environment (AWS_*, GOOGLE_*, AZURE_*) or from these options.",
)


class _Main(click.Group):
    """The ``walcdc`` group: click's own errors (a bad option value, a missing argument) are
    one ``walcdc: error:`` line and exit status 2 too, not click's usage text; an interrupt
    anywhere is ``walcdc: interrupted`` and 130; SIGTERM ends the run as an error does (the
    temporary output removed) with ``walcdc: terminated`` and 143 (commands that stop
    cleanly on SIGTERM, such as ``follow``, install their own handler)."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode, **extra)
        try:
            # Commands may set their own (follow stops on SIGINT): all are set back at the end.
            previous = {signal.SIGINT: signal.getsignal(signal.SIGINT)}
            previous[signal.SIGTERM] = signal.signal(signal.SIGTERM, _terminate)
        except ValueError:  # not the main thread: signals stay as they are
            previous = {}
        try:
            status = super().main(args, prog_name, complete_var, False, **extra)
        except _Terminated:
            _stop("terminated", EXIT_TERMINATED)
        except click.ClickException as exc:
            if isinstance(exc, getattr(click.exceptions, "NoArgsIsHelpError", ())):
                exc.show()  # plain "walcdc": the help, as click shows it
                sys.exit(EXIT_USAGE)
            ctx = getattr(exc, "ctx", None)
            hint = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
            _fail(exc.format_message() + hint, EXIT_USAGE)
        except (KeyboardInterrupt, click.exceptions.Abort):
            # Ctrl-C outside a command's body (while click reads the arguments).
            _stop("interrupted", EXIT_INTERRUPTED)
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
        # click returns the command's value, or the status of an Exit (--help, --version).
        sys.exit(status if isinstance(status, int) else 0)

    # A closed stdout before click's own handling of it (status 1): --help and --version
    # write while the context is made, a command's --help while the group invokes it.
    def make_context(self, *args, **kwargs):
        try:
            return super().make_context(*args, **kwargs)
        except BrokenPipeError:
            _closed_stdout()

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except BrokenPipeError:
            _closed_stdout()


@click.group(cls=_Main)
@click.version_option(walcdc.__version__, prog_name="walcdc")
@click.option("--debug", is_flag=True, help="Show tracebacks instead of one-line errors.")
def main(debug) -> None:
    """Change data capture for CUBRID, read offline from its write-ahead log volumes."""


def _read_choice(name: str, help: str):
    """The flag of the read option ``name`` (``--on-encrypted`` for ``on_encrypted``): its
    values and default from the option's declaration (:data:`walcdc.options.READ_OPTIONS`)."""
    option = READ_OPTIONS[name]
    return click.option(
        "--" + name.replace("_", "-"),
        type=click.Choice(option.choices),
        default=option.default,
        show_default=True,
        help=help,
    )


_on_encrypted = _read_choice(
    "on_encrypted", "At TDE-encrypted pages: fail, or skip them (the skipped pages are reported)."
)
_progress = click.option(
    "--progress/--no-progress", default=None, help="Progress bar (default: on a terminal)."
)


def _options(*declarations):
    """Click option declarations as one decorator, for the options commands share."""

    def declare(fn):
        for option in reversed(declarations):
            fn = option(fn)
        return fn

    return declare


_window = _options(
    click.option(
        "--from",
        "start",
        type=_POSITION,
        help="Start: an LSA (pageid|offset, or the u64) or a time (ISO 8601, or epoch "
        "seconds with a decimal point).",
    ),
    click.option("--to", "end", type=_POSITION, help="End (exclusive): an LSA or a time."),
)

_tables_option = click.option(
    "--tables",
    multiple=True,
    help="Only these tables: names (any name the table had; owner.table or table) or "
    "class OIDs (volid|pageid|slotid), comma-separated or repeated.",
)
_exclude_tables_option = click.option(
    "--exclude-tables", multiple=True, help="Not these tables (names or class OIDs)."
)
_users_option = click.option(
    "--users", multiple=True, help="Only changes by these users (comma-separated)."
)

_stream_options = _options(
    _tables_option,
    _exclude_tables_option,
    _read_choice(
        "include_ddl",
        "With --tables: DDL of those tables only, or also DDL that belongs to no table.",
    ),
    _users_option,
    click.option(
        "--ops",
        multiple=True,
        help=f"Only these operations: {', '.join(OPS[:4])} ({', '.join(OPS[4:])} markers).",
    ),
    _window,
    _read_choice("mode", "Which row images to keep."),
    _read_choice(
        "keys",
        "Keys of before/after: column names when the change happened, at the end of the log, "
        "or attribute ids.",
    ),
    click.option(
        "--envelope", type=click.Choice(ENVELOPES), help="Write Debezium-shaped change events."
    ),
    click.option("--schema", "schema_file", type=click.Path(dir_okay=False), help="Schema file."),
    click.option("--no-redact", is_flag=True, help="Keep passwords in DDL statements."),
    _read_choice(
        "on_partial",
        "A transaction begun before the oldest volume (an older archive is gone): leave it "
        "out, or emit the events the log still holds, marked partial.",
    ),
)


def _change_options(fn):
    """The options that choose what a change stream reads (:data:`_stream_options`): the
    command gets them as one dict, ``read``, in :func:`walcdc.read_changes`' terms."""

    @functools.wraps(fn)
    def run(*args, **kw):
        read = dict(
            tables=list(kw.pop("tables")) or None,
            exclude_tables=list(kw.pop("exclude_tables")) or None,
            include_ddl=kw.pop("include_ddl"),
            users=list(kw.pop("users")) or None,
            ops=list(kw.pop("ops")) or None,
            start=kw.pop("start"),
            end=kw.pop("end"),
            mode=kw.pop("mode"),
            keys=kw.pop("keys"),
            envelope=kw.pop("envelope"),
            schema=kw.pop("schema_file"),
            redact=not kw.pop("no_redact"),
            on_partial=kw.pop("on_partial"),
        )
        return fn(*args, read=read, **kw)

    return _stream_options(run)


def _load_cursor(cursor_file, read):
    """The cursor saved in ``cursor_file``, if it exists (--from cannot go with it)."""
    from walcdc.changes import Cursor

    if not (cursor_file and os.path.exists(cursor_file)):
        return None
    cursor = Cursor.load(cursor_file)
    if read["start"] is not None:
        raise click.UsageError("--from and an existing --cursor file exclude each other")
    return cursor


@main.command()
@click.argument("paths", nargs=-1, type=click.Path())
@click.option("--sample", is_flag=True, help="Inspect the small real log shipped with walcdc.")
@click.option("--stats", is_flag=True, help="Per record type: count and bytes.")
@click.option(
    "--threads",
    type=click.IntRange(min=1),
    help="Walk the log with N threads (default: the cores walcdc may use). The output is the same.",
)
@_window
@_on_encrypted
@_storage_option
@_progress
@_command
def inspect(
    paths, sample, stats, threads, start, end, on_encrypted, storage_options, progress
) -> None:
    """Volumes, page ranges and records of a log set (a directory, volume files, or a URL of
    object storage such as s3://bucket/prefix/)."""
    log = _open(_paths(paths, sample), storage_options)
    info = log.header()
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
    counts: Dict[str, List[int]] = defaultdict(lambda: [0, 0])
    n = 0
    nbytes = 0
    first = last = None
    from walcdc.parallel import default_threads

    threads = threads or default_threads()
    reader = log.records(start=start, end=end, on_encrypted=on_encrypted, threads=threads)
    with _Progress(info, progress, "walking") as bar:
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
            bar.at(last)
    walk = log.last_walk or {}
    click.echo(f"records: {n:,}  ({nbytes:,} bytes of log)  first {_fmt(first)}  last {_fmt(last)}")
    click.echo(f"end: {_fmt(walk.get('end_lsa'))} ({walk.get('end_reason', '?')})")
    _report_skipped(walk.get("skipped", []))
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


def _report_skipped(skipped) -> None:
    for s in skipped:
        click.echo(
            f"skipped encrypted pages {s['first_pageid']}..{s['last_pageid']} "
            f"from {_fmt(s['from_lsa'])}, resumed at {_fmt(s['resume_lsa'])}",
            err=True,
        )


class _Progress:
    """A page-based progress bar on stderr (tqdm), or nothing."""

    def __init__(self, info, enabled: Optional[bool], desc: str):
        if enabled is None:
            enabled = sys.stderr.isatty()
        self.bar = None
        self.done = info["first_pageid"]
        if enabled:
            from tqdm import tqdm

            last_page = max((info.get("header_append_lsa") or 0) >> 16, info.get("nxarv_pageid", 0))
            self.bar = tqdm(
                total=max(last_page - info["first_pageid"], 1), unit="page", desc=desc, leave=False
            )

    def at(self, lsa: Optional[int]) -> None:
        if self.bar is None or lsa is None:
            return
        page = lsa >> 16
        self.bar.update(max(0, min(page - self.done, self.bar.total - self.bar.n)))
        self.done = max(self.done, page)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.bar is not None:
            self.bar.close()


def _type_text(c) -> str:
    t = c.get("type_name") or f"type#{c['type']}"
    if t == "NUMERIC":
        t += f"({c['precision']},{c['scale']})"
    elif t in ("CHAR", "NCHAR", "BIT", "VARBIT") or (
        t in ("VARCHAR", "VARNCHAR") and c["precision"] not in (-1, 1073741823)
    ):
        t += f"({c['precision']})"
    elif t == "VARCHAR":
        t = "STRING"
    if t.startswith(("CHAR", "VARCHAR", "STRING", "NCHAR", "VARNCHAR")) and c.get("charset") in (
        "iso88591",
        "euckr",
        "utf8",
    ):
        t += f" {c['charset']}"
    if c["enum_labels"]:
        t += "(" + ", ".join(repr(x) for x in c["enum_labels"]) + ")"
    if c["set_domains"]:
        t += "(" + ", ".join(_type_text(d) for d in c["set_domains"]) + ")"
    return t


def _json_domain(c):
    """A column for ``schema --json``: type and charset by name as well as by code."""
    out = dict(c)
    out["set_domains"] = [_json_domain(d) for d in c.get("set_domains", [])]
    if "type_name" not in out:
        from walcdc.schemas import TYPE_NAMES

        out["type_name"] = TYPE_NAMES.get(c["type"])
    return out


@main.command()
@click.argument("paths", nargs=-1, type=click.Path())
@click.option("--sample", is_flag=True, help="The small real log shipped with walcdc.")
@click.option(
    "--all", "show_all", is_flag=True, help="Also system classes and old representations."
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON (types and charsets by name).")
@_storage_option
@_command
def schema(paths, sample, show_all, as_json, storage_options) -> None:
    """Table schemas learned from the log's class records: tables, OIDs, representations,
    columns and types."""
    log = _open(_paths(paths, sample), storage_options)
    classes = log.schemas()
    if not show_all:
        # System classes and views (the catalog) have no owner in their name.
        classes = [c for c in classes if not c["flags"] & 1 and "." in c["name"]]
    if as_json:
        for c in classes:
            for r in c["representations"]:
                r["columns"] = [_json_domain(col) for col in r["columns"]]
        click.echo(json.dumps(classes, indent=2))
        return
    for c in classes:
        kind = "view" if c["class_type"] == 1 else "table"
        state = " (dropped)" if c["dropped"] else ""
        click.echo(
            f"{c['name']}  {kind}  class OID {c['class_oid_text']}  "
            f"representation {c['current_repid']}{state}"
        )
        if len(c.get("names", [])) > 1:
            click.echo(f"  earlier names: {', '.join(c['names'][:-1])}")
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


@main.command()
@click.argument("paths", nargs=-1, type=click.Path())
@click.option(
    "-o",
    "--output",
    required=True,
    help="A file (format from its suffix: .parquet, .jsonl, .arrow), a directory (one new "
    "part per run), or - for stdout.",
)
@click.option("--sample", is_flag=True, help="Extract from the small real log shipped with walcdc.")
@click.option(
    "--format", "fmt", type=click.Choice(["parquet", "jsonl", "arrow"]), help="Output format."
)
@click.option(
    "--overwrite",
    is_flag=True,
    help="Replace an existing output file, or with --by-table a part another run wrote (never "
    "done otherwise).",
)
@click.option(
    "--cursor",
    "cursor_file",
    type=click.Path(dir_okay=False),
    help="Resume from the cursor in FILE (if it exists) and save the new one there once the "
    "output is durable.",
)
@click.option("--engine", is_flag=True, help="CUBRID's own CDC stream (uncommitted work too).")
@_change_options
@click.option(
    "--debezium-tombstones",
    "tombstones",
    is_flag=True,
    help="With --envelope debezium: a tombstone (the key, a null value) after each delete.",
)
@click.option(
    "--debezium-transactions",
    "transactions",
    is_flag=True,
    help="With --envelope debezium: BEGIN and END records around each transaction's events.",
)
@click.option(
    "--debezium-schemas",
    "schemas",
    is_flag=True,
    help="With --envelope debezium: Kafka Connect's JSON form (schema and payload), typed values.",
)
@click.option(
    "--debezium-decimals",
    "decimals",
    type=click.Choice(["precise", "string", "double"]),
    help="With --debezium-schemas: NUMERIC and MONETARY as Kafka Connect Decimal (precise, the "
    "default), string or double.",
)
@click.option(
    "--by-table",
    "by_table",
    is_flag=True,
    help="Typed Parquet by table: OUTPUT is a directory that gets one dataset per table (typed "
    "before/after columns); every part of a table has every column the table has had.",
)
@_read_choice(
    "on_error", "A row whose images cannot be rebuilt: fail, or keep the event with the reason."
)
@click.option(
    "--threads",
    type=click.IntRange(min=1),
    help="Read the log with N threads (default: the cores walcdc may use). The output and the "
    "cursor are the same.",
)
@_on_encrypted
@_storage_option
@_progress
@_command
def extract(
    paths,
    output,
    sample,
    fmt,
    overwrite,
    cursor_file,
    engine,
    read,
    tombstones,
    transactions,
    schemas,
    decimals,
    by_table,
    on_error,
    threads,
    on_encrypted,
    storage_options,
    progress,
) -> None:
    """Writes the change events of a log set.

    With --cursor FILE, the extraction resumes where the cursor in FILE says (if it exists) and
    the new cursor is written to FILE, atomically, once the output is durable. Combine it with a
    directory as output: each run then adds a part named by its first and last commit LSA.

    With --by-table, OUTPUT is a directory with one Parquet dataset per table (OUTPUT/<table>/),
    before/after typed with the table's columns; a run adds a part per table (and per
    representation, when an ALTER changed the table). Every part of a table has every column
    the table has had: parts of earlier runs that lack a column are rewritten with it. --cursor
    works the same way. A part of the same name that another run wrote (another starting cursor
    or other options) is never replaced without --overwrite: the run stops before writing
    anything.
    """

    from walcdc.sinks import resolve_target, write_stream

    envelope_options = None
    if tombstones or transactions or schemas or decimals:
        if read["envelope"] != "debezium":
            raise click.UsageError("--debezium-* options need --envelope debezium")
        envelope_options = dict(tombstones=tombstones, transactions=transactions, schemas=schemas)
        envelope_options["decimal_handling"] = decimals or "precise"
    log = _open(_paths(paths, sample), storage_options)
    if by_table:
        refused = [
            name
            for name, given in (
                ("--engine", engine),
                ("--envelope", read["envelope"]),
                ("--keys", read["keys"] != KEYS[0]),
                ("--format", fmt not in (None, "parquet")),
            )
            if given
        ]
        if refused:
            raise click.UsageError(
                f"--by-table writes typed Parquet: {', '.join(refused)} do not apply"
            )
        if output == "-" or os.path.isfile(output):
            raise click.UsageError("--by-table needs a directory as --output")
    # Check the output before reading anything.
    target = None if by_table else resolve_target(output, fmt, overwrite)
    cursor = _load_cursor(cursor_file, read)
    options = dict(read, cursor=cursor, on_error=on_error, on_encrypted=on_encrypted)
    from walcdc.parallel import default_threads

    threads = threads or default_threads()
    if by_table:
        del options["keys"], options["envelope"]  # refused above
        _extract_by_table(log, output, cursor_file, progress, overwrite, threads=threads, **options)
        return
    stream = walcdc.read_changes(
        log,
        committed_only=not engine,
        envelope_options=envelope_options,
        threads=threads,
        **options,
    )
    info = log.header()
    with _Progress(info, progress, "extracting") as bar:
        result = write_stream(
            stream,
            output,
            format=target.format,
            overwrite=overwrite,
            cursor_file=cursor_file,
            on_batch=lambda b: bar.at(_last_lsa(b)),
        )
    _report_skipped(stream.skipped)
    where = ", ".join(result.paths) or target.display
    pending = stream.pending
    if result.rows == 0 and target.kind == "parts":
        click.echo("no new events", err=True)
    else:
        click.echo(
            f"{result.rows:,} events written to {where}"
            + (f"; {len(pending)} transaction(s) still open at the end" if pending else ""),
            err=True,
        )
    _print_summary(result.summary)
    if cursor_file:
        click.echo(f"cursor saved to {cursor_file}", err=True)


@main.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False),
    help="Append the events to this file as JSON lines (default: stdout).",
)
@click.option(
    "--cursor",
    "cursor_file",
    type=click.Path(dir_okay=False),
    help="Resume from the cursor in FILE (if it exists); after each batch is written and "
    "flushed, the new cursor is saved there.",
)
@_change_options
@click.option(
    "--poll-interval", default=0.2, show_default=True, help="Seconds between looks at the log."
)
@click.option(
    "--idle-timeout",
    type=float,
    help="Stop after this many seconds with nothing new (default: never).",
)
@_command
def follow(paths, output, cursor_file, read, poll_interval, idle_timeout) -> None:
    """Follows a live log (a server still writing it) and writes each committed transaction's
    events as JSON lines as soon as its commit is flushed, until SIGINT or SIGTERM (or
    --idle-timeout, or --to once the log reaches it). Give the log's directory so that new
    archives are found.

    With --cursor, a restart goes on after the last batch whose cursor was saved: a crash
    between writing a batch and saving its cursor repeats that batch (at least once).
    """
    from walcdc.sinks.files import AppendWriter
    from walcdc.sinks.loop import deliver

    # What it waits for (a directory with no volume yet, an archive not copied yet), as it
    # happens.
    said = logging.StreamHandler(sys.stderr)
    said.setFormatter(_LogLine())
    logging.getLogger("walcdc.follow").addHandler(said)
    logging.getLogger("walcdc.follow").propagate = False
    # The paths, not an opened log: a directory with no volume yet is waited for.
    stream = walcdc.read_changes(
        paths[0] if len(paths) == 1 else list(paths),
        **read,
        cursor=_load_cursor(cursor_file, read),
        follow=True,
        poll_interval=poll_interval,
        idle_timeout=idle_timeout,
        batch_size=4096,
        # What the reader skips, as it happens (the command may run for months).
        on_warning=lambda w: click.echo(f"walcdc: warning: {w} ({type(w).__name__})", err=True),
    )
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stream.close())
    writer = AppendWriter(output, stream.schema)
    save = (lambda cursor: cursor.save(cursor_file)) if cursor_file else None
    deliver(stream, writer, save)
    click.echo(f"{writer.rows:,} events written; stopped", err=True)


@main.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True))
@click.option("--webhook", required=True, help="The endpoint (http:// or https://) to POST to.")
@click.option(
    "--state",
    "state_dir",
    required=True,
    type=click.Path(file_okay=False),
    help="Directory of the durable queue, the cursor and the high watermark.",
)
@click.option("--batch-events", default=1000, show_default=True, help="Events per POST at most.")
@click.option(
    "--batch-delay", default=0.5, show_default=True, help="Seconds a batch waits to fill."
)
@click.option(
    "--dead-letter",
    type=click.Path(file_okay=False),
    help="Set aside instead of stopping: a batch the endpoint refuses (a 4xx but 401, 403, "
    "404, 405) is written to DIR (body, headers, reason) and dropped from the queue.",
)
@click.option(
    "--max-tries",
    default=0,
    show_default=True,
    help="With --dead-letter: a batch still failing after N tries goes there too; 0: retry "
    "forever.",
)
@click.option(
    "--queue-max-mb", default=256, show_default=True, help="Queue size at which reading waits."
)
@click.option("--timeout", default=10.0, show_default=True, help="Seconds per request.")
@click.option(
    "--secret-file",
    type=click.Path(dir_okay=False, exists=True),
    help="Sign requests (Standard Webhooks, HMAC-SHA256) with the secret in FILE "
    "(raw, or whsec_ and base64).",
)
@click.option("--ca", "ca_file", type=click.Path(dir_okay=False, exists=True), help="CA bundle.")
@click.option(
    "--cert",
    "cert_file",
    type=click.Path(dir_okay=False, exists=True),
    help="Client certificate (mutual TLS).",
)
@click.option("--key", "key_file", type=click.Path(dir_okay=False, exists=True), help="Its key.")
@click.option("--metrics-port", type=int, help="Serve Prometheus metrics on 127.0.0.1:PORT.")
@_change_options
@click.option("--poll-interval", default=0.2, show_default=True, help="Seconds between looks.")
@click.option(
    "--idle-timeout", type=float, help="Stop once the log was quiet this long and all is sent."
)
@_command
def deliver(
    paths,
    webhook,
    state_dir,
    batch_events,
    batch_delay,
    dead_letter,
    max_tries,
    queue_max_mb,
    timeout,
    secret_file,
    ca_file,
    cert_file,
    key_file,
    metrics_port,
    read,
    poll_interval,
    idle_timeout,
) -> None:
    """Follows a live log and POSTs its committed events to a webhook, through a durable queue
    (at least once: after a crash the batch in flight may be sent again, with the same
    Idempotency-Key). Transient failures (connection errors, timeouts, 5xx, 408, 429) are
    retried forever, with backoff; a configuration error (the endpoint's certificate refused,
    a redirect, another 4xx) stops at once. Nothing is dropped unless --dead-letter says where
    to keep it. Stops on SIGINT or SIGTERM; what is queued is sent by the next run (the exit
    status is 4 if the endpoint was failing). Metrics are printed at the end (and served with
    --metrics-port)."""
    import signal

    from walcdc.deliver import Delivery, WebhookSender, serve_metrics

    secret = None
    if secret_file:
        with open(secret_file, "rb") as f:
            raw = f.read().strip()
        try:
            secret = base64.b64decode(raw[6:], validate=True) if raw.startswith(b"whsec_") else raw
        except ValueError:
            raise click.BadParameter(
                "a whsec_ secret must be base64 after its prefix", param_hint="--secret-file"
            ) from None
    sender = WebhookSender(
        webhook,
        secret=secret,
        timeout=timeout,
        ca_file=ca_file,
        cert_file=cert_file,
        key_file=key_file,
    )
    delivery = Delivery(
        list(paths) if len(paths) > 1 else paths[0],
        sender,
        state_dir,
        batch_events=batch_events,
        batch_delay=batch_delay,
        max_tries=max_tries or None,
        dead_letter=dead_letter,
        queue_max_bytes=queue_max_mb << 20,
        poll_interval=poll_interval,
        idle_timeout=idle_timeout,
        envelope=read.pop("envelope"),
        read_options=read,
    )
    stopping: List[int] = []

    def on_signal(signum, frame):
        # An exception in the main thread ends whatever it waits for (a request, a backoff, a
        # connect); run() then stops the reader and keeps the queue. Only the first signal.
        if not stopping:
            stopping.append(signum)
            raise KeyboardInterrupt

    handlers = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    # Retries, dropped batches and what the reader skipped, on stderr as they happen (the
    # reader's warnings once: not again as notes at the end).
    said = logging.StreamHandler(sys.stderr)
    said.setFormatter(_LogLine())
    logging.getLogger("walcdc").addHandler(said)
    server = serve_metrics(delivery.metrics, metrics_port) if metrics_port else None
    try:
        metrics = delivery.run()
    except KeyboardInterrupt:
        if not stopping:
            raise
        metrics = delivery.metrics
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
        logging.getLogger("walcdc").removeHandler(said)
        if server is not None:
            server.shutdown()
    for k, v in metrics.snapshot().items():
        click.echo(f"{k}: {v}", err=True)
    if delivery.failure is not None:
        queued = len(delivery.queue)
        raise OutputError(
            f"stopped while webhook {sender.endpoint} was failing ({delivery.failure}): "
            f"{queued} batch(es) stay queued for the next run"
        )
    if stopping:
        click.echo(f"stopped; {len(delivery.queue)} batch(es) queued for the next run", err=True)


@main.command()
@click.argument("path", type=click.Path(exists=True))
@click.option(
    "--users",
    "users_file",
    required=True,
    type=click.Path(dir_okay=False, exists=True),
    help="Users file: user:<hex SHA1(SHA1(password))> lines (walcdc hash-user).",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=4001, show_default=True, help="TCP port.")
@click.option("--poll-interval", default=0.2, show_default=True, help="Seconds between looks.")
@click.option(
    "--client-memory-mb",
    default=16,
    show_default=True,
    type=click.IntRange(min=1),
    help="Memory per client for a transaction's events; past it they spill to a temporary file.",
)
@click.option(
    "--position-spacing-mb",
    default=64,
    show_default=True,
    type=click.IntRange(min=1),
    help="Log between the cursors kept for clients that resume at a position: such a client "
    "reads from the nearest one before it, not from the log's beginning.",
)
@click.option(
    "--max-clients",
    default=64,
    show_default=True,
    type=click.IntRange(min=1),
    help="Connections at once; past it a new one gets ERR and is closed.",
)
@click.option(
    "--max-unauthenticated",
    default=16,
    show_default=True,
    type=click.IntRange(min=1),
    help="Connections not yet authenticated at once; past it the oldest is closed with ERR.",
)
@click.option(
    "--auth-timeout",
    default=10.0,
    show_default=True,
    type=click.FloatRange(min=0, min_open=True),
    help="Seconds a connection has to authenticate, register and request; then ERR, closed.",
)
@_tables_option
@_exclude_tables_option
@click.option(
    "--db-users",
    multiple=True,
    help="Only changes made by these database users (comma-separated; --users names the "
    "users file).",
)
@_command
def serve(
    path,
    users_file,
    host,
    port,
    poll_interval,
    client_memory_mb,
    position_spacing_mb,
    max_clients,
    max_unauthenticated,
    auth_timeout,
    tables,
    exclude_tables,
    db_users,
) -> None:
    """Serves the log's committed row changes over MaxScale's CDC protocol (authenticate,
    REGISTER UUID=..., TYPE=JSON, REQUEST-DATA owner.table [commit LSA]; rows as JSON lines as
    they commit), until SIGINT or SIGTERM. Plain TCP: keep it on a trusted network.
    --tables / --exclude-tables say which tables clients may request (names); --db-users
    serves only the changes of those database users."""
    import signal

    from walcdc.cdcserver import CdcServer, load_users

    try:
        users = load_users(users_file)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    logger = logging.getLogger("walcdc")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s walcdc serve: %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    # The reader's warnings (pages skipped, records dropped) as log lines when they happen:
    # the server runs for days, a note at its exit would come too late.
    warnings.showwarning = lambda message, category, *_a, **_k: logger.warning(
        "%s: %s", category.__name__, message
    )
    server = CdcServer(
        path,
        users,
        host,
        port,
        poll_interval,
        client_memory=client_memory_mb << 20,
        position_spacing=position_spacing_mb << 20,
        max_clients=max_clients,
        max_unauthenticated=max_unauthenticated,
        auth_timeout=auth_timeout,
        tables=list(tables) or None,
        exclude_tables=list(exclude_tables) or None,
        db_users=list(db_users) or None,
    )
    stopping = threading.Event()

    def stop(*_):
        if not stopping.is_set():
            stopping.set()
            threading.Thread(target=server.shutdown).start()

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, stop)
    click.echo(f"serving {path} on {host}:{server.server_address[1]}", err=True)
    try:
        server.serve_forever()
    finally:
        server.close()


@main.command()
@click.argument("paths", nargs=-1, type=click.Path())
@click.option("--sample", is_flag=True, help="Mirror the small real log shipped with walcdc.")
@click.option(
    "--to",
    "target",
    required=True,
    metavar="delta:DIR|iceberg:DIR",
    help="Where the tables go: delta:DIR (one Delta Lake table per CUBRID table in DIR) or "
    "iceberg:DIR (Iceberg tables in a SQL catalog on SQLite in DIR, or in --catalog).",
)
@click.option(
    "--catalog",
    "catalog_properties",
    multiple=True,
    metavar="KEY=VALUE",
    help="With iceberg:DIR, the Iceberg catalog (pyiceberg's load_catalog properties, e.g. "
    "type=rest uri=https://...); DIR then holds only the cursor file. Repeated.",
)
@click.option(
    "--commit-every-mb",
    default=64.0,
    show_default=True,
    help="MiB of log per round; each round ends with one commit per table it changed.",
)
@_tables_option
@_exclude_tables_option
@_users_option
@click.option(
    "--from",
    "start",
    type=_POSITION,
    help="Where a new mirror starts reading (default: the log's beginning); a mirror that "
    "has a position goes on from it.",
)
@click.option("--until", "end", type=_POSITION, help="Stop there (an LSA or a time).")
@click.option("--schema", "schema_file", type=click.Path(dir_okay=False), help="Schema file.")
@_on_encrypted
@click.option("--follow", is_flag=True, help="Keep going as the log grows.")
@click.option(
    "--poll-interval", default=1.0, show_default=True, help="With --follow: seconds between looks."
)
@click.option(
    "--idle-timeout", type=float, help="With --follow: stop after this many quiet seconds."
)
@_storage_option
@_progress
@_command
def mirror(
    paths,
    sample,
    target,
    catalog_properties,
    commit_every_mb,
    tables,
    exclude_tables,
    users,
    start,
    end,
    schema_file,
    on_encrypted,
    follow,
    poll_interval,
    idle_timeout,
    storage_options,
    progress,
) -> None:
    """Keeps one table per CUBRID table in a lake format equal to CUBRID's: applies the
    committed changes not yet applied, in commit order, merged by primary key (by row OID
    where a table has none). Each table's position is stored in its own commits, so a run
    stopped at any moment and run again applies every change exactly once.

    \b
    walcdc mirror /var/lib/cubrid/log --to delta:/lake/cubrid
    walcdc mirror /var/lib/cubrid/log --to iceberg:/lake/iceberg
    """
    from walcdc.mirrors import mirror as run

    paths = _paths(paths, sample)
    catalog = _key_values(catalog_properties, "--catalog")
    log = _open(paths, storage_options)  # each round after the first opens it again
    seen = {}

    def on_round(result, lsa):
        seen["result"] = result
        bar.at(lsa)

    with _Progress(log.header(), progress and not follow, "mirror") as bar:
        try:
            done = run(
                log,
                target,
                commit_every=max(1, int(commit_every_mb * (1 << 20))),
                catalog=catalog or None,
                follow=follow,
                poll_interval=poll_interval,
                idle_timeout=idle_timeout,
                on_round=on_round,
                tables=list(tables) or None,
                exclude_tables=list(exclude_tables) or None,
                users=list(users) or None,
                start=start,
                end=end,
                schema=schema_file,
                on_encrypted=on_encrypted,
            )
        except (KeyboardInterrupt, _Terminated):
            if not follow:
                raise
            # Following: SIGINT or SIGTERM is the way to stop; every commit made is whole.
            from walcdc.mirrors import MirrorResult

            done = seen.get("result") or MirrorResult()
    click.echo(
        f"{done.commits:,} commits to {len(done.tables):,} tables: {done.rows:,} rows written, "
        f"{done.deleted:,} keys deleted",
        err=True,
    )


@main.command(name="hash-user")
@click.argument("user")
@click.option(
    "--password-stdin",
    is_flag=True,
    help="Read the password from the first line of standard input (for scripts) instead of "
    "asking for it twice on the terminal.",
)
@_command
def hash_user(user, password_stdin) -> None:
    """Prints the users-file line of USER for walcdc serve: `walcdc hash-user USER >> FILE`.
    Only that line goes to standard output; prompts and errors go to standard error. The
    password is never an argument (other users of the machine could read it)."""
    from walcdc.cdcserver import user_line

    if password_stdin:
        password = sys.stdin.readline().rstrip("\r\n")
    else:
        password = click.prompt(
            "Password", hide_input=True, err=True, default="", show_default=False
        )
        again = click.prompt(
            "Repeat for confirmation", hide_input=True, err=True, default="", show_default=False
        )
        if password != again:
            _fail("the two passwords do not match (nothing written)", EXIT_USAGE)
    if not password:
        _fail("empty password (nothing written)", EXIT_USAGE)
    click.echo(user_line(user, password))


def _extract_by_table(log, output, cursor_file, progress, overwrite, **options) -> None:
    from walcdc.sinks.tables import write_tables

    stream = walcdc.read_changes_by_table(log, **options)
    with _Progress(log.header(), progress, "extracting") as bar:
        result = write_tables(
            stream,
            output,
            overwrite=overwrite,
            cursor_file=cursor_file,
            on_batch=lambda b: bar.at(_last_lsa(b)),
        )
    _report_skipped(stream.skipped)
    tables = {os.path.dirname(p) for p in result.paths}
    pending = stream.pending
    if result.rows == 0:
        click.echo("no new events", err=True)
    else:
        click.echo(
            f"{result.rows:,} events written to {len(result.paths)} part(s) of "
            f"{len(tables)} table(s) under {output}"
            + (f"; {len(pending)} transaction(s) still open at the end" if pending else ""),
            err=True,
        )
    if result.rewritten:
        click.echo(
            f"rewrote {len(result.rewritten)} part(s) of earlier runs with their tables' new "
            "columns",
            err=True,
        )
    _print_summary(result.summary)
    if cursor_file:
        click.echo(f"cursor saved to {cursor_file}", err=True)


def _last_lsa(batch) -> Optional[int]:
    if batch.num_rows == 0 or "lsa" not in batch.schema.names:
        return None
    return batch.column("lsa")[-1].as_py()


def _print_summary(summary) -> None:
    if not summary:
        return
    # The stream's operations, Debezium's letters (an enveloped run) after the changes.
    ops = [*OPS[:4], "c", "u", "d", "t", *OPS[4:]]
    present = [o for o in ops if any(k[1] == o for k in summary)]
    present += sorted({k[1] for k in summary} - set(present))
    tables = sorted({k[0] for k in summary}, key=lambda t: (t is None, t or ""))
    width = max(12, *(len(t or "(none)") for t in tables))
    click.echo(f"{'table':<{width}} " + " ".join(f"{o:>8}" for o in present), err=True)
    for t in tables:
        cells = " ".join(f"{summary.get((t, o), 0):>8,}" for o in present)
        click.echo(f"{t or '(none)':<{width}} {cells}", err=True)


if __name__ == "__main__":  # pragma: no cover
    main()
