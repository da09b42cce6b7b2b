"""Registers the test-only scripted checkpoint engineer, whose engineer model is a
``ScriptedPolicy`` with canned outputs."""

from __future__ import annotations

from curriculum.registry import ENGINEERS

if "checkpoint_scripted" not in ENGINEERS:
    ENGINEERS.register(
        "checkpoint_scripted",
        "checkpoint_fakes:ScriptedCheckpointEngineer",
        "checkpoint_fakes:ScriptedCheckpointConfig",
        "Test only: the checkpoint engineer answering from canned outputs.",
        fits=("buckets",),
    )
