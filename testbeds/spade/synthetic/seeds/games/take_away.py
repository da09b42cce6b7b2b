# skill: strategic planning
def make_task(rng):
    k = rng.randint(2, 5)
    n = rng.randint(k + 2, 40)
    while n % (k + 1) == 0:
        n += 1
    text = (f"A pile has {n} stones. Two players alternate; each turn a player removes between 1 "
            f"and {k} stones. Whoever takes the last stone wins. You move first. How many stones "
            "must you take now to be sure to win?")
    return {"n": n, "k": k}, text


def check(state, answer):
    try:
        take = int(answer)
    except ValueError:
        return False, f"{answer!r} is not a number of stones"
    if not 1 <= take <= state["k"]:
        return False, f"you may take between 1 and {state['k']} stones"
    if (state["n"] - take) % (state["k"] + 1) == 0:
        return True, ""
    return False, "after that move your opponent can force a win"


def solve(state):
    return str(state["n"] % (state["k"] + 1))
