"""``optuna``: black-box search over the testbed's generator config, one trial per round.

Search space (the testbed's declared ``BucketSpace``, ``curriculum.core.spaces``; MAPF: buckets =
map sizes, knobs ``hole_ratio`` and ``wait_ratio``): for every bucket b and every knob with bounds
[lo, hi], a float ``<knob>/<b>`` uniform on [lo, hi]. The shares must lie on the simplex; two
parametrisations always yield a valid one:

* ``weights`` (default): w_b ~ U(0, 1) per bucket, share_b = w_b / Σ_c w_c (all zero → uniform);
* ``stick_breaking``: u_i ~ U(0, 1) for the first K − 1 buckets,
  v_i = 1 − (1 − u_i)^{1/(K−1−i)} (the Beta(1, K−1−i) quantile, so uniform u give a flat
  Dirichlet), share_i = v_i · Π_{j<i} (1 − v_j), and the last bucket takes the remainder.

Trials and rounds: trial T_r (user attribute ``round = r``) is the config that round r trains on.
The loop calls ``design`` after round r's eval, so ``design`` first **tells** T_r its value and
then **asks** T_{r+1}. T_0, the round-0 config the engineer did not choose, is enqueued from the
starting proposal. The objective (maximised) is, with s_r the eval score after round r:

* ``improvement`` (default): y_r = s_r − s_{r−1}, with s_{−1} the baseline eval of the untrained
  policy (``eval_before_training: true``); without a baseline T_0 is marked FAIL (no value);
* ``score``: y_r = s_r.

The last round's trial is told in ``on_round_end``.

Start-up trials: a run of R rounds gives the engineer R − 1 designs (T_1 … T_{R−1}). The sampler
draws at random until ``startup_trials`` trials exist (T_0 included), by default 1 + ⌊(R − 1)/2⌋,
so at least the last half of the designs are model-based whenever R ≥ 3 (a T_0 marked FAIL does
not count as complete, which makes one more design random). Storage: SQLite ``optuna.db`` in the run dir
(``optuna-dashboard sqlite:///RUN/optuna.db`` opens it); without a run dir, in memory.
Resume is idempotent: trials are keyed by round, so a re-run round whose trial is already
complete is not told twice, and a T_{r+1} asked by an earlier attempt (the run died after
``design`` but before round r was committed) is reused rather than asked again. The sampler is rebuilt at every call with a seed drawn from the controller's per-round
RNG, so a resumed run asks exactly what an uninterrupted one would.

``optuna.db`` sits beside the rounds, outside their checksums, so the study is tied to them
instead: it carries a random study token and the fingerprint of this engineer config (study user
attributes), and every round's engineer state (checksummed in the round's manifest) records the
token. A resume and ``curriculum doctor`` ask ``resume_problem`` before anything is moved or
saved: a study file that is a link, damaged (SQLite's ``quick_check``), locked by another process
(after ``LOCK_PROBE_S``), another run's, or made for another config is one line naming the file.
"""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from curriculum.core.config import PluginConfig
from curriculum.core.safefs import is_plain_file, read_inside
from curriculum.core.records import Design, RoundReport
from curriculum.core.spaces import Bucket, BucketSpace
from engineers.base import DesignContext, Engineer
from testbeds.base import Testbed

DB_FILE = "optuna.db"
"""The study's SQLite file inside the run dir."""
ROUND_ATTR = "round"
"""User attribute that keys a trial to the round that trains on its config."""


class OptunaEngineerConfig(PluginConfig):
    """Sampler, objective and parametrisation of the Optuna engineer."""

    name: Literal["optuna"]
    """Selects this engineer."""
    sampler: Literal["tpe", "random", "cmaes", "gp", "qmc"] = "tpe"
    """Optuna sampler (``cmaes`` needs the ``cmaes`` package; ``gp`` and ``qmc`` need scipy)."""
    n_startup_trials: Annotated[int, Field(ge=0)] | Literal["auto"] = "auto"
    """Trials sampled at random before the model-based sampler takes over (TPE, CMA-ES, GP),
    counting trial 0 (the starting config). ``auto``: sized to the run, ``startup_trials(R)`` =
    1 + ⌊(R − 1) / 2⌋ for R rounds (R − 1 asked designs: the first half random, the rest
    model-based; R = 3: 2, R = 6: 3, R = 12: 6). A number ≥ 0 fixes it (a fixed 3 left a 3-round
    run with no model-based design at all)."""
    objective: Literal["improvement", "score"] = "improvement"
    """Value told for each trial: the eval score's gain over the previous round, or the score."""
    simplex: Literal["weights", "stick_breaking"] = "weights"
    """How the data ratios are parametrised (both always give a valid simplex)."""
    multivariate: bool = True
    """TPE: model the parameters jointly rather than one by one."""
    study_name: str = "curriculum"
    """Name of the study inside the SQLite storage."""


