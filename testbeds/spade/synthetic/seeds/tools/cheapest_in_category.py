# skill: data retrieval
class CheapestInCategoryEnv(ToolEnv):
    max_turns = 10

    def setup(self, rng):
        categories = ["tea", "lamp", "chair", "mug"]
        products = {}
        for category in categories:
            for k in range(3):
                products[f"{category}-{rng.randint(100, 999)}-{k}"] = {"category": category,
                                                                       "price": rng.randint(5, 200)}
        self.state = {"products": products}
        self.category = rng.choice(categories)
        return f"Which {self.category} product is the cheapest? Answer with its product name."

    def tool_search(self, category: str) -> list:
        """List the product names in a category."""
        return sorted(n for n, p in self.state["products"].items() if p["category"] == category)

    def tool_get_price(self, product: str) -> int:
        """Return the price of one product."""
        if product not in self.state["products"]:
            raise ValueError(f"unknown product {product!r}")
        return self.state["products"][product]["price"]

    def _ranked(self):
        names = self.tool_search(self.category)
        return sorted(names, key=lambda n: (self.state["products"][n]["price"], n))

    def expected_answer(self):
        return self._ranked()[0]

    def solution(self):
        calls = [{"name": "search", "arguments": {"category": self.category}}]
        calls += [{"name": "get_price", "arguments": {"product": n}} for n in self.tool_search(self.category)]
        return calls + [{"answer": self.expected_answer()}]
