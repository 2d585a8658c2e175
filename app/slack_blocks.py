"""A :class:`~assistant.diagnosis.Diagnosis` as Slack Block Kit messages, split within Slack's limits.

A pure function of the Diagnosis (no Slack client here): :func:`answer_messages` returns the messages
to post in a thread, in order. Every piece of text that comes from the input or the knowledge base is
escaped for mrkdwn (``&``, ``<``, ``>``), code blocks included, so a pasted ``<!channel>`` or
``<http://x|y>`` is shown as text and never acted on. Citation numbers are assigned in order of first
appearance, as in :func:`app.render.render_numbered`; the sources list closes the answer.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from app.render import LABELS, checked_series, decisive_evidence, renumber, source_label
from assistant.diagnosis import CandidateView, Diagnosis, FixView
from assistant.redact import redact

# Slack's documented limits (Block Kit reference); the split below keeps under them with some margin.
MAX_BLOCKS = 50
SECTION_TEXT = 3000
HEADER_TEXT = 150
BUTTON_TEXT = 75
BUTTON_VALUE = 2000
ACTIONS_ELEMENTS = 25
CONTEXT_ELEMENTS = 10
TEXT_FALLBACK = 40000
# Our own, smaller caps: a readable message, and a fallback text that notifications show whole.
CHUNK = 2800
MESSAGE_CHARS = 12000
FALLBACK_CHARS = 2900
MAX_CAUSES = 3
MAX_FIXES = 5  # as the Markdown answer (app.render.MAX_FIXES)
MAX_CODE_LINES = 40
MAX_PASSAGES = 3
FOLLOW_UP_ACTION = "tf_followup_"  # + a number unique in the message (action ids must be unique)
MAX_FOLLOW_UP_BUTTONS = 24
FEEDBACK_UP, FEEDBACK_DOWN = "tf_feedback_up", "tf_feedback_down"

SLACK_LABELS = {
    "en": {
        "secret": ":warning: Your message contained {what}. It was redacted from everything trainfix posts and "
                  "stores, but your original message still shows it: please delete it (and rotate the secret).",
        "out_of_scope": "Not in my knowledge base",
        "helpful": "Was this helpful?", "up": "👍 Helpful", "down": "👎 Not helpful",
        "more_code": "… {n} more line(s)",
        "asked": "<@{user}> asked trainfix:", "plot": "Metric plot: the series against step, each finding's onset marked",
        "narrowed": "Narrowed with {q} = {v}",
    },
    "zh": {
        "secret": ":warning: 你的消息中包含{what}。trainfix 发出和保存的所有内容都已将其隐去，但你的原消息仍然可见："
                  "请删除原消息（并更换该密钥）。",
        "out_of_scope": "知识库中没有相关内容",
        "helpful": "这个回答有帮助吗？", "up": "👍 有帮助", "down": "👎 没帮助",
        "more_code": "… 另有 {n} 行",
        "asked": "<@{user}> 向 trainfix 提问：", "plot": "指标曲线：各指标随步数的变化，并标出每个发现的起点",
        "narrowed": "已按 {q} = {v} 缩小范围",
    },
}


@dataclass(frozen=True)
class SlackMessage:
    """One message to post: the notification/fallback ``text`` and its ``blocks``."""

    text: str
    blocks: list[dict]


def escape(text: str) -> str:
    """``text`` safe for mrkdwn: Slack's three control characters escaped (mentions and links become text)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def code_inline(text: str) -> str:
    """``text`` as an inline code span (escaped; a backtick inside would end the span, so it is replaced)."""
    return f"`{escape(text.replace('`', 'ˋ')) or ' '}`"


def code_block(code: str) -> str:
    """``code`` as a mrkdwn code block (escaped; a ``` run inside would close the block, so it is broken up)."""
    return "```\n" + escape(code.replace("```", "ˋˋˋ")) + "\n```"


def _cite(n: int) -> str:
    return f"\x00{n}\x00"  # a placeholder, numbered in order of first appearance by _number


def _line(n: int, lang: str) -> str:
    return f"第 {n} 行" if lang == "zh" else f"line {n}"


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _section(text: str) -> dict:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}}


def _header(text: str) -> dict:
    return {"type": "header", "text": {"type": "plain_text", "text": _clip(text, HEADER_TEXT), "emoji": True}}


def _context(*texts: str) -> dict:
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": t} for t in texts[:CONTEXT_ELEMENTS]]}


def _button(text: str, action_id: str, value: str, style: str | None = None) -> dict:
    button = {"type": "button", "text": {"type": "plain_text", "text": _clip(text, BUTTON_TEXT), "emoji": True},
              "action_id": action_id, "value": value[:BUTTON_VALUE]}
    if style:
        button["style"] = style
    return button


