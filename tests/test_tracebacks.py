"""Traceback extraction: chained exceptions, per-rank separation, torchrun ChildFailedError summaries."""

from __future__ import annotations

from assistant.normalise import split_prefix
from assistant.tracebacks import KeptLine, extract


def _kept(text: str) -> list[KeptLine]:
    out = []
    for n, line in enumerate(text.split("\n"), 1):
        rank, body = split_prefix(line)
        out.append(KeptLine(n, rank, body))
    return out


CHAINED = """Traceback (most recent call last):
  File "/usr/lib/python3.11/json/decoder.py", line 353, in raw_decode
    obj, end = self.scan_once(s, idx)
StopIteration: 0

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "load.py", line 8, in <module>
    json.loads(line)
  File "/usr/lib/python3.11/json/decoder.py", line 355, in raw_decode
    raise JSONDecodeError("Expecting value", s, err.value) from None
json.decoder.JSONDecodeError: Expecting value: line 1 column 1 (char 0)"""


def test_chained_traceback_reports_the_final_exception_and_the_chain():
    tbs = extract(_kept(CHAINED))
    assert len(tbs) == 1
    tb = tbs[0]
    assert tb.exc_type == "json.decoder.JSONDecodeError"
    assert tb.message == "Expecting value: line 1 column 1 (char 0)"
    assert tb.chained == ["StopIteration: 0"]
    assert (tb.start_line, tb.end_line) == (1, 13)
    assert [f.function for f in tb.frames] == ["<module>", "raw_decode"]
    assert tb.frames[0].file == "load.py" and tb.frames[0].line == 8


def test_interleaved_ranks_give_one_traceback_each():
    text = "\n".join([
        "[rank0]: Traceback (most recent call last):",
        "[rank1]: Traceback (most recent call last):",
        '[rank0]:   File "train.py", line 10, in step',
        '[rank1]:   File "train.py", line 10, in step',
        "[rank1]: RuntimeError: CUDA error: device-side assert triggered",
        "[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB.",
    ])
    tbs = {tb.rank: tb for tb in extract(_kept(text))}
    assert tbs["0"].exc_type == "torch.OutOfMemoryError" and tbs["0"].end_line == 6
    assert tbs["1"].exc_type == "RuntimeError" and "device-side assert" in tbs["1"].message


TORCHRUN = """torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
train.py FAILED
------------------------------------------------------------
Failures:
  <NO_OTHER_FAILURES>
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2024-05-01_12:00:00
  host      : node-1
  rank      : 3 (local_rank: 3)
  exitcode  : -9 (pid: 31337)
  error_file: <N/A>
  traceback : Signal 9 (SIGKILL) received by PID 31337
============================================================"""


def test_torchrun_root_cause_block():
    tbs = [tb for tb in extract(_kept(TORCHRUN)) if tb.kind == "torchrun"]
    assert len(tbs) == 1
    tb = tbs[0]
    assert tb.exitcode == -9 and tb.signal == "SIGKILL"
    assert tb.failed_rank == "3" and tb.host == "node-1" and tb.error_file is None
    assert tb.start_line == 8 and tb.end_line == 16


def test_exit_code_without_signal_text_is_named():
    text = TORCHRUN.replace("Signal 9 (SIGKILL) received by PID 31337", "To enable traceback see: x").replace("-9", "-6")
    tb = [t for t in extract(_kept(text)) if t.kind == "torchrun"][0]
    assert tb.exitcode == -6 and tb.signal == "SIGABRT"


def test_no_traceback_in_plain_text():
    assert extract(_kept("loss=1.2\nhello world\nError count: 0")) == []
