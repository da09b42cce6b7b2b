"""Files named on the command line that are not what they claim: devices, pipes, huge files.

Every file a command reads (``--config``, ``--design``, ``--pilot``, ``--against``,
``--accelerate-config``, ``mapf solve`` / ``validate`` inputs, ``sandbox try`` programs) must be a
regular file under a size cap; anything else is one line on stderr and exit status 2, before
more than the cap is read (``curriculum.core.safefs.read_bounded``). A JSONL line over
``MAX_LINE_BYTES`` costs only that line.
"""

from __future__ import annotations

import os

import pytest
from typer.testing import CliRunner

from curriculum.cli import app
from curriculum.config import ConfigError
from curriculum.core.userfiles import jsonl_records, read_user_bytes

runner = CliRunner()


def _one_line_refusal(args: list[str], *needles: str) -> None:
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    for needle in needles:
        assert needle in result.stderr, result.stderr


@pytest.fixture
def fifo(tmp_path):
    path = tmp_path / "pipe"
    os.mkfifo(path)  # nobody writes: a plain read would wait forever
    return path


@pytest.mark.parametrize("args", [
    ["run", "--dry-run", "--config", "/dev/zero"],
    ["run", "--dry-run", "--accelerate-config", "/dev/zero"],
    ["compare", "--design", "/dev/zero", "--dry-run"],
    ["mapf", "solve", "/dev/zero"],
    ["mapf", "validate", "/dev/zero"],
    ["sandbox", "try", "/dev/zero"],
])
def test_a_device_is_refused_in_one_line(args):
    _one_line_refusal(args, "/dev/zero", "is a device")


@pytest.mark.parametrize("command", [["run", "--dry-run", "--config"], ["mapf", "solve"],
                                     ["sandbox", "try"]])
def test_a_pipe_is_refused_without_waiting(fifo, command):
    _one_line_refusal([*command, str(fifo)], "is a pipe")


def test_an_oversized_file_is_refused_before_it_is_read(tmp_path):
    big = tmp_path / "big.yaml"
    with open(big, "wb") as handle:
        handle.truncate(1 << 30)  # sparse: a gigabyte that costs nothing to make
    with pytest.raises(ConfigError, match="over the 1,024-byte limit"):
        read_user_bytes(big, "file", limit=1024)
    _one_line_refusal(["run", "--dry-run", "--config", str(big)], "over the 65,536-byte limit")


def test_a_jsonl_line_over_the_cap_costs_only_that_line(tmp_path):
    path = tmp_path / "in.jsonl"
    path.write_bytes(b'{"a": 1}\n' + b"0" * 5000 + b"\n[2]\n" + b"1" * 3000)
    records = list(jsonl_records(path, max_line_bytes=1000))
    assert [r.line for r in records] == [1, 2, 3, 4]
    assert records[0].value == {"a": 1} and records[2].value == [2]
    assert "longer than 1,000 bytes" in records[1].error
    assert "longer than 1,000 bytes" in records[3].error
