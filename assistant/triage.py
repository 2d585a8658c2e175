"""Rule-first triage: the ordered stages that turn a paste or a log into ranked failure modes.

Stages: normalise → scan (signature rules, tree hints, metric lines and error lines in one pass)
→ tracebacks → metrics → candidates → causes (decision tree) → follow-ups. A stage that fails adds
a warning and the next one runs. Input can be a string, bytes, a file (``triage_file``) or any
iterable of byte chunks (``triage_stream``): memory stays bounded whatever the input size.

No torch, chromadb, sentence-transformers or gradio on this path.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import re2

from assistant import fastre
from assistant.causality import Causality, apply_links, load_causality
from assistant.errors import InputError
from assistant.metrics import METRIC_LINE_PATTERN, MetricsAnalyser
from assistant.models import (
    Candidate,
    Evidence,
    FollowUp,
    MetricsReport,
    OutsideHit,
    RankedCause,
    Reading,
    TracebackInfo,
    Triage,
)
from assistant.frames import FrameContext, contexts_hit, load_frames
from assistant.normalise import Chunk, Chunker, decode, display, iter_chunk_lines, language, split_prefix
from assistant.outside import OutsideRule, Vocabulary, load_domain, load_outside, load_trouble, outside_entries
from assistant.signatures import (STRENGTH_CONFIDENCE, Entry, PatternSet, Rule, RuleHit, RuleHits, entries_digest,
                                 load_rules, rule_entries)
from assistant.snapshot import cached, files_under
from assistant.timeline import SPLIT_SKIP, Timeline, describe, describe_mismatch, describe_straggler, section_ranks
from assistant.timeline import build as build_timeline
from assistant.readings import read_numbers
from assistant.tracebacks import KeptLine, extract
from assistant.trends import find_trends
from assistant.tree import (
    Reason,
    TextSignals,
    TreeData,
    check_answers,
    facts_from_analysis,
    facts_from_text,
    follow_ups,
    load_tree,
    parse_answer,
    rank_causes,
    tree_entries,
)

__all__ = ["triage", "triage_file", "triage_stream", "analyse", "Scanner"]

HEAD_LINES = 400  # first lines always kept for structure analysis
TAIL_LINES = 3000  # last lines always kept (the error is usually near the end)
FLAGGED_BYTES = 4 * 1024 * 1024  # cap on error-looking lines kept from the middle
READ_SIZE = 4 * 1024 * 1024

# Lines worth keeping from the middle of a long log: traceback structure and error lines.
KEEP_PATTERN = (
    r"^.*(?:Traceback \(most recent call last\)|File \"|During handling of the above exception"
    r"|The above exception was the direct cause|Error\b|Exception\b|error:|Root Cause|exitcode|error_file"
    r"|(?:time|host|rank|traceback)\s*:|Killed|FAILED|NCCL WARN).*$"
)

# What a stage may meet on odd or hostile input (a number that overflows, a line shaped unlike any the parser
# expects): the stage adds a warning and the next one runs. A broken knowledge base (KnowledgeBaseError) and
# programming errors (TypeError, AttributeError, ...) are deliberately not in this list: they must surface,
# not turn into a quiet "abstained".
STAGE_ERRORS: tuple[type[BaseException], ...] = (ArithmeticError, LookupError, ValueError, RecursionError, re2.error)

METRIC_CONFIDENCE = {
    "nan-onset": ("nan-loss", 0.8, "strong"),
    "grad-explosion": ("gradient-explosion", 0.7, "medium"),
    "loss-spike": ("loss-spike", 0.6, "medium"),
    "throughput-drop": ("slow-training", 0.55, "medium"),
    "low-gpu-util": ("low-gpu-utilization", 0.55, "medium"),
}
# A trend over many steps is stronger evidence than one abnormal point.
TREND_CONFIDENCE = {
    "growth": ("slow-training", 0.75),
    "decline": ("slow-training", 0.75),
    "jump": ("slow-training", 0.75),
    "periodic": ("loss-spike", 0.85),
    "collapse": ("nan-loss", 0.7),
    "precursor": ("gradient-explosion", 0.9),
    "surge": ("gradient-explosion", 0.8),
    "transient": ("loss-spike", 0.85),
    "memory-growth": ("cuda-oom", 0.7),
    "data-wait": ("slow-training", 0.8),
}
# ... and points at a cause: (mode, cause, boost).
TREND_CAUSE = {
    "growth": ("slow-training", "per-step-cost-growth", 0.5),
    "decline": ("slow-training", "per-step-cost-growth", 0.4),
    "periodic": ("loss-spike", "data-distribution-shift", 0.45),
    "collapse": ("nan-loss", "fp16-overflow", 0.4),
    "precursor": ("gradient-explosion", "no-grad-clipping", 0.15),
    "transient": ("loss-spike", "bad-data-batch", 0.35),
    "memory-growth": ("cuda-oom", "step-tensors-kept-alive", 0.75),  # measured growth beats "OOM mid-run" defaults
    "data-wait": ("slow-training", "dataloader-bottleneck", 0.5),
}
_TREND_ZH = {"growth": "持续上升", "decline": "持续下降", "periodic": "周期性尖峰", "collapse": "崩塌", "precursor": "先行增长", "surge": "激增", "transient": "一次性尖峰", "memory-growth": "显存持续增长", "data-wait": "数据等待", "jump": "突变"}
HINT_EVIDENCE = 0.4  # a hint this strong behind the top cause shows its line as evidence
TRIGGER_LOOKBACK = 3  # lines before a spike searched for what triggered it
ROOT_EXCEPTION_BONUS = 0.05  # the rule matched the final exception line of a traceback
MIN_CONFIDENCE = 0.3
MAX_EVIDENCE = 8
DIGEST_CHARS = 20000  # the lines that matter, for case memory and retrieval queries
DIGEST_TAIL = 200


@dataclass(frozen=True)
class _Engine:
    rules: tuple[Rule, ...]
    rules_by_id: dict[str, Rule]
    tree: TreeData
    outside: dict[str, OutsideRule]
    causality: Causality
    patterns: PatternSet
    kinds: tuple[str, ...]  # per entry: "rule", "fact", "hint", "outside", "metric", "keep"
    domain: Vocabulary | None = None  # the training vocabulary (kb/outside.yaml ``domain:``)
    trouble: Vocabulary | None = None  # the words of something going wrong (kb/outside.yaml ``trouble:``)
    frames: tuple[FrameContext, ...] = ()  # where an exception was raised names the failure (kb/frames.yaml)


def engine_for(kb_dir: Path | None = None) -> _Engine:
    """The compiled rules, tree, out-of-domain signatures and causal links of a knowledge base directory."""
    from assistant.config import KB_DIR
    from assistant.signatures import hyperscan_module

    return _engine(Path(kb_dir or KB_DIR).resolve(), hyperscan_module() is not None)


def _load_kb(kb_dir: Path) -> tuple:
    return (load_rules(kb_dir / "rules"), load_tree(kb_dir / "tree.yaml"), load_outside(kb_dir / "outside.yaml"),
            load_causality(kb_dir / "causality.yaml"), load_domain(kb_dir / "outside.yaml"),
            load_trouble(kb_dir / "outside.yaml"), load_frames(kb_dir / "frames.yaml"))


def _build_engine(kb_dir: Path) -> tuple:
    """The loaded knowledge, the scanner's entries and their digest (what the engine snapshot keeps)."""
    kb = _load_kb(kb_dir)
    rules, tree, outside = kb[:3]
    entries: list[Entry] = [
        *rule_entries(rules),
        *tree_entries(tree),
        *outside_entries(outside),
        Entry("metric", METRIC_LINE_PATTERN, max_matches=0),
        Entry("keep", KEEP_PATTERN, case_sensitive=True, max_matches=0),
    ]
    return kb, entries, entries_digest(entries)


