"""The CDC protocol server (walcdc.cdcserver, ``walcdc serve``) with a socket client on
127.0.0.1: authentication failures, REGISTER and REQUEST-DATA, the schema then the rows of a
table, resuming from a commit LSA, two clients at different positions, an ALTER mid-stream,
rows committed while a client is connected, malformed commands; rows checked against their
schema lines on real logs; the caps, the authentication timeout, backpressure (the server
process's memory), the catalog learned once, warnings logged as they happen, the users file
and hash-user. Every read has a deadline; every server is started and stopped by its test."""

from __future__ import annotations

import binascii
import contextlib
import hashlib
import json
import socket
import subprocess
import sys
import threading
import time

import pytest

from conftest import fixture_dir
from walcdc import lsa as L
from walcdc.cdcserver import CdcServer, load_users, user_line
from walcdc.testing import LogWriter, Table, Workload, cdc_oid, typed_row

COLUMNS = [
    {"name": "id", "type": "INTEGER", "primary_key": True},
    {"name": "name", "type": "VARCHAR", "precision": 20},
]


class LiveTable:
    """A log being written (flushed like a server's) with one table ``dba.t``."""

    def __init__(self, directory, active_pages=64, archive_pages=16):
        self.w = LogWriter(
            page_size=4096,
            active_pages=active_pages,
            archive_pages=archive_pages,
            stream_to=directory,
        )
        self.work = Workload(self.w)
        self.table = Table.create("dba.t", cdc_oid(0, 300, 1), COLUMNS)
        self.rows: dict = {}
        t = self.work.begin(1)
        t.create_table(
            self.table, statement="CREATE TABLE t (id INT PRIMARY KEY, name VARCHAR(20))"
        )
        t.commit()
        self.w.flush()

    def commit(self, inserts=(), updates=(), deletes=()) -> int:
        """One transaction; returns its commit LSA."""
        t = self.work.begin(2)
        rep = self.table.representation()
        for key, values in inserts:
            texts = {c["name"]: json.dumps(values.get(c["name"])) for c in rep[1]}
            texts["id"] = str(key)
            self.rows[key] = t.insert_row(self.table.class_oid, rep, texts, 1000, key)
        for key, values in updates:
            texts = {c["name"]: json.dumps(values.get(c["name"])) for c in rep[1]}
            texts["id"] = str(key)
            new = typed_row(rep, texts, t.mvccid, True)
            t.update(self.table.class_oid, self.rows[key], new, 1000, key)
            self.rows[key] = new
        for key in deletes:
            t.delete(self.table.class_oid, self.rows.pop(key), 1000, key)
        events = t.commit()
        self.w.flush()
        return events[-1]["commit_lsa"]

    def add_column(self) -> None:
        t = self.work.begin(3)
        new = self.table.add_column({"name": "note", "type": "VARCHAR", "precision": 30})
        t.alter_table(self.table, new, statement="ALTER TABLE t ADD COLUMN note VARCHAR(30)")
        t.commit()
        self.table = new
        self.w.flush()


class Client:
    def __init__(self, port: int):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.buf = b""

    def send(self, text: str) -> None:
        self.sock.sendall(text.encode())

    def line(self, timeout: float = 10) -> str:
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buf:
            self.sock.settimeout(max(0.01, deadline - time.monotonic()))
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("closed")
            self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\n")
        return line.decode()

    def login(self, user="alice", password="secret") -> str:
        self.send(
            binascii.hexlify(f"{user}:".encode()).decode()
            + hashlib.sha1(password.encode()).hexdigest()
        )
        return self.line()

    def start(self, table="dba.t", position=None) -> None:
        assert self.login() == "OK"
        self.send("REGISTER UUID=11ec2300-2e23-11e6-8308-0002a5d5c51b, TYPE=JSON")
        assert self.line() == "OK"
        self.send(f"REQUEST-DATA {table}" + (f" {position}" if position else ""))

    def records(self, n: int) -> list:
        return [json.loads(self.line()) for _ in range(n)]

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def served(tmp_path):
    log = tmp_path / "log"
    live = LiveTable(log)
    users = tmp_path / "users"
    users.write_text(
        user_line("alice", "secret") + "\n# a comment\n" + user_line("bob", "pw") + "\n"
    )
    users.chmod(0o600)
    server = CdcServer(log, load_users(str(users)), port=0, poll_interval=0.05)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield live, server.server_address[1]
    server.shutdown()
    server.close()
    thread.join(10)


