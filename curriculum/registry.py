"""The one place where testbeds, engineers and trainers are found by name.

**A plugin registers itself.** A plugin of this repository is a class in one of the packages
``testbeds``, ``engineers`` or ``trainers`` (``PACKAGES``) that subclasses the kind's base and sets
``config_class`` in its body, in a plugin module: a top-level module of the package, or the
module named after the kind in a sub-package (``testbeds/<name>/testbed.py``,
``PLUGIN_MODULE``). The registry imports those modules and keeps the classes that are plugins
(``in_tree``), so adding one touches only its own file or folder. **Its name is written once**,
as its config's ``name: Literal["mine"]`` (``curriculum.core.config.PluginConfig`` fills the
default from it). A plugin package from elsewhere registers by an entry point
(``[project.entry-points."curriculum.engineers"]`` in its own ``pyproject.toml``; groups
``curriculum.testbeds``, ``curriculum.engineers``, ``curriculum.trainers``) naming its class,
and there **the entry point's name is the plugin's name**. The class declares the rest on
itself (``CLASS_DECLARATIONS``):

* ``config_class``: its pydantic config (the section users write in YAML);
* what it **fits**, as data: a testbed its task ``task_kinds`` (its ``offers`` is its
  ``proposal_space.kind``; ``curriculum.core.spaces``), an engineer the proposal-space kinds it
  ``fits`` (``ANY``: every space), a trainer the task kind it ``trains_on``;
* optionally ``description`` (one line for ``curriculum list``; default: the docstring's first
  line), ``commands`` (its command-line sub-apps, ``Entry.commands``, mounted by the CLI through
  ``mounted_commands``; the controller names none of them), a testbed's ``default_trainer`` (the
  trainer a run that names none gets, when it fits) and a trainer's ``chosen_by_default``
  (``False``: only when named). ``description`` and ``commands`` are read from the class itself,
  never inherited::

      [project.entry-points."curriculum.engineers"]
      mine = "my_pkg.engineer:Mine"

Discovery imports the plugin modules and nothing else of the packages (never torch: plugin
modules import their heavy dependencies where they use them), so ``curriculum list``, config
validation and the fit checks stay light. An entry point may instead name a **mapping** of
``register`` arguments in a light module, e.g. ``ENGINEER = {"target": "my_pkg.engineer:Mine",
"config": "my_pkg.engineer:MineConfig", "description": "...", "fits": ["buckets"]}`` for
``mine = "my_pkg.plugin:ENGINEER"``; ``register`` adds one at run time (tests).

Order: the shipped plugins (found in the packages) first, by name, then each other
distribution's entry points, by distribution and name; a shipped name wins over another
distribution's entry point of the same name, and this distribution's own entry points (the
metadata of an install older than the search) are ignored. A run that
names no engineer gets ``DEFAULT_ENGINEER``, no testbed the first that fits, no trainer its
testbed's ``default_trainer`` or else the first that fits and is ``chosen_by_default``
(``resolve_names``). Plugins that ``register`` adds come after the entry points. An entry point
that cannot be loaded or declares too little is a ``PluginError`` naming it, its distribution and
the fix; so are a plugin module that cannot be imported, two classes in the packages that claim
one name, and finding no plugin of a kind at all.

``check_fit(engineer, testbed, trainer)`` refuses an incompatible combination at config time,
naming both sides and the plugins that would fit. ``Entry.load`` checks the class at first use
(``conformance``, in the spirit of gymnasium's ``check_env``): it subclasses its base, implements
every abstract method, its config's ``name`` field admits the registered name, a class ``name``
attribute (optional) agrees, a testbed's ``proposal_space`` has the declared kind. A failure is a
``PluginError`` that names the plugin and the fix, before any round runs.
"""

from __future__ import annotations

import difflib
import importlib
import inspect
import pkgutil
import typing
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from curriculum.core.spaces import ANY, SPACE_KINDS, TASK_KINDS, is_task_kind


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
    default_trainer: str | None = None
    """Testbeds: the trainer a run that names none gets, when it is registered and fits."""
    chosen_by_default: bool = True
    """Trainers: whether a run that names no trainer may get it (``resolve_names``); ``False`` for
    one that only makes sense when asked for (the endpoint trainer only evaluates)."""
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


def _base(kind: str) -> type:
    """The base class every plugin of ``kind`` subclasses."""
    module, _, attr = _BASES[kind].partition(":")
    return getattr(importlib.import_module(module), attr)


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


DISTRIBUTION = "curriculum"
"""The distribution whose packages hold the shipped plugins."""

PACKAGES = {"testbed": "testbeds", "engineer": "engineers", "trainer": "trainers"}
"""Kind → the package of this repository whose modules are searched for plugin classes."""


PLUGIN_MODULE = {"testbed": "testbed", "engineer": "engineer", "trainer": "trainer"}
"""Kind → the module of a sub-package that holds its plugin (``testbeds/<name>/testbed.py``,
``trainers/<name>/trainer.py``); a plugin of one file is a top-level module of the package."""


