"""The one delivery loop (walcdc.sinks.loop): a cursor is saved only after what it covers is
durable, for every writer walcdc has."""

import pytest

from walcdc.sinks.loop import Writer, deliver


class _Stream:
    """Batches (ints here) with a cursor that moves past each one as it is read."""

    def __init__(self, batches):
        self.batches = batches
        self.cursor = 0

    def __iter__(self):
        for b in self.batches:
            self.cursor = b
            yield b


class _Recorder(Writer):
    def __init__(self, calls, fail_at=None, stop_after=None, each=False):
        self.calls, self.fail_at, self.stop_after = calls, fail_at, stop_after
        self.checkpoint_each_batch = each
        self.count = 0

    def write(self, batch):
        if batch == self.fail_at:
            raise OSError("disk full")
        self.count += 1
        self.calls.append(("write", batch))

    def durable(self):
        self.calls.append(("durable",))

    def finish(self, cursor):
        if self.fail_at == "finish":
            raise OSError("rename failed")
        self.calls.append(("finish", cursor))

    def abort(self):
        self.calls.append(("abort",))

    def stopped(self):
        return self.stop_after is not None and self.count >= self.stop_after


def _run(writer_args, batches=(1, 2, 3)):
    calls = []
    saved = lambda c: calls.append(("save", c))  # noqa: E731
    deliver(_Stream(list(batches)), _Recorder(calls, **writer_args), saved)
    return calls


def test_a_writer_that_publishes_at_the_end_saves_the_cursor_once_after_finishing():
    calls = _run({})
    assert calls == [("write", 1), ("write", 2), ("write", 3), ("finish", 3), ("save", 3)]


def test_a_writer_that_checkpoints_makes_each_batch_durable_before_its_cursor():
    calls = _run({"each": True}, (1, 2))
    assert calls == [
        ("write", 1),
        ("durable",),
        ("save", 1),
        ("write", 2),
        ("durable",),
        ("save", 2),
        ("finish", 2),
        ("save", 2),
    ]


@pytest.mark.parametrize("fail_at", [2, "finish"])
def test_a_failure_aborts_and_saves_no_cursor_past_what_is_durable(fail_at):
    calls = []
    with pytest.raises(OSError):
        deliver(_Stream([1, 2, 3]), _Recorder(calls, fail_at=fail_at), lambda c: calls.append(c))
    assert calls[-1] == ("abort",)
    assert not [c for c in calls if not isinstance(c, tuple)]  # no cursor saved


def test_a_stopped_writer_reads_no_further_and_finishes():
    calls = _run({"stop_after": 2})
    assert calls == [("write", 1), ("write", 2), ("finish", 2), ("save", 2)]


def test_every_output_is_a_writer_on_the_loop():
    from walcdc.cdcserver import _ClientWriter
    from walcdc.deliver import _QueueWriter
    from walcdc.mirrors import _RoundWriter
    from walcdc.sinks.base import FileWriter
    from walcdc.sinks.files import AppendWriter
    from walcdc.sinks.tables import TablesWriter

    for cls in (FileWriter, TablesWriter, AppendWriter, _QueueWriter, _RoundWriter, _ClientWriter):
        assert issubclass(cls, Writer), cls
