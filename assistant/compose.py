"""Compose: triage result + knowledge records (+ retrieval hits) → one :class:`Diagnosis`.

This is the only place an answer is assembled, so every front-end gives the same one. Nothing
here invents text: causes, fixes and code come from cited records; evidence comes from the input
(redacted); numbers come from the rule/metric stages.
"""

from __future__ import annotations

from collections.abc import Sequence

import re2

from assistant.cases import EMPTY, Neighbour
from assistant.causality import first_failing_rank
from assistant.diagnosis import (
    CandidateView,
    CauseView,
    CodeView,
    Diagnosis,
    DontView,
    FixView,
    IncidentView,
    Lang,
    LeftOutView,
    PassageView,
)
from assistant.knowledge import Knowledge
from assistant.models import Candidate, Evidence, RankedCause, Triage
from assistant.ranking import Calibration, Ranking, rank
from assistant.redact import redact
from assistant.tree import Contradiction, TextSignals, TreeData, follow_ups, rank_causes
from kb.schema import Citation, Fix, Record, Step

# Score for a cause the decision tree did not rank (e.g. a runbook cause it has no rule for).
_LIKELIHOOD_SCORE = {"high": 0.5, "medium": 0.35, "low": 0.2, None: 0.25}
MAX_CANDIDATES = 3
EXCERPT_CHARS = 400


class Citations:
    """Numbered, de-duplicated citation list; :meth:`add` returns the 1-based marker."""

    def __init__(self) -> None:
        self.items: list[Citation] = []
        self._index: dict[tuple, int] = {}

    def add(self, c: Citation) -> int:
        key = (c.source, c.start_line, c.end_line, c.quote)
        if key not in self._index:
            self.items.append(c)
            self._index[key] = len(self.items)
        return self._index[key]


def _redacted_evidence(evidence: Sequence[Evidence]) -> tuple[list[Evidence], int]:
    out, count = [], 0
    for ev in evidence:
        text, match = redact(ev.text), redact(ev.match)
        count += text.count
        out.append(ev.model_copy(update={"text": text.text, "match": match.text}))
    return out, count


def _causes(record: Record, ranked_causes: Sequence[RankedCause], lang: Lang, cites: Citations) -> list[CauseView]:
    ranked = {rc.cause_id: rc for rc in ranked_causes}
    views = []
    for order, cause in enumerate(record.causes):
        rc = ranked.get(cause.id)
        score = rc.score if rc else _LIKELIHOOD_SCORE[cause.likelihood]
        views.append((
            -score, order,
            CauseView(
                id=cause.id, text=cause.text.get(lang), likelihood=cause.likelihood,
                detection=cause.detection.get(lang) if cause.detection else None,
                score=round(score, 3), reasons=_reasons(rc, lang), cite=cites.add(cause.citation),
            ),
        ))
    return [v for *_, v in sorted(views, key=lambda t: (t[0], t[1]))]


def _reasons(rc, lang: Lang) -> list[str]:
    """Why the tree ranked a cause where it did, in ``lang``; the first reason is the base score."""
    if rc is None:
        return []
    return rc.reasons_zh if lang == "zh" and len(rc.reasons_zh) == len(rc.reasons) else rc.reasons


def _fix_view(item: Fix | Step, priority: int, lang: Lang, cites: Citations) -> FixView:
    code = CodeView(language=item.code.language, code=item.code.code) if item.code else None
    if item.code:
        cites.add(item.code.citation)
    return FixView(priority=priority, text=item.text.get(lang) if item.text else None, code=code,
                   cite=cites.add(item.citation))


def _said(fix: Fix) -> str:
    """Everything a fix says (both languages and its code), for dead-end and contradiction patterns."""
    return " ".join(filter(None, (fix.text.zh, fix.text.en) if fix.text else ())) + "\n" + (fix.code.code if fix.code else "")


def _ruled_out(fix: Fix, ruled: Sequence[Contradiction], dropped: dict[str, Contradiction]) -> Contradiction | None:
    """The contradiction that rules ``fix`` out: it names the fix, or every cause the fix acts on is dropped."""
    said = _said(fix)
    hit = next((c for c in ruled if any(re2.search(p, said) for p in c.fixes)), None)
    if hit is None and fix.addresses and all(a in dropped for a in fix.addresses):
        hit = dropped[fix.addresses[0]]
    return hit


