# skill: state modification
class RestockEnv(ToolEnv):
    max_turns = 10

    def setup(self, rng):
        items = rng.sample(["apples", "pears", "plums", "figs", "kiwis", "limes"], 4)
        stock = {item: rng.randint(0, 20) for item in items}
        stock[items[0]] = rng.randint(0, 9)  # at least one item needs restocking
        self.threshold = 10
        self.amount = rng.randint(3, 8)
        self.state = {"stock": stock}
        self.initial = dict(stock)
        return (f"Add {self.amount} units to every item whose stock is below {self.threshold}, and "
                "leave the others unchanged. Answer 'done' when finished.")

    def tool_get_stock(self) -> dict:
        """Return the stock of every item."""
        return dict(self.state["stock"])

    def tool_add_stock(self, item: str, units: int) -> int:
        """Add units to one item and return its new stock."""
        if item not in self.state["stock"]:
            raise ValueError(f"unknown item {item!r}")
        self.state["stock"][item] += units
        return self.state["stock"][item]

    def check_state(self):
        return all(self.state["stock"][item] == start + (self.amount if start < self.threshold else 0)
                   for item, start in self.initial.items())

    def solution(self):
        low = [item for item, start in self.initial.items() if start < self.threshold]
        calls = [{"name": "get_stock", "arguments": {}}]
        calls += [{"name": "add_stock", "arguments": {"item": item, "units": self.amount}} for item in low]
        return calls + [{"answer": "done"}]
