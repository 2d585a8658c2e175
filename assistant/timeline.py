"""Timeline of a multi-process failure: which rank failed first, and which failures followed from it.

In a distributed job one rank usually dies (an exception, a CUDA error, the OOM killer) and every
other rank then waits in a collective until its watchdog fires, or is torn down by the launcher.
The last lines of the log are those consequences; torchrun's "Root Cause (first observed failure)"
is only the first failure the *launcher observed*, often a rank killed by the watchdog. This module
orders the ranks' first errors by their timestamps (glog ``E1130 02:41:07``, ISO ``2026-11-30
02:11:05``, elastic's ``time : 2026-11-30_02:41:09``) or, without them, by line, and separates the
first real failure from the timeouts and tear-downs it caused.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field

from assistant import fastre

if TYPE_CHECKING:  # tracebacks imports the models, which hold a Timeline
    from assistant.tracebacks import KeptLine

EventKind = Literal["error", "timeout", "collateral", "busy"]  # busy: a rank still at work while others time out

# glog-style prefix of torch C++ messages: E1130 02:41:07.901000 (no year)
_GLOG = fastre.compile(r"\b[EWIF](\d{2})(\d{2}) (\d{2}):(\d{2}):(\d{2})(?:\.\d+)?\b")
# 2026-11-30 02:11:05,118 / 2026-11-30T02:11:05 / 2026-11-30_02:41:09 (elastic's failure table)
_ISO = fastre.compile(r"\b(\d{4})-(\d{2})-(\d{2})[ T_](\d{2}):(\d{2}):(\d{2})")
_TIMEOUT = fastre.compile(
    r"(?i)watchdog caught collective operation timeout|collective operation timeout|timed out|"
    r"before timing out|heartbeat monitor|DistNetworkError|socket timeout|timeout after"
)
# Errors that follow another rank's failure: aborts, tear-downs, "the other side closed".
_COLLATERAL = fastre.compile(
    r"(?i)NCCL communicator was aborted|taking the entire process down|Some NCCL operations have failed|"
    r"Sending process \d+ closing signal|SIGTERM|received signal 15|Terminated|connection reset by peer|"
    r"Connection closed by peer|ChildFailedError|ProcessGroupNCCL.*(?:abort|Aborting)|"
    r"failed to recv|recvBytes|Broken pipe|Socket Timeout|Exception raised from|"
    r"ncclRemoteError|remote process exited"
)
_ERROR = fastre.compile(
    r"(?:^|[^A-Za-z])(?:[A-Z][A-Za-z]*(?:Error|Exception)\b|CUDA error|out of memory|Out of memory|"
    r"Killed process|oom-kill|Segmentation fault|SIGSEGV|SIGKILL|SIGBUS|Bus error|core dumped|"
    r"device-side assert|illegal memory access|NaN or Inf found|Assertion .* failed|NCCL error|"
    r"ncclSystemError|ncclInternalError|unhandled system error|watchdog thread terminated with exception|"
    r"Got completion from peer .* status=\d+|IBV_WC_\w+_ERR)"
)
_NOT_ERROR = fastre.compile(r"(?i)might be asynchronously reported|UserWarning|FutureWarning|DeprecationWarning|"
                            r"^\s*(?:File \"|raise |warnings\.warn)")
_FIELD = fastre.compile(r"^\s*(time|host|rank|exitcode)\s*:\s*(.*?)\s*$")
_ENTRY = fastre.compile(r"^\s*\[\d+\]:\s*$")
_ROOT = fastre.compile(r"Root Cause \(first observed failure\)")
_WORK = fastre.compile(r"SeqNum=(\d+), OpType=(\w+)(?:, NumelIn=(\d+))?")
NEXT_STAMP_LINES = 40  # an unstamped error is dated by its rank's next stamp at most this many lines later
_RANKNUM = fastre.compile(r"^(\d+)")
# A header that starts one rank's part of a paste: "=== node-8: logs/rank13.log (tail) ===", "==> rank_3.out <==",
# "--- rank 5 ---". Unprefixed lines after it belong to that rank until the next header.
_HEADER = fastre.compile(r"^\s*(?:={2,}>?|-{3,}|#{2,}|\*{3,})\s*(.*?)\s*(?:<?={2,}|-{3,}|#{2,}|\*{3,})?\s*$")
# Lines that continue a message of the line above (printed without the rank prefix).
_CONTINUATION = fastre.compile(r"^(?:\s+\S|Last error:|NET/|nccl[A-Z]\w*Error|Exception raised from|frame #\d+)")
_HEADER_RANK = fastre.compile(r"(?i)\brank[ _-]?(\d{1,5})\b")
_EXITNUM = fastre.compile(r"^(-?\d+)")

# exit codes of ranks torn down by others: SIGABRT from the NCCL watchdog, SIGTERM from the launcher
_COLLATERAL_EXIT = {-6, -15, 143, 134}


class RankEvent(BaseModel):
    """The first failure of one kind seen on one rank."""

    model_config = ConfigDict(extra="forbid")
    rank: str
    line: int = Field(ge=1)
    kind: EventKind
    text: str
    time: str | None = Field(default=None, description="timestamp as written in the input")
    seconds: float | None = Field(default=None, description="sortable time (no year), when there is one")
    exitcode: int | None = None


class Timeline(BaseModel):
    """First failing rank and the failures that followed it (only built when several ranks report)."""

    model_config = ConfigDict(extra="forbid")
    events: list[RankEvent] = Field(default=[], description="first event per rank and kind, in time order")
    first_failure: RankEvent | None = None
    consequences: list[RankEvent] = Field(default=[], description="timeouts and tear-downs on other ranks after it")
    launcher_root: str | None = Field(default=None, description="the rank torchrun's summary calls the root cause")
    gap_seconds: float | None = Field(default=None, description="from the first failure to the first timeout")
    mismatch: list[RankEvent] = Field(
        default=[], description="timeouts of ranks that disagree on the collective (SeqNum, op or size): one per variant")
    divergence: RankEvent | None = Field(
        default=None, description="on a mismatch: the odd rank's own line saying where its path split off (a skipped batch…)")
    straggler: RankEvent | None = Field(
        default=None, description="a rank that never timed out while the others waited in one collective: its last line")

    @property
    def ranks(self) -> list[str]:
        return sorted({e.rank for e in self.events}, key=_rank_key)


def _rank_key(r: str) -> tuple[int, str]:
    return (int(r), "") if r.isdigit() else (10**9, r)


def _time(text: str) -> tuple[str | None, float | None]:
    m = _ISO.search(text)
    if m:
        _y, mo, d, h, mi, s = (int(g) for g in m.groups())
        return m.group(0), ((mo * 31 + d) * 24 + h) * 3600 + mi * 60 + s
    m = _GLOG.search(text)
    if m:
        mo, d, h, mi, s = (int(g) for g in m.groups())
        return f"{mo:02d}-{d:02d} {h:02d}:{mi:02d}:{s:02d}", ((mo * 31 + d) * 24 + h) * 3600 + mi * 60 + s
    return None, None


def classify(body: str) -> EventKind | None:
    """What a line says about its rank: an error, a timeout, a consequence of another failure, or nothing."""
    if _TIMEOUT.search(body):
        return "timeout"
    if _COLLATERAL.search(body):
        return "collateral"
    if _ERROR.search(body) and not _NOT_ERROR.search(body):
        return "error"
    return None


def _table_events(lines: list[KeptLine]) -> tuple[list[RankEvent], str | None]:
    """Entries of torchrun's failure table (``Failures:`` and ``Root Cause``): rank, time, exit code."""
    events: list[RankEvent] = []
    root: str | None = None
    in_root = False
    entry: dict[str, str] = {}
    entry_line = 0

    def close() -> None:
        nonlocal root
        if "rank" not in entry:
            return
        rm = _RANKNUM.search(entry["rank"])
        if rm is None:
            return
        em = _EXITNUM.search(entry.get("exitcode", ""))
        code = int(em.group(1)) if em else None
        when = entry.get("time")
        _, seconds = _time(when or "")
        kind: EventKind = "collateral" if code in _COLLATERAL_EXIT else "error"
        events.append(RankEvent(rank=rm.group(1), line=entry_line, kind=kind, text=f"exitcode {entry.get('exitcode', '?')}",
                                time=when, seconds=seconds, exitcode=code))
        if in_root and root is None:
            root = rm.group(1)

    for kl in lines:
        body = kl.body
        if _ROOT.search(body):
            close()
            entry, in_root = {}, True
            continue
        if _ENTRY.search(body):
            close()
            entry, entry_line = {}, kl.number
            continue
        m = _FIELD.search(body)
        if m and entry_line:
            entry.setdefault(m.group(1), m.group(2))
    close()
    return events, root


