"""The settings the command line reads once, at the edge: where the store lives, what this
host is called, where GPU memory is read from, whom to tell (`[notify]`) and where to serve
metrics (`[metrics]`). Every key is listed in docs/config.md.

One object, `Settings`, filled in this order, each overriding the one before: the defaults,
the settings file (TOML; `$ADVISOR_CONFIG`, else /etc/advisor/advisor.toml where it exists),
the `ADVISOR_*` environment (`ADVISOR_DB`, `ADVISOR_HOST`, `ADVISOR_GPU_TWIN`, `ADVISOR_KEY`,
`ADVISOR_SHIP_TO`; a section's key as `ADVISOR_<SECTION>__<KEY>`, lists as JSON, e.g.
`ADVISOR_NOTIFY__URLS='["json://…"]'`, `ADVISOR_CONSOLE__TOKEN`; an empty value counts as
unset), then the command-line flags given (`load_settings(db=...)`).
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from advisor.core.errors import InputError
from advisor.core.heartbeat import DEFAULT_INTERVAL_S, MAX_INTERVAL_S
from advisor.core.host import this_host

CONFIG_ENV: Final = "ADVISOR_CONFIG"
SYSTEM_CONFIG: Final = Path("/etc/advisor/advisor.toml")


def default_db_path(environ: dict[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    base = env.get("XDG_DATA_HOME") or str(Path(env.get("HOME", "~")) / ".local" / "share")
    return Path(base).expanduser() / "advisor" / "events.db"


def default_db_url(environ: dict[str, str] | None = None) -> str:
    return f"sqlite:///{default_db_path(environ)}"


def demo_db_path(environ: dict[str, str] | None = None) -> Path:
    """`advisor demo`'s own store, beside the default one (`demo.db`): the simulated host
    never enters a real store unless `--db` names one."""
    return default_db_path(environ).with_name("demo.db")


def config_path(environ: dict[str, str] | None = None) -> Path | None:
    """The settings file to read: `$ADVISOR_CONFIG` (InputError if it does not exist), else
    /etc/advisor/advisor.toml if it exists, else none."""
    env = os.environ if environ is None else environ
    named = env.get(CONFIG_ENV, "")
    if named:
        path = Path(named).expanduser()
        if not path.is_file():
            raise InputError(f"${CONFIG_ENV} {path}: no such file")
        return path
    return SYSTEM_CONFIG if SYSTEM_CONFIG.is_file() else None


NoticeKind = Literal["incident_opened", "plan_pending", "step_failed", "plan_done"]
NOTICE_KINDS: Final[tuple[NoticeKind, ...]] = (
    "incident_opened",
    "plan_pending",
    "step_failed",
    "plan_done",
)


class NotifySettings(BaseModel):
    """`[notify]`: whom `advisor watch` and the `notify` actions tell, and of what."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # Apprise URLs: slack://…, pagerduty://…, msteams://…, mailto://…, json://… (a webhook).
    urls: tuple[str, ...] = ()
    # Alertmanager base URLs (http://am:9093): alerts are posted to /api/v2/alerts.
    alertmanager: tuple[str, ...] = ()
    on: tuple[NoticeKind, ...] = NOTICE_KINDS  # the occasions told of
    timeout_s: float = Field(default=10.0, gt=0, le=300)  # per Alertmanager request
    # Where people reach `advisor serve` (https://advisor.example): each notice about an
    # incident links to its page there, BASE/incident/ID. None: no link.
    console_url: str | None = None


class MetricsSettings(BaseModel):
    """`[metrics]`: where `advisor watch` serves Prometheus metrics."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    listen: str | None = None  # HOST:PORT (127.0.0.1:9750); None: no metrics served


class ConsoleSettings(BaseModel):
    """The `[console]` section: what `advisor serve` listens on, and the token (or password)
    a person gives before the console changes anything (None: it changes nothing)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    listen: str = "127.0.0.1:8750"  # HOST:PORT; a loopback address unless the operator says
    token: str | None = None  # required for approve / reject / rollback / run


class Settings(BaseSettings):
    """What every command may need; see the module docstring for where each value comes from."""

    model_config = SettingsConfigDict(
        env_prefix="ADVISOR_",
        env_ignore_empty=True,
        env_nested_delimiter="__",
        extra="forbid",
        frozen=True,
    )

    db: str | None = None  # the store URL; None: a SQLite file (`db_url`)
    host: str = Field(default_factory=this_host)  # this host's name in events and the fleet
    gpu_twin: Path | None = None  # read GPU memory from this NVML twin file, not NVML
    policy: Path | None = None  # the auto-remediation policy (`auto`, `watch --auto`)
    key: Path | None = None  # the key that signs the store's heads; None: the store's own
    # `advisor watch` records an `agent.heartbeat` this often (advisor.core.heartbeat)
    heartbeat_s: float = Field(default=DEFAULT_INTERVAL_S, gt=0, le=MAX_INTERVAL_S)
    ship_to: str | None = None  # the central store `watch` ships to (`watch --ship-to`)
    # what a host ships (advisor.fleet.selection): `fleet`, what the fleet needs and a digest
    # of the routine rest; `all`, every event
    ship_lines: Literal["fleet", "all"] = "fleet"
    ship_gpu_every_s: float = Field(default=60.0, gt=0, le=MAX_INTERVAL_S)  # GPU samples shipped
    notify: NotifySettings = NotifySettings()
    metrics: MetricsSettings = MetricsSettings()
    console: ConsoleSettings = ConsoleSettings()  # `advisor serve`

    @property
    def db_url(self) -> str:
        return self.db or default_db_url()

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        path = config_path()
        sources: tuple[PydanticBaseSettingsSource, ...] = (init_settings, env_settings)
        if path is not None:
            sources += (TomlConfigSettingsSource(settings_cls, toml_file=path),)
        return sources


def _given(value: Any) -> Any:
    """A flag's value as given: None for a flag not given; a section's flags (a dict) without
    those not given, None when none was."""
    if isinstance(value, dict):
        value = {k: v for k, v in value.items() if v is not None}
        return value or None
    return value


def load_settings(**flags: Any) -> Settings:
    """The settings, the flags given (a None flag: not given) over everything else;
    InputError naming the cause when the settings file or a variable is unusable."""
    given = {name: _given(value) for name, value in flags.items() if _given(value) is not None}
    try:
        return Settings(**given)
    except tomllib.TOMLDecodeError as e:
        raise InputError(f"settings file {config_path()}: not TOML: {e}") from e
    except ValidationError as e:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '?'}: {err['msg']}" for err in e.errors()
        )
        raise InputError(f"settings: {problems}") from e