def follow_up_value(follow_up_id: str, option: str) -> str:
    """A follow-up button's value: which question and which option (JSON, read back by :func:`parse_follow_up`)."""
    return json.dumps({"q": follow_up_id, "v": option}, ensure_ascii=False)


def parse_follow_up(value: str) -> tuple[str, str] | None:
    """``(follow-up id, option)`` from a button value, or None when it is not one of ours."""
    try:
        data = json.loads(value)
        q, v = data["q"], data["v"]
    except (ValueError, KeyError, TypeError):
        return None
    return (q, v) if isinstance(q, str) and isinstance(v, str) else None


# -- the answer ------------------------------------------------------------------------------------


def _fix_text(fix: FixView, L: dict, lang: str) -> str:
    text = fix.text or ""
    number, dot, rest = text.partition(". ")
    if dot and number.isdigit() and rest:  # the guide numbers some steps itself; the list numbers them already
        text = rest
    out = f"*{fix.priority}.* {escape(text)} {_cite(fix.cite)}".rstrip()
    if fix.here:
        out += f"\n_{escape(L['here'])}:_ {escape(fix.here)}"
    if fix.code and fix.code.code.strip():
        lines = fix.code.code.strip("\n").splitlines()
        if text and lines and lines[0].strip().lstrip("#").strip() == text.strip("# "):
            lines = lines[1:]  # the step's title is the code's own first comment: say it once
        shown = lines[:MAX_CODE_LINES]
        if shown:
            out += "\n" + code_block("\n".join(shown))
        if len(lines) > len(shown):
            out += "\n" + SLACK_LABELS[lang]["more_code"].format(n=len(lines) - len(shown))
    return out


def _candidate_blocks(c: CandidateView, d: Diagnosis, L: dict, lang: str) -> list[dict]:
    blocks = [_header(f"{c.title} ({c.failure_mode})")]
    meta = f"{L['confidence']} *{c.confidence:.2f}* · {L['route'][c.route]}"
    blocks.append(_context(meta + (f" {_cite(c.cites[0])}" if c.cites else "")))
    if c.note:
        blocks.append(_section(f"*{L['root']}:* {escape(c.note)}"))
    if c.evidence:
        shown, more = decisive_evidence(c.evidence)
        rows = []
        for ev in shown:
            where = _line(ev.line, lang)
            rank = f" ({L['rank']} {escape(ev.rank)})" if ev.rank is not None else ""
            rows.append(f"• {where}{rank}: {code_inline(_clip(ev.text, 300))}")
        if more:
            rows.append(f"• … {L['more_lines'].format(n=more)}")
        blocks.append(_section(f"*{L['evidence']}*\n" + "\n".join(rows)))
    if c.readings:
        blocks.append(_section(f"*{L['readings']}*\n" + "\n".join(f"• {escape(r)}" for r in c.readings)))
    if c.causes:
        rows = []
        for i, cause in enumerate(c.causes[:MAX_CAUSES], start=1):
            like = f" — {L['likelihood']}: {L['likelihoods'][cause.likelihood]}" if cause.likelihood else ""
            rows.append(f"{i}. {escape(cause.text)}{like} {_cite(cause.cite)}")
            why = cause.reasons[1:]  # the first reason is the base score from the source's likelihood
            if why:
                rows.append(f"      _{L['why']}: {escape(('；' if lang == 'zh' else '; ').join(why[:2]))}_")
        blocks.append(_section(f"*{L['causes']}*\n" + "\n".join(rows)))
    if c.fixes:
        blocks.append(_section(f"*{L['fixes']}*"))
        blocks.extend(_section(_fix_text(fix, L, lang)) for fix in c.fixes[:MAX_FIXES])
    if c.dont:
        rows = [f"• {escape(x.text)} — {escape(x.why)} {_cite(x.cite)}" for x in c.dont]
        blocks.append(_section(f"*{L['dont']}*\n" + "\n".join(rows)))
    return blocks


def _follow_up_blocks(d: Diagnosis, L: dict, lang: str) -> list[dict]:
    blocks: list[dict] = []
    n = 0
    for fu in d.follow_up:
        question = fu.question_zh if lang == "zh" else fu.question_en
        buttons = []
        for option in fu.options:
            if n >= MAX_FOLLOW_UP_BUTTONS:
                break
            buttons.append(_button(option, f"{FOLLOW_UP_ACTION}{n}", follow_up_value(fu.id, option)))
            n += 1
        if not buttons:
            break
        blocks.append(_section(f"*{L['follow_up']}:* {escape(question)}"))
        blocks.append({"type": "actions", "block_id": f"tf_fu_{fu.id}"[:255], "elements": buttons[:ACTIONS_ELEMENTS]})
    return blocks


