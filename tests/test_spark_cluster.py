"""walcdc on a real Spark standalone cluster (not local mode): a master and two workers on
127.0.0.1 started from PySpark's own jars (tests/spark_cluster.py), a driver in its own process
(tests/cluster_job.py), executors in their own JVMs with their own Python workers. The rows equal
the local stream's; an executor killed with SIGKILL in the middle of a job changes nothing (its
tasks are retried: they are deterministic and write nothing)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest
from test_spark import ORDER

import walcdc
from conftest import assert_same_rows, fixture_dir
from spark_cluster import StandaloneCluster, loopback_env

HERE = Path(__file__).resolve().parent
# One pytest-xdist worker runs the cluster (started once for the module) while another runs the
# local session's tests.
pytestmark = pytest.mark.xdist_group("cluster")

FIXTURE = "v11_2"  # CUBRID 11.2, two volumes


@pytest.fixture(scope="module")
def cluster_run(tmp_path_factory):
    """One application on the cluster (tests/cluster_job.py) over v11_2 with ranges of 1 MiB
    (transactions span ranges, tasks and both executors): its results' directory."""
    pytest.importorskip("pyspark")
    d = fixture_dir(FIXTURE)
    out = tmp_path_factory.mktemp("cluster-out")
    with StandaloneCluster(tmp_path_factory.mktemp("cluster"), workers=2) as cluster:
        env = loopback_env()
        # Executors start this interpreter; it finds walcdc where the test process found it.
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in [str(Path(walcdc.__file__).parent.parent), env.get("PYTHONPATH", "")] if p
        )
        r = subprocess.run(
            [sys.executable, str(HERE / "cluster_job.py"), cluster.url, str(d), str(out)]
            + [str(1 << 20)],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert r.returncode == 0, r.stderr[-6000:] + cluster.logs()
    return out


@pytest.fixture(scope="module")
def committed():
    return walcdc.read_changes(fixture_dir(FIXTURE)).read_all()


def _same(want: pa.Table, out: Path, name: str) -> None:
    """The Spark rows (in any order) equal the local stream's, every column, in the Arrow types
    Spark hands back; the DataFrame's schema is the local schema's Spark mapping."""
    from pyspark.sql.types import StructType

    from walcdc.spark import spark_schema

    with pa.OSFile(str(out / f"{name}.arrow"), "rb") as f:
        got = pa.ipc.open_file(f).read_all()
    schema = StructType.fromJson(json.loads((out / f"{name}.schema.json").read_text()))
    assert spark_schema(want.schema) == schema, name
    assert got.num_rows == want.num_rows > 0, name
    assert_same_rows(got.sort_by(ORDER), want.cast(got.schema).sort_by(ORDER), name)


def test_the_data_source_on_a_standalone_cluster_equals_the_local_stream(cluster_run, committed):
    _same(committed, cluster_run, "format")  # spark.read.format("walcdc")


def test_read_changes_with_an_executor_killed_mid_job_equals_the_local_stream(
    cluster_run, committed
):
    """``walcdc.spark.read_changes`` on the cluster, one executor JVM SIGKILLed while both run a
    task of the read: its task fails, Spark runs it again (on the other executor or on the one
    its worker starts anew), and the rows are still exactly the local stream's."""
    seen = json.loads((cluster_run / "kill.json").read_text())
    assert seen, "the job ended before both executors were busy: nothing was killed"
    assert seen["executors"] == 2 and seen["active"] >= 2
    assert seen["completed"] < seen["tasks"], seen
    assert seen["failed"] >= 1, seen  # the killed executor's task
    _same(committed, cluster_run, "killed")
