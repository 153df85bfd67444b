"""The contexts file: where it lives, its mode, and what list/show print (never secrets)."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli.contexts import Context, ContextStore, Credentials, contexts_path
from cli.main import app

runner = CliRunner()


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (
        "MQCTL_CONFIG",
        "MQCTL_CONTEXT",
        "MQCTL_API_URL",
        "MQCTL_TOKEN",
        "MQCTL_TENANT",
        "XDG_CONFIG_HOME",
    ):
        monkeypatch.delenv(name, raising=False)


def test_path_follows_mqctl_config_then_xdg(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert contexts_path() == tmp_path / "home" / ".config" / "mqctl" / "contexts.json"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    assert contexts_path() == tmp_path / "xdg" / "mqctl" / "contexts.json"
    monkeypatch.setenv("MQCTL_CONFIG", str(tmp_path / "explicit.json"))
    assert contexts_path() == tmp_path / "explicit.json"


def test_saved_file_is_0600_in_a_0700_dir_and_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "cfg" / "mqctl" / "contexts.json"
    store = ContextStore(
        path, "a", {"a": Context("http://x", "tok", "acme", "h:1", {"acme": Credentials("AK", "SK")})}
    )
    store.save()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    # an existing file with looser permissions is replaced by a 0600 one
    path.chmod(0o644)
    store.save()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    loaded = ContextStore.load(path)
    assert loaded.current == "a"
    assert loaded.contexts["a"] == store.contexts["a"]
    assert not list(path.parent.glob(".contexts-*"))  # no temp file left behind


def test_a_corrupt_file_is_one_error_line(tmp_path: Path) -> None:
    path = tmp_path / "contexts.json"
    path.write_text("{not json")
    result = runner.invoke(app, ["context", "list"], env={"MQCTL_CONFIG": str(path)})
    assert result.exit_code == 1
    assert result.stderr.startswith("error: ") and "not a valid contexts file" in result.stderr
    assert "Traceback" not in result.output


def test_login_without_verification_then_list_use_set_delete(tmp_path: Path) -> None:
    env = {"MQCTL_CONFIG": str(tmp_path / "c.json")}
    assert (
        runner.invoke(
            app,
            ["login", "--url", "http://a:8000/", "--token", "s3cret", "--name", "a", "--no-verify"],
            env=env,
        ).exit_code
        == 0
    )
    assert (
        runner.invoke(
            app,
            ["login", "--url", "http://b:8000", "--token", "t0ken", "--name", "b", "--no-verify"],
            env=env,
        ).exit_code
        == 0
    )
    listed = json.loads(runner.invoke(app, ["context", "list", "-o", "json"], env=env).stdout)
    assert [(c["name"], c["current"], c["url"]) for c in listed] == [
        ("a", False, "http://a:8000"),
        ("b", True, "http://b:8000"),
    ]
    assert "s3cret" not in runner.invoke(app, ["context", "list"], env=env).output

    assert runner.invoke(app, ["context", "use", "a"], env=env).exit_code == 0
    assert (
        runner.invoke(
            app,
            [
                "context",
                "set",
                "--tenant",
                "acme",
                "--endpoint",
                "h:8081",
                "--access-key",
                "AK",
                "--secret-key",
                "SK",
            ],
            env=env,
        ).exit_code
        == 0
    )
    shown = json.loads(runner.invoke(app, ["context", "show", "-o", "json"], env=env).stdout)
    assert shown == {
        "credentials": ["acme"],
        "current": True,
        "endpoint": "h:8081",
        "name": "a",
        "tenant": "acme",
        "token": "set",
        "url": "http://a:8000",
    }
    assert "SK" not in runner.invoke(app, ["context", "show", "-o", "yaml"], env=env).stdout

    assert runner.invoke(app, ["context", "delete", "a"], env=env).exit_code == 0
    assert runner.invoke(app, ["context", "show", "a"], env=env).exit_code == 3
    assert runner.invoke(app, ["context", "show"], env=env).exit_code == 3  # no current context left


def test_token_prompt_hides_input(tmp_path: Path) -> None:
    env = {"MQCTL_CONFIG": str(tmp_path / "c.json")}
    result = runner.invoke(
        app, ["login", "--url", "http://a:8000", "--no-verify"], input="typed-token\n", env=env
    )
    assert result.exit_code == 0, result.output
    assert "typed-token" not in result.output
    assert json.loads((tmp_path / "c.json").read_text())["contexts"]["default"]["token"] == "typed-token"
