"""Grounding documents for design calls: one freshly sampled document per call.

``Corpus`` holds a list of ``Document(id, text)`` and hands them out in a seeded random order
without replacement (a new permutation after each full pass), so consecutive design calls read
different documents; its ``cursor`` is saved with the engineer state so a resumed run continues
the same order.

Sources (``CorpusConfig.sources``): JSONL files (one object per line), Parquet files (pyarrow),
Hugging Face datasets saved on local disk (``datasets.load_from_disk``), or Hub datasets
(``hf_hub``: the first ``max_docs`` rows streamed with ``datasets.load_dataset``). Documents shorter
than ``min_doc_chars`` are skipped and the text is cut to ``max_doc_chars`` in the prompt.

A Hub source the machine cannot reach (``HF_HUB_OFFLINE`` / ``HF_DATASETS_OFFLINE`` set, no
connection to the Hub, or a failed download) follows its ``on_unavailable``: ``error`` stops the
run with the reason (``CorpusUnavailable``); ``builtin`` drops the source, and when no configured
source is left the built-in offline corpus below is used. ``corpus_plan`` states which before the
run starts (the dry-run plan and the run's first lines print it).

With no source configured, a built-in offline corpus is extracted at first use from
documentation shipped with installed packages and cached as JSONL under
``curriculum.core.paths.cache_dir()/spade/corpus/``:

* ``games`` — docstrings of the public functions and classes of ``sympy`` (and ``mpmath``),
  i.e. mathematical definitions, identities and worked examples; ``numpy``'s docstrings when
  sympy is not installed;
* ``tools`` — docstrings of standard-library modules that model stateful services and data
  (files, archives, mail, HTTP, databases, scheduling, ...), with their functions, classes and
  methods and their signatures.

``corpus: none`` (the no-corpus ablation) uses no document at all.
"""

from __future__ import annotations

import importlib
import inspect
import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from engineers.spade.config import CorpusConfig, CorpusSource

HUB_HOST = ("huggingface.co", 443)
"""Where ``hub_reachable`` tries to connect."""
OFFLINE_VARIABLES = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")
"""Environment variables that make every Hub source unavailable when set to 1."""

BUILTIN_VERSION = 2
"""Bumped when the extraction changes, so stale caches are rebuilt."""

TOOL_MODULES = (
    "json", "csv", "sqlite3", "shutil", "pathlib", "os", "os.path", "glob", "fnmatch", "tempfile",
    "zipfile", "tarfile", "gzip", "datetime", "calendar", "zoneinfo", "sched", "queue", "heapq",
    "collections", "email.message", "email.utils", "mailbox", "smtplib", "imaplib", "ftplib",
    "http.client", "http.cookies", "http.cookiejar", "urllib.parse", "urllib.request",
    "configparser", "argparse", "logging", "uuid", "hashlib", "hmac", "secrets", "base64",
    "decimal", "statistics", "ipaddress", "socket", "subprocess", "threading", "concurrent.futures",
    "difflib", "textwrap", "string", "re", "locale", "gettext", "dbm", "shelve", "pickle",
    "xml.etree.ElementTree", "html.parser", "wave", "imghdr", "mimetypes", "webbrowser",
)
"""Standard-library modules whose documentation forms the built-in tool-use corpus."""

GAME_PACKAGES = ("sympy", "mpmath")
"""Packages whose docstrings form the built-in games corpus (``numpy`` if neither is installed)."""


@dataclass(frozen=True)
class Document:
    """One grounding document."""

    id: str
    """Stable identifier (``<source>:<row>`` or the documented object's qualified name)."""
    text: str
    """The document text."""


@dataclass(frozen=True)
class CorpusInfo:
    """What a corpus holds, for logs and reports."""

    description: str
    """Where the documents came from."""
    documents: int
    """Number of documents."""
    characters: int
    """Total characters over all documents."""
    path: str | None = None
    """Cache file of a built-in corpus."""


class Corpus:
    """Documents handed out one per design call in a seeded, non-repeating order."""

    def __init__(self, documents: list[Document], seed: int, info: CorpusInfo,
                 max_doc_chars: int = 2000, cursor: int = 0) -> None:
        if not documents:
            raise ValueError(f"the corpus is empty ({info.description})")
        self.documents, self.seed, self.info = documents, seed, info
        self.max_doc_chars, self.cursor = max_doc_chars, cursor

    def order(self, epoch: int) -> np.ndarray:
        """Permutation of document indices used for pass ``epoch``."""
        return np.random.default_rng([self.seed, epoch]).permutation(len(self.documents))

    def at(self, cursor: int) -> Document:
        """The document handed out at position ``cursor`` (text cut to ``max_doc_chars``)."""
        epoch, offset = divmod(cursor, len(self.documents))
        doc = self.documents[int(self.order(epoch)[offset])]
        return Document(doc.id, doc.text[:self.max_doc_chars])

    def sample(self) -> Document:
        """The next document; advances the cursor."""
        doc = self.at(self.cursor)
        self.cursor += 1
        return doc


