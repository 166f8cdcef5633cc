"""An S3 API server on 127.0.0.1 for the object-storage tests: moto's standalone server,
started in a subprocess and stopped by the tests, and a proxy in front of it that delays or
fails requests on demand (to show retries and errors)."""

from __future__ import annotations

import http.client
import os
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Dict, Optional

#: Credentials the tests give; the secret must never appear in a message.
ACCESS_KEY = "walcdc-test-access"
SECRET_KEY = "walcdc-secret-7f3a9c1e5b"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stop(proc: subprocess.Popen) -> None:
    """Ends a server process: asked first, killed if it does not go within 10 s."""
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


class S3Server:
    """moto's S3 server on a free loopback port; :meth:`put_dir` uploads a fixture's volumes.
    ``tls``: HTTPS, with a certificate moto makes (clients must not verify it)."""

    def __init__(self, tls: bool = False) -> None:
        self.port = _free_port()
        self.tls = tls
        self.endpoint = f"{'https' if tls else 'http'}://127.0.0.1:{self.port}"
        env = {**os.environ, "MOTO_ALLOW_NONEXISTENT_REGION": "true"}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)]
            + (["--ssl"] if tls else []),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        deadline = time.monotonic() + 30
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    break
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError("the S3 test server (moto) did not start") from None
                time.sleep(0.1)
        import boto3

        self.client = boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET_KEY,
            region_name="us-east-1",
            verify=not tls,
        )
        self.client.create_bucket(Bucket="logs")
        self._uploaded: Dict[str, str] = {}

    def options(self, endpoint: Optional[str] = None, **more) -> Dict[str, object]:
        """The ``storage_options`` that reach this server (or a proxy in front of it)."""
        tls = {"allow_invalid_certificates": True} if self.tls else {}
        return {
            **tls,
            "aws_endpoint": endpoint or self.endpoint,
            "aws_allow_http": True,
            "aws_region": "us-east-1",
            "aws_access_key_id": ACCESS_KEY,
            "aws_secret_access_key": SECRET_KEY,
            **more,
        }

    def put_dir(self, local: Path, prefix: str, skip=()) -> str:
        """Uploads the files of ``local`` under ``prefix`` (once per prefix); the prefix's URL."""
        if prefix not in self._uploaded:
            for f in sorted(Path(local).iterdir()):
                if f.is_file() and f.name not in skip:
                    self.client.upload_file(str(f), "logs", f"{prefix}/{f.name}")
            self._uploaded[prefix] = f"s3://logs/{prefix}/"
        return self._uploaded[prefix]

    def stop(self) -> None:
        _stop(self.proc)


class FaultProxy:
    """An HTTP proxy on loopback in front of the S3 server, in a process of its own: every
    ``fail_every``-th ranged GET, and every one from the ``fail_from``-th on, gets ``status``
    instead of an answer; every request waits ``delay`` seconds first. :meth:`stats` says how
    many requests it saw and failed."""

    def __init__(
        self,
        upstream_port: int,
        fail_every: int = 0,
        status: int = 503,
        delay: float = 0.0,
        fail_from: int = 0,
    ):
        args = [upstream_port, fail_every, status, delay, fail_from]
        self.proc = subprocess.Popen(
            [sys.executable, __file__, *map(str, args)],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        line = self.proc.stdout.readline().strip()
        if not line.startswith("http://"):
            self.stop()
            raise RuntimeError("the fault proxy did not start")
        self.endpoint = line

    def stats(self) -> Dict[str, int]:
        import json
        import urllib.request

        with urllib.request.urlopen(self.endpoint + "/__stats", timeout=10) as r:
            return json.loads(r.read())

    def stop(self) -> None:
        _stop(self.proc)


def _serve_proxy(
    upstream_port: int, fail_every: int, status: int, delay: float, fail_from: int
) -> None:
    import json

    counts = {"seen": 0, "failed": 0, "ranged": 0}
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:  # quiet
            pass

        def _send(self, code: int, payload: bytes) -> None:
            self.send_response(code)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def _forward(self) -> None:
            if self.path == "/__stats":
                with lock:
                    return self._send(200, json.dumps(counts).encode())
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else None
            with lock:
                counts["seen"] += 1
                ranged = self.command == "GET" and "Range" in self.headers
                counts["ranged"] += ranged
                n = counts["ranged"]
                fail = bool(
                    ranged
                    and ((fail_every and n % fail_every == 0) or (fail_from and n >= fail_from))
                )
                counts["failed"] += fail
            if delay:
                time.sleep(delay)
            if fail:
                return self._send(
                    status,
                    b"<Error><Code>SlowDown</Code><Message>Reduce your rate</Message></Error>",
                )
            conn = http.client.HTTPConnection("127.0.0.1", upstream_port, timeout=30)
            conn.request(self.command, self.path, body=body, headers=dict(self.headers.items()))
            resp = conn.getresponse()
            data = resp.read()
            conn.close()
            self.send_response(resp.status)
            head = self.command == "HEAD"  # no body: the object's own length is passed on
            for k, v in resp.getheaders():
                if k.lower() in ("transfer-encoding", "connection") or (
                    k.lower() == "content-length" and not head
                ):
                    continue
                self.send_header(k, v)
            if not head:
                self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if not head:
                self.wfile.write(data)

        do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = _forward

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    print(f"http://127.0.0.1:{server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    _serve_proxy(
        int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
    )
