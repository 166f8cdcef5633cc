"""A CDC protocol server in the manner of MariaDB MaxScale's (``walcdc serve``): clients
authenticate, register, then request one table's changes from a position and receive its rows
as JSON lines as they commit, until they close the connection.

The conversation, one command per message (a trailing newline is optional)::

    client: hex("user:") + SHA1(password) as hex      server: OK | ERR <reason>
    client: REGISTER UUID=<id>, TYPE=JSON              server: OK | ERR <reason>
    client: REQUEST-DATA <owner>.<table>[.<version>] [<commit LSA>]
    server: the table's schema (one JSON line), then one JSON line per row change, ...

A schema line is an Avro record schema in JSON (as MaxScale sends): the fields ``domain``,
``server_id``, ``sequence``, ``event_number``, ``timestamp``, ``event_type`` (``insert``,
``update_before``, ``update_after``, ``delete``) followed by the table's columns. walcdc fills
``sequence`` with the transaction's commit LSA (``pageid|offset``, the position to resume
after), ``event_number`` with the event's place in its transaction, ``timestamp`` with the
commit time (Unix seconds). An update is two rows, before and after. Every value is of its
declared type (JSON and collection values as JSON text). A new schema line comes before the
first row of a new version of the table's columns (an ALTER); older rows' before images are
sent in the version in force (:class:`_Rows`). ``<version>`` is accepted and ignored
(CUBRID's representations are read from the log). Rows come from transactions committed
*after* the given commit LSA (all of them without one); a position at or beyond the end of
the log is refused.

Users come from a file of ``user:<hex SHA1(SHA1(password))>`` lines (:func:`user_line`), which
group and others may not write: the server stores no password, nor what a client sends. The
connection is plain TCP, as MaxScale's and CUBRID's own CDC ports are: keep it on a trusted
network (or behind a TLS tunnel). Each client is served by a thread of its own following the
log, a few rows at a time with blocking sends: a slow client slows only itself (its socket's
buffer fills and its reader waits). Connections are capped (``max_clients``,
``max_unauthenticated``) and must authenticate, register and request within
``auth_timeout``; bad commands or credentials get ``ERR`` with a reason.
"""

from __future__ import annotations

import binascii
import bisect
import hashlib
import hmac
import json
import logging
import os
import re
import socket
import socketserver
import threading
import time
from typing import Any, Dict, List, Optional, Tuple

from walcdc import lsa as L
from walcdc.errors import LogError
from walcdc.sinks.loop import Writer, deliver

__all__ = ["CdcServer", "user_line", "load_users"]

log = logging.getLogger("walcdc.cdcserver")

MAX_COMMAND = 4096  # bytes; a longer command is refused
AVRO_TYPES = {
    "INTEGER": "int",
    "SHORT": "int",
    "SMALLINT": "int",
    "BIGINT": "long",
    "FLOAT": "float",
    "DOUBLE": "double",
}
META_FIELDS = [
    {"name": "domain", "type": "int"},
    {"name": "server_id", "type": "int"},
    {"name": "sequence", "type": "string"},
    {"name": "event_number", "type": "int"},
    {"name": "timestamp", "type": "int"},
    {
        "name": "event_type",
        "type": {
            "type": "enum",
            "name": "EVENT_TYPES",
            "symbols": ["insert", "update_before", "update_after", "delete"],
        },
    },
]


def _names(values) -> Optional[set]:
    """Table names of a filter (comma-separated lists too), lower-cased; None for no filter."""
    if values is None:
        return None
    return {n.strip().lower() for v in values for n in str(v).split(",") if n.strip()}


def user_line(user: str, password: str) -> str:
    """The users-file line of ``user``: ``user:`` and the hex SHA1 of the SHA1 of the password
    (clients send the SHA1 of the password; the file holds only its hash)."""
    inner = hashlib.sha1(password.encode()).digest()
    return f"{user}:{hashlib.sha1(inner).hexdigest()}"


