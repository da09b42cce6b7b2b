"""A small causal transformer over ``codec`` sequences, its batched decoder and its log-probs.

Architecture (pre-LayerNorm GPT): x_0 = E_tok[tok] + E_row[r] + E_col[c] + E_time[time]
+ E_goal_row[r_g] + E_goal_col[c_g] + E_pos[pos]
(cell (r, c) of the token; row and column embeddings are factorised so that neighbouring cells
share a row or a column vector, which makes adjacency easy to represent); with
``local_features`` also + E_dr[r_g - r] + E_dc[c_g - c] (the goal relative to the token's cell,
the same vector on every map size and position) + W_feat·bits(feat) (the ``codec.move_features``
of the token: what each next move would run into);
L blocks of x += Attn(LN(x)), x += MLP(LN(x)) (GELU, width ``ff_mult``·d); logits = W·LN(x).
Rows are left-padded: a row's real tokens sit at the end, its positions count from its first
real token, and a key-padding mask hides the pads (each pad attends to itself only, so no row of
the attention is empty). The decoder appends one token per row per step through a key/value
cache, which gives the same logits as a full forward over the finished sequence
(``sequence_logprobs``), so sampled and trained log-probabilities agree.

Plan positions sample from the five moves and ``SEP`` only (``allowed_mask``); both decoding and the
losses renormalise over that set.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from trainers.small import codec

TIME_IDS = 130
"""Time-embedding rows (0: none; 1 + t for t < 129)."""


class Block(nn.Module):
    """One pre-LN transformer block with an optional key/value cache."""

    def __init__(self, d: int, heads: int, ff_mult: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, ff_mult * d), nn.GELU(), nn.Linear(ff_mult * d, d))

    def forward(self, x: torch.Tensor, mask: torch.Tensor,
                cache: tuple[torch.Tensor, torch.Tensor] | None = None
                ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        B, T, d = x.shape                                                    # (B, T, d)
        q, k, v = self.qkv(self.ln1(x)).view(B, T, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        if cache is not None:                                                # (B, H, T_past + T, d/H)
            k, v = torch.cat([cache[0], k], dim=2), torch.cat([cache[1], v], dim=2)
        a = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)         # mask (B, 1, T, T_all)
        x = x + self.proj(a.transpose(1, 2).reshape(B, T, d))
        x = x + self.mlp(self.ln2(x))
        return x, (k, v)


class SmallTransformer(nn.Module):
    """The policy network (module docstring)."""

    def __init__(self, d_model: int, layers: int, heads: int, ff_mult: int, max_len: int,
                 local_features: bool = False) -> None:
        super().__init__()
        self.max_len = max_len
        self.local_features = local_features
        if local_features:
            self.goal_dr = nn.Embedding(2 * codec.GRID + 1, d_model)   # offset + GRID; 0: no offset
            self.goal_dc = nn.Embedding(2 * codec.GRID + 1, d_model)
            self.feat = nn.Linear(codec.FEATURE_BITS, d_model, bias=False)
        self.tok = nn.Embedding(codec.VOCAB, d_model)
        self.row = nn.Embedding(codec.GRID + 1, d_model)    # 0: no cell
        self.col = nn.Embedding(codec.GRID + 1, d_model)
        self.goal_row = nn.Embedding(codec.GRID + 1, d_model)
        self.goal_col = nn.Embedding(codec.GRID + 1, d_model)
        self.time = nn.Embedding(TIME_IDS, d_model)
        self.pos = nn.Embedding(max_len, d_model)
        self.blocks = nn.ModuleList(Block(d_model, heads, ff_mult) for _ in range(layers))
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, codec.VOCAB, bias=False)
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.normal_(p, std=0.02)

    def forward(self, tok: torch.Tensor, cell: torch.Tensor, time: torch.Tensor, goal: torch.Tensor,
                feat: torch.Tensor, pos: torch.Tensor, mask: torch.Tensor,
                caches: list | None = None) -> tuple[torch.Tensor, list]:
        """Logits (B, T, V) of tokens (B, T) under ``mask`` (B, 1, T, T_all); new caches."""
        r, c = codec.row_col(cell)
        gr, gc = codec.row_col(goal)
        x = (self.tok(tok) + self.row(r) + self.col(c) + self.time(time.clamp(max=TIME_IDS - 1))
             + self.goal_row(gr) + self.goal_col(gc) + self.pos(pos))
        if self.local_features:
            both = (cell > 0) & (goal > 0)
            x = (x + self.goal_dr(torch.where(both, gr - r + codec.GRID, 0))
                 + self.goal_dc(torch.where(both, gc - c + codec.GRID, 0))
                 + self.feat(feature_bits(feat)))
        new = []
        for i, block in enumerate(self.blocks):
            x, kv = block(x, mask, None if caches is None else caches[i])
            new.append(kv)
        return self.head(self.norm(x)), new


def feature_bits(feat: torch.Tensor) -> torch.Tensor:
    """(..., FEATURE_BITS) float 0/1 of ``codec.move_features`` bitmasks (...)."""
    shifts = torch.arange(codec.FEATURE_BITS, device=feat.device)
    return ((feat.unsqueeze(-1) >> shifts) & 1).float()


def allowed_mask(device: Any = None) -> torch.Tensor:
    """(V,) bool: the tokens a plan position may take (the five moves and SEP)."""
    m = torch.zeros(codec.VOCAB, dtype=torch.bool, device=device)
    m[list(codec.PLAN_TOKENS)] = True
    return m


def full_mask(real: torch.Tensor) -> torch.Tensor:
    """(B, 1, T, T) causal attention over real tokens (B, T bool); every token sees itself."""
    T = real.shape[1]
    causal = torch.tril(torch.ones(T, T, dtype=torch.bool, device=real.device))
    eye = torch.eye(T, dtype=torch.bool, device=real.device)
    return ((causal & real[:, None, :]) | eye)[:, None]


def positions(real: torch.Tensor) -> torch.Tensor:
    """(B, T) position of each token counted from its row's first real token (pads: 0)."""
    return (real.long().cumsum(dim=1) - 1).clamp(min=0)


