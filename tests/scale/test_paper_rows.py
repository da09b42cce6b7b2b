"""Every row of both papers' tables has a config that loads and plans (``docs/fidelity.md``)."""

import re
from pathlib import Path

import pytest

from curriculum.config import load_config
from curriculum.plan import describe_plan
from curriculum.presets import Machine

ROOT = Path(__file__).resolve().parents[2]
FIDELITY = ROOT / "docs" / "fidelity.md"
SECTION = "## Every row of the papers' tables"


def _rows() -> list[tuple[str, str, str, str]]:
    """(paper, row, number, config path) of every line of the table in docs/fidelity.md."""
    text = FIDELITY.read_text()
    if SECTION not in text:
        raise AssertionError(f"docs/fidelity.md has no section {SECTION!r}")
    rows = []
    for line in text.split(SECTION, 1)[1].splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[3].startswith("`configs/"):
            rows.append((cells[0], cells[1], cells[2], cells[3].strip("`")))
    return rows


ROWS = _rows()

# every number the spec quotes from the two tables must have its row
PAPER_NUMBERS = ["32.50", "33.42", "24.50", "46.17", "14.83", "40.42", "51.67", "38.83", "45.21",
                 "50.2", "51.4", "53.0", "58.3", "53.2", "53.5", "40.5", "55.9", "53.7", "5.2", "5.7",
                 "49.0", "54.7"]


def test_the_table_covers_both_papers_rows():
    numbers = " ".join(r[2] for r in ROWS)
    assert [n for n in PAPER_NUMBERS if n not in numbers] == []
    assert {r[0] for r in ROWS} == {"Trainee-to-Trainer", "SPADE"}
    paths = [r[3] for r in ROWS]
    assert len(paths) == len(set(paths)), "one config per row"
    assert len(ROWS) >= 30


@pytest.mark.parametrize("row", ROWS, ids=[Path(r[3]).stem for r in ROWS])
def test_every_row_loads_and_plans(row):
    paper, name, number, path = row
    file = ROOT / path
    assert file.is_file(), f"{name}: {path} does not exist"
    config = load_config(file)
    header = file.read_text()
    accelerate = re.search(r"--config_file (configs/accelerate/\S+\.yaml)", header)
    plan = describe_plan(config, ROOT / accelerate.group(1) if accelerate else None,
                         machine=Machine("gpu", "test", 16, ("h100-80gb",)))
    assert "fits: NO" not in plan, plan
    if "SPADE" == paper and config.trainer.name == "selfplay":
        assert "fits: yes" in plan, plan
    if "base" in name and "engineer" not in name or config.trainer.name == "endpoint":
        assert config.rounds == 0 and config.eval_before_training  # eval-only rows train nothing
    else:
        assert config.rounds >= 1


def test_endpoint_trainer_refuses_training_rounds():
    from curriculum.config import validate_config
    from curriculum.registry import TRAINERS

    data = load_config(ROOT / "configs" / "mapf_endpoint_gpt_5_4.yaml").model_dump(mode="json")
    config = validate_config({**data, "rounds": 1})
    with pytest.raises(ValueError, match="rounds: 0"):
        TRAINERS.get("endpoint").load()(config, testbed=None)
    with pytest.raises(Exception, match="eval_before_training"):
        validate_config({**data, "eval_before_training": False})


def _fake_endpoint(monkeypatch, content: str, completion_tokens: int | None = None) -> list[dict]:
    """Answer every chat request with ``content`` (no network); returns the list the request
    bodies are appended to."""
    import io
    import json

    monkeypatch.setenv("CURRICULUM_ENDPOINT_URL", "http://localhost:9/v1")
    sent: list[dict] = []

    class Reply(io.BytesIO):
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    def urlopen(request, timeout):
        sent.append(json.loads(request.data))
        body = {"choices": [{"message": {"content": content}}]}
        if completion_tokens is not None:
            body["usage"] = {"completion_tokens": completion_tokens}
        return Reply(json.dumps(body).encode())

    class Opener:  # what the endpoint client opens its requests with (one per request, with its deadline)
        def open(self, request, timeout):
            return urlopen(request, timeout)

    from curriculum.core import endpoint

    monkeypatch.setattr(endpoint, "_opener", lambda deadline: Opener())
    return sent


def test_endpoint_trainer_scores_an_endpoint(monkeypatch):
    """The eval-only run's policy is the endpoint: a scripted HTTP answer comes back as the completion."""
    from curriculum.core.types import Task
    from trainers.endpoint import EndpointTrainer

    config = load_config(ROOT / "configs" / "mapf_endpoint_kimi_k2_5.yaml")
    sent = _fake_endpoint(monkeypatch, "Agent 1: (0,0)", completion_tokens=7)
    trainer = EndpointTrainer(config, testbed=None)
    trainer.setup(None)
    out = trainer.policy().generate([Task(id="t", messages=[{"role": "user", "content": "plan"}])],
                                    max_new_tokens=32)
    assert out[0].text == "Agent 1: (0,0)" and out[0].num_tokens == 7
    assert sent[0]["model"] == "kimi-k2.5" and sent[0]["max_tokens"] == 32


def test_an_eval_only_endpoint_run_scores_the_endpoint(monkeypatch, tmp_path):
    """``rounds: 0`` + the endpoint trainer through the controller: the baseline eval asks the
    endpoint every eval prompt, nothing is trained, no round is written."""
    import json

    from curriculum.loop import run
    from testbeds.mapf_frozenlake.parse import format_plan

    config = load_config(ROOT / "configs" / "mapf_endpoint_gpt_5_4.yaml",
                         ["testbed.eval_agents=[3]", "testbed.eval_instances_per_size=1",
                          f"output_dir={tmp_path}", "run_name=eval-only"])
    sent = _fake_endpoint(monkeypatch, format_plan([[(0, 0)]]))
    result = run(config)
    prompts = [request["messages"][-1]["content"] for request in sent]
    assert result.history == [] and not list((result.run_dir / "rounds").glob("round_*"))
    baseline = json.loads((result.run_dir / "baseline_eval.json").read_text())
    test = json.loads((result.run_dir / "baseline_test_eval.json").read_text())
    # 8 sizes x 1 instance on each suite (validation, then test), each prompt once
    assert len(prompts) == 16 and len(set(prompts)) == 16 and all("Agent 1 starts at" in p for p in prompts)
    assert baseline["suite"] == "validation" and test["suite"] == "test"
    assert baseline["score"] == test["score"] == 0.0  # a one-agent, one-cell answer is never a valid 3-agent plan