@lru_cache(maxsize=4)
def _engine(kb_dir: Path, hyperscan: bool = True) -> _Engine:  # ``hyperscan`` only keys the cache
    # Loading and validating the YAML is most of a fresh process's work: a snapshot keyed by content hash.
    files = files_under(kb_dir, ("rules/*.yaml", "tree.yaml", "outside.yaml", "causality.yaml", "frames.yaml"))
    (rules, tree, outside, causality, domain, trouble, frames), entries, digest = cached(
        "engine", files, lambda: _build_engine(kb_dir))
    kinds = tuple(e.tag.split(":", 1)[0] for e in entries)
    return _Engine(rules, {r.id: r for r in rules}, tree, {r.id: r for r in outside}, causality,
                   PatternSet(entries, digest), kinds, domain, trouble, frames)


@dataclass
class Scanner:
    """Streams chunks through cleanup and the one-pass pattern scan, keeping only bounded state."""

    engine: _Engine = field(default_factory=engine_for)
    chunker: Chunker = field(default_factory=Chunker)
    metrics: MetricsAnalyser = field(default_factory=MetricsAnalyser)
    hits: dict[str, RuleHits] = field(default_factory=dict)
    signals: TextSignals = field(default_factory=TextSignals)
    outside: dict[str, OutsideHit] = field(default_factory=dict)
    head: list[KeptLine] = field(default_factory=list)
    tail: deque = field(default_factory=lambda: deque(maxlen=TAIL_LINES))  # (line number, raw bytes) of the last lines
    flagged: dict[int, KeptLine] = field(default_factory=dict)
    flagged_bytes: int = 0
    flagged_dropped: int = 0
    warnings: list[str] = field(default_factory=list)
    _metric_failed: bool = False

    def feed(self, raw: bytes) -> None:
        """Add raw input bytes."""
        for chunk in self.chunker.feed(raw):
            self._scan(chunk)

    def finish(self) -> None:
        """Flush the last partial line."""
        for chunk in self.chunker.finish():
            self._scan(chunk)

    # -- the one pass -------------------------------------------------------------------------
    def _scan(self, chunk: Chunk) -> None:
        data = chunk.data
        if len(self.head) < HEAD_LINES:
            for number, line in iter_chunk_lines(chunk):
                if len(self.head) >= HEAD_LINES:
                    break
                self.head.append(_kept(number, line))
        tail_pieces = data.rsplit(b"\n", TAIL_LINES + 1)
        last_line = chunk.first_line + data.count(b"\n") - (1 if data.endswith(b"\n") else 0)
        pieces = tail_pieces[-(TAIL_LINES + 1):]
        if data.endswith(b"\n"):
            pieces = pieces[:-1]
        first = last_line - len(pieces) + 1
        for offset, piece in enumerate(pieces):
            self.tail.append((first + offset, piece[:8000]))  # decoded in kept_lines(): most lines fall out unread

        matches: list[tuple[int, int, int]] = []
        kinds = self.engine.kinds
        for idx, spans in self.engine.patterns.spans(data):
            if kinds[idx] == "metric":
                self._metric_lines(chunk, spans)
            else:
                matches.extend((idx, start, end) for start, end in spans)
        matches.sort(key=lambda m: m[1])
        line_no = chunk.first_line
        pos = 0
        line_cache: dict[int, tuple[int, str]] = {}
        for idx, start, end in matches:
            line_no += data.count(b"\n", pos, start)
            pos = start
            ls = data.rfind(b"\n", 0, start) + 1
            cached = line_cache.get(ls)
            if cached is None:
                le = data.find(b"\n", start)
                raw_line = data[ls:] if le < 0 else data[ls:le]
                cached = (line_no, decode(raw_line))
                line_cache[ls] = cached
            number, text = cached
            kind = kinds[idx]
            tag = self.engine.patterns.entries[idx].tag
            if kind == "keep":
                self._flag(number, text)
            elif kind == "rule":
                self._rule_hit(tag[5:], number, text, decode(data[start:end]), data[max(ls, start - 240):start])
            elif kind == "outside":
                self._outside_hit(tag[8:], number, text)
            else:
                self.signals.add(tag, number, text[:4000], self.engine.tree)
        if not self._metric_failed:
            try:
                self.metrics.flush()  # the chunk's metric points, analysed in bulk
            except STAGE_ERRORS as err:
                self._metric_failed = True
                self.warnings.append(f"metrics stage failed after line {line_no}: {err}")

    def _metric_lines(self, chunk: Chunk, spans: list[tuple[int, int]]) -> None:
        """The metric lines of a chunk (their pattern spans whole lines), parsed in one call to the analyser."""
        if self._metric_failed:
            return
        data = chunk.data
        line_no, lines = chunk.first_line, []
        try:
            for number, ls, le in _lines_of(data, spans, chunk.first_line):
                line_no = number
                rank, body = split_prefix(decode(data[ls:le])[:4000])
                lines.append((number, body, rank))
            self.metrics.feed_lines(lines)
        except STAGE_ERRORS as err:  # a failing stage warns and the rest runs
            self._metric_failed = True
            self.warnings.append(f"metrics stage failed in lines {chunk.first_line}-{line_no}: {err}")

    def _flag(self, number: int, text: str) -> None:
        if number in self.flagged:
            return
        if self.flagged_bytes >= FLAGGED_BYTES:
            self.flagged_dropped += 1
            return
        kept = _kept_text(number, text)
        self.flagged[number] = kept
        self.flagged_bytes += len(kept.body)

    def _rule_hit(self, rule_id: str, number: int, text: str, match: str, before: bytes = b"") -> None:
        rule = self.engine.rules_by_id[rule_id]
        hits = self.hits.setdefault(rule_id, RuleHits())
        if hits.first and hits.first[-1].line == number or hits.last and hits.last[-1].line == number:
            return  # several patterns of one rule on one line count once
        line = text[:20000]
        if not rule.line_ok(line) or rule.negated(before.decode("utf-8", "ignore"), match):
            return
        rank, _ = split_prefix(line)
        hits.add(RuleHit(number, display(text), match[:500], rank))

    def _outside_hit(self, rule_id: str, number: int, text: str) -> None:
        if rule_id in self.outside:
            return
        rule = self.engine.outside[rule_id]
        line = text[:20000]
        if rule.line_ok(line):
            self.outside[rule_id] = OutsideHit(id=rule_id, kind=rule.kind, strength=rule.strength, line=number,
                                               text=display(text))

    # -- after the pass ----------------------------------------------------------------------
    def kept_lines(self) -> list[KeptLine]:
        """Head, flagged and tail lines in input order (deduplicated)."""
        by_number: dict[int, KeptLine] = {}
        for line in [*self.head, *self.flagged.values(), *(_kept(n, raw) for n, raw in self.tail)]:
            by_number.setdefault(line.number, line)
        return [by_number[n] for n in sorted(by_number)]


