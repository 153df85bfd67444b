"""The gRPC core switches a broker process sets before grpc is imported (dataplane/grpc_core.py)."""

from __future__ import annotations

import logging
import subprocess
import sys

import pytest

from dataplane.config import BrokerSettings
from dataplane.grpc_core import DEFAULT_GRPC_EXPERIMENTS, ENV, apply_experiments


def test_the_setting_goes_into_the_environment_before_grpc_is_imported() -> None:
    environ: dict[str, str] = {}
    assert apply_experiments("-a,-b", environ, modules={}) == "-a,-b"
    assert environ == {ENV: "-a,-b"}


def test_the_operators_own_variable_wins() -> None:
    environ = {ENV: "tcp_rcv_lowat"}
    assert apply_experiments(DEFAULT_GRPC_EXPERIMENTS, environ, modules={}) == "tcp_rcv_lowat"
    assert environ == {ENV: "tcp_rcv_lowat"}


def test_an_empty_setting_leaves_grpcs_defaults() -> None:
    environ: dict[str, str] = {}
    assert apply_experiments("", environ, modules={}) == ""
    assert environ == {}


def test_after_grpc_was_imported_nothing_is_set_and_a_warning_says_why(
    caplog: pytest.LogCaptureFixture,
) -> None:
    environ: dict[str, str] = {}
    with caplog.at_level(logging.WARNING, logger="dataplane.grpc_core"):
        assert apply_experiments("-a", environ, modules={"grpc": object()}) == ""
    assert environ == {}
    assert "not applied" in caplog.text


def test_the_default_is_the_settings_default() -> None:
    assert BrokerSettings().grpc_experiments == DEFAULT_GRPC_EXPERIMENTS
    assert BrokerSettings(grpc_experiments="").grpc_experiments == ""


def _core_complaints(experiments: str) -> str:
    """What grpc's core prints when a process starts with ``GRPC_EXPERIMENTS=experiments``."""
    code = "import grpc; grpc.insecure_channel('127.0.0.1:1').close()"
    done = subprocess.run(
        [sys.executable, "-c", code], env={ENV: experiments}, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stderr


def test_the_pinned_grpcio_knows_every_default_experiment() -> None:
    # a grpcio that dropped one of them would log it at every broker start (and set nothing)
    assert "Unknown experiment" in _core_complaints("-no_such_experiment")  # the check itself works
    assert "Unknown experiment" not in _core_complaints(DEFAULT_GRPC_EXPERIMENTS)
