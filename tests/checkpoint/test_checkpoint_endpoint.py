"""The endpoint engineer against a stub OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

import numpy as np
import pytest
from chat_stub import ChatStub as Stub
from chat_stub import chat_reply as ok
from checkpoint_fakes import answer, config_json, fixed_breakdown

from curriculum.core.records import RoundReport
from curriculum.core.types import EvalReport, Task
from engineers.base import DesignContext
from engineers.checkpoint.config import CheckpointEngineerConfig, EndpointConfig
from curriculum.core.endpoint import EndpointError, EndpointPolicy, chat_url, resolve_endpoint
from engineers.checkpoint.engineer import CheckpointEngineer
from testbeds.mapf_frozenlake.config import GeneratorConfig
from testbeds.mapf_frozenlake.testbed import MAPFTestbed

NEW = config_json([0.05, 0.05, 0.2, 0.4, 0.1, 0.1, 0.05, 0.05], hole=0.15)


def ctx() -> DesignContext:
    previous = config_json([0.125] * 8)
    history = [RoundReport(round=0, proposal=previous, train_metrics={},
                           eval=EvalReport(score=0.0, metrics={}, breakdown=fixed_breakdown()))]
    return DesignContext(round=0, total_rounds=3, history=history, proposal=GeneratorConfig.model_validate(previous),
                         testbed=MAPFTestbed(), rng=np.random.default_rng(0), run_info={"epochs_per_round": 3})


def engineer(url: str | None, **endpoint) -> CheckpointEngineer:
    return CheckpointEngineer(CheckpointEngineerConfig(
        model="endpoint", max_new_tokens=300, endpoint={"url": url, "retries": 2, "backoff_s": 0.0,
                                                         "timeout_s": 5, **endpoint}))


def test_endpoint_answer_is_parsed_and_request_has_openai_shape(monkeypatch):
    monkeypatch.setenv("CURRICULUM_ENDPOINT_API_KEY", "sk-test")
    with Stub([(200, ok(answer(NEW, summary="6x6 gets more.")))]) as stub:
        design = engineer(stub.url, model="qwen3-4b").design(ctx())
    assert design.raw == NEW and design.notes["summary"] == "6x6 gets more."
    (request,) = stub.requests
    assert request["path"] == "/v1/chat/completions" and request["auth"] == "Bearer sk-test"
    body = request["body"]
    assert body["model"] == "qwen3-4b" and body["max_tokens"] == 300 and body["temperature"] == 0.0
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    assert "## F. Failure breakdown" in body["messages"][1]["content"]
    assert "response_format" not in body


def test_retries_on_5xx_and_429_then_succeeds():
    with Stub([(500, "boom"), (429, "slow down"), (200, ok(answer(NEW)))]) as stub:
        design = engineer(stub.url).design(ctx())
    assert len(stub.requests) == 3 and design.raw == NEW


def test_failing_endpoint_keeps_previous_config_and_says_so():
    with Stub([(503, "overloaded")]) as stub:
        c = ctx()
        design = engineer(stub.url).design(c)
    assert len(stub.requests) == 3  # 1 + 2 retries
    assert design.raw is None
    assert design.notes["status"].startswith("endpoint failed, kept the previous config: HTTP 503")
    assert "overloaded" in design.notes["status"]
    projected, changes = c.testbed.project(design.raw, c.proposal)
    assert projected == c.proposal and changes[0].path == ""


def test_auth_error_is_not_retried():
    with Stub([(401, {"error": "bad key"})]) as stub:
        design = engineer(stub.url).design(ctx())
    assert len(stub.requests) == 1 and "HTTP 401" in design.notes["status"] and "bad key" in design.notes["status"]


def test_unreachable_and_missing_url_do_not_crash(monkeypatch):
    monkeypatch.delenv("CURRICULUM_ENDPOINT_URL", raising=False)
    design = engineer(None).design(ctx())
    assert "no endpoint URL" in design.notes["status"] and design.raw is None
    with Stub([]) as stub:
        url = stub.url
    design = engineer(url, retries=0).design(ctx())  # server is closed now
    assert "cannot reach" in design.notes["status"]


def test_json_schema_response_format_with_fallback_on_400():
    with Stub([(400, "response_format unsupported"), (200, ok(answer(NEW), tokens=None))]) as stub:
        design = engineer(stub.url, json_schema=True).design(ctx())
    first, second = (r["body"] for r in stub.requests)
    schema = first["response_format"]["json_schema"]["schema"]
    assert first["response_format"]["type"] == "json_schema" and "summary" in schema["properties"]
    assert "response_format" not in second and design.raw == NEW


def test_env_vars_and_url_forms():
    env = {"CURRICULUM_ENDPOINT_URL": "http://h:8000", "CURRICULUM_ENDPOINT_MODEL": "m",
           "CURRICULUM_ENDPOINT_API_KEY": "k"}
    resolved = resolve_endpoint(EndpointConfig(), env)
    assert resolved.url == "http://h:8000/v1/chat/completions" and resolved.model == "m" and resolved.api_key == "k"
    assert chat_url("http://h/v1/") == "http://h/v1/chat/completions"
    assert chat_url("https://h/v1/chat/completions") == "https://h/v1/chat/completions"
    assert resolve_endpoint(EndpointConfig(url="http://x/v1"), {}).model == "default"
    with pytest.raises(EndpointError, match="CURRICULUM_ENDPOINT_URL"):
        resolve_endpoint(EndpointConfig(), {})


def test_malformed_reply_is_an_endpoint_error():
    with Stub([(200, {"unexpected": True})]) as stub:
        policy = EndpointPolicy(EndpointConfig(url=stub.url, retries=0))
        with pytest.raises(EndpointError, match="choices"):
            policy.generate([Task(id="t", messages=[{"role": "user", "content": "hi"}])])