def load_users(path: str) -> Dict[str, str]:
    """The users file's ``user:<hex SHA1(SHA1(password))>`` lines. Refused (ValueError) if group
    or others may write it, or others read it, as ssh refuses such key files: whoever can
    write it can let themselves in."""
    users = {}
    with open(path, encoding="utf-8") as f:
        mode = os.fstat(f.fileno()).st_mode & 0o777
        if mode & 0o026:
            raise ValueError(
                f"{path}: the users file may be written by group or others, or read by others "
                f"(mode {mode:o}): run chmod 600 {path}"
            )
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            user, sep, digest = line.partition(":")
            if not sep or not re.fullmatch(r"[0-9a-fA-F]{40}", digest):
                raise ValueError(f"{path}:{n}: not a 'user:<40 hex digits>' line")
            users[user] = digest.lower()
    return users


class _ClientGone(Exception):
    pass


class _TimedOut(Exception):
    pass


class _Handler(socketserver.BaseRequestHandler):
    server: CdcServer

    def setup(self) -> None:
        self.buf = b""
        # Authentication, registration and the request must all be done by then: a socket
        # that says nothing (or a byte at a time) does not hold a thread for long.
        self.deadline = time.monotonic() + self.server.auth_timeout

    def finish(self) -> None:
        self.server.forget(self.request)

    def _command(self) -> str:
        """The next command: up to a newline, or what one message brought."""
        while b"\n" not in self.buf:
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise _TimedOut
            self.request.settimeout(left)
            try:
                chunk = self.request.recv(MAX_COMMAND)
            except socket.timeout:
                raise _TimedOut from None
            if not chunk:
                if self.buf:
                    break
                raise _ClientGone
            self.buf += chunk
            if len(self.buf) > MAX_COMMAND:
                raise ValueError("command too long")
            if b"\n" not in self.buf:
                break  # clients wait for the answer: a message is a command
        line, _, self.buf = self.buf.partition(b"\n")
        return line.decode("utf-8", "replace").strip()

    def _send(self, text: str) -> None:
        self.request.sendall(text.encode() + b"\n")

    def handle(self) -> None:
        try:
            self._conversation()
        except _TimedOut:
            wait = self.server.auth_timeout
            self._last_word(f"ERR timed out: authenticate, register and request within {wait:g} s")
        except LogError as exc:  # the log cannot be read on (an archive removed, ...)
            log.error("%s:%s: %s", *self.client_address[:2], exc)
            self._last_word(f"ERR {exc}")
        except (_ClientGone, ConnectionError, OSError):
            pass
        except ValueError as exc:
            self._last_word(f"ERR {exc}")

    def _last_word(self, text: str) -> None:
        try:
            self.request.settimeout(1)
            self._send(text)
        except OSError:
            pass

    def _conversation(self) -> None:
        # Authentication.
        if not self._authenticate(self._command()):
            self._send("ERR authentication failed")
            return
        self.server.authenticated(self.request)
        self._send("OK")
        # Registration.
        while True:
            cmd = self._command()
            m = re.fullmatch(r"REGISTER\s+UUID=([^,\s]+)\s*,\s*TYPE=(\w+)", cmd, re.I)
            if not m:
                self._send("ERR expected: REGISTER UUID=<uuid>, TYPE=JSON")
                continue
            if m.group(2).upper() != "JSON":
                self._send(f"ERR output type {m.group(2)} is not supported (JSON is)")
                continue
            self._send("OK")
            break
        # Data requests.
        while True:
            cmd = self._command()
            parts = cmd.split()
            if len(parts) not in (2, 3) or parts[0].upper() != "REQUEST-DATA":
                self._send("ERR expected: REQUEST-DATA <owner>.<table>[.<version>] [<commit LSA>]")
                continue
            try:
                table = self.server.resolve(parts[1])
            except LogError as exc:
                self._send(f"ERR cannot read the log's tables now: {exc}")
                continue
            if table is None:
                self._send(f"ERR no table {parts[1]} in the log")
                continue
            if not self.server.serves(table):
                self._send(f"ERR table {parts[1]} is not served here")
                continue
            position = cursor = None
            if len(parts) == 3:
                try:
                    position = L.parse(parts[2])
                except ValueError:
                    self._send(f"ERR {parts[2]!r} is not a commit LSA (pageid|offset)")
                    continue
                # Read from the nearest saved cursor at or before the position, not from the
                # log's start (the commits up to the position it still reads are dropped).
                try:
                    cursor = self.server.positions.nearest(position)
                except LogError as exc:  # the log cannot be walked now: from its beginning
                    log.warning("no saved cursor for %s: %s", L.format_lsa(position), exc)
                # No commit lies at or past the end of the log: such a position would wait
                # for ever (or resume at a commit it never saw). The followed log may grow to
                # it one day, but a client asking for it now has the wrong log or position.
                end = self.server.end_of_log()
                if end is not None and position >= end:
                    self._send(
                        f"ERR position {parts[2]} is beyond the end of the log "
                        f"({L.format_lsa(end)})"
                    )
                    continue
            self.request.settimeout(None)  # from now on, sends wait for the client
            self._stream(table, position, cursor)
            return

    def _authenticate(self, text: str) -> bool:
        """``hex("user:")`` followed by the password's SHA1 as 40 hex digits."""
        if not 40 < len(text) <= 2 * 256 + 40:
            return False
        try:
            user = binascii.unhexlify(text[:-40]).decode()
            inner = bytes.fromhex(text[-40:])
        except (binascii.Error, ValueError, UnicodeDecodeError):
            return False
        stored = self.server.users.get(user[:-1]) if user.endswith(":") else None
        return stored is not None and hmac.compare_digest(hashlib.sha1(inner).hexdigest(), stored)

    def _stream(self, table: str, position: Optional[int], cursor) -> None:
        import walcdc

        stream = walcdc.read_changes(
            self.server.source,
            cursor=cursor,
            tables=table,
            users=self.server.db_users,
            ops="insert,update,delete,ddl",
            keys="id",  # images by attribute id: mapped to the version in force (_Rows)
            follow=True,
            poll_interval=self.server.poll_interval,
            idle_timeout=self.server.idle_timeout,
            # Backpressure, not a queue: a few rows at a time, sent with blocking writes, so
            # a slow client holds its reader back; a large transaction's events past
            # client_memory wait in a temporary file until its commit is read.
            batch_size=self.server.batch_rows,
            memory_limit=self.server.client_memory,
        )
        self.server.streams.add(stream)
        since = f" after {L.format_lsa(position)}" if position is not None else ""
        log.info("%s:%s: %s%s", *self.client_address[:2], table, since)

        def watch():  # the client closing its side ends the stream
            try:
                while self.request.recv(4096):
                    pass
            except OSError:
                pass
            stream.close()

        threading.Thread(target=watch, daemon=True).start()
        try:
            # The client keeps its own position (the last event it read): no cursor is saved.
            deliver(
                stream, _ClientWriter(self.request, _Rows(self.server.catalog, table), position)
            )
        finally:
            stream.close()
            self.server.streams.discard(stream)


