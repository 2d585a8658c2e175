"""Case memory: past incidents (``kb/cases/*.jsonl``) that vote for failure modes by similarity.

A case is a real report — the text as it was posted, its labels (``[]`` = not a training failure),
the fix that worked and a link. After the rules, the most similar cases are looked up and vote:
they propose modes when the rules are silent (machine output included, not only prose), re-rank
when the rules are weak, and their votes for "out of scope" feed the out-of-domain decision.

Similarity is lexical TF-IDF over identifiers, words and Chinese character bigrams, computed in
pure Python (no model, no torch): the rule path stays light, and machine output — exception names,
NCCL codes, tool names — is exactly what lexical overlap catches. A linear model trained on the same
vectors (:mod:`assistant.case_model`) adds what all the cases together say about words no single
close case shares. Cases are also indexed for
retrieval like every record (``ingest``), so questions find them through the embedding model too.
"""

from __future__ import annotations

import json
import math
import pickle
import sys
from array import array
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from assistant import fastre
from assistant.case_model import OUT_OF_SCOPE, CaseModel, fold, train
from assistant.errors import KnowledgeBaseError
from kb.taxonomy import MODE_IDS

K = 7  # neighbours that vote
MIN_SIMILARITY = 0.12  # below this a case is not "similar" at all
CLOSE = 0.45  # a case this similar is a close match: its vote is not damped, and it vouches for the text's domain
MIN_VOTE = 0.05  # a mode the model gives less than this is not a vote
MAX_CHARS = 20000  # text compared with the cases (the start and end of longer input)

# Identifiers (dotted names kept whole and split), words, numbers dropped; CJK runs as bigrams.
_TOKEN = fastre.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*|[\p{Han}]+")
_HAN = fastre.compile(r"^[\p{Han}]+$")
_STOP = frozenset(
    "the a an and or of to in on at for with is are was were be been it this that my i we you me our "
    "when from by as but not no have has had do does did can could would should will just so if then "
    "there here any some all get got use using used after before also very how what why which who "
    "please help thanks thank hi hello issue problem error".split()
)


class CaseRecord(BaseModel):
    """One past incident, in the labelled-case format (``tests/data/README.md``, ``LABELS.md``)."""

    model_config = ConfigDict(extra="ignore")
    id: str
    text: str = Field(min_length=1)
    labels: list[str] = Field(max_length=2)
    kind: str = "error"
    lang: str = "en"
    source: str = ""
    note: str = ""
    fix: str = ""
    file: str = Field(default="", exclude=True, description="the case file it was read from (set by load_cases)")
    line: int = Field(default=0, exclude=True, description="its line in that file")

    @field_validator("labels")
    @classmethod
    def _known(cls, v: list[str]) -> list[str]:
        for m in v:
            if m not in MODE_IDS:
                raise ValueError(f"unknown failure mode {m!r}")
        return v

    @property
    def link(self) -> str:
        """A URL for the source (``owner/repo#N`` becomes a GitHub issue link)."""
        s = self.source
        if s.startswith("http"):
            return s
        if "#" in s and "/" in s.split("#", 1)[0]:
            repo, num = s.split("#", 1)
            return f"https://github.com/{repo}/issues/{num}"
        return s


@dataclass(frozen=True)
class Neighbour:
    """A similar past incident."""

    case: CaseRecord
    similarity: float


@dataclass(frozen=True)
class CaseVotes:
    """What the nearest cases say: per-mode vote in [0, 1], the out-of-scope vote, the neighbours."""

    modes: dict[str, float]
    out_of_scope: float
    neighbours: tuple[Neighbour, ...]

    @property
    def close_failure(self) -> bool:
        """A training failure among the neighbours is a close match (similarity ≥ :data:`CLOSE`)."""
        return any(n.similarity >= CLOSE and n.case.labels for n in self.neighbours)

    @property
    def best(self) -> tuple[str | None, float]:
        if not self.modes:
            return None, 0.0
        mode = max(self.modes, key=lambda m: (self.modes[m], m))
        return mode, self.modes[mode]


