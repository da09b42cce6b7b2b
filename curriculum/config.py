"""The run configuration: one pydantic model for a whole run, loaded from YAML plus overrides.

Plugin sections (``testbed``, ``engineer``, ``trainer``) are validated against the config
class that the plugin registered in ``curriculum.registry``, chosen by the section's ``name``.
Every model forbids unknown keys. ``load_config`` turns pydantic's errors into one readable
message that names each bad field and, for a typo, the closest valid key — before any model
is loaded.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import yaml
from pydantic import (
    BaseModel,
    Field,
    SerializeAsAny,
    ValidationError,
    field_validator,
    model_validator,
)

from curriculum.core.config import ConfigError, StrictModel, model_in
from curriculum.core.config import format_errors as format_field_errors
from curriculum.core.policy import GenerationConfig, ModelConfig
from curriculum.registry import ENGINEERS, TESTBEDS, TRAINERS, MisfitError, Registry, UnknownName, resolve_names
from curriculum.core.userfiles import read_user_text


_SECTIONS: dict[str, Registry] = {"engineer": ENGINEERS, "testbed": TESTBEDS, "trainer": TRAINERS}


def section_name(value: Any) -> str | None:
    """The plugin name a config section (mapping, bare name or model) selects, if any."""
    if isinstance(value, BaseModel):
        return str(getattr(value, "name", None))
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and value.get("name") is not None:
        return str(value["name"])
    return None


def resolve_plugins(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` with every plugin section named: missing names filled with what fits
    (``registry.resolve_names``: an engineer alone → the first testbed it fits and that testbed's
    trainer), and the
    combination checked; ConfigError naming both sides and what would fit. Imports no plugin."""
    names = {section: section_name(data.get(section)) for section in _SECTIONS}
    try:
        resolved = resolve_names(names["engineer"], names["testbed"], names["trainer"])
    except UnknownName as err:
        raise ConfigError(f"invalid config:\n  {err.kind}: {err}") from None
    except MisfitError as err:
        raise ConfigError(str(err)) from None
    out = dict(data)
    for section, name in zip(_SECTIONS, resolved, strict=True):
        value = out.get(section)
        if value is None or isinstance(value, str):
            out[section] = {"name": name}
        elif isinstance(value, dict) and value.get("name") is None:
            out[section] = {**value, "name": name}
    return out


def _plugin_section(registry: Registry, value: Any) -> BaseModel:
    """Validate a plugin section against the config class its ``name`` registered."""
    if isinstance(value, BaseModel):
        value = value.model_dump()
    if isinstance(value, str):
        value = {"name": value}
    if not isinstance(value, dict) or "name" not in value:
        raise ValueError(f"must be a mapping with a 'name' key (one of: {', '.join(registry.names())})")
    try:
        config_cls = registry.get(value["name"]).load_config()
    except UnknownName as err:
        raise ValueError(str(err)) from None
    return config_cls.model_validate(value)


