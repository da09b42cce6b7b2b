"""Fixtures for the SPADE co-training tests."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture(scope="session")
def sandbox_pool():
    from testbeds.sandbox import SandboxConfig, SandboxPool

    pool = SandboxPool(SandboxConfig(workers=2))
    pool.start()
    yield pool
    pool.close()