EMPTY = CaseVotes({}, 0.0, ())


def tokens(text: str) -> list[str]:
    """Lower-cased terms for similarity: identifiers and their parts, words, Chinese bigrams."""
    out: list[str] = []
    for tok in _TOKEN.findall(text):
        if _HAN.match(tok):
            if len(tok) == 1:
                out.append(tok)
            out.extend(tok[i:i + 2] for i in range(len(tok) - 1))
            continue
        low = tok.lower()
        if "." in low:
            out.append(low)
            parts = low.split(".")
        else:
            parts = [low]
        for p in parts:
            if len(p) > 1 and p not in _STOP:
                out.append(p)
                if "_" in p:
                    out.extend(q for q in p.split("_") if len(q) > 1 and q not in _STOP)
    return out


def _excerpt(text: str) -> str:
    if len(text) <= MAX_CHARS:
        return text
    half = MAX_CHARS // 2
    return text[:half] + "\n" + text[-half:]


class CaseMemory:
    """The loaded cases with a TF-IDF index; :meth:`vote` finds the nearest ones."""

    def __init__(self, cases: Iterable[CaseRecord]) -> None:
        self._cases: tuple[CaseRecord, ...] | None = tuple(cases)
        self._blobs: list[bytes] = []  # each case pickled on its own, in a snapshot (see __getstate__)
        self._decoded: dict[int, CaseRecord] = {}
        self._sources = [c.source for c in self._cases]
        # Interned terms: one string object per term, so the pickled snapshot stores each term once.
        docs = [Counter(map(sys.intern, tokens(c.text))) for c in self._cases]
        df: Counter = Counter()
        for d in docs:
            df.update(d.keys())
        n = max(len(docs), 1)
        idf = {t: math.log((n + 1) / (f + 0.5)) for t, f in df.items()}
        vectors = [_vector(d, idf.get) for d in docs]
        # The index is term -> (case, weight) postings in three flat arrays: a snapshot of a few arrays loads ~8x
        # faster than a dict per case, and scoring reads each posting's weight in place (no lookup per case).
        postings: dict[str, list[int]] = {}
        for i, v in enumerate(vectors):
            for t in v:
                postings.setdefault(t, []).append(i)
        self._terms: dict[str, int] = {}
        self._offsets = array("q", [0])
        self._case_ids = array("i")
        self._weights = array("d")
        for t, ids in postings.items():
            self._terms[t] = len(self._terms)
            self._case_ids.extend(ids)
            self._weights.extend(vectors[i][t] for i in ids)
            self._offsets.append(len(self._case_ids))
        # One term -> row dict serves the postings, the IDF and the model's weights: a snapshot stores and loads it
        # once. A term with an IDF of zero or less is in no vector, so the IDF of the terms with postings is all a
        # query needs.
        self._idf = array("d", (idf[t] for t in self._terms))
        self._labels = [c.labels[0] if c.labels else OUT_OF_SCOPE for c in self._cases]
        self.model: CaseModel | None = self._aligned(train(vectors, self._labels))
        self._fold_models: dict[int, CaseModel | None] = {}

    def __getstate__(self) -> dict:
        # The cases go into the snapshot one pickle each and are decoded when first used: a vote needs only its few
        # neighbours, and decoding all ~2,000 records was a fifth of a cold `trainfix diagnose`.
        state = dict(self.__dict__)
        if self._cases is not None:
            state["_blobs"] = [pickle.dumps(c, protocol=pickle.HIGHEST_PROTOCOL) for c in self._cases]
        state.update(_cases=None, _decoded={}, _fold_models={})
        return state

    @property
    def cases(self) -> tuple[CaseRecord, ...]:
        """Every case, in index order."""
        if self._cases is None:
            self._cases = tuple(self.case(i) for i in range(len(self._labels)))
        return self._cases

    def case(self, i: int) -> CaseRecord:
        """Case ``i`` (decoded from the snapshot on first use)."""
        if self._cases is not None:
            return self._cases[i]
        found = self._decoded.get(i)
        if found is None:
            found = self._decoded[i] = pickle.loads(self._blobs[i])  # noqa: S301 - our own snapshot file
        return found

    def _aligned(self, model: CaseModel | None) -> CaseModel | None:
        """The model with its weight rows in the order of ``_terms``, sharing that dict as its index."""
        if model is None:
            return None
        k = len(model.classes)
        weights = array("d", bytes(8 * k * len(self._terms)))
        for term, row in model.index.items():
            j = self._terms[term]
            weights[j * k:(j + 1) * k] = model.weights[row * k:(row + 1) * k]
        return CaseModel(model.classes, self._terms, weights, model.intercept)

    def _vectors(self) -> list[dict[str, float]]:
        """Each case's TF-IDF vector, read back from the postings (only evaluation's fold models need them)."""
        vectors: list[dict[str, float]] = [{} for _ in self._labels]
        for t, j in self._terms.items():
            lo, hi = self._offsets[j], self._offsets[j + 1]
            for i, w in zip(self._case_ids[lo:hi], self._weights[lo:hi]):
                vectors[i][t] = w
        return vectors

    def _model_for(self, exclude: str | None) -> CaseModel | None:
        """The model, or when ``exclude`` is a source in the memory, the model of the folds without it."""
        if exclude is None or self.model is None or exclude not in self._sources:
            return self.model
        f = fold(exclude)
        if f not in self._fold_models:
            keep = [i for i, source in enumerate(self._sources) if fold(source) != f]
            vectors = self._vectors()
            self._fold_models[f] = train([vectors[i] for i in keep], [self._labels[i] for i in keep])
        return self._fold_models[f]

    def __len__(self) -> int:
        return len(self._labels)

    def _vector(self, counts: Counter) -> dict[str, float]:
        terms, idf = self._terms, self._idf
        return _vector(counts, lambda t: idf[terms[t]] if t in terms else 0.0)

    def nearest(self, text: str, k: int = K, *, exclude: str | None = None) -> list[Neighbour]:
        """The ``k`` most similar cases (cosine ≥ MIN_SIMILARITY), most similar first."""
        if not self._labels:
            return []
        return self._nearest(self._query(text), k, exclude)

    def _query(self, text: str) -> dict[str, float]:
        return self._vector(Counter(tokens(_excerpt(text))))

    def _nearest(self, q: dict[str, float], k: int, exclude: str | None) -> list[Neighbour]:
        scores: dict[int, float] = {}
        get = scores.get
        for t, w in q.items():
            j = self._terms.get(t)
            if j is None:
                continue
            lo, hi = self._offsets[j], self._offsets[j + 1]
            for i, x in zip(self._case_ids[lo:hi], self._weights[lo:hi]):
                scores[i] = get(i, 0.0) + w * x
        # only what clears the floor is sorted: most of a query's ~1,000 scored cases never do
        ranked = sorted(((i, s) for i, s in scores.items() if s >= MIN_SIMILARITY), key=lambda kv: (-kv[1], kv[0]))
        out = []
        for i, s in ranked:
            if exclude is not None and self._sources[i] == exclude:
                continue
            out.append(Neighbour(self.case(i), round(s, 4)))
            if len(out) >= k:
                break
        return out

    def vote(self, text: str, *, exclude: str | None = None) -> CaseVotes:
        """Votes of the nearest cases, combined with the case model's probabilities.

        A mode's neighbour vote is the share of the neighbours' similarity that carries it (a second
        label counts half), scaled by how similar the closest carrier is — ten weak neighbours never
        add up to one close match. The model (:mod:`assistant.case_model`) gives a probability per mode
        and for "out of scope"; each vote is the larger of the two. ``exclude`` leaves out cases from
        one source, and scores with the model of the folds without it (leave-one-out scoring).
        """
        if not self._labels:
            return EMPTY
        q = self._query(text)
        neighbours = self._nearest(q, K, exclude)
        model = self._model_for(exclude)
        knn = _knn_votes(neighbours)
        if model is None or not q:
            return knn
        p = model.predict(q)
        return _combine(knn, p, neighbours)


