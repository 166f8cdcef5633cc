"""Webhook delivery end to end on localhost: a log of many small transactions delivered through
the durable queue to a receiver that accepts everything; events per second from the start of
reading to the last 2xx, and the peak memory of the process.

    python benches/webhook.py [--events 300000] [--batch-events 5000]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path


def make_log(directory: Path, events: int) -> int:
    from walcdc.testing import LogWriter, Workload, cdc_oid

    w = LogWriter(page_size=16384, active_pages=4096, archive_pages=4096, stream_to=directory)
    work = Workload(w)
    n = 0
    i = 0
    while n < events:
        t = work.begin(1 + i % 8)
        for j in range(10):
            t.insert(cdc_oid(0, 200 + j % 4, 1), (b"%08d" % (n + j)) * 12, 1000 + j, 1 + i % 30000)
        t.commit()
        work.committed.clear()
        n += 10
        i += 1
    w.finish(directory)
    return n


RECEIVER = """
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(204)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *a):
        pass

server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
"""


def main(argv=None) -> int:
    import subprocess
    import sys

    from walcdc.deliver import Delivery, WebhookSender

    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--events", type=int, default=300_000)
    ap.add_argument("--batch-events", type=int, default=5000)
    args = ap.parse_args(argv)
    # The receiver is another process, as a real endpoint is; the log is written by another
    # process too, so that this one's peak memory is the delivery's own.
    receiver = subprocess.Popen([sys.executable, "-c", RECEIVER], stdout=subprocess.PIPE, text=True)
    port = int(receiver.stdout.readline())
    try:
        with tempfile.TemporaryDirectory() as tmp:
            log = Path(tmp) / "log"
            code = (
                f"import sys, pathlib; sys.path.insert(0, {str(Path(__file__).parent)!r}); "
                f"import webhook; print(webhook.make_log(pathlib.Path({str(log)!r}), "
                f"{args.events}))"
            )
            n = int(
                subprocess.run(
                    [sys.executable, "-c", code], capture_output=True, text=True, check=True
                ).stdout
            )
            sender = WebhookSender(f"http://127.0.0.1:{port}/")
            delivery = Delivery(
                log,
                sender,
                str(Path(tmp) / "state"),
                batch_events=args.batch_events,
                batch_delay=1.0,
                idle_timeout=0.2,
                poll_interval=0.05,
            )
            t = time.perf_counter()
            metrics = delivery.run()
            seconds = time.perf_counter() - t - 0.2  # the idle timeout is not work
    finally:
        receiver.kill()
    status = dict(x.split(":", 1) for x in open("/proc/self/status"))
    mb = {k: int(status[k].split()[0]) / 1024 for k in ("VmHWM", "RssAnon", "RssFile")}
    print(
        f"{n:,} events in {seconds:.2f} s: {n / seconds:,.0f} events/s read, queued and "
        f"delivered ({metrics.batches_delivered} POSTs of {args.batch_events}); peak RSS "
        f"{mb['VmHWM']:.0f} MB, at the end {mb['RssAnon']:.0f} MB anonymous + "
        f"{mb['RssFile']:.0f} MB mapped files"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
