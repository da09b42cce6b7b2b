"""SPADE part 1: the environment designer — prompts, parsing, admission in the sandbox,
corpus grounding, environment memory, diversity, and the ``spade`` engineer.

Modules: ``config`` (``SpadeEngineerConfig``, ``RejectReason``), ``prompts``, ``parse``,
``admission`` (``admit``), ``corpus`` (``Corpus``), ``memory`` (``Memory``), ``diversity``
(``vendi_score``, embedders, near duplicates), ``designer`` (``Designer``, ``DesignCandidate``,
``Pool``), ``engineer`` (``SpadeEngineer``). The map of the method is ``docs/spade.md``; this part is
``docs/spade_designer.md``.
"""
