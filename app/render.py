"""Render a :class:`~assistant.diagnosis.Diagnosis` as Markdown (terminal, web chat) in its own language.

Only the citations the rendered text refers to are listed, numbered in order of first appearance.

Rendering only: every word of knowledge comes from the Diagnosis (cited records); the labels
below are the only prose that lives in code.
"""

from __future__ import annotations

import re

from assistant.diagnosis import CandidateView, Diagnosis, FixView

LABELS = {
    "en": {
        "confidence": "confidence", "route": {"rule": "signature rules", "metrics": "metric analysis",
                                              "cases": "similar past incidents", "retrieval": "knowledge-base search"},
        "evidence": "Evidence", "line": "line", "rank": "rank",
        "causes": "Likely causes in this case", "likelihood": "rated likelihood", "check": "check",
        "here": "here",
        "fixes": "What to do first", "steps": "How to confirm", "follow_up": "To narrow it down",
        "dont": "Don't (only hides the problem)",
        "left_out": "Left out for this case", "more_lines": "and {n} similar line(s)",
        "answer_how": "reply in chat, or add `--answer {id}=<{opts}>`",
        "readings": "What the numbers say", "trends": "Trends",
        "healthy_title": "This looks healthy",
        "healthy": "No failure signature and nothing abnormal in the metrics. What was checked:",
        "others": "Other possibilities", "related": "Related sections", "sources": "Sources",
        "guide": "customer guide", "runbook": "team runbook", "notices": "Notes",
        "abstain_title": "No confident match",
        "abstain": "trainfix did not recognise this as one of the 15 known training failure modes, and it "
                   "will not guess. Paste the full traceback or the log lines around the failure, or ask a question.",
        "nearest": "Nearest sections (not a confident match)",
        "answer": "From the knowledge base",
        "likelihoods": {"high": "high", "medium": "medium", "low": "low"},
        "why": "why",
        "root": "Root cause",
        "similar": "Similar past incidents", "fixed_by": "fixed by", "not_training": "not a training failure",
        "outside_title": "Not a training failure",
        "outside": {
            "environment": "This looks like an environment or installation problem (packages, CUDA toolkit, driver, "
                           "build), not one of the 15 training failure modes trainfix diagnoses.",
            "access": "This looks like an access problem (a gated or private model, a missing token), not a "
                      "training failure.",
            "configuration": "This looks like a configuration or script problem (an argument the library does not "
                             "know, a missing template), not a training failure.",
            "usage": "This is about using a trained model (merging, serving, converting, inference speed), not a "
                     "failing training run.",
            "quality": "This is about the quality of a trained model, not a failing training run; trainfix "
                       "diagnoses runs that break.",
            "how-to": "This is a question about how to set up or tune training, not a failing run; the nearest "
                      "sections of the knowledge base are below.",
            "other-software": "This error comes from software unrelated to training.",
        },
    },
    "zh": {
        "confidence": "置信度", "route": {"rule": "特征规则", "metrics": "指标分析", "cases": "相似历史案例",
                                           "retrieval": "知识库检索"},
        "evidence": "证据", "line": "第", "rank": "rank",
        "causes": "本例中可能的原因", "likelihood": "来源给出的概率", "check": "检测",
        "here": "本例",
        "fixes": "先做什么", "steps": "如何确认", "follow_up": "需要确认",
        "dont": "不要这样做（只会掩盖问题）",
        "left_out": "本例中排除的建议", "more_lines": "以及 {n} 行类似的内容",
        "answer_how": "在对话中直接回复，或加上 `--answer {id}=<{opts}>`",
        "readings": "输入中的数字说明了什么", "trends": "趋势",
        "healthy_title": "看起来一切正常",
        "healthy": "没有发现失败特征，指标也没有异常。检查了以下内容：",
        "others": "其他可能", "related": "相关章节", "sources": "来源",
        "guide": "客户指南", "runbook": "团队手册", "notices": "说明",
        "abstain_title": "没有可信的匹配",
        "abstain": "trainfix 没有从中识别出 15 种已知训练失败模式中的任何一种，不做猜测。"
                   "请贴出完整的 traceback 或故障前后的日志，或者直接提问。",
        "nearest": "最接近的章节（并非可信匹配）",
        "answer": "知识库中的相关内容",
        "likelihoods": {"high": "高", "medium": "中", "low": "低"},
        "why": "依据",
        "root": "根因",
        "similar": "相似的历史案例", "fixed_by": "解决办法", "not_training": "非训练故障",
        "outside_title": "不是训练故障",
        "outside": {
            "environment": "这看起来是环境或安装问题（依赖包、CUDA 工具链、驱动、编译），不属于 trainfix 诊断的 15 种训练失败模式。",
            "access": "这看起来是访问权限问题（受限或私有模型、缺少 token），不是训练故障。",
            "configuration": "这看起来是配置或脚本问题（库不认识的参数、缺少模板等），不是训练故障。",
            "usage": "这是关于使用训练好的模型（合并、部署、转换、推理速度），不是训练运行出错。",
            "quality": "这是关于训练后模型效果的问题，不是训练运行出错；trainfix 诊断的是跑挂了的训练。",
            "how-to": "这是关于如何配置或调参的问题，不是训练运行出错；下面列出知识库中最接近的章节。",
            "other-software": "这个报错来自与训练无关的软件。",
        },
    },
}
_MARKER = re.compile(r"\[(\d{1,3})\]")  # applied to bounded, already-validated LLM output only
MAX_FIXES = 5
MAX_QUOTE = 160
MAX_EVIDENCE = 4  # decisive lines shown; the rest are summarised ("and N similar") and kept in --json
_CJK = re.compile(r"[\u3400-\u9fff]")
_DIGITS = re.compile(r"\d+")


