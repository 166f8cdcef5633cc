"""Webhook delivery: committed transactions of a followed log POSTed to an HTTP endpoint, with a
durable queue between the reader and the sender (``walcdc deliver``).

::

    reader ──(batches of events)──▶ queue (SQLite, WAL) ──▶ sender ──▶ POST
       ▲                                 │  batch + cursor in one transaction
       └── resumes from its cursor ◀─────┘  watermark after each 2xx

- The **reader** follows the log (:func:`walcdc.read_changes` with ``follow=True``) and cuts the
  committed stream into batches (``batch_events`` events, or what came in ``batch_delay``
  seconds; a transaction larger than a batch spans several). A batch and the stream's cursor
  after it are written to the queue in one SQLite transaction: a restart resumes reading after
  the last queued batch, so nothing is read twice into the queue and nothing is lost. When the
  queue holds ``queue_max_bytes`` the reader waits (the log itself holds what is not read
  yet): a slow or failing endpoint never fills the disk. What waits for ``batch_delay`` is
  queued then even when the log goes quiet.
- The **sender** POSTs the oldest batch: a JSON array of the transactions' events in commit
  order (or Debezium envelopes), headers ``Idempotency-Key`` (the commit LSA and LSA of the
  batch's first and last events) and, with a secret, Standard Webhooks signing
  (``webhook-id``, ``webhook-timestamp``, ``webhook-signature``). Only a 2xx is success: the
  batch leaves the queue and the high watermark (its last commit LSA) is saved, in one
  transaction. A transient failure (connection error, timeout, 5xx, 408, 429) is retried with
  capped exponential backoff and jitter (honoring ``Retry-After``), forever: a batch is never
  dropped by default. A configuration error (the endpoint's certificate refused, a redirect, a
  4xx other than 408 and 429) stops the delivery at once (:class:`~walcdc.OutputError`), the
  queue and cursor kept for a run after the fix. With ``dead_letter`` (a directory), a batch
  the endpoint refuses (a 4xx, but 401, 403, 404 and 405, which concern every batch) and, with
  ``max_tries``, a batch still failing after that many tries is written there (body and
  metadata) and dropped from the queue (logged and counted).
- **Guarantee**: at least once, and nothing dropped unless ``dead_letter`` is given. A crash
  (or a stop, which cuts the request in flight short) after the endpoint took a batch and
  before its 2xx was recorded sends that batch again: duplicates are whole batches, at most
  the one in flight, and carry the same idempotency key.
- What the reader skips in a damaged log is logged and counted as it happens
  (:attr:`Metrics.warnings`), not only warned about when the stream ends.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import hashlib
import hmac
import http.client
import json
import logging
import os
import random
import socket
import sqlite3
import ssl
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, NamedTuple, Optional, Tuple

import pyarrow as pa

from walcdc import lsa as L
from walcdc.errors import InvalidArgumentError, OutputError
from walcdc.sinks.loop import Writer, deliver

__all__ = ["Delivery", "DeliveryQueue", "Metrics", "WebhookSender", "sign"]

log = logging.getLogger("walcdc.deliver")

#: Statuses that concern every batch (the URL or its credentials are wrong), never set aside.
ENDPOINT_STATUSES = frozenset({401, 403, 404, 405})
#: The longest ``Retry-After`` honored: a broken value must not park the delivery for days.
RETRY_AFTER_CAP = 3600.0
#: Bytes of a response body read at most: the status is the answer, the rest is not read.
REPLY_BODY_CAP = 64 << 10
#: Seconds a stopped delivery waits for its reader to end (it may be deep in a long walk).
STOP_GRACE = 3.0


def sign(secret: bytes, msg_id: str, timestamp: int, body: bytes) -> str:
    """The Standard Webhooks signature of a request: ``v1,`` and the base64 HMAC-SHA256 of
    ``"{id}.{timestamp}.{body}"`` under ``secret``."""
    mac = hmac.new(secret, f"{msg_id}.{timestamp}.".encode() + body, hashlib.sha256)
    return "v1," + base64.b64encode(mac.digest()).decode()


@dataclass
class Metrics:
    """Counters of a delivery, shown as Prometheus text (:meth:`prometheus`)."""

    events_read: int = 0
    events_queued: int = 0
    events_delivered: int = 0
    batches_delivered: int = 0
    retries: int = 0
    batches_dropped: int = 0
    events_dropped: int = 0
    queue_bytes: int = 0
    lag_seconds: float = 0.0
    lag_bytes: int = 0
    #: Warnings of the reader by kind (``UnplacedRecordsSkipped``, ...), as they were logged.
    warnings: Dict[str, int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, **counts: float) -> None:
        with self.lock:
            for k, v in counts.items():
                setattr(self, k, getattr(self, k) + v)

    def set(self, **values: float) -> None:
        with self.lock:
            for k, v in values.items():
                setattr(self, k, v)

    def warned(self, kind: str) -> None:
        with self.lock:
            self.warnings[kind] = self.warnings.get(kind, 0) + 1

    def snapshot(self) -> Dict[str, Any]:
        with self.lock:
            return {
                k: dict(v) if k == "warnings" else v for k, v in vars(self).items() if k != "lock"
            }

    def prometheus(self) -> str:
        lines = []
        for k, v in self.snapshot().items():
            kind = "gauge" if k in ("queue_bytes", "lag_seconds", "lag_bytes") else "counter"
            name = f"walcdc_{k}" + ("_total" if kind == "counter" else "")
            lines.append(f"# TYPE {name} {kind}")
            if isinstance(v, dict):
                lines += [f'{name}{{kind="{label}"}} {n}' for label, n in sorted(v.items())]
            else:
                lines.append(f"{name} {v}")
        return "\n".join(lines) + "\n"


def _state_errors(method):
    """A method of :class:`DeliveryQueue` whose SQLite errors become an
    :class:`~walcdc.OutputError` naming the database and what to do."""

    @functools.wraps(method)
    def run(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except sqlite3.Error as exc:
            raise _state_error(self.path, exc) from exc

    return run


def _state_error(path: str, exc: sqlite3.Error) -> OutputError:
    name = getattr(exc, "sqlite_errorname", "")  # Python 3.11+
    text = f"{name} {exc}".lower()
    what = f"the delivery state database {path}"
    if "corrupt" in text or "notadb" in text or "not a database" in text or "malformed" in text:
        fix = (
            f"{what} is corrupt ({exc}): move it away (with its -wal and -shm files) to start "
            "over; events are then read again from the log's beginning, delivered ones too"
        )
    elif "full" in text:
        fix = f"the disk holding {what} is full: free space and run again (nothing was lost)"
    elif "busy" in text or "locked" in text:
        fix = f"{what} is locked ({exc}): is another walcdc deliver using the same state?"
    else:
        fix = f"{what} cannot be read or written ({exc}): check the disk and its permissions"
    return OutputError(fix, file=path)


class DeliveryQueue:
    """The durable FIFO between reader and sender: batches with their commit LSA range, the
    reader's cursor after the last queued batch, and the high watermark (the last commit LSA a
    2xx acknowledged). SQLite in WAL mode, one connection per thread, every change one
    transaction. A failing database (corrupt, full disk) is an :class:`~walcdc.OutputError`
    naming it."""

    @_state_errors
    def __init__(self, path: str):
        self.path = path
        self._local = threading.local()
        with self._db() as db:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute(
                "CREATE TABLE IF NOT EXISTS batches (id INTEGER PRIMARY KEY, key TEXT,"
                " last_lsa INTEGER, last_time REAL, events INTEGER, size INTEGER, body BLOB,"
                " tries INTEGER DEFAULT 0)"
            )
            db.execute("CREATE TABLE IF NOT EXISTS state (key TEXT PRIMARY KEY, value TEXT)")

    def _db(self) -> sqlite3.Connection:
        db = getattr(self._local, "db", None)
        if db is None:
            db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
            # NORMAL in WAL mode: a commit survives the process dying; a power loss may roll
            # back the last ones, which is safe here: a lost batch is read again from the log
            # (its cursor is rolled back with it), a lost acknowledgement sends a batch again.
            db.execute("PRAGMA synchronous=NORMAL")
            self._local.db = db
        return db

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction: committed whole, or rolled back on any error."""
        db = self._db()
        db.execute("BEGIN IMMEDIATE")
        try:
            yield db
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:  # SQLite rolls back by itself at some errors (a full disk)
                db.execute("ROLLBACK")
            raise

    @_state_errors
    def _get(self, key: str) -> Optional[str]:
        row = self._db().execute("SELECT value FROM state WHERE key=?", (key,)).fetchone()
        return row[0] if row else None

    @property
    def cursor(self) -> Optional[str]:
        """The reader's cursor (JSON) after the last queued batch."""
        return self._get("cursor")

    @property
    def watermark(self) -> Optional[int]:
        """The last commit LSA acknowledged by the endpoint."""
        v = self._get("watermark")
        return int(v) if v is not None else None

    @_state_errors
    def put(
        self, key: str, last_lsa: int, last_time: float, events: int, body: bytes, cursor: str
    ) -> None:
        """Queues a batch (``key``: its idempotency key; ``last_lsa`` / ``last_time``: its last
        commit LSA and time) and the reader's cursor after it, together."""
        with self._transaction() as db:
            db.execute(
                "INSERT INTO batches (key, last_lsa, last_time, events, size, body)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (key, last_lsa, last_time, events, len(body), body),
            )
            db.execute("INSERT OR REPLACE INTO state VALUES ('cursor', ?)", (cursor,))

    @_state_errors
    def save_cursor(self, cursor: str) -> None:
        self._db().execute("INSERT OR REPLACE INTO state VALUES ('cursor', ?)", (cursor,))

    @_state_errors
    def oldest(self):
        """``(id, key, last_lsa, last_time, events, body, tries)`` of the oldest batch, or
        None."""
        return (
            self._db()
            .execute(
                "SELECT id, key, last_lsa, last_time, events, body, tries FROM batches"
                " ORDER BY id LIMIT 1"
            )
            .fetchone()
        )

    @_state_errors
    def acknowledge(self, batch_id: int, last_lsa: int) -> None:
        """The batch was delivered: it leaves the queue and the watermark moves, together."""
        with self._transaction() as db:
            db.execute("DELETE FROM batches WHERE id=?", (batch_id,))
            db.execute("INSERT OR REPLACE INTO state VALUES ('watermark', ?)", (str(last_lsa),))

    @_state_errors
    def drop(self, batch_id: int) -> None:
        self._db().execute("DELETE FROM batches WHERE id=?", (batch_id,))

    @_state_errors
    def count_try(self, batch_id: int) -> int:
        db = self._db()
        db.execute("UPDATE batches SET tries = tries + 1 WHERE id=?", (batch_id,))
        return db.execute("SELECT tries FROM batches WHERE id=?", (batch_id,)).fetchone()[0]

    @_state_errors
    def bytes(self) -> int:
        """Bytes the queued batches hold."""
        row = self._db().execute("SELECT COALESCE(SUM(size), 0) FROM batches").fetchone()
        return int(row[0])

    @_state_errors
    def __len__(self) -> int:
        return int(self._db().execute("SELECT COUNT(*) FROM batches").fetchone()[0])


