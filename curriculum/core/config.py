"""Config bases shared by every plugin and by the run configuration.

Every config model forbids unknown keys and uses its fields' docstrings as descriptions, so
``curriculum`` can name a bad key and suggest the closest valid one before anything loads.
"""

from __future__ import annotations

import difflib
import typing
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError


class ConfigError(ValueError):
    """A config or user file that cannot be used; the message is meant for the user as is."""


class StrictModel(BaseModel):
    """Base for every config model: unknown keys are errors, field docstrings are descriptions."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, validate_default=True)


class PluginConfig(StrictModel):
    """Base of a plugin's config section; ``name`` selects the plugin in its registry.

    A plugin writes its name once, as ``name: Literal["mine"]``: a subclass whose ``name`` is a
    one-value ``Literal`` without a default gets that value as its default (so ``MineConfig()``
    validates), and the registry takes a plugin's name from it. Plugins may use any pydantic model
    with a ``name`` field; inheriting from this one gives the house defaults (unknown keys
    forbidden, field docstrings as descriptions).
    """

    name: str
    """Registered name of the plugin."""

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        field = cls.model_fields["name"]
        values = typing.get_args(field.annotation)
        if typing.get_origin(field.annotation) is typing.Literal and len(values) == 1 and field.is_required():
            field.default = values[0]
            cls.model_rebuild(force=True)


def format_errors(err: ValidationError, source: str, valid_keys: Callable[[list[str]], list[str]]) -> str:
    """One line per error: the dotted field, what is wrong, and a suggestion for typos;
    ``valid_keys(loc)``: the field names of the model at ``loc`` (``field_names``)."""
    lines = [f"invalid {source}:"]
    for item in err.errors():
        loc = [str(p) for p in item["loc"]]
        field = ".".join(loc) or "<root>"
        message = item["msg"]
        if item["type"] == "extra_forbidden":
            valid = valid_keys(loc[:-1])
            close = difflib.get_close_matches(loc[-1], valid, n=1, cutoff=0.5)
            message = f"unknown key '{loc[-1]}'"
            if close:
                message += f" (did you mean '{'.'.join([*loc[:-1], close[0]])}'?)"
            elif valid:
                message += f" (valid keys here: {', '.join(sorted(valid))})"
        elif "input" in item and item["type"] not in ("missing",):
            message += f" (got {item['input']!r})"
        lines.append(f"  {field}: {message}")
    return "\n".join(lines)


def field_names(model: type[BaseModel] | None, loc: list[str]) -> list[str]:
    """Field names of the model found at ``loc`` inside ``model`` (``[]`` where there is none)."""
    for part in loc:
        if model is None:
            return []
        field = model.model_fields.get(part)
        model = model_in(field.annotation) if field is not None else None
    return list(model.model_fields) if model is not None else []


def model_in(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model inside an annotation like ``Foo | None``."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()) or ():
        found = model_in(arg)
        if found is not None:
            return found
    return None