BULK_LINES = 2000  # spans from which a chunk's newlines are indexed with numpy rather than counted span by span


def _lines_of(data: bytes, spans: list[tuple[int, int]], first_line: int) -> list[tuple[int, int, int]]:
    """``(line number, line start, line end)`` of the line each span (in order) starts on."""
    if len(spans) < BULK_LINES:
        out, line_no, pos = [], first_line, 0
        for start, _ in spans:
            line_no += data.count(b"\n", pos, start)
            pos = start
            le = data.find(b"\n", start)
            out.append((line_no, data.rfind(b"\n", 0, start) + 1, len(data) if le < 0 else le))
        return out
    import numpy as np

    newlines = np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == 10)
    starts = np.fromiter((s for s, _ in spans), dtype=np.int64, count=len(spans))
    before = np.searchsorted(newlines, starts)  # newlines before each start: its line's index in the chunk
    bounds = np.append(newlines, len(data))
    line_starts = np.where(before > 0, bounds[np.maximum(before - 1, 0)] + 1, 0)
    return list(zip((before + first_line).tolist(), line_starts.tolist(), bounds[before].tolist()))


def _kept(number: int, raw: bytes) -> KeptLine:
    return _kept_text(number, decode(raw[:8000]))


def _kept_text(number: int, text: str) -> KeptLine:
    rank, body = split_prefix(text[:4000])
    return KeptLine(number, rank, body)


