"""Agent play (the SPADE paper): multi-turn episodes in admitted environments, in the sandbox.

For every environment e in a play set and i = 0..G-1 (G = ``episodes_per_condition``, default 8),
the agent plays one episode *without* the privileged hint and one *with* it, both from the same
reset seed s_i (paired episodes: the hint is the only difference). An episode:

    obs_0, info_0 = env.reset(s_i)
    messages      = [system: setting instruction, user: obs_0 (+ "Hint: h" when hinted)]
    for turn t = 1..max_turns:
        text_t   = agent(messages)                    # one batched generation over all live episodes
        action_t = text_t as is (games read the last \\boxed{...} themselves; tool-use environments
                   parse the JSON tool call or final answer in ``ToolEnv``); optionally only the
                   boxed content for games (``games_action = "boxed"``)
        obs_t, r_t, terminated, truncated, info_t = env.step(action_t)
        stop when terminated or truncated, at max_turns, or when the episode's tokens would pass
        max_episode_tokens; otherwise obs_t becomes the next user turn

    return R = sum_t r_t;  won = info_T["won"] (or "success") when the environment reports it,
    else (terminated and r_T > 0)

Token layout for training (TRL's ``rollout_func`` contract): ``prompt_ids`` is the rendered first
prompt; ``completion_ids`` concatenates the agent's generated tokens and the environment's turns
(rendered with the chat template); ``env_mask`` is 1 on generated tokens and 0 on environment
tokens, so environment text never enters the loss; ``logprobs`` holds the generation-time
log-probs of generated tokens (0 on environment tokens).

Sandbox: a worker holds one instance at a time, while generation wants every live episode in
one batch. Each turn therefore *replays* an episode in a fresh instance (load, reset(s_i), the
previous actions, then the new one), in parallel threads, one per worker. The replayed
observations must equal the recorded ones; an environment that answers differently is
non-deterministic and its episode ends with failure ``nondeterministic``. Any sandbox failure
ends the episode with ``env_failure:<kind>`` and the return collected so far.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from curriculum.core.pool import PoolEnvironment
from testbeds.spade.synthetic.games import extract_boxed

GAMES_INSTRUCTION = (
    "You are playing a text environment. Read the observation, think briefly, and give your move "
    "or answer inside \\boxed{...}. You will get feedback after each move."
)
TOOLS_INSTRUCTION = (
    "You are operating tools over a backend state. Each turn, either call one tool with a JSON "
    'object {"name": <tool name>, "arguments": {...}} or, when done, give the final answer inside '
    "\\boxed{...}. Tool results come back as the next message."
)


class PlayConfig(BaseModel):
    """How the agent plays admitted environments."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    episodes_per_condition: int = Field(8, ge=1)
    """G: episodes per environment without the hint, and again with it (the paper: 8)."""
    max_turns: int = Field(6, ge=1)
    """Agent turns per episode before it is cut off."""
    max_new_tokens_per_turn: int = Field(256, ge=1)
    """Generation budget of one agent turn."""
    max_episode_tokens: int = Field(2048, ge=1)
    """Budget of the whole completion (agent and environment tokens) of one episode."""
    temperature: float = Field(1.0, ge=0.0, le=5.0)
    """Sampling temperature of agent turns (0: greedy)."""
    batch_size: int | None = Field(None, ge=1)
    """Episodes per generate call on the transformers backend (``None``: the trainer's
    ``micro_batch_size``). Agent turns are short, so this can be far above a micro batch of long
    design rows."""
    hint_template: str = "Hint: {hint}"
    """How the privileged hint is appended to the first observation."""
    games_instruction: str = GAMES_INSTRUCTION
    """System message for game environments."""
    tools_instruction: str = TOOLS_INSTRUCTION
    """System message for tool-use environments (the tool schemas from ``reset``'s info follow it)."""
    games_action: Literal["raw", "boxed"] = "raw"
    """Game action sent to ``step``: the agent's whole turn (``raw``; the designer contract has
    games read the last ``\\boxed{}`` themselves, as admission sends ``\\boxed{answer}``), or only the
    last ``\\boxed{}`` content (``boxed``; the whole text when there is none)."""


@dataclass
class Generated:
    """One generated agent turn."""

    ids: list[int]
    logprobs: list[float]
    text: str
    finished: bool
    """Ended with the end-of-turn token (not cut by the token budget)."""


class TurnModel(Protocol):
    """What play needs from a policy: chat rendering in tokens, and batched generation."""

    def prompt_ids(self, messages: list[dict[str, str]]) -> list[int]:
        """The rendered conversation with the assistant's generation prompt."""
        ...

    def env_turn_ids(self, text: str, closed: bool) -> list[int]:
        """Tokens after an agent turn up to the next generation prompt, with ``text`` as the
        environment's (user) message; ``closed``: the agent turn already ended with end-of-turn."""
        ...

    def generate(self, prefixes: list[list[int]], *, max_new_tokens: int, temperature: float,
                 seed: int) -> list[Generated]:
        """Continue every prefix by one agent turn."""
        ...


