"""Plugin identity, conformance at registration, discovery (in the tree, by entry point), and what fits what."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest

from curriculum import registry as reg
from curriculum.config import ConfigError, load_config
from curriculum.registry import ENGINEERS, TESTBEDS, TRAINERS, PluginError, Registry

NEWCOMER = textwrap.dedent('''
    from typing import Literal
    from curriculum.core.config import PluginConfig
    from curriculum.core.records import Design
    from engineers.base import Engineer

    class NewcomerConfig(PluginConfig):
        name: Literal["newcomer"] = "newcomer"

    class Newcomer(Engineer):          # no name attribute: the registry's name is its name
        def design(self, ctx):
            return Design(raw=ctx.proposal.model_dump(mode="json"))

    class Misnamed(Newcomer):
        name = "other"

    class Unfinished(Engineer):        # forgot design()
        pass

    class WrongConfig(PluginConfig):
        name: Literal["someone_else"] = "someone_else"
''')


@pytest.fixture
def plugin_module(tmp_path, monkeypatch):
    (tmp_path / "newcomer_plugin.py").write_text(NEWCOMER)
    monkeypatch.syspath_prepend(str(tmp_path))
    return "newcomer_plugin"


@pytest.mark.parametrize("registry", [TESTBEDS, ENGINEERS, TRAINERS], ids=lambda r: r.kind)
def test_every_shipped_plugin_conforms(registry):
    for entry in registry.entries():
        cls, config = entry.load(), entry.load_config()
        assert config.model_validate({"name": entry.name}).name == entry.name
        assert "name" not in vars(cls), f"{entry.name}: the registry names plugins, the class must not"


def test_a_newcomer_without_a_name_attribute_is_named_by_the_registry(plugin_module, tmp_path):
    ENGINEERS.register("newcomer", f"{plugin_module}:Newcomer", f"{plugin_module}:NewcomerConfig", "test", fits=("*",))
    try:
        config = load_config(None, ["engineer.name=newcomer", f"output_dir={tmp_path}"])
        engineer = ENGINEERS.get("newcomer").load()(config.engineer)
        assert engineer.name == "newcomer"
        assert ("newcomer", "mapf_frozenlake") in reg.fitting_pairs()
    finally:
        ENGINEERS.unregister("newcomer")


@pytest.mark.parametrize(("target", "config", "message"), [
    ("Misnamed", "NewcomerConfig", "says name = 'other' but is registered as 'newcomer'"),
    ("Unfinished", "NewcomerConfig", "does not implement: design"),
    ("Newcomer", "WrongConfig", "registered as 'newcomer'"),
    ("Missing", "NewcomerConfig", "cannot import"),
])
def test_a_nonconforming_plugin_fails_at_first_use_with_the_fix(plugin_module, target, config, message):
    ENGINEERS.register("newcomer", f"{plugin_module}:{target}", f"{plugin_module}:{config}", "test", fits=("*",))
    try:
        with pytest.raises(PluginError, match=message):
            entry = ENGINEERS.get("newcomer")
            entry.load_config()
            entry.load()
    finally:
        ENGINEERS.unregister("newcomer")


def test_declarations_are_checked_at_registration():
    with pytest.raises(ValueError, match="must declare fits="):
        Registry("engineer").register("x", "m:C", "m:D", "d")
    with pytest.raises(ValueError, match="must declare offers="):
        Registry("testbed").register("x", "m:C", "m:D", "d", offers="tables", tasks=("prompt",))
    with pytest.raises(ValueError, match="must declare trains_on="):
        Registry("trainer").register("x", "m:C", "m:D", "d")
    # a testbed may declare a task kind of its own, and a trainer train on it; a kind is a lower-case name
    Registry("testbed").register("x", "m:C", "m:D", "d", offers="buckets", tasks=("prompt", "grid_instance"))
    Registry("trainer").register("x", "m:C", "m:D", "d", trains_on="grid_instance")
    with pytest.raises(ValueError, match="must declare offers="):
        Registry("testbed").register("x", "m:C", "m:D", "d", offers="buckets", tasks=("Grid Instance",))
    with pytest.raises(ValueError, match="must declare trains_on="):
        Registry("trainer").register("x", "m:C", "m:D", "d", trains_on="")


def test_third_party_plugins_register_through_entry_points(plugin_module, monkeypatch):
    spec = {"target": f"{plugin_module}:Newcomer", "config": f"{plugin_module}:NewcomerConfig",
            "description": "from a plugin package", "fits": ["buckets"]}
    point = SimpleNamespace(name="newcomer", value="newcomer_plugin:SPEC", load=lambda: spec,
                            dist=SimpleNamespace(name="newcomer-plugin"))
    monkeypatch.setattr(reg.metadata, "entry_points", lambda group: [point] if group == "curriculum.engineers" else [])
    monkeypatch.setattr(reg, "in_tree", lambda kind: [])
    registry = Registry("engineer")
    registry.register("fixed", "engineers.fixed:FixedEngineer", "engineers.fixed:FixedEngineerConfig", "d",
                      fits=("*",))
    assert registry.names() == ["newcomer", "fixed"]  # registered at run time: after the entry points
    entry = registry.get("newcomer")
    assert entry.source == "newcomer-plugin" and entry.fits == ("buckets",)
    assert entry.load().__name__ == "Newcomer"


def test_a_misfit_is_refused_at_config_time_naming_both_and_what_fits():
    with pytest.raises(ConfigError) as err:
        load_config(None, ["engineer.name=frontier", "testbed.name=spade_pool"])
    text = str(err.value)
    assert "engineer 'frontier'" in text and "testbed 'spade_pool'" in text
    assert f"Engineers for spade_pool: {', '.join(reg.engineers_for('spade_pool'))}" in text
    assert f"testbeds for frontier: {', '.join(reg.testbeds_for('frontier'))}" in text
    with pytest.raises(ConfigError, match=f"trainer 'grpo' .* does not fit testbed 'spade_pool'.*Trainers for spade_pool: "
                                          f"{', '.join(reg.trainers_for('spade_pool'))}"):
        load_config(None, ["engineer.name=spade", "trainer.name=grpo"])


def test_missing_plugins_resolve_to_what_fits():
    assert reg.resolve_names("spade") == ("spade", "spade_pool", "selfplay")
    assert reg.resolve_names("checkpoint") == ("checkpoint", "mapf_frozenlake", "grpo")
    assert reg.resolve_names(None, None, "simulated") == ("random", "mapf_frozenlake", "simulated")
    assert reg.resolve_names("random", "spade_pool") == ("random", "spade_pool", "selfplay")
    config = load_config(None, ["engineer.name=spade", "engineer.corpus=none"])
    assert (config.testbed.name, config.trainer.name) == ("spade_pool", "selfplay")


def declaring_classes(package: str) -> set[str]:
    """``module:Class`` of every class statement anywhere under the package's folder that assigns
    ``config_class`` in its body: read from the files, independently of how the registry finds plugins."""
    root = Path(reg.__file__).resolve().parents[1]
    out = set()
    for file in sorted((root / package).rglob("*.py")):
        parts = file.relative_to(root).with_suffix("").parts
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        for node in ast.walk(ast.parse(file.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and any(
                    isinstance(stmt, ast.Assign) and any(getattr(t, "id", None) == "config_class" for t in stmt.targets)
                    or isinstance(stmt, ast.AnnAssign) and stmt.value is not None
                    and getattr(stmt.target, "id", None) == "config_class" for stmt in node.body):
                out.add(f"{module}:{node.name}")
    return out


def test_shipped_plugins_are_the_plugin_classes_in_the_packages_named_by_their_config():
    for registry in (TESTBEDS, ENGINEERS, TRAINERS):
        found = reg.in_tree(registry.kind)
        assert found, f"no {registry.kind} found in {reg.PACKAGES[registry.kind]}"
        assert {reg._path(cls) for _, cls in found} == declaring_classes(reg.PACKAGES[registry.kind])
        assert registry.shipped() == [name for name, _ in found] == sorted(registry.shipped())
        assert registry.names()[:len(found)] == registry.shipped()
        for name, cls in found:
            entry = registry.get(name)
            assert (entry.source, entry.target) == (reg.DISTRIBUTION, reg._path(cls))
            assert entry.config == reg._path(cls.config_class) and cls.config_class().name == name
            assert dict(entry.commands) == dict(vars(cls).get("commands") or {})
    assert reg.shipped() == {r.kind: tuple(name for name, _ in reg.in_tree(r.kind)) for r in (TESTBEDS, ENGINEERS, TRAINERS)}


IN_TREE = textwrap.dedent('''
    from typing import Literal
    from curriculum.core.config import PluginConfig
    from curriculum.core.records import Design
    from engineers.base import Engineer

    class DriftConfig(PluginConfig):
        name: Literal["drift"]
        """The name, written once."""
        step: float = 0.1

    class Drift(Engineer):
        """Moves each share a little toward uniform."""
        config_class = DriftConfig
        fits = "buckets"

        def design(self, ctx):
            return Design(raw=ctx.proposal.model_dump(mode="json"))
''')


@pytest.fixture
def drop_in(tmp_path, monkeypatch):
    """A folder searched as part of the ``engineers`` package, as a new file of the tree would be."""
    import sys

    import engineers

    folder = tmp_path / "engineers_extra"
    folder.mkdir()
    monkeypatch.setattr(engineers, "__path__", [*engineers.__path__, str(folder)])
    yield folder
    for module in [m for m in sys.modules if m.startswith(("engineers.drift", "engineers.wander"))]:
        del sys.modules[module]


def test_an_in_tree_plugin_is_one_file_found_by_the_registry_with_no_other_change(drop_in, tmp_path):
    (drop_in / "drift.py").write_text(IN_TREE)
    tools = drop_in / "drift_tools"  # a sub-package without an ``engineer`` module holds no plugin
    tools.mkdir()
    (tools / "__init__.py").write_text("raise RuntimeError('a sub-package without a plugin is not imported')\n")
    registry = Registry("engineer")
    assert "drift" in registry.shipped() and registry.names() == sorted(registry.names())
    entry = registry.get("drift")
    assert (entry.target, entry.config, entry.fits) == ("engineers.drift:Drift", "engineers.drift:DriftConfig", ("buckets",))
    assert entry.description == "Moves each share a little toward uniform."
    cls = entry.load()
    assert entry.load_config()().model_dump() == {"name": "drift", "step": 0.1}
    assert cls(entry.load_config()(step=0.2)).name == "drift"


def test_an_in_tree_plugin_of_several_files_is_a_sub_package_with_an_engineer_module(drop_in):
    folder = drop_in / "wander"
    folder.mkdir()
    (folder / "__init__.py").write_text('"""A plugin of several files."""\n')
    (folder / "engineer.py").write_text(IN_TREE.replace('"drift"', '"wander"').replace("Drift", "Wander"))
    (folder / "helpers.py").write_text("raise RuntimeError('only the engineer module is imported')\n")
    assert "engineers.wander.engineer" in reg.plugin_modules("engineer")
    assert "engineers.wander.helpers" not in reg.plugin_modules("engineer")
    assert Registry("engineer").get("wander").target == "engineers.wander.engineer:Wander"


def test_a_plugin_is_what_it_is_not_what_its_source_mentions(drop_in):
    (drop_in / "drift_notes.py").write_text('"""Mentions config_class, declares no plugin."""\nconfig_class = None\n')
    (drop_in / "drift_variant.py").write_text(
        IN_TREE + "\nclass Inherits(Drift):\n    \"\"\"Inherits config_class: not another plugin.\"\"\"\n")
    found = dict(reg.in_tree("engineer"))
    assert reg._path(found["drift"]) == "engineers.drift_variant:Drift"
    assert "engineers.drift_variant:Inherits" not in {reg._path(c) for c in found.values()}


def test_a_plugin_module_that_cannot_be_imported_is_named(drop_in):
    (drop_in / "drift_broken.py").write_text("import a_module_nobody_installed\n")
    with pytest.raises(PluginError, match="engineer module engineers.drift_broken cannot be imported: "
                                          "ModuleNotFoundError"):
        reg.in_tree("engineer")


def test_two_plugin_classes_that_claim_one_name_are_refused(drop_in):
    (drop_in / "drift.py").write_text(IN_TREE)
    (drop_in / "drift_again.py").write_text(IN_TREE.replace("class Drift(", "class DriftAgain("))
    with pytest.raises(PluginError, match="'drift' is claimed by engineers.drift:Drift and by engineers.drift_again:DriftAgain"):
        reg.in_tree("engineer")


def test_a_plugin_config_is_named_once_by_its_literal():
    from typing import Literal

    from curriculum.core.config import PluginConfig

    class MineConfig(PluginConfig):
        name: Literal["mine"]

    assert MineConfig().name == "mine" and reg.config_name(MineConfig, "mine") == "mine"
    with pytest.raises(ValueError, match="Input should be 'mine'"):
        MineConfig(name="yours")

    class Unnamed(PluginConfig):
        pass

    with pytest.raises(PluginError, match='must declare its name, e.g. name: Literal\\["mine"\\]'):
        reg.config_name(Unnamed, "engineer class x:Unnamed")


def test_finding_the_plugins_imports_no_heavy_dependency():
    import subprocess
    import sys

    code = ("import sys; from curriculum.cli import app; from curriculum.config import load_config; "
            "from curriculum.registry import ENGINEERS, TESTBEDS, TRAINERS; "
            "load_config(None, ['engineer.name=spade']); "
            "[e.load() and e.load_config() for r in (TESTBEDS, ENGINEERS, TRAINERS) for e in r.entries()]; "
            "print(sorted(m for m in ('torch', 'transformers', 'trl', 'vllm') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "[]"


def _point(name, load, dist):
    return SimpleNamespace(name=name, value=f"pkg:{name}", load=load, dist=SimpleNamespace(name=dist))


def test_in_tree_plugins_come_first_then_entry_points_by_distribution_and_name(monkeypatch, plugin_module):
    from engineers.fixed import FixedEngineer
    from engineers.random import RandomEngineer

    spec = {"target": f"{plugin_module}:Newcomer", "config": f"{plugin_module}:NewcomerConfig",
            "description": "from a plugin package", "fits": ["buckets"]}
    broken = _point("random", lambda: 1 / 0, "curriculum")  # an older install's own entry point: never loaded
    points = [_point("zeta", lambda: spec, "b-plugin"), _point("alpha", lambda: spec, "c-plugin"), broken,
              _point("fixed", lambda: spec, "a-plugin"), _point("beta", lambda: spec, "a-plugin")]
    monkeypatch.setattr(reg.metadata, "entry_points", lambda group: points if group == "curriculum.engineers" else [])
    monkeypatch.setattr(reg, "in_tree", lambda kind: [("fixed", FixedEngineer), ("random", RandomEngineer)])
    registry = Registry("engineer")
    registry.register("early", f"{plugin_module}:Newcomer", f"{plugin_module}:NewcomerConfig", "d", fits=("*",))
    assert registry.names() == ["fixed", "random", "beta", "zeta", "alpha", "early"]
    assert registry.shipped() == ["fixed", "random"]
    assert registry.get("fixed").target == "engineers.fixed:FixedEngineer"  # a shipped name wins
    assert registry.get("zeta").source == "b-plugin"


def test_no_plugin_of_a_kind_says_where_it_looked(monkeypatch):
    monkeypatch.setattr(reg.metadata, "entry_points", lambda group: [])
    monkeypatch.setattr(reg, "in_tree", lambda kind: [])
    with pytest.raises(PluginError, match="no trainer is registered: none was found in the package 'trainers' and no"):
        Registry("trainer").names()


def test_a_subclass_is_another_plugin_its_description_and_commands_are_its_own():
    from testbeds.mapf_frozenlake.testbed import MAPFTestbed

    class Variant(MAPFTestbed):
        """A variant of the MAPF testbed."""

    spec = reg.declared("testbed", Variant)
    assert spec["description"] == "A variant of the MAPF testbed." and "commands" not in spec
    assert (spec["tasks"], spec["default_trainer"]) == (MAPFTestbed.task_kinds, "grpo")  # what it fits is inherited


def test_a_run_without_a_trainer_gets_its_testbeds_default_trainer_else_the_first_chosen_by_default():
    assert [TESTBEDS.get(t).default_trainer for t in ("mapf_frozenlake", "reasoning_gym", "spade_pool")] == \
        ["grpo", "grpo", "selfplay"]
    assert TRAINERS.names()[0] == "endpoint" and not TRAINERS.get("endpoint").chosen_by_default
    for default, expected in [(None, "grpo"), ("simulated", "simulated"), ("selfplay", "grpo")]:  # selfplay: no fit
        TESTBEDS.register("elsewhere", "testbeds.mapf_frozenlake.testbed:MAPFTestbed",
                          "testbeds.mapf_frozenlake.testbed:MAPFTestbedConfig", "test", offers="buckets",
                          tasks=("prompt", "bucketed"), default_trainer=default)
        try:
            assert reg.resolve_names(None, "elsewhere") == ("random", "elsewhere", expected)
        finally:
            TESTBEDS.unregister("elsewhere")
