"""A one-process run's colocated vLLM engine gets a rendezvous port no other run holds."""

from __future__ import annotations

import os
import socket

from trainers.lm.generation import single_process_rendezvous_port


def test_a_port_another_run_listens_on_is_replaced_in_a_one_process_run(monkeypatch):
    # Another run's engine already listens on the port TRL would pick first.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        taken = other.getsockname()[1]
        monkeypatch.setenv("MASTER_PORT", str(taken))
        monkeypatch.delenv("WORLD_SIZE", raising=False)
        single_process_rendezvous_port()
        port = int(os.environ["MASTER_PORT"])
        assert port != taken
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as ours:
            ours.bind(("127.0.0.1", port))  # free: the engine can listen on it


def test_a_multi_process_launch_keeps_its_launchers_port(monkeypatch):
    monkeypatch.setenv("MASTER_PORT", "29511")
    monkeypatch.setenv("WORLD_SIZE", "2")
    single_process_rendezvous_port()
    assert os.environ["MASTER_PORT"] == "29511"