def code_span(text: str) -> str:
    """``text`` verbatim as an inline code span: a fence longer than any backtick run inside it."""
    longest = run = 0
    for ch in text:
        run = run + 1 if ch == "`" else 0
        longest = max(longest, run)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or longest else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _line_label(lang: str, n: int) -> str:
    return f"第 {n} 行" if lang == "zh" else f"line {n}"


def _code_lines(code: str, lang: str) -> list[str]:
    """The code's lines; in an English answer, comments written in Chinese are left out (the step's
    title already says it in English)."""
    out = []
    for ln in code.splitlines():
        if lang != "zh" and _CJK.search(ln):
            head, hash_, comment = ln.partition("#")
            if hash_ and _CJK.search(comment) and not _CJK.search(head):
                if not head.strip():
                    continue  # a whole-line Chinese comment
                ln = head.rstrip()
        out.append(ln)
    return out


def _fix(lines: list[str], fix: FixView, lang: str = "en") -> None:
    text = fix.text
    code = _code_lines(fix.code.code, lang) if fix.code else []
    if text and code and code[0].strip().lstrip("#").strip() == text.strip("# "):
        code = code[1:]  # the step's title is the code's own first comment: say it once, as the title
    if text:  # the guide numbers some steps itself ("1. 检测 NaN"); the list already numbers them
        number, dot, rest = text.partition(". ")
        if dot and number.isdigit() and rest:
            text = rest
    head = f"{fix.priority}. {text}" if text else f"{fix.priority}."
    lines.append(f"{head} {_m(fix.cite)}")
    if fix.here:
        lines.append(f"   - {LABELS[lang]['here']}: {fix.here}")
    if fix.code and any(ln.strip() for ln in code):
        language = "bash" if fix.code.language == "shell" else fix.code.language
        lines.append("")
        lines.append(f"   ```{language}")
        lines.extend(f"   {ln}" if ln else "" for ln in code)
        lines.append("   ```")


def decisive_evidence(evidence: list) -> tuple[list, int]:
    """At most MAX_EVIDENCE lines: strong ones first, one per shape (numbers and rank ignored), in line
    order; and how many were left out."""
    seen: set[tuple[str, str]] = set()
    picked = []
    for ev in sorted(evidence, key=lambda e: (not e.source.startswith("reading:"), e.strength != "strong", e.line)):
        shape = (_DIGITS.sub("#", ev.text.strip()), ev.source)
        if shape in seen:
            continue
        seen.add(shape)
        picked.append(ev)
        if len(picked) == MAX_EVIDENCE:
            break
    return sorted(picked, key=lambda e: e.line), len(evidence) - len(picked)