@dataclass
class Episode:
    """One played episode and its training tokens."""

    env_id: str
    hinted: bool
    seed: int
    prompt_ids: list[int] = field(default_factory=list)
    completion_ids: list[int] = field(default_factory=list)
    env_mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)
    actions: list[Any] = field(default_factory=list)
    observations: list[str] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    won: bool = False
    end: str = ""
    """``terminated``, ``truncated``, ``max_turns``, ``token_budget``, ``nondeterministic`` or
    ``env_failure:<kind>``; empty while the episode is live."""

    @property
    def ret(self) -> float:
        return float(sum(self.rewards))

    @property
    def model_tokens(self) -> int:
        return int(sum(self.env_mask))

    def summary(self) -> dict[str, Any]:
        return {"env_id": self.env_id, "hinted": self.hinted, "seed": self.seed, "return": self.ret,
                "won": self.won, "turns": len(self.actions), "end": self.end}


def action_from_text(text: str, setting: str, config: PlayConfig) -> str:
    """The ``step`` argument for one agent turn (see the module docstring)."""
    if setting == "games" and config.games_action == "boxed":
        boxed = extract_boxed(text)
        return boxed if boxed is not None else text.strip()
    return text.strip()


def first_messages(env: PoolEnvironment, obs: str, info: dict[str, Any], hinted: bool,
                   config: PlayConfig) -> list[dict[str, str]]:
    """System instruction and first observation (with the hint when ``hinted``)."""
    if env.setting == "tools":
        system = config.tools_instruction
        tools = info.get("tools")
        if tools and all(isinstance(t, dict) for t in tools):  # full schemas (ToolEnv puts them in obs)
            import json

            system += "\nTools:\n" + json.dumps(tools, sort_keys=True)
    else:
        system = config.games_instruction
    user = obs
    if hinted and env.hint:
        user = f"{obs}\n\n{config.hint_template.format(hint=env.hint)}"
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def episode_seeds(seed: int, env_index: int, count: int) -> list[int]:
    """Reset seeds of one environment's episodes (shared by the hinted and unhinted halves)."""
    rng = np.random.default_rng(np.random.SeedSequence([seed, env_index]))
    return [int(s) for s in rng.integers(0, 2**31 - 1, size=count)]


def _replay(pool: Any, env: PoolEnvironment, seed: int, actions: list[Any]) -> tuple[Any, list[Any]]:
    """Fresh instance: reset(seed), then every action; returns (reset result, step results)."""
    with pool.load(env.program, env.class_name) as handle:
        first = handle.reset(seed=seed)
        steps = [handle.step(a) for a in actions]
    return first, steps


def _won(step: Any) -> bool:
    for key in ("won", "success", "solved"):
        if isinstance(step.info.get(key), bool):
            return bool(step.info[key])
    return bool(step.terminated and step.reward > 0)


def play(pool: Any, envs: Sequence[PoolEnvironment], model: TurnModel, config: PlayConfig, *,
         seed: int, threads: int | None = None, indices: Sequence[int] | None = None,
         conditions: Sequence[bool] = (False, True)) -> list[Episode]:
    """Play G unhinted and G hinted episodes per environment; episodes in env order, unhinted first.

    ``indices``: each environment's position in the whole step's play set (default 0..n-1), which
    picks its reset seeds, so a shard of the play set played on one rank gets the same seeds as in
    the whole set. ``conditions``: which halves to play (``(False,)``: unhinted only, as the
    held-out games are played)."""
    from testbeds.spade.sandbox import SandboxFailure

    episodes, owners = _new_episodes(envs, indices, seed, config.episodes_per_condition, conditions)
    workers = threads or getattr(getattr(pool, "config", None), "workers", 1) or 1

    def run(i: int) -> tuple[int, Any, Any]:
        ep, env = episodes[i], owners[i]
        try:
            return i, _replay(pool, env, ep.seed, ep.actions), None
        except SandboxFailure as exc:
            return i, None, exc.failure.kind

    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="spade-play") as executor:
        for i, result, failure in executor.map(run, range(len(episodes))):  # reset every episode
            _start(episodes[i], owners[i], result, failure, model, config)
        closed: dict[int, bool] = {}  # episode → its last agent turn ended with end-of-turn
        for turn in range(config.max_turns):
            live = [i for i, ep in enumerate(episodes) if not ep.end]
            if not live:
                break
            _agent_turn(model, episodes, owners, live, config, seed=seed, turn=turn, closed=closed)
            for i, result, failure in executor.map(run, live):  # parallel environment steps (replayed)
                _env_turn(episodes[i], result, failure, model, config, last_turn=turn + 1 >= config.max_turns,
                          closed=closed.get(i, False))
        for ep in episodes:
            if not ep.end:
                ep.end = "max_turns"
    return episodes


