# skill: causal inference
LAMPS = ["red", "blue", "green", "amber", "white", "violet"]


def make_task(rng):
    lamps = rng.sample(LAMPS, 5)
    links = {}
    for lamp in lamps[1:]:
        links[lamp] = rng.choice([other for other in lamps if other != lamp])
    start = rng.choice(lamps)
    lit, frontier = {start}, [start]
    while frontier:
        cause = frontier.pop()
        for effect, trigger in links.items():
            if trigger == cause and effect not in lit:
                lit.add(effect)
                frontier.append(effect)
    rules = " ".join(f"When {t} turns on, {e} turns on." for e, t in sorted(links.items()))
    text = (f"Lamps: {', '.join(lamps)}. {rules} All lamps are off and someone switches on {start}. "
            "Which lamps end up on? List them in alphabetical order, separated by commas.")
    return {"lit": sorted(lit)}, text


def check(state, answer):
    names = sorted(n.strip().lower() for n in answer.split(",") if n.strip())
    if names == state["lit"]:
        return True, ""
    missing = len(set(state["lit"]) - set(names))
    extra = len(set(names) - set(state["lit"]))
    return False, f"{missing} lamp(s) missing and {extra} lamp(s) that stay off"


def solve(state):
    return ", ".join(state["lit"])