# ----------------------------------------------------------------------------------------------


def triage(text: str | bytes, answers: dict[str, str] | None = None, *, kb_dir: Path | None = None) -> Triage:
    """Diagnose one paste or log: ranked failure modes with evidence lines, causes and follow-ups.

    ``answers`` maps follow-up ids to the user's replies (an option such as ``"bf16"`` or free
    text such as ``"it's bf16 already"``); they override what the text suggested and re-rank causes.
    """
    if isinstance(text, str):
        data = text.encode("utf-8", errors="replace")
    elif isinstance(text, (bytes, bytearray, memoryview)):
        data = bytes(text)
    else:
        raise InputError(f"triage expects text or bytes, got {type(text).__name__}")
    return triage_stream([data], answers, kb_dir=kb_dir)


def triage_file(path: str | Path, answers: dict[str, str] | None = None, *, kb_dir: Path | None = None) -> Triage:
    """Triage a log file, streamed in chunks (bounded memory for any size)."""
    path = Path(path)
    try:
        handle = path.open("rb")
    except FileNotFoundError:
        raise InputError(f"file not found: {path}") from None
    except IsADirectoryError:
        raise InputError(f"{path} is a directory, not a log file") from None
    except PermissionError:
        raise InputError(f"permission denied reading {path}") from None
    with handle:
        return triage_stream(iter(lambda: handle.read(READ_SIZE), b""), answers, kb_dir=kb_dir)


def triage_stream(chunks: Iterable[bytes], answers: dict[str, str] | None = None, *,
                  kb_dir: Path | None = None) -> Triage:
    """Triage input given as an iterable of raw byte chunks (``kb_dir``: another knowledge base)."""
    warnings: list[str] = []
    engine = engine_for(kb_dir)  # a broken rule or tree file is an error (KnowledgeBaseError), never "no match"
    if answers:
        check_answers(engine.tree, answers)  # a typo in an answer is the user's to fix, not a silent no-op
    scanner = Scanner(engine=engine)
    try:
        for raw in chunks:
            scanner.feed(raw)
        scanner.finish()
    except STAGE_ERRORS as err:
        warnings.append(f"scan stage failed: {err}")
    return analyse(scanner, answers, warnings)


