# skill: pattern recognition
def make_task(rng):
    kind = rng.choice(["arithmetic", "geometric", "squares"])
    if kind == "arithmetic":
        start, step = rng.randint(-20, 20), rng.choice([-7, -5, -3, 2, 3, 4, 6, 9])
        terms = [start + step * i for i in range(6)]
    elif kind == "geometric":
        start, ratio = rng.randint(1, 5), rng.choice([2, 3])
        terms = [start * ratio ** i for i in range(6)]
    else:
        offset = rng.randint(-5, 10)
        terms = [i * i + offset for i in range(1, 7)]
    shown = ", ".join(str(t) for t in terms[:5])
    return {"terms": terms}, f"What is the next number in the sequence {shown}, ...?"


def check(state, answer):
    try:
        value = int(answer.replace(" ", ""))
    except ValueError:
        return False, f"{answer!r} is not a whole number"
    if value == state["terms"][5]:
        return True, ""
    return False, "too high" if value > state["terms"][5] else "too low"


def solve(state):
    return str(state["terms"][5])