USERS = {"alice": user_line("alice", "secret").split(":", 1)[1]}


@contextlib.contextmanager
def serve_command(tmp_path, source, *options):
    """`walcdc serve` in a process of its own (any free port): ``(process, port, stderr
    lines so far)``; stopped with SIGTERM at the end."""
    users = tmp_path / "cdcusers"
    users.write_text(user_line("alice", "secret") + "\n")
    users.chmod(0o600)
    cmd = [sys.executable, "-m", "walcdc.cli", "serve", str(source), "--users", str(users)]
    proc = subprocess.Popen(
        [*cmd, "--port", "0", *options], stderr=subprocess.PIPE, text=True, bufsize=1
    )
    errors: list = []
    reader = threading.Thread(target=lambda: errors.extend(proc.stderr), daemon=True)
    try:
        deadline = time.monotonic() + 30
        while not errors and time.monotonic() < deadline and proc.poll() is None:
            first = proc.stderr.readline()  # "serving DIR on HOST:PORT"
            errors.append(first)
        assert errors and " on " in errors[0], errors
        reader.start()
        yield proc, int(errors[0].rsplit(":", 1)[1]), errors
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def anon_rss(pid: int) -> int:
    """A process's anonymous resident memory in bytes (its heap: not the log's mapped pages,
    which are the page cache's)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no RssAnon")


@contextlib.contextmanager
def serving(source, **options):
    """A CdcServer on 127.0.0.1 (any free port) in a thread, stopped at the end."""
    options.setdefault("poll_interval", 0.05)
    server = CdcServer(source, USERS, port=0, **options)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server, server.server_address[1]
    finally:
        server.shutdown()
        server.close()
        thread.join(10)


def test_the_schema_then_rows_then_rows_as_they_commit(served):
    live, port = served
    first = live.commit(inserts=[(1, {"name": "a"}), (2, {"name": "b"})])
    second = live.commit(updates=[(1, {"name": "a2"})], deletes=[2])
    c = Client(port)
    c.start()
    schema = json.loads(c.line())
    assert schema["name"] == "ChangeRecord" and schema["table"] == "dba.t"
    assert [f["name"] for f in schema["fields"]][-2:] == ["id", "name"]
    assert {"name": "id", "type": ["null", "int"]} in schema["fields"]
    rows = c.records(5)
    assert [(r["event_type"], r["id"], r["name"]) for r in rows] == [
        ("insert", 1, "a"),
        ("insert", 2, "b"),
        ("update_before", 1, "a"),
        ("update_after", 1, "a2"),
        ("delete", 2, "b"),
    ]
    assert [r["sequence"] for r in rows] == [L.format_lsa(first)] * 2 + [L.format_lsa(second)] * 3
    # Committed while the client is connected: streamed as they come.
    third = live.commit(inserts=[(3, {"name": "c"})])
    (row,) = c.records(1)
    assert (row["event_type"], row["id"], row["sequence"]) == ("insert", 3, L.format_lsa(third))
    # An ALTER: a new schema before the next row.
    live.add_column()
    live.commit(inserts=[(4, {"name": "d", "note": "n"})])
    schema = json.loads(c.line())
    assert [f["name"] for f in schema["fields"]][-3:] == ["id", "name", "note"]
    (row,) = c.records(1)
    assert (row["id"], row["note"]) == (4, "n")
    c.close()


def test_resume_from_a_position_and_two_clients_at_once(served):
    live, port = served
    first = live.commit(inserts=[(1, {"name": "a"})])
    live.commit(inserts=[(2, {"name": "b"})])
    old, new = Client(port), Client(port)
    old.start()
    new.start(position=L.format_lsa(first))
    old.line(), new.line()  # schemas
    assert [r["id"] for r in old.records(2)] == [1, 2]
    assert [r["id"] for r in new.records(1)] == [2]
    live.commit(inserts=[(3, {"name": "c"})])
    assert old.records(1)[0]["id"] == 3 and new.records(1)[0]["id"] == 3
    old.close(), new.close()


def test_a_client_resuming_near_the_end_reads_only_the_log_after_a_saved_cursor(
    tmp_path, monkeypatch
):
    # A log of many archives. A client resuming at its 590th of 600 commits reads the log from
    # the nearest cursor the server saved before that commit, and its table's schema from that
    # cursor's catalog on: the pages each of its snapshots fetches before the position are
    # counted (as tests/test_start_anywhere.py counts them).
    import walcdc.changes
    import walcdc.logset
    from walcdc._native import checkpoint_info

    live = LiveTable(tmp_path / "log", active_pages=16, archive_pages=4)
    commits = [live.commit(inserts=[(i, {"name": f"n{i}"})]) for i in range(1, 601)]
    assert len(list((tmp_path / "log").glob("*_lgar*"))) >= 3
    spacing = 8 * 4096
    server = CdcServer(
        tmp_path / "log", USERS, port=0, poll_interval=0.05, position_spacing=spacing
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        at = commits[589]
        page = L.split(at)[0]
        saved = server.positions.nearest(at)  # the one walk of the whole log, for cursors
        assert saved is not None and saved.last_commit_lsa <= at
        # A stream from the cursor reads from its catalog checkpoint on (at or before its
        # restart point): within about twice the spacing of the position.
        since = L.split(checkpoint_info(saved.catalog)[0])[0]
        assert since <= L.split(saved.restart_lsa)[0] <= page
        assert page - since <= 2 * spacing // 4096 + 2, (since, page)

        opened = []

        def counting(real):
            def open_log(source, *args, **kwargs):
                log = real(source, *args, **kwargs)
                log._native.watch_below(page)
                opened.append(log)
                return log

            return open_log

        monkeypatch.setattr(walcdc.changes, "open_log", counting(walcdc.changes.open_log))
        monkeypatch.setattr(walcdc.logset, "open_log", counting(walcdc.logset.open_log))
        monkeypatch.setattr(walcdc, "open_log", walcdc.logset.open_log)

        c = Client(port=server.server_address[1])
        c.start(position=L.format_lsa(at))
        assert json.loads(c.line())["name"]  # the schema line
        assert [r["id"] for r in c.records(10)] == list(range(591, 601))
        c.close()
        read = set().union(*(log._native.watched_pages() for log in opened))
        assert opened and read and min(read) >= since, (since, sorted(read)[:5])
        assert len(read) <= page - since

        # The counter is real: a client from the beginning reads every page before it.
        opened.clear()
        c = Client(port=server.server_address[1])
        c.start()
        c.line()
        assert [r["id"] for r in c.records(600)] == list(range(1, 601))
        c.close()
        read = set().union(*(log._native.watched_pages() for log in opened))
        assert len(read) >= page - 2
    finally:
        server.shutdown()
        server.close()
        thread.join(10)


@pytest.mark.parametrize(
    "user,password", [("alice", "wrong"), ("mallory", "secret"), ("", "secret")]
)
def test_bad_credentials_get_err(served, user, password):
    _, port = served
    c = Client(port)
    assert c.login(user, password).startswith("ERR")
    c.close()


def test_malformed_commands_get_err_and_the_server_goes_on(served):
    live, port = served
    live.commit(inserts=[(1, {"name": "a"})])
    c = Client(port)
    c.send("zz-not-hex")
    assert c.line().startswith("ERR")
    c.close()
    c = Client(port)
    assert c.login() == "OK"
    for bad in ("HELLO", "REGISTER UUID=x", "REGISTER UUID=x, TYPE=XML"):
        c.send(bad)
        assert c.line().startswith("ERR")
    c.send("REGISTER UUID=x, TYPE=json")
    assert c.line() == "OK"
    for bad in ("REQUEST-DATA", "REQUEST-DATA dba.nope", "REQUEST-DATA dba.t notanlsa", "GET /"):
        c.send(bad)
        assert c.line().startswith("ERR")
    c.send("REQUEST-DATA dba.t.000001")  # a version suffix is accepted
    c.line()
    assert c.records(1)[0]["id"] == 1
    c.close()
    c = Client(port)
    c.send("x" * 10_000)
    assert c.line().startswith("ERR")
    c.close()
    # Still serving.
    c = Client(port)
    assert c.login("bob", "pw") == "OK"
    c.close()


def test_user_line_and_users_file(tmp_path):
    line = user_line("alice", "secret")
    assert line == "alice:" + hashlib.sha1(hashlib.sha1(b"secret").digest()).hexdigest()
    bad = tmp_path / "users"
    bad.write_text("alice:nothex\n")
    bad.chmod(0o600)
    with pytest.raises(ValueError, match="users:1"):
        load_users(str(bad))


@pytest.mark.parametrize("mode", [0o666, 0o620, 0o602, 0o644])
def test_a_users_file_others_can_write_or_read_is_refused(tmp_path, mode):
    """Like ssh with its keys: a users file that group or others can write (or others read) is
    refused, naming the file and the fix; 0600 and 0640 are accepted."""
    from click.testing import CliRunner

    from walcdc.cli import main as cli_main

    users = tmp_path / "users"
    users.write_text(user_line("alice", "secret") + "\n")
    users.chmod(mode)
    with pytest.raises(ValueError, match=f"chmod 600 {users}"):
        load_users(str(users))
    r = CliRunner().invoke(cli_main, ["serve", str(tmp_path), "--users", str(users), "--port", "0"])
    assert r.exit_code == 2 and f"chmod 600 {users}" in r.stderr, r.output
    for ok in (0o600, 0o640, 0o400):
        users.chmod(ok)
        assert set(load_users(str(users))) == {"alice"}


def test_hash_user_reads_the_password_from_stdin_or_the_terminal_never_the_arguments():
    """`walcdc hash-user USER >> FILE`: only the users-file line goes to stdout; prompts and
    errors go to stderr (a mismatch writes nothing to FILE); no password in the arguments."""
    from click.testing import CliRunner

    from walcdc.cli import main as cli_main

    run = CliRunner().invoke
    r = run(cli_main, ["hash-user", "--help"])
    assert "--password-stdin" in r.stdout and "--password " not in r.stdout
    assert "standard input" in r.stdout
    r = run(cli_main, ["hash-user", "alice", "--password", "secret"])
    assert r.exit_code == 2 and r.stdout == ""
    r = run(cli_main, ["hash-user", "alice", "--password-stdin"], input="secret\n")
    assert r.exit_code == 0 and r.stdout == user_line("alice", "secret") + "\n"
    r = run(cli_main, ["hash-user", "alice"], input="secret\nsecret\n")
    assert r.exit_code == 0 and r.stdout == user_line("alice", "secret") + "\n"
    assert "assword" in r.stderr  # the prompts
    r = run(cli_main, ["hash-user", "alice"], input="secret\nsecreT\n")
    assert r.exit_code == 2 and r.stdout == "" and "do not match" in r.stderr
    r = run(cli_main, ["hash-user", "alice", "--password-stdin"], input="\n")
    assert r.exit_code == 2 and r.stdout == "" and "empty" in r.stderr


def test_a_position_beyond_the_end_of_the_log_is_refused(served):
    """A commit LSA past the end of the log as it is now gets ERR at once (not a silent wait),
    and the client may ask again."""
    live, port = served
    first = live.commit(inserts=[(1, {"name": "a"})])
    live.commit(inserts=[(2, {"name": "b"})])
    c = Client(port)
    c.start(position="999999|0")
    reply = c.line(timeout=5)
    assert reply.startswith("ERR") and "beyond the end of the log" in reply, reply
    c.send(f"REQUEST-DATA dba.t {L.format_lsa(first)}")
    c.line()  # the schema
    assert [r["id"] for r in c.records(1)] == [2]
    c.close()


def test_requests_for_unknown_tables_do_not_delay_a_good_client():
    """Table names resolve from the catalog the server learned once (again only when the log
    has grown): clients asking for tables the log does not have, many times over, get ERR at
    once and do not hold up the first row of a client asking for a real table."""
    log = fixture_dir("p4k")
    with serving(log) as (server, port):
        bad = []
        for i in range(8):
            c = Client(port)
            assert c.login() == "OK"
            c.send("REGISTER UUID=x, TYPE=JSON\n")
            assert c.line() == "OK"
            c.send("".join(f"REQUEST-DATA dba.nope_{i}_{n}\n" for n in range(30)))
            bad.append(c)
        started = time.monotonic()
        good = Client(port)
        good.start("dba.t_alter")
        assert "fields" in json.loads(good.line(timeout=30))
        assert good.records(1)[0]["event_type"] == "insert"
        waited = time.monotonic() - started
        for c in bad:
            assert all(c.line(timeout=30).startswith("ERR no table") for _ in range(30))
            c.close()
        good.close()
        assert server.catalog.walks == 1  # the log did not change: learned once
    assert waited < 3, f"the first row took {waited:.1f} s"


def test_a_table_created_after_the_catalog_was_learned_is_found(served):
    """The catalog is learned again when a name is not in it and the log has grown since."""
    live, port = served
    live.commit(inserts=[(1, {"name": "a"})])
    c = Client(port)
    c.start("dba.u")
    assert c.line().startswith("ERR no table dba.u")
    u = Table.create("dba.u", cdc_oid(0, 301, 1), COLUMNS)
    t = live.work.begin(4)
    t.create_table(u, statement="CREATE TABLE u (id INT PRIMARY KEY, name VARCHAR(20))")
    t.insert_row(u.class_oid, u.representation(), {"id": "7", "name": '"x"'}, 1001, 7)
    t.commit()
    live.w.flush()
    c.send("REQUEST-DATA dba.u")
    assert json.loads(c.line())["table"] == "dba.u"
    assert c.records(1)[0]["id"] == 7
    c.close()


def _conforms(value, avro) -> bool:
    """``value`` (decoded JSON) is valid for the Avro type ``avro`` in Avro's JSON encoding,
    for the types the server declares."""
    if isinstance(avro, list):
        return any(_conforms(value, t) for t in avro)
    if isinstance(avro, dict):
        assert avro["type"] == "enum", avro
        return value in avro["symbols"]
    if avro == "null":
        return value is None
    if avro == "string":
        return isinstance(value, str)
    if avro in ("int", "long"):
        bits = 32 if avro == "int" else 64
        return type(value) is int and -(2 ** (bits - 1)) <= value < 2 ** (bits - 1)
    if avro in ("float", "double"):
        return type(value) in (int, float)
    raise AssertionError(f"a type the test does not know: {avro}")


def _all_lines(port: int, table: str, deadline: float, position=None) -> list:
    """Every line the server sends for ``table`` (from ``position``) until it closes the
    connection (its stream ends at its idle timeout)."""
    c = Client(port)
    c.start(table, position)
    lines = []
    try:
        while True:
            lines.append(json.loads(c.line(timeout=max(0.1, deadline - time.monotonic()))))
    except ConnectionError:
        return lines
    finally:
        c.close()


@pytest.mark.parametrize(
    "fixture,tables",
    [
        ("p4k", ["dba.t_types", "dba.t_alter"]),
        (
            "breadth",
            ["dba.t_chg", "dba.t_ko", "dba.t_range", "dba.t_wide", "dba.t_lob", "dba.t_emp"],
        ),
    ],
)
def test_every_row_matches_the_schema_line_before_it(fixture, tables):
    """A validating client's view: each row has exactly the fields of the schema line before
    it, each value valid for its declared type (JSON, SET, MULTISET and SEQUENCE values are
    sent as JSON text in strings, as declared; numbers as numbers), and a table gets one
    schema line per version of its columns at most: before images of rows written before an
    ALTER are mapped to the columns in force by attribute id (a column added since takes its
    default), they do not switch the schema back."""
    import walcdc

    log = fixture_dir(fixture)
    catalog = {s["name"]: s for s in walcdc.open_log(log).schemas()}
    deadline = time.monotonic() + 60
    with serving(log, idle_timeout=0.5) as (_, port):
        results: dict = {}
        threads = [
            threading.Thread(target=lambda t=t: results.update({t: _all_lines(port, t, deadline)}))
            for t in tables
        ]
        for th in threads:
            th.start()
        for th in threads:
            th.join(max(0.1, deadline - time.monotonic()))
    for table in tables:
        lines = results[table]
        versions = [r for r in catalog[table]["representations"] if r["columns"]]
        schemas = [x for x in lines if "fields" in x]
        rows = [x for x in lines if "fields" not in x]
        assert rows and "fields" in lines[0], table
        assert len(schemas) <= len(versions), (table, len(schemas), len(versions))
        fields = None
        for x in lines:
            if "fields" in x:
                fields = {f["name"]: f["type"] for f in x["fields"]}
                continue
            assert set(x) == set(fields), (table, x)
            for name, value in x.items():
                assert _conforms(value, fields[name]), (table, name, value, fields[name])
        if table == "dba.t_types":
            js = [json.loads(r["c_json"]) for r in rows if r["c_json"] is not None]
            assert js and all(isinstance(v, dict) for v in js)
            sets = [json.loads(r["c_set"]) for r in rows if r["c_set"] is not None]
            assert sets and all(isinstance(v, list) for v in sets)
        if table == "dba.t_alter":
            # An update of a row written before ADD COLUMN c / DROP COLUMN b: its before image
            # in the columns of the after image, c at its default.
            before = next(r for r in rows if r["event_type"] == "update_before" and "c" in r)
            assert "b" not in before


@pytest.mark.parametrize("fixture,table", [("p4k", "dba.t_alter"), ("breadth", "dba.t_ko")])
def test_clients_on_saved_cursors_get_the_lines_of_clients_without(fixture, table):
    """On real logs with a cursor saved every 256 KiB: a client from the beginning gets the lines
    a server with none saved sends (its tables learned from the newest cursor's catalog), and
    a client resuming at a commit in the middle gets the rows after it, after the schema line
    in force there."""
    log = fixture_dir(fixture)
    deadline = time.monotonic() + 90
    with serving(log, idle_timeout=0.5, position_spacing=1 << 60) as (server, port):
        whole = _all_lines(port, table, deadline)
        assert server.positions._saved == []
    rows = [x for x in whole if "fields" not in x]
    commits = sorted({L.parse(r["sequence"]) for r in rows})
    at = commits[len(commits) // 2]
    with serving(log, idle_timeout=0.5, position_spacing=256 << 10) as (server, port):
        resumed = _all_lines(port, table, deadline, L.format_lsa(at))
        assert len(server.positions._saved) >= 3 and server.positions.nearest(at) is not None
        again = _all_lines(port, table, deadline)
    assert again == whole
    first = next(
        i for i, x in enumerate(whole) if "fields" not in x and L.parse(x["sequence"]) > at
    )
    in_force = next(x for x in reversed(whole[:first]) if "fields" in x)
    assert resumed == [in_force] + [
        x for x in whole[first:] if "fields" in x or L.parse(x["sequence"]) > at
    ]


def test_an_update_of_a_row_older_than_an_alter_does_not_switch_the_schema_back(served):
    live, port = served
    live.commit(inserts=[(1, {"name": "a"})])
    live.add_column()
    live.commit(updates=[(1, {"name": "a2", "note": "n"})], deletes=[])
    live.commit(inserts=[(2, {"name": "b", "note": "m"})], deletes=[1])
    c = Client(port)
    c.start()
    lines = [json.loads(c.line()) for _ in range(7)]
    c.close()
    names = [
        [f["name"] for f in x["fields"]][6:] if "fields" in x else x["event_type"] for x in lines
    ]
    assert names == [
        ["id", "name"],
        "insert",
        ["id", "name", "note"],
        "update_before",
        "update_after",
        "insert",
        "delete",
    ]
    # The row written before the ALTER, in the columns after it (note: its default, NULL).
    assert {k: lines[3][k] for k in ("id", "name", "note")} == {"id": 1, "name": "a", "note": None}
    assert {k: lines[6][k] for k in ("id", "name", "note")} == {"id": 1, "name": "a2", "note": "n"}


def test_slow_clients_of_a_large_table_hold_little_server_memory(tmp_path):
    """Rows are made in small batches and written with blocking sends, so a client that reads
    slowly holds its reader back (backpressure from its socket) instead of a queue in memory;
    a large transaction's events past the per-client memory spill to a temporary file. Three
    slow clients of p4k's t_huge (50,000 rows in one transaction) cost the server little."""
    log = fixture_dir("p4k")
    with serve_command(tmp_path, log) as (proc, port, _):
        base = anon_rss(proc.pid)
        clients = []
        for _ in range(3):
            c = Client.__new__(Client)
            c.sock, c.buf = socket.socket(), b""
            c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            c.sock.settimeout(10)
            c.sock.connect(("127.0.0.1", port))
            c.start("dba.t_huge")
            clients.append(c)
        peak = 0
        for c in clients:
            assert "fields" in json.loads(c.line(timeout=60))
            assert c.records(1)[0]["event_type"] == "insert"
            peak = max(peak, anon_rss(proc.pid))
        for _ in range(10):  # slowly: a few rows a tick, the rest waits in the log
            time.sleep(0.1)
            for c in clients:
                c.records(2)
            peak = max(peak, anon_rss(proc.pid))
        for c in clients:
            c.close()
    growth = peak - base
    # About 20 MB a client (its reader, 16 MiB of events at most) and the catalog, against
    # 180 MB a client when a whole batch of 40,000 rows was read ahead of the socket.
    assert growth < 3 * (50 << 20), f"the server grew by {growth >> 20} MB for 3 clients"


def test_idle_connections_are_capped_and_timed_out_and_a_good_client_gets_in(tmp_path):
    """Connections that do not authenticate hold no more than max_unauthenticated slots (a
    new one pushes the oldest out with ERR) and are closed with ERR after auth_timeout: forty
    idle sockets neither pile up threads nor keep a good client from its rows."""
    live = LiveTable(tmp_path / "log")
    live.commit(inserts=[(1, {"name": "a"})])
    threads_before = threading.active_count()
    options = dict(max_clients=8, max_unauthenticated=3, auth_timeout=1.0)
    with serving(tmp_path / "log", **options) as (server, port):
        idle = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(40)]
        deadline = time.monotonic() + 3  # the pushed-out connections' threads end
        while threading.active_count() - threads_before > 1 + 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert threading.active_count() - threads_before <= 1 + 3  # serve_forever + 3 idle
        started = time.monotonic()
        good = Client(port)
        good.start()
        assert "fields" in json.loads(good.line(timeout=5))
        assert good.records(1)[0]["id"] == 1
        assert time.monotonic() - started < 3
        oldest = idle[0].recv(200)
        assert oldest.startswith(b"ERR too many connections waiting to authenticate"), oldest
        newest = idle[-1]  # pushed out by the good client, or timed out
        newest.settimeout(5)
        assert newest.recv(200).startswith(b"ERR")
        # One that says nothing after the others are gone: closed at the timeout.
        late = socket.create_connection(("127.0.0.1", port), timeout=5)
        t = time.monotonic()
        assert late.recv(200).startswith(b"ERR timed out")
        assert 0.8 < time.monotonic() - t < 3
        assert late.recv(200) == b""  # closed
        for s in [*idle, late]:
            s.close()
        good.close()