# --------------------------------------------------------------------------------------------
# search space
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class SearchSpace:
    """The trial parameters of a testbed's ``BucketSpace`` (see the module docstring)."""

    space: BucketSpace
    simplex: str = "weights"

    @classmethod
    def of(cls, space: Any, simplex: str = "weights") -> SearchSpace:
        if not isinstance(space, BucketSpace):
            raise ValueError(f"the optuna engineer searches a bucket space; the testbed offers {space!r}")
        return cls(space, simplex)

    @property
    def buckets(self) -> tuple[str, ...]:
        return self.space.buckets

    def distributions(self) -> dict[str, Any]:
        from optuna.distributions import FloatDistribution

        out: dict[str, Any] = {}
        names = self.buckets if self.simplex == "weights" else self.buckets[:-1]
        prefix = "data_weight" if self.simplex == "weights" else "data_stick"
        for b in names:
            out[f"{prefix}/{b}"] = FloatDistribution(0.0, 1.0)
        for knob in self.space.knobs:
            for b in self.buckets:
                out[f"{knob.name}/{b}"] = FloatDistribution(knob.low, knob.high)
        return out

    def to_proposal(self, params: dict[str, float], base: dict[str, Any] | None = None) -> dict[str, Any]:
        """Trial params → raw proposal (the space's layout) whose shares sum to 1."""
        shares = (weights_to_simplex([params[f"data_weight/{b}"] for b in self.buckets])
                  if self.simplex == "weights"
                  else sticks_to_simplex([params[f"data_stick/{b}"] for b in self.buckets[:-1]]))
        return self.space.write({b: Bucket(share=shares[i], knobs={k.name: float(params[f"{k.name}/{b}"])
                                                                   for k in self.space.knobs})
                                 for i, b in enumerate(self.buckets)}, base)

    def to_params(self, proposal: dict[str, Any]) -> dict[str, float]:
        """Inverse of ``to_proposal`` (for enqueueing a given config, e.g. round 0's)."""
        buckets = self.space.read(proposal)
        shares = [buckets[b].share for b in self.buckets]
        params: dict[str, float] = {}
        if self.simplex == "weights":
            for b, w in zip(self.buckets, simplex_to_weights(shares)):
                params[f"data_weight/{b}"] = w
        else:
            for b, u in zip(self.buckets[:-1], simplex_to_sticks(shares)):
                params[f"data_stick/{b}"] = u
        for knob in self.space.knobs:
            for b in self.buckets:
                params[f"{knob.name}/{b}"] = knob.clip(buckets[b].knobs[knob.name])
        return params


def weights_to_simplex(weights: list[float]) -> list[float]:
    """w / Σw (uniform when every weight is 0)."""
    total = sum(weights)
    if total <= 0:
        return [1.0 / len(weights)] * len(weights)
    return [w / total for w in weights]


def simplex_to_weights(ratios: list[float]) -> list[float]:
    """A weight vector in [0, 1] that ``weights_to_simplex`` maps back to ``ratios``."""
    top = max(ratios)
    return [r / top for r in ratios] if top > 0 else [1.0] * len(ratios)


def sticks_to_simplex(u: list[float]) -> list[float]:
    """Stick-breaking with Beta(1, K−1−i) quantiles: K−1 uniforms → a point of the K-simplex."""
    K = len(u) + 1
    out, rest = [], 1.0
    for i, ui in enumerate(u):
        v = 1.0 - (1.0 - min(1.0, max(0.0, ui))) ** (1.0 / (K - 1 - i))
        out.append(rest * v)
        rest *= 1.0 - v
    out.append(rest)
    return out


def simplex_to_sticks(ratios: list[float]) -> list[float]:
    """Inverse of ``sticks_to_simplex`` (u_i = 1 − (1 − v_i)^{K−1−i}, v_i = r_i / remaining)."""
    K = len(ratios)
    out, rest = [], 1.0
    for i, r in enumerate(ratios[:-1]):
        v = min(1.0, max(0.0, r / rest)) if rest > 1e-12 else 0.0
        out.append(1.0 - (1.0 - v) ** (K - 1 - i))
        rest -= r
    return out


