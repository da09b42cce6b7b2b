"""The one place where testbeds, engineers and trainers are registered by name.

Entries are lazy (``"module:Class"`` strings) so that ``curriculum list``, config validation and
the fit checks never import torch or a model. Each entry names the plugin class, its config class,
a one-line description and **what it fits**, as data:

* a testbed: the proposal-space kind it ``offers`` and the task ``kinds`` its tasks are
  (``curriculum.core.spaces``);
* an engineer: the proposal-space kinds it ``fits`` (``ANY``: every space);
* a trainer: the task kind it ``trains_on``.

``check_fit(engineer, testbed, trainer)`` refuses an incompatible combination at config time,
naming both sides and the plugins that would fit.

**Identity is written once**, here: the registry name is the plugin's name. ``Entry.load``
checks the class at first use (``conformance``, in the spirit of gymnasium's ``check_env``): it
subclasses its base, implements every abstract method, its config's ``name`` field admits the
registered name, a class ``name`` attribute (optional) agrees, a testbed's ``proposal_space`` has
the declared kind. A failure is a ``PluginError`` that names the plugin and the fix, before any
round runs.

**A plugin's commands** (``curriculum mapf ...``) are declared on its entry (``commands``) and
mounted by the CLI from here (``mounted_commands``); the controller names none of them.

**Third-party plugins** register through Python entry points, without editing this file. Groups:
``curriculum.testbeds``, ``curriculum.engineers``, ``curriculum.trainers``; the entry point's name
is the plugin's name (written once: its config may keep ``PluginConfig``'s plain ``name: str``).
The entry point names either

* the plugin **class**, which declares what it fits on itself (``CLASS_DECLARATIONS``):
  ``config_class`` (its pydantic config class), ``description`` (default: the docstring's first
  line), and ``task_kinds`` (a testbed; its ``offers`` is its ``proposal_space.kind``), ``fits``
  (an engineer) or ``trains_on`` (a trainer)::

      [project.entry-points."curriculum.engineers"]
      mine = "my_pkg.engineer:Mine"

* or a **mapping** of ``register`` arguments in a light module (no torch at import), e.g.
  ``ENGINEER = {"target": "my_pkg.engineer:Mine", "config": "my_pkg.engineer:MineConfig",
  "description": "...", "fits": ["buckets"]}`` for ``mine = "my_pkg.plugin:ENGINEER"``.

A shipped name wins over an entry point of the same name. An entry point that cannot be loaded
or declares too little is a ``PluginError`` naming it, its distribution and the fix.
"""

from __future__ import annotations

import difflib
import importlib
import inspect
import typing
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib import metadata
from typing import Any

from curriculum.core.spaces import ANY, SPACE_KINDS, TASK_KINDS


class PluginError(TypeError):
    """A registered plugin that does not conform; the message names the plugin and the fix."""


@dataclass(frozen=True)
class Entry:
    """One registered plugin."""

    kind: str
    """``testbed``, ``engineer`` or ``trainer``."""
    name: str
    target: str
    """``"module:Class"`` of the plugin."""
    config: str
    """``"module:Class"`` of its pydantic config (the section users write in YAML)."""
    description: str
    """One line shown by ``curriculum list``."""
    offers: str | None = None
    """Testbeds: the proposal-space kind engineers edit."""
    tasks: tuple[str, ...] = ()
    """Testbeds: the kinds of task they sample."""
    fits: tuple[str, ...] = ()
    """Engineers: the proposal-space kinds they can edit (``ANY``: all)."""
    trains_on: str | None = None
    """Trainers: the task kind they need."""
    source: str = "curriculum"
    """Who registered it (``curriculum`` or an entry point's distribution)."""
    commands: tuple[tuple[str, str], ...] = ()
    """Its command-line sub-apps: (name, ``"module:function"`` of ``commands(host) -> typer.Typer``),
    mounted as ``curriculum NAME`` (``curriculum.core.commands``)."""

    def load(self) -> Any:
        cls = _import(self.target, self)
        check_class(self, cls)
        return cls

    def load_config(self) -> Any:
        cls = _import(self.config, self)
        check_config(self, cls)
        return cls

    def declares(self) -> str:
        """What it fits, in words (for ``curriculum list`` and error messages)."""
        if self.kind == "testbed":
            return f"offers {self.offers}; tasks: {', '.join(self.tasks)}"
        if self.kind == "engineer":
            return "fits any proposal space" if ANY in self.fits else f"fits {', '.join(self.fits)}"
        return f"trains on {self.trains_on} tasks"


