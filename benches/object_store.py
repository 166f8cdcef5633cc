"""Reading a log from object storage against reading it from local files, in one run.

    python benches/object_store.py [--size 1GB] [--cache DIR] [--latency-ms 20] [--out FILE]

The log is the generated one of benches/harness.py (made once into ``--cache``). It is uploaded
to an S3 API server on 127.0.0.1 (moto's, as the tests use), then each case reads it, one
process per case, from:

  local       the files (page cache warm: the ceiling)
  s3          the S3 server straight
  s3+proxy    through a loopback TCP proxy (the cost of the proxy alone)
  s3+latency  through the proxy holding every request ``--latency-ms`` before passing it on
              (read-ahead at work)
  http...     the same three from nginx on 127.0.0.1, the volumes as explicit URLs

Cases: ``walk`` (``LogSet.records()``) and ``changes`` (``read_changes(decode=False)``). Each
reports seconds (the fastest of ``--repeat`` runs), MB/s of log, the ratio to the local read,
and what was fetched (requests, bytes as a multiple of the log's size). Written as a Markdown
table between the ``<!-- table -->`` markers of ``--out`` (default docs/bench/object-store.md)
and printed.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))

CASES = ["walk", "changes"]


class Nginx:
    """nginx (Debian's package) serving ``root`` on a free loopback port: a fast HTTP server
    with ranged GETs, to read the volumes as explicit URLs."""

    def __init__(self, root: Path) -> None:
        import shutil
        import socket
        import tempfile

        binary = shutil.which("nginx") or "/usr/sbin/nginx"
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        self.dir = Path(tempfile.mkdtemp(prefix="walcdc-nginx-"))
        conf = self.dir / "nginx.conf"
        conf.write_text(
            # As root, the workers would read as nobody: the log lives in a home directory.
            ("user root;\n" if os.geteuid() == 0 else "")
            + f"daemon off; worker_processes 2; pid {self.dir}/pid;\n"
            + f"error_log {self.dir}/error.log;\n"
            "events { worker_connections 256; }\n"
            f"http {{ access_log off; sendfile on; server {{ listen 127.0.0.1:{self.port}; "
            f"root {root}; }} }}\n"
        )
        self.proc = subprocess.Popen([binary, "-c", str(conf), "-p", str(self.dir)])
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError("nginx did not start")

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


class DelayProxy:
    """A TCP proxy on loopback that holds what the client sends ``delay`` seconds before passing
    it on, and moves the answers back with ``os.splice`` (kernel to kernel: the proxy costs
    little CPU, so what it adds is the delay). HTTP/1.1 clients send one request at a time on a
    connection, so every request waits ``delay``, as behind a link with that round trip."""

    def __init__(self, upstream_port: int, delay: float = 0.0) -> None:
        self.upstream = ("127.0.0.1", upstream_port)
        self.delay = delay
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.endpoint = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return  # stopped
            server = socket.create_connection(self.upstream)
            for s in (client, server):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=self._up, args=(client, server), daemon=True).start()
            threading.Thread(target=self._down, args=(server, client), daemon=True).start()

    def _up(self, client: socket.socket, server: socket.socket) -> None:
        try:
            while data := client.recv(65536):
                if self.delay:
                    time.sleep(self.delay)
                server.sendall(data)
        except OSError:
            pass
        finally:
            server.close()

    def _down(self, server: socket.socket, client: socket.socket) -> None:
        r, w = os.pipe()
        try:
            while n := os.splice(server.fileno(), w, 1 << 20):
                while n:
                    n -= os.splice(r, client.fileno(), n)
        except OSError:
            pass
        finally:
            os.close(r)
            os.close(w)
            client.close()

    def stop(self) -> None:
        self.sock.close()


def run_case(case: str, source: str, options: dict) -> dict:
    """In this process: one case, timed."""
    import walcdc

    t = time.perf_counter()
    if source.startswith("["):  # explicit volume URLs
        source = json.loads(source)
    log = walcdc.open_log(source, storage_options=options or None)
    if case == "walk":
        items = sum(b.num_rows for b in log.records())
    else:
        items = sum(b.num_rows for b in walcdc.read_changes(log, decode=False))
    return {"seconds": time.perf_counter() - t, "items": items, "fetched": log.fetched()}


def in_process(case: str, source: str, options: dict) -> dict:
    out = subprocess.run(
        [
            sys.executable,
            __file__,
            "--case",
            case,
            "--source",
            source,
            "--options",
            json.dumps(options),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def write_table(out: Path, table: str) -> None:
    """Puts ``table`` between the ``<!-- table -->`` markers of ``out`` (the prose around it
    stays), or writes it alone."""
    text = out.read_text() if out.exists() else ""
    begin, end = "<!-- table -->\n", "<!-- /table -->\n"
    if begin in text and end in text:
        head, rest = text.split(begin, 1)
        text = head + begin + table + end + rest.split(end, 1)[1]
    else:
        text = table
    out.write_text(text)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", default="1GB")
    ap.add_argument("--cache", default=str(Path.home() / ".cache" / "walcdc-bench"))
    ap.add_argument("--latency-ms", type=float, default=20.0)
    ap.add_argument("--out", default=str(HERE.parent / "docs" / "bench" / "object-store.md"))
    ap.add_argument("--repeat", type=int, default=2, help="runs per case; the fastest is kept")
    ap.add_argument("--only", help="comma-separated sources to run (default: all); no file written")
    ap.add_argument("--case")
    ap.add_argument("--source")
    ap.add_argument("--options")
    args = ap.parse_args()
    if args.case:
        print(json.dumps(run_case(args.case, args.source, json.loads(args.options))))
        return

    from harness import log_for
    from s3server import S3Server
    from workload import parse_size

    size = parse_size(args.size)
    path = log_for(size, Path(args.cache), 1, 16384)
    log_bytes = sum(f.stat().st_size for f in path.glob("*_lg*"))
    server = S3Server()
    proxies = []
    try:
        t = time.perf_counter()
        for f in sorted(path.glob("*_lg*")):
            server.client.upload_file(str(f), "logs", f"bench/{f.name}")
        print(f"uploaded {log_bytes / 1e6:.0f} MB in {time.perf_counter() - t:.1f} s", flush=True)
        plain = DelayProxy(server.port)
        slow = DelayProxy(server.port, delay=args.latency_ms / 1000)
        web = Nginx(path)
        http_plain = DelayProxy(web.port)
        http_slow = DelayProxy(web.port, delay=args.latency_ms / 1000)
        proxies = [plain, slow, web, http_plain, http_slow]
        names = sorted(f.name for f in path.glob("*_lg*"))

        def http(endpoint: str) -> str:
            return json.dumps([f"{endpoint}/{n}" for n in names])

        ms = f"{args.latency_ms:g}ms"
        sources = {
            "local": (str(path), {}),
            "s3": ("s3://logs/bench/", server.options()),
            "s3+proxy": ("s3://logs/bench/", server.options(plain.endpoint)),
            f"s3+{ms}": ("s3://logs/bench/", server.options(slow.endpoint)),
            "http": (http(f"http://127.0.0.1:{web.port}"), {"allow_http": True}),
            "http+proxy": (http(http_plain.endpoint), {"allow_http": True}),
            f"http+{ms}": (http(http_slow.endpoint), {"allow_http": True}),
        }
        if args.only:
            keep = {"local", *args.only.split(",")}
            sources = {k: v for k, v in sources.items() if k in keep}
        rows = []
        for case in CASES:
            local_seconds = None
            for name, (source, options) in sources.items():
                # The fastest of --repeat runs: a first run after a server starts pays its
                # warm-up (nginx's first reads, the store's connections).
                runs = [in_process(case, source, options) for _ in range(args.repeat)]
                r = min(runs, key=lambda r: r["seconds"])
                local_seconds = local_seconds or r["seconds"]
                rows.append(
                    (
                        case,
                        name,
                        r["seconds"],
                        log_bytes / r["seconds"] / 1e6,
                        r["seconds"] / local_seconds,
                        r["fetched"]["requests"],
                        r["fetched"]["bytes"] / log_bytes,
                    )
                )
                print(rows[-1], flush=True)
    finally:
        for p in proxies:
            p.stop()
        server.stop()
    lines = [
        f"Log: {log_bytes / 1e6:.0f} MB (benches/workload.py, seed 1, 16 KiB pages), uploaded to "
        "moto's S3 server on 127.0.0.1; one process per case; 2-core VM.",
        "",
        "| case | from | seconds | MB/s of log | × local | requests | fetched / log |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for case, name, seconds, mbs, ratio, requests, fetched in rows:
        cells = [case, name, f"{seconds:.2f}", f"{mbs:.0f}", f"{ratio:.2f}", str(requests)]
        lines.append("| " + " | ".join(cells + [f"{fetched:.3f}"]) + " |")
    if not args.only:
        write_table(Path(args.out), "\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
