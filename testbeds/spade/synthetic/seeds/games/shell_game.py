# skill: memory recall
def make_task(rng):
    boxes = rng.randint(3, 5)
    where = rng.randint(1, boxes)
    events = [f"The coin is put in box {where}."]
    for _ in range(rng.randint(4, 7)):
        a, b = rng.sample(range(1, boxes + 1), 2)
        events.append(f"Boxes {a} and {b} swap places.")
        where = b if where == a else a if where == b else where
    text = f"There are {boxes} boxes. " + " ".join(events) + " Which box holds the coin now?"
    return {"box": where, "boxes": boxes}, text


def check(state, answer):
    digits = "".join(ch for ch in answer if ch.isdigit())
    if not digits:
        return False, "answer with a box number"
    if int(digits) == state["box"]:
        return True, ""
    return False, f"the coin is not in box {digits}"


def solve(state):
    return str(state["box"])
