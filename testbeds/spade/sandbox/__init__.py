"""Sandbox for model-written environment programs: isolated, killable, fast.

Quick use::

    from testbeds.spade.sandbox import SandboxConfig, SandboxPool, SandboxFailure

    with SandboxPool(SandboxConfig()) as pool:
        with pool.load(source) as env:          # the class whose name ends in "Env"
            obs, info = env.reset(seed=0).obs, ...
            result = env.step("left")             # StepResult, validated
            answer = env.call("solution")         # any public method, JSON in and out

Every failure raises ``SandboxFailure`` whose ``.failure`` is a ``Failure`` with a ``kind``
(syntax_error, exception, timeout, memory_limit, crash, bad_return, forbidden_import, ...)
and a ``detail``. ``doctor()`` reports which isolation layers are in force.
"""

from testbeds.spade.sandbox.config import (DEFAULT_ALLOWED_MODULES, Failure, ResetResult,
                                     SandboxConfig, SandboxFailure, StepResult)
from testbeds.spade.sandbox.layers import DoctorReport, LayerStatus
from testbeds.spade.sandbox.pool import EnvHandle, SandboxPool, doctor
from testbeds.spade.sandbox.trial import TrialReport, try_program

__all__ = [
    "DEFAULT_ALLOWED_MODULES", "DoctorReport", "EnvHandle", "Failure", "LayerStatus",
    "ResetResult", "SandboxConfig", "SandboxFailure", "SandboxPool", "StepResult",
    "TrialReport", "doctor", "try_program",
]
