"""Reading a log from object storage against reading it from local files, in one run.

    python benches/object_store.py [--size 1GB] [--cache DIR] [--latency-ms 20] [--out FILE]

The log is the generated one of benches/harness.py (made once into ``--cache``). It is uploaded
to an S3 API server on 127.0.0.1 (moto's, as the tests use), then each case reads it, one
process per case, from:

  local       the files (page cache warm: the ceiling)
  s3          the S3 server straight
  s3+proxy    through a loopback proxy (the cost of the proxy alone)
  s3+latency  through the proxy adding ``--latency-ms`` to every request (read-ahead at work)

Cases: ``walk`` (``LogSet.records()``) and ``changes`` (``read_changes(decode=False)``). Each
reports seconds, MB/s of log, the ratio to the local read, and what was fetched (requests,
bytes as a multiple of the log's size). Written as a Markdown table to ``--out`` (default
docs/bench/object-store.md) and printed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", default="1GB")
    ap.add_argument("--cache", default=str(Path.home() / ".cache" / "walcdc-bench"))
    ap.add_argument("--latency-ms", type=float, default=20.0)
    ap.add_argument("--out", default=str(HERE.parent / "docs" / "bench" / "object-store.md"))
    ap.add_argument("--case")
    ap.add_argument("--source")
    ap.add_argument("--options")
    args = ap.parse_args()
    if args.case:
        print(json.dumps(run_case(args.case, args.source, json.loads(args.options))))
        return

    from harness import log_for
    from s3server import FaultProxy, S3Server
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
        plain = FaultProxy(server.port)
        slow = FaultProxy(server.port, delay=args.latency_ms / 1000)
        web = Nginx(path)
        http_plain = FaultProxy(web.port)
        http_slow = FaultProxy(web.port, delay=args.latency_ms / 1000)
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
        rows = []
        for case in CASES:
            local_seconds = None
            for name, (source, options) in sources.items():
                r = in_process(case, source, options)
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
    Path(args.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