class _ClientWriter(Writer):
    """A client's stream on the delivery loop: each batch's events after the client's position
    as MaxScale's CDC protocol lines, sent with blocking writes (a slow client holds its reader
    back)."""

    def __init__(self, sock, rows: _Rows, position: Optional[int]):
        self.sock, self.rows, self.position = sock, rows, position

    def write(self, batch) -> None:
        out = []
        for e in batch.select(_EVENT_COLUMNS).to_pylist():
            if self.position is None or (e["commit_lsa"] or 0) > self.position:
                out.extend(self.rows.lines(e))
        if out:
            self.sock.sendall("".join(line + "\n" for line in out).encode())


#: The event columns the rows are made of.
_EVENT_COLUMNS = [
    "op",
    "commit_lsa",
    "commit_time",
    "txn_seq",
    "class_oid",
    "partition_oid",
    "before",
    "after",
    "before_image",
    "after_image",
]


class _Version:
    """A version of a table's columns, as a representation of its class defines them: the
    columns in definition order, each ``(id, name, Avro type, default)``."""

    def __init__(self, class_oid: int, repid: int, columns: List[Tuple[str, str, str, Any]]):
        self.class_oid, self.repid, self.columns = class_oid, repid, columns
        #: What a client sees: a new schema line only when this differs.
        self.key = [(name, avro) for _, name, avro, _ in columns]

    @classmethod
    def of(cls, entry: Dict[str, Any], rep: Dict[str, Any]) -> _Version:
        cols = sorted(rep["columns"], key=lambda c: c["def_order"])
        return cls(
            entry["class_oid"],
            rep["repid"],
            [
                (str(c["id"]), c["name"], AVRO_TYPES.get(c["type_name"], "string"), c["default"])
                for c in cols
            ],
        )

    def schema(self, table: str) -> Dict[str, Any]:
        fields = META_FIELDS + [{"name": name, "type": ["null", avro]} for name, avro in self.key]
        return {
            "namespace": "MaxScale.ChangeRecords.avro",
            "type": "record",
            "name": "ChangeRecord",
            "table": table,
            "fields": fields,
        }

    def row(self, image: Dict[str, Any]) -> Dict[str, Any]:
        """``image`` (attribute id -> value) in these columns: a column the row was written
        without (added since) takes its default, as CUBRID reads such a row; a column dropped
        since is left out."""
        return {
            name: _avro_value(image[cid] if cid in image else default, avro)
            for cid, name, avro, default in self.columns
        }