# -- reading configured sources ------------------------------------------------------------------

class CorpusUnavailable(RuntimeError):
    """A configured source cannot be read and its ``on_unavailable`` is ``error``."""


def hub_reachable(timeout: float = 3.0) -> tuple[bool, str]:
    """(reachable, why not): the offline variables first, then one TCP connection to the Hub."""
    import socket

    for name in OFFLINE_VARIABLES:
        if os.environ.get(name, "").strip().lower() in ("1", "true", "yes"):
            return False, f"{name} is set"
    try:
        socket.create_connection(HUB_HOST, timeout=timeout).close()
    except OSError as err:
        return False, f"cannot reach {HUB_HOST[0]} ({type(err).__name__}: {err})"
    return True, ""


def _hub_rows(source: CorpusSource) -> Iterator[tuple[str | None, object]]:
    import datasets

    data = datasets.load_dataset(source.dataset, source.subset, split=source.split, streaming=True)
    for row in data:
        yield (str(row[source.id_field]) if source.id_field else None), row.get(source.text_field)


def read_source(source: CorpusSource, min_chars: int) -> list[Document]:
    """Documents of one configured source, skipping texts shorter than ``min_chars``."""
    path = Path(source.path) if source.path is not None else Path(source.label())
    rows: Iterable[tuple[str | None, object]]
    if source.kind == "hf_hub":
        rows = _hub_rows(source)
    elif source.kind == "jsonl":
        rows = _jsonl_rows(path, source)
    elif source.kind == "parquet":
        import pyarrow.parquet as pq

        columns = [source.text_field] + ([source.id_field] if source.id_field else [])
        table = pq.read_table(path, columns=columns).to_pydict()
        ids = table.get(source.id_field) if source.id_field else None
        rows = ((str(ids[i]) if ids else None, text) for i, text in enumerate(table[source.text_field]))
    else:
        import datasets

        data = datasets.load_from_disk(str(path))
        if isinstance(data, datasets.DatasetDict):
            data = data[source.split]
        texts = data[source.text_field]
        ids = data[source.id_field] if source.id_field else None
        rows = ((str(ids[i]) if ids else None, text) for i, text in enumerate(texts))
    docs = []
    for row, (doc_id, text) in enumerate(rows):
        if source.max_docs is not None and len(docs) >= source.max_docs:
            break
        if isinstance(text, str) and len(text.strip()) >= min_chars:
            docs.append(Document(doc_id or f"{path.name}:{row}", text.strip()))
    return docs


def _jsonl_rows(path: Path, source: CorpusSource) -> Iterator[tuple[str | None, object]]:
    with path.open() as handle:
        for line in handle:
            if not line.strip():
                continue
            record = json.loads(line)
            doc_id = record.get(source.id_field) if source.id_field else None
            yield (str(doc_id) if doc_id is not None else None), record.get(source.text_field)


# -- the built-in corpus -------------------------------------------------------------------------

def _clean(doc: str) -> str:
    return inspect.cleandoc(doc).strip()


def _signature(obj: object) -> str:
    try:
        return str(inspect.signature(obj))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return ""


def documented_objects(module: object, prefix: str, min_chars: int) -> Iterator[Document]:
    """The module's own docstring, then every public function, class and method of it whose
    docstring has at least ``min_chars`` characters, as ``name(signature)\\n\\ndocstring``."""
    name = getattr(module, "__name__", prefix)
    doc = getattr(module, "__doc__", None)
    if isinstance(doc, str) and len(_clean(doc)) >= min_chars:
        yield Document(f"{prefix}:{name}", f"Module {name}\n\n{_clean(doc)}")
    public = getattr(module, "__all__", None) or [n for n in dir(module) if not n.startswith("_")]
    for attr in sorted(set(public)):
        try:
            obj = getattr(module, attr)
        except Exception:  # noqa: BLE001 - lazy attributes of third-party modules may raise
            continue
        if not (inspect.isfunction(obj) or inspect.isclass(obj) or inspect.isbuiltin(obj)
                or type(obj).__name__ in ("FunctionClass", "UndefinedFunction", "ufunc")):
            continue
        owner = getattr(obj, "__module__", "") or ""
        if not owner.startswith(name.split(".")[0]):
            continue  # re-exported from elsewhere
        text = getattr(obj, "__doc__", None)
        if isinstance(text, str) and len(_clean(text)) >= min_chars:
            yield Document(f"{prefix}:{name}.{attr}", f"{name}.{attr}{_signature(obj)}\n\n{_clean(text)}")
        if inspect.isclass(obj):
            for meth_name, meth in sorted(vars(obj).items()):
                if meth_name.startswith("_") or not callable(meth):
                    continue
                mdoc = getattr(meth, "__doc__", None)
                if isinstance(mdoc, str) and len(_clean(mdoc)) >= min_chars:
                    yield Document(f"{prefix}:{name}.{attr}.{meth_name}",
                                   f"{name}.{attr}.{meth_name}{_signature(meth)}\n\n{_clean(mdoc)}")


