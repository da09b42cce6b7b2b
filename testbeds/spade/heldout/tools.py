"""Held-out stateful tool-use suite (tools setting), written for this project and never trained on.

Five ``ToolEnv`` programs (the SPADE tool base class, run in the sandbox with its prelude), each a
task over a backend state that needs several tool calls and is checked on the final answer *and*
the final state:

| task | tools | success |
|---|---|---|
| files_move | list_files, move_file | the file is in the target folder; answer = files there |
| bank_transfer | get_balance, transfer | the source is empty; answer = the target's new balance |
| inventory_restock | list_items, set_stock | every item below the threshold is at it; answer = how many were restocked |
| calendar_book | list_events, book | a meeting booked at the first free hour; answer = that hour |
| orders_top_customer | list_orders, get_customer | read-only; answer = the email of the customer with most orders |

Each task is played ``episodes_per_task`` times from fixed seeds (``eval_seed + i``) with the same
multi-turn loop as training (text turns; the tool call or final answer is the whole turn), greedy
by default. Metrics: success rate per task and ``tools/mean``; the mean number of tool
calls of successful episodes.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from curriculum.core.breakdown import EvalBreakdown
from curriculum.core.types import Policy, Task

TOOL_TASKS: dict[str, str] = {}

TOOL_TASKS["files_move"] = '''
class FilesMoveEnv(ToolEnv):
    max_turns = 8

    def setup(self, rng):
        folders = ["inbox", "archive", "projects", "notes"]
        words = ["plan", "draft", "budget", "report", "memo", "list", "photo", "scan", "trip", "idea"]
        self.state = {f: sorted(rng.sample(words, rng.randint(1, 4))) for f in folders}
        self.src = rng.choice([f for f in folders if self.state[f]])
        self.name = rng.choice(self.state[self.src])
        self.dst = rng.choice([f for f in folders if f != self.src and self.name not in self.state[f]])
        return (f"Find which folder holds the file '{self.name}' and move it to '{self.dst}'. "
                f"Then answer with the number of files in '{self.dst}'.")

    def tool_list_files(self, folder: str):
        """List the files in a folder."""
        if folder not in self.state:
            raise ValueError(f"no folder {folder!r}; folders: {sorted(self.state)}")
        return self.state[folder]

    def tool_move_file(self, name: str, source: str, target: str):
        """Move a file from the source folder to the target folder."""
        if source not in self.state or target not in self.state:
            raise ValueError("unknown folder")
        if name not in self.state[source]:
            raise ValueError(f"{name!r} is not in {source!r}")
        self.state[source].remove(name)
        self.state[target] = sorted(self.state[target] + [name])
        return "moved"

    def expected_answer(self):
        return str(len(self.state[self.dst]) if self.name in self.state[self.dst] else len(self.state[self.dst]) + 1)

    def check_state(self):
        return self.name in self.state[self.dst]

    def solution(self):
        return [{"name": "list_files", "arguments": {"folder": self.src}},
                {"name": "move_file", "arguments": {"name": self.name, "source": self.src, "target": self.dst}},
                {"answer": str(len(self.state[self.dst]) + 1)}]
'''

TOOL_TASKS["bank_transfer"] = '''
class BankTransferEnv(ToolEnv):
    max_turns = 8

    def setup(self, rng):
        names = ["alice", "bob", "carol", "dave", "erin"]
        self.state = {n: rng.randint(10, 500) for n in names}
        self.src, self.dst = rng.sample(names, 2)
        self.final = self.state[self.src] + self.state[self.dst]
        return (f"Move the entire balance of account '{self.src}' to account '{self.dst}'. "
                f"Then answer with the new balance of '{self.dst}'.")

    def tool_get_balance(self, account: str):
        """Current balance of an account."""
        if account not in self.state:
            raise ValueError(f"no account {account!r}")
        return self.state[account]

    def tool_transfer(self, source: str, target: str, amount: int):
        """Transfer an amount between two accounts."""
        if source not in self.state or target not in self.state:
            raise ValueError("unknown account")
        if amount <= 0 or amount > self.state[source]:
            raise ValueError(f"invalid amount {amount}")
        self.state[source] -= amount
        self.state[target] += amount
        return {"source": self.state[source], "target": self.state[target]}

    def expected_answer(self):
        return str(self.final)

    def check_state(self):
        return self.state[self.src] == 0 and self.state[self.dst] == self.final

    def solution(self):
        return [{"name": "get_balance", "arguments": {"account": self.src}},
                {"name": "transfer", "arguments": {"source": self.src, "target": self.dst,
                                                    "amount": self.state[self.src]}},
                {"answer": str(self.final)}]
'''

TOOL_TASKS["inventory_restock"] = '''
class InventoryRestockEnv(ToolEnv):
    max_turns = 10

    def setup(self, rng):
        items = ["bolts", "nuts", "screws", "washers", "nails", "hinges"]
        self.state = {i: rng.randint(0, 20) for i in rng.sample(items, 4)}
        self.threshold = rng.randint(6, 12)
        self.low = sorted(i for i, q in self.state.items() if q < self.threshold)
        if not self.low:
            first = sorted(self.state)[0]
            self.state[first] = 0
            self.low = [first]
        return (f"Restock every item whose stock is below {self.threshold} to exactly {self.threshold}. "
                "Answer with the number of items you restocked.")

    def tool_list_items(self):
        """All items with their stock."""
        return dict(self.state)

    def tool_set_stock(self, item: str, quantity: int):
        """Set the stock of an item."""
        if item not in self.state:
            raise ValueError(f"no item {item!r}")
        self.state[item] = quantity
        return "ok"

    def expected_answer(self):
        return str(len(self.low))

    def check_state(self):
        return all(self.state[i] == self.threshold for i in self.low)

    def solution(self):
        calls = [{"name": "list_items", "arguments": {}}]
        calls += [{"name": "set_stock", "arguments": {"item": i, "quantity": self.threshold}} for i in self.low]
        return calls + [{"answer": str(len(self.low))}]
'''

TOOL_TASKS["calendar_book"] = '''
class CalendarBookEnv(ToolEnv):
    max_turns = 6

    def setup(self, rng):
        self.day = rng.choice(["monday", "tuesday", "wednesday", "thursday", "friday"])
        busy = sorted(rng.sample(range(9, 17), rng.randint(2, 6)))
        self.state = {self.day: {h: "busy" for h in busy}}
        self.free = next(h for h in range(9, 17) if h not in busy) if len(busy) < 8 else None
        return (f"Book a one-hour meeting titled 'review' on {self.day} at the earliest free hour "
                "between 9 and 16. Answer with that hour as a number.")

    def tool_list_events(self, day: str):
        """Booked hours of a day."""
        return {str(h): t for h, t in sorted(self.state.get(day, {}).items())}

    def tool_book(self, day: str, hour: int, title: str):
        """Book an hour on a day."""
        if not 9 <= hour <= 16:
            raise ValueError("hours run from 9 to 16")
        slots = self.state.setdefault(day, {})
        if hour in slots:
            raise ValueError(f"{day} {hour}:00 is taken")
        slots[hour] = title
        return "booked"

    def expected_answer(self):
        return str(self.free)

    def check_state(self):
        return self.state[self.day].get(self.free) == "review"

    def solution(self):
        return [{"name": "list_events", "arguments": {"day": self.day}},
                {"name": "book", "arguments": {"day": self.day, "hour": self.free, "title": "review"}},
                {"answer": str(self.free)}]
'''

TOOL_TASKS["orders_top_customer"] = '''
class OrdersTopCustomerEnv(ToolEnv):
    max_turns = 6

    def setup(self, rng):
        ids = rng.sample(range(100, 999), 4)
        self.customers = {str(i): f"user{i}@example.com" for i in ids}
        counts = rng.sample([1, 2, 3, 4, 5], 4)
        self.orders = []
        for cid, n in zip(ids, counts):
            self.orders += [{"order": len(self.orders) + k + 1, "customer": str(cid)} for k in range(n)]
        rng.shuffle(self.orders)
        self.top = str(ids[counts.index(max(counts))])
        self.state = {"orders": self.orders}
        return "Find the customer with the most orders and answer with their email address."

    def tool_list_orders(self):
        """All orders with their customer id."""
        return self.orders

    def tool_get_customer(self, customer: str):
        """Customer record by id."""
        if str(customer) not in self.customers:
            raise ValueError(f"no customer {customer!r}")
        return {"id": str(customer), "email": self.customers[str(customer)]}

    def expected_answer(self):
        return self.customers[self.top]

    def solution(self):
        return [{"name": "list_orders", "arguments": {}},
                {"name": "get_customer", "arguments": {"customer": self.top}},
                {"answer": self.customers[self.top]}]
'''


class ToolSuiteEval(BaseModel):
    """The held-out tool-use suite."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    tasks: list[str] = Field(default_factory=lambda: list(TOOL_TASKS))
    """Tasks to run (names in ``TOOL_TASKS``)."""
    episodes_per_task: int = Field(4, ge=1)
    """Episodes per task, from seeds ``eval_seed + i``."""
    eval_seed: int = Field(30_260_000, ge=0)
    """Base reset seed (fixed)."""
    max_turns: int = Field(8, ge=1)
    """Agent turns per episode."""
    max_new_tokens: int = Field(256, ge=1)
    """Budget per agent turn."""