def section_ranks(kept: list[KeptLine]) -> list[KeptLine]:
    """Give unprefixed lines the rank of the section header above them (one log file per rank, pasted
    one after another); lines with their own rank prefix, and lines before any header, stay as they are."""
    from assistant.tracebacks import KeptLine as _Kept  # runtime import: tracebacks imports this module's users

    out: list[KeptLine] = []
    current: str | None = None
    prev: KeptLine | None = None
    for k in kept:
        m = _HEADER.match(k.body) if k.rank is None else None
        if m is not None and m.group(1):
            r = _HEADER_RANK.search(m.group(1))
            current = r.group(1) if r else None
            out.append(k)
            prev = k
            continue
        if k.rank is None and current is not None:
            k = _Kept(k.number, current, k.body)
        elif (k.rank is None and prev is not None and prev.rank is not None and k.number == prev.number + 1
              and _CONTINUATION.match(k.body)):
            k = _Kept(k.number, prev.rank, k.body)  # the rest of a multi-line message printed by that rank
        out.append(k)
        prev = k
    return out


def build(lines: list[KeptLine]) -> Timeline | None:
    """The timeline of ``lines``, or ``None`` when fewer than two ranks report anything."""
    first: dict[tuple[str, str], RankEvent] = {}
    last_time: dict[str, tuple[str | None, float | None]] = {}
    stamps: dict[str, list[tuple[int, str, float]]] = {}  # rank -> (line, time, seconds) of its stamped lines
    for kl in lines:
        if kl.rank is None or len(kl.body) > 4000:
            continue
        when, seconds = _time(kl.body)
        if seconds is None:  # a line without a stamp happened at (or after) the rank's last stamp
            when, seconds = last_time.get(kl.rank, (None, None))
        else:
            last_time[kl.rank] = (when, seconds)
            stamps.setdefault(kl.rank, []).append((kl.number, when, seconds))
        kind = classify(kl.body)
        if kind is None:
            continue
        key = (kl.rank, kind)
        if key in first:
            continue
        first[key] = RankEvent(rank=kl.rank, line=kl.number, kind=kind, text=kl.body.strip()[:300], time=when,
                               seconds=seconds)
    for key, ev in first.items():
        if ev.seconds is None:  # a traceback before the rank's first stamp: the next stamp, a few lines on, dates it
            nxt = next(((w, sec) for n, w, sec in stamps.get(ev.rank, []) if ev.line < n <= ev.line + NEXT_STAMP_LINES),
                       None)
            if nxt is not None:
                first[key] = ev.model_copy(update={"time": nxt[0], "seconds": nxt[1]})
    table, root = _table_events(lines)
    for ev in table:  # the launcher's table fills in ranks whose own output was not captured
        key = (ev.rank, ev.kind)
        if key not in first:
            first[key] = ev
    events = list(first.values())
    if len({e.rank for e in events}) < 2:
        return None
    timed = all(e.seconds is not None for e in events)
    events.sort(key=lambda e: (e.seconds, e.line) if timed else (e.line, 0))
    errors = [e for e in events if e.kind == "error"]
    failure = errors[0] if errors else None
    consequences: list[RankEvent] = []
    gap = None
    if failure is not None:
        after = events[events.index(failure) + 1:]
        consequences = [e for e in after if e.rank != failure.rank and e.kind in ("timeout", "collateral")]
        timeouts = [e for e in consequences if e.kind == "timeout" and e.seconds is not None]
        if timeouts and failure.seconds is not None:
            gap = timeouts[0].seconds - failure.seconds
    mismatch = collective_mismatch(events)
    straggler = _straggler(lines, events) if failure is None and not mismatch else None
    return Timeline(mismatch=mismatch, events=events, first_failure=failure, consequences=consequences, launcher_root=root,
                    gap_seconds=gap, divergence=_divergence(lines, mismatch, events), straggler=straggler)