def objective_value(scores: dict[int, float], round_index: int, objective: str,
                    baseline: float | None) -> float | None:
    """y_r of the module docstring from round → eval score; ``None`` when it is undefined
    (improvement without s_{r−1})."""
    score = scores[round_index]
    if objective == "score":
        return score
    previous = scores.get(round_index - 1, baseline if round_index == 0 else None)
    return None if previous is None else score - previous


def startup_trials(config: OptunaEngineerConfig, total_rounds: int | None) -> int:
    """The sampler's random start-up trials: the configured number, or for ``auto`` with R
    rounds 1 + ⌊(R − 1) / 2⌋ (trial 0 plus half of the R − 1 asked designs, rounded down); R
    unknown (the study is only being opened or told): 3."""
    if config.n_startup_trials != "auto":
        return int(config.n_startup_trials)
    if total_rounds is None:
        return 3
    if total_rounds < 1:
        raise ValueError("a run has at least one round")
    return 1 + (total_rounds - 1) // 2


def make_sampler(config: OptunaEngineerConfig, seed: int, total_rounds: int | None = None) -> Any:
    """The configured sampler, seeded; ``total_rounds`` sizes ``auto`` start-up trials."""
    import optuna

    n = startup_trials(config, total_rounds)
    if config.sampler == "tpe":
        return optuna.samplers.TPESampler(n_startup_trials=n, seed=seed, multivariate=config.multivariate)
    if config.sampler == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    if config.sampler == "cmaes":
        return optuna.samplers.CmaEsSampler(n_startup_trials=n, seed=seed)
    if config.sampler == "gp":
        return optuna.samplers.GPSampler(n_startup_trials=n, seed=seed)
    return optuna.samplers.QMCSampler(seed=seed)


TOKEN_ATTR = "curriculum_token"
"""Study user attribute: the run's study token, also kept in every round's engineer state."""
CONFIG_ATTR = "curriculum_config"
"""Study user attribute: the fingerprint of the engineer config the study was made for."""
LOCK_PROBE_S = 1.0
"""How long a resume waits for another process's lock on ``optuna.db`` before refusing."""


def config_fingerprint(config: OptunaEngineerConfig) -> str:
    """SHA-256 (16 hex digits) of what shapes the study: everything in the engineer's config."""
    blob = json.dumps(config.model_dump(mode="json"), sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def study_problem(path: Path, config: OptunaEngineerConfig, token: str | None,
                  *, probe_lock: bool = True) -> str | None:
    """Why the study file ``path`` cannot be used by a run whose rounds recorded ``token``, or
    ``None``: it must be a plain file, pass SQLite's ``quick_check``, not be locked by another
    process (``probe_lock``), and carry this run's token and config fingerprint."""
    import sqlite3

    if not os.path.lexists(path):
        return None if token is None else f"{path} is missing; the run's rounds recorded a study"
    if not is_plain_file(path):
        return f"{path} is not a plain file (a link or a device); remove it"
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=LOCK_PROBE_S)
    except sqlite3.Error as exc:
        return f"{path} cannot be opened ({exc})"
    try:
        check = conn.execute("PRAGMA quick_check").fetchone()
        if not check or check[0] != "ok":
            return f"{path} is damaged (SQLite: {str(check[0] if check else 'no answer')[:120]})"
        attrs = dict(conn.execute("SELECT key, value_json FROM study_user_attributes sua JOIN studies s "
                                  "ON s.study_id = sua.study_id WHERE s.study_name = ?",
                                  (config.study_name,)).fetchall())
    except sqlite3.OperationalError as exc:
        if "locked" in str(exc):
            return f"{path} is locked by another process; stop it before resuming"
        return f"{path} is damaged (SQLite: {str(exc)[:120]})"
    except sqlite3.DatabaseError as exc:
        return f"{path} is damaged (SQLite: {str(exc)[:120]})"
    finally:
        conn.close()
    if probe_lock and (problem := _lock_problem(path)) is not None:
        return problem
    return _identity_problem(path, attrs, config, token)