def _fixes(record: Record, top_causes: list[str], lang: Lang, cites: Citations,
           ruled: Sequence[Contradiction] = (), dropped: dict[str, Contradiction] | None = None,
           here: dict[str, str] | None = None,
           ) -> tuple[list[FixView], list[DontView], list[LeftOutView]]:
    """Fixes acting on the likeliest causes first (in cause order), then the rest in the source's order;
    fixes that are a known dead end are taken out and shown with the dead end as "don't"; fixes a fact
    of this case rules out are left out, with the reason. ``here`` (cause → this case's values) is told
    with the first fix that acts on that cause."""
    def key(fix: Fix) -> tuple[int, int]:
        hits = [top_causes.index(c) for c in fix.addresses if c in top_causes]
        return (min(hits) if hits else len(top_causes), fix.priority)

    ends = [(d, [re2.compile(p) for p in d.matches]) for d in record.dead_ends]
    covered: dict[int, list[Fix]] = {}
    kept: list[Fix] = []
    left_out: list[LeftOutView] = []
    for fix in record.fixes:
        said = _said(fix)
        hit = next((i for i, (_, pats) in enumerate(ends) if any(p.search(said) for p in pats)), None)
        ruling = _ruled_out(fix, ruled, dropped or {})
        if ruling is not None and ruling.strip_code:
            if fix.code is not None:
                left_out.append(LeftOutView(kind="code", text=fix.code.code.splitlines()[0],
                                            reason=ruling.reason_zh if lang == "zh" else ruling.reason,
                                            cite=cites.add(fix.code.citation)))
            fix = fix.model_copy(update={"code": None})
            ruling = None
        if ruling is not None:
            text = (fix.text.get(lang) if fix.text else None) or (fix.code.code.splitlines()[0] if fix.code else "")
            left_out.append(LeftOutView(kind="fix", text=text, reason=ruling.reason_zh if lang == "zh" else ruling.reason,
                                        cite=cites.add(fix.citation)))
        elif hit is None:
            kept.append(fix)
        else:
            covered.setdefault(hit, []).append(fix)
    ordered = sorted(kept, key=key)
    fixes = [_fix_view(f, i, lang, cites) for i, f in enumerate(ordered, start=1)]
    for cause, said in (here or {}).items():
        first = next((v for f, v in zip(ordered, fixes) if cause in f.addresses), None)
        if first is not None and first.here is None:
            first.here = said
    dont = [DontView(text=d.text.get(lang), why=d.why.get(lang), cite=cites.add(d.citation),
                     fixes=[cites.add(f.citation) for f in covered.get(i, [])])
            for i, (d, _) in enumerate(ends)]
    return fixes, dont, left_out


def candidate_view(
    record: Record, ranked_causes: Sequence[RankedCause], lang: Lang, cites: Citations, *,
    confidence: float, route: str, evidence: list[Evidence],
    ruled: Sequence[Contradiction] = (), here: dict[str, str] | None = None,
) -> CandidateView:
    """One candidate with the record's knowledge, causes ranked for this case; ``ruled``: the
    contradictions this case's facts trigger (their causes and fixes are left out, with the reason)."""
    dropped = {cause: c for c in ruled for cause in c.causes}
    causes = []
    left_out = []
    for view in _causes(record, ranked_causes, lang, cites):
        if view.id in dropped:
            c = dropped[view.id]
            left_out.append(LeftOutView(kind="cause", text=view.text, reason=c.reason_zh if lang == "zh" else c.reason,
                                        cite=view.cite))
        else:
            causes.append(view)
    top = [c.id for c in causes[:2]]
    fixes, dont, fixes_out = _fixes(record, top, lang, cites, ruled, dropped, here)
    return CandidateView(
        failure_mode=record.failure_mode, category=record.category, title=record.title.get(lang),
        confidence=round(confidence, 3), route=route, evidence=evidence,
        symptoms=[s.text.get(lang) for s in record.symptoms],
        causes=causes, fixes=fixes, dont=dont, left_out=left_out + fixes_out,
        diagnosis_steps=[_fix_view(s, i, lang, cites) for i, s in enumerate(record.diagnosis, start=1)],
        cites=[cites.add(c) for c in record.citations],
    )


