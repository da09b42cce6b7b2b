"""What a run starts from when no ``--config`` is given: a preset sized to this machine.

``curriculum run --engineer NAME`` names only an engineer; the registry fills in the testbed and
trainer that fit (``registry.resolve_names``) and this module
picks the preset file for that (engineer, testbed, trainer) on this kind of machine, among those
the testbed declares (``Testbed.presets``):

* a **CPU** machine gets a demo-sized preset (the embedded 135M model, a few tasks and steps per
  round) that finishes a meaningful run in minutes;
* a **GPU** machine gets the paper's set-up (Qwen3-4B; plan it first with ``--dry-run``).

Machine detection (``detect_machine``) imports nothing heavy: ``--machine cpu|gpu`` or
``$CURRICULUM_MACHINE`` force a kind; otherwise ``CUDA_VISIBLE_DEVICES`` set to nothing hides the
GPUs, and ``nvidia-smi -L`` (or ``/proc/driver/nvidia/gpus``) lists them. The choice and the
reason are printed before anything loads. A preset written for one engineer (``Preset.engineer``)
is preferred; otherwise the testbed's generic preset runs with the requested
engineer in place of the file's.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from curriculum.config import ConfigError, RunConfig, section_name, load_config, read_config_file
from curriculum.core.presets import MachineKind, Preset
from curriculum.registry import TESTBEDS, MisfitError, UnknownName, resolve_names


@dataclass(frozen=True)
class Machine:
    """What kind of machine this is and how we know."""

    kind: MachineKind
    reason: str
    cpus: int
    gpus: tuple[str, ...] = ()


def presets_for(testbed: str) -> list[Preset]:
    """The presets ``testbed`` declares (``Testbed.presets``), in its order; none for a name not registered."""
    if testbed not in TESTBEDS:
        return []
    return [replace(p, testbed=testbed) for p in TESTBEDS.get(testbed).load().presets]


def all_presets() -> list[Preset]:
    """Every registered testbed's presets (imports every testbed module)."""
    return [p for name in TESTBEDS.names() for p in presets_for(name)]


def detect_machine(force: str | None = None) -> Machine:
    """CPU or GPU, and why (module docstring). ``force``: the ``--machine`` value (``cpu``, ``gpu``,
    ``auto`` or ``None``); ``None`` or ``auto`` then defer to ``$CURRICULUM_MACHINE``."""
    cpus = os.cpu_count() or 1
    source = "--machine"
    if force in (None, "auto") and os.environ.get("CURRICULUM_MACHINE"):
        force, source = os.environ["CURRICULUM_MACHINE"], "CURRICULUM_MACHINE"
    if force in ("cpu", "gpu"):
        return Machine(force, f"forced by {source}={force}", cpus)
    if force not in (None, "auto"):
        raise ValueError(f"{source} must be cpu, gpu or auto (got {force!r})")
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip() in ("", "-1"):
        return Machine("cpu", "CUDA_VISIBLE_DEVICES hides every GPU", cpus)
    gpus = _nvidia_gpus()
    if gpus:
        return Machine("gpu", f"{len(gpus)} GPU(s): {gpus[0]}", cpus, gpus)
    return Machine("cpu", f"no NVIDIA GPU found (no nvidia-smi, no /proc/driver/nvidia); {cpus} CPU cores", cpus)


def _nvidia_gpus() -> tuple[str, ...]:
    smi = shutil.which("nvidia-smi")
    if smi is not None:
        try:
            out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=10).stdout
        except (OSError, subprocess.SubprocessError):
            out = ""
        names = [line.split(":", 1)[1].split("(UUID")[0].strip() for line in out.splitlines()
                 if line.startswith("GPU ") and ":" in line]
        if names:
            return tuple(names)
    proc = Path("/proc/driver/nvidia/gpus")
    return tuple(f"NVIDIA GPU {p.name}" for p in sorted(proc.iterdir())) if proc.is_dir() else ()


def choose_preset(engineer: str, testbed: str, trainer: str, machine: MachineKind) -> Preset | None:
    """The preset for this combination on this machine: one written for the engineer first, then
    the testbed's generic one for that trainer; ``None`` when there is none."""
    candidates = [p for p in presets_for(testbed) if p.trainer == trainer
                  and p.machine in (machine, "any") and p.engineer in (None, engineer)]
    candidates.sort(key=lambda p: p.engineer != engineer)  # stable: written-for-the-engineer first
    return candidates[0] if candidates else None


@dataclass(frozen=True)
class Choice:
    """The preset a run starts from and why (printed before anything loads)."""

    preset: Preset
    machine: Machine
    engineer: str
    replaced: bool = False
    """The preset's file names another engineer, replaced by the one asked for."""

    def explain(self, config: RunConfig) -> str:
        """The line printed before anything loads; ``config`` is the resolved run config (its
        budget is quoted, not the preset's description)."""
        p, m = self.preset, self.machine
        other = "gpu" if m.kind == "cpu" else "cpu"
        if self.replaced:
            for_whom = f"the {p.testbed} preset with engineer {self.engineer} in place of the file's"
        else:
            for_whom = f"the {self.engineer} engineer on {p.testbed}"
        kind = "any" if p.machine == "any" else f"a {m.kind.upper()}"
        return (f"preset: configs/{p.file} — {for_whom} for {kind} machine ({p.summary}; "
                f"{config.rounds} rounds of {config.tasks_per_round} tasks)\n"
                f"  why: {m.reason}. Force the other with --machine {other}, or pass --config FILE.")


def resolve_run(config: Path | None, overrides: list[str], *, engineer: str | None = None,
                testbed: str | None = None, trainer: str | None = None, machine: str | None = None,
                base: dict[str, Any] | None = None, **shortcuts: Any) -> tuple[RunConfig, Choice | None]:
    """Config file (or, with neither a file nor ``base``, the machine's preset) + shortcut flags
    (``engineer``, ``testbed``, ``trainer``, ``rounds``, ``seed``, ``output_dir``, ``run_name``) +
    ``--set`` overrides → a validated RunConfig, and the preset choice when one was made."""
    choice = None
    data = dict(base or {})
    if config is not None:
        data.update(read_config_file(config))
    elif base is None:
        try:
            names = resolve_names(engineer, testbed, trainer)
            found = detect_machine(machine)
        except (MisfitError, UnknownName, ValueError) as err:
            raise ConfigError(str(err)) from None
        preset = choose_preset(*names, found.kind)
        if preset is not None:
            data.update(read_config_file(preset.path))
            replaced = section_name(data.get("engineer")) != names[0]
            if replaced:  # a generic preset runs the engineer asked for
                data["engineer"] = {"name": names[0]}
            choice = Choice(preset, found, names[0], replaced)
    # A shortcut that switches plugin drops the other plugin's options from the file.
    for section, name in (("engineer", engineer), ("testbed", testbed), ("trainer", trainer)):
        current = data.get(section)
        current_name = current.get("name") if isinstance(current, dict) else current
        if name is not None and current_name != name:
            data[section] = {"name": name}
    sets = [f"{key}={value}" for key, value in shortcuts.items() if value is not None]
    return load_config(None, sets + list(overrides), base=data), choice