def analyse(scanner: Scanner, answers: dict[str, str] | None = None, warnings: list[str] | None = None) -> Triage:
    """The stages after the one-pass scan, on what ``scanner`` holds so far (bounded state; the scanner can go on
    being fed afterwards, which is how ``assistant.watch`` diagnoses a log while it grows)."""
    engine = scanner.engine
    warnings = [*(warnings or []), *scanner.warnings]
    stats = scanner.chunker.stats
    notices = stats.notices()
    if stats.lines == 0 or not stats.raw_bytes:
        notices.append("The input is empty: nothing to diagnose.")
    elif not stats.has_text:
        notices.append("The input contains only whitespace: nothing to diagnose.")
    kept = section_ranks(scanner.kept_lines())
    if stats.lines > len(kept):
        notices.append(
            f"Every one of the {stats.lines:,} lines was scanned for signatures and metrics; "
            f"{len(kept):,} of them (the first {HEAD_LINES}, the last {TAIL_LINES:,} and error-looking lines) "
            "were kept for traceback analysis."
        )
    if scanner.flagged_dropped:
        notices.append(
            f"{scanner.flagged_dropped:,} further error-looking line(s) from the middle of the log were not "
            f"kept (cap {FLAGGED_BYTES // (1024 * 1024)} MiB)."
        )

    tracebacks: list[TracebackInfo] = []
    try:
        tracebacks = extract(kept)
    except STAGE_ERRORS as err:
        warnings.append(f"traceback stage failed: {err}")

    timeline: Timeline | None = None
    try:
        timeline = build_timeline(kept)
    except STAGE_ERRORS as err:
        warnings.append(f"timeline stage failed: {err}")

    metrics: MetricsReport | None = None
    try:
        report = scanner.metrics.report()
        if report.series or report.findings:
            metrics = report
    except STAGE_ERRORS as err:
        warnings.append(f"metrics stage failed: {err}")

    readings: list[Reading] = []
    try:
        if metrics is not None:
            metrics.trends = find_trends(metrics)
            for t in metrics.trends:
                if t.kind == "periodic":
                    _periodic_trigger(t, metrics, kept)
        readings = read_numbers(kept, metrics.total_steps if metrics else None)
    except STAGE_ERRORS as err:
        warnings.append(f"numbers stage failed: {err}")

    candidates: list[Candidate] = []
    boosts: dict[str, dict[str, tuple[float, Reason]]] = {}
    try:
        candidates, boosts = _candidates(engine, scanner, tracebacks, metrics, kept)
        for r in readings:  # the numbers point at a cause: the tree ranks it with the reading as its reason
            why = Reason(r.why_en or r.en, r.why_zh or r.zh)
            if r.confidence > 0:  # decisive numbers (comm timers that grew while compute did not) name the mode
                c = next((c for c in candidates if c.failure_mode == r.modes[0]), None)
                if c is None:
                    c = Candidate(failure_mode=r.modes[0], confidence=r.confidence, route="metrics", evidence=[])
                    candidates.append(c)
                c.confidence = max(c.confidence, r.confidence)
                if r.text and all(e.line != r.line for e in c.evidence):
                    c.evidence.insert(0, Evidence(line=r.line, text=display(r.text), match=r.kind,
                                                  source=f"reading:{r.kind}", strength="strong"))
            for mode, cause in r.causes.items():
                boosts.setdefault(mode, {})[cause] = (r.delta, why)
            for mode, cause in r.against.items():
                boosts.setdefault(mode, {})[cause] = (-r.delta, why)
        if timeline is not None:
            candidates = _apply_timeline(timeline, candidates, boosts)
    except STAGE_ERRORS as err:
        warnings.append(f"candidate stage failed: {err}")

    facts: dict[str, str] = {}
    follow: list[FollowUp] = []
    causes_by_mode: dict[str, list[RankedCause]] = {}
    try:
        facts, candidates, follow, causes_by_mode = _decide(engine, scanner, candidates, boosts, metrics, tracebacks,
                                                            answers or {})
    except STAGE_ERRORS as err:
        warnings.append(f"decision-tree stage failed: {err}")

    routes = sorted({c.route for c in candidates})
    return Triage(
        candidates=candidates,
        follow_up=follow,
        abstained=not candidates,
        metrics=metrics,
        tracebacks=tracebacks[-20:],
        facts=facts,
        notices=notices,
        warnings=warnings,
        routes=routes,
        language=language(stats),
        input_lines=stats.lines,
        outside=sorted(scanner.outside.values(), key=lambda h: h.line),
        digest=_digest(kept, stats.lines),
        timeline=timeline,
        readings=readings,
        causes_by_mode=causes_by_mode,
    )


def _periodic_trigger(t, metrics: MetricsReport, kept: list[KeptLine]) -> None:
    """What happens right before each periodic spike (a shard switch, an evaluation, a save): a non-metric
    line of the same shape within a few lines before at least two spikes is named in the trend."""
    spikes = sorted({f.line for f in metrics.findings if f.kind == "loss-spike"})
    by_number = {k.number: k for k in kept}
    shapes: dict[str, list[KeptLine]] = {}
    for line in spikes:
        seen: set[str] = set()
        for n in range(line - TRIGGER_LOOKBACK, line):
            k = by_number.get(n)
            if k is None or "loss" in k.body.lower() or not k.body.strip():
                continue
            shape = "".join("#" if ch.isdigit() else ch for ch in k.body.strip())
            if shape not in seen:
                seen.add(shape)
                shapes.setdefault(shape, []).append(k)
    best = max(shapes.values(), key=len, default=[])
    if len(best) >= 2:
        k = best[0]
        text = display(k.body.strip())[:200]
        t.en += f" Each spike follows a line like line {k.number}: “{text}”."
        t.zh += f" 每次尖峰之前都有类似第 {k.number} 行的内容：“{text}”。"


def _digest(kept: list[KeptLine], total: int) -> str:
    """The input's text for similarity search: all of a short input; of a long log its start, its
    error-looking lines and its end (the same for a file and for the same text pasted)."""
    if len(kept) >= total:
        lines = [k.body for k in kept]
    else:
        head = [k.body for k in kept[:40]]
        rest = [k.body for k in kept[40:]]
        lines = head + rest[-DIGEST_TAIL:]
    text = "\n".join(lines)
    if len(text) > DIGEST_CHARS:
        half = DIGEST_CHARS // 2
        text = text[:half] + "\n" + text[-half:]
    return text


