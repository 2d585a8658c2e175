"""trainfix core: diagnose failed LLM training runs from pasted errors, logs and questions.

>>> from assistant import Assistant
>>> d = Assistant(retrieval="never").diagnose("CUDA out of memory. Tried to allocate 2.00 GiB")
>>> d.candidates[0].failure_mode
'cuda-oom'

Importing this package loads no model, Chroma, torch or gradio; retrieval loads them on first use.
The stages are modules of their own (``assistant.triage.triage``, ``assistant.redact.redact``, ...).
"""

from assistant.api import Assistant, Exchange
from assistant.config import Settings
from assistant.diagnosis import CandidateView, CauseView, CodeView, Diagnosis, FixView, PassageView
from assistant.errors import InputError, KnowledgeBaseError, TrainfixError
from assistant.models import Evidence, FollowUp, Triage

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
