"""``engineer.designer: endpoint``: an external model writes the environments (the paper's frozen
external designer); its designs are played and scored, never trained on."""

import pytest
from pydantic import ValidationError

from engineers.spade.config import SpadeEngineerConfig


def test_endpoint_designer_config():
    config = SpadeEngineerConfig(designer="endpoint")
    assert config.endpoint is not None and config.endpoint.url is None  # URL from the environment
    assert SpadeEngineerConfig(designer="endpoint", endpoint={"url": "http://h:8000/v1"}).endpoint.url
    with pytest.raises(ValidationError, match="only read with designer: endpoint"):
        SpadeEngineerConfig(endpoint={"url": "http://h:8000/v1"})


def test_endpoint_designer_asks_the_endpoint(monkeypatch, tmp_path):
    from curriculum.core.endpoint import EndpointPolicy
    from engineers.spade.engineer import SpadeEngineer

    monkeypatch.setenv("CURRICULUM_ENDPOINT_URL", "http://localhost:9")
    engineer = SpadeEngineer(SpadeEngineerConfig(designer="endpoint", memory=False), run_dir=str(tmp_path))
    try:
        policy = engineer._policy(ctx=None)
        assert isinstance(policy, EndpointPolicy) and policy.endpoint.url == "http://localhost:9/v1/chat/completions"
        assert engineer._policy(ctx=None) is policy  # one client for the run
    finally:
        engineer.close()


def test_the_paper_row_uses_the_endpoint_designer():
    from pathlib import Path

    from curriculum.config import load_config

    root = Path(__file__).resolve().parents[2]
    config = load_config(root / "configs" / "spade_games_qwen3_30b_a3b_external_designer.yaml")
    assert config.engineer.designer == "endpoint" and config.trainer.beta == 0.005