def compose(
    result: Triage,
    knowledge: Knowledge,
    *,
    lang: Lang,
    kind: str = "diagnosis",
    hits: Sequence = (),
    ranking: Ranking | None = None,
    calibration: Calibration | None = None,
    neighbours: Sequence[Neighbour] = (),
    answers: dict[str, str] | None = None,
    answered_by_passage: bool = False,
    extra_notices: Sequence[str] = (),
    extra_warnings: Sequence[str] = (),
    tree: TreeData | None = None,
) -> Diagnosis:
    """Build the :class:`Diagnosis` for a triage result.

    ``ranking`` orders the candidates from every stage (default: the triage's own, rules only);
    ``calibration`` maps raw scores to stated confidences; ``hits`` are retrieval hits used as
    supporting or nearest passages; ``neighbours`` are similar past incidents;
    ``answered_by_passage`` says the top hit is a passage retrieval confidently matched (a plain
    question answered from the guide); ``tree`` re-ranks causes and picks follow-up questions for
    candidates the rules did not name.
    """
    if ranking is None:
        ranking = rank(result, EMPTY)
    cites = Citations()
    notices = list(result.notices) + list(extra_notices)
    views: list[CandidateView] = []
    redacted = 0
    by_mode = {c.failure_mode: c for c in result.candidates}
    for r in ranking.ranked[:MAX_CANDIDATES]:
        record = knowledge.records.get(r.mode)
        if record is None:
            continue
        cand = by_mode.get(r.mode)
        evidence, n = _redacted_evidence(cand.evidence) if cand else ([], 0)
        redacted += n
        causes = cand.causes if cand else result.causes_by_mode.get(r.mode) or (
            rank_causes(tree, r.mode, result.facts, {}, TextSignals(), {}) if tree else [])
        route = cand.route if cand is not None and r.route == "triage" else r.route
        confidence = calibration(r.raw) if calibration is not None else r.raw
        view = candidate_view(record, causes, lang, cites, confidence=min(confidence, 0.99), route=route,
                              evidence=evidence, ruled=tree.contradictions(r.mode, result.facts) if tree else (),
                              here=_actions(result, r.mode, lang))
        view.score = round(min(r.raw, 1.0), 4)
        view.readings = _readings(result, r.mode, lang)
        _reading_evidence(view, result)
        if cand is not None and cand.note:
            tl = result.timeline
            view.note = _root_note(cand, lang, named=tl is not None and (tl.first_failure is not None or bool(tl.mismatch)
                                                                         or tl.straggler is not None))
        views.append(view)
    routes = list(result.routes)
    for extra in ("cases", "retrieval"):
        if any(v.route == extra for v in views):
            routes.append(extra)
    if redacted:
        notices.append(f"{redacted} secret(s) redacted from the evidence shown.")

    follow = result.follow_up
    if tree is not None and views and (not result.candidates or result.candidates[0].failure_mode != views[0].failure_mode):
        follow = follow_ups(tree, [v.failure_mode for v in views[:2]], result.facts)
    passages = _passages(views, hits, knowledge, lang, cites)
    declined = ranking.declined
    return Diagnosis(
        language=lang, kind="answer" if kind == "answer" else "diagnosis",
        candidates=views, abstained=not views and not (answered_by_passage and passages),
        follow_up=follow if views else [],
        passages=passages, citations=cites.items, routes=routes,
        source_titles={c.source: knowledge.titles[c.source] for c in cites.items if c.source in knowledge.titles},
        facts=dict(result.facts), answers=dict(answers or {}), metrics=result.metrics,
        similar=_similar(neighbours),
        timeline=_redacted_timeline(result.timeline),
        out_of_domain=ranking.outside_kind if declined and ranking.outside >= OUTSIDE_SHOWN else None,
        out_of_domain_evidence=[Evidence(line=h.line, text=redact(h.text).text, match=h.id, source=f"outside:{h.id}",
                                         strength=h.strength)
                                for h in result.outside[:3]] if declined else [],
        notices=notices, warnings=list(result.warnings) + list(extra_warnings),
        healthy=not views and healthy_log(result),
    )