def _straggler(lines: list[KeptLine], events: list[RankEvent]) -> RankEvent | None:
    """The one rank that printed output but never timed out while every other rank timed out in the same
    collective: it is still busy elsewhere (its own evaluation, a save), and its last line says with what."""
    timeouts = [e for e in events if e.kind == "timeout"]
    works = {w.groups() for e in timeouts if (w := _WORK.search(e.text))}
    if len(timeouts) < 2 or len(works) != 1:
        return None
    reported = {e.rank for e in events}
    quiet = {k.rank for k in lines if k.rank is not None and k.rank not in reported}
    if len(quiet) != 1:
        return None
    last = max((k for k in lines if k.rank in quiet and len(k.body) < 2000), key=lambda k: k.number)
    when, seconds = _time(last.body)
    return RankEvent(rank=last.rank, line=last.number, kind="busy", text=last.body.strip()[:300], time=when,
                     seconds=seconds)


def describe_straggler(tl: Timeline, lang: str = "en") -> str | None:
    """One sentence: which rank kept the others waiting, and what it was doing."""
    s = tl.straggler
    if s is None:
        return None
    waiting = [e for e in tl.events if e.kind == "timeout"]
    w = _WORK.search(waiting[0].text)
    coll = f"SeqNum={w.group(1)} {w.group(2)}" if w else "the same collective"
    if lang == "zh":
        return (f"rank {_ranks(waiting)} 都在 {coll} 里等到超时，只有 rank {s.rank} 没有超时：它还在忙自己的事，最后一行输出是"
                f"（第 {s.line} 行）“{s.text[:160]}”。这是只在 rank {s.rank} 上做、且比超时还长的工作，不是网络问题。")
    return (f"Ranks {_ranks(waiting)} all timed out waiting in {coll}; rank {s.rank} never did — it was still busy, its last "
            f"line (line {s.line}) reads “{s.text[:160]}”. Work done on rank {s.rank} alone outlasted the collective "
            "timeout; this is not a network problem.")


