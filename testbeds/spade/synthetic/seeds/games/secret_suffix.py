# skill: language understanding
WORDS = ["apple", "river", "stone", "cloud", "tiger", "lemon"]  # param: words
SUFFIX = "zz"  # param: choice "zz" | "ox" | "ka" | "mi"


def make_task(rng):
    word = rng.choice(WORDS)
    return {"word": word}, f"Every word has a secret form. What is the secret form of '{word}'?"


def check(state, answer):
    if answer.strip().lower() == state["word"] + SUFFIX:
        return True, ""
    return False, "not the secret form"


def solve(state):
    return state["word"] + SUFFIX