@dataclass
class Batch:
    """Left-padded rows of ``codec.Sequence``s (B, T) and the positions the model writes."""

    tok: torch.Tensor
    cell: torch.Tensor
    time: torch.Tensor
    goal: torch.Tensor
    feat: torch.Tensor
    real: torch.Tensor
    written: torch.Tensor
    """(B, T) bool: the token at t was written by the model (predicted from position t - 1)."""


FIELDS = ("tok", "cell", "time", "goal", "feat")
"""The per-token ids of a ``codec.Sequence``, in the model's argument order."""


def pad_left(seqs: list[codec.Sequence], written: list[list[bool]] | None = None) -> Batch:
    """Stack sequences into a left-padded ``Batch``."""
    T = max(len(s) for s in seqs)
    B = len(seqs)
    out = {k: torch.zeros(B, T, dtype=torch.long) for k in FIELDS}
    real = torch.zeros(B, T, dtype=torch.bool)
    wr = torch.zeros(B, T, dtype=torch.bool)
    for i, s in enumerate(seqs):
        n = len(s)
        for k in FIELDS:
            out[k][i, T - n:] = torch.tensor(getattr(s, k))
        real[i, T - n:] = True
        if written is not None:
            wr[i, T - len(written[i]):] = torch.tensor(written[i], dtype=torch.bool)
    return Batch(*(out[k] for k in FIELDS), real, wr)


def next_token_logprobs(model: SmallTransformer, batch: Batch, temperature: float = 1.0) -> torch.Tensor:
    """(B, T - 1, V) log pi(v | tokens ≤ t) over the allowed set at ``temperature`` (-inf elsewhere)."""
    pos = positions(batch.real)
    if int(pos.max()) >= model.max_len:
        raise ValueError(f"a sequence of {int(pos.max()) + 1} tokens exceeds the model's max_len {model.max_len}")
    logits, _ = model(batch.tok, batch.cell, batch.time, batch.goal, batch.feat, pos, full_mask(batch.real))
    logits = logits[:, :-1].masked_fill(~allowed_mask(logits.device), float("-inf")) / temperature
    return torch.log_softmax(logits.float(), dim=-1)


def sequence_logprobs(model: SmallTransformer, batch: Batch, temperature: float = 1.0) -> torch.Tensor:
    """(B, T - 1) log pi(token t+1 | tokens ≤ t) over the allowed set, at temperature ``temperature``
    (0 where t + 1 is not written; TRL also divides the logits by the sampling temperature)."""
    logp = next_token_logprobs(model, batch, temperature)                          # (B, T-1, V)
    target = batch.tok[:, 1:]
    picked = logp.gather(-1, target.unsqueeze(-1)).squeeze(-1)                        # (B, T-1)
    return torch.where(batch.written[:, 1:], picked, torch.zeros_like(picked))


