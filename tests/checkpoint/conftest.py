"""Registers the checkpoint engineer (until the lead adds it to ``curriculum.registry``) and the
test-only scripted variant whose engineer model is a ``ScriptedPolicy`` with canned outputs."""

from __future__ import annotations

from curriculum.registry import ENGINEERS

if "checkpoint" not in ENGINEERS:
    ENGINEERS.register(
        "checkpoint",
        "engineers.checkpoint.engineer:CheckpointEngineer",
        "engineers.checkpoint.config:CheckpointEngineerConfig",
        "The policy redesigns its own generator config from a failure report (contexts V1–V6).",
    )
if "checkpoint_scripted" not in ENGINEERS:
    ENGINEERS.register(
        "checkpoint_scripted",
        "checkpoint_fakes:ScriptedCheckpointEngineer",
        "checkpoint_fakes:ScriptedCheckpointConfig",
        "Test only: the checkpoint engineer answering from canned outputs.",
    )