def _vector(counts: Counter, idf: Callable[[str], float | None]) -> dict[str, float]:
    """The unit-length TF-IDF vector of term counts (terms of no positive weight left out)."""
    vec = {t: (1.0 + math.log(c)) * (idf(t) or 0.0) for t, c in counts.items()}
    vec = {t: w for t, w in vec.items() if w > 0}
    norm = math.sqrt(sum(w * w for w in vec.values())) or 1.0
    return {t: w / norm for t, w in vec.items()}


def _knn_votes(neighbours: list[Neighbour]) -> CaseVotes:
    """The similarity-weighted vote of the neighbours (see :meth:`CaseMemory.vote`)."""
    if not neighbours:
        return EMPTY
    total = sum(n.similarity for n in neighbours)
    weight: dict[str, float] = {}
    closest: dict[str, float] = {}
    oos = 0.0
    oos_closest = 0.0
    for n in neighbours:
        if not n.case.labels:
            oos += n.similarity
            oos_closest = max(oos_closest, n.similarity)
            continue
        for j, mode in enumerate(n.case.labels):
            weight[mode] = weight.get(mode, 0.0) + n.similarity * (1.0 if j == 0 else 0.5)
            closest[mode] = max(closest.get(mode, 0.0), n.similarity)
    modes = {m: round(_strength(w / total, closest[m]), 4) for m, w in weight.items()}
    return CaseVotes(modes, round(_strength(oos / total, oos_closest), 4) if oos else 0.0, tuple(neighbours))


