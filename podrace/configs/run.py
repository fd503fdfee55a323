"""A run of `podrace train`: an environment by name, a configuration, its seeds and population-based training."""

import dataclasses
from collections.abc import Mapping
from typing import Any, final

import equinox as eqx
import jax
import jax.numpy as jnp

from .._validation import unknown_name
from ..envs.names import ENVPOOL_PREFIX, GYMNASIUM_PREFIX, make_env
from ..executors.anakin import Anakin
from ..executors.pbt import PBT, Perturb, Resample
from ..executors.population import Population
from .base import AbstractConfig
from .on_policy import OnPolicyConfig
from .registry import ALGORITHMS, from_json, to_json


EXECUTORS = ("anakin", "host", "sebulba")
"""What can run a learner from the command line (`--executor`)."""


def steps_on_host(env: str, executor: str | None) -> bool:
    """Whether a run of environment `env` by `executor` (`None`: the environment's own)
    steps its environments on the host: the host and Sebulba executors, the default for
    `gymnasium:ID`."""
    return (executor or ("host" if env.startswith(GYMNASIUM_PREFIX) else "anakin")) != "anakin"


@final
@dataclasses.dataclass(frozen=True)
class Run:
    """What `podrace train ENV ALGO` trains, as a checkpoint stores it (JSON, see `to_json`).

    **Arguments:**

    - `env`: an environment name (see `podrace.envs.names.make_env`).
    - `config`: the algorithm's configuration.
    - `seed`: the seed of the networks and the run; with `seeds`, the first one.
    - `seeds`: seeds trained side by side as one population.
    - `pbt`: population-based training of the learning rate (Jaderberg et al., 2017).
    - `pbt_interval`: updates between PBT's ready steps.
    - `pbt_learning_rates`: the log-uniform range the members' learning rates start in
        (by default a tenth to ten times the configuration's).
    - `executor`: what runs the learner, one of `EXECUTORS`: `anakin` (a JAX
        environment or an `envpool:ID` pool stepped inside the compiled program), `host`
        (a host vector environment of `gymnasium:ID` or `envpool:ID`, acting and learning
        in turn, [`podrace.executors.host.HostPipeline`][]) or `sebulba` (actor threads
        stepping such environments, the learner on devices of its own,
        [`podrace.Sebulba`][]); `None` for the environment's own: `host` for
        `gymnasium:ID`, `anakin` for the others.
    - `actor_threads`: Sebulba's actor threads, each stepping `num_envs / actor_threads`
        environments.
    - `actor_devices`: the local devices Sebulba's threads act on (the first ones); the
        learner updates on the others (on the one device, where there is one).
    """

    env: str
    config: AbstractConfig
    seed: int = 0
    seeds: int = 1
    pbt: bool = False
    pbt_interval: int = 10
    pbt_learning_rates: tuple[float, float] | None = None
    executor: str | None = None
    actor_threads: int = 2
    actor_devices: int = 1

    def __post_init__(self) -> None:
        if self.executor is not None and self.executor not in EXECUTORS:
            raise ValueError(unknown_name("executor", self.executor, EXECUTORS))
        host_env = self.env.startswith((GYMNASIUM_PREFIX, ENVPOOL_PREFIX))
        if self.executor in ("host", "sebulba") and not host_env:
            raise ValueError(
                f"--executor {self.executor} steps host environments: name one as gymnasium:ID or envpool:ID "
                f"(got {self.env}), or leave --executor out for Anakin."
            )
        if self.executor == "anakin" and self.env.startswith(GYMNASIUM_PREFIX):
            raise ValueError(
                f"{self.env} steps on the host, outside a compiled program: use --executor host or sebulba."
            )
        if self.runs_on_host and (self.seeds != 1 or self.pbt):
            raise ValueError(
                f"--seeds and --pbt train a population of on-device pipelines; {self.env} on the "
                f"{self.executor or 'host'} executor runs one seed."
            )

    @property
    def runs_on_host(self) -> bool:
        """Whether the environments step on the host (the host and Sebulba executors)."""
        return steps_on_host(self.env, self.executor)

    def to_json(self) -> dict[str, Any]:
        """The run as JSON values."""
        fields = {field.name: getattr(self, field.name) for field in dataclasses.fields(self)}
        return fields | {"config": to_json(self.config)}

    @classmethod
    def from_json(cls, values: Mapping[str, Any]) -> "Run":
        """The run saved by `to_json`, or by an earlier podrace's `"settings"` record."""
        names = {field.name for field in dataclasses.fields(cls)} - {"config"}
        run = {name: values[name] for name in names if name in values}
        if run.get("pbt_learning_rates") is not None:  # a list in JSON
            run["pbt_learning_rates"] = tuple(run["pbt_learning_rates"])
        config = from_json(values["config"]) if "config" in values else _config_of_earlier_settings(values)
        return cls(config=config, **run)

    def member_keys(self) -> jax.Array:
        """The keys of the seeds `seed, ..., seed + seeds - 1` (one member each)."""
        return jax.vmap(jax.random.key)(self.seed + jnp.arange(self.seeds))

    def pipeline(self, network_key: jax.Array) -> Anakin:
        """One seed's Anakin pipeline, its network drawn from `network_key`."""
        with jax.ensure_compile_time_eval():
            env = make_env(self.env)
        return self.config.pipeline(env, network_key)

    def make(self) -> tuple[Anakin | Population | PBT, jax.Array]:
        """The pipeline (a population for several seeds, PBT with `pbt`) and the key its state starts from.

        Seed `s` draws its network from `split(key(s))[0]`; a single run starts from
        `split(key(s))[1]`, a population from `key(seed)`.
        """
        if self.pbt:
            return self._pbt_population(), jax.random.key(self.seed)
        if self.seeds == 1:
            network_key, run_key = jax.random.split(jax.random.key(self.seed))
            return self.pipeline(network_key), run_key
        population = Population(lambda key: self.pipeline(jax.random.split(key)[0]), self.member_keys())
        return population, jax.random.key(self.seed)

    def learning_rates(self) -> Resample:
        """The log-uniform range the members' learning rates start in under PBT."""
        rate = float(self.config.learning_rate)
        low, high = self.pbt_learning_rates or (rate / 10, rate * 10)
        return Resample(low, high, log=True)

    def _pbt_population(self) -> PBT:
        """`seeds` members trained with population-based training of the learning rate.

        Seed `s` draws its network as without PBT, from `split(key(s))[0]`, and its
        starting learning rate from `learning_rates` with `split(key(s))[1]`; every
        `pbt_interval` updates, the quarter of the members with the lowest return copy the
        top quarter and perturb their learning rate by 0.8 or 1.2.
        """
        if self.seeds < 4:
            raise ValueError(f"--pbt selects among the members: give --seeds 4 or more (got {self.seeds}).")
        keys = self.member_keys()
        draws = jax.vmap(lambda key: self.learning_rates().sample(jax.random.split(key)[1], ()))(keys)

        def make_member(hyperparameters: dict[str, jax.Array]) -> Anakin:
            member = eqx.tree_at(lambda c: c.learning_rate, self.config, hyperparameters["learning_rate"])
            return dataclasses.replace(self, config=member).pipeline(jax.random.split(hyperparameters["key"])[0])

        population = Population(make_member, {"key": keys, "learning_rate": draws})
        return PBT(population, {"key": None, "learning_rate": Perturb()}, interval=self.pbt_interval)


def _config_of_earlier_settings(settings: Mapping[str, Any]) -> AbstractConfig:
    """The configuration of a checkpoint written before configurations, from the settings
    its algorithm's family has of the flat record. That record held every algorithm's
    epochs and minibatches, 4 and 4 unless given, which only PPO read: the family's
    default (4 and 4 for PPO, one pass for the others) stands for them."""
    family = ALGORITHMS[settings["algo"]]
    names = {field.name for field in dataclasses.fields(family)} - {"algorithm"}
    read = {name: value for name, value in settings.items() if name in names}
    if family is OnPolicyConfig and (read.get("num_epochs"), read.get("num_minibatches")) == (4, 4):
        del read["num_epochs"], read["num_minibatches"]
    return from_json({"family": family.__name__, "settings": read | {"algorithm": settings["algo"]}})
