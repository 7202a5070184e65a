"""Config validation: errors name the key path, paths resolve per profile, the example documents every key."""

from __future__ import annotations

import re
import typing
from pathlib import Path

import pytest
import yaml
from pydantic import BaseModel

from gateway.config import (
    Config,
    ConfigError,
    Paths,
    load_config,
    parse_config,
    resolve_paths,
    secret_env_names,
)
from gateway.kernel.configbase import secret

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "config.example.yaml"


@pytest.fixture
def unset_env(monkeypatch: pytest.MonkeyPatch):
    """Unset variables for the test and remove them afterwards even if the code under test sets them."""

    def unset(*names: str) -> None:
        for name in names:
            # setenv first so monkeypatch records the variable and deletes it again on teardown.
            monkeypatch.setenv(name, "")
            monkeypatch.delenv(name)

    return unset


# ---------------------------------------------------------------------------------------------------
# Errors name the key path


@pytest.mark.parametrize(
    ("data", "path"),
    [
        ({"gatway": {}}, "gatway"),
        ({"gateway": {"busy_mod": "queue"}}, "gateway.busy_mod"),
        ({"sessions": {"reset": {"idle_minute": 5}}}, "sessions.reset.idle_minute"),
        ({"tools": {"terminal": {"enable": True}}}, "tools.terminal.enable"),
        ({"platforms": {"web": {"enabled": True, "port": 1}}}, "platforms.web.port"),
        (
            {"model": {"fallbacks": [{"base_url": "http://x/v1", "name": "m", "api_key": "sk"}]}},
            "model.fallbacks.0.api_key",
        ),
    ],
)
def test_unknown_key_names_its_path(data: dict, path: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(data)
    message = str(info.value)
    assert f"{path}: unknown key" in message
    assert "\n" not in message


@pytest.mark.parametrize(
    ("data", "path"),
    [
        ({"gateway": {"busy_mode": "sometimes"}}, "gateway.busy_mode"),
        ({"gateway": {"max_queue": 0}}, "gateway.max_queue"),
        ({"http": {"port": -1}}, "http.port"),
        ({"http": {"port": 70000}}, "http.port"),
        ({"database": {"url": "mysql://root@localhost/herald"}}, "database.url"),
        ({"logging": {"level": "verbose"}}, "logging.level"),
        ({"model": {"temperature": 3}}, "model.temperature"),
        ({"model": {"timeout_seconds": "soon"}}, "model.timeout_seconds"),
        ({"model": {"fallbacks": [{"base_url": "http://x/v1"}]}}, "model.fallbacks.0.name"),
        ({"sessions": {"reset": {"daily_hour": 24}}}, "sessions.reset.daily_hour"),
        ({"tools": {"terminal": {"max_output_chars": 5}}}, "tools.terminal.max_output_chars"),
        ({"gateway": "queue"}, "gateway"),
    ],
)
def test_bad_value_names_its_path(data: dict, path: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(data, source="config.yaml")
    message = str(info.value)
    assert message.startswith(f"config.yaml: {path}: ")
    assert "unknown key" not in message
    assert "\n" not in message


def test_bad_value_message_shows_the_offending_value() -> None:
    with pytest.raises(ConfigError, match=r"'sometimes'"):
        parse_config({"gateway": {"busy_mode": "sometimes"}})


def test_several_problems_are_all_reported() -> None:
    with pytest.raises(ConfigError) as info:
        parse_config({"http": {"port": -1}, "gateway": {"busy_mode": "x"}}, source="config.yaml")
    # Each on its own line for the CLI; the one-line form still says there are more.
    assert [p.split(":")[1].strip() for p in info.value.problems] == ["gateway.busy_mode", "http.port"]
    assert "(+1 more problem)" in str(info.value)


@pytest.mark.parametrize("data", [[1, 2], "queue", 42, True])
def test_top_level_must_be_a_mapping(data: object) -> None:
    with pytest.raises(ConfigError, match="top level must be a mapping"):
        parse_config(data)


@pytest.mark.parametrize("data", [None, {}])
def test_empty_config_gives_defaults(data: object) -> None:
    assert parse_config(data) == Config()


def test_defaults_are_valid() -> None:
    cfg = Config()
    # validate_default=True: constructing it ran every validator; round-tripping proves the dump is
    # itself acceptable input.
    assert parse_config(cfg.model_dump()) == cfg
    assert not cfg.model.configured


def test_database_url_accepts_known_drivers() -> None:
    for url in ("sqlite+aiosqlite:///tmp/x.db", "postgresql+asyncpg://u@h/db"):
        assert parse_config({"database": {"url": url}}).database.url == url


# ---------------------------------------------------------------------------------------------------
# Loading files


def _paths(tmp_path: Path) -> Paths:
    return Paths(home=tmp_path, config_file=tmp_path / "config.yaml")


def test_invalid_yaml_reports_the_line(tmp_path: Path) -> None:
    paths = _paths(tmp_path)
    paths.config_file.write_text("gateway:\n  busy_mode: queue\n  max_queue: [1, 2\nhttp:\n  port: 1\n")
    with pytest.raises(ConfigError) as info:
        load_config(paths)
    message = str(info.value)
    assert "not valid YAML" in message
    match = re.search(r"line (\d+)", message)
    assert match, message
    # The unclosed list starts on line 3; PyYAML reports where it noticed, which is at or after that.
    assert int(match.group(1)) >= 3


def test_yaml_errors_name_the_file_and_key(tmp_path: Path) -> None:
    paths = _paths(tmp_path)
    paths.config_file.write_text("gateway:\n  busy_mod: queue\n")
    with pytest.raises(ConfigError) as info:
        load_config(paths)
    assert str(info.value) == f"{paths.config_file}: gateway.busy_mod: unknown key"


def test_missing_default_config_file_means_defaults(tmp_path: Path) -> None:
    assert load_config(_paths(tmp_path)) == Config()


def test_missing_explicit_config_file_is_an_error(tmp_path: Path) -> None:
    paths = Paths(home=tmp_path, config_file=tmp_path / "elsewhere.yaml")
    with pytest.raises(ConfigError, match="file not found"):
        load_config(paths)


def test_dotenv_fills_the_environment_but_never_overrides_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, unset_env
) -> None:
    unset_env("HERALD_TEST_FROM_FILE", "HERALD_TEST_ALREADY_SET")
    monkeypatch.setenv("HERALD_TEST_ALREADY_SET", "from-real-env")
    paths = _paths(tmp_path)
    paths.env_file.write_text("HERALD_TEST_FROM_FILE=from-dotenv\nHERALD_TEST_ALREADY_SET=from-dotenv\n")

    load_config(paths)

    assert secret("HERALD_TEST_FROM_FILE") == "from-dotenv"
    assert secret("HERALD_TEST_ALREADY_SET") == "from-real-env"


def test_secret_treats_empty_and_missing_alike(monkeypatch: pytest.MonkeyPatch, unset_env) -> None:
    unset_env("HERALD_TEST_EMPTY")
    assert secret("HERALD_TEST_EMPTY") is None
    monkeypatch.setenv("HERALD_TEST_EMPTY", "")
    assert secret("HERALD_TEST_EMPTY") is None
    assert secret(None) is None


# ---------------------------------------------------------------------------------------------------
# Paths and profiles


def test_home_defaults_to_dot_herald(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("HERALD_HOME", raising=False)
    monkeypatch.delenv("HERALD_PROFILE", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    paths = resolve_paths()
    assert paths.home == tmp_path / ".herald"
    assert paths.config_file == tmp_path / ".herald" / "config.yaml"


def test_herald_home_and_profile(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HERALD_HOME", str(tmp_path))
    monkeypatch.delenv("HERALD_PROFILE", raising=False)

    base = resolve_paths()
    assert base.home == tmp_path
    assert base.config_file == tmp_path / "config.yaml"
    assert base.env_file == tmp_path / ".env"
    assert base.logs_dir == tmp_path / "logs"

    work = resolve_paths(profile="work")
    assert work.home == tmp_path / "profiles" / "work"
    assert work.config_file == work.home / "config.yaml"
    assert work.db_file == work.home / "state.db"
    assert work.env_file == work.home / ".env"


def test_profile_from_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HERALD_HOME", str(tmp_path))
    monkeypatch.setenv("HERALD_PROFILE", "bot-2")
    assert resolve_paths().home == tmp_path / "profiles" / "bot-2"
    # An explicit --profile beats the variable.
    assert resolve_paths(profile="other").home == tmp_path / "profiles" / "other"


def test_explicit_config_path_keeps_the_profile_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HERALD_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("HERALD_PROFILE", raising=False)
    paths = resolve_paths(config=tmp_path / "custom.yaml")
    assert paths.config_file == tmp_path / "custom.yaml"
    assert paths.home == tmp_path / "home"


@pytest.mark.parametrize("profile", ["../etc", "a/b", "two words", ".hidden"])
def test_profile_names_cannot_escape_home(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, profile: str
) -> None:
    monkeypatch.setenv("HERALD_HOME", str(tmp_path))
    with pytest.raises(ConfigError, match="profile"):
        resolve_paths(profile=profile)


# ---------------------------------------------------------------------------------------------------
# Secrets named by *_env keys


def test_secret_env_names_finds_primary_and_fallback_keys() -> None:
    cfg = parse_config(
        {
            "model": {
                "base_url": "https://api.openai.com/v1",
                "name": "gpt-4o-mini",
                "api_key_env": "OPENAI_API_KEY",
                "fallbacks": [
                    {"base_url": "https://openrouter.ai/api/v1", "name": "x", "api_key_env": "OR_KEY"},
                    {"base_url": "http://localhost:11434/v1", "name": "llama3.1:8b"},
                ],
            }
        }
    )
    assert sorted(secret_env_names(cfg)) == ["OPENAI_API_KEY", "OR_KEY"]


def test_secret_env_names_empty_by_default() -> None:
    assert secret_env_names(Config()) == []


# ---------------------------------------------------------------------------------------------------
# config.example.yaml documents every key


def _nested_models(annotation: object) -> list[type[BaseModel]]:
    """Model classes inside an annotation: ``X``, ``X | None``, ``list[X]``, ``dict[str, X]``..."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    found: list[type[BaseModel]] = []
    for arg in typing.get_args(annotation):
        found += _nested_models(arg)
    return found


def _all_keys(model: type[BaseModel], prefix: str = "", in_list: bool = False) -> list[tuple[str, bool]]:
    """(dotted path, whether it sits inside a list item) for every field, recursively."""
    keys: list[tuple[str, bool]] = []
    for name, field in model.model_fields.items():
        # A field read under another key (its alias) is written in config.yaml under that key.
        path = f"{prefix}{field.validation_alias if isinstance(field.validation_alias, str) else name}"
        keys.append((path, in_list))
        # Items of a list, and values of a dict keyed by the operator (model.prices.<model>), are not set
        # at a fixed place: the example shows them commented out.
        is_list = typing.get_origin(field.annotation) in (list, tuple, set, dict)
        for sub in _nested_models(field.annotation):
            keys += _all_keys(sub, f"{path}[]." if is_list else f"{path}.", in_list or is_list)
    return keys


def test_model_walk_sees_list_item_models() -> None:
    # Guards the walk below: if it stopped descending into list[FallbackModel], the example test
    # would pass while missing keys.
    paths = [p for p, _ in _all_keys(Config)]
    assert "model.fallbacks[].api_key_env" in paths
    assert "sessions.reset.daily_hour" in paths


def test_example_config_parses_to_the_defaults() -> None:
    # The example documents defaults, so loading it must change nothing; a drifted default fails here.
    assert parse_config(yaml.safe_load(EXAMPLE.read_text()), str(EXAMPLE)) == Config()


def test_example_config_mentions_every_key() -> None:
    text = EXAMPLE.read_text()
    missing = [
        path
        for path, _ in _all_keys(Config)
        if not re.search(rf"^[\s#-]*{re.escape(path.rsplit('.', 1)[-1])}:", text, re.MULTILINE)
    ]
    assert not missing, f"config.example.yaml does not mention: {missing}"


def test_example_config_sets_every_key_outside_lists() -> None:
    # Stronger than a text match: each key not inside a list item is really present (uncommented) at
    # its own place in the tree, so an operator can edit the value in place.
    data = yaml.safe_load(EXAMPLE.read_text())
    missing = []
    for path, in_list in _all_keys(Config):
        if in_list:
            continue
        node = data
        for part in path.replace("[]", "").split("."):
            if not isinstance(node, dict) or part not in node:
                missing.append(path)
                break
            node = node[part]
    assert not missing, f"config.example.yaml does not set: {missing}"
