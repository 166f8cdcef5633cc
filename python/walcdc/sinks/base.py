"""Targets, and the writer of one output file or part (:func:`write_stream`) on the delivery
loop (:mod:`walcdc.sinks.loop`)."""

from __future__ import annotations

import os
import secrets
import stat
import sys
from collections import Counter
from dataclasses import dataclass, field
from typing import IO, Any, Callable, Dict, List, Optional, Tuple

import pyarrow as pa
import pyarrow.compute as pc

from walcdc import lsa as L
from walcdc.errors import OutputError, argument_error
from walcdc.sinks.files import SINKS
from walcdc.sinks.loop import Writer, deliver

__all__ = ["FORMATS", "SUFFIXES", "Target", "WriteResult", "resolve_target", "write_stream"]

#: Output formats.
FORMATS = ("parquet", "jsonl", "arrow")
#: The format each file name suffix means.
SUFFIXES = {
    ".parquet": "parquet",
    ".pq": "parquet",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "jsonl",
    ".arrow": "arrow",
    ".arrows": "arrow",
    ".ipc": "arrow",
}
#: Paths that name an open descriptor of the process.
_DESCRIPTOR_PATHS = ("/dev/stdout", "/dev/stderr", "/dev/fd/", "/proc/self/fd/")
#: The suffix of a part file of each format.
PART_SUFFIX = {"parquet": ".parquet", "jsonl": ".jsonl", "arrow": ".arrows"}


@dataclass
class Target:
    """Where a run writes. ``kind``: ``"file"`` (a regular file, replaced atomically),
    ``"parts"`` (a directory that gets one new file per run), ``"stream"`` (stdout, a FIFO or a
    device, written through)."""

    kind: str
    format: str
    #: The file to publish (``file``), the directory (``parts``), or the path to open
    #: (``stream``; ``None`` for stdout).
    path: Optional[str]
    #: What the caller gave.
    display: str


def _error(text: str) -> OutputError:
    return argument_error("output", text, OutputError)


def _format_of(path: str, given: Optional[str], default: Optional[str]) -> str:
    if given is not None and given not in FORMATS:
        raise argument_error(
            "format", f"{{}} must be one of {', '.join(FORMATS)}, not {given!r}", OutputError
        )
    suffix = os.path.splitext(path)[1].lower()
    implied = SUFFIXES.get(suffix)
    if given and implied and given != implied:
        raise argument_error(
            "format", f"{{}} says {given} but the file name {path!r} says {implied}", OutputError
        )
    fmt = given or implied or default
    if fmt is None:
        known = ", ".join(sorted(SUFFIXES))
        raise argument_error(
            "format",
            f"cannot tell the format of {path!r} from its name ({known}): give {{}}",
            OutputError,
        )
    return fmt


def resolve_target(output, format: Optional[str] = None, overwrite: bool = False) -> Target:
    """What ``output`` means: ``"-"`` is stdout; an existing directory (or a path ending in
    ``/``) gets a new part file per run; an existing FIFO or device (``/dev/stdout``) is written
    through; a symlink is followed (the link stays); anything else is a file, which must not
    exist unless ``overwrite``. The format follows ``format`` or the file name's suffix
    (:data:`SUFFIXES`); parts default to Parquet, streams to JSON Lines."""
    text = os.fspath(output)
    if text == "-":
        return Target("stream", _format_of("", format, "jsonl"), None, "stdout")
    if text.startswith(_DESCRIPTOR_PATHS):
        # The process's own descriptors (/dev/stdout, ...): written through even when they
        # are redirected to a regular file, which must not be replaced behind the shell's back.
        return Target("stream", _format_of(text, format, "jsonl"), text, text)
    real = os.path.realpath(text)
    if text.endswith(os.sep) or os.path.isdir(real):
        if not os.path.isdir(real):
            raise _error(f"{{}}: the directory {text} does not exist")
        return Target("parts", _format_of("", format, "parquet"), real, text)
    try:
        st = os.stat(text)  # follows symlinks
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise _error(f"{{}}: cannot use {text}: {exc.strerror}") from None
    if st is not None and not stat.S_ISREG(st.st_mode):
        return Target("stream", _format_of(text, format, "jsonl"), text, text)
    parent = os.path.dirname(real) or "."
    if not os.path.isdir(parent):
        raise _error(f"{{}}: the directory {os.path.dirname(text) or '.'} does not exist")
    fmt = _format_of(text, format, None)
    if st is not None and not overwrite:
        raise argument_error(
            "overwrite",
            f"{text} exists: pass {{}} to replace it, or write to a directory to add one part "
            "per run",
            OutputError,
        )
    return Target("file", fmt, real, text)


