# skill: API orchestration
class OrderTotalEnv(ToolEnv):
    max_turns = 8

    def setup(self, rng):
        names = rng.sample(["ada", "bo", "cy", "dee", "eve", "finn", "gus"], 4)
        self.state = {"users": {name: 100 + i for i, name in enumerate(names)},
                      "orders": {100 + i: [rng.randint(3, 90) for _ in range(rng.randint(1, 4))]
                                 for i in range(len(names))}}
        self.customer = rng.choice(names)
        return f"What is the total amount of all orders placed by the customer named {self.customer}?"

    def tool_find_user(self, name: str) -> int:
        """Return the user id of a customer name."""
        if name not in self.state["users"]:
            raise ValueError(f"no customer named {name!r}")
        return self.state["users"][name]

    def tool_get_orders(self, user_id: int) -> list:
        """Return the order amounts of a user id."""
        if user_id not in self.state["orders"]:
            raise ValueError(f"no user with id {user_id}")
        return list(self.state["orders"][user_id])

    def expected_answer(self):
        return str(sum(self.state["orders"][self.state["users"][self.customer]]))

    def solution(self):
        user_id = self.state["users"][self.customer]
        return [{"name": "find_user", "arguments": {"name": self.customer}},
                {"name": "get_orders", "arguments": {"user_id": user_id}},
                {"answer": self.expected_answer()}]
