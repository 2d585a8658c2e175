"""Python tracebacks (with chained exceptions) and torchrun failure summaries, per rank.

Input is the list of kept lines (original line number, rank, text with the rank prefix stripped).
Lines of different ranks are separated first, so interleaved multi-rank output yields one
traceback per rank. Only RE2 is used on the text.
"""

from __future__ import annotations

from dataclasses import dataclass

from assistant import fastre
from assistant.models import Frame, TracebackInfo

_TB_START = fastre.compile(r"^\s*Traceback \(most recent call last\):")
_FRAME = fastre.compile(r'^\s*File "([^"]+)", line (\d+)(?:, in (.+))?$')
_CHAIN = fastre.compile(
    r"^\s*(During handling of the above exception, another exception occurred|"
    r"The above exception was the direct cause of the following exception):?\s*$"
)
_EXC = fastre.compile(r"^([A-Za-z_][\w.]*)(?::\s?(.*))?$")
_ROOT_CAUSE = fastre.compile(r"Root Cause \(first observed failure\)")
_FIELD = fastre.compile(r"^\s*([a-z_ ]+?)\s*:\s*(.*)$")
_EXIT = fastre.compile(r"^(-?\d+)")
_SIGNAL = fastre.compile(r"Signal (\d+) \((SIG[A-Z0-9]+)\)")
_RANK = fastre.compile(r"^(\d+)")
_RULE = fastre.compile(r"^\s*=+\s*$")

SIGNALS = {1: "SIGHUP", 2: "SIGINT", 6: "SIGABRT", 7: "SIGBUS", 9: "SIGKILL", 11: "SIGSEGV", 15: "SIGTERM"}


@dataclass(slots=True)
class KeptLine:
    """A line kept for structure analysis: original number, rank (if prefixed), prefix-stripped text."""

    number: int
    rank: str | None
    body: str


def extract(lines: list[KeptLine]) -> list[TracebackInfo]:
    """All tracebacks and torchrun summaries in ``lines`` (ordered by where they end)."""
    by_rank: dict[str | None, list[KeptLine]] = {}
    for line in lines:
        by_rank.setdefault(line.rank, []).append(line)
    out: list[TracebackInfo] = []
    for rank, rank_lines in by_rank.items():
        out.extend(_python_tracebacks(rank, rank_lines))
        out.extend(_torchrun_summaries(rank, rank_lines))
    out.sort(key=lambda t: (t.end_line, t.start_line))
    return out


def _python_tracebacks(rank: str | None, lines: list[KeptLine]) -> list[TracebackInfo]:
    out: list[TracebackInfo] = []
    chain: list[str] = []
    chain_start: int | None = None
    start: int | None = None
    frames: list[Frame] = []
    in_frames = False
    expect_chain = False
    for line in lines:
        body = line.body
        header = bool(_TB_START.search(body))
        m = None if header else _FRAME.search(body)
        # A traceback starts at its header, or at its first frame when it was pasted without one (an
        # excerpt, a quoted issue): the frames and the final exception line still say where it was raised.
        if header or (m and not in_frames):
            if not expect_chain:
                chain, chain_start = [], None
            expect_chain = False
            start, frames, in_frames = line.number, [], True
            if chain_start is None:
                chain_start = line.number
            if header:
                continue
        elif _CHAIN.search(body):
            expect_chain = True
            continue
        if not in_frames:
            continue
        if m:
            frames.append(Frame(file=m.group(1), line=int(m.group(2)), function=(m.group(3) or "").strip()))
            continue
        if not body.strip() or body[:1].isspace():
            continue  # source lines, ^^^ markers and blank lines inside a traceback
        m = _EXC.search(body.strip().strip("*`"))  # a final line bolded or quoted in a Markdown post
        if not m:
            continue
        exc_type, message = m.group(1), (m.group(2) or "").strip()
        info = TracebackInfo(
            kind="python",
            rank=rank,
            start_line=chain_start or start or line.number,
            end_line=line.number,
            exc_type=exc_type,
            message=message[:2000],
            frames=frames[-50:],
            chained=list(chain),
        )
        chain.append(f"{exc_type}: {message}"[:300] if message else exc_type)
        # A later chained traceback replaces this one as the chain's final exception.
        if out and out[-1].rank == rank and info.chained and out[-1].start_line == info.start_line:
            out[-1] = info
        else:
            out.append(info)
        in_frames = False
    return out


def _torchrun_summaries(rank: str | None, lines: list[KeptLine]) -> list[TracebackInfo]:
    out: list[TracebackInfo] = []
    i = 0
    while i < len(lines):
        if not _ROOT_CAUSE.search(lines[i].body):
            i += 1
            continue
        start = lines[i].number
        fields: dict[str, str] = {}
        end = start
        j = i + 1
        while j < len(lines) and j <= i + 12 and lines[j].number - end <= 3:
            body = lines[j].body
            if _RULE.search(body):
                end = lines[j].number
                break
            m = _FIELD.search(body)
            if m:
                fields.setdefault(m.group(1).strip(), m.group(2).strip())
            end = lines[j].number
            j += 1
        exitcode = None
        m = _EXIT.search(fields.get("exitcode", ""))
        if m:
            exitcode = int(m.group(1))
        signal = None
        m = _SIGNAL.search(fields.get("traceback", ""))
        if m:
            signal = m.group(2)
        elif exitcode is not None and exitcode < 0:
            signal = SIGNALS.get(-exitcode)
        rm = _RANK.search(fields.get("rank", ""))
        error_file = fields.get("error_file")
        out.append(
            TracebackInfo(
                kind="torchrun",
                rank=rank,
                start_line=start,
                end_line=end,
                exc_type="ChildFailedError",
                message=fields.get("traceback"),
                exitcode=exitcode,
                signal=signal,
                error_file=None if error_file in (None, "<N/A>") else error_file,
                host=fields.get("host"),
                failed_rank=rm.group(1) if rm else None,
            )
        )
        i = j + 1
    return out