def _other_blocks(d: Diagnosis, L: dict, lang: str) -> list[dict]:
    blocks: list[dict] = []
    if len(d.candidates) > 1:
        rows = [f"• {escape(c.title)} ({code_inline(c.failure_mode)}, {L['confidence']} {c.confidence:.2f})"
                for c in d.candidates[1:]]
        blocks.append(_section(f"*{L['others']}*\n" + "\n".join(rows)))
    if d.similar:
        rows = []
        for inc in d.similar:
            modes = ", ".join(code_inline(m) for m in inc.labels) or L["not_training"]
            title = escape(_clip(inc.title, 150)).replace("|", "¦")
            link = inc.link if inc.link.startswith(("https://", "http://")) and not any(ch in inc.link for ch in "<>| ") else ""
            name = f"<{link}|{title}>" if link else title
            fixed = f" — {L['fixed_by']}: {escape(_clip(inc.fix, 300))}" if inc.fix else ""
            rows.append(f"• {name} ({modes}){fixed}")
        blocks.append(_section(f"*{L['similar']}*\n" + "\n".join(rows)))
    return blocks


def _passage_blocks(d: Diagnosis, L: dict, title: str | None, *, excerpts: bool) -> list[dict]:
    if not d.passages:
        return []
    rows = []
    for p in d.passages[:MAX_PASSAGES]:
        line = f"• *{escape(p.title)}* {_cite(p.cite)}"
        if excerpts:
            line += ": " + escape(_clip(" ".join(p.excerpt.split()), 240))
        rows.append(line)
    return [_section((f"*{title}*\n" if title else "") + "\n".join(rows))]


def _body(d: Diagnosis, lang: str) -> list[dict]:
    L = LABELS[lang]
    S = SLACK_LABELS[lang]
    blocks: list[dict] = []
    if d.candidates:
        blocks += _candidate_blocks(d.candidates[0], d, L, lang)
        blocks += _follow_up_blocks(d, L, lang)
        blocks += _other_blocks(d, L, lang)
        blocks += _passage_blocks(d, L, L["related"], excerpts=False)
    elif not d.abstained:  # a question answered from the knowledge base
        blocks.append(_header(L["answer"]))
        blocks += _passage_blocks(d, L, None, excerpts=True)
        blocks += _other_blocks(d, L, lang)
    elif d.healthy and d.metrics is not None:
        blocks.append(_header(L["healthy_title"]))
        rows = [f"• {escape(checked_series(sr, lang).replace('`', ''))}" for sr in d.metrics.series]
        blocks.append(_section(L["healthy"] + "\n" + "\n".join(rows)))
    else:  # out of scope: short and polite, with the nearest sections
        blocks.append(_header(S["out_of_scope"]))
        reason = L["outside"].get(d.out_of_domain, L["abstain"]) if d.out_of_domain else L["abstain"]
        rows = [escape(reason)] + [f"• {_line(ev.line, lang)}: {code_inline(_clip(ev.text, 300))}"
                                   for ev in d.out_of_domain_evidence[:2]]
        blocks.append(_section("\n".join(rows)))
        blocks += _passage_blocks(d, L, L["nearest"], excerpts=False)
        blocks += _other_blocks(d, L, lang)
    if d.notices:
        blocks.append(_context(*[escape(_clip(n, 300)) for n in d.notices]))
    return blocks


def _number(blocks: list[dict]) -> list[int]:
    """Replace citation placeholders in order of first appearance; returns the citation order."""
    order: list[int] = []

    def fix(text: str) -> str:
        return renumber(text, order)

    for block in blocks:
        if "text" in block and isinstance(block["text"], dict):
            block["text"]["text"] = fix(block["text"]["text"])
        for el in block.get("elements", []):
            if el.get("type") == "mrkdwn":
                el["text"] = fix(el["text"])
    return order


def _sources(d: Diagnosis, order: list[int], L: dict, lang: str) -> list[dict]:
    if not order:
        return []
    rows = []
    for new_n, old_n in enumerate(order, start=1):
        c = d.citations[old_n - 1]
        who = L["guide"] if c.source_kind == "guide" else L["runbook"]
        quote = _clip(" ".join(c.quote.split()), 160)
        rows.append(f"[{new_n}] {escape(source_label(c, d, lang))} — {who}: “{escape(quote)}”")
    return [_section(f"*{L['sources']}*\n" + "\n".join(rows))]


