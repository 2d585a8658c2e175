"""Each line shape is parsed once into a program of spans (``assistant.metrics._compile``); reading a line through its
shape's program gives exactly what parsing the line afresh gave. The reference below is the per-line parse as it was
before programs: every series, finding, format and step must come out the same, on real logs and on generated lines
whose digits vary within one shape."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

import assistant.metrics as M
from assistant.metrics import MetricsAnalyser
from assistant.normalise import split_prefix

DATA = Path(__file__).parent / "data"


class Reference(MetricsAnalyser):
    """The analyser with the per-line parse it had before line programs."""

    def feed(self, number: int, body: str, rank: str | None = None) -> None:
        if len(body) > 4000:
            body = body[:4000]
        self._line = (rank, body)
        step: float | None = None
        values: dict[str, float] = {}
        low = body.lower()
        m = M._MEGATRON.search(body) if "iteration" in low else None
        if m:
            step, self.total_steps = float(m.group(1)), float(m.group(2))
            self.formats.add("megatron")
        m = M._TQDM.search(body) if ("it/s" in body or "s/it" in body) else None
        if m:
            n, total = float(m.group(1)), float(m.group(2))
            rate = float(m.group(3))
            values["it/s"] = rate if m.group(4) == "it/s" else (1.0 / rate if rate else 0.0)
            self._progress_step, self._progress_line = n, number
            self.total_steps = total
            self.formats.add("tqdm")
            step = n
        elif "s/it" in body or "it/s" in body:
            m = M._RATE.search(body)  # a rate without a progress bar: "step 50 | loss 0.85 | 1.10 s/it"
            if m:
                rate = float(m.group(1))
                values["it/s"] = rate if m.group(2) == "it/s" else (1.0 / rate if rate else 0.0)
        else:
            m = M._TQDM_STEP.search(body) if ("|" in body and "[" in body) else None
            if m:
                self._progress_step, self._progress_line = float(m.group(1)), number
                self.total_steps = float(m.group(2))
                self.formats.add("tqdm")
                step = float(m.group(1))
        if "took" in low:
            m = M._TOOK.search(body)
            if m:
                values["step_time"] = float(m.group(1)) * M._TOOK_UNIT.get(m.group(2).lower(), 1.0)
        for k, v in M.key_values(body):
            if k in M.STEP_KEYS and step is None:
                step = v
            elif k in M.LOSS_KEYS:
                values["loss"] = v
            elif k in M.GRAD_KEYS:
                values["grad_norm"] = v
            elif k in M.LR_KEYS:
                values["learning_rate"] = v
            elif k in M.LOSS_SCALE_KEYS:
                values["loss_scale"] = v
            elif k in M.DATA_TIME_KEYS:
                values["data_time"] = v
            elif k in M.THROUGHPUT_KEYS:
                values[k] = v
            elif k in M.STEP_TIME_KEYS:
                values["step_time"] = v
            elif k in M.GPU_MEM_KEYS:
                values["gpu_mem"] = v
            elif k in M.GPU_RESERVED_KEYS:
                values["gpu_reserved"] = v
            elif k == "epoch":
                values["epoch"] = v
        if "{" in body and ("loss" in values or "grad_norm" in values) and "'" in body:
            self.formats.add("hf-dict")
        elif "[Rank" in body or "samplespersec" in body.lower():
            self.formats.add("deepspeed")
        elif values and "megatron" not in self.formats and "tqdm" not in self.formats:
            self.formats.add("key-value")
        util = ()
        if "%" in body:  # a progress bar has "%" too: on ASCII text, skip what cannot match (RE2 calls cost)
            plain = body.isascii()
            util = (M._SMI.search(body) if not plain or "default" in low or "e. process" in low or "prohibited" in low
                    else None,
                    M._GPU_UTIL.search(body) if not plain or "gpu" in low else None)
        for m in util:
            if m:
                self._gpu_util(number, float(m.group(1)), rank)
                break
        self._nvidia_tables(number, body, low, rank)
        self._epoch = values.pop("epoch", None)
        if not values:
            return
        self.entries += 1
        if step is None and self._progress_step is not None and number - self._progress_line <= 50:
            step = self._progress_step
        if step is None and set(values) == {"loss_scale"} and self.last_step is not None:
            step = self.last_step  # "OVERFLOW! ... reducing loss scale" lines belong to the step logged last
        for name, v in values.items():
            self._add(name, v, step, number, rank)
        if step is not None:
            self.last_step = step if self.last_step is None else max(self.last_step, step)


def _state(a: MetricsAnalyser) -> str:
    report = a.report().model_dump()
    return repr((report, sorted(a.formats), a.entries, a.last_step, a.total_steps, a._progress_step,
                 a._progress_line, a._epoch, a._first_low_util, a._dmon_sm, a._csv_util,
                 sorted(a.finding_lines.items())))


def _both(lines: list[str]) -> tuple[str, str]:
    """The state after reading ``lines`` through programs and after the reference parse; reading them all in one
    ``feed_lines`` call (as the one-pass scanner does) must give the same state as one ``feed`` per line."""
    new, many, ref = MetricsAnalyser(), MetricsAnalyser(), Reference()
    batch = []
    for number, line in enumerate(lines, 1):
        rank, body = split_prefix(line)
        new.feed(number, body, rank)
        ref.feed(number, body, rank)
        batch.append((number, body, rank))
    many.feed_lines(batch)
    assert _state(many) == _state(new)
    return _state(new), _state(ref)


def _digits(line: str, k: int) -> str:
    return "".join(str((int(c) + k) % 10) if c.isdigit() and c.isascii() else c for c in line)


def test_real_logs_read_the_same():
    texts = [json.loads(line)["text"] for name in ("realworld/dev.jsonl", "triage_cases.jsonl")
             if (DATA / name).exists() for line in (DATA / name).read_text(encoding="utf-8").splitlines()]
    assert len(texts) > 1000
    metric_lines = 0
    for text in texts:
        lines = text.splitlines()
        metric_lines += sum(1 for line in lines if any(k in line.lower() for k in ("loss", "it/s", "grad")))
        new, ref = _both(lines)
        assert new == ref, text[:300]
        # the same log with its digits shifted: every shape now replays a program another line made
        new, ref = _both([_digits(line, 3) for line in lines])
        assert new == ref, text[:300]
    assert metric_lines > 2000


def test_generated_log_reads_the_same(tmp_path):
    from bench.make_log import make_log

    log = tmp_path / "small.log"
    make_log(log, 0.5)
    from assistant.normalise import CleanStats, clean_bytes

    lines = clean_bytes(log.read_bytes(), CleanStats()).decode("utf-8").splitlines()
    new, ref = _both(lines)
    assert new == ref
    assert "deepspeed" in new and "tqdm" in new


TOKENS = ["loss", "grad_norm", "lr", "learning_rate", "step", "Step", "epoch", "iteration", "iter", "took", "ms", "s",
          "sec", "it/s", "s/it", "tok/s", "samples/s", "SamplesPerSec", "[Rank 0]", "[rank1]:", "'loss'", "{", "}",
          ": ",
          "=", ":", ", ", " | ", " ", "\t", "[", "]", "/", "%", "Default", "gpu util", "GPU-Util", "# gpu  sm  mem",
          "utilization.gpu [%]", "nan", "inf", "1e-05", "3.25", "12", "7", "152,408", "0", "lm loss", "loss scale",
          "mem_alloc", "data_time", "step_time", "OVERFLOW", "İ", "x", "100%|", "|", "00:01<00:02", "grad_l3_norm"]


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(st.lists(st.lists(st.sampled_from(TOKENS), max_size=20), min_size=1, max_size=12),
       st.lists(st.integers(0, 9), min_size=1, max_size=3))
def test_any_lines_of_any_shape(lines, shifts):
    log = ["".join(tokens) for tokens in lines]
    log = [_digits(line, k) for k in shifts for line in log]  # later variants replay the first one's programs
    new, ref = _both(log)
    assert new == ref


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(st.lists(st.one_of(st.floats(allow_nan=False), st.integers(-10, 10)), min_size=1, max_size=60))
def test_median_is_statistics_median(values):
    import statistics

    assert repr(M.median(values)) == repr(statistics.median(values))
    assert repr(M.median(iter(values))) == repr(statistics.median(values))
