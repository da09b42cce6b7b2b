"""The engineer's chat prompt and the JSON schema of its answer.

``build_messages`` returns ``[system, user]``: the system message states the role (design the
generator config of your own next training round; never write instances), the user message holds
the context modules (``context.build_context``) and the answer format: brief reasoning, then one
JSON object ``{"summary": "...", "<container>": {...}}`` — ``summary`` is one or two sentences
that explain the choice (carried forward as module S), the container (MAPF: ``sizes``;
reasoning_gym: ``buckets``) holds the buckets the answer changes, described from the testbed's
declared ``BucketSpace`` (container, unit, share key, knobs); a bucket or field left out keeps
its current value. The format never shows a config a model could take over as its answer:

* decoded under the answer schema (``structured_output``), the schema carries the format, and
  the prompt shows the shape with placeholders only (``answer_template``: no number at all);
* free text shows ``implausible_example``: a partial answer that no sensible curriculum writes
  (a trickle of data on the easiest bucket, the rest on the hardest with every knob at its
  hardest), so that a model that copies it is seen to copy (``copied_example``).

``output_schema`` is the testbed's proposal JSON schema with ``reasoning`` and ``summary`` string
properties added at the top level (used for schema-constrained decoding: vLLM structured outputs
or an endpoint's ``response_format``).

``prompt_text`` flattens the messages to the text saved as ``engineer_prompt.txt``.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel

from curriculum.core.spaces import BucketSpace

SYSTEM = (
    "You are the environment engineer of your own reinforcement-learning curriculum. You are the "
    "model being trained. After each training round you read how you did and choose the "
    "generator configuration of the next round's training data. You never write training "
    "examples, rewards or evaluation data: you only set the generator's parameters.")

FORMAT = """\
## Your answer
First think briefly about what the results show (a few sentences). Then write exactly one JSON
object, with no comments, in this shape:
```json
{example}
```
"summary": one or two sentences explaining your choice (you will read it next round).
{fields}"""

PLACEHOLDER_NOTE = "Replace every <...> with your own choice; write only the {unit}s you change."
EXAMPLE_NOTE = ("This example only shows the format; it is not a sensible curriculum. Decide your own "
                "values from the results above.")


def fields_text(space: BucketSpace) -> str:
    """The answer format's lines about the proposal fields, from the declared bucket space (MAPF:
    ``"sizes": the map sizes you change, each with any of data_ratio, hole_ratio and wait_ratio. ...``)."""
    keys = [space.share_key, *(k.name for k in space.knobs)]
    listed = keys[0] if len(keys) == 1 else ", ".join(keys[:-1]) + " and " + keys[-1]
    return (f'"{space.container}": the {space.unit}s you change, each with any of {listed}. The '
            f"{space.share_key} values are shares of the training data (they are rescaled to sum to 1). "
            f"Values outside the legal range are clipped; a {space.unit} or field you leave out keeps "
            "its current value.")


def answer_template(space: BucketSpace) -> str:
    """The answer's shape with placeholders and no number (the format under the answer schema)."""
    fields = ", ".join(f'"{key}": <{key}>' for key in (space.share_key, *(k.name for k in space.knobs)))
    return ('{"reasoning": "<what the results show>", "summary": "<why you chose this>", '
            f'"{space.container}": {{"<{space.unit}>": {{{fields}}}, ...}}}}')


def implausible_example(space: BucketSpace) -> dict[str, Any]:
    """A partial answer no sensible curriculum writes (module docstring): 1 % of the data on the
    easiest bucket, 99 % on the hardest with every knob at its hardest legal value."""
    hardest = {k.name: (k.low if k.harder == "lower" else k.high) for k in space.knobs}
    return {space.container: {space.buckets[0]: {space.share_key: 0.01},
                              space.buckets[-1]: {space.share_key: 0.99, **hardest}}}


def example_answer(proposal_example: dict[str, Any], container: str = "sizes") -> str:
    """The example JSON answer: a summary placeholder plus the example proposal, one bucket a line."""
    buckets = proposal_example.get(container)
    if not isinstance(buckets, dict):
        body = json.dumps(proposal_example)
        return '{"summary": "<why you chose this>", ' + body[1:]
    rows = [f'    "{name}": {json.dumps(params)}' for name, params in buckets.items()]
    return ('{\n  "summary": "<why you chose this>",\n  "' + container + '": {\n' + ",\n".join(rows) + "\n  }\n}")


def build_messages(context: str, space: BucketSpace, example: dict[str, Any] | None) -> list[dict[str, str]]:
    """``[system, user]`` chat messages: the context, then the answer format, shown by
    ``example`` (a partial answer) or, when ``None``, by ``answer_template``."""
    if example is None:
        shape, note = answer_template(space), PLACEHOLDER_NOTE.format(unit=space.unit)
    else:
        shape, note = example_answer(example, space.container), EXAMPLE_NOTE
    answer = FORMAT.format(example=shape, fields=f"{fields_text(space)}\n{note}")
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": f"{context}\n\n{answer}"}]


def prompt_text(messages: list[dict[str, str]]) -> str:
    """Messages flattened as ``[role]\\ncontent`` blocks (what ``curriculum show`` prints)."""
    return "\n\n".join(f"[{m['role']}]\n{m['content']}" for m in messages)


def output_schema(proposal_model: type[BaseModel]) -> dict[str, Any]:
    """JSON schema of the answer: the proposal's schema plus ``reasoning`` and ``summary``."""
    schema = proposal_model.model_json_schema()
    properties = {"reasoning": {"type": "string", "maxLength": 2000},
                  "summary": {"type": "string", "maxLength": 600},
                  **schema.get("properties", {})}
    required = ["reasoning", "summary", *schema.get("required", [])]
    return {**schema, "properties": properties, "required": required}


def rounded(value: Any, digits: int = 3) -> Any:
    """A JSON value with every float rounded to ``digits`` decimals (compares answers by value)."""
    if isinstance(value, float):
        return round(value, digits)
    if isinstance(value, dict):
        return {k: rounded(v, digits) for k, v in value.items()}
    if isinstance(value, list):
        return [rounded(v, digits) for v in value]
    return value
