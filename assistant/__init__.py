"""trainfix core: diagnose failed LLM training runs from pasted errors, logs and questions.

>>> from assistant import Assistant
>>> d = Assistant(retrieval="never").diagnose("CUDA out of memory. Tried to allocate 2.00 GiB")
>>> d.candidates[0].failure_mode
'cuda-oom'

Importing this package loads no model, Chroma, torch or gradio; retrieval loads them on first use.
The stages are modules of their own (``assistant.triage.triage``, ``assistant.redact.redact``, ...).
"""

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from assistant.api import Assistant, Exchange
    from assistant.config import Settings
    from assistant.diagnosis import CandidateView, CauseView, CodeView, Diagnosis, FixView, PassageView
    from assistant.errors import InputError, KnowledgeBaseError, TrainfixError
    from assistant.models import Evidence, FollowUp, Triage

# Where each public name lives: imported on first use, so ``import assistant.errors`` (the CLI's first
# import) does not pay for the whole core.
_HOME = {
    "Assistant": "api", "Exchange": "api", "Settings": "config",
    "CandidateView": "diagnosis", "CauseView": "diagnosis", "CodeView": "diagnosis", "Diagnosis": "diagnosis",
    "FixView": "diagnosis", "PassageView": "diagnosis",
    "InputError": "errors", "KnowledgeBaseError": "errors", "TrainfixError": "errors",
    "Evidence": "models", "FollowUp": "models", "Triage": "models",
}


def __getattr__(name: str):
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'assistant' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"assistant.{home}"), name)
    globals()[name] = value
    return value


__all__ = [
    "Assistant",
    "CandidateView",
    "CauseView",
    "CodeView",
    "Diagnosis",
    "Evidence",
    "Exchange",
    "FixView",
    "FollowUp",
    "InputError",
    "KnowledgeBaseError",
    "PassageView",
    "Settings",
    "TrainfixError",
    "Triage",
]


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