# what a rank says when it leaves the common path: a skipped batch first, then an early exit or its own evaluation
SPLIT_SKIP = fastre.compile(r"(?i)\bskip(?:ping|ped|s)?\b.{0,40}\b(?:batch|step|sample|iteration|micro.?batch)")
_SPLIT_OTHER = fastre.compile(r"(?i)StopIteration|\bexhausted\b|early.?stop|\bbreak(?:ing)?\b.{0,20}\bloop|running eval|\bevaluat")


def _divergence(lines: list[KeptLine], mismatch: list[RankEvent], events: list[RankEvent]) -> RankEvent | None:
    """The odd rank's line (before its timeout) that says where its code path split from the others'."""
    if not mismatch:
        return None
    odd = mismatch[0]
    m = _WORK.search(odd.text)
    ranks = {e.rank for e in events if e.kind == "timeout" and (w := _WORK.search(e.text)) and w.groups() == m.groups()}
    before = [k for k in lines if k.rank in ranks and k.number < odd.line and len(k.body) < 2000]
    for pattern in (SPLIT_SKIP, _SPLIT_OTHER):
        hit = next((k for k in before if pattern.search(k.body)), None)
        if hit is not None:
            when, seconds = _time(hit.body)
            return RankEvent(rank=hit.rank, line=hit.number, kind="error", text=hit.body.strip()[:300], time=when,
                             seconds=seconds)
    return None


def _ranks(events: list[RankEvent]) -> str:
    ranks = sorted({e.rank for e in events}, key=_rank_key)
    return ", ".join(ranks[:6]) + (f" and {len(ranks) - 6} more" if len(ranks) > 6 else "")


def _duration(seconds: float) -> str:
    if seconds >= 120:
        return f"{seconds / 60:.0f} min"
    return f"{seconds:.0f} s"


def collective_mismatch(events: list[RankEvent]) -> list[RankEvent]:
    """Timeouts whose ranks wait in different collectives (another SeqNum, op or size): one event per
    variant, the odd one(s) first. Ranks that agree on one collective point at a slow or dead peer or the
    network; ranks that disagree ran different code paths."""
    variants: dict[tuple[str, str, str], list[RankEvent]] = {}
    for e in events:
        if e.kind != "timeout":
            continue
        m = _WORK.search(e.text)
        if m:
            variants.setdefault((m.group(1), m.group(2), m.group(3) or ""), []).append(e)
    if len(variants) < 2 or len({r.rank for v in variants.values() for r in v}) < 2:
        return []
    return [v[0] for v in sorted(variants.values(), key=len)]


