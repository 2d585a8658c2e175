"""The guide's pre-launch checklist (§8) run against a training config: each item ok, flagged or manual, cited.

The items are data (``kb/checklist.yaml``); each citation is the checklist line itself, found in the guide by
its verbatim text when the checklist is loaded. A config is any mapping: ``TrainingArguments.to_dict()`` (or
the JSON of ``args.to_json_string()``), an axolotl / LLaMA-Factory YAML, a DeepSpeed JSON; keys are looked up
by name at any depth (``bf16.enabled`` in DeepSpeed, ``learning_rate`` at the top).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field

from assistant.errors import InputError, KnowledgeBaseError
from kb.schema import Citation
from kb.yamlio import load_yaml

__all__ = ["CheckItem", "CheckReport", "check_config", "load_config", "load_checklist"]

Status = Literal["ok", "flag", "manual"]
_LORA_KEYS = {"lora_r", "lora_rank", "lora_alpha", "lora_dropout", "lora_target_modules", "lora_target", "use_lora",
              "peft_config", "lora_config", "lora_model_dir"}
_METHOD_KEYS = {"adapter", "finetuning_type", "peft_type", "training_type", "tuning_type", "train_type", "method"}
_LR_KEYS = ("learning_rate", "lr")
_CLIP_KEYS = ("max_grad_norm", "gradient_clipping", "clip_grad_norm", "grad_clip", "clip_grad", "max_norm",
              "gradient_clip_val")
_EVAL_STRATEGY = ("eval_strategy", "evaluation_strategy")
_EVAL_STEPS = ("eval_steps", "eval_interval", "val_check_interval")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CheckItem(_Model):
    """One checklist line and what the config says about it."""

    id: str
    status: Status = Field(description="ok, flag (does not follow the checklist) or manual (a config cannot show it)")
    guide_zh: str = Field(description="the checklist line, verbatim")
    guide_en: str
    en: str = Field(description="what the config says, and what to change")
    zh: str
    found: dict[str, str] = Field(default={}, description="the config keys read, as written")
    citation: Citation


class CheckReport(_Model):
    """The checklist run on one config; ``regime`` is how the learning rate was judged (LoRA or full fine-tune)."""

    items: list[CheckItem]
    regime: Literal["lora", "full"]
    regime_why: str

    @property
    def flagged(self) -> list[CheckItem]:
        return [i for i in self.items if i.status == "flag"]


class _Spec(_Model):
    model_config = ConfigDict(extra="allow")
    id: str
    quote: str
    check: Literal["manual", "learning-rate", "grad-clipping", "bf16", "eval-interval"]
    en: str | None = None
    zh: str | None = None


@lru_cache(maxsize=4)
def load_checklist(kb_dir: Path) -> tuple[tuple[_Spec, Citation, str], ...]:
    """The checklist items with their citations and English; a quote not found in the guide's §8 is an error."""
    path = kb_dir / "checklist.yaml"
    try:
        data = load_yaml(path)
        specs = [_Spec.model_validate(x) for x in data["items"]]
        source, section, heading = data["source"], str(data["section"]), data["heading"]
        lines = (kb_dir / "sources" / source).read_text(encoding="utf-8").splitlines()
        english = load_yaml(kb_dir / "translations" / (Path(source).stem + ".en.yaml")) or {}
    except (OSError, KeyError, TypeError, ValueError, yaml.YAMLError) as err:
        raise KnowledgeBaseError(f"{path}: cannot load the checklist ({err})") from None
    start = next((i for i, ln in enumerate(lines) if ln.strip().startswith(f"{section}.") and heading in ln), None)
    if start is None:
        raise KnowledgeBaseError(f"{path}: section {section} {heading} not found in {source}")
    out = []
    for spec in specs:
        at = next((i for i in range(start, len(lines)) if lines[i].strip() == spec.quote), None)
        if at is None:
            raise KnowledgeBaseError(f"{path}: item {spec.id}: {spec.quote!r} is not a line of §{section} in {source}")
        if spec.quote not in english:
            raise KnowledgeBaseError(f"{path}: item {spec.id}: no English for {spec.quote!r} in kb/translations")
        cite = Citation(source=source, source_kind="guide", section=section, heading=heading, start_line=at + 1,
                        end_line=at + 1, quote=spec.quote)
        out.append((spec, cite, english[spec.quote]))
    return tuple(out)


