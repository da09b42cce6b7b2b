# skill: language understanding
WORDS = ["planet", "garden", "silver", "bridge", "candle", "forest", "marble", "pencil",
         "rocket", "window", "jungle", "orange", "castle", "dragon", "harbor", "meadow"]


def make_task(rng):
    word = rng.choice(WORDS)
    letters = list(word)
    while "".join(letters) == word:
        rng.shuffle(letters)
    return {"word": word}, f"Unscramble the letters '{''.join(letters)}' into a common English word."


def check(state, answer):
    guess = answer.strip().lower()
    if guess == state["word"]:
        return True, ""
    if sorted(guess) != sorted(state["word"]):
        return False, "use exactly the given letters"
    return False, "right letters, but not the word"


def solve(state):
    return state["word"]