def answer_messages(d: Diagnosis, *, answer_id: str | None = None, secret_kinds: list[str] | tuple[str, ...] = (),
                    note: str | None = None) -> list[SlackMessage]:
    """The answer as Slack messages, in order, each within Slack's block and text limits.

    ``answer_id`` adds 👍/👎 buttons (their value) at the end; ``secret_kinds`` (what the redactor
    removed from the input) adds the warning to delete the original message; ``note`` (mrkdwn, already
    safe) opens the answer, e.g. "narrowed with precision = bf16".
    """
    lang = d.language
    L = LABELS[lang]
    S = SLACK_LABELS[lang]
    blocks: list[dict] = []
    if secret_kinds:
        what = ("密钥（" if lang == "zh" else "a secret (") + ", ".join(secret_kinds) + ("）" if lang == "zh" else ")")
        blocks.append(_section(S["secret"].format(what=escape(what))))
    if note:
        blocks.append(_context(note))
    blocks += _body(d, lang)
    order = _number(blocks)
    blocks += _sources(d, order, L, lang)
    if answer_id:
        blocks.append(_context(S["helpful"]))
        blocks.append({"type": "actions", "block_id": "tf_feedback", "elements": [
            _button(S["up"], FEEDBACK_UP, answer_id), _button(S["down"], FEEDBACK_DOWN, answer_id)]})
    return split(blocks, fallback=_fallback(d, L, S))


def _fallback(d: Diagnosis, L: dict, S: dict) -> str:
    top = d.top
    if top:
        return f"{top.title} ({top.failure_mode}) — {L['confidence']} {top.confidence:.2f}"
    if d.healthy:
        return L["healthy_title"]
    return L["answer"] if not d.abstained else S["out_of_scope"]


# -- splitting -------------------------------------------------------------------------------------


def _split_text(text: str, limit: int = CHUNK) -> list[str]:
    """Split mrkdwn at line breaks into pieces of at most ``limit`` characters; a code block cut in two
    is closed at the end of one piece and reopened in the next."""
    if len(text) <= limit:
        return [text]
    pieces: list[str] = []
    current: list[str] = []
    size = 0
    in_code = False
    reserve = 8  # room for a closing and an opening fence

    def flush() -> None:
        nonlocal current, size
        body = "\n".join(current)
        pieces.append(body + ("\n```" if in_code else ""))
        current = ["```"] if in_code else []
        size = 4 if in_code else 0

    for line in text.split("\n"):
        while len(line) > limit - reserve - 4:  # one very long line: hard-wrap it
            head, line = line[: limit - reserve - 8], line[limit - reserve - 8:]
            if size + len(head) + 1 > limit - reserve and current:
                flush()
            current.append(head)
            size += len(head) + 1
            flush()
        if size + len(line) + 1 > limit - reserve and current:
            flush()
        current.append(line)
        size += len(line) + 1
        if line.strip().startswith("```"):  # code inside is escaped and ``` broken up: only our fences start a line
            in_code = not in_code
    if current and any(x for x in current if x != "```"):
        pieces.append("\n".join(current))
    return pieces


def _text_of(block: dict) -> int:
    size = len(block.get("text", {}).get("text", "")) if isinstance(block.get("text"), dict) else 0
    return size + sum(len(el.get("text", "")) if isinstance(el.get("text"), str) else len(str(el)) for el in block.get("elements", []))


def split(blocks: list[dict], *, fallback: str) -> list[SlackMessage]:
    """Blocks into messages: long sections cut at line breaks, at most MAX_BLOCKS blocks and about
    MESSAGE_CHARS characters per message; the first message carries ``fallback`` as its text."""
    flat: list[dict] = []
    for block in blocks:
        if block["type"] == "section" and len(block["text"]["text"]) > CHUNK:
            flat.extend(_section(piece) for piece in _split_text(block["text"]["text"]))
        else:
            flat.append(block)
    messages: list[list[dict]] = [[]]
    size = 0
    for block in flat:
        n = _text_of(block)
        if messages[-1] and (len(messages[-1]) >= MAX_BLOCKS or size + n > MESSAGE_CHARS):
            messages.append([])
            size = 0
        messages[-1].append(block)
        size += n
    out = []
    for i, msg in enumerate(messages):
        text = fallback if i == 0 else f"{fallback} ({i + 1}/{len(messages)})"
        out.append(SlackMessage(text=_clip(text, FALLBACK_CHARS), blocks=msg))
    return out


def redact_blocks(value):
    """Every string posted passes the redactor (the input was redacted already; this guards the rest)."""
    if isinstance(value, str):
        return redact(value).text if value else value
    if isinstance(value, list):
        return [redact_blocks(v) for v in value]
    if isinstance(value, dict):
        return {k: (redact_blocks(v) if k in ("text", "elements", "fields", "value") or isinstance(v, (dict, list))
                    else v) for k, v in value.items()}
    return value


def notice_message(text: str) -> SlackMessage:
    """A one-section message (an error or a notice), already-safe mrkdwn ``text``."""
    return split([_section(text)], fallback=_clip(text.split("\n", 1)[0], FALLBACK_CHARS))[0]
