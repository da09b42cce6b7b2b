# skill: error recovery
class ExpiredTokenEnv(ToolEnv):
    max_turns = 8

    def setup(self, rng):
        self.report = f"R{rng.randint(10, 99)}"
        self.state = {"token_valid": False, "reports": {self.report: rng.randint(1000, 9999)}}
        return f"Fetch report {self.report} and answer with the revenue figure it contains."

    def tool_fetch_report(self, report_id: str) -> dict:
        """Return a report's contents (needs a valid session token)."""
        if not self.state["token_valid"]:
            raise ValueError("session token expired: call refresh_token, then retry")
        if report_id not in self.state["reports"]:
            raise ValueError(f"no report {report_id!r}")
        return {"report": report_id, "revenue": self.state["reports"][report_id]}

    def tool_refresh_token(self) -> str:
        """Renew the session token."""
        self.state["token_valid"] = True
        return "token refreshed"

    def expected_answer(self):
        return str(self.state["reports"][self.report])

    def solution(self):
        fetch = {"name": "fetch_report", "arguments": {"report_id": self.report}}
        return [fetch, {"name": "refresh_token", "arguments": {}}, fetch, {"answer": self.expected_answer()}]
