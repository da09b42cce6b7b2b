# skill: mathematical reasoning
def make_task(rng):
    a, b, c = rng.randint(12, 99), rng.randint(12, 99), rng.randint(1, 50)
    m = rng.choice([7, 9, 11, 13, 17])
    return {"value": (a * b + c) % m}, f"Compute ({a} * {b} + {c}) mod {m}."


def check(state, answer):
    try:
        value = int(answer)
    except ValueError:
        return False, f"{answer!r} is not an integer"
    if value == state["value"]:
        return True, ""
    return False, "not the remainder" + (" (a remainder is smaller than the modulus)" if value > 16 else "")


def solve(state):
    return str(state["value"])