def _avro_value(value: Any, avro: str) -> Any:
    """``value`` as its declared Avro type: JSON, SET, MULTISET and SEQUENCE values (objects and
    arrays) and anything else declared a string are sent as JSON text, as MaxScale sends JSON
    columns; a value of an older representation's type is converted where it can be."""
    if value is None:
        return None
    if avro == "string":
        return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    try:
        if avro in ("int", "long"):
            return value if type(value) is int else int(value)
        return value if type(value) in (int, float) else float(value)
    except (TypeError, ValueError):
        log.warning("a %s value %.80r is not one: sent as null", avro, value)
        return None


class _Rows:
    """The schema and row lines of one client's table. The version in force is that of the
    newest row image written (an insert's, an update's after image); an older row's before
    image (an update or delete of a row written before an ALTER) is mapped to it by attribute
    id, so the schema line changes once per version of the table, in row order, never back
    and forth."""

    def __init__(self, catalog: _Catalog, table: str):
        self.catalog, self.table = catalog, table
        self.version: Optional[_Version] = None
        self.sent: Optional[list] = None  # the columns of the last schema line sent
        self.ddl_seen: Optional[float] = None

    def lines(self, e: Dict[str, Any]) -> List[str]:
        if e["op"] == "ddl":
            # A RENAME COLUMN renames without a new representation: the next row looks at a
            # catalog learned after this DDL.
            self.ddl_seen = time.monotonic()
            return []
        before = json.loads(e["before"]) if e.get("before") else None
        after = json.loads(e["after"]) if e.get("after") else None
        schemas = self.catalog.schemas(self.ddl_seen)
        if self.ddl_seen is not None and self.version is not None:
            v = self.version
            self.version = self._find(schemas, v.class_oid, v.repid) or v
        self.ddl_seen = None
        if after is not None:
            self.version = self._version(schemas, e, e["after_image"], after)
        elif self.version is None:
            self.version = self._version(schemas, e, e["before_image"], before or {})
        out = []
        if self.version.key != self.sent:
            out.append(json.dumps(self.version.schema(self.table)))
            self.sent = self.version.key
        kinds = {"insert": [("insert", after)], "delete": [("delete", before)]}.get(
            e["op"], [("update_before", before), ("update_after", after)]
        )
        for kind, image in kinds:
            out.append(json.dumps({**_meta(e, kind), **self.version.row(image or {})}))
        return out

    def _version(self, schemas: list, e: Dict[str, Any], raw, image: Dict[str, Any]) -> _Version:
        """The version a row image was written with: its class (the partition's, for a
        partitioned table) and the representation id in its record header."""
        class_oid = e["partition_oid"] or e["class_oid"]
        repid = int.from_bytes(raw[:4], "big") & 0x00FFFFFF if raw and len(raw) >= 4 else None
        found = self._find(schemas, class_oid, repid, set(image))
        if found is None:  # a representation made after the catalog was learned
            found = self._find(self.catalog.schemas(time.monotonic()), class_oid, repid, set(image))
        if found is None:  # not in the log's class records: what the row itself says
            log.warning("%s: no columns known for representation %s", self.table, repid)
            found = _Version(class_oid, -1, [(k, k, "string", None) for k in image])
        return found

    @staticmethod
    def _find(schemas: list, class_oid: int, repid: Optional[int], ids: Optional[set] = None):
        """Class ``class_oid``'s representation ``repid`` if it has the columns ``ids`` of a
        row image, else its newest representation with exactly those columns."""
        for entry in schemas:
            if entry["class_oid"] != class_oid:
                continue
            reps = {r["repid"]: r for r in entry["representations"] if r["columns"]}
            rep = reps.get(repid)
            if rep is not None and (ids is None or ids <= {str(c["id"]) for c in rep["columns"]}):
                return _Version.of(entry, rep)
            for rep in sorted(reps.values(), key=lambda r: -r["repid"]):
                if ids is not None and ids == {str(c["id"]) for c in rep["columns"]}:
                    return _Version.of(entry, rep)
        return None