def _candidates(
    engine: _Engine, scanner: Scanner, tracebacks: list[TracebackInfo], metrics: MetricsReport | None,
    kept: list[KeptLine] = (),
) -> tuple[list[Candidate], dict[str, dict[str, tuple[float, Reason]]]]:
    """One candidate per evidenced mode, and per mode the cause boosts its rules carry."""
    root_lines = {tb.end_line for tb in tracebacks if tb.kind == "python"}
    per_mode: dict[str, dict] = {}
    if engine.frames:
        bodies = {k.number: k.body for k in kept}
        for ctx, tb in contexts_hit(engine.frames, tracebacks):
            text = bodies.get(tb.end_line)
            if not text:
                continue
            slot = per_mode.setdefault(ctx.failure_mode, {"confs": {}, "evidence": [], "route": "rule", "boosts": {}})
            slot["confs"][f"frames:{ctx.id}"] = STRENGTH_CONFIDENCE[ctx.strength]
            slot["evidence"].append(Evidence(line=tb.end_line, text=display(text), match=tb.exc_type or "",
                                             source=f"frames:{ctx.id}", rank=tb.rank, strength=ctx.strength))
    for rule_id, hits in scanner.hits.items():
        kept = hits.kept()
        if not kept:
            continue
        rule = engine.rules_by_id[rule_id]
        conf = rule.confidence
        if any(h.line in root_lines for h in kept):
            conf = min(0.99, conf + ROOT_EXCEPTION_BONUS)
        slot = per_mode.setdefault(rule.failure_mode, {"confs": {}, "evidence": [], "route": "rule", "boosts": {}})
        slot["confs"][f"rule:{rule_id}"] = conf
        slot["route"] = "rule"
        for h in kept:
            slot["evidence"].append(
                Evidence(line=h.line, text=h.text, match=h.match, source=f"rule:{rule_id}", rank=h.rank,
                         strength=rule.strength)
            )
        for cause, boost in rule.causes.items():
            prev = slot["boosts"].get(cause)
            if prev is None or boost > prev[0]:
                slot["boosts"][cause] = (boost, Reason(f"{rule_id} fired at line {kept[0].line}",
                                                      f"规则 {rule_id} 在第 {kept[0].line} 行命中"))
    if metrics is not None:
        for f in metrics.findings:
            mode, conf, strength = METRIC_CONFIDENCE[f.kind]
            slot = per_mode.setdefault(mode, {"confs": {}, "evidence": [], "route": "metrics", "boosts": {}})
            slot["confs"][f"metric:{f.kind}"] = max(conf, slot["confs"].get(f"metric:{f.kind}", 0.0))
            rank, text = scanner.metrics.finding_lines.get(f.line, (None, ""))
            slot["evidence"].append(
                Evidence(line=f.line, text=display(text), match=f"{f.series}={f.value:g}",
                         source=f"metric:{f.kind}", rank=rank, strength=strength)
            )
        for t in metrics.trends:
            mode, conf = TREND_CONFIDENCE[t.kind]
            slot = per_mode.setdefault(mode, {"confs": {}, "evidence": [], "route": "metrics", "boosts": {}})
            slot["confs"][f"trend:{t.kind}"] = max(conf, slot["confs"].get(f"trend:{t.kind}", 0.0))
            if t.kind in TREND_CAUSE:  # a jump names no cause: what changed at that step is for a person to say
                m, cause, boost = TREND_CAUSE[t.kind]
                slot_for = per_mode.setdefault(m, {"confs": {}, "evidence": [], "route": "metrics", "boosts": {}})
                slot_for["boosts"][cause] = (boost, Reason(f"{t.kind} trend of {t.series} from line {t.line}",
                                                           f"第 {t.line} 行起 {t.series} 的{_TREND_ZH[t.kind]}"))
            rank, text = scanner.metrics.line_text(t.line)
            if text:
                slot["evidence"].append(Evidence(line=t.line, text=display(text), match=f"{t.kind} of {t.series}",
                                                 source=f"trend:{t.kind}", rank=rank, strength="strong"))
    out: list[Candidate] = []
    boosts: dict[str, dict[str, tuple[float, Reason]]] = {}
    for mode, slot in per_mode.items():
        # Distinct signals (each rule, each kind of metric finding, counted once however often it
        # fires) combine like independent evidence (noisy-OR); one signal keeps its own level.
        miss = 1.0
        for c in sorted(slot["confs"].values(), reverse=True)[:4]:
            miss *= 1.0 - c
        confidence = min(0.99, 1.0 - miss)
        evidence = _pick_evidence(slot["evidence"])
        out.append(Candidate(failure_mode=mode, confidence=round(confidence, 3), evidence=evidence,
                             causes=[], route=slot["route"]))
        boosts[mode] = slot["boosts"]
    return out, boosts


_CONSEQUENCE_MODES = ("network-timeout", "distributed-sync-failure")
_NETWORK_FAULT = fastre.compile(r"(?i)Got completion from peer .* status=\d+|IBV_WC_\w+_ERR|link (?:is )?down|"
                                r"transport retry counter exceeded|NET/IB.{0,40}(?:error|failed)")