class Reply(NamedTuple):
    """An endpoint's answer: status, reason phrase, ``Retry-After`` (seconds) and ``Location``
    if it said so, and the start of its body."""

    status: int
    reason: str = ""
    retry_after: Optional[float] = None
    location: Optional[str] = None
    body: bytes = b""


class WebhookSender:
    """POSTs batches to ``url`` (http or https; ``ca_file`` for a private CA, ``cert_file`` /
    ``key_file`` for mutual TLS), with a timeout and Standard Webhooks signing when a secret is
    given. :meth:`send` returns the :class:`Reply`, or raises ``OSError`` (or
    ``http.client.HTTPException``) on a network failure. The whole request (connect, send,
    the answer's headers and at most :data:`REPLY_BODY_CAP` bytes of its body) takes
    ``timeout`` seconds at most: a receiver that answers a byte at a time cannot hold it.
    Credentials in the URL (``https://user:password@host/...``) are sent as HTTP Basic
    authentication and never shown: :attr:`endpoint`, the URL that messages name, has neither
    them nor the query."""

    def __init__(
        self,
        url: str,
        *,
        secret: Optional[bytes] = None,
        timeout: float = 10.0,
        ca_file: Optional[str] = None,
        cert_file: Optional[str] = None,
        key_file: Optional[str] = None,
    ):
        u = urllib.parse.urlsplit(url)
        host = u.netloc.rpartition("@")[2]
        #: The endpoint as messages name it: no credentials, no query (it may hold a token).
        self.endpoint = f"{u.scheme}://{host}{u.path}"
        if u.scheme not in ("http", "https") or not u.hostname:
            raise InvalidArgumentError(f"webhook: {self.endpoint!r} is not an http(s) URL")
        self.secret, self.timeout = secret, timeout
        # Credentials in the URL (user:password@) go as HTTP Basic authentication.
        self._auth = None
        if u.username is not None:
            pair = f"{urllib.parse.unquote(u.username)}:{urllib.parse.unquote(u.password or '')}"
            self._auth = "Basic " + base64.b64encode(pair.encode()).decode()
        self._https = u.scheme == "https"
        self._host, self._port = u.hostname, u.port
        self._path = (u.path or "/") + (f"?{u.query}" if u.query else "")
        self._ssl = None
        if self._https:
            self._ssl = ssl.create_default_context(cafile=ca_file)
            if cert_file:
                self._ssl.load_cert_chain(cert_file, key_file)
        self._conn: Optional[http.client.HTTPConnection] = None
        self._attempt = 0  # the request in flight (its number), 0 for none

    def _connection(self) -> http.client.HTTPConnection:
        if self._conn is None:
            if self._https:
                self._conn = http.client.HTTPSConnection(
                    self._host, self._port, timeout=self.timeout, context=self._ssl
                )
            else:
                self._conn = http.client.HTTPConnection(
                    self._host, self._port, timeout=self.timeout
                )
        return self._conn

    def headers(self, body: bytes, key: str, credentials: bool = True) -> Dict[str, str]:
        """The headers of a batch's request (``credentials=False``: without Authorization)."""
        headers = {"Content-Type": "application/json", "Idempotency-Key": key}
        if self._auth is not None and credentials:
            headers["Authorization"] = self._auth
        if self.secret is not None:
            ts = int(time.time())
            headers.update(
                {
                    "webhook-id": key,
                    "webhook-timestamp": str(ts),
                    "webhook-signature": sign(self.secret, key, ts, body),
                }
            )
        return headers

    def send(self, body: bytes, key: str) -> Reply:
        start = time.monotonic()
        attempt = self._attempt = self._attempt + 1
        # The socket timeout bounds each read, not their sum: at the deadline a timer shuts
        # the connection down, which ends whatever the request waits for.
        timer = threading.Timer(self.timeout, self._expire, (attempt,))
        timer.daemon = True
        timer.start()
        try:
            conn = self._connection()
            if conn.sock is None:
                conn.connect()  # bounded by the socket timeout (no socket yet to shut down)
            if time.monotonic() - start >= self.timeout:
                raise TimeoutError(f"no connection in {self.timeout:g} s")
            conn.request("POST", self._path, body=body, headers=self.headers(body, key))
            resp = conn.getresponse()
            try:
                data = resp.read(REPLY_BODY_CAP)
            except (OSError, http.client.HTTPException):
                data = b""  # the status is the answer: a body cut short does not change it
            if not resp.isclosed() or resp.getheader("connection", "").lower() == "close":
                self.close()  # the rest of a long answer is not read: the connection goes
            return Reply(
                resp.status,
                resp.reason,
                _retry_after(resp.getheader("retry-after")),
                resp.getheader("location"),
                data[:200],
            )
        except BaseException as exc:
            self.close()  # a fresh connection for the next try
            if isinstance(exc, Exception) and time.monotonic() - start >= self.timeout:
                raise TimeoutError(f"no whole answer in {self.timeout:g} s") from exc
            raise
        finally:
            self._attempt = 0
            timer.cancel()

    def _expire(self, attempt: int) -> None:
        if self._attempt == attempt:
            self.abort()

    def abort(self) -> None:
        """Ends the request in flight (from any thread): its connection is shut down, and
        :meth:`send` raises."""
        conn = self._conn
        sock = conn.sock if conn is not None else None
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass  # closed already

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def _retry_after(value: Optional[str]) -> Optional[float]:
    """A ``Retry-After`` header in seconds (it is seconds or an HTTP date), or None."""
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        import email.utils

        try:
            seconds = email.utils.parsedate_to_datetime(value).timestamp() - time.time()
        except (TypeError, ValueError):
            return None
    return min(max(seconds, 0.0), RETRY_AFTER_CAP)