def test_max_clients_caps_the_connections(tmp_path):
    """Past max_clients, a new connection gets ERR and is closed (no thread); once a client
    leaves, a new one gets in."""
    live = LiveTable(tmp_path / "log")
    live.commit(inserts=[(1, {"name": "a"})])
    with serving(tmp_path / "log", max_clients=3, max_unauthenticated=3) as (_, port):
        clients = []
        for _ in range(3):
            c = Client(port)
            c.start()
            c.line()
            clients.append(c)
        extra = Client(port)
        assert extra.line(timeout=5).startswith("ERR too many clients")
        assert extra.sock.recv(10) == b""
        extra.close()
        clients.pop().close()
        deadline = time.monotonic() + 5
        while True:  # the server notices the close when the stream's watcher does
            c = Client(port)
            if c.login() == "OK":
                break
            c.close()
            assert time.monotonic() < deadline
            time.sleep(0.05)
        c.close()
        for c in clients:
            c.close()


def test_what_the_reader_skips_is_logged_while_the_server_runs(tmp_path):
    """The reader's warnings (here UnfinishedTransactionDropped: p4k with a record inside the
    huge transaction claiming to start a new one under its trid) are log lines on the server's
    stderr as they happen, while a client is still being served, not notes printed at exit.
    The command's limits are its options (--auth-timeout here)."""
    from test_bad_input import _hostile_copy

    log = tmp_path / "log"
    log.mkdir()
    _hostile_copy(log, "p4k_null_prev_tranlsa.json")
    with serve_command(tmp_path, log, "--auth-timeout", "1") as (_, port, errors):
        c = Client(port)
        c.start("dba.t_alter")
        c.line()
        assert c.records(1)[0]["event_type"] == "insert"
        deadline = time.monotonic() + 30
        while not any("dropped" in e for e in errors) and time.monotonic() < deadline:
            time.sleep(0.05)
        logged = [e for e in errors if "dropped" in e]
        assert logged and "walcdc serve" in logged[0], errors
        silent = socket.create_connection(("127.0.0.1", port), timeout=5)
        assert silent.recv(100).startswith(b"ERR timed out: authenticate, register and request")
        silent.close()
        c.close()