def _candidate(lines: list[str], c: CandidateView, lang: str, L: dict, html: bool) -> None:
    lines.append(f"## {c.title} (`{c.failure_mode}`)")
    lines.append(f"*{L['confidence']} {c.confidence:.2f} · {L['route'][c.route]}* " + _m(c.cites[0]) if c.cites
                 else f"*{L['confidence']} {c.confidence:.2f} · {L['route'][c.route]}*")
    lines.append("")
    if c.note:
        lines.append(f"**{L['root']}:** {c.note}")
        lines.append("")
    if c.evidence:
        lines.append(f"**{L['evidence']}**")
        shown, more = decisive_evidence(c.evidence)
        for ev in shown:
            rank = f" ({L['rank']} {ev.rank})" if ev.rank is not None else ""
            text = ev.text if len(ev.text) <= 300 else ev.text[:300] + "…"
            lines.append(f"- {_line_label(lang, ev.line)}{rank}: {code_span(text)}")
        if more:
            lines.append(f"- … {L['more_lines'].format(n=more)}")
        lines.append("")
    if c.readings:
        lines.append(f"**{L['readings']}**")
        lines.extend(f"- {x}" for x in c.readings)
        lines.append("")
    if c.causes:
        lines.append(f"**{L['causes']}**")
        for i, cause in enumerate(c.causes[:4], start=1):
            like = f" — {L['likelihood']}: {L['likelihoods'][cause.likelihood]}" if cause.likelihood else ""
            lines.append(f"{i}. {cause.text}{like} {_m(cause.cite)}")
            if cause.detection:
                lines.append(f"   - {L['check']}: {cause.detection}")
            why = cause.reasons[1:]  # the first reason is the base score from the source's likelihood
            if why:
                lines.append(f"   - {L['why']}: {('；' if lang == 'zh' else '; ').join(why[:2])}")
        lines.append("")
    if c.fixes:
        lines.append(f"**{L['fixes']}**")
        for fix in c.fixes[:MAX_FIXES]:
            _fix(lines, fix, lang)
        lines.append("")
    if c.dont:
        lines.append(f"**{L['dont']}**")
        for d in c.dont:
            lines.append(f"- {d.text} — {d.why} {_m(d.cite)}")
        lines.append("")
    if c.left_out:
        lines.append(f"**{L['left_out']}**")
        for x in c.left_out:
            lines.append(f"- {x.text} — {x.reason} {_m(x.cite)}")
        lines.append("")
    if c.diagnosis_steps and c.route != "retrieval":
        lines.append(f"<details><summary>{L['steps']}</summary>\n" if html else f"**{L['steps']}**")
        for step in c.diagnosis_steps:
            _fix(lines, step, lang)
        lines.append("\n</details>\n" if html else "")


def markdown(d: Diagnosis, *, html: bool = False) -> str:
    """The whole answer as Markdown, in ``d.language``, ending with numbered sources.

    ``html=True`` folds the confirmation steps into a ``<details>`` block (for web chat).
    """
    return render(d, html=html)[0]


def render(d: Diagnosis, *, html: bool = False) -> tuple[str, int]:
    """``(markdown, number of sources listed)``; an LLM explanation, if any, goes on top."""
    text, order = render_numbered(d, html=html)
    return text, len(order)