def _meta(e: Dict[str, Any], kind: str) -> Dict[str, Any]:
    t = e.get("commit_time")
    return {
        "domain": 0,
        "server_id": 0,
        "sequence": L.format_lsa(e["commit_lsa"]),
        "event_number": e["txn_seq"],
        "timestamp": int(t.timestamp()) if t is not None else 0,
        "event_type": kind,
    }


def _refuse(sock, text: str) -> None:
    """Says why and ends the connection, without ever blocking the accepting thread; the
    connection's own thread, if any, sees the end and closes it."""
    try:
        sock.send(text.encode() + b"\n", socket.MSG_DONTWAIT)
    except OSError:
        pass
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


class _Positions:
    """Cursors of the committed stream saved along the log, ``spacing`` bytes of log apart
    (at the record-aligned cuts of :meth:`walcdc.LogSet.ranges`), so that a client resuming at
    a commit LSA reads from the nearest one at or before it instead of from the beginning of
    the log (a cursor carries the catalog as of its restart point: nothing before it is read).
    Each is the end cursor of a stream from the one before that asks for no event (a walk: no
    image read, no row decoded): the whole log is walked once, later only what was written
    since. One walk at a time, shared by every client; at most ``most`` cursors are kept (past
    that every other one is dropped, so their spacing doubles)."""

    def __init__(self, source: str, spacing: int, most: int = 1024):
        self.source, self.spacing, self.most = source, max(1, spacing), max(2, most)
        self.walks = 0  # streams read to save a cursor
        self._lock = threading.Lock()
        self._saved: List[Any] = []  # walcdc.Cursor, in log order

    def nearest(self, position: int):
        """The saved cursor with the latest last commit at or before ``position`` (None: read
        from the beginning of the log)."""
        with self._lock:
            self._extend()
            i = bisect.bisect_right([c.last_commit_lsa for c in self._saved], position)
            return self._saved[i - 1] if i else None

    def newest(self) -> Optional[int]:
        """Where the newest saved cursor is (a record start before the end of the log), as
        saved so far (the log is not read)."""
        with self._lock:
            return self._saved[-1].position if self._saved else None

    def latest_catalog(self) -> Optional[bytes]:
        """The catalog of the newest saved cursor (None: none saved yet): the tables as the
        log defines them there, the start of a short walk for what came after."""
        with self._lock:
            self._extend()
            return self._saved[-1].catalog if self._saved else None

    def _extend(self) -> None:
        """Saves a cursor at each cut of the log after the newest one saved (the last range,
        still being written, has none)."""
        import walcdc

        log = walcdc.open_log(self.source)
        cursor = self._saved[-1] if self._saved else None
        for _, end in log.ranges(self.spacing, cursor.position if cursor else None):
            if end is None:
                continue
            stream = walcdc.read_changes(
                log, cursor=cursor, end=end, ops=["commit"], mode="id", decode=False
            )
            for _ in stream:
                pass
            self.walks += 1
            found = stream.cursor
            if found.last_commit_lsa is None:
                continue  # nothing committed yet: the next walk starts at the beginning too
            cursor = found
            self._saved.append(cursor)
            if len(self._saved) > self.most:
                self._saved = self._saved[1::2] + ([] if len(self._saved) % 2 else [cursor])