def _combine(knn: CaseVotes, p: dict[str, float], neighbours: list[Neighbour]) -> CaseVotes:
    """Per mode (and for "out of scope") the larger of the neighbours' vote and the model's probability.

    The model generalises across reports; the neighbours keep what one close past incident says (a
    team's own incident, phrased its own way, that one example cannot teach the model). Measured on
    the dev split (thread-wise folds) the maximum beat the model alone and the mean.
    """
    modes = dict(knn.modes)
    for m, v in p.items():
        if m != OUT_OF_SCOPE and v >= MIN_VOTE:
            modes[m] = max(modes.get(m, 0.0), round(v, 4))
    return CaseVotes(modes, max(knn.out_of_scope, round(p.get(OUT_OF_SCOPE, 0.0), 4)), tuple(neighbours))


def _strength(share: float, closest: float) -> float:
    """Vote in [0, 1]: the share of similarity, damped when even the closest case is only loosely similar."""
    return share * min(1.0, closest / CLOSE)


def load_cases(cases_dir: Path) -> list[CaseRecord]:
    """Every ``*.jsonl`` file under ``cases_dir``; a bad line is a :class:`KnowledgeBaseError` with file and line."""
    out: list[CaseRecord] = []
    if not cases_dir.is_dir():
        return out
    seen: set[str] = set()
    for path in sorted(cases_dir.glob("*.jsonl")):
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                case = CaseRecord.model_validate(json.loads(line)).model_copy(update={"file": path.name, "line": n})
            except (json.JSONDecodeError, ValidationError) as err:
                raise KnowledgeBaseError(f"{path.name}:{n}: not a valid case: {err}") from None
            if case.id in seen:
                raise KnowledgeBaseError(f"{path.name}:{n}: duplicate case id {case.id!r}")
            seen.add(case.id)
            out.append(case)
    return out


@lru_cache(maxsize=4)
def case_memory(cases_dir: Path) -> CaseMemory:
    """The case memory of a knowledge base directory (``<kb>/cases``), loaded once per process
    (from a snapshot keyed by the case files' content when one exists)."""
    from assistant.snapshot import cached, files_under

    cases_dir = Path(cases_dir)
    return cached("cases", files_under(cases_dir, ("*.jsonl",)), lambda: CaseMemory(load_cases(cases_dir)))