def _write_durably(path: str, data: bytes) -> None:
    """Writes a file whole or not at all: a temporary file, synced, renamed into place."""
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fd = os.open(os.path.dirname(path) or ".", os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _batch_body(batches: List[pa.RecordBatch]) -> bytes:
    """A JSON array of the events of ``batches``, JSON columns embedded, LSAs also as text."""
    from walcdc.sinks.files import JsonLinesSink

    parts: List[bytes] = []

    class _Out:
        write = parts.append

    sink = JsonLinesSink(_Out(), batches[0].schema, {})
    for b in batches:
        sink.write(b)
    # JSON Lines hold no raw newline but the one ending each event.
    return b"[" + b"".join(parts).rstrip(b"\n").replace(b"\n", b",") + b"]"


class Delivery:
    """``walcdc deliver``: follows the log at ``source`` and delivers its committed events to
    a webhook through a durable queue in ``state_dir`` (see the module docs). :meth:`run`
    blocks until :meth:`stop` (or, with ``idle_timeout``, until the log was quiet that long and
    the queue is empty); it raises :class:`~walcdc.OutputError` at a configuration error.
    :attr:`failure` says why the last try failed while the endpoint is failing (None once a
    batch went through): a delivery stopped while it is set left batches undelivered."""

    def __init__(
        self,
        source,
        sender: WebhookSender,
        state_dir: str,
        *,
        batch_events: int = 1000,
        batch_delay: float = 0.5,
        max_tries: Optional[int] = None,
        dead_letter: Optional[str] = None,
        backoff: float = 0.5,
        max_backoff: float = 60.0,
        queue_max_bytes: int = 256 << 20,
        poll_interval: float = 0.2,
        idle_timeout: Optional[float] = None,
        envelope: Optional[str] = None,
        read_options: Optional[Dict[str, Any]] = None,
    ):
        if batch_events < 1 or batch_delay < 0 or queue_max_bytes < 1:
            raise InvalidArgumentError("batch_events, batch_delay and queue_max_bytes: positive")
        if max_tries is not None and max_tries < 1:
            raise InvalidArgumentError("max_tries must be at least 1 (or None: forever)")
        if max_tries is not None and dead_letter is None:
            raise InvalidArgumentError(
                "max_tries drops batches: give dead_letter= (a directory) to keep them",
                cli_message="--max-tries drops batches: give --dead-letter DIR to keep them",
            )
        os.makedirs(state_dir, exist_ok=True)
        if dead_letter is not None:
            os.makedirs(dead_letter, exist_ok=True)
        self.dead_letter = dead_letter
        self.source, self.sender = source, sender
        self.queue = DeliveryQueue(os.path.join(state_dir, "queue.sqlite"))
        self.batch_events, self.batch_delay = batch_events, batch_delay
        self.max_tries, self.backoff, self.max_backoff = max_tries, backoff, max_backoff
        self.queue_max_bytes = queue_max_bytes
        self.poll_interval, self.idle_timeout = poll_interval, idle_timeout
        self.envelope, self.read_options = envelope, dict(read_options or {})
        self.metrics = Metrics()
        self.failure: Optional[str] = None
        self._stop = threading.Event()
        self._reader_done = threading.Event()
        self._stream = None
        self._error: Optional[BaseException] = None
        self._page_size = 0
        self._read_at = 0  # where the reader stands (LSA key)
        # Stream batches read and not queued yet, the cursor after them, since when.
        self._pending: List[pa.RecordBatch] = []
        self._pending_cursor = None
        self._pending_since = 0.0
        self._pending_lock = threading.Lock()
        self.metrics.set(queue_bytes=self.queue.bytes())

    # --- the reader ---

    def _read(self) -> None:
        import walcdc

        try:
            cursor = self.queue.cursor
            self._stream = stream = walcdc.read_changes(
                self.source,
                cursor=walcdc.Cursor.from_json(cursor) if cursor else None,
                follow=True,
                poll_interval=self.poll_interval,
                idle_timeout=self.idle_timeout,
                envelope=self.envelope,
                batch_size=self.batch_events,
                on_warning=self._warned,
                **self.read_options,
            )
            self._page_size = walcdc.open_log(self.source).header()["page_size"]
            # The queue saves each cursor with the batches it covers, in one transaction.
            deliver(stream, _QueueWriter(self, stream))
        except BaseException as exc:  # surfaced by run()
            self._error = exc
            self._stop.set()
        finally:
            self._reader_done.set()

    def _warned(self, warning: Warning) -> None:
        """What the reader skipped, dropped or could not decode, as it happens (a delivery may
        follow a log for months): a log line and a count by kind (:attr:`Metrics.warnings`)."""
        kind = type(warning).__name__
        log.warning("%s (%s)", warning, kind)
        self.metrics.warned(kind)

    def _flush(self, due_only: bool) -> None:
        """Queues the pending stream batches with the cursor after them: all of them, or only
        once they hold ``batch_events`` or waited ``batch_delay`` seconds. The caller holds
        ``_pending_lock`` (batches are queued in the order read). Once stopped, nothing more is
        queued: what was read is read again by the next run."""
        if self._stop.is_set():
            return
        rows = sum(b.num_rows for b in self._pending)
        waited = time.monotonic() - self._pending_since
        if due_only and rows < self.batch_events and (not rows or waited < self.batch_delay):
            return
        if self._pending_cursor is None:
            return
        cursor = self._pending_cursor.to_json()
        if rows:
            self._enqueue(self._pending, rows, cursor)
        else:
            self.queue.save_cursor(cursor)
        self._pending, self._pending_cursor = [], None

    def _flush_due(self) -> None:
        """From the sender when it has nothing to send: a following stream gives no batch while
        the log is quiet, so the reader would hold the last events read until the next ones."""
        if self._pending_lock.acquire(blocking=False):  # the reader may be waiting for room
            try:
                self._flush(due_only=True)
            finally:
                self._pending_lock.release()

    def _enqueue(self, batches: List[pa.RecordBatch], rows: int, cursor: str) -> None:
        while self.queue.bytes() >= self.queue_max_bytes and not self._stop.is_set():
            self._stop.wait(0.05)  # backpressure: the log keeps what is not read yet
        if self._stop.is_set():
            return  # stopped: read again by the next run
        first, last = _event_position(batches[0], 0), _event_position(batches[-1], -1)
        key = "-".join(f"{L.format_lsa(c)}:{L.format_lsa(e)}" for c, e in (first, last))
        when = _event_time(batches[-1], -1)
        self.queue.put(key, last[0], when, rows, _batch_body(batches), cursor)
        self.metrics.add(events_queued=rows)
        self.metrics.set(queue_bytes=self.queue.bytes())

    # --- the sender ---

    def _send_loop(self) -> None:
        while not self._stop.is_set():
            item = self.queue.oldest()
            if item is None and self._reader_done.is_set():
                # The reader queues its last batches before it says it is done: look again
                # (between the look above and now it may have queued them).
                item = self.queue.oldest()
                if item is None:
                    return
            if item is None:
                self._flush_due()
                self._stop.wait(0.01)
                continue
            batch_id, key, last, when, events, body, tries = item
            verdict, why, retry_after = self._try(body, key)
            if verdict != "ok" and self._stop.is_set():
                return  # cut short by stop(): the batch stays queued
            if verdict == "ok":
                self.failure = None
                self.queue.acknowledge(batch_id, last)
                self.metrics.add(events_delivered=events, batches_delivered=1)
                self.metrics.set(
                    queue_bytes=self.queue.bytes(),
                    lag_seconds=max(0.0, time.time() - when) if when else 0.0,
                    lag_bytes=max(0, self._log_bytes(self._read_at) - self._log_bytes(last)),
                )
                continue
            if verdict == "stop" or (verdict == "refused" and self.dead_letter is None):
                raise OutputError(
                    f"webhook {self.sender.endpoint}: {why}; nothing was dropped: the queue "
                    "and cursor are kept, a run after the fix sends them",
                    file=self.sender.endpoint,
                )
            self.failure = why
            tries = self.queue.count_try(batch_id)
            if verdict == "refused" or (self.max_tries is not None and tries >= self.max_tries):
                self._set_aside(item, tries, why)
                continue
            self.metrics.add(retries=1)
            # Capped exponential backoff with jitter; the exponent capped too (2.0 ** 1100
            # overflows, and retrying forever gets there).
            delay = min(self.max_backoff, self.backoff * 2.0 ** min(tries - 1, 60))
            delay *= random.uniform(0.5, 1.0)
            if retry_after is not None:
                delay = max(delay, retry_after)
            log.warning("batch %s: %s; try %d again in %.2f s", key, why, tries + 1, delay)
            self._stop.wait(delay)

    def _try(self, body: bytes, key: str) -> Tuple[str, str, Optional[float]]:
        """Sends a batch once: ``(verdict, why, retry_after)``, the verdict ``"ok"``, ``"retry"``
        (a transient failure), ``"refused"`` (this batch refused) or ``"stop"`` (a
        configuration error)."""
        try:
            reply = self.sender.send(body, key)
        except ssl.SSLCertVerificationError as exc:
            return (
                "stop",
                f"its TLS certificate was refused ({getattr(exc, 'verify_message', exc)}): "
                "give its CA (--ca) or fix its certificate",
                None,
            )
        except ssl.SSLError as exc:
            # An alert naming a certificate: the endpoint refused ours (or wants one). A server
            # that just closes the connection instead looks like any failure: retried.
            reason = getattr(exc, "reason", None) or ""
            if "CERTIFICATE" in reason or "UNKNOWN_CA" in reason:
                why = f"it refused the client certificate ({reason}): check --cert and --key"
                return "stop", why, None
            return "retry", f"{type(exc).__name__}: {exc}", None
        except (OSError, http.client.HTTPException) as exc:
            return "retry", f"{type(exc).__name__}: {exc}", None
        status = reply.status
        said = f"HTTP {status} {reply.reason}".rstrip()
        if reply.body.strip():
            said += f" ({reply.body.decode('utf-8', 'replace').strip().splitlines()[0]})"
        if 200 <= status < 300:
            return "ok", said, None
        if 300 <= status < 400:
            to = f" to {reply.location}" if reply.location else ""
            return "stop", f"{said}, a redirect{to}: give the final URL (--webhook)", None
        if status in ENDPOINT_STATUSES:
            return "stop", f"{said}: check the URL and its credentials", None
        if 400 <= status < 500 and status not in (408, 429):
            why = f"{said}: the batch was refused (--dead-letter DIR sets such batches aside)"
            return "refused", why, None
        return "retry", said, reply.retry_after

    def _set_aside(self, item, tries: int, why: str) -> None:
        """Writes a batch to the dead-letter directory, then drops it from the queue."""
        batch_id, key, last, when, events, body, _ = item
        assert self.dead_letter is not None
        name = os.path.join(self.dead_letter, key.replace("|", ".").replace(":", "_"))
        meta = {
            "idempotency_key": key,
            "endpoint": self.sender.endpoint,
            "reason": why,
            "tries": tries,
            "events": events,
            "last_commit_lsa": last,
            "last_commit_lsa_text": L.format_lsa(last),
            "last_commit_time": when,
            "set_aside_at": time.time(),
            "headers": self.sender.headers(body, key, credentials=False),
        }
        _write_durably(name + ".json", body)
        _write_durably(name + ".meta.json", json.dumps(meta, indent=1).encode())
        self.queue.drop(batch_id)
        self.metrics.add(batches_dropped=1, events_dropped=events)
        self.metrics.set(queue_bytes=self.queue.bytes())
        log.error(
            "batch %s (%d events) set aside in %s after %d tries: %s",
            key,
            events,
            self.dead_letter,
            tries,
            why,
        )

    def _log_bytes(self, lsa_key: int) -> int:
        """An LSA as a byte position in the log (for the lag in bytes)."""
        pageid, offset = L.split(lsa_key) if lsa_key else (0, 0)
        return pageid * self._page_size + max(offset, 0)

    def run(self) -> Metrics:
        reader = threading.Thread(target=self._read, name="walcdc-reader", daemon=True)
        reader.start()
        try:
            self._send_loop()
        finally:
            self.stop()
            # A reader deep in a long walk is not waited for: once stopped it queues nothing
            # more, and what it read is read again by the next run.
            reader.join(STOP_GRACE)
            self.sender.close()
        if self._error is not None:
            raise self._error
        return self.metrics

    def stop(self) -> None:
        """Stops reading and sending (from any thread), cutting a request in flight short;
        what is queued stays queued for the next run (the batch in flight included)."""
        self._stop.set()
        if self._stream is not None:
            self._stream.close()
        self.sender.abort()


class _QueueWriter(Writer):
    """The reader's side of a :class:`Delivery` on the delivery loop: batches gathered, then
    queued with the cursor after them once they hold ``batch_events`` or waited
    ``batch_delay`` (the queue's transaction makes them durable and saves the cursor)."""

    def __init__(self, delivery: Delivery, stream):
        self.delivery, self.stream = delivery, stream

    def write(self, batch: pa.RecordBatch) -> None:
        d = self.delivery
        at = self.stream.cursor
        d._read_at = at.position or d._read_at
        d.metrics.add(events_read=batch.num_rows)
        with d._pending_lock:
            if batch.num_rows:
                if not d._pending:
                    d._pending_since = time.monotonic()
                d._pending.append(batch)
            d._pending_cursor = at
            # Batches of the stream end at transaction ends only when the stream flushes (a
            # poll's end) or fills; queue whole batches of it.
            d._flush(due_only=True)

    def finish(self, cursor) -> None:
        with self.delivery._pending_lock:
            self.delivery._flush(due_only=False)

    def stopped(self) -> bool:
        return self.delivery._stop.is_set()


def _event_time(batch: pa.RecordBatch, i: int) -> Optional[float]:
    """The commit time (Unix seconds) of event ``i`` of a batch."""
    row = batch.slice(i % batch.num_rows, 1)
    if "commit_time" in batch.schema.names:
        t = row.column("commit_time")[0].as_py()
        return t.timestamp() if t is not None else None
    ms = row.column("source")[0].as_py()["ts_ms"]  # a Debezium envelope's commit time
    return ms / 1000 if ms is not None else None


def _event_position(batch: pa.RecordBatch, i: int) -> tuple:
    """(commit LSA, LSA) of event ``i`` of a batch (a Debezium envelope's ``source``)."""
    names = batch.schema.names
    if "commit_lsa" in names:
        row = batch.slice(i % batch.num_rows, 1)
        return row.column("commit_lsa")[0].as_py(), row.column("lsa")[0].as_py()
    source = batch.column("source")[i % batch.num_rows].as_py()
    return L.parse(source["commit_lsa"]), L.parse(source["lsa"])


def serve_metrics(metrics: Metrics, port: int, host: str = "127.0.0.1"):
    """Serves ``metrics`` as Prometheus text at ``http://host:port/metrics`` from a daemon
    thread; returns the server (``shutdown()`` it)."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (the http.server API)
            body = metrics.prometheus().encode()
            self.send_response(200 if self.path.startswith("/metrics") else 404)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer((host, port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server
