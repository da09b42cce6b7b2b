"""Where curriculum keeps its on-disk caches (converted models, eval suites, corpora).

Root: ``$CURRICULUM_CACHE`` if set, else ``$XDG_CACHE_HOME/curriculum``, else
``~/.cache/curriculum``. Each user of the cache takes one sub-directory.
"""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir(*parts: str) -> Path:
    """The cache root, or ``root/part/...`` for a user's sub-directory (not created here)."""
    root = os.environ.get("CURRICULUM_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "curriculum"
    )
    return Path(root).joinpath(*parts)