def render_numbered(d: Diagnosis, *, html: bool = False) -> tuple[str, list[int]]:
    """``(markdown, order)``: source ``[n]`` of the markdown is ``d.citations[order[n - 1] - 1]``."""
    lang = d.language
    L = LABELS[lang]
    lines: list[str] = []
    if d.explanation:  # its [n] markers index d.citations, like every other marker here
        lines += [_MARKER.sub(lambda m: _m(int(m.group(1))), d.explanation.strip()), "", "---", ""]
    if d.candidates:
        _candidate(lines, d.candidates[0], lang, L, html)
        if d.follow_up:
            lines.append(f"**{L['follow_up']}**")
            for fu in d.follow_up:
                q = fu.question_zh if lang == "zh" else fu.question_en
                how = L["answer_how"].format(id=fu.id, opts="|".join(fu.options))
                lines.append(f"- {q} ({' / '.join(fu.options)}) — {how}")
            lines.append("")
        if len(d.candidates) > 1:
            lines.append(f"**{L['others']}**")
            for c in d.candidates[1:]:
                lines.append(f"- {c.title} (`{c.failure_mode}`, {L['confidence']} {c.confidence:.2f})")
            lines.append("")
    elif not d.abstained:
        lines.append(f"## {L['answer']}")
        lines.append("")
    elif d.healthy and d.metrics is not None:
        lines.append(f"## {L['healthy_title']}")
        lines.append("")
        lines.append(L["healthy"])
        for sr in d.metrics.series:
            lines.append("- " + checked_series(sr, lang))
        lines.append("")
    elif d.out_of_domain:
        lines.append(f"## {L['outside_title']}")
        lines.append("")
        lines.append(L["outside"].get(d.out_of_domain, L["abstain"]))
        lines.append("")
        for ev in d.out_of_domain_evidence:
            lines.append(f"- {_line_label(lang, ev.line)}: {code_span(ev.text[:300])}")
        if d.out_of_domain_evidence:
            lines.append("")
    else:
        lines.append(f"## {L['abstain_title']}")
        lines.append("")
        lines.append(L["abstain"])
        lines.append("")
    if d.similar:
        lines.append(f"**{L['similar']}**")
        for inc in d.similar:
            modes = ", ".join(f"`{m}`" for m in inc.labels) or L["not_training"]
            title = inc.title.replace("`", "ʼ").replace("[", "(").replace("]", ")")
            fixed = f" — {L['fixed_by']}: {inc.fix}" if inc.fix else ""
            lines.append(f"- [{title}]({inc.link}) ({modes}){fixed}")
        lines.append("")
    if d.passages:
        title = L["nearest"] if d.abstained else (L["related"] if d.candidates else L["answer"])
        if d.candidates or d.abstained:
            lines.append(f"**{title}**")
        for p in d.passages:
            excerpt = " ".join(p.excerpt.split())
            excerpt = excerpt if len(excerpt) <= 240 else excerpt[:240] + "…"
            lines.append(f"- **{p.title}** {_m(p.cite)}: {excerpt}")
        lines.append("")
    if d.notices:
        lines.append(f"**{L['notices']}**")
        lines.extend(f"- {n}" for n in d.notices)
        lines.append("")
    body, order = _number("\n".join(lines))
    out = [body.rstrip(), ""] if body.strip() else []

    if order:
        out.append(f"**{L['sources']}**")
        for new_n, old_n in enumerate(order, start=1):
            c = d.citations[old_n - 1]
            who = L["guide"] if c.source_kind == "guide" else L["runbook"]
            quote = " ".join(c.quote.split())
            quote = quote if len(quote) <= MAX_QUOTE else quote[:MAX_QUOTE] + "…"
            out.append(f"[{new_n}] {source_label(c, d, lang)} — {who}: “{quote}”  ")  # "  ": Markdown line break
    return "\n".join(out).rstrip() + "\n", order  # rstrip drops the last line break


def checked_series(sr, lang: str) -> str:
    """One line of what was checked in a series of a healthy log."""
    span = ""
    if sr.first_step is not None and sr.last_step is not None:
        span = (f"，第 {sr.first_step:g}–{sr.last_step:g} 步" if lang == "zh" else f", steps {sr.first_step:g}–{sr.last_step:g}")
    last = "" if sr.last_value is None else (f"，最后一个值 {sr.last_value:.4g}" if lang == "zh" else f", last {sr.last_value:.4g}")
    if lang == "zh":
        return f"`{sr.name}`：{sr.points} 个点{span}{last}；没有 NaN/inf、尖峰、爆炸或持续变慢"
    return f"`{sr.name}`: {sr.points} points{span}{last}; no NaN/inf, spike, explosion or sustained slowdown"


def source_label(c, d: Diagnosis, lang: str = "en") -> str:
    """``Title §section heading, lines a–b (file)``: the document as people know it, the file for the record."""
    title = d.source_titles.get(c.source)
    if not title:
        return c.label()
    span = (f"第 {c.start_line} 行" if c.start_line == c.end_line else f"第 {c.start_line}–{c.end_line} 行") if lang == "zh" \
        else (f"line {c.start_line}" if c.start_line == c.end_line else f"lines {c.start_line}–{c.end_line}")
    section = c.heading if c.source_kind == "runbook" else f"§{c.section} {c.heading}"
    return f"{title} {section}, {span} ({c.source})"


def _m(cite: int) -> str:
    """A citation marker placeholder; :func:`_number` renumbers markers in order of appearance."""
    return f"\x00{cite}\x00"


def renumber(text: str, order: list[int]) -> str:
    """Citation placeholders → ``[1]``, ``[2]``… in order of first appearance; ``order`` collects the cited
    ids and may be shared across several texts (one answer split into many blocks)."""
    parts = text.split("\x00")
    for i in range(1, len(parts), 2):
        n = int(parts[i])
        if n not in order:
            order.append(n)
        parts[i] = f"[{order.index(n) + 1}]"
    return "".join(parts)


def _number(text: str) -> tuple[str, list[int]]:
    order: list[int] = []
    return renumber(text, order), order
