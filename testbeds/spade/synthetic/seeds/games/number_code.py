# skill: mathematical reasoning
FACTOR = 10  # param: choice 10 | 100 | 1000


def make_task(rng):
    number = rng.randint(12, 99)
    return {"code": number * FACTOR}, f"Every number has a code. What is the code of {number}?"


def check(state, answer):
    if answer.strip().replace(",", "") == str(state["code"]):
        return True, ""
    return False, "that is not the code"


def solve(state):
    return str(state["code"])
