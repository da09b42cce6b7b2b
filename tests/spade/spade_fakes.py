"""Test doubles: a policy that answers design prompts from a script, and a JSONL corpus."""

from __future__ import annotations

import json
from pathlib import Path

from curriculum.core.types import Completion, Task


class ScriptedPolicy:
    """Returns the scripted outputs in order (cycling) and records every prompt it saw."""

    def __init__(self, outputs: list[str]) -> None:
        self.outputs = outputs
        self.seen: list[Task] = []

    def generate(self, tasks, *, max_new_tokens=None, temperature=None, seed=0):
        out = []
        for task in tasks:
            text = self.outputs[len(self.seen) % len(self.outputs)]
            self.seen.append(task)
            out.append(Completion(text=text, num_tokens=len(text.split())))
        return out


def write_jsonl_corpus(path: Path, n: int = 12) -> Path:
    """A corpus of ``n`` distinguishable documents, one JSON object per line."""
    with path.open("w") as handle:
        for i in range(n):
            text = f"Document {i}: " + f"topic-{i} " * 40
            handle.write(json.dumps({"id": f"doc{i}", "text": text}) + "\n")
    return path
