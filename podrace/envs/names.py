"""The environments the command line names: podrace's built-in ones by name, and the
other packages' as `PREFIX:ID` (`gymnax:CartPole-v1`, `brax:ant`, ...)."""

import dataclasses
from collections.abc import Callable
from typing import final

from .._validation import unknown_name
from ._base import AbstractEnv
from ._packages import import_package
from .cartpole import cartpole_v1
from .catch import Catch
from .deep_sea import DeepSea
from .from_brax import brax_env, brax_ids
from .from_craftax import CraftaxEnv, craftax_ids
from .from_envpool import EnvPoolEnv, envpool_ids
from .from_gymnax import GymnaxEnv, gymnax_ids
from .from_jumanji import JumanjiEnv, jumanji_ids
from .from_navix import NavixEnv, navix_ids
from .from_pgx import PgxEnv, pgx_ids
from .from_playground import playground_env, playground_exclusions, playground_ids
from .from_xminigrid import XMiniGridEnv, xminigrid_ids
from .pendulum import pendulum_v1
from .repeat_first import RepeatFirst


BUILT_IN_ENVS: dict[str, Callable[[], AbstractEnv]] = {
    "catch": Catch,
    "cartpole": cartpole_v1,
    "pendulum": pendulum_v1,
    "deep-sea": DeepSea,
    "repeat-first": RepeatFirst,
}
"""The built-in environments by name, each with its reference settings."""

GYMNASIUM_PREFIX = "gymnasium:"
ENVPOOL_PREFIX = "envpool:"


def _gymnasium_ids() -> list[str]:
    return list(import_package("gymnasium", extra="gymnasium", owner="gymnasium:ID").envs.registry)


@final
@dataclasses.dataclass(frozen=True)
class EnvSuite:
    """A package of environments that the command line names as `PREFIX:ID`.

    **Arguments:**

    - `ids`: the package's registered ids (imports it; an `ImportError` naming the pip
        command when it is missing).
    - `make`: the JAX environment of an id; `None` for host environments, which run
        through the host collector.
    - `about`: what the ids are, for the help text.
    - `exclusions`: the package's registered ids that podrace refuses, with the reason.
    """

    ids: Callable[[], list[str]]
    make: Callable[[str], AbstractEnv] | None
    about: str
    exclusions: Callable[[], dict[str, str]] = dict


ENV_SUITES: dict[str, EnvSuite] = {
    "gymnax": EnvSuite(gymnax_ids, GymnaxEnv.make, "any gymnax id"),
    "gymnasium": EnvSuite(_gymnasium_ids, None, "any Gymnasium id, acting on the host"),
    "brax": EnvSuite(brax_ids, brax_env, "a Brax environment, truncated at 1000 steps"),
    "playground": EnvSuite(
        playground_ids,
        playground_env,
        "a DM Control Suite environment of MuJoCo Playground, truncated at 1000 steps",
        playground_exclusions,
    ),
    "navix": EnvSuite(navix_ids, NavixEnv.make, "a Navix grid world"),
    "jumanji": EnvSuite(jumanji_ids, JumanjiEnv.make, "a Jumanji environment, its observations flattened"),
    "craftax": EnvSuite(craftax_ids, CraftaxEnv, "Craftax or Craftax-Classic"),
    "xminigrid": EnvSuite(xminigrid_ids, XMiniGridEnv.make, "an XLand-MiniGrid environment"),
    "pgx": EnvSuite(pgx_ids, PgxEnv.make, "a Pgx game, self-play with legal-action masks"),
    "envpool": EnvSuite(envpool_ids, EnvPoolEnv, "an EnvPool environment: one pool of num_envs, one device"),
}
"""The packages whose environments the command line takes, by prefix."""


def _suite_and_id(name: str) -> tuple[EnvSuite, str] | None:
    prefix, separator, env_id = name.partition(":")
    return (ENV_SUITES[prefix], env_id) if separator and prefix in ENV_SUITES else None


def check_env_name(name: str) -> None:
    """Raises `ValueError` with the nearest names unless the command line can build `name`."""
    if name in BUILT_IN_ENVS:
        return
    if (found := _suite_and_id(name)) is None:
        choices = [*BUILT_IN_ENVS, *(f"{prefix}:ID" for prefix in ENV_SUITES)]
        raise ValueError(unknown_name("environment", name, choices))
    suite, env_id = found
    if reason := suite.exclusions().get(env_id):
        raise ValueError(f"{name} is not available: {reason}.")
    if env_id not in (ids := suite.ids()):
        prefix = name.partition(":")[0]
        raise ValueError(unknown_name(f"{prefix} environment", env_id, ids))


def make_env(name: str) -> AbstractEnv:
    """A JAX environment by the command line's name (a built-in one or `PREFIX:ID`)."""
    check_env_name(name)
    if name in BUILT_IN_ENVS:
        return BUILT_IN_ENVS[name]()
    found = _suite_and_id(name)
    assert found is not None
    suite, env_id = found
    if suite.make is None:
        raise ValueError(f"{name} is a host environment: it runs through the host collector, not as a JAX one.")
    return suite.make(env_id)


def env_names_help() -> str:
    """What the ENV argument accepts."""
    suites = ", ".join(f"{prefix}:ID ({suite.about})" for prefix, suite in ENV_SUITES.items())
    return f"choose from {', '.join(BUILT_IN_ENVS)} or {suites}"
