# skill: tool selection
class CurrencyConvertEnv(ToolEnv):
    max_turns = 6

    def setup(self, rng):
        codes = ["EUR", "USD", "GBP", "JPY", "CHF"]
        self.src, self.dst = rng.sample(codes, 2)
        self.amount = rng.randint(10, 500)
        self.state = {"rates": {(a, b): round(rng.uniform(0.5, 2.0), 3) for a in codes for b in codes if a != b},
                      "weather": {"Paris": "rain", "Oslo": "snow"}}
        return f"How much is {self.amount} {self.src} in {self.dst}? Answer rounded to 2 decimals."

    def tool_get_rate(self, source: str, target: str) -> float:
        """Return the exchange rate from one currency code to another."""
        if (source, target) not in self.state["rates"]:
            raise ValueError("unknown currency pair")
        return self.state["rates"][(source, target)]

    def tool_get_weather(self, city: str) -> str:
        """Return today's weather in a city."""
        return self.state["weather"].get(city, "sunny")

    def tool_add_numbers(self, a: float, b: float) -> float:
        """Return a + b."""
        return a + b

    def expected_answer(self):
        return f"{self.amount * self.state['rates'][(self.src, self.dst)]:.2f}"

    def solution(self):
        return [{"name": "get_rate", "arguments": {"source": self.src, "target": self.dst}},
                {"answer": self.expected_answer()}]
