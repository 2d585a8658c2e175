"""A :class:`~assistant.checklist.CheckReport` as text: one line per checklist item, then the cited guide lines."""

from __future__ import annotations

from assistant.checklist import CheckReport

MARK = {"ok": "ok  ", "flag": "FLAG", "manual": "todo"}
MARK_ZH = {"ok": "通过", "flag": "问题", "manual": "待查"}


def render_check(report: CheckReport, lang: str = "en", *, name: str = "config",
                 titles: dict[str, str] | None = None) -> str:
    """Plain text: a verdict line, each item (status, what the config says) with its source number, the sources
    (named by the document's title from ``titles``, source file → title, where known)."""
    n = len(report.flagged)
    if lang == "zh":
        head = f"{name}：对照指南 §8 启动前检查清单，{n} 项有问题" if n else f"{name}：符合指南 §8 启动前检查清单"
        regime = f"学习率按{'LoRA' if report.regime == 'lora' else '全量微调'}判断（{report.regime_why}）"
    else:
        head = (f"{name}: {n} item(s) of the guide's pre-launch checklist (§8) flagged" if n
                else f"{name}: follows the guide's pre-launch checklist (§8)")
        regime = f"learning rate judged as {'LoRA' if report.regime == 'lora' else 'full fine-tuning'} ({report.regime_why})"
    lines = [head, regime, ""]
    for i, item in enumerate(report.items, start=1):
        mark = (MARK_ZH if lang == "zh" else MARK)[item.status]
        guide = item.guide_zh if lang == "zh" else item.guide_en
        lines.append(f"[{mark}] {guide} [{i}]")
        lines.append(f"       {item.zh if lang == 'zh' else item.en}")
    lines.append("")
    lines.append("来源" if lang == "zh" else "Sources")
    for i, item in enumerate(report.items, start=1):
        c = item.citation
        title = (titles or {}).get(c.source)
        label = f"{title} {c.label().removeprefix(c.source).strip()} ({c.source})" if title else c.label()
        lines.append(f"[{i}] {label} — “{c.quote}”")
    return "\n".join(lines)
