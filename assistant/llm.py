"""Optional LLM rephrasing (extra ``llm``): a chat model may retell the answer, only from its cited sources.

The deterministic answer is always built first. The model sees that answer (evidence already
redacted, sources numbered) and the user's message (redacted); its output must cite at least one of
those sources and no other, or it is discarded and the deterministic answer stands alone.
"""

from __future__ import annotations

from pathlib import Path

import re2

from assistant.config import Settings
from assistant.diagnosis import Diagnosis
from assistant.redact import redact

PROMPT = Path(__file__).resolve().parent.parent / "kb" / "prompts" / "rephrase.md"
MAX_MESSAGE_CHARS = 4000
_MARKER = re2.compile(r"\[(\d{1,3})\]")
# Markup a retelling of the sources never needs, but a paste that instructs the model could make it emit:
# HTML or Slack control sequences (<img onerror>, <!channel>), Markdown links and images (a phishing link, an
# image URL that carries the conversation away), bare URLs (linkified by the chat).
_MARKUP = re2.compile(r"(?i)<[a-z!/?@#]|\]\(|!\[|\b(?:https?|ftp|file)://|\bwww\.|javascript:")
_LANGUAGE = {"zh": "Simplified Chinese", "en": "English"}


class RephraseRejected(Exception):
    """The model's output could not be used (no valid citation, unknown marker, empty)."""


def describe(d: Diagnosis) -> str:
    """A plain-text digest of the diagnosis whose markers ``[n]`` index ``d.citations``."""
    out: list[str] = []
    if d.abstained:
        out.append("No confident match in the knowledge base.")
    for i, c in enumerate(d.candidates):
        head = "Diagnosis" if i == 0 else "Also possible"
        out.append(f"{head}: {c.title} ({c.failure_mode}), confidence {c.confidence:.2f}")
        out.extend(f"  evidence line {ev.line}: {ev.text[:300]}" for ev in c.evidence[:5])
        if i:
            continue
        out.extend(f"  cause: {x.text} (score {x.score:.2f}) [{x.cite}]" for x in c.causes[:4])
        out.extend(f"  fix {f.priority}: {f.text or 'code'} [{f.cite}]" for f in c.fixes[:5])
    for fu in d.follow_up:
        out.append(f"Follow-up question: {fu.question_zh if d.language == 'zh' else fu.question_en}")
    for p in d.passages:
        out.append(f"Passage: {p.title}: {p.excerpt[:300]} [{p.cite}]")
    out.append("Sources:")
    out.extend(f"[{n}] {c.label()} ({c.source_kind}): {c.quote[:200]}" for n, c in enumerate(d.citations, 1))
    return "\n".join(out)


def build_messages(diagnosis: Diagnosis, message: str) -> list[tuple[str, str]]:
    """The (role, content) messages sent to the model; secrets in ``message`` are redacted."""
    system = PROMPT.read_text(encoding="utf-8").replace("{language}", _LANGUAGE[diagnosis.language])
    user = redact(message[:MAX_MESSAGE_CHARS]).text
    return [
        ("system", system),
        ("human", f"Engineer's message:\n{user}\n\nDiagnosis by trainfix:\n{describe(diagnosis)}"),
    ]


def check(output: str, sources: int) -> str:
    """``output`` if it cites at least one source and only sources 1..``sources``; else :class:`RephraseRejected`."""
    text = output.strip()
    if not text:
        raise RephraseRejected("the model returned nothing")
    markers = {int(m) for m in _MARKER.findall(text)}
    if not markers:
        raise RephraseRejected("the model's answer cites no source")
    unknown = sorted(m for m in markers if not 1 <= m <= sources)
    if unknown:
        raise RephraseRejected(f"the model cited sources that do not exist: {unknown}")
    if _MARKUP.search(text):
        raise RephraseRejected("the model's answer contains HTML, a link or an image, which a retelling of the "
                               "sources never needs")
    return text


def rephrase(diagnosis: Diagnosis, message: str, settings: Settings) -> str:
    """Ask the configured chat model to retell ``diagnosis``; raises on any failure (caller falls back)."""
    from langchain.chat_models import init_chat_model

    kwargs: dict = {"timeout": settings.llm_timeout, "max_retries": 0, "temperature": 0}
    if settings.llm_base_url:
        kwargs["base_url"] = settings.llm_base_url
    if settings.llm_api_key is not None:
        kwargs["api_key"] = settings.llm_api_key.get_secret_value()
    model = init_chat_model(settings.llm_model, **kwargs)
    reply = model.invoke(build_messages(diagnosis, message))
    return check(str(reply.text), len(diagnosis.citations))  # .text joins the message's text blocks
