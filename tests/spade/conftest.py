"""A session-scoped sandbox pool with the synthetic-environment prelude, configured like the sandbox's
own tests (every isolation layer on, short deadlines)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from curriculum.registry import ENGINEERS

FIXTURES = Path(__file__).parent / "fixtures"
FAST_SANDBOX = dict(workers=1, call_deadline_s=1.0, load_deadline_s=2.0, supervisor_grace_s=1.0,
                    memory_mb=256)
"""Sandbox settings for tests (the sandbox tests' FAST, one worker)."""


@pytest.fixture(scope="session")
def sandbox_pool():
    from testbeds.spade.sandbox import SandboxConfig, SandboxPool
    from testbeds.spade.synthetic import prelude_source

    pool = SandboxPool(SandboxConfig(**FAST_SANDBOX, prelude_source=prelude_source()))
    pool.start()
    yield pool
    pool.close()


@pytest.fixture(scope="session")
def expected() -> dict[str, str | None]:
    return json.loads((FIXTURES / "expected.json").read_text())
