# skill: logical deduction
NAMES = ["Ann", "Ben", "Cora", "Dev", "Eli", "Fay"]


def make_task(rng):
    people = rng.sample(NAMES, 4)
    clues = [f"{people[i]} is taller than {people[i + 1]}." for i in range(3)]
    rng.shuffle(clues)
    text = ("Four people stand in a row. " + " ".join(clues)
            + " List them from tallest to shortest, separated by commas.")
    return {"order": people}, text


def check(state, answer):
    names = [n.strip().lower() for n in answer.split(",") if n.strip()]
    want = [n.lower() for n in state["order"]]
    if sorted(names) != sorted(want):
        return False, "name exactly the four people, each once, separated by commas"
    wrong = sum(a != b for a, b in zip(names, want))
    return (True, "") if wrong == 0 else (False, f"{wrong} people are in the wrong place")


def solve(state):
    return ", ".join(state["order"])