class RunConfig(StrictModel):
    """A whole run: model, trainer, testbed, engineer, rounds, seed and output location."""

    model: ModelConfig = Field(default_factory=ModelConfig)
    """The starting policy."""
    trainer: SerializeAsAny[BaseModel] = Field(default_factory=lambda: {"name": resolve_names()[2]})
    """The learner and its hyper-parameters (default: the first registered trainer that fits the testbed)."""
    testbed: SerializeAsAny[BaseModel] = Field(default_factory=lambda: {"name": resolve_names()[1]})
    """The environment family and its eval suites (default: the first registered testbed the engineer fits)."""
    engineer: SerializeAsAny[BaseModel] = Field(default_factory=lambda: {"name": resolve_names()[0]})
    """The environment engineer that designs each next round (default: ``registry.DEFAULT_ENGINEER``)."""
    generation: GenerationConfig = Field(default_factory=GenerationConfig)
    """Generation settings for evaluation and for engineers that query a model."""
    rounds: int = Field(3, ge=0, le=10_000)
    """Number of train → eval → design rounds (the paper ran 3); 0 with ``eval_before_training``
    is an eval-only run (a paper table's base-model and external-model rows)."""
    tasks_per_round: int = Field(4000, ge=1)
    """Training tasks drawn from the proposal each round (the paper: 4000 instances)."""
    eval_before_training: bool = False
    """Also evaluate the starting model before round 0 (a baseline row in the history)."""
    test_every_round: bool = True
    """Evaluate the test suite (what reports and ``compare`` score on) after every round;
    ``False``: after the last round only (and before training with ``eval_before_training``),
    which saves one held-out eval per round."""
    eval_cache: bool = True
    """Reuse a held-out eval of identical weights, suite, generation settings and code from
    ``$CURRICULUM_CACHE/evals`` (``curriculum.evalcache``): the seeds of a ``compare`` and its
    reruns evaluate one starting model once. ``False`` evaluates every time."""
    keep_checkpoints: int | None = Field(None, ge=1)
    """Keep the full checkpoint (weights, optimizer state) of only the last N committed rounds;
    older rounds keep their records (eval, design, state) but not their weights. ``None`` keeps
    every round's. Resume needs only the last round's, so it stays exact; the final model is
    always kept."""
    keep_final_optimizer_state: bool = True
    """Keep the last round's optimizer state (AdamW moments) when the run is done. ``False``
    deletes it once the last round is committed (``Trainer.drop_resume_state``): resuming a killed
    run stays exact (until the end the state is kept), the finished run dir holds weights and
    records only (a CPU preset of the self-play trainer: 1.1 GB less), and extending the run later
    starts a fresh optimizer. ``compare``'s shared round-0 runs always keep it (every arm continues from it)."""
    seed: int = Field(0, ge=0)
    """Master seed; every round's data, eval and engineer seeds derive from it."""
    output_dir: Path = Path("runs")
    """Directory under which the run directory is created."""
    run_name: str | None = None
    """Run directory name (default: ``<engineer>-<testbed>-seed<seed>-<timestamp>``)."""

    @model_validator(mode="before")
    @classmethod
    def _plugins(cls, data: Any) -> Any:
        """Name every plugin section with what fits and refuse a misfit (``resolve_plugins``)."""
        return resolve_plugins(data) if isinstance(data, dict) else data

    @field_validator("trainer", mode="before")
    @classmethod
    def _trainer(cls, value: Any) -> BaseModel:
        return _plugin_section(TRAINERS, value)

    @model_validator(mode="after")
    def _engineer_fits_trainer(self) -> RunConfig:
        """Refuse an engineer whose settings need something this trainer lacks (the checkpoint
        engineer asking a policy that writes no text), so a dry run says what the run would."""
        problem = ENGINEERS.get(self.engineer.name).load().trainer_problem(
            self.engineer, TRAINERS.get(self.trainer.name).load())
        if problem is not None:
            raise ValueError(problem)
        return self

    @field_validator("testbed", mode="before")
    @classmethod
    def _testbed(cls, value: Any) -> BaseModel:
        return _plugin_section(TESTBEDS, value)

    @field_validator("engineer", mode="before")
    @classmethod
    def _engineer(cls, value: Any) -> BaseModel:
        return _plugin_section(ENGINEERS, value)

    @field_validator("run_name")
    @classmethod
    def _run_name(cls, value: str | None) -> str | None:
        if value is not None and (not value or "/" in value or value.startswith(".")
                                  or "\0" in value):
            raise ValueError("must be a plain directory name (no '/', not starting with '.')")
        if value is not None and not value.isprintable():
            bad = next(c for c in value if not c.isprintable())
            raise ValueError(f"has the unprintable character {bad!r}; a run name may hold only "
                             "printable characters (no newline, tab or escape)")
        if value is not None and len(value.encode("utf-8", "surrogateescape")) > 200:
            raise ValueError(f"is {len(value.encode('utf-8', 'surrogateescape'))} bytes; a run "
                             "directory name may have at most 200 (file systems allow 255)")
        return value

    @model_validator(mode="after")
    def _eval_only(self) -> RunConfig:
        if self.rounds == 0 and not self.eval_before_training:
            raise ValueError("rounds: 0 only evaluates the starting model: set eval_before_training: true")
        return self

    def fingerprint(self) -> str:
        """Short hash of the resolved config, for cache keys and resume checks."""
        blob = json.dumps(self.model_dump(mode="json"), sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:12]


# -- loading ---------------------------------------------------------------------------------------

