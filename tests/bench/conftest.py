"""Registrations of the benchmark plugins, until the lead adds them to ``curriculum.registry``."""

from __future__ import annotations

from curriculum.registry import ENGINEERS, TRAINERS

_ENGINEERS = [
    ("optuna", "engineers.optuna_engineer:OptunaEngineer", "engineers.optuna_engineer:OptunaEngineerConfig",
     "Optuna black-box search (TPE by default) over the generator config; one trial per round."),
    ("frontier", "engineers.frontier:FrontierEngineer", "engineers.frontier:FrontierEngineerConfig",
     "Rule-based baseline: budget to sizes with valid rate in [20%, 80%], harder maps where mastered."),
]
_TRAINERS = [
    ("simulated", "trainers.simulated:SimulatedTrainer", "trainers.simulated:SimulatedConfig",
     "A documented parametric learning-dynamics simulation (not a model) for fast benchmarks."),
]
for _name, *_rest in _ENGINEERS:
    if _name not in ENGINEERS:
        ENGINEERS.register(_name, *_rest)
for _name, *_rest in _TRAINERS:
    if _name not in TRAINERS:
        TRAINERS.register(_name, *_rest)