def plugin_modules(kind: str) -> list[str]:
    """The modules of ``PACKAGES[kind]`` that may hold a plugin, without importing any: every
    top-level module, and the ``PLUGIN_MODULE[kind]`` module of every sub-package (a sub-package
    without one, e.g. ``trainers/lm``, holds no plugin and stays unloaded)."""
    package = importlib.import_module(PACKAGES[kind])
    names = []
    for info in pkgutil.iter_modules(package.__path__):
        if not info.ispkg:
            names.append(f"{package.__name__}.{info.name}")
            continue
        folder = Path(getattr(info.module_finder, "path", "")) / info.name
        if any(sub.name == PLUGIN_MODULE[kind] for sub in pkgutil.iter_modules([str(folder)])):
            names.append(f"{package.__name__}.{info.name}.{PLUGIN_MODULE[kind]}")
    return sorted(names)


def in_tree(kind: str) -> list[tuple[str, type]]:
    """(name, class) of every plugin class in ``PACKAGES[kind]``, by name. The plugin modules
    (``plugin_modules``) are imported, and a plugin is what it is: a concrete subclass of the
    kind's base, defined in one of them, that sets ``config_class`` in its own body (a subclass
    that inherits it is not another plugin). Its name is its config's (``config_name``).
    PluginError for a plugin module that cannot be imported and for two classes that claim one name."""
    base = _base(kind)
    found: dict[str, type] = {}
    for module_name in plugin_modules(kind):
        try:
            module = importlib.import_module(module_name)
        except Exception as err:  # noqa: BLE001 - a broken module must be named, not hide the others
            raise PluginError(f"{kind} module {module_name} cannot be imported: {type(err).__name__}: {err}") from err
        for cls in vars(module).values():
            if not (inspect.isclass(cls) and cls.__module__ == module_name and issubclass(cls, base)
                    and "config_class" in vars(cls) and not inspect.isabstract(cls)):
                continue
            name = config_name(cls.config_class, f"{kind} class {_path(cls)}")
            if name in found:
                raise PluginError(f"{kind} {name!r} is claimed by {_path(found[name])} and by {_path(cls)}; "
                                  "rename one config's name")
            found[name] = cls
    return sorted(found.items())


def config_name(config: Any, where: str) -> str:
    """A plugin's name, written once as its config's ``name: Literal["..."]``."""
    field = getattr(config, "model_fields", {}).get("name")
    default = getattr(field, "default", None)
    if isinstance(default, str):
        return default
    raise PluginError(f"{where}: its config_class must declare its name, e.g. name: Literal[\"mine\"] "
                      "(a PluginConfig subclass fills the default from it)")


def _distribution(point: Any) -> str | None:
    return getattr(getattr(point, "dist", None), "name", None)


def _ordered(points: Iterable[Any]) -> list[Any]:
    """Entry points in the registry's order: by distribution, then by name."""
    return sorted(points, key=lambda p: (_distribution(p) or "", p.name))