SYSTEM = ("You are operating tools over a backend state. Each turn, call exactly one tool with a JSON "
          'object {"name": <tool>, "arguments": {...}}, or give the final answer inside \\boxed{...}.')


def evaluate(policy: Policy, config: ToolSuiteEval, sandbox: Any, *, seed: int = 0,
             samples: int = 2) -> tuple[dict[str, float], EvalBreakdown, list[dict[str, Any]]]:
    """Play every task's episodes with ``policy`` (batched turns, replayed env steps): (metrics,
    breakdown (the metrics as rates group ``tools``), a few samples)."""
    from testbeds.spade.sandbox import SandboxFailure

    episodes = [{"task": name, "seed": config.eval_seed + i, "messages": [], "actions": [], "done": False,
                 "won": False, "calls": 0} for name in config.tasks for i in range(config.episodes_per_task)]

    def replay(ep: dict[str, Any], extra: str | None) -> tuple[str, Any]:
        with sandbox.load(TOOL_TASKS[ep["task"]]) as env:
            first = env.reset(seed=ep["seed"])
            last = None
            for action in ep["actions"] + ([extra] if extra is not None else []):
                last = env.step(action)
        return first.obs, last

    from concurrent.futures import ThreadPoolExecutor

    workers = getattr(sandbox.config, "workers", 1)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for ep, res in zip(episodes, pool.map(lambda e: _safe(replay, e, None), episodes)):
            if isinstance(res, SandboxFailure) or res is None:
                ep["done"] = True
                continue
            ep["messages"] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": res[0]}]
        for turn in range(config.max_turns):
            live = [e for e in episodes if not e["done"]]
            if not live:
                break
            tasks = [Task(id=f"tool-{e['task']}-{e['seed']}-{turn}", messages=e["messages"]) for e in live]
            replies = policy.generate(tasks, max_new_tokens=config.max_new_tokens, seed=seed + turn)
            results = list(pool.map(lambda pair: _safe(replay, pair[0], pair[1].text), zip(live, replies)))
            for ep, reply, res in zip(live, replies, results):
                ep["messages"] = ep["messages"] + [{"role": "assistant", "content": reply.text}]
                ep["actions"].append(reply.text)
                if isinstance(res, SandboxFailure) or res is None:
                    ep["done"] = True
                    continue
                step = res[1]
                if step.obs.startswith("{\"result\""):
                    ep["calls"] += 1
                if step.terminated or step.truncated:
                    ep["done"] = True
                    ep["won"] = step.terminated and step.reward >= 1.0
                    continue
                ep["messages"].append({"role": "user", "content": step.obs})
    per_task: dict[str, list[float]] = {}
    for ep in episodes:
        per_task.setdefault(ep["task"], []).append(1.0 if ep["won"] else 0.0)
    metrics = {f"tools/{t}": sum(v) / len(v) for t, v in per_task.items()}
    metrics["tools/mean"] = sum(metrics.values()) / max(len(metrics), 1)
    wins = [ep["calls"] for ep in episodes if ep["won"]]
    metrics["tools/calls_when_solved"] = sum(wins) / len(wins) if wins else 0.0
    out = [{"task": ep["task"], "seed": ep["seed"], "won": ep["won"], "turns": ep["messages"][-4:]}
           for ep in episodes[:samples]]
    return metrics, EvalBreakdown(rates={"tools": metrics}), out


def _safe(fn: Any, *args: Any) -> Any:
    from testbeds.spade.sandbox import SandboxFailure

    try:
        return fn(*args)
    except SandboxFailure as exc:
        return exc