TIMELINE_CONFIDENCE = 0.9
TIMEOUT_AS_CONSEQUENCE = 0.6  # a timeout that followed another rank's failure is kept, lower


def _apply_timeline(tl: Timeline, candidates: list[Candidate],
                    boosts: dict[str, dict[str, tuple[float, Reason]]]) -> list[Candidate]:
    """A rank that failed before the others timed out is the root: its own failure mode when the rules
    recognise its error, else a rank that died while the others waited (``distributed-sync-failure``).
    The timeouts stay as a lower alternative."""
    f = tl.first_failure
    if f is None and tl.mismatch:
        return _apply_mismatch(tl, candidates, boosts)
    if f is None and tl.straggler is not None:
        return _apply_straggler(tl, candidates, boosts)
    if f is None or not any(e.kind == "timeout" for e in tl.consequences):
        return candidates
    first_after = min(e.line for e in tl.consequences)
    note, note_zh = describe(tl, "en"), describe(tl, "zh")
    top = max((c.confidence for c in candidates), default=0.0)
    own = [c for c in candidates if c.failure_mode not in _CONSEQUENCE_MODES
           and any(e.line == f.line or (e.rank == f.rank and e.line < first_after) for e in c.evidence)]
    if own:
        root = max(own, key=lambda c: c.confidence)
    else:
        # The first rank's own error is not a mode the rules know. A network fault (an IB completion error,
        # a link down) makes the network the root, a hardware fault on that node its likeliest cause;
        # anything else is a rank that died while the others waited.
        network = bool(_NETWORK_FAULT.search(f.text))
        mode, cause = ("network-timeout", "network-hardware-fault") if network else ("distributed-sync-failure",
                                                                                      "rank-crashed")
        root = next((c for c in candidates if c.failure_mode == mode), None)
        ev = Evidence(line=f.line, text=display(f.text), match=f.text[:120], source="timeline:first-failure",
                      rank=f.rank, strength="strong")
        if root is None:
            root = Candidate(failure_mode=mode, confidence=TIMELINE_CONFIDENCE, evidence=[ev], route="rule")
            candidates.append(root)
        else:
            root.evidence.insert(0, ev)
        why = (Reason(f"rank {f.rank}'s own failure is a network fault (line {f.line})",
                      f"rank {f.rank} 自身的失败是网络故障（第 {f.line} 行）") if network else
               Reason(f"rank {f.rank} failed first (line {f.line}) and the others timed out after it",
                      f"rank {f.rank} 最先出错（第 {f.line} 行），其余 rank 随后超时"))
        boosts.setdefault(mode, {})[cause] = (0.5 if network else 0.45, why)
    lowered = _CONSEQUENCE_MODES if root.failure_mode == "network-timeout" else ("network-timeout",)
    for c in candidates:
        if c.failure_mode in lowered and c is not root:
            c.confidence = round(c.confidence * TIMEOUT_AS_CONSEQUENCE, 3)
    root.confidence = round(min(0.99, max(root.confidence, top + 0.01, TIMELINE_CONFIDENCE)), 3)
    root.note, root.note_zh = note, note_zh
    for c in candidates:
        if c is not root and c.failure_mode in _CONSEQUENCE_MODES and c.failure_mode not in root.root_of:
            root.root_of.append(c.failure_mode)
    return candidates


def _apply_straggler(tl: Timeline, candidates: list[Candidate],
                     boosts: dict[str, dict[str, tuple[float, Reason]]]) -> list[Candidate]:
    """Every rank but one timed out in the same collective, and that one was busy with its own work: the
    timeout is a slow step on that rank, not the network."""
    s = tl.straggler
    root = next((c for c in candidates if c.failure_mode == "network-timeout"), None)
    if root is None:
        return candidates
    root.evidence.insert(0, Evidence(line=s.line, text=display(s.text), match=s.text[:120], source="timeline:straggler",
                                     rank=s.rank, strength="strong"))
    root.note, root.note_zh = describe_straggler(tl, "en"), describe_straggler(tl, "zh")
    boosts.setdefault("network-timeout", {})["collective-timeout-too-short"] = (
        0.3, Reason(f"rank {s.rank} was still busy (line {s.line}) while the others timed out",
                    f"其他 rank 超时时 rank {s.rank} 还在忙（第 {s.line} 行）"))
    return candidates