@dataclass
class WriteResult:
    rows: int = 0
    #: Files published (none for a stream, or for a run with nothing new in parts mode).
    paths: List[str] = field(default_factory=list)
    #: Parts of earlier runs rewritten with their table's new columns (``write_tables``).
    rewritten: List[str] = field(default_factory=list)
    #: Events per (table, op).
    summary: Dict[Tuple[Optional[str], str], int] = field(default_factory=dict)
    first_lsa: Optional[int] = None
    last_lsa: Optional[int] = None
    cursor: Any = None

    def took(self, rows: int, first: Optional[int], last: Optional[int]) -> None:
        """Counts a batch of ``rows`` whose LSAs run from ``first`` to ``last`` (or None)."""
        self.rows += rows
        if first is not None and (self.first_lsa is None or first < self.first_lsa):
            self.first_lsa = first
        if last is not None and (self.last_lsa is None or last > self.last_lsa):
            self.last_lsa = last


def _positions(batch: pa.RecordBatch, committed: bool) -> Tuple[Optional[int], Optional[int]]:
    """The first and last commit LSA (committed stream) or event LSA in a batch."""
    if batch.num_rows == 0:
        return None, None
    names = batch.schema.names
    if "commit_lsa" in names or "lsa" in names:
        col = batch.column("commit_lsa" if committed and "commit_lsa" in names else "lsa")
        values = col.drop_null()
        if len(values) == 0:
            return None, None
        return values[0].as_py(), values[-1].as_py()
    if "source" in names or "payload" in names:  # Debezium: LSAs as text in source
        from walcdc.envelope import record_fields

        src = record_fields(batch).column("source")
        col = pc.struct_field(src, "commit_lsa" if committed else "lsa").drop_null()
        if len(col) == 0:
            return None, None
        return L.parse(col[0].as_py()), L.parse(col[-1].as_py())
    return None, None


def _count(batch: pa.RecordBatch, summary: Counter) -> None:
    names = batch.schema.names
    if batch.num_rows == 0 or not {"op", "payload"} & set(names):
        return
    op = batch.column("op") if "op" in names else None
    if "table" in names:
        table = batch.column("table")
    elif "source" in names or "payload" in names:  # Debezium
        from walcdc.envelope import summary_columns

        table, op = summary_columns(batch)
    else:
        table = pa.nulls(batch.num_rows, pa.string())
    t = pa.table({"table": table, "op": pc.cast(op, pa.string())})
    grouped = t.group_by(["table", "op"]).aggregate([("op", "count")])
    for tab, op, n in zip(
        grouped.column("table").to_pylist(),
        grouped.column("op").to_pylist(),
        grouped.column("op_count").to_pylist(),
    ):
        summary[(tab, op)] += n


def _part_name(first: int, last: int, fmt: str) -> str:
    def text(k: int) -> str:
        page, offset = L.split(k)
        return f"{page:012d}_{offset:05d}"

    return f"part-{text(first)}-{text(last)}{PART_SUFFIX[fmt]}"


