"""The engineer's chat prompt and the JSON schema of its answer.

``build_messages`` returns ``[system, user]``: the system message states the role (design the
generator config of your own next training round; never write instances), the user message holds
the context modules (``context.build_context``) and the answer format: brief reasoning, then one
JSON object ``{"summary": "...", "<container>": {...}}`` — ``summary`` is one or two sentences
that explain the choice (carried forward as module S), the container (MAPF: ``sizes``;
reasoning_gym: ``buckets``) is the new generator config, described from the testbed's declared
``BucketSpace`` (container, unit, share key, knobs). A compact, complete example (equal shares)
is included so that small models copy the shape.

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


def fields_text(space: BucketSpace) -> str:
    """The answer format's lines about the proposal fields, from the declared bucket space (MAPF:
    ``"sizes": every map size with data_ratio, hole_ratio and wait_ratio. ...``)."""
    keys = [space.share_key, *(k.name for k in space.knobs)]
    listed = keys[0] if len(keys) == 1 else ", ".join(keys[:-1]) + " and " + keys[-1]
    return (f'"{space.container}": every {space.unit} with {listed}. The {space.share_key} values are '
            f"shares of the training data and must sum to 1. Values outside the legal range are clipped; "
            f"a missing {space.unit} or field keeps its current value.")


def example_answer(proposal_example: dict[str, Any], container: str = "sizes") -> str:
    """The example JSON answer: a summary placeholder plus the example proposal, one bucket a line."""
    buckets = proposal_example.get(container)
    if not isinstance(buckets, dict):
        body = json.dumps(proposal_example)
        return '{"summary": "<why you chose this>", ' + body[1:]
    rows = [f'    "{name}": {json.dumps(params)}' for name, params in buckets.items()]
    return ('{\n  "summary": "<why you chose this>",\n  "' + container + '": {\n' + ",\n".join(rows) + "\n  }\n}")


def build_messages(context: str, proposal_example: dict[str, Any], space: BucketSpace) -> list[dict[str, str]]:
    """``[system, user]`` chat messages: the context, then the answer format with an example."""
    answer = FORMAT.format(example=example_answer(proposal_example, space.container), fields=fields_text(space))
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


def rounded_example(proposal: BaseModel, digits: int = 3) -> dict[str, Any]:
    """A proposal dumped to JSON with floats rounded (short, readable example values)."""
    return _round(proposal.model_dump(mode="json"), digits)


def _round(value: Any, digits: int) -> Any:
    if isinstance(value, float):
        return round(value, digits)
    if isinstance(value, dict):
        return {k: _round(v, digits) for k, v in value.items()}
    if isinstance(value, list):
        return [_round(v, digits) for v in value]
    return value
