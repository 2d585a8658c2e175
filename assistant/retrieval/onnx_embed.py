"""Embed texts with the model's ONNX export (onnxruntime + tokenizers, both installed with chromadb): no torch.

The file is written by :mod:`assistant.retrieval.onnx_export` at ingest. Its metadata names the model fingerprint
it was made from and the tokenisation sentence-transformers used (max sequence length, lower-casing); texts are
stripped, tokenised with the model directory's ``tokenizer.json``, truncated and padded exactly as
sentence-transformers does, so the vectors agree with it to ~1e-7. A file that is missing, unreadable or made
from another model raises :class:`OnnxUnavailable`, and the caller embeds with sentence-transformers instead.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BATCH_SIZE = 32


class OnnxUnavailable(Exception):
    """No usable ONNX export for this model (missing, unreadable, stale): use sentence-transformers."""


def onnx_path(onnx_dir: Path, fingerprint: str) -> Path:
    """Where the export of the model with ``fingerprint`` lives."""
    return Path(onnx_dir) / f"model-{fingerprint[:16]}.onnx"


def _pad(model_dir: Path, tokenizer: Any) -> tuple[int, str]:
    if tokenizer.padding:
        return tokenizer.padding["pad_id"], tokenizer.padding["pad_token"]
    token = "[PAD]"
    config = model_dir / "tokenizer_config.json"
    if config.is_file():
        value = json.loads(config.read_text(encoding="utf-8")).get("pad_token")
        token = value.get("content", token) if isinstance(value, dict) else (value or token)
    pad_id = tokenizer.token_to_id(token)
    return (pad_id if pad_id is not None else 0), token


@dataclass
class OnnxEmbedder:
    """An onnxruntime session over the export plus the model's tokenizer, set up as sentence-transformers'."""

    session: Any
    tokenizer: Any
    inputs: list[str]
    lower: bool
    pad_id: int
    dimensions: int

    @classmethod
    def load(cls, path: Path, fingerprint: str, model_dir: Path) -> OnnxEmbedder:
        """The export at ``path`` if it was made from the model with ``fingerprint``; else :class:`OnnxUnavailable`."""
        if not Path(path).is_file():
            raise OnnxUnavailable(f"no ONNX export at {path}")
        try:
            import onnxruntime
            from tokenizers import Tokenizer
        except ImportError as err:
            raise OnnxUnavailable(f"onnxruntime or tokenizers is not installed ({err})") from err
        options = onnxruntime.SessionOptions()
        options.log_severity_level = 3  # no warnings on stderr for a file we may reject anyway
        try:
            session = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        except Exception as err:  # onnxruntime raises its own types (InvalidProtobuf, Fail, ...) for a bad file
            raise OnnxUnavailable(f"unreadable ONNX export {path}: {type(err).__name__}") from err
        meta = session.get_modelmeta().custom_metadata_map
        if meta.get("trainfix_fingerprint") != fingerprint:
            raise OnnxUnavailable(f"the ONNX export {path} was made from another model")
        try:
            max_length = int(meta["max_seq_length"])
            tokenizer = Tokenizer.from_file(str(Path(model_dir) / "tokenizer.json"))
        except Exception as err:  # a missing key, a bad number, no tokenizer.json (tokenizers raises a bare Exception)
            raise OnnxUnavailable(f"cannot set up the tokenizer for {path}: {type(err).__name__}: {err}") from err
        pad_id, _ = _pad(Path(model_dir), tokenizer)
        tokenizer.enable_truncation(max_length=max_length)  # sentence-transformers: truncation=True, its max_seq_length
        tokenizer.no_padding()  # each batch is padded to its longest text in embed_array, as the tokenizer would
        inputs = [i.name for i in session.get_inputs()]
        dimensions = session.get_outputs()[0].shape[-1]
        if not isinstance(dimensions, int):
            raise OnnxUnavailable(f"the ONNX export {path} does not say its vector size")
        return cls(session, tokenizer, inputs, meta.get("do_lower_case") == "true", pad_id, dimensions)

    def embed(self, texts: list[str]) -> list[list[float]]:
        """Unit-length vectors for ``texts`` (batched by length, returned in order)."""
        return self.embed_array(texts).tolist()

    def embed_array(self, texts: list[str], progress: Callable[[int], None] | None = None) -> Any:
        """``embed`` as one float32 array (row i is text i); ``progress`` gets the number of texts done so far.

        Every text is tokenised first and the batches are made of texts of similar token count, so little
        compute goes to padding (sorting by characters is a poor proxy: a Chinese character is one token, an
        English word about one, and a case past the 256-token window is cut there). Each batch is padded to its
        longest text exactly as the tokenizer pads (pad id, attention 0, token type 0).
        """
        import numpy as np

        prepared = [str(t).strip() for t in texts]  # sentence-transformers strips each text before tokenising
        if self.lower:
            prepared = [t.lower() for t in prepared]
        if not prepared:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        encodings = self.tokenizer.encode_batch(prepared)  # truncated, not padded
        ids = [e.ids for e in encodings]
        types = [e.type_ids for e in encodings]
        order = sorted(range(len(ids)), key=lambda i: (-len(ids[i]), i))
        out = np.zeros((len(ids), self.dimensions), dtype=np.float32)
        for start in range(0, len(order), BATCH_SIZE):
            batch = order[start:start + BATCH_SIZE]
            width = len(ids[batch[0]])  # the longest of the batch: sorted
            input_ids = np.full((len(batch), width), self.pad_id, dtype=np.int64)
            attention = np.zeros((len(batch), width), dtype=np.int64)
            token_types = np.zeros((len(batch), width), dtype=np.int64)
            for row, i in enumerate(batch):
                n = len(ids[i])
                input_ids[row, :n] = ids[i]
                attention[row, :n] = 1
                token_types[row, :n] = types[i]
            feeds = {"input_ids": input_ids, "attention_mask": attention, "token_type_ids": token_types}
            (vectors,) = self.session.run(None, {k: v for k, v in feeds.items() if k in self.inputs})
            out[batch] = vectors
            if progress is not None:
                progress(start + len(batch))
        return out
