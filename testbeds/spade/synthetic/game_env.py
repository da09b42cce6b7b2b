"""``GameEnv``: the fixed skeleton of a single-answer text game (SPADE's structured design mode).

A structured design supplies three functions (``testbeds.spade.synthetic.skeleton`` renders them into a
program whose class subclasses this one):

* ``make_task(rng) -> (state, text)`` — the task's state (any value) and its statement, drawn
  from ``rng`` (a ``random.Random`` seeded by ``reset``);
* ``check(state, answer) -> (correct, feedback)`` — whether the boxed answer (a string) solves
  the task, and feedback that says what is wrong when it does not;
* ``solve(state) -> answer`` — the correct answer.

The skeleton owns everything else, the same for every design: ``reset(seed)`` returns the task
text plus the answer-format line; ``step(action)`` reads the last ``\\boxed{...}`` of the action
(no box: "no answer" feedback, reward 0), returns reward 1.0 and ``terminated`` on a correct
answer, the design's feedback and reward 0 otherwise, and ``truncated`` once ``max_turns``
actions have been taken; ``info["won"]`` says whether the episode was won.

Standard library only: this module is part of the sandbox prelude (``prelude_source``), so a
rendered program uses ``GameEnv`` (and ``extract_boxed``) without importing them.
"""

import random

from testbeds.spade.synthetic.games import extract_boxed

ANSWER_FORMAT = "Give your final answer inside \\boxed{...}."


class GameEnv:
    """Skeleton of a single-answer text game; subclasses define make_task, check, solution."""

    max_turns = 4

    def make_task(self, rng):
        raise NotImplementedError

    def check(self, state, answer):
        raise NotImplementedError

    def reset(self, seed=None):
        self.turns = 0
        self.state, text = self.make_task(random.Random(seed))
        return str(text).rstrip() + "\n" + ANSWER_FORMAT, {}

    def step(self, action):
        self.turns += 1
        truncated = self.turns >= self.max_turns
        answer = extract_boxed(str(action))
        if answer is None:
            return "No answer found: write it inside \\boxed{...}.", 0.0, False, truncated, {"won": False}
        correct, feedback = self.check(self.state, answer.strip())
        if correct:
            return "Correct.", 1.0, True, False, {"won": True}
        return "Wrong: " + str(feedback), 0.0, False, truncated, {"won": False}