def _apply_mismatch(tl: Timeline, candidates: list[Candidate],
                    boosts: dict[str, dict[str, tuple[float, Reason]]]) -> list[Candidate]:
    """Ranks that time out in different collectives ran different code paths: a synchronisation failure
    (divergent control flow), with the timeouts as its consequence."""
    evidence = [Evidence(line=e.line, text=display(e.text), match=e.text[:120], source="timeline:collective-mismatch",
                         rank=e.rank, strength="strong") for e in tl.mismatch]
    if tl.divergence is not None:
        d = tl.divergence
        evidence.insert(0, Evidence(line=d.line, text=display(d.text), match=d.text[:120], source="timeline:divergence",
                                    rank=d.rank, strength="strong"))
    top = max((c.confidence for c in candidates), default=0.0)
    root = next((c for c in candidates if c.failure_mode == "distributed-sync-failure"), None)
    if root is None:
        root = Candidate(failure_mode="distributed-sync-failure", confidence=TIMELINE_CONFIDENCE, evidence=[],
                         route="rule")
        candidates.append(root)
    root.evidence = evidence + root.evidence
    root.confidence = round(min(0.99, max(root.confidence, top + 0.01, TIMELINE_CONFIDENCE)), 3)
    root.note, root.note_zh = describe_mismatch(tl, "en"), describe_mismatch(tl, "zh")
    boosts.setdefault("distributed-sync-failure", {})["divergent-control-flow"] = (
        0.5, Reason("the ranks wait in different collectives", "各 rank 等待的是不同的集合通信"))
    d = tl.divergence
    if d is not None and SPLIT_SKIP.search(d.text):
        boosts["distributed-sync-failure"]["rank-local-skip"] = (
            0.8, Reason(f"rank {d.rank} skipped on its own (line {d.line}) before the ranks fell out of step",
                        f"rank {d.rank} 自己跳过了一步（第 {d.line} 行），之后各 rank 才错位"))
    for c in candidates:
        if c.failure_mode == "network-timeout":
            c.confidence = round(c.confidence * TIMEOUT_AS_CONSEQUENCE, 3)
            if "network-timeout" not in root.root_of:
                root.root_of.append("network-timeout")
    return candidates


def _pick_evidence(evidence: list[Evidence]) -> list[Evidence]:
    """Strongest first, then by line; one per line; at most MAX_EVIDENCE."""
    order = {"strong": 0, "medium": 1, "weak": 2}
    seen: set[int] = set()
    out: list[Evidence] = []
    for e in sorted(evidence, key=lambda e: (order[e.strength], e.line)):
        key = e.line
        if key in seen:
            continue
        seen.add(key)
        out.append(e)
        if len(out) >= MAX_EVIDENCE:
            break
    return out


def _decide(
    engine: _Engine,
    scanner: Scanner,
    candidates: list[Candidate],
    boosts: dict[str, dict[str, tuple[float, Reason]]],
    metrics: MetricsReport | None,
    tracebacks: list[TracebackInfo],
    answers: dict[str, str],
):
    tree = engine.tree
    by_mode: dict[str, list[RankedCause]] = {}
    facts, reasons = facts_from_text(tree, scanner.signals)
    derived, derived_reasons = facts_from_analysis(metrics, tracebacks)
    for k, v in derived.items():  # analysis of the log beats loose text mentions
        facts[k], reasons[k] = v, derived_reasons[k]
    for fid, reply in answers.items():
        value = parse_answer(fid, reply, tree)
        if value is not None:
            facts[fid], reasons[fid] = value, Reason(f"you answered {reply!r}", f"你的回答是 {reply!r}")

    for link, cause, effect in apply_links(engine.causality, candidates):
        cause.root_of.append(effect.failure_mode)
        if not cause.note:
            cause.note, cause.note_zh = link.why, link.why_zh
        if link.effect_cause:
            boosts.setdefault(effect.failure_mode, {})[link.effect_cause] = (
                0.2, Reason(f"{cause.failure_mode} evidenced: {link.why}", f"已有 {cause.failure_mode} 的证据：{link.why_zh}"))

    for mode in tree.modes:
        by_mode[mode] = rank_causes(tree, mode, facts, reasons, scanner.signals, boosts.get(mode, {}))
    for c in candidates:
        c.causes = by_mode[c.failure_mode]
        _hint_evidence(c, tree, scanner.signals)
    candidates = [c for c in candidates if c.confidence >= MIN_CONFIDENCE]
    candidates.sort(key=lambda c: (-c.confidence, c.failure_mode))
    top = [c.failure_mode for c in candidates[:2]]
    questions = follow_ups(tree, top, facts)
    return facts, candidates, questions, by_mode




def _hint_evidence(c: Candidate, tree, signals) -> None:
    """The line behind a strong hint for the candidate's top cause proves that cause: it joins the evidence."""
    if not c.causes:
        return
    top = c.causes[0].cause_id
    have = {e.line for e in c.evidence}
    for i, h in enumerate(tree.modes[c.failure_mode].hints if c.failure_mode in tree.modes else []):
        line = signals.first_line.get(f"hint:{c.failure_mode}:{i}")
        if h.cause != top or h.delta < HINT_EVIDENCE or line is None or line in have:
            continue
        rank, body = split_prefix(signals.line_text.get(line, ""))
        if body:
            c.evidence.append(Evidence(line=line, text=display(body.strip()), match=h.reason, source=f"hint:{top}",
                                       rank=rank, strength="strong"))
            have.add(line)
