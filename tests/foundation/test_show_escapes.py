"""``curriculum show`` prints what a model wrote as text: its escape sequences are shown, never
acted on by the terminal (clear screen, window title, clipboard writes, cursor moves).

Runs use the simulated learner (seconds per run) with the real MAPF testbed.
"""

from __future__ import annotations

import json

from typer.testing import CliRunner

from curriculum.cli import app
from curriculum.core.terminal import terminal_safe
from test_rundir_integrity import _config, finished  # noqa: F401

runner = CliRunner()

HOSTILE = ("clear\x1b[2J title\x1b]0;pwned\x07 clipboard\x1b]52;c;cm0gLXJmIH4=\x07 "
           "back\rover c1\x9b31m bidi\u202etxt.exe")


def test_terminal_safe_shows_controls_and_keeps_text():
    assert terminal_safe("a\tb\nc é 中") == "a\tb\nc é 中"
    safe = terminal_safe(HOSTILE)
    for char in "\x1b\x07\r\x9b\u202e":
        assert char not in safe
    assert "\\x1b[2J" in safe and "\\x1b]52;c;" in safe and "\\u202e" in safe


def test_show_escapes_model_text(finished):
    path = finished.round_dir(0) / "design.json"
    record = json.loads(path.read_text())
    record["design"]["prompt"] = "prompt " + HOSTILE
    record["design"]["output"] = "output " + HOSTILE
    record["engineer"] = "fixed\x1b[2J"
    record["diagnostics"] = {"note": HOSTILE}
    path.write_text(json.dumps(record))
    outputs = []
    for args in (["show", str(finished.path), "--round", "0"], ["show", str(finished.path)]):
        result = runner.invoke(app, args, terminal_width=300)
        assert result.exit_code == 0, result.output
        for char in "\x1b\x07\r\x9b\u202e":
            assert char not in result.output, (args, char)
        outputs.append(result.output)
    assert "\\x1b]52;c;" in outputs[0] and "prompt clear\\x1b[2J" in outputs[0]
