"""Fuzzing the host side of the sandbox with worker replies (hypothesis).

Model code controls everything in its instance, ``json.dumps`` included, so any bytes may come
back as a reply. ``testbeds.spade.sandbox.replies`` must answer every frame with a checked value or a
``ReplyError`` (never another exception), and ``EnvHandle`` must turn every reply into a result
or a ``SandboxFailure``: here a real instance sends replies drawn at random, through a
monkeypatched ``json.dumps``.
"""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from testbeds.spade.sandbox import SandboxConfig, SandboxFailure, SandboxPool
from testbeds.spade.sandbox.replies import (ReplyError, ReplyLimits, control_reply, finite_float,
                                      instance_offer, instance_reply)

LIMITS = ReplyLimits(max_depth=32, max_int_digits=640)
MANY = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])

scalars = (st.none() | st.booleans() | st.integers() | st.integers(-10**700, 10**700)
           | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=6)
           | st.sampled_from(["\ud800", "timeout", "crash", "ok", "value", "error", "exception"]))
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                      | st.dictionaries(st.sampled_from(["ok", "value", "error", "output", "kind",
                                                         "detail", "line", "signal", "op", "pid"])
                                        | st.text(max_size=4), inner, max_size=5), max_leaves=16)


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


ADVERSARIAL = [
    b"", b"\xff\xfe", b"null", b"[1,2]", b"{}", b'{"ok":false}', b'{"ok":true}', b'{"ok":1,"value":2}',
    b'{"ok":false,"error":{"kind":"timeout","detail":"fake"},"output":""}',
    b'{"ok":false,"error":{"kind":"crash","detail":"fake","signal":9},"output":""}',
    b'{"ok":false,"error":{"kind":"nonsense","detail":"x"},"output":""}',
    b'{"ok":false,"error":{"kind":"exception","detail":1},"output":""}',
    b'{"ok":false,"error":"boom","output":""}',
    b'{"ok":true,"value":["o",NaN,false,false,{}],"output":""}',
    b'{"ok":true,"value":["o",1e999,false,false,{}],"output":""}',
    b'{"ok":true,"value":["o",-Infinity,false,false,{}],"output":""}',
    b'{"ok":true,"value":["o",' + b"9" * 5000 + b',false,false,{}],"output":""}',
    b'{"ok":true,"value":["\\ud800",{}],"output":""}',
    b'{"ok":true,"value":["o",{"\\udc00":1}],"output":""}',
    b'{"ok":true,"value":' + nested(900).encode() + b',"output":""}',
    b'{"ok":true,"value":' + nested(100_000).encode() + b',"output":""}',
    b'{"ok":true,"value":"x","output":5}',
    b'{"ok":true,"value":"x","output":"","extra":1}',
    b'{"op":"instance","pid":true}', b'{"op":"instance","pid":-3}', b'{"op":"instance","pid":1e3}',
    b'{"op":"instance","pid":' + b"1" * 700 + b"}",
]


def _check_all(payload: bytes) -> None:
    for check in (instance_reply, control_reply, instance_offer):
        try:
            check(payload, LIMITS)
        except ReplyError:
            pass


@pytest.mark.parametrize("payload", ADVERSARIAL, ids=range(len(ADVERSARIAL)))
def test_adversarial_replies_raise_only_reply_error(payload):
    _check_all(payload)


@pytest.mark.parametrize("payload", ADVERSARIAL[4:22], ids=range(4, 22))
def test_forged_or_malformed_instance_replies_are_refused(payload):
    with pytest.raises(ReplyError):
        instance_reply(payload, LIMITS)


@MANY
@given(st.binary(max_size=64))
def test_random_bytes(payload):
    _check_all(payload)


@MANY
@given(values)
def test_random_json(value):
    _check_all(json.dumps(value).encode("utf-8", "surrogatepass"))


@MANY
@given(values)
def test_accepted_replies_serialise_again_as_strict_json(value):
    """Whatever is accepted can be written back out as strict UTF-8 JSON."""
    payload = json.dumps({"ok": True, "value": value, "output": ""}).encode("utf-8", "surrogatepass")
    try:
        reply = instance_reply(payload, LIMITS)
    except ReplyError:
        return
    json.dumps(reply.value, allow_nan=False).encode("utf-8")


@MANY
@given(scalars)
def test_finite_float_never_raises(value):
    result = finite_float(value)
    assert result is None or (isinstance(result, float) and math.isfinite(result))


FORGER = '''
import json, random
_real = json.dumps
CHOICES = {choices!r}

class ForgerEnv:
    def reset(self, seed=None):
        rng = random.Random(seed)
        json.dumps = lambda *a, **k: rng.choice(CHOICES)
        return "o", {{}}

    def step(self, action):
        return "o", 1.0, False, False, {{}}
'''


@pytest.fixture(scope="module")
def forger_pool():
    pool = SandboxPool(SandboxConfig(workers=1, call_deadline_s=2.0, load_deadline_s=2.0,
                                     memory_mb=256))
    pool.start()
    yield pool
    pool.close()


def test_instance_forging_replies_gets_bad_return_and_pool_serves_on(forger_pool):
    """A real instance replaces ``json.dumps``; every forged reply is a ``bad_return`` (the
    instance is closed), nothing else escapes, and the worker serves the next program."""
    choices = [p.decode("utf-8", "surrogateescape") for p in ADVERSARIAL[:22]
               if len(p) < 1000] + ['{"ok": true, "value": ["o", 10000000000000000000000000000'
                                    '000000000000000000000000000000000000000000000000000000000'
                                    + "0" * 400 + ', false, false, {}], "output": ""}']
    kinds = []
    for seed in range(25):
        with forger_pool.load(FORGER.format(choices=choices)) as env:
            try:
                env.reset(seed)  # the reset reply is still real: json.dumps is replaced inside
                env.step("a")
                env.step("b")
            except SandboxFailure as exc:
                kinds.append(exc.failure.kind)
    assert kinds and set(kinds) == {"bad_return"}, kinds
    with forger_pool.load("class OkEnv:\n    def reset(self, seed=None):\n        return 'fine', {}\n") as env:
        assert env.reset().obs == "fine"
