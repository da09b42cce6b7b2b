# skill: spatial reasoning
def make_task(rng):
    moves = "".join(rng.choice("FFLR") for _ in range(rng.randint(6, 10)))
    x = y = 0
    dx, dy = 0, 1
    for move in moves:
        if move == "F":
            x, y = x + dx, y + dy
        elif move == "L":
            dx, dy = -dy, dx
        else:
            dx, dy = dy, -dx
    text = ("A robot starts at (0, 0) facing north (+y). F moves one cell forward, L and R turn 90 "
            f"degrees left and right in place. After the commands {moves}, where is it? Answer as x,y.")
    return {"pos": (x, y)}, text


def check(state, answer):
    parts = answer.replace("(", "").replace(")", "").split(",")
    try:
        x, y = (int(p) for p in parts)
    except ValueError:
        return False, "write the position as two integers x,y"
    want = state["pos"]
    if (x, y) == tuple(want):
        return True, ""
    return False, "x is right, y is wrong" if x == want[0] else "x is wrong"


def solve(state):
    return f"{state['pos'][0]},{state['pos'][1]}"
