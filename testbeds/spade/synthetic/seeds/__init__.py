"""The seed library: environment programs with privileged hints that the project ships, one or
more per skill of each SPADE setting, every one passing the sandbox admission
(``tests/spade/test_seed_library.py``).

Layout: ``games/<name>.py`` holds the three parts of a structured game (``make_task``, ``check``,
``solve``; ``testbeds.spade.synthetic.skeleton``), rendered into the ``GameEnv`` skeleton;
``tools/<name>.py`` holds a complete ``ToolEnv`` subclass. Each file starts with a
``# skill: <skill>`` line; ``<name>.hint`` beside it is the privileged hint.

Parametrised games: a top-level constant of a game file may end with a ``# param: KIND``
comment, and the hint may name it as ``{NAME}``. ``KIND`` is ``words`` (a list of distinct
lower-case words; a variant takes the first ones of a document, ``document_words``, topped up
from the file's list) or ``choice A | B | ...`` (Python literals; a variant draws one).
``variant(seed, rng, document)`` returns the game with drawn values (program, parts and hint);
the library entry itself uses the file's values. The designer warm start answers each design
prompt with a variant drawn from its own document, so the answer depends on the prompt (the
model has to read the document), and the agent warm start plays variants, so the agent cannot
learn one fixed answer. Every variant must pass admission like the file's own game
(``tests/spade/test_seed_library.py`` admits variants of every parametrised game).

Used as: the designer's warm start (design prompt → a library design, in the engineer's design
mode), the agent's warm start (first observation → the boxed solution), a starting pool
(``testbed.initial_pool: seed_library``) and held-out games, played every round and never
trained on (``trainer.heldout_games``, ``testbeds/spade/heldout/games.py``).
Written for this project; the public SPADE code ships no such library.
"""

from __future__ import annotations

import ast
import random
import re
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import Any

from testbeds.spade.synthetic.skeleton import GameParts, render_game, split_parts

HERE = Path(__file__).resolve().parent
SETTINGS = ("games", "tools")
_SKILL = re.compile(r"^#\s*skill:\s*(.+?)\s*$", re.M)
_PARAM = re.compile(r"^(?P<name>[A-Z][A-Z0-9_]*) = (?P<value>.+?)\s*# param:\s*(?P<kind>.+?)\s*$", re.M)
_WORD = re.compile(r"[A-Za-z]+")


@dataclass(frozen=True)
class Param:
    """One parameter of a parametrised game (module docstring)."""

    name: str
    """The constant's name (``WORDS``)."""
    kind: str
    """``words`` or ``choice``."""
    default: Any
    """The file's value."""
    options: tuple[Any, ...] = ()
    """``choice``: the values a variant draws from."""


@dataclass(frozen=True)
class SeedEnvironment:
    """One library environment."""

    name: str
    """File stem."""
    setting: str
    """``games`` or ``tools``."""
    skill: str
    """Skill tag (the file's ``# skill:`` line)."""
    hint: str
    """Privileged hint."""
    program: str
    """The full program (games: the parts rendered into the skeleton)."""
    parts: GameParts | None = None
    """The structured parts (games only)."""
    params: tuple[Param, ...] = ()
    """Parameters a variant redraws (module docstring); empty for a fixed game."""
    template: str = ""
    """Parametrised games: the source with ``@@NAME@@`` in place of each parameter's value."""
    hint_template: str = ""
    """The hint with ``{NAME}`` placeholders (parametrised games)."""

    def with_values(self, values: dict[str, Any]) -> SeedEnvironment:
        """This game with its parameters set to ``values`` (a name missing keeps the default)."""
        if not self.params:
            return self
        values = {p.name: values.get(p.name, p.default) for p in self.params}
        body = self.template
        for name, value in values.items():
            body = body.replace(f"@@{name}@@", repr(value))
        hint = self.hint_template.format(**{k: v if isinstance(v, str) else repr(v) for k, v in values.items()})
        parts = split_parts(body, hint)
        return replace(self, hint=hint, program=render_game(parts), parts=parts)


def document_words(document: str | None, count: int, exclude: set[str] = frozenset(),
                   fallback: list[str] | tuple[str, ...] = ()) -> list[str]:
    """The first ``count`` distinct lower-case words of 4-8 letters of ``document`` that are not
    in ``exclude``, in order of appearance, topped up from ``fallback``."""
    out: list[str] = []
    for word in _WORD.findall(document or ""):
        word = word.lower()
        if 4 <= len(word) <= 8 and word not in exclude and word not in out:
            out.append(word)
            if len(out) == count:
                return out
    for word in fallback:
        if len(out) == count:
            break
        if word not in out and word not in exclude:
            out.append(word)
    return out


