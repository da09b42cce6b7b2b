"""Test-only helpers: canned environment programs and a scripted agent (a ``TurnModel``).

The scripted agent decodes nothing: it answers from a script keyed by what is in the prompt
(the hint, the observation), and tokenises with a tiny character-level vocabulary so token ids
stay valid for the tiny test model.
"""

from __future__ import annotations

from trainers.selfplay.play import Generated

# A number-guessing game: the target is in the observation only with a hint.
GUESS_ENV = '''
import random
import re

class GuessEnv:
    def reset(self, seed=None):
        self.rng = random.Random(seed)
        self.target = self.rng.randint(1, 9)
        self.turns = 0
        return f"Guess my number from 1 to 9 (id {self.target * 7 % 10}).", {}

    def step(self, action):
        self.turns += 1
        found = re.findall(r"boxed\\{([^}]*)\\}", str(action))
        ok = bool(found) and found[-1].strip() == str(self.target)
        if ok:
            return "correct", 1.0, True, False, {"won": True}
        if self.turns >= 2:
            return "out of turns", 0.0, False, True, {"won": False}
        return "wrong, try again", 0.0, False, False, {}

    def solution(self):
        return [str(self.target)]
'''

# Always won by the answer "yes": mastered by everyone.
EASY_ENV = '''
class EasyEnv:
    def reset(self, seed=None):
        self.seed = seed
        return f"Say yes. ({seed % 5})", {}

    def step(self, action):
        won = "{yes}" in str(action)
        return "done", 1.0 if won else 0.0, True, False, {"won": won}

    def solution(self):
        return ["yes"]
'''

HINT = "the number is id*3 mod 10"

VOCAB = 64
"""Character-level ids 1..63 (0 is the end-of-turn token)."""
EOT = 0


def encode(text: str) -> list[int]:
    return [1 + (ord(c) % (VOCAB - 1)) for c in text]


class ScriptedTurnModel:
    """Agent: answers \\boxed{target} when the hint is in its prompt, else a wrong guess (1),
    and "yes" to the easy game. The target is recovered from the ``id`` in the observation
    (target*7 mod 10 → target = id*3 mod 10), which is what the hint says."""

    def __init__(self) -> None:
        self.texts: dict[tuple[int, ...], str] = {}
        self.calls = 0

    def prompt_ids(self, messages):
        text = "\n".join(m["content"] for m in messages)
        ids = encode(text)
        self.texts[tuple(ids)] = text
        return ids

    def env_turn_ids(self, text, closed):
        return encode("\n" + text + "\n")

    def _answer(self, prompt: str) -> str:
        if "Say yes" in prompt:
            return "\\boxed{yes}"
        if "Hint:" in prompt and "(id " in prompt:
            ident = int(prompt.split("(id ")[1].split(")")[0])
            return f"\\boxed{{{ident * 3 % 10}}}"
        return "\\boxed{1}"

    def generate(self, prefixes, *, max_new_tokens, temperature, seed):
        self.calls += 1
        out = []
        for prefix in prefixes:
            prompt = max(((ids, t) for ids, t in self.texts.items() if tuple(prefix[:len(ids)]) == ids),
                         key=lambda item: len(item[0]))[1]
            text = self._answer(prompt)
            ids = encode(text)[:max_new_tokens - 1] + [EOT]
            out.append(Generated(ids=ids, logprobs=[-0.5] * len(ids), text=text, finished=True))
        return out