def _new_episodes(envs: Sequence[PoolEnvironment], indices: Sequence[int] | None, seed: int,
                  G: int, conditions: Sequence[bool] = (False, True),
                  ) -> tuple[list[Episode], list[PoolEnvironment]]:
    """The step's episodes (env order, unhinted first) and the environment of each."""
    episodes: list[Episode] = []
    owners: list[PoolEnvironment] = []
    for index, env in zip(indices if indices is not None else range(len(envs)), envs, strict=True):
        seeds = episode_seeds(seed, index, G)
        for hinted in conditions:
            for s in seeds:
                episodes.append(Episode(env_id=env.hash, hinted=hinted, seed=s))
                owners.append(env)
    return episodes, owners


def _start(ep: Episode, env: PoolEnvironment, result: Any, failure: str | None, model: TurnModel,
           config: PlayConfig) -> None:
    """Record an episode's reset: its first observation and its prompt (or the sandbox failure)."""
    if failure is not None:
        ep.end = f"env_failure:{failure}"
        return
    first, _ = result
    ep.observations.append(first.obs)
    ep.prompt_ids = model.prompt_ids(first_messages(env, first.obs, first.info, ep.hinted, config))


def _agent_turn(model: TurnModel, episodes: list[Episode], owners: list[PoolEnvironment], live: list[int],
                config: PlayConfig, *, seed: int, turn: int, closed: dict[int, bool]) -> None:
    """One batched generation for the live episodes: their completions and next actions."""
    budget = [config.max_episode_tokens - len(episodes[i].completion_ids) for i in live]
    outs = model.generate([episodes[i].prompt_ids + episodes[i].completion_ids for i in live],
                          max_new_tokens=max(1, min(config.max_new_tokens_per_turn, max(budget))),
                          temperature=config.temperature, seed=seed * 1000 + turn)
    for i, out, left in zip(live, outs, budget, strict=True):
        ep = episodes[i]
        ids, lps = out.ids[:max(left, 0)], out.logprobs[:max(left, 0)]
        ep.completion_ids += ids
        ep.env_mask += [1] * len(ids)
        ep.logprobs += lps
        ep.texts.append(out.text)
        ep.actions.append(action_from_text(out.text, owners[i].setting, config))
        closed[i] = out.finished and len(ids) == len(out.ids)


def _env_turn(ep: Episode, result: Any, failure: str | None, model: TurnModel, config: PlayConfig, *,
              last_turn: bool, closed: bool) -> None:
    """Record the environment's answer to the episode's last action (replayed from a fresh
    instance): reward and observation, the episode's end, or the observation's tokens appended."""
    if failure is not None:
        ep.end = f"env_failure:{failure}"
        return
    first, steps = result
    replayed = [first.obs] + [s.obs for s in steps[:-1]]
    if replayed != ep.observations:
        ep.end = "nondeterministic"
        return
    last = steps[-1]
    ep.rewards.append(last.reward)
    ep.observations.append(last.obs)
    if last.terminated or last.truncated:
        ep.won = _won(last)
        ep.end = "terminated" if last.terminated else "truncated"
        return
    if last_turn:
        ep.end = "max_turns"
        return
    env_ids = model.env_turn_ids(last.obs, closed=closed)
    if len(ep.completion_ids) + len(env_ids) >= config.max_episode_tokens:
        ep.end = "token_budget"
        return
    ep.completion_ids += env_ids
    ep.env_mask += [0] * len(env_ids)
    ep.logprobs += [0.0] * len(env_ids)


def summarise(envs: Sequence[PoolEnvironment], episodes: Sequence[Episode]) -> dict[str, dict[str, Any]]:
    """Per environment: returns and win rates with and without the hint."""
    out: dict[str, dict[str, Any]] = {}
    for env in envs:
        mine = [e for e in episodes if e.env_id == env.hash]
        plain = [e for e in mine if not e.hinted]
        hinted = [e for e in mine if e.hinted]
        out[env.hash] = {
            "returns": [e.ret for e in plain], "returns_hint": [e.ret for e in hinted],
            "win_rate": float(np.mean([e.won for e in plain])) if plain else 0.0,
            "win_rate_hint": float(np.mean([e.won for e in hinted])) if hinted else 0.0,
            "env_failures": sum(1 for e in mine if e.end.startswith("env_failure") or e.end == "nondeterministic"),
            "skill": env.skill,
        }
    return out