VOCABULARY = tuple("""
apple river stone cloud tiger lemon planet garden silver bridge candle forest marble pencil rocket
window jungle orange castle dragon harbor meadow matrix vector series symbol number factor circle
square triangle integer fraction limit domain range field group order basis power sum product root
angle point line plane sphere cube prime digit table chart graph node edge path tree leaf branch
ocean island valley desert winter summer spring autumn copper iron gold carbon oxygen atom energy
force motion wave light sound music paper letter chain lamp robot piano violin coffee bread honey
""".split())
"""Words a variant without a document draws its word lists from (the agent's warm start)."""


def variant(seed: SeedEnvironment, rng: random.Random, document: str | None = None) -> SeedEnvironment:
    """``seed`` with its parameters redrawn: words from ``document`` (without one: drawn from
    ``VOCABULARY``), choices from ``rng`` (module docstring); ``seed`` itself when it has no
    parameters."""
    values: dict[str, Any] = {}
    hint_words = {w.lower() for w in _WORD.findall(seed.hint_template)}
    for param in seed.params:
        if param.kind == "words" and document is None:
            pool = [w for w in VOCABULARY if w not in hint_words]
            values[param.name] = rng.sample(pool, len(param.default))
        elif param.kind == "words":
            values[param.name] = document_words(document, len(param.default), hint_words, param.default)
        else:
            values[param.name] = rng.choice(param.options)
    return seed.with_values(values)


def _params(body: str) -> tuple[str, tuple[Param, ...]]:
    """The source with ``# param:`` constants replaced by placeholders, and the parameters."""
    params = []
    for match in _PARAM.finditer(body):
        name, kind = match["name"], match["kind"]
        default = ast.literal_eval(match["value"])
        if kind == "words":
            if not (isinstance(default, list) and default and all(isinstance(w, str) for w in default)):
                raise ValueError(f"param {name}: words needs a list of strings")
            params.append(Param(name, "words", default))
        elif kind.startswith("choice "):
            options = tuple(ast.literal_eval(o.strip()) for o in kind[len("choice "):].split("|"))
            if default not in options:
                raise ValueError(f"param {name}: the default {default!r} is not one of {options}")
            params.append(Param(name, "choice", default, options))
        else:
            raise ValueError(f"param {name}: unknown kind {kind!r} (words, choice A | B | ...)")
    template = _PARAM.sub(lambda m: f"{m['name']} = @@{m['name']}@@", body)
    return template, tuple(params)


def _load(path: Path, setting: str) -> SeedEnvironment:
    source = path.read_text()
    skill = _SKILL.search(source)
    hint_path = path.with_suffix(".hint")
    if skill is None or not hint_path.is_file():
        raise ValueError(f"seed {path} needs a '# skill: ...' line and a {hint_path.name} file")
    hint = " ".join(hint_path.read_text().split())
    body = _SKILL.sub("", source, count=1).strip("\n") + "\n"
    if setting == "games":
        template, params = _params(body)
        if params:
            base = SeedEnvironment(path.stem, setting, skill.group(1), hint, "", None, params, template, hint)
            return base.with_values({})
        parts = split_parts(body, hint)
        return SeedEnvironment(path.stem, setting, skill.group(1), hint, render_game(parts), parts)
    return SeedEnvironment(path.stem, setting, skill.group(1), hint, body)


@cache
def seed_library(setting: str) -> tuple[SeedEnvironment, ...]:
    """Every library environment of ``setting``, sorted by file name."""
    if setting not in SETTINGS:
        raise ValueError(f"unknown SPADE setting {setting!r} (games or tools)")
    return tuple(_load(p, setting) for p in sorted((HERE / setting).glob("*.py")))


def library_for(setting: str, skills: list[str] | None = None,
                names: list[str] | None = None) -> list[SeedEnvironment]:
    """The library environments of ``setting`` whose skill is in ``skills`` (all when ``None``)
    and, when ``names`` is given, whose name is in it (an unknown name is a ValueError)."""
    library = seed_library(setting)
    if names is not None:
        unknown = sorted(set(names) - {s.name for s in library})
        if unknown:
            raise ValueError(f"no {setting} seed-library environment named {', '.join(unknown)} "
                             f"(there are: {', '.join(s.name for s in library)})")
    return [s for s in library if (skills is None or s.skill in skills) and (names is None or s.name in names)]
