# skill: pattern recognition
WORDS = ["apple", "river", "stone", "cloud", "tiger", "lemon"]  # param: words
POSITION = 2  # param: choice 1 | 2 | 3 | 4


def make_task(rng):
    options = rng.sample(WORDS, 4)
    return {"key": options[POSITION - 1]}, f"One of these words is the key: {', '.join(options)}. Which one?"


def check(state, answer):
    if answer.strip().lower() == state["key"]:
        return True, ""
    return False, "that is not the key"


def solve(state):
    return state["key"]