class _Catalog:
    """The log's tables (``LogSet.schemas()``), learned once, and again only when asked for
    something newer: a walk begun after a given time, or after the log's files changed. One
    walk at a time, shared by whoever asks meanwhile; no lock is held while the log is read,
    so a client whose table is already known never waits for a walk. With ``positions``, a
    walk reads the class records from the newest saved cursor's catalog on, not the log from
    its beginning."""

    def __init__(self, source: str, positions: Optional[_Positions] = None):
        self.source = source
        self.positions = positions
        self.walks = 0  # how many times the log was walked for its tables
        self._cond = threading.Condition()
        self._schemas: Optional[list] = None
        self._started = float("-inf")  # when the walk behind _schemas began (monotonic)
        self._signature: Any = None  # the log files' sizes and times before that walk
        self._busy = False

    def _signature_now(self) -> tuple:
        """The log files' names, sizes and modification times: a cheap test of growth."""
        paths = [self.source]
        if os.path.isdir(self.source):
            paths = sorted(e.path for e in os.scandir(self.source) if e.is_file())
        out = []
        for path in paths:
            try:
                st = os.stat(path)
            except OSError:  # an archive removed meanwhile
                continue
            out.append((path, st.st_size, st.st_mtime_ns))
        return tuple(out)

    def schemas(self, since: Optional[float] = None) -> list:
        """The schemas as learned (the first call learns them); with ``since`` (a
        ``time.monotonic()``), as learned by a walk begun after it, or before it if the log's
        files have not changed since that walk began (else the log is walked again). Callers
        must not change what is returned."""
        import walcdc

        signature = self._signature_now() if since is not None else None
        with self._cond:
            while True:
                fresh = self._schemas is not None and (
                    since is None or self._started >= since or self._signature == signature
                )
                if fresh:
                    return self._schemas
                if not self._busy:
                    break
                self._cond.wait()  # another thread's walk: its result may do
            self._busy = True
        started, signature, learned = time.monotonic(), self._signature_now(), None
        try:
            learned = walcdc.open_log(self.source).schemas(since=self._since())
        finally:
            with self._cond:
                self._busy = False
                if learned is not None:
                    self.walks += 1
                    self._schemas, self._started, self._signature = learned, started, signature
                self._cond.notify_all()
        return learned

    def _since(self) -> Optional[bytes]:
        if self.positions is None:
            return None
        try:
            return self.positions.latest_catalog()
        except LogError as exc:  # the log cannot be walked for cursors now: from its start
            log.warning("no saved cursor for the catalog: %s", exc)
            return None

    def resolve(self, name: str) -> Optional[str]:
        """The table a request names (``owner.table``, or with a version suffix), from the
        catalog as known, then, if not there, as the log is now (walked again only if it
        changed)."""
        candidates = [name] + ([name.rsplit(".", 1)[0]] if name.count(".") >= 2 else [])
        for since in (None, time.monotonic()):
            known = {}
            for s in self.schemas(since):
                for n in s.get("names") or [s["name"]]:
                    known.setdefault(n.lower(), n)
            for c in candidates:
                if c.lower() in known:
                    return known[c.lower()]
        return None