def load_config(path: str | Path) -> dict[str, Any]:
    """A config file (JSON or YAML) as a mapping; anything else is an :class:`InputError`."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"file not found: {path}") from None
    except IsADirectoryError:
        raise InputError(f"{path} is a directory, not a config file") from None
    except (UnicodeDecodeError, PermissionError) as err:
        hint = " (a training_args.bin is a pickle: save args.to_json_string() to a .json instead)" \
            if path.suffix == ".bin" else ""
        raise InputError(f"cannot read {path} as a text config: {type(err).__name__}{hint}") from None
    try:
        data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as err:
        raise InputError(f"{path} is not valid {'JSON' if path.suffix == '.json' else 'YAML/JSON'}: "
                         f"{str(err).splitlines()[0][:200]}") from None
    if not isinstance(data, Mapping):
        raise InputError(f"{path} holds no key/value config (got {type(data).__name__})")
    return dict(data)


def _leaves(value: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(value, Mapping):
        for k, v in value.items():
            key = f"{prefix}.{k}" if prefix else str(k)
            yield key, v
            yield from _leaves(v, key)


class _Config:
    def __init__(self, config: Mapping[str, Any]) -> None:
        self.items = list(_leaves(config))

    def get(self, *names: str) -> tuple[str, Any] | None:
        """The first ``(dotted key, value)`` whose last part is one of ``names`` (top level first), set to something."""
        hits = [(k, v) for k, v in self.items if k.rsplit(".", 1)[-1].lower() in names and v is not None]
        hits.sort(key=lambda kv: kv[0].count("."))
        for k, v in hits:
            if isinstance(v, Mapping) and "enabled" in v:
                return f"{k}.enabled", v["enabled"]
            if not isinstance(v, Mapping):
                return k, v
        return None


def _num(v: Any) -> float | None:
    if isinstance(v, bool):
        return None
    try:
        x = float(v)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def _on(v: Any) -> bool:
    if isinstance(v, str):
        return v.strip().lower() in ("true", "1", "yes", "auto", "on")
    return bool(v)


def _show(v: Any) -> str:
    return json.dumps(v) if not isinstance(v, str) else v


def check_config(config: Mapping[str, Any] | Any, *, kb_dir: Path | None = None) -> CheckReport:
    """Run the pre-launch checklist on ``config`` (a mapping, or an object with ``to_dict()`` such as TrainingArguments)."""
    from assistant.config import KB_DIR

    if not isinstance(config, Mapping) and hasattr(config, "to_dict"):
        config = config.to_dict()
    if not isinstance(config, Mapping):
        raise InputError(f"a config must be a mapping, got {type(config).__name__}")
    cfg = _Config(config)
    regime, why = _regime(cfg)
    items: list[CheckItem] = []
    for spec, cite, en_line in load_checklist(Path(kb_dir or KB_DIR).resolve()):
        if spec.check == "manual":
            status, en, zh, found = "manual", spec.en or "", spec.zh or "", {}
        else:
            status, en, zh, found = _CHECKS[spec.check](cfg, spec.model_extra or {}, regime, why)
        items.append(CheckItem(id=spec.id, status=status, guide_zh=spec.quote, guide_en=en_line, en=en, zh=zh,
                               found=found, citation=cite))
    return CheckReport(items=items, regime=regime, regime_why=why)


def _regime(cfg: _Config) -> tuple[Literal["lora", "full"], str]:
    for k, v in cfg.items:
        leaf = k.rsplit(".", 1)[-1].lower()
        if leaf in _LORA_KEYS and v not in (None, False, "", 0, {}):
            return "lora", f"{k}={_show(v)}"
        if leaf in _METHOD_KEYS and isinstance(v, str) and v.strip().lower() in ("lora", "qlora", "dora"):
            return "lora", f"{k}={v}"
        if leaf == "use_peft" and _on(v):
            return "lora", f"{k}={_show(v)}"
    return "full", "no LoRA/PEFT setting in the config"


def _learning_rate(cfg: _Config, p: dict, regime: str, why: str):
    lo, hi = p[regime]
    hit = cfg.get(*_LR_KEYS)
    name = "LoRA" if regime == "lora" else "full fine-tuning"
    name_zh = "LoRA" if regime == "lora" else "全量微调"
    if hit is None or _num(hit[1]) is None:
        lr, found, said, said_zh = p["default"], {}, f"not set (TrainingArguments default {p['default']:g})", \
            f"未设置（TrainingArguments 默认 {p['default']:g}）"
    else:
        lr, found = _num(hit[1]), {hit[0]: _show(hit[1])}
        said, said_zh = f"{hit[0]}={lr:g}", f"{hit[0]}={lr:g}"
    if lo <= lr <= hi:
        return "ok", f"{said}: within the {name} range {lo:g}–{hi:g} ({why}).", \
            f"{said_zh}：在{name_zh}的范围 {lo:g}–{hi:g} 内（{why}）。", found
    side = "above" if lr > hi else "below"
    risk = "loss spikes, divergence and NaN are likely" if lr > hi else "training will barely move"
    risk_zh = "容易出现 loss 尖峰、发散和 NaN" if lr > hi else "训练几乎不会有进展"
    return "flag", f"{said}: {side} the {name} range {lo:g}–{hi:g} ({why}); {risk}. Set it within the range.", \
        f"{said_zh}：{'高于' if lr > hi else '低于'}{name_zh}的范围 {lo:g}–{hi:g}（{why}）；{risk_zh}。请设在该范围内。", found


def _grad_clipping(cfg: _Config, p: dict, regime: str, why: str):
    hit = cfg.get(*_CLIP_KEYS)
    limit = p["max_norm"]
    if hit is None:
        return "ok", f"not set: TrainingArguments clips at its default max_grad_norm={p['default']:g}.", \
            f"未设置：TrainingArguments 默认 max_grad_norm={p['default']:g}，已裁剪。", {}
    key, raw = hit
    v = _num(raw)
    found = {key: _show(raw)}
    if v is None or v <= 0:
        return "flag", f"{key}={_show(raw)}: gradient clipping is off; set it to {limit:g}.", \
            f"{key}={_show(raw)}：梯度裁剪未启用；请设为 {limit:g}。", found
    if v > limit:
        return "flag", f"{key}={v:g}: looser than the checklist's max_norm={limit:g}, so large gradients pass; set {limit:g}.", \
            f"{key}={v:g}：比清单要求的 max_norm={limit:g} 宽松，大梯度会通过；请设为 {limit:g}。", found
    return "ok", f"{key}={v:g}: gradient clipping is on.", f"{key}={v:g}：梯度裁剪已启用。", found


def _bf16(cfg: _Config, p: dict, regime: str, why: str):
    bf = cfg.get("bf16", "bf16_enabled")
    fp = cfg.get("fp16", "fp16_enabled", "half")
    mixed = cfg.get("mixed_precision", "precision")
    found = {h[0]: _show(h[1]) for h in (bf, fp, mixed) if h}
    mixed_v = str(mixed[1]).lower() if mixed else ""
    if (bf and _on(bf[1])) or mixed_v.startswith("bf16"):
        return "ok", "BF16 mixed precision is on.", "已启用 BF16 混合精度。", found
    if (fp and _on(fp[1])) or mixed_v.startswith(("fp16", "16")):
        return "flag", "FP16 is on: its narrow range overflows (inf/NaN loss, a collapsing loss scale); use bf16=True " \
                       "(and fp16=False) on GPUs that support it.", \
            "启用了 FP16：数值范围窄，容易溢出（inf/NaN loss、loss scale 崩塌）；在支持的 GPU 上改用 bf16=True（并设 fp16=False）。", found
    return "flag", "no mixed precision set (FP32): slower and more memory; set bf16=True.", \
        "没有设置混合精度（FP32）：更慢、更占显存；请设 bf16=True。", found


def _eval_interval(cfg: _Config, p: dict, regime: str, why: str):
    strategy = cfg.get(*_EVAL_STRATEGY)
    steps = cfg.get(*_EVAL_STEPS)
    per_epoch = cfg.get("evals_per_epoch")
    found = {h[0]: _show(h[1]) for h in (strategy, steps, per_epoch) if h}
    s = str(strategy[1]).lower() if strategy else ""
    if per_epoch and (_num(per_epoch[1]) or 0) > p["max_per_epoch"]:
        n = _num(per_epoch[1])
        return "flag", f"{per_epoch[0]}={n:g}: evaluating more than {p['max_per_epoch']} times an epoch slows training; " \
                       "evaluate less often.", \
            f"{per_epoch[0]}={n:g}：每个 epoch 评估超过 {p['max_per_epoch']} 次会拖慢训练；请降低评估频率。", found
    if s in ("no", "none", "epoch", "intervalstrategy.no", "intervalstrategy.epoch") or (not s and steps is None):
        what = "once an epoch" if "epoch" in s else "no periodic evaluation"
        what_zh = "每个 epoch 一次" if "epoch" in s else "没有周期性评估"
        return "ok", f"{what}: not too frequent.", f"{what_zh}：不算频繁。", found
    if steps is None:
        n = p["default_steps"]
        logging = cfg.get("logging_steps")
        if logging and _num(logging[1]):
            n = _num(logging[1])
        key = "eval_steps (defaults to logging_steps)"
    else:
        key, n = steps[0], _num(steps[1])
    if n is None:
        return "ok", f"{key}: not a number; nothing to check.", f"{key}：不是数字，无法检查。", found
    if 0 < n < 1:  # a ratio of the total training steps
        if 1 / n > p["max_per_epoch"] * 5:
            return "flag", f"{key}={n:g}: an evaluation every {n:.1%} of training ({1 / n:.0f} in all); evaluate less often.", \
                f"{key}={n:g}：每训练 {n:.1%} 就评估一次（共 {1 / n:.0f} 次）；请降低评估频率。", found
        return "ok", f"{key}={n:g}: an evaluation every {n:.0%} of training.", f"{key}={n:g}：每训练 {n:.0%} 评估一次。", found
    if n < p["min_steps"]:
        return "flag", f"{key}={n:g}: an evaluation every {n:g} steps is too frequent (it costs training time); " \
                       f"use at least {p['min_steps']}.", \
            f"{key}={n:g}：每 {n:g} 步评估一次过于频繁（占用训练时间）；至少设为 {p['min_steps']}。", found
    return "ok", f"{key}={n:g}: an evaluation every {n:g} steps.", f"{key}={n:g}：每 {n:g} 步评估一次。", found


_CHECKS = {"learning-rate": _learning_rate, "grad-clipping": _grad_clipping, "bf16": _bf16,
           "eval-interval": _eval_interval}
