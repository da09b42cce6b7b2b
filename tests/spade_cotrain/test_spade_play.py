"""Agent play through the real sandbox with a scripted agent."""

import pytest
from cotrain_fakes import EASY_ENV, GUESS_ENV, HINT, ScriptedTurnModel

from curriculum.core.pool import PoolEnvironment
from testbeds.spade.synthetic.games import extract_boxed
from trainers.selfplay import rewards as R
from trainers.selfplay.play import PlayConfig, action_from_text, play, summarise


def test_extract_boxed():
    assert extract_boxed("so \\boxed{4} or \\boxed{ {a, b} }") == "{a, b}"
    assert extract_boxed("no answer") is None
    assert extract_boxed("\\boxed{unclosed") is None
    assert extract_boxed("spaced \\boxed {5}") == "5"  # LaTeX allows the space
    assert extract_boxed("\\boxed{4} then cut off \\boxed{5") == "4"  # last complete box
    cfg = PlayConfig(games_action="boxed")
    assert action_from_text("I say \\boxed{7}", "games", cfg) == "7"
    assert action_from_text("I say \\boxed{7}", "games", PlayConfig()) == "I say \\boxed{7}"
    assert action_from_text('{"name": "ls"}', "tools", cfg) == '{"name": "ls"}'


def test_play_hint_regret_and_masks(sandbox_pool):
    envs = [PoolEnvironment(hash="guess", program=GUESS_ENV, hint=HINT, skill="logic"),
            PoolEnvironment(hash="easy", program=EASY_ENV, hint="say yes")]
    cfg = PlayConfig(episodes_per_condition=3, max_turns=3)
    episodes = play(sandbox_pool, envs, ScriptedTurnModel(), cfg, seed=5)
    assert len(episodes) == 2 * 2 * 3
    stats = summarise(envs, episodes)
    guess, easy = stats["guess"], stats["easy"]
    # without the hint the scripted agent guesses 1: it wins only when the target is 1
    plain = [e for e in episodes if e.env_id == "guess" and not e.hinted]
    assert all(e.end in ("terminated", "truncated") for e in plain)
    assert guess["win_rate_hint"] == 1.0
    assert guess["win_rate"] < 1.0
    assert R.regret(guess["returns_hint"], guess["returns"]) == pytest.approx(1.0 - sum(guess["returns"]) / 3)
    assert easy["win_rate"] == easy["win_rate_hint"] == 1.0
    # hinted and unhinted halves share reset seeds
    seeds = [e.seed for e in episodes if e.env_id == "guess"]
    assert seeds[:3] == seeds[3:]
    # env turns are masked out; a lost two-turn episode has model, env, model segments
    lost = [e for e in plain if not e.won]
    if lost:
        ep = lost[0]
        assert len(ep.actions) == 2 and ep.env_mask[0] == 1 and 0 in ep.env_mask and ep.env_mask[-1] == 1
        assert len(ep.env_mask) == len(ep.completion_ids) == len(ep.logprobs)
        assert all(lp == 0.0 for lp, m in zip(ep.logprobs, ep.env_mask) if m == 0)


def test_broken_env_ends_with_failure(sandbox_pool):
    broken = PoolEnvironment(hash="bad", program="class BadEnv:\n    def reset(self, seed=None):\n        raise ValueError('x')\n")
    episodes = play(sandbox_pool, [broken], ScriptedTurnModel(), PlayConfig(episodes_per_condition=1), seed=0)
    assert all(e.end.startswith("env_failure:") and e.completion_ids == [] for e in episodes)


def test_transformers_turn_model_logprobs_match_a_forward_pass(tiny_model_dir):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from trainers.selfplay.play import TransformersTurnModel

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    tm = TransformersTurnModel(model, tok, batch_size=4)
    prompts = [tm.prompt_ids([{"role": "user", "content": "hi"}]), tm.prompt_ids([{"role": "user", "content": "a longer prompt"}])]
    outs = tm.generate(prompts, max_new_tokens=6, temperature=0.7, seed=1)
    for prompt, out in zip(prompts, outs):
        assert len(out.ids) == len(out.logprobs) <= 6
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([prompt + out.ids])).logits[0, len(prompt) - 1:-1]
        ref = torch.log_softmax(logits / 0.7, dim=-1)[torch.arange(len(out.ids)), torch.tensor(out.ids)]
        assert out.logprobs == pytest.approx(ref.tolist(), abs=1e-4)
    # an environment turn closes the agent's turn once, opens a user turn and the next generation prompt
    text = tok.decode(tm.env_turn_ids("feedback", closed=True))
    assert text.startswith("\n<|im_start|>user\nfeedback") and text.endswith("<|im_start|>assistant\n")
    assert tok.decode(tm.env_turn_ids("x", closed=False)).startswith("<|im_end|>")