def parse_override(item: str) -> tuple[list[str], Any]:
    """``"trainer.learning_rate=1e-6"`` → (["trainer", "learning_rate"], 1e-6).

    The value is parsed as YAML, so numbers, booleans, lists and ``null`` work as users expect.
    """
    key, sep, raw = item.partition("=")
    if not sep or not key.strip():
        raise ConfigError(f"override {item!r} must look like KEY=VALUE, e.g. trainer.learning_rate=1e-6")
    if len(raw) > MAX_CONFIG_BYTES:
        raise ConfigError(f"override {key.strip()!r}: a value of {len(raw):,} characters, over the "
                          f"{MAX_CONFIG_BYTES:,} a config may hold")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except (yaml.YAMLError, RecursionError):
        value = raw
    check_expanded_size(value, f"override {key.strip()!r}")
    if isinstance(value, str):  # YAML 1.1 reads "1e-6" as a string; users mean a number
        try:
            value = float(value) if any(c in value.lower() for c in ".e") else int(value)
        except ValueError:
            pass
    return key.strip().split("."), value


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Set dotted keys in a nested dict (creating mappings as needed)."""
    for item in overrides:
        path, value = parse_override(item)
        node = data
        for part in path[:-1]:
            child = node.get(part)
            if isinstance(child, str) and part in ("trainer", "testbed", "engineer"):
                child = {"name": child}
            if not isinstance(child, dict):
                child = {}
            node[part] = child
            node = child
        node[path[-1]] = value
    return data


MAX_CONFIG_VALUES = 100_000
"""Most values (mappings, lists and scalars, counted each time an alias repeats them) a config
may expand to: a few hundred bytes of nested YAML aliases can stand for billions."""

MAX_CONFIG_BYTES = 64 * 1024
"""Largest config file read (the shipped ones are under 5 KB). A bigger file is refused before
it is parsed: pure-Python YAML takes seconds per 100 KB of a long list."""


def read_config_file(path: str | Path) -> dict[str, Any]:
    """The mapping in a YAML config file; ConfigError for an unreadable file (missing, a
    directory, no permission, not UTF-8), one over ``MAX_CONFIG_BYTES`` (checked before parsing),
    bad YAML, an empty file (nothing but blanks or comments: write ``{}`` to mean the library
    defaults) or a non-mapping."""
    text = read_user_text(path, "config file", MAX_CONFIG_BYTES)  # a regular file under the cap
    try:
        loaded = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise ConfigError(f"{path} is not valid YAML: {err}") from None
    except RecursionError:
        raise ConfigError(f"{path} is not valid YAML: nested too deeply") from None
    check_expanded_size(loaded, f"config file {path}")
    if loaded is None:
        raise ConfigError(f"config file {path} is empty (no settings); write `{{}}` in it to run "
                          "the library defaults on purpose, or leave out --config to use this "
                          "machine's preset")
    if not isinstance(loaded, dict):
        raise ConfigError(f"{path} must contain a mapping at the top level")
    return loaded


def check_expanded_size(value: Any, source: str) -> None:
    """``ConfigError`` when ``value`` (parsed YAML) expands to more than ``MAX_CONFIG_VALUES``."""
    if _expanded_size(value, MAX_CONFIG_VALUES) > MAX_CONFIG_VALUES:
        raise ConfigError(f"{source} expands to more than {MAX_CONFIG_VALUES:,} values (YAML "
                          "aliases that repeat each other?); it is not used")


def _expanded_size(value: Any, cap: int) -> int:
    """How many values ``value`` holds when every alias is expanded, counting no further than
    just past ``cap`` (an iterative walk: its cost is bounded by ``cap``)."""
    stack, count = [value], 0
    while stack and count <= cap:
        item = stack.pop()
        count += 1
        if isinstance(item, dict):
            stack.extend(item.values())
            count += len(item)
        elif isinstance(item, list):
            stack.extend(item)
    return count


def load_config(path: str | Path | None = None, overrides: list[str] | None = None,
                base: dict[str, Any] | None = None) -> RunConfig:
    """Read YAML (or start from ``base``), apply ``--set`` overrides, validate; raise ConfigError."""
    data: dict[str, Any] = dict(base or {})
    if path is not None:
        data.update(read_config_file(path))
    data = apply_overrides(data, overrides or [])
    return validate_config(data, source=str(path) if path else "config")


def validate_config(data: dict[str, Any], source: str = "config") -> RunConfig:
    data = resolve_plugins(data)  # a misfit is refused here, before any plugin module is imported
    try:
        return RunConfig.model_validate(data)
    except ValidationError as err:
        raise ConfigError(format_errors(err, data, source)) from None


def format_errors(err: ValidationError, data: dict[str, Any], source: str) -> str:
    """One line per error: the dotted field, what is wrong, and a suggestion for typos
    (``curriculum.core.config.format_errors``, following plugin sections by their name)."""
    return format_field_errors(err, source, lambda loc: _valid_keys(loc, data))


def _valid_keys(loc: list[str], data: dict[str, Any]) -> list[str]:
    """Field names of the model found at ``loc``, following plugin sections by their name."""
    model: type[BaseModel] | None = RunConfig
    node: Any = data
    for i, part in enumerate(loc):
        if model is None:
            return []
        node = node.get(part) if isinstance(node, dict) else None
        if i == 0 and part in _PLUGIN_REGISTRIES:
            name = node.get("name") if isinstance(node, dict) else node
            try:
                model = _PLUGIN_REGISTRIES[part].get(str(name)).load_config()
            except UnknownName:
                return []
            continue
        field = model.model_fields.get(part)
        model = model_in(field.annotation) if field is not None else None
    return list(model.model_fields) if model is not None else []


_PLUGIN_REGISTRIES = _SECTIONS


def dump_config(config: RunConfig) -> str:
    """The resolved config as YAML (what is printed at start and saved in the run dir)."""
    return yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False)


def config_diff(a: dict[str, Any], b: dict[str, Any], prefix: str = "") -> list[str]:
    """Dotted keys whose values differ between two nested dicts."""
    keys = sorted(set(a) | set(b))
    out: list[str] = []
    for key in keys:
        path = f"{prefix}{key}"
        va, vb = a.get(key), b.get(key)
        if isinstance(va, dict) and isinstance(vb, dict):
            out.extend(config_diff(va, vb, path + "."))
        elif va != vb:
            out.append(f"{path}: {va!r} -> {vb!r}")
    return out
