"""Export the sentence-transformers embedding model once to ONNX, so a fresh process embeds a query without torch.

``trainfix ingest`` (any index build) calls :func:`ensure_onnx`: it exports the configured model — transformer,
mean pooling and L2 normalisation all inside the graph — to ``<data_dir>/onnx/model-<fingerprint[:16]>.onnx``,
with the full model fingerprint, the max sequence length and the lower-casing flag in the file's metadata.
The export needs torch, sentence-transformers and the ``onnx`` package, and runs only when that file is missing,
unreadable or made from another model; the export is checked against sentence-transformers on a few texts before
it is kept. Queries then use :mod:`assistant.retrieval.onnx_embed` (onnxruntime + tokenizers); a model that is not
transformer + mean pooling is not exported and keeps embedding with sentence-transformers.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

from assistant.retrieval.onnx_embed import OnnxEmbedder, OnnxUnavailable, onnx_path

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

OPSET = 17
TOLERANCE = 1e-5  # max abs difference from sentence-transformers for the export to be kept
CHECK_TEXTS = ["CUDA out of memory. Tried to allocate 2.00 GiB", "显存不够怎么办", "", "loss is nan " * 200]


class ExportError(Exception):
    """The model cannot be exported (unsupported architecture, exporter missing, check failed)."""


def ensure_onnx(model: SentenceTransformer, model_dir: Path, fingerprint: str, onnx_dir: Path) -> tuple[Path, bool]:
    """``(path, exported)``: the model's ONNX file in ``onnx_dir``, exported now only if there is no usable one.

    Raises :class:`ExportError` if it cannot be exported; the caller then keeps using sentence-transformers.
    """
    path = onnx_path(onnx_dir, fingerprint)
    try:
        OnnxEmbedder.load(path, fingerprint, model_dir)
        return path, False
    except OnnxUnavailable:
        pass
    export(model, model_dir, fingerprint, path)
    for other in onnx_dir.glob("model-*.onnx"):  # exports of models no longer configured
        if other != path:
            with contextlib.suppress(OSError):
                other.unlink()
    return path, True


def _pooling_graph(model: SentenceTransformer):
    import torch

    modules = list(model)
    kinds = [type(m).__name__ for m in modules]
    if kinds[:2] != ["Transformer", "Pooling"] or any(k != "Normalize" for k in kinds[2:]):
        raise ExportError(f"only transformer + pooling (+ normalize) models are exported, not {' + '.join(kinds)}")
    pooling = modules[1]
    mode = pooling.get_pooling_mode_str() if hasattr(pooling, "get_pooling_mode_str") else pooling.pooling_mode
    if mode not in ("mean", ("mean",), ["mean"]):
        raise ExportError(f"only mean pooling is exported, not {mode}")
    transformer = modules[0].auto_model

    class MeanPooled(torch.nn.Module):
        # Wrapped, not exported bare: BertModel.forward's use_cache argument clashes with the exporter.
        def __init__(self) -> None:
            super().__init__()
            self.transformer = transformer

        def forward(self, input_ids, attention_mask, token_type_ids=None):
            kwargs = {"input_ids": input_ids, "attention_mask": attention_mask}
            if token_type_ids is not None:
                kwargs["token_type_ids"] = token_type_ids
            tokens = self.transformer(**kwargs, return_dict=False)[0]
            mask = attention_mask.unsqueeze(-1).to(tokens.dtype)
            mean = (tokens * mask).sum(1) / mask.sum(1).clamp(min=1e-9)  # as sentence-transformers' Pooling
            return torch.nn.functional.normalize(mean, p=2, dim=1)

    return MeanPooled().eval()


def export(model: SentenceTransformer, model_dir: Path, fingerprint: str, path: Path) -> None:
    """Export ``model`` to ``path`` (atomically), check it against sentence-transformers, or raise :class:`ExportError`."""
    import numpy as np
    import torch

    try:
        import onnx
    except ImportError as err:
        raise ExportError("the onnx package is not installed (pip install onnx)") from err
    graph = _pooling_graph(model)
    names = [n for n in ("input_ids", "attention_mask", "token_type_ids")
             if n in model.tokenizer.model_input_names]
    sample = model.tokenizer(["a short text", "a somewhat longer text to pad against"], padding=True,
                             return_tensors="pt")
    args = tuple(sample[n] for n in names)
    axes = {n: {0: "batch", 1: "tokens"} for n in names}
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".model-", suffix=".onnx", dir=path.parent)
    os.close(fd)
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the tracer's notes on Python control flow in the model code
            torch.onnx.export(graph, args, tmp, input_names=names, output_names=["embedding"],
                              dynamic_axes={**axes, "embedding": {0: "batch"}}, opset_version=OPSET,
                              dynamo=False, do_constant_folding=True)
        proto = onnx.load(tmp)
        meta = {"trainfix_fingerprint": fingerprint, "max_seq_length": str(model.max_seq_length),
                "do_lower_case": str(bool(getattr(model[0], "do_lower_case", False))).lower()}
        for key, value in meta.items():
            proto.metadata_props.add(key=key, value=value)
        onnx.save(proto, tmp)
        os.chmod(tmp, 0o644)
        mine = OnnxEmbedder.load(Path(tmp), fingerprint, model_dir)
        theirs = model.encode(CHECK_TEXTS, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)
        diff = float(np.abs(np.asarray(mine.embed(CHECK_TEXTS)) - theirs).max())
        if diff > TOLERANCE:
            raise ExportError(f"the ONNX export differs from sentence-transformers by {diff:.1e}")
        os.replace(tmp, path)
    except ExportError:
        raise
    except Exception as err:  # the exporter's many failure types: the caller falls back to sentence-transformers
        raise ExportError(f"{type(err).__name__}: {str(err)[:300]}") from err
    finally:
        Path(tmp).unlink(missing_ok=True)