class TransformersTurnModel:
    """``TurnModel`` over a transformers causal LM (CPU, or GPU without vLLM).

    Log-probs are log_softmax(logits / T) of the sampled tokens (T = 1 for greedy), the same
    quantity TRL's GRPO computes for the training policy, so ratios between them are exact.
    """

    def __init__(self, model: Any, tokenizer: Any, batch_size: int = 16) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.batch_size = batch_size
        self._close, self._open = self._template_parts()

    def _render(self, messages: list[dict[str, str]]) -> str:
        from trainers.lm.generation import render_chat

        return render_chat(self.tokenizer, messages)

    def _template_parts(self) -> tuple[str, str]:
        """(text between an agent turn's content and the env message, text after the env message)."""
        if not getattr(self.tokenizer, "chat_template", None):
            return "\n", "\n"
        text = self._render([{"role": "user", "content": "u"}, {"role": "assistant", "content": "@@A@@"},
                             {"role": "user", "content": "@@B@@"}])
        after = text[text.index("@@A@@") + len("@@A@@"):]
        close, _, rest = after.partition("@@B@@")
        return close, rest

    def _encode(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def prompt_ids(self, messages: list[dict[str, str]]) -> list[int]:
        return self._encode(self._render(messages))

    def env_turn_ids(self, text: str, closed: bool) -> list[int]:
        close = self._close
        eos = self.tokenizer.eos_token or ""
        if closed and eos and close.startswith(eos):
            close = close[len(eos):]
        return self._encode(close + text + self._open)

    def generate(self, prefixes: list[list[int]], *, max_new_tokens: int, temperature: float,
                 seed: int) -> list[Generated]:
        import torch

        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else self.tokenizer.eos_token_id
        eos = self.tokenizer.eos_token_id
        out: list[Generated] = []
        was_training = self.model.training
        self.model.eval()
        try:
            for start in range(0, len(prefixes), self.batch_size):
                chunk = prefixes[start:start + self.batch_size]
                width = max(len(p) for p in chunk)
                ids = torch.tensor([[pad] * (width - len(p)) + p for p in chunk], device=self.model.device)
                mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in chunk], device=self.model.device)
                torch.manual_seed(seed + start)
                sample = temperature > 0
                with torch.no_grad():
                    res = self.model.generate(
                        input_ids=ids, attention_mask=mask, max_new_tokens=max_new_tokens, do_sample=sample,
                        temperature=temperature if sample else None, top_k=0 if sample else None,
                        top_p=1.0 if sample else None, pad_token_id=pad, output_logits=True,
                        return_dict_in_generate=True,
                    )
                new = res.sequences[:, width:]
                logits = torch.stack(res.logits, dim=1).float()  # (B, T_new, V)
                logp = torch.log_softmax(logits / (temperature if sample else 1.0), dim=-1)
                for row in range(len(chunk)):
                    toks = new[row].tolist()
                    finished = False
                    if eos in toks:
                        toks = toks[:toks.index(eos) + 1]
                        finished = True
                    lps = [float(logp[row, t, tok]) for t, tok in enumerate(toks)]
                    out.append(Generated(ids=toks, logprobs=lps, finished=finished,
                                         text=self.tokenizer.decode(toks, skip_special_tokens=True)))
        finally:
            self.model.train(was_training)
        return out


class VLLMTurnModel(TransformersTurnModel):
    """``TurnModel`` over a vLLM engine (``vllm.LLM``, e.g. TRL's colocated one after ``sync_weights``).

    Rendering is the tokenizer's (inherited); generation continues the exact token prefixes
    (``TokensPrompt``), and the log-probs are vLLM's sampled-token log-probs (``logprobs=0``), which
    TRL's importance-sampling correction compares with the trainer's.
    """

    def __init__(self, llm: Any, tokenizer: Any) -> None:
        self.llm = llm
        self.tokenizer = tokenizer
        self._close, self._open = self._template_parts()

    def generate(self, prefixes: list[list[int]], *, max_new_tokens: int, temperature: float,
                 seed: int) -> list[Generated]:
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        params = SamplingParams(max_tokens=max_new_tokens, temperature=temperature, top_p=1.0, top_k=-1,
                                logprobs=0, seed=seed)
        outputs = self.llm.generate([TokensPrompt(prompt_token_ids=p) for p in prefixes], params, use_tqdm=False)
        eos = self.tokenizer.eos_token_id
        result = []
        for out in outputs:
            choice = out.outputs[0]
            ids = list(choice.token_ids)
            lps = [float(step[tok].logprob) if step and tok in step else 0.0
                   for tok, step in zip(ids, choice.logprobs or [None] * len(ids))]
            result.append(Generated(ids=ids, logprobs=lps, finished=bool(ids) and ids[-1] == eos,
                                    text=self.tokenizer.decode(ids, skip_special_tokens=True)))
        return result