def extract_builtin(setting: str, min_chars: int) -> tuple[list[Document], str]:
    """Extract the built-in corpus of ``setting`` from installed documentation (see module)."""
    docs: list[Document] = []
    if setting == "games":
        names = [p for p in GAME_PACKAGES if importlib.util.find_spec(p) is not None] or ["numpy"]
        for package in names:
            docs.extend(documented_objects(importlib.import_module(package), package, min_chars))
        description = "docstrings of " + ", ".join(names)
    else:
        for module_name in TOOL_MODULES:
            try:
                module = importlib.import_module(module_name)
            except ImportError:
                continue
            docs.extend(documented_objects(module, "stdlib", min_chars))
        description = "standard-library documentation"
    seen: set[str] = set()
    unique = [d for d in docs if not (d.id in seen or seen.add(d.id))]
    return unique, description


def builtin_path(setting: str, min_chars: int) -> Path:
    """Cache file of the built-in corpus of ``setting``."""
    from curriculum.core.paths import cache_dir

    return cache_dir() / "spade" / "corpus" / f"builtin-{setting}-v{BUILTIN_VERSION}-min{min_chars}.jsonl"


def load_builtin(setting: str, min_chars: int) -> tuple[list[Document], CorpusInfo]:
    """The built-in corpus, extracted and cached on first use (atomic write)."""
    path = builtin_path(setting, min_chars)
    if path.is_file():
        lines = path.read_text().splitlines()
        header = json.loads(lines[0])
        docs = [Document(**json.loads(line)) for line in lines[1:]]
        description = header["description"]
    else:
        docs, description = extract_builtin(setting, min_chars)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + f".tmp{os.getpid()}")
        with tmp.open("w") as handle:
            handle.write(json.dumps({"description": description}) + "\n")
            for doc in docs:
                handle.write(json.dumps({"id": doc.id, "text": doc.text}) + "\n")
        tmp.replace(path)
    info = CorpusInfo(f"built-in {setting} corpus: {description}", len(docs),
                      sum(len(d.text) for d in docs), str(path))
    return docs, info


def _unavailable(source: CorpusSource, why: str) -> None:
    """Raise for an ``on_unavailable: error`` source; a ``builtin`` one is only dropped."""
    if source.on_unavailable == "error":
        raise CorpusUnavailable(f"corpus source {source.label()} is unavailable ({why}); it has "
                                "on_unavailable: error. Make it reachable, save it locally (kind: hf_disk) "
                                "or set on_unavailable: builtin to use the built-in offline corpus")


def available_sources(config: CorpusConfig) -> list[CorpusSource]:
    """The configured sources this machine can read now: Hub sources only when the Hub is
    reachable (an unreachable one raises or is dropped, as its ``on_unavailable`` says)."""
    hub = [s for s in config.sources if s.kind == "hf_hub"]
    reachable, why = hub_reachable() if hub else (True, "")
    out = []
    for source in config.sources:
        if source.kind == "hf_hub" and not reachable:
            _unavailable(source, why)
            continue
        out.append(source)
    return out


def corpus_plan(config: CorpusConfig | str, setting: str) -> str:
    """One line saying which documents the design calls will read (before the run starts)."""
    if config == "none":
        return "no corpus (corpus: none)"
    assert isinstance(config, CorpusConfig)
    if not config.sources:
        return f"built-in offline {setting} corpus (no sources configured)"
    try:
        usable = available_sources(config)
    except CorpusUnavailable as err:
        return f"UNAVAILABLE, the run will stop: {err}"
    dropped = [s.label() for s in config.sources if s not in usable]
    if not usable:
        return (f"built-in offline {setting} corpus INSTEAD of the configured sources "
                f"({', '.join(dropped)}: unreachable, on_unavailable: builtin)")
    line = "configured sources: " + ", ".join(s.label() for s in usable)
    return line + (f" (unreachable, left out: {', '.join(dropped)})" if dropped else "")


def build_corpus(config: CorpusConfig | str, setting: str, seed: int, cursor: int = 0) -> Corpus | None:
    """The corpus a config asks for: None for ``none``, configured sources, else the built-in one."""
    if config == "none":
        return None
    assert isinstance(config, CorpusConfig)
    sources, docs = [], []
    for source in available_sources(config):
        try:
            found = read_source(source, config.min_doc_chars)
        except Exception as err:  # a Hub download failing mid-way is unavailability too
            if source.kind != "hf_hub":
                raise
            _unavailable(source, f"{type(err).__name__}: {err}")
            continue
        sources.append(source)
        docs += found
    if sources:
        info = CorpusInfo("configured sources: " + ", ".join(s.label() for s in sources),
                          len(docs), sum(len(d.text) for d in docs))
    else:
        docs, info = load_builtin(setting, config.min_doc_chars)
    return Corpus(docs, seed, info, config.max_doc_chars, cursor)