# Which modes a trend speaks to.
_TREND_MODES = {
    "growth": {"slow-training", "low-gpu-utilization", "cpu-oom", "cuda-oom"},
    "decline": {"slow-training", "low-gpu-utilization", "communication-bottleneck"},
    "jump": {"slow-training", "low-gpu-utilization", "communication-bottleneck"},
    "periodic": {"loss-spike", "gradient-explosion", "nan-loss"},
    "collapse": {"nan-loss", "loss-spike", "gradient-explosion"},
    "precursor": {"gradient-explosion", "nan-loss", "loss-spike"},
    "surge": {"gradient-explosion", "loss-spike", "nan-loss"},
    "transient": {"loss-spike", "gradient-explosion"},
    "memory-growth": {"cuda-oom"},
    "data-wait": {"slow-training", "low-gpu-utilization"},
}


def _readings(result: Triage, mode: str, lang: Lang) -> list[str]:
    """Readings of the input's numbers and metric trends that speak to ``mode``, in ``lang``."""
    leak = result.metrics is not None and any(t.kind == "memory-growth" for t in result.metrics.trends)
    # memory that grew step after step explains the shortfall: "does not fit as configured" would mislead
    out = [(r.zh if lang == "zh" else r.en) for r in result.readings
           if mode in r.modes and not (leak and r.kind == "oom-capacity")]
    if result.metrics is not None:
        out += [(t.zh if lang == "zh" else t.en) for t in result.metrics.trends if mode in _TREND_MODES[t.kind]]
    return [redact(x).text for x in out]


def _actions(result: Triage, mode: str, lang: Lang) -> dict[str, str]:
    """Cause → the fix in this case's own values (a reading's action: the checkpoint to go back to, …)."""
    out: dict[str, str] = {}
    for r in result.readings:
        act = r.act_zh if lang == "zh" and r.act_zh else r.act_en
        if act and mode in r.causes:
            out.setdefault(r.causes[mode], redact(act).text)
    return out


def _reading_evidence(view: CandidateView, result: Triage) -> None:
    """The line a reading's numbers come from proves the reading: it joins the evidence (first, redacted)."""
    have = {e.line for e in view.evidence}
    extra = [Evidence(line=r.line, text=redact(r.text).text, match=r.kind, source=f"reading:{r.kind}", strength="strong")
             for r in result.readings if view.failure_mode in r.modes and r.text and r.line not in have]
    view.evidence = extra + view.evidence


HEALTHY_POINTS = 10  # a log needs this many training metric points to be called healthy


def healthy_log(result: Triage) -> bool:
    """A training log with a real metric series, no finding, no trend, no traceback, no failure mode and
    nothing out of domain: it is answered as healthy (with what was checked), never by resemblance. Shorter or
    mixed inputs get the per-mode check instead (:func:`assistant.ranking.contradicted_by_metrics`)."""
    m = result.metrics
    if m is None or result.candidates or result.tracebacks or result.outside or result.readings:
        return False
    return not m.findings and not m.trends and any(
        s.name in ("loss", "grad_norm") and s.points >= HEALTHY_POINTS for s in m.series)


def _redacted_timeline(tl):
    if tl is None:
        return None
    return tl.model_copy(update={
        "events": [e.model_copy(update={"text": redact(e.text).text}) for e in tl.events],
        "first_failure": tl.first_failure.model_copy(update={"text": redact(tl.first_failure.text).text})
        if tl.first_failure else None,
        "consequences": [e.model_copy(update={"text": redact(e.text).text}) for e in tl.consequences],
    })


OUTSIDE_SHOWN = 0.3  # a decline names the kind of problem from this out-of-domain score on
SIMILAR_SHOWN = 0.2