def _import(path: str, entry: Entry) -> Any:
    module, _, attr = path.partition(":")
    try:
        return getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as err:
        raise PluginError(f"{entry.kind} {entry.name!r}: cannot import {path!r} ({err})") from None


class UnknownName(ValueError):
    """Raised for a name that is not registered; the message lists the choices."""

    def __init__(self, message: str, kind: str = "") -> None:
        super().__init__(message)
        self.kind = kind
        """``testbed``, ``engineer`` or ``trainer`` (the config section the name was for)."""


_BASES = {"testbed": "testbeds.base:Testbed", "engineer": "engineers.base:Engineer",
          "trainer": "trainers.base:Trainer"}


def check_class(entry: Entry, cls: Any) -> None:
    """Static conformance of a plugin class (module docstring); PluginError on the first problem."""
    where = f"{entry.kind} {entry.name!r} ({entry.target})"
    base = _import(_BASES[entry.kind], entry)
    if not (inspect.isclass(cls) and issubclass(cls, base)):
        raise PluginError(f"{where} must be a subclass of {base.__module__}.{base.__qualname__}")
    if inspect.isabstract(cls):
        missing = ", ".join(sorted(getattr(cls, "__abstractmethods__", ())))
        raise PluginError(f"{where} does not implement: {missing}")
    own = next((k.__dict__["name"] for k in cls.__mro__ if k is not base and "name" in k.__dict__
                and isinstance(k.__dict__["name"], str)), None)
    if own is not None and own != entry.name:
        raise PluginError(f"{where} says name = {own!r} but is registered as {entry.name!r}; drop the class "
                          "attribute (the registry names plugins)")
    if entry.kind == "testbed":
        space = getattr(cls, "proposal_space", None)
        if getattr(space, "kind", None) != entry.offers:
            raise PluginError(f"{where} must set proposal_space to a {entry.offers!r} space "
                              f"(curriculum.core.spaces), as its registry entry declares; got {space!r}")


def check_config(entry: Entry, cls: Any) -> None:
    """The config class has a ``name`` field that admits the registered name."""
    where = f"config of {entry.kind} {entry.name!r} ({entry.config})"
    fields = getattr(cls, "model_fields", None)
    if fields is None or "name" not in fields:
        raise PluginError(f"{where} must be a pydantic model with a 'name' field (subclass "
                          "curriculum.core.config.PluginConfig)")
    annotation = fields["name"].annotation
    if typing.get_origin(annotation) is typing.Literal and entry.name not in typing.get_args(annotation):
        raise PluginError(f"{where}: name is {annotation} but the plugin is registered as {entry.name!r}")
    default = fields["name"].default
    if isinstance(default, str) and default != entry.name:
        raise PluginError(f"{where}: name defaults to {default!r} but the plugin is registered as {entry.name!r}")