@dataclass
class Decoded:
    """One decoded plan: the paths and the plan tokens (with which the model wrote)."""

    paths: list[list[tuple[int, int]]]
    plan: codec.Sequence
    written: list[bool]

    @property
    def num_written(self) -> int:
        return sum(self.written)


class _Row:
    """Decoding state of one row: which agent, its path so far, the tokens to force next."""

    def __init__(self, inst: Any, max_path: int) -> None:
        self.inst = inst
        self.max_path = max_path
        self.agent = 0
        self.paths: list[list[tuple[int, int]]] = [[tuple(inst.starts[0])]]
        self.queue = codec.forced_prefix(inst, 0, [])
        self.plan = codec.Sequence()
        self.written: list[bool] = []
        self.done = False

    def next(self, sampled: int) -> tuple[int, int, int, int, int]:
        """The (tok, cell, time, goal, feat) this row appends, given the token sampled for it."""
        if self.queue:
            item = self.queue.pop(0)
            self._append(item, False)
            return item
        path = self.paths[self.agent]
        if len(path) - 1 >= self.max_path:  # the cap: the decoder ends the path
            sampled, written = codec.SEP, False
        else:
            written = True
        goal = codec.cell_index(*self.inst.goals[self.agent])
        if sampled == codec.SEP:
            item = (codec.SEP, 0, 0, goal, 0)
            self._append(item, written)
            self.agent += 1
            if self.agent == self.inst.num_agents:
                self.done = True
            else:
                self.paths.append([tuple(self.inst.starts[self.agent])])
                self.queue = codec.forced_prefix(self.inst, self.agent, self.paths[:self.agent])
            return item
        dr, dc = codec.MOVES[sampled - codec.MOVE0]
        r, c = path[-1][0] + dr, path[-1][1] + dc
        path.append((r, c))
        feat = codec.move_features(self.inst, self.paths[:self.agent], (r, c), len(path) - 1)
        item = (sampled, codec.cell_index(r, c), len(path), goal, feat)
        self._append(item, written)
        return item

    def _append(self, item: tuple[int, int, int, int, int], written: bool) -> None:
        self.plan.add(*item)
        self.written.append(written)


@torch.no_grad()
def decode(model: SmallTransformer, instances: list[Any], max_paths: list[int], *, temperature: float,
           generator: torch.Generator) -> list[Decoded]:
    """Sample (temperature > 0) or greedily decode (0) one plan per instance, in one batch."""
    prompts = [codec.encode_prompt(inst) for inst in instances]
    batch = pad_left(prompts)
    real = batch.real
    pos = positions(real)
    logits, caches = model(batch.tok, batch.cell, batch.time, batch.goal, batch.feat, pos, full_mask(real))
    last = logits[:, -1]                                                              # (B, V)
    rows = [_Row(inst, m) for inst, m in zip(instances, max_paths)]
    lengths = real.sum(dim=1)                                                         # (B,)
    allowed = allowed_mask()
    while not all(r.done for r in rows):
        scores = last.masked_fill(~allowed, float("-inf"))
        if temperature > 0:
            sampled = torch.multinomial(torch.softmax(scores.float() / temperature, dim=-1), 1,
                                        generator=generator).squeeze(1)
        else:
            sampled = scores.argmax(dim=-1)
        step = torch.zeros(len(rows), len(FIELDS), dtype=torch.long)
        alive = torch.zeros(len(rows), dtype=torch.bool)
        for i, row in enumerate(rows):
            if not row.done:
                step[i] = torch.tensor(row.next(int(sampled[i])))
                alive[i] = True
        if int(lengths.max()) >= model.max_len:
            raise ValueError(f"decoding exceeds the model's max_len {model.max_len}; raise small.max_len")
        real = torch.cat([real, alive[:, None]], dim=1)                               # (B, T + 1)
        keys = real.clone()
        keys[:, -1] = True                      # a finished row's pad sees itself: no empty row
        mask = keys[:, None, None, :]                                                 # (B, 1, 1, T + 1)
        logits, caches = model(*step[:, :, None].unbind(1), lengths[:, None].clamp(max=model.max_len - 1),
                               mask, caches)
        lengths = lengths + alive.long()
        last = logits[:, -1]
    return [Decoded(r.paths, r.plan, r.written) for r in rows]