class CdcServer(socketserver.ThreadingTCPServer):
    """``CdcServer(source, users, host, port)``: serves the log at ``source`` (followed live)
    to CDC protocol clients; ``users``: name -> hex SHA1(SHA1(password)) (:func:`load_users`).
    ``serve_forever()`` runs it; ``shutdown()`` then :meth:`close` stop it.

    ``client_memory``: bytes of a transaction's events a client's reader holds before they
    spill to a temporary file; ``batch_rows``: rows read and sent at a time.
    ``idle_timeout``: end a client's stream after this many seconds with nothing new.
    ``position_spacing``: bytes of log between the cursors saved for clients that resume at
    a position (:class:`_Positions`); such a client reads from the nearest one before it."""

    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128  # a burst of connections waits to be accepted (or refused)

    def __init__(
        self,
        source,
        users: Dict[str, str],
        host: str = "127.0.0.1",
        port: int = 4001,
        poll_interval: float = 0.2,
        idle_timeout: Optional[float] = None,
        client_memory: int = 16 << 20,
        batch_rows: int = 256,
        max_clients: int = 64,
        max_unauthenticated: int = 16,
        auth_timeout: float = 10.0,
        tables: Optional[List[str]] = None,
        exclude_tables: Optional[List[str]] = None,
        db_users: Optional[List[str]] = None,
        position_spacing: int = 64 << 20,
    ):
        self.source = os.fspath(source)
        self.users = users
        self.poll_interval, self.idle_timeout = poll_interval, idle_timeout
        self.client_memory, self.batch_rows = client_memory, batch_rows
        self.max_clients = max_clients
        # Which tables clients may request (names, owner.table or table, any case) and whose
        # changes are served.
        self.tables = _names(tables)
        self.exclude_tables = _names(exclude_tables) or set()
        self.db_users = db_users
        self.max_unauthenticated = min(max_unauthenticated, max_clients)
        self.auth_timeout = auth_timeout
        self._clients: set = set()  # connections with a thread
        self._waiting: Dict[Any, None] = {}  # those not authenticated yet, oldest first
        self._clients_lock = threading.Lock()
        self.streams: set = set()
        self.positions = _Positions(self.source, position_spacing)
        self.catalog = _Catalog(self.source, self.positions)
        super().__init__((host, port), _Handler)

    def resolve(self, name: str) -> Optional[str]:
        return self.catalog.resolve(name)

    def serves(self, table: str) -> bool:
        """Whether clients may request ``table`` (its owner-qualified name as stored)."""
        forms = {table.lower(), table.lower().rsplit(".", 1)[-1]}
        allowed = self.tables is None or bool(forms & self.tables)
        return allowed and not forms & self.exclude_tables

    def process_request(self, request, client_address) -> None:
        """Admits a connection (a thread of its own) within the caps. Past max_unauthenticated
        connections not yet authenticated, the oldest of them is pushed out, so idle sockets
        cannot keep a client that authenticates at once from its turn; past max_clients with
        every one authenticated, the new connection is refused. Both get ERR and are closed."""
        pushed_out = None
        with self._clients_lock:
            full = len(self._clients) >= self.max_clients
            if self._waiting and (full or len(self._waiting) >= self.max_unauthenticated):
                pushed_out = next(iter(self._waiting))
                self._forget(pushed_out)
            elif full:
                _refuse(request, "ERR too many clients")
                self.shutdown_request(request)
                return
            self._clients.add(request)
            self._waiting[request] = None
        if pushed_out is not None:
            _refuse(pushed_out, "ERR too many connections waiting to authenticate")
        request.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)  # peers that vanish
        super().process_request(request, client_address)

    def authenticated(self, request) -> None:
        with self._clients_lock:
            self._waiting.pop(request, None)

    def forget(self, request) -> None:
        with self._clients_lock:
            self._forget(request)

    def _forget(self, request) -> None:
        self._clients.discard(request)
        self._waiting.pop(request, None)

    def end_of_log(self) -> Optional[int]:
        """Where the log ends now (None while it cannot be read, e.g. between two steps of
        the server writing it: the stream looks again)."""
        import walcdc

        try:
            return walcdc.open_log(self.source)._native.end_of_log(self.positions.newest())[
                "end_lsa"
            ]
        except walcdc.LogError:
            return None

    def close(self) -> None:
        for s in list(self.streams):
            s.close()
        self.server_close()