class Registry:
    """Name → ``Entry`` for one kind of plugin; entry points of ``group`` join on first use."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.group = f"curriculum.{kind}s"
        self._entries: dict[str, Entry] = {}
        self._shipped: list[str] = []
        self._discovered = False

    def register(self, name: str, target: str, config: str, description: str, *, offers: str | None = None,
                 tasks: Iterable[str] = (), fits: Iterable[str] = (), trains_on: str | None = None,
                 default_trainer: str | None = None, chosen_by_default: bool = True, source: str = "curriculum",
                 commands: Mapping[str, str] | None = None) -> Entry:
        """Add a plugin; ValueError for a taken name or a declaration this kind of plugin cannot make.
        ``commands``: sub-command name → ``"module:function"`` of its Typer app (``Entry.commands``)."""
        if name in self._entries:
            raise ValueError(f"{self.kind} {name!r} is already registered")
        entry = Entry(self.kind, name, target, config, description, offers=offers, tasks=tuple(tasks),
                      fits=tuple(fits), trains_on=trains_on, default_trainer=default_trainer,
                      chosen_by_default=chosen_by_default, source=source, commands=tuple(dict(commands or {}).items()))
        _check_declarations(entry)
        self._entries[name] = entry
        return entry

    def unregister(self, name: str) -> None:
        """Remove a plugin (tests that register throw-away plugins clean up with this)."""
        self._entries.pop(name, None)

    def _discover(self) -> None:
        if not self._discovered:
            self._discovered = True
            # Plugins registered at run time before the first use keep their names and come after
            # the discovered ones, in the order they were registered.
            early, self._entries = self._entries, {}
            try:
                for name, cls in in_tree(self.kind):
                    if name not in early:
                        self._register_class(name, cls)
                for point in _ordered(metadata.entry_points(group=self.group)):
                    if point.name not in early:
                        self._register_point(point)
            finally:
                self._entries |= early
        if not self._entries:
            raise PluginError(
                f"no {self.kind} is registered: none was found in the package {PACKAGES[self.kind]!r} and no "
                f"installed distribution declares an entry point of group {self.group}")

    def _register_class(self, name: str, cls: type) -> None:
        where = f"{self.kind} class {_path(cls)} (in {PACKAGES[self.kind]})"
        try:
            self.register(name, source=DISTRIBUTION, **declared(self.kind, cls, where))
        except (TypeError, ValueError) as err:
            raise PluginError(f"{where}: {err}") from None
        self._shipped.append(name)

    def _register_point(self, point: Any) -> None:
        source = _distribution(point) or point.value
        if point.name in self._entries or source == DISTRIBUTION:
            # A shipped name wins over another distribution's entry point; this distribution's own
            # entry points (metadata of an older install) name plugins already found in its packages.
            return
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

    def shipped(self) -> list[str]:
        """The names of the plugins found in this distribution's packages (not a plugin package's
        entry points, nor one registered at run time)."""
        self._discover()
        return list(self._shipped)

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
"""What a plugin class named by an entry point must declare on itself (module docstring); every
kind may also set ``description`` (default: its docstring's first line) and ``commands`` (its
command-line sub-apps, ``Entry.commands``), both read from the class itself; a testbed may set
``default_trainer``, a trainer ``chosen_by_default``."""


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
    description = vars(cls).get("description")  # its own: a subclass is another plugin
    if not isinstance(description, str):
        description = next(iter((inspect.getdoc(cls) or "").strip().splitlines()), "")
    spec: dict[str, Any] = {"target": _path(cls), "config": _path(config), "description": description}
    if vars(cls).get("commands") is not None:
        spec["commands"] = dict(vars(cls)["commands"])
    if kind == "testbed":
        spec |= {"offers": getattr(getattr(cls, "proposal_space", None), "kind", None),
                 "tasks": _names(cls.task_kinds), "default_trainer": getattr(cls, "default_trainer", None)}
    elif kind == "engineer":
        spec["fits"] = _names(cls.fits)
    else:
        spec |= {"trains_on": cls.trains_on, "chosen_by_default": getattr(cls, "chosen_by_default", True)}
    return spec


def _check_declarations(entry: Entry) -> None:
    where = f"{entry.kind} {entry.name!r}"
    if entry.kind == "testbed":
        if entry.offers not in SPACE_KINDS or not entry.tasks or not all(map(is_task_kind, entry.tasks)):
            raise ValueError(f"{where} must declare offers= one of {SPACE_KINDS} and tasks= task kinds (some of "
                             f"{TASK_KINDS}, or kinds of its own: lower-case names)")
        if entry.default_trainer is not None and not isinstance(entry.default_trainer, str):
            raise ValueError(f"{where}: default_trainer must be a trainer's name, got {entry.default_trainer!r}")
    elif entry.kind == "engineer":
        if not entry.fits or set(entry.fits) - {*SPACE_KINDS, ANY}:
            raise ValueError(f"{where} must declare fits= some of {(*SPACE_KINDS, ANY)}")
    elif not is_task_kind(entry.trains_on):
        raise ValueError(f"{where} must declare trains_on= a task kind (one of {TASK_KINDS}, or a kind a "
                         f"testbed declares: a lower-case name)")
    elif not isinstance(entry.chosen_by_default, bool):
        raise ValueError(f"{where}: chosen_by_default must be True or False, got {entry.chosen_by_default!r}")


TESTBEDS = Registry("testbed")
ENGINEERS = Registry("engineer")
TRAINERS = Registry("trainer")

def shipped() -> dict[str, tuple[str, ...]]:
    """Kind → the names of the plugins in this distribution's packages (tests, entry points of
    other distributions and ``register`` may add more)."""
    return {registry.kind: tuple(registry.shipped()) for registry in (TESTBEDS, ENGINEERS, TRAINERS)}


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
    (and the trainer, when one is named). No trainer: the testbed's ``default_trainer`` when it is
    registered and fits, else the first registered trainer the testbed's tasks fit that is
    ``chosen_by_default`` (else the first that fits). So an engineer that fits only an environment
    pool, named alone, gets the pool testbed and the trainer that plays its environments.
    """
    engineer = engineer or DEFAULT_ENGINEER
    if testbed is None:
        candidates = testbeds_for(engineer)
        if trainer is not None:
            candidates = [t for t in candidates if t in testbeds_for_trainer(trainer)] or candidates
        testbed = candidates[0] if candidates else TESTBEDS.names()[0]  # check_fit says why it cannot work
    if trainer is None:
        trainer = _default_trainer(testbed)
    check_fit(engineer, testbed, trainer)
    return engineer, testbed, trainer


def _default_trainer(testbed: str) -> str:
    """The trainer of a run on ``testbed`` that names none (``resolve_names``)."""
    fitting = trainers_for(testbed)
    preferred = TESTBEDS.get(testbed).default_trainer
    if preferred in fitting:
        return preferred
    eligible = [t for t in fitting if TRAINERS.get(t).chosen_by_default]
    return next(iter(eligible or fitting), TRAINERS.names()[0])  # nothing fits: check_fit says why


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