def test_the_server_serves_only_the_tables_and_users_it_is_told():
    """--tables / --exclude-tables: which tables clients may request (others get ERR);
    --db-users: only those database users' changes are served."""
    import walcdc
    from conftest import fixture_dir

    log = fixture_dir("breadth")
    rows = walcdc.read_changes(log, ops="insert,update,delete").read_all().to_pylist()
    table = max({r["table"] for r in rows}, key=[r["table"] for r in rows].count)
    users = sorted({r["user"] for r in rows if r["table"] == table})
    with serving(log, exclude_tables=[table.split(".")[1]]) as (_, port):
        c = Client(port)
        c.start(table=table)
        assert c.line() == f"ERR table {table} is not served here"
        c.close()
    other = next(r["table"] for r in rows if r["table"] != table)
    with serving(log, tables=[other]) as (_, port):
        c = Client(port)
        c.start(table=table)
        assert c.line() == f"ERR table {table} is not served here"
        c.close()
    with serving(log, db_users=["nobody-" + users[0]], idle_timeout=1) as (_, port):
        c = Client(port)
        c.start(table=table)
        with pytest.raises(ConnectionError):
            c.line()  # no row of that user (no schema line either) until the stream ends
        c.close()
    with serving(log, db_users=[users[0]], idle_timeout=1) as (_, port):
        c = Client(port)
        c.start(table=table)
        c.line()
        want = [r for r in rows if r["table"] == table and r["user"] == users[0]]
        first = json.loads(c.line())
        assert first["sequence"] == L.format_lsa(want[0]["commit_lsa"])
        c.close()
