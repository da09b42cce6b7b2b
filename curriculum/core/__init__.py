"""The kernel: the vocabulary every layer of curriculum imports, and nothing else.

Layers, bottom to top (``tests/foundation/test_layering.py`` checks them with import-linter
contracts declared in ``pyproject.toml``):

1. ``curriculum.core`` (this package) — imports nothing of ours;
2. ``testbeds`` (kernel only), ``engineers`` and ``trainers`` (kernel and testbeds; neither
   imports the other);
3. the controller — every other module of ``curriculum`` (config, registry, loop, run dir, CLI,
   compare, report); nothing below imports it, and it names no plugin: it reaches them through
   the registry's lazy entries and their base types, asking each what it costs, which configs it
   ships and which commands it adds through methods on those base types.

Modules:

* ``config`` — ``StrictModel`` and ``PluginConfig``, the base of every config section;
  ``ConfigError`` and ``format_errors`` (a user's config, refused readably);
* ``policy`` — the run's ``model`` and ``generation`` settings, what a model name means, which
  engine decodes;
* ``run`` — ``RunSettings``: what a trainer reads of the run configuration (the controller's
  ``RunConfig`` satisfies it);
* ``budget``, ``sizing`` — what ``--dry-run`` asks a plugin (``Trainer.training_budget``,
  ``Trainer.plan_lines``): token ``Work``, ``TrainingBudget``; GPUs, model shapes, strategies,
  memory per GPU, ``PlanTarget``;
* ``commands`` — a plugin's command-line sub-app (``CommandHost``, ``fail``);
* ``userfiles`` — reading users' files (configs, JSONL inputs) with readable refusals;
* ``terminal`` — ``terminal_safe``: model text made safe to print on a terminal;
* ``safefs`` — bounded reads of files users name, and paths inside a run dir opened without
  following links;
* ``types`` — ``Task``, ``Completion``, ``Policy``, ``Change``, ``EvalReport``;
* ``breakdown`` — ``EvalBreakdown``, the typed failure breakdown of an eval (``EvalReport.breakdown``);
* ``metrics`` — ``MetricKey``, the typed name of a flat eval metric (``valid_rate/3agents/5x5``);
* ``records`` — ``Design`` (with its typed ``Diagnostics``), ``DesignRecord``, ``RoundReport``
  (what engineers read);
* ``buckets`` — functions over a declared bucket space (``space_of``, ``groups_of``, scores and
  training statistics per bucket, projecting and allocating shares);
* ``bucket_stats`` — ``bucket_metrics``: the per-bucket training statistics a trainer reports;
* ``pool`` — the one schema of an environment pool of programs: ``PoolEnvironment``,
  ``DesignSample``, ``EnvOutcome``, their task encoding, ``program_hash``, pool files;
* ``reporting`` — ``ReportLayout``: how reports read a testbed's eval metrics (which are rates,
  per group and per bucket; what a bucket is; their order);
* ``distributed`` — who decides and writes under ``accelerate launch``;
* ``paths`` — on-disk cache locations.
"""