class Registry:
    """Name → ``Entry`` for one kind of plugin; entry points of ``group`` join on first use."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.group = f"curriculum.{kind}s"
        self._entries: dict[str, Entry] = {}
        self._discovered = False

    def register(self, name: str, target: str, config: str, description: str, *, offers: str | None = None,
                 tasks: Iterable[str] = (), fits: Iterable[str] = (), trains_on: str | None = None,
                 source: str = "curriculum", commands: Mapping[str, str] | None = None) -> Entry:
        """Add a plugin; ValueError for a taken name or a declaration this kind of plugin cannot make.
        ``commands``: sub-command name → ``"module:function"`` of its Typer app (``Entry.commands``)."""
        if name in self._entries:
            raise ValueError(f"{self.kind} {name!r} is already registered")
        entry = Entry(self.kind, name, target, config, description, offers=offers, tasks=tuple(tasks),
                      fits=tuple(fits), trains_on=trains_on, source=source,
                      commands=tuple(dict(commands or {}).items()))
        _check_declarations(entry)
        self._entries[name] = entry
        return entry

    def unregister(self, name: str) -> None:
        """Remove a plugin (tests that register throw-away plugins clean up with this)."""
        self._entries.pop(name, None)

    def _discover(self) -> None:
        if self._discovered:
            return
        self._discovered = True
        for point in metadata.entry_points(group=self.group):
            if point.name in self._entries:
                continue  # a shipped name wins; the entry point is ignored
            dist = getattr(point, "dist", None)
            source = getattr(dist, "name", None) or point.value
            where = f"entry point {point.name} = {point.value!r} ({self.group}, from {source})"
            try:
                spec = point.load()
            except Exception as err:  # noqa: BLE001 - one broken package must say so, not hide the others
                raise PluginError(f"{where} cannot be loaded: {type(err).__name__}: {err}") from err
            if inspect.isclass(spec):
                spec = declared(self.kind, spec, where)
            elif not isinstance(spec, Mapping):
                raise PluginError(f"{where} must name the plugin class or a mapping of register() "
                                  "arguments (see curriculum.registry)")
            try:
                self.register(point.name, source=source, **dict(spec))
            except (TypeError, ValueError) as err:
                raise PluginError(f"{where}: {err}") from None

    def get(self, name: str) -> Entry:
        self._discover()
        try:
            return self._entries[name]
        except KeyError:
            close = difflib.get_close_matches(name, self._entries, n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            raise UnknownName(
                f"unknown {self.kind} {name!r}.{hint} Registered: {', '.join(self.names())}", self.kind
            ) from None

    def names(self) -> list[str]:
        self._discover()
        return list(self._entries)

    def entries(self) -> list[Entry]:
        self._discover()
        return list(self._entries.values())

    def __contains__(self, name: object) -> bool:
        self._discover()
        return name in self._entries


CLASS_DECLARATIONS: dict[str, tuple[str, ...]] = {
    "testbed": ("config_class", "task_kinds"),
    "engineer": ("config_class", "fits"),
    "trainer": ("config_class", "trains_on"),
}
"""What a plugin class named by an entry point declares on itself (module docstring); every kind
may also set ``description`` (default: its docstring's first line) and ``commands`` (its
command-line sub-apps, ``Entry.commands``)."""


def _path(obj: Any) -> str:
    return f"{obj.__module__}:{obj.__qualname__}"


def _names(value: Any) -> tuple[str, ...]:
    return (value,) if isinstance(value, str) else tuple(value)


def declared(kind: str, cls: type, where: str = "") -> dict[str, Any]:
    """The ``register`` arguments a plugin class declares on itself (``CLASS_DECLARATIONS``)."""
    where = where or f"{kind} class {_path(cls)}"
    missing = [a for a in CLASS_DECLARATIONS[kind] if getattr(cls, a, None) is None]
    if missing:
        raise PluginError(f"{where}: the class must declare {', '.join(missing)} (see "
                          "curriculum.registry.CLASS_DECLARATIONS)")
    config = cls.config_class
    if not inspect.isclass(config):
        raise PluginError(f"{where}: config_class must be the config class itself, got {config!r}")
    description = getattr(cls, "description", None)
    if not isinstance(description, str):
        description = next(iter((inspect.getdoc(cls) or "").strip().splitlines()), "")
    spec: dict[str, Any] = {"target": _path(cls), "config": _path(config), "description": description}
    if getattr(cls, "commands", None) is not None:
        spec["commands"] = dict(cls.commands)
    if kind == "testbed":
        spec |= {"offers": getattr(getattr(cls, "proposal_space", None), "kind", None),
                 "tasks": _names(cls.task_kinds)}
    elif kind == "engineer":
        spec["fits"] = _names(cls.fits)
    else:
        spec["trains_on"] = cls.trains_on
    return spec


def _check_declarations(entry: Entry) -> None:
    where = f"{entry.kind} {entry.name!r}"
    if entry.kind == "testbed":
        if entry.offers not in SPACE_KINDS or not entry.tasks or set(entry.tasks) - set(TASK_KINDS):
            raise ValueError(f"{where} must declare offers= one of {SPACE_KINDS} and tasks= some of {TASK_KINDS}")
    elif entry.kind == "engineer":
        if not entry.fits or set(entry.fits) - {*SPACE_KINDS, ANY}:
            raise ValueError(f"{where} must declare fits= some of {(*SPACE_KINDS, ANY)}")
    elif entry.trains_on not in TASK_KINDS:
        raise ValueError(f"{where} must declare trains_on= one of {TASK_KINDS}")


TESTBEDS = Registry("testbed")
ENGINEERS = Registry("engineer")
TRAINERS = Registry("trainer")

# -- testbeds -----------------------------------------------------------------------------------
TESTBEDS.register(
    "mapf_frozenlake",
    "testbeds.mapf_frozenlake.testbed:MAPFTestbed",
    "testbeds.mapf_frozenlake.testbed:MAPFTestbedConfig",
    "Multi-agent path finding on FrozenLake grids; the engineer edits per-size generator ratios.",
    offers="buckets", tasks=("prompt", "mapf", "bucketed"),
    commands={"mapf": "testbeds.mapf_frozenlake.cli:commands"},
)
TESTBEDS.register(
    "reasoning_gym",
    "testbeds.reasoning_gym.testbed:ReasoningGymTestbed",
    "testbeds.reasoning_gym.testbed:ReasoningGymTestbedConfig",
    "reasoning-gym tasks x difficulty levels (from its curricula); the engineer edits per-level data shares.",
    offers="buckets", tasks=("prompt", "bucketed"),
)
TESTBEDS.register(
    "spade_pool",
    "testbeds.spade.testbed:SpadeTestbed",
    "testbeds.spade.testbed:SpadeTestbedConfig",
    "SPADE's pool of model-written environments; held-out reasoning-gym (games) or tool-suite eval.",
    offers="environment_pool", tasks=("pool",),
    commands={"sandbox": "testbeds.spade.cli_sandbox:commands"},
)

# -- engineers ----------------------------------------------------------------------------------
ENGINEERS.register(
    "fixed",
    "engineers.fixed:FixedEngineer",
    "engineers.fixed:FixedEngineerConfig",
    "Keeps the starting proposal every round; with the random cold start the paper's 'GRPO (random)' baseline.",
    fits=(ANY,),
)
ENGINEERS.register(
    "random",
    "engineers.random:RandomEngineer",
    "engineers.random:RandomEngineerConfig",
    "Samples a fresh legal proposal each round (our re-drawn baseline; not the paper's fixed one).",
    fits=(ANY,),
)
ENGINEERS.register(
    "frontier",
    "engineers.frontier:FrontierEngineer",
    "engineers.frontier:FrontierEngineerConfig",
    "Rule-based baseline: budget to buckets with success rate in [20%, 80%], harder where mastered.",
    fits=("buckets",),
)
ENGINEERS.register(
    "optuna",
    "engineers.optuna_engineer:OptunaEngineer",
    "engineers.optuna_engineer:OptunaEngineerConfig",
    "Optuna black-box search (TPE by default) over the generator config; one trial per round.",
    fits=("buckets",),
)
ENGINEERS.register(
    "learnability",
    "engineers.learnability:LearnabilityEngineer",
    "engineers.learnability:LearnabilityEngineerConfig",
    "Budget proportional to p(1-p) per bucket (success rate from the evals), with an exploration floor.",
    fits=("buckets",),
)
ENGINEERS.register(
    "rlve",
    "engineers.rlve:RLVEEngineer",
    "engineers.rlve:RLVEEngineerConfig",
    "RLVE sliding difficulty window per environment (slides at 90% accuracy over >= 8 samples, width 4).",
    fits=("buckets",),
)
ENGINEERS.register(
    "plr",
    "engineers.plr:PLREngineer",
    "engineers.plr:PLREngineerConfig",
    "Prioritized level replay over buckets (rank + staleness on GRPO reward spread), ACCEL mutation.",
    fits=("buckets",),
)
ENGINEERS.register(
    "checkpoint",
    "engineers.checkpoint.engineer:CheckpointEngineer",
    "engineers.checkpoint.config:CheckpointEngineerConfig",
    "The policy redesigns its own generator config from a failure report (contexts V1–V6).",
    fits=("buckets",),
)
ENGINEERS.register(
    "spade",
    "engineers.spade.engineer:SpadeEngineer",
    "engineers.spade.config:SpadeEngineerConfig",
    "SPADE: the policy writes environment programs, admitted in the sandbox and remembered.",
    fits=("environment_pool",), commands={"spade": "engineers.spade.cli:commands"},
)

# -- trainers -----------------------------------------------------------------------------------
TRAINERS.register(
    "grpo",
    "trainers.grpo:GRPOTrainerAdapter",
    "trainers.grpo:GRPOConfig",
    "GRPO through TRL's GRPOTrainer (transformers generation on CPU, vLLM on GPU).",
    trains_on="prompt",
)
TRAINERS.register(
    "simulated",
    "trainers.simulated:SimulatedTrainer",
    "trainers.simulated:SimulatedConfig",
    "A documented parametric learning-dynamics simulation (not a model) for fast benchmarks.",
    trains_on="bucketed",
)
TRAINERS.register(
    "small",
    "trainers.small.trainer:SmallTrainer",
    "trainers.small.trainer:SmallConfig",
    "A small transformer (plain torch) trained by real GRPO on MAPF: engineer benchmarks in minutes.",
    trains_on="mapf",
)
TRAINERS.register(
    "endpoint",
    "trainers.endpoint:EndpointTrainer",
    "trainers.endpoint:EndpointTrainerConfig",
    "An external model behind an OpenAI-compatible endpoint, evaluated only (rounds: 0).",
    trains_on="prompt",
)
TRAINERS.register(
    "selfplay",
    "trainers.selfplay:SelfPlayTrainer",
    "trainers.selfplay:SelfPlayConfig",
    "SPADE co-training: one policy as designer and agent (GRPO via TRL rollout_func).",
    trains_on="pool",
)

SHIPPED: dict[str, tuple[str, ...]] = {
    registry.kind: tuple(registry._entries) for registry in (TESTBEDS, ENGINEERS, TRAINERS)
}
"""What this file registers (tests, entry points and extensions may register more)."""


# -- what fits what ---------------------------------------------------------------------------------

def engineer_fits(engineer: Entry, testbed: Entry) -> bool:
    return ANY in engineer.fits or testbed.offers in engineer.fits


def trainer_fits(trainer: Entry, testbed: Entry) -> bool:
    return trainer.trains_on in testbed.tasks


def testbeds_for(engineer: str) -> list[str]:
    """Registered testbeds the engineer can design for, in registration order."""
    entry = ENGINEERS.get(engineer)
    return [t.name for t in TESTBEDS.entries() if engineer_fits(entry, t)]


def engineers_for(testbed: str) -> list[str]:
    entry = TESTBEDS.get(testbed)
    return [e.name for e in ENGINEERS.entries() if engineer_fits(e, entry)]


def trainers_for(testbed: str) -> list[str]:
    entry = TESTBEDS.get(testbed)
    return [t.name for t in TRAINERS.entries() if trainer_fits(t, entry)]


def testbeds_for_trainer(trainer: str) -> list[str]:
    entry = TRAINERS.get(trainer)
    return [t.name for t in TESTBEDS.entries() if trainer_fits(entry, t)]


class MisfitError(ValueError):
    """An engineer, testbed and trainer that do not fit together; the message says what would."""


def check_fit(engineer: str, testbed: str, trainer: str) -> None:
    """MisfitError naming both sides and the plugins that would fit (names only: nothing imported)."""
    eng, bed, tr = ENGINEERS.get(engineer), TESTBEDS.get(testbed), TRAINERS.get(trainer)
    if not engineer_fits(eng, bed):
        raise MisfitError(
            f"engineer {engineer!r} ({eng.declares()}) does not fit testbed {testbed!r} (offers {bed.offers}). "
            f"Engineers for {testbed}: {', '.join(engineers_for(testbed)) or 'none'}; "
            f"testbeds for {engineer}: {', '.join(testbeds_for(engineer)) or 'none'}.")
    if not trainer_fits(tr, bed):
        raise MisfitError(
            f"trainer {trainer!r} ({tr.declares()}) does not fit testbed {testbed!r} (tasks: {', '.join(bed.tasks)}). "
            f"Trainers for {testbed}: {', '.join(trainers_for(testbed)) or 'none'}; "
            f"testbeds for {trainer}: {', '.join(testbeds_for_trainer(trainer)) or 'none'}.")


DEFAULT_ENGINEER = "random"
"""The engineer of a run that names none."""


def resolve_names(engineer: str | None = None, testbed: str | None = None,
                  trainer: str | None = None) -> tuple[str, str, str]:
    """Fill in what a run leaves out with what fits, then ``check_fit``.

    No engineer: ``DEFAULT_ENGINEER``. No testbed: the first registered testbed the engineer fits
    (and the trainer, when one is named). No trainer: the first registered trainer the testbed's
    tasks fit. So ``--engineer spade`` alone means the pool testbed and the self-play trainer.
    """
    engineer = engineer or DEFAULT_ENGINEER
    if testbed is None:
        candidates = testbeds_for(engineer)
        if trainer is not None:
            candidates = [t for t in candidates if t in testbeds_for_trainer(trainer)] or candidates
        testbed = candidates[0] if candidates else TESTBEDS.names()[0]  # check_fit says why it cannot work
    if trainer is None:
        trainer = next(iter(trainers_for(testbed)), TRAINERS.names()[0])
    check_fit(engineer, testbed, trainer)
    return engineer, testbed, trainer


def fitting_pairs() -> list[tuple[str, str]]:
    """Every (engineer, testbed) pair that fits (what the shared contract suite runs)."""
    return [(e.name, t.name) for e in ENGINEERS.entries() for t in TESTBEDS.entries() if engineer_fits(e, t)]


def mounted_commands() -> list[tuple[str, Entry, str]]:
    """Every registered plugin's command-line sub-apps: (name, the plugin's entry, ``"module:function"``),
    in registration order (testbeds, engineers, trainers); PluginError for a name two plugins claim."""
    out: list[tuple[str, Entry, str]] = []
    owners: dict[str, Entry] = {}
    for registry in (TESTBEDS, ENGINEERS, TRAINERS):
        for entry in registry.entries():
            for name, target in entry.commands:
                if name in owners:
                    raise PluginError(f"command {name!r} is declared by {owners[name].kind} {owners[name].name!r} "
                                      f"and by {entry.kind} {entry.name!r}; rename one")
                owners[name] = entry
                out.append((name, entry, target))
    return out


def load_commands(entry: Entry, target: str) -> Any:
    """The ``commands(host)`` function a plugin's entry names (``PluginError`` if it cannot be imported)."""
    return _import(target, entry)
