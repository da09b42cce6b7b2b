"""Config bases shared by every plugin and by the run configuration.

Every config model forbids unknown keys and uses its fields' docstrings as descriptions, so
``curriculum`` can name a bad key and suggest the closest valid one before anything loads.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class ConfigError(ValueError):
    """A config or user file that cannot be used; the message is meant for the user as is."""


class StrictModel(BaseModel):
    """Base for every config model: unknown keys are errors, field docstrings are descriptions."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, validate_default=True)


class PluginConfig(StrictModel):
    """Base of a plugin's config section; ``name`` selects the plugin in its registry.

    Plugins may use any pydantic model with a ``name`` field; inheriting from this one gives
    the house defaults (unknown keys forbidden, field docstrings as descriptions).
    """

    name: str
    """Registered name of the plugin."""