def _create_temp(directory: str, made: List[str]) -> int:
    """A new, empty temporary file in ``directory`` (``.walcdc-<random>.tmp``), open for
    writing; its path is appended to ``made`` *before* it is created, so that a signal handled
    at any point leaves no file its caller's cleanup does not know of. It is created with mode
    0666 so that the umask (and a default ACL) decides its permissions, as for any tool's new
    output: the file is renamed into place as it is (``tempfile.mkstemp`` would publish a 0600
    file)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    for _ in range(100):
        path = os.path.join(directory, f".walcdc-{secrets.token_hex(8)}.tmp")
        made.append(path)
        try:
            return os.open(path, flags, 0o666)
        except FileExistsError:
            made.pop()
    raise FileExistsError(f"no free temporary file name in {directory}")


def _remove(paths: List[str]) -> None:
    """Removes the files of ``paths`` that exist (a failed or interrupted run's temporaries)."""
    for path in paths:
        try:
            os.unlink(path)
        except OSError:
            pass


def _fsync_dir(path: str) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _open_output(target: Target, temps: List[str]) -> IO[bytes]:
    """Where a run writes ``target``: the stream itself, or a new temporary file beside the
    file or in the directory of parts (its path appended to ``temps``)."""
    if target.kind == "stream":
        return sys.stdout.buffer if target.path is None else open(target.path, "wb")  # noqa: SIM115
    directory = target.path if target.kind == "parts" else os.path.dirname(target.path)
    try:
        fd = _create_temp(directory, temps)
    except OSError as exc:
        raise _error(f"{{}}: cannot write in {directory}: {exc.strerror}") from None
    return os.fdopen(fd, "wb")


def run_metadata(info: Dict[str, Any], **more: str) -> Dict[str, str]:
    """The key/value metadata every file of a run carries (a stream's ``info``), and ``more``."""
    from walcdc import __version__

    return {
        "walcdc.version": __version__,
        "walcdc.database": str(info.get("database") or ""),
        "walcdc.db_creation": str(info.get("db_creation", "")),
        "walcdc.stream": "committed" if info.get("committed_only", True) else "engine",
        **more,
    }


def write_stream(
    stream,
    output,
    *,
    format: Optional[str] = None,
    overwrite: bool = False,
    cursor_file=None,
    on_batch: Optional[Callable[[pa.RecordBatch], None]] = None,
) -> WriteResult:
    """Writes every batch of ``stream`` (a :class:`walcdc.ChangeStream`) to ``output`` (see
    :func:`resolve_target`), makes it durable, and only then saves the stream's cursor to
    ``cursor_file`` (when given). On any failure the temporary output is removed and the cursor
    is left as it was."""
    writer = FileWriter(resolve_target(output, format, overwrite), stream)
    save = None if cursor_file is None else (lambda cursor: cursor.save(cursor_file))
    deliver(stream, writer, save, on_batch)
    writer.result.summary = dict(writer.summary)
    return writer.result


class FileWriter(Writer):
    """One output of :func:`write_stream`: a file (written to a temporary file beside it and
    renamed into place when complete), a new part in a directory, or a stream written
    through (stdout, a FIFO, a device)."""

    def __init__(self, target: Target, stream):
        info = dict(getattr(stream, "info", {}) or {})
        self.target = target
        self.committed = info.get("committed_only", True)
        metadata = run_metadata(info, **{"walcdc.envelope": str(info.get("envelope") or "none")})
        self.result = WriteResult()
        self.summary: Counter = Counter()
        self.temps: List[str] = []  # created, not yet published: what a failure removes
        self.out = _open_output(target, self.temps)
        self.tmp_path: Optional[str] = self.temps[-1] if self.temps else None
        try:
            self.sink = SINKS[target.format](self.out, stream.schema, metadata)
        except BaseException:
            self.abort()
            raise

    def write(self, batch: pa.RecordBatch) -> None:
        self.result.took(batch.num_rows, *_positions(batch, self.committed))
        _count(batch, self.summary)
        self.sink.write(batch)

    def finish(self, cursor) -> None:
        result, target = self.result, self.target
        result.cursor = cursor
        self.sink.finish(
            {
                "walcdc.events": str(result.rows),
                "walcdc.first_lsa": L.format_lsa(result.first_lsa) if result.first_lsa else "",
                "walcdc.last_lsa": L.format_lsa(result.last_lsa) if result.last_lsa else "",
                "walcdc.cursor": cursor.to_json(),
            }
        )
        self.out.flush()
        if self.tmp_path is None:
            try:
                os.fsync(self.out.fileno())
            except (OSError, ValueError, AttributeError):
                pass  # pipes and terminals cannot be synced
            self._close_stream()
            return
        os.fsync(self.out.fileno())
        self.out.close()
        if target.kind == "parts" and (result.rows == 0 or result.first_lsa is None):
            os.unlink(self.tmp_path)
            self.tmp_path = None
            return
        if target.kind == "parts":
            name = _part_name(result.first_lsa, result.last_lsa, target.format)
            final = os.path.join(target.path, name)
            if os.path.exists(final):
                raise _error(f"{{}}: {final} exists already (the same events twice?)")
        else:
            final = target.path
        os.replace(self.tmp_path, final)
        self.tmp_path = None
        result.paths.append(final)
        _fsync_dir(target.path if target.kind == "parts" else os.path.dirname(final))

    def abort(self) -> None:
        sink = getattr(self, "sink", None)
        if sink is not None:
            sink.abort()
        if self.temps:
            try:
                self.out.close()
            except OSError:
                pass
            _remove(self.temps)
        self._close_stream()

    def _close_stream(self) -> None:
        if self.target.kind == "stream" and self.target.path is not None:
            self.out.close()
