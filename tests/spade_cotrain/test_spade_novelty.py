"""``curriculum spade novelty``: per design round, the share of admitted designs that are new games
(closest seed-library similarity below the threshold) and their Vendi score / n, pooled over runs."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from engineers.spade.novelty import novelty, read_rounds

ROOT = Path(__file__).resolve().parents[2]


def _run(run_dir: Path, rounds: list[dict]) -> Path:
    run_dir.mkdir(parents=True)
    (run_dir / "spade_rounds.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rounds))
    return run_dir


def _round(index: int, sims: dict[str, float], *, designs: int = 4, vendi: float = 0.5, run_vendi: float = 0.4,
           rejected_sim: float | None = None) -> dict:
    similarity = {h: ["guess_number", s] for h, s in sims.items()}
    if rejected_sim is not None:  # a design that was not admitted never counts
        similarity["rejected"] = ["guess_number", rejected_sim]
    return {"round": index, "designs": designs, "admitted": list(sims), "seed_similarity": similarity,
            "vendi_per_n": vendi, "vendi_per_n_run": run_vendi}


def test_novel_share_counts_admitted_designs_below_the_threshold(tmp_path):
    a = _run(tmp_path / "a", [_round(0, {"h1": 0.95, "h2": 0.60}, rejected_sim=0.1),
                              _round(1, {"h3": 0.79}, vendi=0.9, run_vendi=0.3)])
    b = _run(tmp_path / "b", [_round(0, {"h4": 0.99, "h5": 0.85, "h6": 0.50}, vendi=0.7, run_vendi=0.6)])
    report = novelty([a, b])
    by_round = {e["round"]: e for e in report["summary"]}
    assert by_round[0]["admitted"] == 5 and by_round[0]["novel"] == 2
    assert by_round[0]["novel_share"] == pytest.approx(2 / 5)
    assert by_round[0]["vendi_per_n"] == pytest.approx(0.6)  # each run counts once
    assert by_round[1]["novel_share"] == 1.0 and by_round[1]["runs"] == 1
    assert by_round["all"]["novel_share"] == pytest.approx(3 / 6)
    assert by_round["all"]["seed_similarity"] == pytest.approx((0.95 + 0.6 + 0.79 + 0.99 + 0.85 + 0.5) / 6)
    # the run-so-far diversity of each run is its last design round's: a 0.3, b 0.6
    assert by_round["all"]["vendi_per_n_run"] == pytest.approx(0.45)
    # a stricter threshold counts fewer new games
    assert novelty([a, b], threshold=0.55)["summary"][-1]["novel"] == 1


def test_a_round_without_admissions_has_no_share(tmp_path):
    run = _run(tmp_path / "r", [_round(0, {}, vendi=None, run_vendi=None)])
    entry = novelty([run])["summary"][0]
    assert entry["admitted"] == 0 and entry["novel_share"] is None and entry["vendi_per_n"] is None


def test_a_run_without_design_rounds_is_an_error_not_zero(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="no spade_rounds.jsonl"):
        read_rounds(tmp_path / "empty")
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "spade_rounds.jsonl").write_text('{"round": 0}\n{not json\n')
    with pytest.raises(ValueError, match="spade_rounds.jsonl:2"):
        read_rounds(bad)


def test_cli_novelty_prints_and_writes(tmp_path):
    run = _run(tmp_path / "run", [_round(0, {"h1": 0.5, "h2": 0.9})])
    out = tmp_path / "novelty.json"
    proc = subprocess.run([sys.executable, "-m", "curriculum.cli", "spade", "novelty", str(run), "--out", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "new games" in proc.stdout and "0.50" in proc.stdout
    assert json.loads(out.read_text())["summary"][0]["novel"] == 1
    missing = subprocess.run([sys.executable, "-m", "curriculum.cli", "spade", "novelty", str(tmp_path / "none")],
                             cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert missing.returncode == 2 and "no spade_rounds.jsonl" in missing.stderr
