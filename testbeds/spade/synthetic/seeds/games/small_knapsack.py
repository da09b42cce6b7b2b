# skill: optimization
import itertools


def make_task(rng):
    items = [(rng.randint(2, 9), rng.randint(3, 20)) for _ in range(5)]
    capacity = rng.randint(10, 18)
    best = 0
    for r in range(len(items) + 1):
        for combo in itertools.combinations(items, r):
            if sum(w for w, _ in combo) <= capacity:
                best = max(best, sum(v for _, v in combo))
    listing = "; ".join(f"item {i + 1}: weight {w}, value {v}" for i, (w, v) in enumerate(items))
    text = (f"A bag holds weight at most {capacity}. {listing}. What is the largest total value "
            "you can carry (each item at most once)?")
    return {"best": best}, text


def check(state, answer):
    try:
        value = int(answer)
    except ValueError:
        return False, f"{answer!r} is not a number"
    if value == state["best"]:
        return True, ""
    return False, "more is possible" if value < state["best"] else "that much does not fit"


def solve(state):
    return str(state["best"])
