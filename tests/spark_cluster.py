"""A Spark standalone cluster on 127.0.0.1 for tests, from PySpark's own jars: one master and
worker processes started with ``bin/spark-class`` (no download, no ``sbin`` scripts), each
logging to a file; stopped (and its executors with it) when the ``with`` block ends. Every
wait is bounded in time."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path
from typing import List

#: The JVMs of a test cluster run small jobs for a minute: the quick compiler alone and one GC
#: thread spend much less CPU than the defaults on a 2-core machine.
QUICK_JVM = "-XX:TieredStopAtLevel=1 -XX:CICompilerCount=1 -XX:+UseSerialGC"


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def loopback_env() -> dict:
    """The environment of every process of the cluster and its driver: loopback only."""
    env = dict(os.environ)
    env.update(
        SPARK_LOCAL_IP="127.0.0.1",
        SPARK_LOCAL_HOSTNAME="localhost",
        SPARK_HOME=str(spark_home()),
        SPARK_DAEMON_MEMORY="256m",
        SPARK_DAEMON_JAVA_OPTS=QUICK_JVM,
    )
    return env


def _wait_for(path: Path, pattern: str, proc: subprocess.Popen, seconds: float) -> re.Match:
    deadline = time.monotonic() + seconds
    while True:
        text = path.read_text(errors="replace") if path.exists() else ""
        found = re.search(pattern, text)
        if found:
            return found
        if proc.poll() is not None:
            ended = f"{path.name}: the process ended ({proc.returncode})"
            raise RuntimeError(f"{ended}:\n{text[-3000:]}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path.name}: no {pattern!r} after {seconds} s:\n{text[-3000:]}")
        time.sleep(0.1)


class StandaloneCluster:
    """``with StandaloneCluster(tmp, workers=2) as c:`` ... ``c.url`` (``spark://127.0.0.1:port``).
    Each worker offers one core, so an application gets one executor per worker."""

    def __init__(self, directory: Path, workers: int = 2, cores: int = 1, memory: str = "1g"):
        self.directory = Path(directory)
        self.workers = workers
        self.cores = cores
        self.memory = memory
        self.procs: List[subprocess.Popen] = []
        self.url = ""

    def _start(self, name: str, *args: str) -> subprocess.Popen:
        log = open(self.directory / f"{name}.log", "wb")  # noqa: SIM115 -- the process owns it
        cls = str(spark_home() / "bin" / "spark-class")
        proc = subprocess.Popen(
            [cls, *args],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=loopback_env(),
            start_new_session=True,  # stopped with its children (a worker's executors)
        )
        log.close()
        self.procs.append(proc)
        return proc

    def __enter__(self) -> StandaloneCluster:
        self.directory.mkdir(parents=True, exist_ok=True)
        try:
            master = self._start(
                "master",
                "org.apache.spark.deploy.master.Master",
                "--host",
                "127.0.0.1",
                "--port",
                "0",
                "--webui-port",
                "0",
            )
            found = _wait_for(
                self.directory / "master.log",
                r"Starting Spark master at (spark://127\.0\.0\.1:\d+)",
                master,
                120,
            )
            self.url = found.group(1)
            workers = []
            for i in range(self.workers):
                work = self.directory / f"work{i}"
                work.mkdir(exist_ok=True)
                workers.append(
                    self._start(
                        f"worker{i}",
                        "org.apache.spark.deploy.worker.Worker",
                        self.url,
                        "--host",
                        "127.0.0.1",
                        "--webui-port",
                        "0",
                        "--cores",
                        str(self.cores),
                        "--memory",
                        self.memory,
                        "--work-dir",
                        str(work),
                    )
                )
            for i, proc in enumerate(workers):
                _wait_for(
                    self.directory / f"worker{i}.log",
                    r"Successfully registered with master",
                    proc,
                    120,
                )
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def stop(self) -> None:
        for proc in reversed(self.procs):  # workers first: they stop their executors
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + 30
        for proc in self.procs:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
        self.procs.clear()

    def logs(self) -> str:
        """The tail of every daemon's log (for a failure's message)."""
        out = []
        for path in sorted(self.directory.glob("*.log")):
            out.append(f"--- {path.name}\n{path.read_text(errors='replace')[-2000:]}")
        return "\n".join(out)


def executor_pids(app_id: str) -> List[int]:
    """The executor JVMs of application ``app_id`` on this machine."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"org.apache.spark.executor.CoarseGrainedExecutorBackend" in cmdline and (
            app_id.encode() in cmdline
        ):
            pids.append(int(entry.name))
    return sorted(pids)
