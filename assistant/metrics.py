"""Metric series from training logs, analysed as they stream past (bounded memory).

Recognises HF Trainer dict lines (``{'loss': 2.31, 'grad_norm': 1.2, ...}``), ``key=value`` and
``key: value`` lines, DeepSpeed (``[Rank 0] step=..., lr=[...]``, ``samples/sec``), Megatron
(``iteration 120/ 1000 | lm loss: 2.3E+00 | grad norm: ...``), tqdm bars and postfixes
(``123/1000 [..., 1.5it/s, loss=2.31]``) and nvidia-smi tables (``45%  Default``).

Findings are relative to the series itself: a loss spike is a point far above the rolling median
in units of the rolling MAD (robust to noise, no fixed loss threshold), a gradient explosion is
an order of magnitude above the rolling median (or inf), a throughput drop is a sustained fall
of the recent median below the earlier median. Every finding cites a step and an input line.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from itertools import repeat
from operator import eq, itemgetter
from statistics import StatisticsError

from assistant import fastre
from assistant.models import MetricFinding, MetricsReport, SeriesPoint, SeriesSummary

WINDOW = 50  # rolling window for medians
MIN_POINTS = 5  # a finding needs at least this much history...
FEW_POINTS = 3  # ...or this much, if the jump is also large in relative terms (short pastes)
FEW_POINTS_RATIO = 1.5  # with little history a spike must exceed the median by 50 %
SHORT_SPIKE_RATIO = 2.0  # a pasted excerpt too short for any rolling check: one point twice the others, then back
SPIKE_Z = 6.0  # robust z-score (MAD units) above the rolling median
LOCAL_SPIKE_Z = 9.0  # ... or this many step-to-step noise units above the last few points
LOCAL_SPIKE_RISE = 0.15  # ... and at least 15 % above them
EXPLOSION_RATIO = 10.0  # an order of magnitude above the rolling median
GROWTH_BASE = 5  # first values of a grad-norm series: the baseline a steady rise is measured from
GROWTH_RUN = 10  # a steady rise: of the last GROWTH_RUN steps ...
GROWTH_RISES = 8  # ... at least this many went up ...
GROWTH_RATIO = 10.0  # ... and the norm is this many times its starting level
DROP_RATIO = 0.6  # recent median below 60 % of the earlier median
RECENT = 5  # points that must stay low for a drop to count as sustained
LOW_GPU_UTIL = 40.0  # percent
MAX_FINDINGS_PER_KIND = 5
SHORT_SERIES = 60  # rate series this short are re-checked as a whole at the end
MAX_SAMPLES = 512  # points kept per series for trends and plots: every k-th, k doubling as the series grows
# A long log's points wait per series and are analysed in bulk (``MetricsAnalyser.flush``): with numpy once a series
# has WARM finite points behind it (every rolling window full) and BULK_FROM new ones, point by point otherwise.
WARM = 64
BULK_FROM = 256
MAX_WAITING = 65536  # points waiting for a flush, at most (whoever feeds the analyser, memory stays bounded)

# A prefilter for lines worth parsing (used by the one-pass scanner).
# Lines with only step/lr (e.g. DeepSpeed's per-rank "step=…, lr=[…]") are not parsed: they carry
# no series a finding is drawn from.
METRIC_LINE_PATTERN = (
    r"^.*(?:loss|grad.?norm|gnorm|it/s|s/it|per_sec|samples/s|persec|tokens/s|tok/s"
    r"|throughput|tflops|\d+%\s+default|gpu-util|iteration\s+\d+|#\s*gpu\s|utilization\.gpu"
    r"|\btook\s+\d+(?:\.\d+)?\s*(?:ms|s|sec|secs|seconds|min|mins|minutes)\b|step.?time|data.?time"
    r"|^\s*\d+(?:\s+(?:\d+|-)){3,}\s*$|^\s*\d+\s*%\s*(?:,.*)?$).*$"
)

_KEY_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_ ./()-")
_NUM_CHARS = frozenset("0123456789.eE+-naNfiItyIFY")
_NUM_START = frozenset("0123456789.+-nNiI")
_NUM_STR = "0123456789.eE+-naNfiItyIFY"
_DELIM_TABLE = str.maketrans({d: "\0" for d in "{},|[]'\";\t:=<>#"})
_KEY_JUNK = "0123456789 _./()-"
_SPACE_KEYS = ("loss", "step", "iteration", "grad_norm", "grad norm", "gradient norm", "gnorm", "lr", "step_time",
               "step time", "iter time", "time", "tok/s", "tokens/s", "samples/s", "data_time", "data time", "iter",
               "mem_alloc", "memory_allocated", "mem_reserved", "memory_reserved")
_NOT_TRAINING = frozenset({"val", "eval", "valid", "validation", "test", "dev", "evaluation"})
_VALUE_SKIP = " \t'\"[("
_TQDM = fastre.compile(r"(\d+)/(\d+)\s*\[[^\]]*?(\d+(?:\.\d+)?)\s*(it/s|s/it)")
_RATE = fastre.compile(r"(?:^|[\s|,(\[])(\d+(?:\.\d+)?)\s*(s/it|it/s)\b")
_TQDM_STEP = fastre.compile(r"\|\s*(\d+)/(\d+)\s*\[")
_MEGATRON = fastre.compile(r"(?i)iteration\s+(\d+)\s*/\s*(\d+)")
_SMI = fastre.compile(r"(?i)(\d+)%\s+(?:default|e\. process|prohibited)")
_GPU_UTIL = fastre.compile(r"(?i)gpu[- _]?util(?:ization)?[^0-9\n]{0,12}(\d+(?:\.\d+)?)\s*%")

LOSS_KEYS = {"loss", "lm loss", "lm_loss", "total_loss", "train/loss", "training_loss", "train loss"}
GRAD_KEYS = {"grad_norm", "grad norm", "gnorm", "grad-norm", "gradient_norm", "total_norm", "global_grad_norm",
             "train/grad_norm", "gradnorm", "global_norm", "grad_l2_norm", "gradient norm", "grad_norm_total"}
LR_KEYS = {"learning_rate", "learning rate", "lr", "train/learning_rate"}
LOSS_SCALE_KEYS = {"loss scale", "loss_scale", "loss-scale", "cur_scale", "current loss scale", "train/loss_scale"}
STEP_KEYS = {"step", "global_step", "steps", "global step", "iter", "iteration", "train/global_step"}
DATA_TIME_KEYS = {"data_time", "data time", "data_wait", "data-time", "time_data", "dataloader_time"}
THROUGHPUT_KEYS = {"samples_per_second", "samples/sec", "samples/s", "currsamplespersec", "runningavgsamplespersec",
                   "tokens_per_sec", "tokens/s", "tokens_per_second", "tok/s", "throughput", "tflops",
                   "throughput_tokens_per_sec", "tokens per second"}
STEP_TIME_KEYS = {"elapsed time per iteration (ms)", "iter time (s)", "step_time", "time_per_step",
                  "iteration time", "time", "step time", "iter time", "batch time", "train_step_time", "time/step",
                  "time per step", "epoch time", "epoch_time", "time_per_iteration"}
# GPU memory allocated by PyTorch, as training loops log it (in the log's own unit, usually GiB)
GPU_MEM_KEYS = {"mem_alloc", "memory_allocated", "mem_allocated", "mem_alloc_gb", "memory_allocated_gb",
                "allocated_gb", "gpu_mem", "gpu_memory", "cuda_mem", "mem_alloc_gib", "memory/allocated"}
# GPU memory reserved by PyTorch's caching allocator (what nvidia-smi shows; what runs out first)
GPU_RESERVED_KEYS = {"mem_reserved", "memory_reserved", "mem_reserved_gb", "memory_reserved_gb", "reserved_gb",
                     "max_memory_reserved", "mem_reserved_gib", "memory/reserved", "gpu_reserved"}
# "Epoch 3 took 135.2 seconds", "step 40 took 812ms": a duration per step or epoch, in seconds.
_TOOK = fastre.compile(r"(?i)\btook\s+(\d+(?:\.\d+)?)\s*(ms|s|sec|secs|seconds|min|mins|minutes)\b")
_TOOK_UNIT = {"ms": 0.001, "min": 60.0, "mins": 60.0, "minutes": 60.0}


def median(data) -> float:
    """``statistics.median``, the same arithmetic without its wrapping: it runs for every point of a long log."""
    values = sorted(data)
    n = len(values)
    if not n:
        raise StatisticsError("no median for empty data")
    if n % 2:
        return values[n // 2]
    return (values[n // 2 - 1] + values[n // 2]) / 2


def _num(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


# The series a key feeds: the first of these sets holding the key wins (a throughput keeps its own name).
_SERIES_OF: dict[str, str] = {}
for _keys, _name in ((LOSS_KEYS, "loss"), (GRAD_KEYS, "grad_norm"), (LR_KEYS, "learning_rate"),
                     (LOSS_SCALE_KEYS, "loss_scale"), (DATA_TIME_KEYS, "data_time"), (THROUGHPUT_KEYS, None),
                     (STEP_TIME_KEYS, "step_time"), (GPU_MEM_KEYS, "gpu_mem"), (GPU_RESERVED_KEYS, "gpu_reserved"),
                     ({"epoch"}, "epoch")):
    for _key in _keys:
        _SERIES_OF.setdefault(_key, _name or _key)

KNOWN_KEYS = (LOSS_KEYS | GRAD_KEYS | LR_KEYS | LOSS_SCALE_KEYS | DATA_TIME_KEYS | STEP_KEYS | THROUGHPUT_KEYS
              | STEP_TIME_KEYS | GPU_MEM_KEYS | GPU_RESERVED_KEYS | {"epoch"})


def key_values(line: str) -> list[tuple[str, float]]:
    """``(lowercase key, value)`` pairs of ``key: number`` / ``key=number`` / ``'key': number`` in a line.

    A linear scan with string methods (no regex): for each ``:`` or ``=``, the value is the number
    after it (quotes, ``[`` and ``(`` skipped) and the key the run of key characters before it,
    shortened word by word until it is a known metric name ("train loss" in "Epoch 3 train loss").
    The metric parser does not call this per line: it reads lines through their shape's program
    (:func:`_compile`), whose spans come from the same scan (:func:`_plan`).
    """
    return _plan(line, replay=True)[0]


_DIGITS_TO_ZERO = str.maketrans("123456789", "000000000")
_BYTE_DIGITS_TO_ZERO = bytes.maketrans(b"123456789", b"000000000")  # the same shape of the encoded line, faster
MAX_SHAPES = 4096  # line shapes whose programs are remembered (a few per log format)


def _plan(line: str, replay: bool = False):
    """Scan ``line``: the spans of its ``key: value`` pairs and the space-separated keywords to look for,
    and whether the plan holds for every line of its shape (no digit in a key that was looked up). With
    ``replay`` the result is the pairs themselves (:func:`key_values`)."""
    steps: list[tuple] = []
    out: list[tuple[str, float]] = []
    cacheable = True
    seps: list[int] = []
    for ch in ":=":
        p = line.find(ch)
        while p >= 0:
            seps.append(p)
            p = line.find(ch, p + 1)
    seps.sort()
    prev_end = 0
    for i in seps:
        if i < prev_end:
            continue
        # the value: skip quotes/brackets, then the run of number characters (str.lstrip runs in C)
        window = line[i + 1 : i + 48]
        rest = window.lstrip(_VALUE_SKIP)
        if not rest or rest[0] not in _NUM_START:
            continue
        tail = rest[:32].lstrip(_NUM_STR)
        raw = rest[: min(32, len(rest)) - len(tail)]
        value = _num(raw) if raw else None
        if value is None:
            continue
        # the key: after the last delimiter before the separator, at most 48 characters
        e = i
        while e > prev_end and line[e - 1] in " \t'\"":
            e -= 1
        start = max(prev_end, e - 48)
        segment = line[start:e].translate(_DELIM_TABLE)  # every delimiter becomes NUL: one rfind finds the last
        k0 = start + segment.rfind("\0") + 1
        lowered = line[k0:e].lower()
        key = lowered.lstrip(_KEY_JUNK)
        a = len(lowered) - len(key)
        key = key.rstrip()
        b = a + len(key)
        while key:
            if _has_digit(key):
                cacheable = False  # "grad_l2_norm" is a known key, "grad_l3_norm" is not
            if key in KNOWN_KEYS or " " not in key:
                break
            dropped, key = key.split(" ", 1)
            if dropped in _NOT_TRAINING:
                key = ""  # "val loss", "eval loss": not the training series
            stripped = key.lstrip()
            a = b - len(stripped)
            key = stripped
        if key:
            out.append((key, value))
            vs = i + 1 + (len(window) - len(rest))
            steps.append(("sep", k0, e, a, b, vs, vs + len(raw)))
        prev_end = i + 1 + (len(window) - len(rest)) + len(raw)
    found = {k for k, _ in out}
    low = line.lower()
    for kw in _SPACE_KEYS:
        if kw in found or kw not in low:  # a keyword absent from the line is absent from its whole shape
            continue
        steps.append(("space", kw))
        if replay:
            out.extend(_space_value(line, low, kw))
    return (out if replay else steps), cacheable


def _has_digit(text: str) -> bool:
    return text != text.translate(_DIGITS_TO_ZERO) or "0" in text


def _space_value(line: str, low: str, kw: str) -> list[tuple[str, float]]:
    """``loss 1.83`` / ``Step 4200`` (key, spaces, number — no separator): the first such pair."""
    p = low.find(kw)
    while p >= 0:
        before = low[p - 1] if p else " "
        after = p + len(kw)
        rest = line[after : after + 40]
        stripped = rest.lstrip(" \t")
        if not (before.isalnum() or before == "_") and stripped is not rest and stripped[:1] in _NUM_START:
            if "," in stripped[:16]:  # "tok/s 152,408": thousands separators
                head = stripped[:16]
                cut = len(head) - len(head.lstrip("0123456789,"))
                stripped = head[:cut].replace(",", "") + stripped[cut:] if cut else stripped
            tail = stripped[:32].lstrip(_NUM_STR)
            value = _num(stripped[: min(32, len(stripped)) - len(tail)])
            if value is not None:
                return [(kw, value)]
        p = low.find(kw, p + 1)
    return []


# Where a line's step, values and progress are, and which formats it shows, depend only on its shape (every digit
# alike: the patterns above read \d, the key scan treats all digits the same), so the thousands of lines of one
# shape in a long log are parsed once, into spans that are read off every other line of that shape
# (tests/test_metric_programs.py checks this against parsing every line afresh).
#
# A value's source in a line: (start, end, how, arg). how: "f" the float of the span; "inv" a rate in s/it, as
# it/s; "mul" the float times arg; "kw" the value after the space-separated keyword arg (rare: read afresh).
Source = tuple


@dataclass(frozen=True, slots=True)
class _Program:
    step: Source | None = None
    total: Source | None = None  # total steps (the last of a Megatron and a progress-bar total)
    progress: Source | None = None  # a progress bar's step
    values: tuple[tuple[str, Source], ...] = ()  # series -> where its value is, in the order they are assigned
    formats: tuple[str, ...] = ()
    key_value: bool = False  # "key-value", unless a Megatron or tqdm log was recognised
    util: Source | None = None  # a GPU utilisation reading
    table: bool = False  # an nvidia-smi table header (a '#' comment or a utilization.gpu CSV header)


_PROGRAMS: dict[bytes, _Program] = {}  # by the UTF-8 of the line's shape


def _read(line: str, source: Source) -> float:
    start, end, how, arg = source
    if how == "f":
        return float(line[start:end])
    if how == "inv":
        rate = float(line[start:end])
        return 1.0 / rate if rate else 0.0
    if how == "mul":
        return float(line[start:end]) * arg
    return _space_value(line, line.lower(), arg)[0][1]


def _span(m, group: int, how: str = "f", arg: float | str | None = None) -> Source:
    start, end = m.span(group)
    return (start, end, how, arg)


def _compile(body: str) -> tuple[_Program, bool]:
    """The program of ``body``'s shape, and whether it holds for every line of that shape."""
    step: Source | None = None
    total = progress = util = None
    values: dict[str, Source] = {}
    formats: list[str] = []
    low = body.lower()
    m = _MEGATRON.search(body) if "iteration" in low else None
    if m:
        step, total = _span(m, 1), _span(m, 2)
        formats.append("megatron")
    m = _TQDM.search(body) if ("it/s" in body or "s/it" in body) else None
    if m:
        values["it/s"] = _span(m, 3, "f" if m.group(4) == "it/s" else "inv")
        step = progress = _span(m, 1)
        total = _span(m, 2)
        formats.append("tqdm")
    elif "s/it" in body or "it/s" in body:
        m = _RATE.search(body)  # a rate without a progress bar: "step 50 | loss 0.85 | 1.10 s/it"
        if m:
            values["it/s"] = _span(m, 1, "f" if m.group(2) == "it/s" else "inv")
    else:
        m = _TQDM_STEP.search(body) if ("|" in body and "[" in body) else None
        if m:
            step = progress = _span(m, 1)
            total = _span(m, 2)
            formats.append("tqdm")
    if "took" in low:
        m = _TOOK.search(body)
        if m:
            values["step_time"] = _span(m, 1, "mul", _TOOK_UNIT.get(m.group(2).lower(), 1.0))
    plan, cacheable = _plan(body)
    for source in plan:
        if source[0] == "sep":
            _, start, end, a, b, vs, ve = source
            k, src = body[start:end].lower()[a:b], (vs, ve, "f", None)
        elif _space_value(body, low, source[1]):
            k = source[1]
            src = (0, 0, "kw", k)
        else:
            continue
        if k in STEP_KEYS:
            if step is None:
                step = src
            continue
        name = _SERIES_OF.get(k)
        if name is not None:
            values[name] = src
    kind = None
    if "{" in body and ("loss" in values or "grad_norm" in values) and "'" in body:
        kind = "hf-dict"
    elif "[Rank" in body or "samplespersec" in low:
        kind = "deepspeed"
    if kind:
        formats.append(kind)
    key_value = kind is None and bool(values)
    if "%" in body:  # a progress bar has "%" too: on ASCII text, skip what cannot match (RE2 calls cost)
        plain = body.isascii()
        for m in (_SMI.search(body) if not plain or "default" in low or "e. process" in low or "prohibited" in low
                  else None,
                  _GPU_UTIL.search(body) if not plain or "gpu" in low else None):
            if m:
                util = _span(m, 1)
                break
    stripped = low.strip()
    table = stripped.startswith("#") or "utilization.gpu" in low
    return _Program(step, total, progress, tuple(values.items()), tuple(formats), key_value, util, table), cacheable


@dataclass
class _Series:
    name: str
    rank: str | None
    window: deque = field(default_factory=lambda: deque(maxlen=WINDOW))
    recent: deque = field(default_factory=lambda: deque(maxlen=RECENT))
    points: int = 0
    first_step: float | None = None
    last_step: float | None = None
    last_value: float | None = None
    dropped: bool = False
    base: float | None = None
    head: list = field(default_factory=list)  # first GROWTH_BASE finite values: the baseline a trend is measured from
    trend: deque = field(default_factory=lambda: deque(maxlen=GROWTH_RUN + 1))
    grew: bool = False
    early: list = field(default_factory=list)  # first SHORT_SERIES points (value, step, line, text) of rate series
    samples: list = field(default_factory=list)  # (step or entry index, value, line): at most MAX_SAMPLES, evenly thinned
    stride: int = 1
    finite: int = 0  # finite points of this rank seen (analysed)

    def sample(self, step: float | None, value: float, line: int, text: tuple[str | None, str]) -> None:
        """Keep every ``stride``-th point (with its line's rank and text, for evidence); when full, drop every
        other one and double the stride."""
        if (self.points - 1) % self.stride:
            return
        self.samples.append((step if step is not None else float(self.points), value, line, text))
        if len(self.samples) >= MAX_SAMPLES:
            self.samples = self.samples[::2]
            self.stride *= 2


class MetricsAnalyser:
    """Feed lines one by one (``feed``); ``report()`` gives series summaries and findings.

    With ``batch`` (the default) a series' points wait until :meth:`flush` (``report()`` flushes), which analyses a
    long run of them with numpy: the same findings, summaries and samples as point by point
    (``tests/test_metric_bulk.py``), a check replayed exactly wherever the vectorised screen says it might fire.
    """

    def __init__(self, batch: bool = True) -> None:
        self.series: dict[str, _Series] = {}
        self.findings: list[MetricFinding] = []
        self._counts: dict[str, int] = {}
        self.formats: set[str] = set()
        self.entries = 0
        self.last_step: float | None = None
        self.total_steps: float | None = None
        self._progress_step: float | None = None
        self._epoch: float | None = None  # epoch on the line being read (HF Trainer logs carry no step)
        self._progress_line = 0
        self._first_low_util: tuple[int, float] | None = None
        self._line: tuple[str | None, str] = (None, "")
        self._dmon_sm: int | None = None  # column of "sm" in an `nvidia-smi dmon` header
        self._csv_util = False  # an `nvidia-smi --query-gpu=utilization.gpu` header was seen
        self.finding_lines: dict[int, tuple[str | None, str]] = {}  # line -> (rank, text) of kept findings
        # Called with (series, value, step, line number, line text) for every point of a series (one rank): lets a
        # watcher follow each series as it streams past without holding it (``assistant.watch``).
        self.on_point: Callable[[str, float, float | None, int, str], None] | None = None
        self._pending: dict[str, list] | None = {} if batch else None  # series -> points waiting for flush()
        self._seq = 0  # stream order of the points fed
        self._waiting = 0  # points in _pending
        self._order: tuple[int, int] = (0, 0)  # (point, check) a finding is made at: sorts those of one flush
        self._deferred: list | None = None  # findings of a flush, kept in stream order once it is done

    # -- parsing ----------------------------------------------------------------------------
    def feed(self, number: int, body: str, rank: str | None = None) -> None:
        """Parse one line (rank prefix already stripped) and update the series."""
        if len(body) > 4000:
            body = body[:4000]
        self._line = (rank, body)
        shape = body.encode("utf-8", "surrogatepass").translate(_BYTE_DIGITS_TO_ZERO)
        program = _PROGRAMS.get(shape)
        if program is None:
            program, cacheable = _compile(body)
            if cacheable and len(_PROGRAMS) < MAX_SHAPES:
                _PROGRAMS[shape] = program
        step = _read(body, program.step) if program.step else None
        if program.total:
            self.total_steps = _read(body, program.total)
        if program.progress:
            self._progress_step, self._progress_line = _read(body, program.progress), number
        if program.formats:
            self.formats.update(program.formats)
        if program.key_value and "megatron" not in self.formats and "tqdm" not in self.formats:
            self.formats.add("key-value")
        values = {name: float(body[source[0]:source[1]]) if source[2] == "f" else _read(body, source)
                  for name, source in program.values}
        if program.util:
            self._gpu_util(number, _read(body, program.util), rank)
        if program.table or self._dmon_sm is not None or self._csv_util:
            self._nvidia_tables(number, body, body.lower(), rank)
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

    def feed_lines(self, lines: Iterable[tuple[int, str, str | None]]) -> None:
        """``feed`` each ``(number, body, rank)`` in order (the one-pass scanner hands over a chunk's metric lines).

        (An inlined copy of ``feed`` for the common case was measured no faster: the per-point work it saved is what
        :meth:`flush` now does in bulk.)"""
        feed = self.feed
        for number, body, rank in lines:
            feed(number, body, rank)

    def _nvidia_tables(self, number: int, body: str, low: str, rank: str | None) -> None:
        # `nvidia-smi dmon` (header "# gpu ... sm mem ...", rows of numbers; the guide's §6 command) and
        # `nvidia-smi --query-gpu=utilization.gpu --format=csv` ("utilization.gpu [%]", rows "23 %").
        stripped = low.strip()
        if stripped.startswith("#"):
            cols = stripped.lstrip("#").split()
            if cols[:1] == ["gpu"]:
                self._dmon_sm = cols.index("sm") if "sm" in cols else None
            return
        if "utilization.gpu" in low:
            self._csv_util = True
            return
        if self._dmon_sm is not None:
            cells = stripped.split()
            if len(cells) > self._dmon_sm and cells[0].isdigit() and cells[self._dmon_sm].isdigit():
                self._gpu_util(number, float(cells[self._dmon_sm]), rank)
                return
        if self._csv_util:
            first = stripped.split(",")[0].strip()
            if first.endswith("%") and first[:-1].strip().isdigit():
                self._gpu_util(number, float(first[:-1]), rank)

    # -- analysis ---------------------------------------------------------------------------
    def _add(self, name: str, value: float, step: float | None, number: int, rank: str | None) -> None:
        s = self.series.get(name)
        if s is None:
            s = self.series[name] = _Series(name, rank)
        if self._pending is not None and self.on_point is None:
            self._seq += 1
            pending = self._pending.get(name)
            if pending is None:
                pending = self._pending[name] = []
            pending.append((value, step, number, rank, self._line, self._epoch, self._seq))
            self._waiting += 1
            if self._waiting >= MAX_WAITING:
                self.flush()
            return
        self._add_point(s, name, value, step, number, rank)

    def _add_point(self, s: _Series, name: str, value: float, step: float | None, number: int,
                   rank: str | None) -> None:
        if not math.isfinite(value):
            self._non_finite(s, name, value, step, number)
        if s.rank != rank:
            return  # other ranks repeat the same series; NaN/inf above is still checked for every rank
        s.points += 1
        if s.first_step is None:
            s.first_step = step
        s.last_step, s.last_value = step, value
        s.sample(step, value, number, self._line)
        if self.on_point is not None:
            self.on_point(name, value, step, number, self._line[1])
        if not math.isfinite(value):
            return
        s.finite += 1
        if name in THROUGHPUT_KEYS or name == "it/s":
            self._check_drop(s, value, step, number, falling=True)
            return
        if name == "step_time":
            self._check_drop(s, value, step, number, falling=False)
            return
        if name == "loss":
            self._check_spike(s, value, step, number)
        elif name == "grad_norm":
            self._check_explosion(s, value, step, number)
        s.window.append(value)

    def _non_finite(self, s: _Series, name: str, value: float, step: float | None, number: int) -> None:
        if name == "loss":
            self._finding("nan-onset", name, step, number, value, None,
                          f"loss is {value} at {self._where(step, s.points)}")
        elif name == "grad_norm" and math.isnan(value):
            # NaN (not inf) gradients mean NaN already reached the weights or the loss — even when
            # the Trainer's logging_nan_inf_filter hides the NaN loss itself.
            self._finding("nan-onset", name, step, number, value, None,
                          f"gradient norm is nan at {self._where(step, s.points)}")
        elif name == "grad_norm":
            self._finding("grad-explosion", name, step, number, value, None,
                          f"gradient norm is {value} at {self._where(step, s.points)}")

    @staticmethod
    def _robust(window: deque) -> tuple[float, float]:
        med = median(window)
        mad = median(abs(x - med) for x in window)
        return med, 1.4826 * mad

    def _check_spike(self, s: _Series, x: float, step: float | None, number: int) -> None:
        if len(s.window) < FEW_POINTS:
            return
        med = median(s.window)
        if x <= med + 6 * 0.02 * abs(med):
            return  # below the smallest possible threshold: skip the MAD
        if len(s.window) < MIN_POINTS and not (med > 0 and x > FEW_POINTS_RATIO * med):
            return
        med, scale = self._robust(s.window)
        floor = max(scale, 0.02 * abs(med), 1e-8)
        z = (x - med) / floor
        # Sudden, not drift: the point must also stand well above the last few points.
        recent = list(s.window)[-3:]
        local = median(recent)
        if z > SPIKE_Z and x > med and (x - local) / floor > SPIKE_Z / 2:
            self._finding("loss-spike", s.name, step, number, x, med,
                          f"loss {x:g} at {self._where(step, s.points)} is {z:.1f} robust deviations above "
                          f"the rolling median {med:g}")
            return
        if len(s.window) < MIN_POINTS:
            return
        # A falling loss widens the window's spread, which hides a spike from the check above; measured
        # against the last few points and the step-to-step noise, the trend no longer matters.
        window = list(s.window)
        noise = 1.4826 * median(abs(b - a) for a, b in zip(window, window[1:]))
        base = median(window[-5:])
        floor = max(noise, 0.02 * abs(base), 1e-8)
        if x > base * (1 + LOCAL_SPIKE_RISE) and (x - base) / floor > LOCAL_SPIKE_Z:
            self._finding("loss-spike", s.name, step, number, x, base,
                          f"loss {x:g} at {self._where(step, s.points)} jumped {x / base - 1:.0%} above the last "
                          f"points ({base:g}), {(x - base) / floor:.0f}× the step-to-step noise")

    def _check_explosion(self, s: _Series, x: float, step: float | None, number: int) -> None:
        self._check_growth(s, x, step, number)
        self._check_jump(s, x, step, number)

    def _check_jump(self, s: _Series, x: float, step: float | None, number: int) -> None:
        if len(s.window) < FEW_POINTS:
            return
        med = median(s.window)
        if x <= EXPLOSION_RATIO * max(med, 1e-8):
            return
        med, scale = self._robust(s.window)
        z = (x - med) / max(scale, 0.02 * abs(med), 1e-8)
        if x > EXPLOSION_RATIO * max(med, 1e-8) and z > SPIKE_Z:
            self._finding("grad-explosion", s.name, step, number, x, med,
                          f"gradient norm {x:g} at {self._where(step, s.points)} is {x / max(med, 1e-12):.0f}× "
                          f"its rolling median {med:g}")

    def _check_growth(self, s: _Series, x: float, step: float | None, number: int) -> None:
        """A steady rise (most of the last GROWTH_RUN steps up, GROWTH_RATIO× the run's first values).

        The rolling-median check misses this: its window already holds the growth. The baseline here
        is the series' first values, so a steady 5 %/step climb is found once it has compounded.
        """
        if len(s.head) < GROWTH_BASE:
            s.head.append(x)
        s.trend.append(x)
        if s.grew or len(s.trend) <= GROWTH_RUN:
            return
        values = list(s.trend)
        rises = sum(b > a for a, b in zip(values, values[1:]))
        base = median(s.head)
        if rises >= GROWTH_RISES and x >= GROWTH_RATIO * max(base, 1e-8):
            s.grew = True
            self._finding("grad-explosion", s.name, step, number, x, base,
                          f"gradient norm has risen in {rises} of the last {GROWTH_RUN} steps, to {x:g} at "
                          f"{self._where(step, s.points)} from {base:g} at the start")

    def _check_drop(self, s: _Series, x: float, step: float | None, number: int, falling: bool) -> None:
        # ``window`` holds the earlier points; ``recent`` the last RECENT ones, which must all be low.
        s.recent.append((x, step, number, self._line))
        if len(s.early) < SHORT_SERIES:
            s.early.append((x, step, number, self._line))
        if len(s.recent) < RECENT or len(s.window) < MIN_POINTS or s.dropped:
            if len(s.recent) == RECENT:
                s.window.append(s.recent[0][0])
            return
        if s.base is None or s.points % 8 == 0:
            s.base = median(s.window)  # the earlier median moves slowly: refresh it every 8 points
        base = s.base
        now = median([r[0] for r in s.recent])
        bad = now < DROP_RATIO * base if falling else now > base / DROP_RATIO
        if bad:
            s.dropped = True
            # Cite the first point of the recent window that is itself below (above) the threshold.
            first = next(r for r in s.recent if (r[0] < DROP_RATIO * base if falling else r[0] > base / DROP_RATIO))
            _, first_step, first_line, first_text = first
            label = "throughput" if falling else "step time"
            self._finding("throughput-drop", s.name, first_step, first_line, now, base,
                          f"{label} ({s.name}) fell from a median of {base:g} to {now:g} from "
                          f"{self._where(first_step, s.points - RECENT)} on" if falling else
                          f"{label} ({s.name}) rose from a median of {base:g} to {now:g} from "
                          f"{self._where(first_step, s.points - RECENT)} on", first_text)
        s.window.append(s.recent[0][0])

    def _gpu_util(self, number: int, value: float, rank: str | None) -> None:
        s = self.series.get("gpu_util")
        if s is None:
            s = self.series["gpu_util"] = _Series("gpu_util", rank)
        s.points += 1
        s.last_value = value
        s.sample(None, value, number, self._line)
        s.window.append(value)
        self.formats.add("nvidia-smi")
        if value < LOW_GPU_UTIL and self._first_low_util is None:
            self._first_low_util = (number, value)
            self.finding_lines[number] = self._line

    # -- bulk analysis ----------------------------------------------------------------------
    # A check's outcome depends on the window of points before it, which the arrays of a flush hold: numpy screens
    # every point at once with a test looser than the check's first (cheapest) rejection, and the check itself runs,
    # unchanged, on the few points that pass, with the series' state set as it was at that point.

    def flush(self) -> None:
        """Analyse the points waiting since the last flush (``report()`` flushes; the one-pass scanner flushes after
        every chunk, so what waits stays bounded)."""
        if not self._pending:
            return
        pending, self._pending, self._waiting = self._pending, {}, 0
        line, epoch = self._line, self._epoch
        self._deferred = []
        try:
            for name, points in pending.items():
                self._flush_series(self.series[name], name, points)
            deferred = sorted(self._deferred, key=lambda d: d[0])  # stream order: the kept five of a kind
        finally:
            self._deferred = None
            self._line, self._epoch = line, epoch
        for _, item in deferred:
            self._keep(*item)

    def _flush_series(self, s: _Series, name: str, points: list) -> None:
        k, n = 0, len(points)
        while k < n and s.finite < WARM:
            self._point(s, name, points[k])
            k += 1
        if n - k >= BULK_FROM:
            self._bulk(s, name, points[k:] if k else points)
        else:
            for point in points[k:]:
                self._point(s, name, point)

    def _point(self, s: _Series, name: str, point: tuple) -> None:
        value, step, number, rank, self._line, self._epoch, seq = point
        self._order = (seq, 0)
        self._add_point(s, name, value, step, number, rank)

    def _at(self, s: _Series, point: tuple, points_after: int, check: int = 0) -> tuple:
        """Set the analyser as it was at ``point`` (after its own count); its value, step and line number."""
        value, step, number, _, self._line, self._epoch, seq = point
        self._order = (seq, check)
        s.points = points_after
        return value, step, number

    def _bulk(self, s: _Series, name: str, points: list) -> None:
        import numpy as np

        n = len(points)
        vals = np.fromiter(map(itemgetter(0), points), float, n)
        ok = np.fromiter(map(eq, map(itemgetter(3), points), repeat(s.rank)), bool, n)
        finite = np.isfinite(vals)
        p0 = s.points
        after = p0 + np.cumsum(ok)  # the series' count after each point (as _where reads it)
        if name in ("loss", "grad_norm"):
            for i in np.flatnonzero(~finite).tolist():  # NaN and inf count on every rank, before the rank test
                value, step, number = self._at(s, points[i], int(after[i]) - int(ok[i]))
                self._non_finite(s, name, value, step, number)
        oks = np.flatnonzero(ok).tolist()
        s.points = p0
        if not oks:
            return
        if s.first_step is None:
            s.first_step = next((points[i][1] for i in oks if points[i][1] is not None), None)
        s.last_step, s.last_value = points[oks[-1]][1], points[oks[-1]][0]
        self._bulk_samples(s, points, oks, p0)
        end = p0 + len(oks)
        fin = np.flatnonzero(ok & finite)
        if len(fin):
            f = vals[fin]
            s.finite += len(fin)
            at = points if len(fin) == n else [points[i] for i in fin.tolist()]
            pts = after[fin].tolist()
            if name in THROUGHPUT_KEYS or name == "it/s" or name == "step_time":
                self._bulk_drop(s, f, at, pts, falling=name != "step_time")
            elif name == "loss":
                self._bulk_spike(s, f, at, pts)
            elif name == "grad_norm":
                self._bulk_explosion(s, f, at, pts)
            else:
                s.window.extend(f[-WINDOW:].tolist())
        s.points = end

    @staticmethod
    def _bulk_samples(s: _Series, points: list, oks: list[int], p0: int) -> None:
        # the points _Series.sample keeps: the j-th of this rank has count p0 + j + 1, kept when p0 + j is a multiple
        # of the stride (which doubles whenever the samples fill up)
        j, m = (-p0) % s.stride, len(oks)
        while j < m:
            value, step, number, _, text, _, _ = points[oks[j]]
            s.samples.append((step if step is not None else float(p0 + j + 1), value, number, text))
            if len(s.samples) >= MAX_SAMPLES:
                s.samples = s.samples[::2]
                s.stride *= 2
            j += 1
            j += (-(p0 + j)) % s.stride

    @staticmethod
    def _history(s: _Series, f):
        import numpy as np

        return np.concatenate((np.fromiter(s.window, float, len(s.window)), f))

    @staticmethod
    def _rolling_median(h, width: int, rows=None):
        import numpy as np
        from numpy.lib.stride_tricks import sliding_window_view

        view = sliding_window_view(h, width)
        return np.median(view if rows is None else view[rows], axis=1)

    def _bulk_spike(self, s: _Series, f, at: list, pts: list) -> None:
        import numpy as np

        h, w = self._history(s, f), len(s.window)  # the window before the k-th new point is h[k : k + w]
        med = self._rolling_median(h, w)[: len(f)]
        loose = np.abs(med) * 0.12 - 1e-9 * (np.abs(med) + np.abs(f))
        for k in np.flatnonzero(f > med + loose).tolist():
            s.window = deque(h[k : k + w].tolist(), maxlen=WINDOW)
            self._check_spike(s, *self._at(s, at[k], pts[k]))
        s.window = deque(h[-WINDOW:].tolist(), maxlen=WINDOW)

    def _bulk_explosion(self, s: _Series, f, at: list, pts: list) -> None:
        import numpy as np

        h, w = self._history(s, f), len(s.window)
        if not s.grew:
            # _check_growth at the k-th new point sees the trend h[i - GROWTH_RUN : i + 1], i = w + k
            up = np.concatenate(([0], np.cumsum(np.diff(h) > 0)))
            i = w + np.arange(len(f))
            rises = up[i] - up[i - GROWTH_RUN]
            floor = GROWTH_RATIO * max(median(s.head), 1e-8) * (1 - 1e-9)
            for k in np.flatnonzero((rises >= GROWTH_RISES) & (f >= floor)).tolist():
                s.trend = deque(h[w + k - GROWTH_RUN : w + k].tolist(), maxlen=GROWTH_RUN + 1)
                self._check_growth(s, *self._at(s, at[k], pts[k]))
                if s.grew:
                    break
        med = self._rolling_median(h, w)[: len(f)]
        for k in np.flatnonzero(f > EXPLOSION_RATIO * np.maximum(med, 1e-8) * (1 - 1e-9)).tolist():
            s.window = deque(h[k : k + w].tolist(), maxlen=WINDOW)
            self._check_jump(s, *self._at(s, at[k], pts[k], 1))
        s.window = deque(h[-WINDOW:].tolist(), maxlen=WINDOW)
        s.trend = deque(h[-(GROWTH_RUN + 1):].tolist(), maxlen=GROWTH_RUN + 1)

    def _bulk_drop(self, s: _Series, f, at: list, pts: list, falling: bool) -> None:
        import numpy as np

        # A rate series' window lags RECENT - 1 points behind: at the k-th new point (i = 54 + k in h) the check sees
        # the window h[k : k + 50] and the recent points h[50 + k : 55 + k]. h[49] is both window[-1] and recent[0].
        old = list(s.recent)
        w, lag = len(s.window), RECENT - 1
        h = np.concatenate((np.fromiter(s.window, float, w), np.fromiter((r[0] for r in old[1:]), float, lag), f))

        def meta(i: int) -> tuple:
            if i < w + lag:
                return old[i - w + 1]
            value, step, number, _, line, _, _ = at[i - w - lag]
            return value, step, number, line

        if not s.dropped:
            n = len(f)
            refresh = np.flatnonzero(np.asarray(pts) % 8 == 0)
            base = np.full(n, s.base, dtype=float)
            if len(refresh):
                medw = self._rolling_median(h, w, refresh)
                last = np.searchsorted(refresh, np.arange(n), side="right") - 1
                base = np.where(last >= 0, medw[np.maximum(last, 0)], base)
            now = self._rolling_median(h[w:], RECENT)[:n]
            slack = 1e-9 * (np.abs(now) + np.abs(base))
            bad = now < DROP_RATIO * base + slack if falling else now > base / DROP_RATIO - slack
            base0, ref = s.base, refresh.tolist()
            for k in np.flatnonzero(bad).tolist():
                s.window = deque(h[k : k + w].tolist(), maxlen=WINDOW)
                s.recent = deque([meta(i) for i in range(w + k, w + lag + k)], maxlen=RECENT)
                j = bisect_left(ref, k)  # the last refresh before this point set the base it is checked against
                s.base = median(h[ref[j - 1] : ref[j - 1] + w].tolist()) if j else base0
                self._check_drop(s, *self._at(s, at[k], pts[k]), falling=falling)
                if s.dropped:
                    break
            if not s.dropped:
                s.base = median(h[ref[-1] : ref[-1] + w].tolist()) if ref else base0
        s.window = deque(h[-(w + lag):-lag].tolist(), maxlen=WINDOW)
        s.recent = deque([meta(i) for i in range(len(h) - RECENT, len(h))], maxlen=RECENT)

    @staticmethod
    def _where(step: float | None, index: int) -> str:
        return f"step {step:g}" if step is not None else f"log entry {index + 1}"

    def _finding(self, kind: str, series: str, step: float | None, number: int, value: float,
                 baseline: float | None, detail: str, text: tuple[str | None, str] | None = None) -> None:
        item = (kind, series, step, number, value, baseline, detail, text or self._line, self._epoch)
        if self._deferred is not None:
            self._deferred.append((self._order, item))
        else:
            self._keep(*item)

    def _keep(self, kind: str, series: str, step: float | None, number: int, value: float, baseline: float | None,
              detail: str, text: tuple[str | None, str], epoch: float | None) -> None:
        n = self._counts.get(kind, 0)
        self._counts[kind] = n + 1
        if n < MAX_FINDINGS_PER_KIND:
            self.finding_lines[number] = text
            self.findings.append(MetricFinding(kind=kind, series=series, step=step, line=number, value=value,
                                               baseline=baseline, detail=detail, epoch=epoch))

    def _short_series_drops(self) -> list[MetricFinding]:
        # Too short for the rolling check (a pasted excerpt): a drop counts if, from some point on,
        # at least two trailing points all stay below DROP_RATIO of the median before that point.
        out: list[MetricFinding] = []
        for s in self.series.values():
            if s.dropped or not s.early or s.points != len(s.early) or s.points < 4:
                continue
            falling = s.name != "step_time"
            values = [p[0] for p in s.early]
            for k in range(2, len(values) - 1):
                base = median(values[:k])
                tail = values[k:]
                bad = all(v < DROP_RATIO * base for v in tail) if falling else all(v > base / DROP_RATIO for v in tail)
                if bad:
                    x, step, line, text = s.early[k]
                    now = median(tail)
                    self.finding_lines[line] = text
                    verb = "fell" if falling else "rose"
                    out.append(MetricFinding(kind="throughput-drop", series=s.name, step=step, line=line, value=now,
                                             baseline=base,
                                             detail=f"{s.name} {verb} from a median of {base:g} to {now:g} from "
                                                    f"{self._where(step, k)} on"))
                    break
        return out

    def _short_series_spikes(self) -> list[MetricFinding]:
        # Too short for the rolling check (a pasted excerpt of a few log entries): a loss point counts as a
        # spike when the other points are steady (within SHORT_SPIKE_RATIO of each other), it stands
        # SHORT_SPIKE_RATIO above all of them, and the point after it comes back down.
        s = self.series.get("loss")
        if s is None or s.points != len(s.samples) or not 4 <= s.points < MIN_POINTS + FEW_POINTS \
                or self._counts.get("loss-spike"):
            return []
        values = [v for _, v, _, _ in s.samples]
        if not all(math.isfinite(v) and v > 0 for v in values):
            return []
        for i in range(1, len(values) - 1):
            x, others = values[i], values[:i] + values[i + 1:]
            base = median(others)
            steady = max(others) <= SHORT_SPIKE_RATIO * min(others)  # a noisy loss (RL, DPO) jumps like this all the time
            if steady and x > SHORT_SPIKE_RATIO * max(others) and values[i + 1] < x / SHORT_SPIKE_RATIO:
                step, _, line, text = s.samples[i]
                step = step if s.first_step is not None else None
                self.finding_lines[line] = text
                return [MetricFinding(kind="loss-spike", series="loss", step=step, line=line, value=x, baseline=base,
                                      detail=f"loss {x:g} at {self._where(step, i)} is {x / base:.1f}× the median of the "
                                             f"other {len(others)} points ({base:g}) and falls back after it",
                                      epoch=self._epoch)]
        return []

    def report(self) -> MetricsReport:
        """Series summaries and findings so far."""
        self.flush()
        findings = list(self.findings) + self._short_series_drops() + self._short_series_spikes()
        s = self.series.get("gpu_util")
        if s and s.window and self._first_low_util is not None:
            med = median(s.window)
            if med < LOW_GPU_UTIL:
                line, value = self._first_low_util
                findings.append(MetricFinding(kind="low-gpu-util", series="gpu_util", step=None, line=line,
                                              value=value, baseline=med,
                                              detail=f"GPU utilisation median {med:g}% over {s.points} reading(s)"))
        summaries = [
            SeriesSummary(name=s.name, points=s.points, first_step=s.first_step, last_step=s.last_step,
                          last_value=s.last_value if s.last_value is None or math.isfinite(s.last_value) else None,
                          median=median(s.window) if s.window else None,
                          samples=[SeriesPoint(step=st, value=v if math.isfinite(v) else None, line=ln)
                                   for st, v, ln, _ in s.samples])
            for s in self.series.values()
        ]
        return MetricsReport(series=summaries, findings=findings, formats=sorted(self.formats),
                             last_step=self.last_step, total_steps=self.total_steps)

    def line_text(self, line: int) -> tuple[str | None, str]:
        """(rank, text) of an input line a finding or a kept sample is on; ``(None, "")`` if not kept."""
        self.flush()
        if line in self.finding_lines:
            return self.finding_lines[line]
        for s in self.series.values():
            for _, _, ln, text in s.samples:
                if ln == line:
                    return text
        return None, ""

    def count(self, kind: str) -> int:
        """How many findings of ``kind`` were seen (including those not kept)."""
        self.flush()
        return self._counts.get(kind, 0)