def _root_note(cand: Candidate, lang: Lang, named: bool = False) -> str:
    """Why this candidate is the root cause, naming the rank that failed first when the evidence has ranks
    (``named``: the timeline already names it)."""
    note = (cand.note_zh if lang == "zh" and cand.note_zh else cand.note) or ""
    rank_id = None if named else first_failing_rank(cand)
    if rank_id is not None:
        line = min(e.line for e in cand.evidence if e.rank == rank_id)
        note += (f"；rank {rank_id} 最先出错（第 {line} 行）" if lang == "zh"
                 else f"; rank {rank_id} failed first (line {line})")
    return note


def _similar(neighbours: Sequence[Neighbour]) -> list[IncidentView]:
    out = []
    for n in neighbours:
        if n.similarity < SIMILAR_SHOWN or len(out) >= 3:
            continue
        first = next((ln.strip() for ln in n.case.text.splitlines() if ln.strip()), "")
        out.append(IncidentView(id=n.case.id, title=first[:160], labels=list(n.case.labels), fix=n.case.fix or None,
                                link=n.case.link, similarity=n.similarity))
    return out


def _passages(views, hits, knowledge: Knowledge, lang: Lang, cites: Citations) -> list[PassageView]:
    """Supporting sections: with a diagnosis, passages only (other modes are the rules' call, shown as
    other candidates); without one, every hit, as the nearest sections."""
    out: list[PassageView] = []
    seen: set[str] = {v.failure_mode for v in views}
    for hit in hits:
        if hit.id in seen or hit.kind == "case" or (views and hit.kind == "record"):
            continue
        view = _hit_view(hit, knowledge, lang, cites)
        if view is not None:
            seen.add(hit.id)
            out.append(view)
    for v in views[:1]:
        for p in knowledge.passages_for(v.failure_mode):
            if p.id not in seen:
                seen.add(p.id)
                out.append(PassageView(id=p.id, kind="passage", title=p.title.get(lang),
                                       excerpt=p.body(lang)[:EXCERPT_CHARS], score=0.0, failure_mode=v.failure_mode,
                                       cite=cites.add(p.citation)))
    return out[:5]


def _record_items(record: Record, lang: Lang):
    """(citation, text to show) for every cited item of a record, most specific first.

    Items show their text in ``lang``; a section-level citation shows its own verbatim quote, never
    the team's summary, so what is shown is always what the citation points at."""
    for group in (record.symptoms, record.causes, record.diagnosis, record.fixes):
        for item in group:
            text = item.text.get(lang) if item.text else ""
            yield item.citation, text
            code = getattr(item, "code", None)
            if code is not None:
                yield code.citation, text or code.code
    for c in record.citations:
        yield c, c.quote


def _hit_source(hit, knowledge: Knowledge, lang: Lang) -> tuple[Citation, str, str] | None:
    """The knowledge-base item behind a hit's chunk: (its citation with the verbatim quote, title, text)."""
    c = hit.citation
    if hit.kind == "passage":
        p = knowledge.passages.get(hit.id)
        return (p.citation, p.title.get(lang), p.body(lang)) if p else None
    record = knowledge.records.get(hit.failure_mode or "")
    if record is None:
        return None
    items = list(_record_items(record, lang))
    same = [(x, t) for x, t in items
            if x.source == c.source and x.start_line == c.start_line and x.end_line == c.end_line]
    covering = [(x, t) for x, t in items
                if x.source == c.source and x.start_line <= c.start_line and c.end_line <= x.end_line]
    found = (same or covering or [None])[0]
    if found is None:  # the index is older than the records; never cite what we cannot verify
        return None
    return found[0], record.title.get(lang), found[1] or hit.text


def _hit_view(hit, knowledge: Knowledge, lang: Lang, cites: Citations) -> PassageView | None:
    found = _hit_source(hit, knowledge, lang)
    if found is None:
        return None
    citation, title, text = found
    return PassageView(id=hit.id, kind=hit.kind, failure_mode=hit.failure_mode, title=title,
                       excerpt=text[:EXCERPT_CHARS], score=round(hit.score, 4), cite=cites.add(citation))