def _lock_problem(path: Path) -> str | None:
    import sqlite3

    conn = sqlite3.connect(str(path), timeout=LOCK_PROBE_S, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")  # the write lock a resume needs, taken and given back
        conn.execute("ROLLBACK")
    except sqlite3.OperationalError as exc:
        if "locked" in str(exc) or "busy" in str(exc):
            return f"{path} is locked by another process; stop it before resuming"
        return f"{path} cannot be written ({str(exc)[:120]})"
    finally:
        conn.close()
    return None


def _identity_problem(path: Path, attrs: dict[str, str], config: OptunaEngineerConfig,
                      token: str | None) -> str | None:
    if token is None:
        return None  # a fresh start (its study is made again) or a run from before tokens
    found = json.loads(attrs[TOKEN_ATTR]) if TOKEN_ATTR in attrs else None
    if found != token:
        return (f"{path} is not this run's study (it belongs to another run, or was replaced); "
                "restore this run's optuna.db or start a new run")
    made_for = json.loads(attrs[CONFIG_ATTR]) if CONFIG_ATTR in attrs else None
    if made_for != config_fingerprint(config):
        return f"{path} was made for another engineer config (fingerprint {made_for}, now {config_fingerprint(config)})"
    return None


def sqlite_storage(path: Path) -> Any:
    """Optuna RDB storage on SQLite in WAL mode with ``synchronous=NORMAL``.

    A trial commits once per parameter; with SQLite's default (an fsync per commit) asking 24
    parameters takes ~0.5 s. WAL + NORMAL keeps every commit safe against a killed process (the
    case resume handles) and only an OS crash could lose the last commits, which the round-keyed
    trials then recreate.
    """
    import sqlite3

    import optuna

    def connect() -> sqlite3.Connection:
        conn = sqlite3.connect(str(path), timeout=30.0, check_same_thread=False)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        return conn

    return optuna.storages.RDBStorage(f"sqlite:///{Path(path).resolve()}",
                                      engine_kwargs={"creator": connect})


# --------------------------------------------------------------------------------------------
# engineer
# --------------------------------------------------------------------------------------------

class OptunaEngineer(Engineer):
    """Each round is one trial: tell the last round's value, ask the next config."""

    config_class = OptunaEngineerConfig
    fits = ("buckets",)
    description = "Optuna black-box search (TPE by default) over the generator config; one trial per round."

    def __init__(self, config: OptunaEngineerConfig, *, run_dir: str | None = None) -> None:
        super().__init__(config, run_dir=run_dir)
        self._space: SearchSpace | None = None
        self._storage: Any = None
        self._scores: dict[int, float] = {}
        self._baseline: float | None = None
        self._token = uuid.uuid4().hex
        self._resumed = False
        self._tied = False
        """The study carries ``_token`` (then every state records it; a fresh engineer's, as a
        fork's round 0 gets, has no study yet and records none)."""

    @classmethod
    def resume_problem(cls, config: BaseModel, run_dir: Path, state: dict[str, Any] | None,
                       *, writing: bool = True) -> str | None:
        """``optuna.db`` must be intact, free and this run's own (``study_problem``)."""
        token = state.get("study_token") if isinstance(state, dict) else None
        return study_problem(Path(run_dir) / DB_FILE, config, token if isinstance(token, str) else None,
                             probe_lock=writing)

    # -- storage ------------------------------------------------------------------------------
    @property
    def storage_url(self) -> str | None:
        return f"sqlite:///{Path(self.run_dir).resolve() / DB_FILE}" if self.run_dir else None

    def _study(self, seed: int, total_rounds: int | None = None) -> Any:
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        if self._storage is None:
            self._storage = (sqlite_storage(Path(self.run_dir) / DB_FILE) if self.run_dir
                             else optuna.storages.InMemoryStorage())
        return optuna.create_study(storage=self._storage, study_name=self.config.study_name,
                                   direction="maximize", load_if_exists=True,
                                   sampler=make_sampler(self.config, seed, total_rounds))

    def on_run_start(self, testbed: Testbed, initial_proposal: BaseModel) -> None:
        from optuna.trial import TrialState

        self._space = SearchSpace.of(testbed.proposal_space, self.config.simplex)
        study = self._study(0)  # create the study file now, so a dashboard can open it from round 0
        if study.user_attrs.get(TOKEN_ATTR) != self._token:
            if self._resumed and TOKEN_ATTR in study.user_attrs:
                raise ValueError(f"{self.storage_url}: not this run's study")  # resume_problem says more
            if not self._resumed and study.get_trials(deepcopy=False):
                study = self._fresh_study()  # left by a start that committed no round
            study.set_user_attr(TOKEN_ATTR, self._token)
            study.set_user_attr(CONFIG_ATTR, config_fingerprint(self.config))
        self._tied = True
        for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
            if ROUND_ATTR not in t.user_attrs:  # asked by a run that died before keying it
                study.tell(t.number, state=TrialState.FAIL)

    def _fresh_study(self) -> Any:
        import optuna

        optuna.delete_study(study_name=self.config.study_name, storage=self._storage)
        return self._study(0)

    @staticmethod
    def _trial_for(study: Any, round_index: int) -> Any:
        found = [t for t in study.get_trials(deepcopy=False) if t.user_attrs.get(ROUND_ATTR) == round_index]
        return found[-1] if found else None

    def _baseline_score(self) -> float | None:
        if self._baseline is None and self.run_dir:
            if is_plain_file(Path(self.run_dir) / "baseline_eval.json"):
                raw = read_inside(self.run_dir, "baseline_eval.json", 64 << 20, what="baseline eval")
                self._baseline = float(json.loads(raw)["score"])
        return self._baseline

    def _tell(self, study: Any, round_index: int) -> dict[str, Any]:
        """Tell the trial of ``round_index`` its value, unless it is no longer running."""
        from optuna.trial import TrialState

        trial = self._trial_for(study, round_index)
        if trial is None or trial.state != TrialState.RUNNING:
            return {"told": False, "trial": None if trial is None else trial.number,
                    "reason": "no running trial for this round (told on an earlier attempt)"}
        value = objective_value(self._scores, round_index, self.config.objective, self._baseline_score())
        if value is None:
            study.tell(trial.number, state=TrialState.FAIL)
            return {"told": True, "trial": trial.number, "value": None,
                    "reason": "improvement undefined without a previous score (no baseline eval)"}
        study.tell(trial.number, value)
        return {"told": True, "trial": trial.number, "value": value}

    # -- the engineer -------------------------------------------------------------------------
    def design(self, ctx: DesignContext) -> Design:
        from optuna.trial import TrialState

        if self._space is None:
            self._space = SearchSpace.of(ctx.testbed.proposal_space, self.config.simplex)
        space = self._space
        study = self._study(int(ctx.rng.integers(0, 2**31 - 1)), ctx.total_rounds)
        r = ctx.round
        self._scores.update({h.round: h.eval.score for h in ctx.history})
        given = self._trial_for(study, r)
        if given is None:  # round 0: the starting config becomes trial 0
            study.enqueue_trial(space.to_params(ctx.proposal.model_dump(mode="json")),
                                user_attrs={ROUND_ATTR: r, "origin": "given"})
        if given is None or given.state == TrialState.WAITING:  # (enqueued by a dead attempt)
            study.ask(space.distributions())
        told = self._tell(study, r)

        pending = self._trial_for(study, r + 1)
        if pending is not None:  # asked by an earlier attempt at this round: the decision stands
            params, number, reused = pending.params, pending.number, True
        else:
            trial = study.ask(space.distributions())
            trial.set_user_attr(ROUND_ATTR, r + 1)
            trial.set_user_attr("origin", "asked")
            params, number, reused = trial.params, trial.number, False
        raw = space.to_proposal(params)
        return Design(raw=raw, notes={"trial": number, "reused_pending_trial": reused, "tell": told,
                                      "sampler": self.config.sampler, "objective": self.config.objective,
                                      "startup_trials": startup_trials(self.config, ctx.total_rounds),
                                      "storage": self.storage_url or "memory"})

    def on_round_end(self, report: RoundReport) -> None:
        self._scores[report.round] = report.eval.score
        if report.design is None and self._space is not None:  # the last round: tell its trial
            self._tell(self._study(0), report.round)

    def close(self) -> None:
        """Release the SQLite connections (many runs may share one process under compare)."""
        engine = getattr(self._storage, "engine", None)
        if engine is not None:
            engine.dispose()
        self._storage = None

    def state_dict(self) -> dict[str, Any]:
        scores = {"scores": {str(r): s for r, s in sorted(self._scores.items())}}
        return scores | {"study_token": self._token} if self._tied else scores

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._scores = {int(k): float(v) for k, v in state.get("scores", {}).items()}
        if isinstance(state.get("study_token"), str):
            self._token, self._resumed = state["study_token"], True