def describe_mismatch(tl: Timeline, lang: str = "en") -> str | None:
    """One sentence naming which ranks wait in which collective."""
    if not tl.mismatch:
        return None
    parts = []
    for e in tl.mismatch:
        m = _WORK.search(e.text)
        ranks = [x.rank for x in tl.events if x.kind == "timeout" and _WORK.search(x.text)
                 and _WORK.search(x.text).groups() == m.groups()]
        size = f", {m.group(3)} element{'s' if m.group(3) != '1' else ''}" if m.group(3) else ""
        parts.append(f"rank {_ranks_of(ranks)} in SeqNum={m.group(1)} {m.group(2)}{size}")
    d = tl.divergence
    if lang == "zh":
        split = (f"rank {d.rank} 在第 {d.line} 行自己记录了分岔点：“{d.text[:160]}”——只在一个 rank 上跳过或多做一步，"
                 "它之后的集合通信就和其他 rank 错位了。") if d else ""
        return ("各 rank 等待的不是同一个集合通信：" + "；".join(parts)
                + "。它们走了不同的代码路径（某个 rank 跳过或多做了一次集合通信），不是网络问题。" + split)
    split = (f" Rank {d.rank} said where its path split off, at line {d.line}: “{d.text[:160]}” — a step skipped (or "
             "added) on one rank only puts its later collectives out of step with the others'.") if d else ""
    return ("The ranks wait in different collectives: " + "; ".join(parts)
            + ". They ran different code paths (a rank skipped or added a collective); this is not a network problem."
            + split)


def _ranks_of(ranks: list[str]) -> str:
    ordered = sorted(set(ranks), key=_rank_key)
    return ", ".join(ordered[:6]) + (f" (+{len(ordered) - 6})" if len(ordered) > 6 else "")


def describe(tl: Timeline, lang: str = "en") -> str | None:
    """One or two sentences: which rank failed first, what followed, and whether the launcher's root is it."""
    f = tl.first_failure
    if f is None:
        return None
    at = f" {f.time}" if f.time else ""
    timeouts = [e for e in tl.consequences if e.kind == "timeout"]
    torn = [e for e in tl.consequences if e.kind == "collateral" and e.rank not in {t.rank for t in timeouts}]
    if lang == "zh":
        out = f"rank {f.rank} 最先出错（第 {f.line} 行{('，' + f.time) if f.time else ''}）"
        if timeouts:
            later = f"{_duration(tl.gap_seconds)}后" if tl.gap_seconds else "随后"
        if timeouts[0].time:
            later += f"（{timeouts[0].time}）"
            out += f"；rank {_ranks(timeouts)} {later}才超时，这些超时是结果而不是原因"
        if torn:
            out += f"；rank {_ranks(torn)} 是被连带终止的"
        if tl.launcher_root is not None and tl.launcher_root != f.rank:
            out += f"。torchrun 的 “Root Cause” 写的是 rank {tl.launcher_root}，那只是启动器最先观察到的失败，不是最早的失败"
        return out + "。"
    out = f"rank {f.rank} failed first (line {f.line}{',' + at if at else ''})"
    if timeouts:
        later = f"{_duration(tl.gap_seconds)} later" if tl.gap_seconds else "afterwards"
        if timeouts[0].time:
            later += f" (at {timeouts[0].time})"
        out += (f"; rank{'s' if len({e.rank for e in timeouts}) > 1 else ''} {_ranks(timeouts)} timed out {later} — "
                "consequences of that failure, not its cause")
    if torn:
        out += f"; rank{'s' if len({e.rank for e in torn}) > 1 else ''} {_ranks(torn)} were torn down after it"
    if tl.launcher_root is not None and tl.launcher_root != f.rank:
        out += (f". torchrun's 'Root Cause' names rank {tl.launcher_root}: that is only the first failure the "
                "launcher observed, not the first failure")
    return out + "."
