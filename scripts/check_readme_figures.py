"""Check that every figure README.md states appears on the results page with the same value.

A *figure* is a measured quantity as prose writes it: a percentage (``16.7 %``), a wall time
(``35:14``, ``1:36:34``), a decimal (``0.185``), a ratio (``2.52x``) or a number with a unit
(``69 GFLOP/s``, ``518 MB``, ``20 min``, ``41.1 s``). README's code blocks and inline code are skipped
(commands, option values, config keys), as are bare integers (counts such as "64 steps" or
"3 seeds", which the text around them defines). Figures are compared as written, after
spacing is normalised (``22.2 %`` and ``22.2%`` are one figure), so a rounded or changed README
value is reported.

Run: ``python scripts/check_readme_figures.py [--root DIR]``; exit 0 when every README figure
is on ``docs/results.md``, 1 (listing the missing ones) otherwise.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

_FENCE = re.compile(r"^```.*?^```", re.DOTALL | re.MULTILINE)
_INLINE = re.compile(r"`[^`\n]*`")
_UNITS = r"GFLOP/s|TFLOP|GFLOP|GiB|GB|MB|minutes|min|ms|s"
_FIGURE = re.compile(
    r"(?<![\w.:/-])(?:"
    r"(?P<time>\d+(?::\d\d){1,2})(?![\d:])"                      # 35:14, 1:36:34
    r"|(?P<pct>\d+(?:\.\d+)?)\s?%"                                # 16.7 %
    r"|(?P<ratio>\d+(?:\.\d+)?)x\b"                               # 2.52x (not 3x3: no boundary)
    rf"|(?P<unit>\d[\d,]*(?:\.\d+)?)\s?(?P<u>{_UNITS})(?![\w])"  # 69 GFLOP/s, 518 MB, 41.1 s
    r"|(?P<dec>\d+\.\d+)(?![\d.])"                                # 0.185
    r")")


def prose(text: str) -> str:
    """``text`` without fenced code blocks and inline code."""
    return _INLINE.sub(" ", _FENCE.sub(" ", text))


def figures(text: str, *, code: bool = False) -> set[str]:
    """The figures of ``text``'s prose (and of its code too with ``code``), normalised:
    ``"16.7%"``, ``"35:14"``, ``"69 GFLOP/s"``."""
    found = set()
    for m in _FIGURE.finditer(text if code else prose(text)):
        if m.group("time"):
            found.add(m.group("time"))
        elif m.group("pct"):
            found.add(m.group("pct") + "%")
        elif m.group("ratio"):
            found.add(m.group("ratio") + "x")
        elif m.group("unit"):
            found.add(f"{m.group('unit')} {m.group('u')}")
        else:
            found.add(m.group("dec"))
    return found


def missing_figures(readme: str, results: str) -> list[str]:
    """README figures that the results page does not state (sorted). The results page's code
    blocks count: a compare table is printed there as the CLI prints it."""
    return sorted(figures(readme) - figures(results, code=True))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1],
                        help="repository root holding README.md and docs/results.md")
    args = parser.parse_args(argv)
    readme = (args.root / "README.md").read_text(encoding="utf-8")
    results = (args.root / "docs" / "results.md").read_text(encoding="utf-8")
    missing = missing_figures(readme, results)
    if missing:
        print("README.md states figures that docs/results.md does not:")
        for figure in missing:
            print(f"  {figure}")
        return 1
    print(f"README.md: {len(figures(readme))} figures, all on docs/results.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
