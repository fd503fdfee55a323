"""Population-based training: members that lag copy the leaders and explore their hyperparameters.

Every `interval` updates each member of a [`podrace.Population`][] is ready: its
fitness is the mean return of the episodes it finished since it was last ready. A
selection rule picks, for each member, the member whose state it continues from
(exploit): the network, optimiser state, environment batch and normalisation
statistics are gathered by index inside the compiled program, with fresh PRNG keys for
the copies so that they do not replay their parent's randomness. The copies then move
their hyperparameters by a perturbation or a resampling (explore). Hyperparameters are
array leaves of the state, so the whole schedule runs in the one compiled program that
trains the members.

Reference: Jaderberg et al., "Population Based Training of Neural Networks", 2017.
"""

import abc
import math
from collections.abc import Iterable
from typing import Any, final

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float, Int, PRNGKeyArray, PyTree

from .._validation import check_positive_int
from ..agent import AbstractAgent
from ..compilation import compiled_once
from ..envs import AbstractEnv
from ..loggers import path_names, summarize
from ..networks import AbstractNetwork
from ..results import DEFAULT_METRICS, EvaluationResult, TrainMetrics, check_metrics
from .anakin import AnakinState
from .evaluation import Evaluation
from .pipeline import AbstractPipeline, AbstractTrainResult, check_member
from .population import Population


class AbstractExplore(eqx.Module):
    """How a copied member moves one hyperparameter away from its parent's value."""

    @abc.abstractmethod
    def __call__(self, value: Float[Array, " members *shape"], key: PRNGKeyArray) -> Float[Array, " members *shape"]:
        """New values for every member (only the copies keep them)."""


@final
class Perturb(AbstractExplore):
    """Multiplies the value by one of `factors`, chosen uniformly for each member, and clips it to `[low, high]`.

    Jaderberg et al. (2017) perturb by 0.8 or 1.2.

    **Arguments:**

    - `factors`: the factors to choose from.
    - `low`, `high`: the bounds of the perturbed value.
    """

    factors: tuple[float, ...] = (0.8, 1.2)
    low: float = -math.inf
    high: float = math.inf

    def __check_init__(self):
        if not self.factors:
            raise ValueError("Perturb: give at least one factor, e.g. factors=(0.8, 1.2).")
        if not self.low <= self.high:
            raise ValueError(f"Perturb: low ({self.low}) must not exceed high ({self.high}).")

    def __call__(self, value: Float[Array, " members *shape"], key: PRNGKeyArray) -> Float[Array, " members *shape"]:
        factors = jax.random.choice(key, jnp.asarray(self.factors, value.dtype), shape=value.shape)
        return jnp.clip(value * factors, self.low, self.high)


@final
class Resample(AbstractExplore):
    """Draws the value afresh, uniformly in `[low, high]` (log-uniformly with `log=True`).

    `sample` draws a population's starting values from the same distribution.

    **Arguments:**

    - `low`, `high`: the range.
    - `log`: whether to draw the logarithm uniformly (for learning rates, say).
    """

    low: float
    high: float
    log: bool = False

    def __check_init__(self):
        if not self.low < self.high:
            raise ValueError(f"Resample: low ({self.low}) must be below high ({self.high}).")
        if self.log and self.low <= 0:
            raise ValueError(f"Resample: a log-uniform range needs a positive low, got {self.low}.")

    def sample(self, key: PRNGKeyArray, shape: tuple[int, ...]) -> Float[Array, "*shape"]:
        """Values of `shape` drawn from the range."""
        if self.log:
            return jnp.exp(jax.random.uniform(key, shape, minval=math.log(self.low), maxval=math.log(self.high)))
        return jax.random.uniform(key, shape, minval=self.low, maxval=self.high)

    def __call__(self, value: Float[Array, " members *shape"], key: PRNGKeyArray) -> Float[Array, " members *shape"]:
        return self.sample(key, value.shape).astype(value.dtype)


class AbstractSelection(eqx.Module):
    """Which member each member continues from, given the members' fitness."""

    @abc.abstractmethod
    def parents(self, fitness: Float[Array, " members"], key: PRNGKeyArray) -> Int[Array, " members"]:
        """The index of the member each member copies (its own index to keep its state)."""


@final
class Truncation(AbstractSelection):
    """The `fraction` of members with the lowest fitness copy members drawn uniformly from the `fraction` with the
    highest; the others keep their state.

    **Arguments:**

    - `fraction`: the share of members replaced (and of members copied from), in `(0, 0.5]`.
        At least one member is replaced.
    """

    fraction: float = 0.25

    def __check_init__(self):
        if not 0 < self.fraction <= 0.5:
            raise ValueError(f"Truncation: fraction must be in (0, 0.5], got {self.fraction}.")

    def parents(self, fitness: Float[Array, " members"], key: PRNGKeyArray) -> Int[Array, " members"]:
        size = fitness.shape[0]
        count = max(1, int(self.fraction * size))
        order = jnp.argsort(fitness)  # lowest first
        leaders = order[size - count :]
        chosen = leaders[jax.random.randint(key, (count,), 0, count)]
        return jnp.arange(size).at[order[:count]].set(chosen)


@final
class Tournament(AbstractSelection):
    """Binary tournament: each member meets another drawn uniformly and copies it if its fitness is higher."""

    def parents(self, fitness: Float[Array, " members"], key: PRNGKeyArray) -> Int[Array, " members"]:
        size = fitness.shape[0]
        members = jnp.arange(size)
        # An opponent other than itself: an offset in 1..size-1.
        opponents = (members + jax.random.randint(key, (size,), 1, max(size, 2))) % size
        return jnp.where(fitness[opponents] > fitness, opponents, members)


@final
class PBTState(eqx.Module):
    """The population's state between calls, with the schedule's.

    **Arguments:**

    - `members`: the members' stacked [`podrace.AnakinState`][]s.
    - `hyperparameters`: the members' current hyperparameters (the population's pytree).
    - `fitness`: each member's fitness at the last ready step (`-inf` before the first).
    - `return_sum`, `episodes`: the summed returns and the count of the episodes each
        member finished since it was last ready.
    - `update`: the updates done.
    - `key`: the randomness of selection, exploration and the copies' fresh keys.
    """

    members: AnakinState
    hyperparameters: PyTree[Array]
    fitness: Float[Array, " members"]
    return_sum: Float[Array, " members"]
    episodes: Int[Array, " members"]
    update: Int[Array, ""]
    key: PRNGKeyArray


@final
class Lineage(eqx.Module):
    """The schedule of one call, per member and update (axes `[members, updates]`).

    **Arguments:**

    - `ready`: whether the members were ready after this update.
    - `parent`: the member whose state each member continued from after this update
        (its own index when it kept its state).
    - `fitness`: each member's fitness after this update (the parent's, for a copy).
    - `hyperparameters`: each member's hyperparameters after this update.
    - `update`: the number of updates done (since the run started) after this update.
    """

    ready: Bool[Array, " members *updates"]
    parent: Int[Array, " members *updates"]
    fitness: Float[Array, " members *updates"]
    hyperparameters: PyTree[Array]
    update: Int[Array, " members *updates"]

    @property
    def copied(self) -> Bool[Array | np.ndarray, " members *updates"]:
        """Whether each member took another's state after the update (NumPy for a lineage on the host)."""
        members = np.arange(self.parent.shape[0]).reshape((-1,) + (1,) * (self.parent.ndim - 1))
        return self.ready & (self.parent != members)

    def events(self) -> list[dict[str, Any]]:
        """The copies, on the host: one record per member that took another's state, as JSON values
        (`update`, `member`, `parent`, `parent_fitness` and the new `hyperparameters`, by path)."""
        lineage = jax.device_get(self)
        copied = lineage.copied
        leaves = _named_leaves(lineage.hyperparameters)
        events = [
            {
                "update": int(lineage.update[member, column]),
                "member": int(member),
                "parent": int(lineage.parent[member, column]),
                "parent_fitness": float(lineage.fitness[member, column]),
                "hyperparameters": {name: np.asarray(leaf[member, column]).tolist() for name, leaf in leaves},
            }
            for member, column in zip(*np.nonzero(copied), strict=True)
        ]
        return sorted(events, key=lambda event: (event["update"], event["member"]))


@final
class PBTResult(AbstractTrainResult[PBTState]):
    """What `PBT.train` returns.

    **Arguments:**

    - `state`: the state after the last update.
    - `metrics`: the members' metrics, axes `[members, updates]` as a population's.
    - `lineage`: the schedule of the call.
    """

    state: PBTState
    metrics: TrainMetrics
    lineage: Lineage

    def summary(self) -> dict[str, float]:
        """The population's summary, with each member's hyperparameters at the end of the call
        (`hyperparameters/<name>/member_i`) and how many times it took another's state (`copies/member_i`)."""
        summary = summarize(self.metrics)
        lineage = jax.device_get(self.lineage)
        for name, leaf in _named_leaves(lineage.hyperparameters):
            if np.issubdtype(leaf.dtype, np.floating) and leaf.ndim == 2:
                summary |= {f"hyperparameters/{name}/member_{i}": float(value) for i, value in enumerate(leaf[:, -1])}
        copies = np.sum(lineage.copied, axis=1)
        return summary | {f"copies/member_{i}": float(count) for i, count in enumerate(copies)}


def _named_leaves(tree: PyTree[Any]) -> list[tuple[str, Any]]:
    """The leaves of `tree` that are not PRNG keys, named by their paths (`lr`, `0`, `loss/entropy`)."""
    named = []
    for path, leaf in jax.tree_util.tree_leaves_with_path(tree):
        if jnp.issubdtype(leaf.dtype, jax.dtypes.prng_key):
            continue
        named.append(("/".join(path_names(path)) or "value", leaf))
    return named


def _is_explore(node: Any) -> bool:
    return node is None or isinstance(node, AbstractExplore)


@final
class PBT(AbstractPipeline[PBTState]):
    """Population-based training (Jaderberg et al., 2017) of a [`podrace.Population`][], in one compiled program.

    Every `interval` updates, each member's fitness is the mean return of the episodes
    it finished since it was last ready (a member that finished none keeps its previous
    fitness). `selection` picks the member each member continues from; a member that
    copies another takes its whole state (network, optimiser state, environments,
    normalisation statistics) with fresh PRNG keys, and its hyperparameters, which
    `explore` then moves. The population's `hyperparameters` are the starting values.

    **Arguments:**

    - `population`: the members, their starting hyperparameters and devices.
    - `explore`: for each leaf of the population's hyperparameters, how copies explore
        it: a [`podrace.executors.pbt.Perturb`][], a [`podrace.executors.pbt.Resample`][],
        or `None` to copy the parent's value (seeds, say). A pytree of the same structure
        as the hyperparameters (or a prefix of it).
    - `interval`: updates between ready steps.
    - `selection`: [`podrace.executors.pbt.Truncation`][] (the default) or
        [`podrace.executors.pbt.Tournament`][].

    ```python
    population = pr.Population(make_pipeline, {"learning_rate": learning_rates, "key": keys})
    pbt = pr.PBT(population, {"learning_rate": pr.executors.pbt.Perturb(), "key": None}, interval=10)
    state = pbt.init(jax.random.key(0))
    result = pbt.train(state, num_updates=200)
    result.lineage.events()  # who copied whom, when, with which learning rate
    ```
    """

    population: Population
    explore: PyTree[AbstractExplore | None]
    interval: int = eqx.field(static=True)
    selection: AbstractSelection = Truncation()

    def __check_init__(self):
        check_positive_int("PBT", "interval", self.interval)
        if self.population.size < 2:
            raise ValueError("PBT: a population of at least two members is needed.")
        hyperparameters = self.population.hyperparameters
        try:
            explorers = self._explorers(hyperparameters)
        except ValueError as error:
            raise ValueError(
                "PBT: explore must have the structure of the population's hyperparameters (or a prefix of it), "
                f"with a Perturb, a Resample or None for each; got {self.explore!r} for "
                f"{jax.tree.structure(hyperparameters)}."
            ) from error
        for explorer, leaf in zip(explorers, jax.tree.leaves(hyperparameters), strict=True):
            if isinstance(explorer, AbstractExplore) and not jnp.issubdtype(leaf.dtype, jnp.floating):
                raise TypeError(
                    f"PBT: only floating-point hyperparameters can be explored; a leaf of dtype {leaf.dtype} has "
                    f"{type(explorer).__name__}: give it None."
                )
        if all(explorer is None for explorer in explorers):
            raise ValueError("PBT: explore names no hyperparameter to explore (every leaf is None).")

    def _explorers(self, hyperparameters: PyTree[Array]) -> list[AbstractExplore | None]:
        """The exploration of each leaf of `hyperparameters`, in the order of `jax.tree.leaves`."""
        return jax.tree.leaves(
            jax.tree.broadcast(self.explore, hyperparameters, is_leaf=_is_explore), is_leaf=_is_explore
        )

    @property
    def frames_per_update(self) -> int:
        """Environment steps per update of one member."""
        return self.population.frames_per_update

    @property
    def num_members(self) -> int:
        """The population's size."""
        return self.population.size

    @property
    def num_devices(self) -> int:
        """The number of devices the members are split over."""
        return self.population.num_devices

    def population_at(self, state: PBTState) -> Population:
        """The population with the members' hyperparameters of `state` (to evaluate `state.members`, say)."""
        return eqx.tree_at(lambda population: population.hyperparameters, self.population, state.hyperparameters)

    @property
    def observation_spec(self) -> PyTree[jax.ShapeDtypeStruct]:
        """The shape and dtype of one observation of a member's environment, before any normalisation."""
        return self.population.observation_spec

    def evaluate(self, state: PBTState, evaluation: Evaluation) -> EvaluationResult:
        """Every member plays `evaluation`'s episodes with the hyperparameters it reached
        ([`podrace.Population.evaluate`][] of `population_at(state)`); axes `[members, num_episodes]`."""
        return self.population_at(state).evaluate(state.members, evaluation)

    def network_at(self, state: PBTState, member: int = 0) -> AbstractNetwork:
        """The network of member `member`, with the hyperparameters it reached in `state`."""
        check_member(self, member)
        return self.population_at(state).network_at(state.members, member)

    def agent_at(self, state: PBTState, member: int = 0) -> AbstractAgent:
        """The agent of member `member`, with the hyperparameters it reached in `state`."""
        check_member(self, member)
        return self.population_at(state).agent_at(state.members, member)

    def evaluation_env(self, state: PBTState, member: int = 0) -> AbstractEnv:
        """The evaluation environment of member `member`, with the hyperparameters it reached in `state`."""
        check_member(self, member)
        return self.population_at(state).evaluation_env(state.members, member)

    @compiled_once
    def init(self, key: PRNGKeyArray) -> PBTState:
        """The population's initial state (from `key` as [`podrace.Population.init`][] draws it) and the schedule's."""
        members_key, key = jax.random.split(key)
        size = self.population.size
        hyperparameters, fitness, return_sum, episodes = self.population.split_over_devices(
            (
                self.population.hyperparameters,
                jnp.full(size, -jnp.inf, jnp.float32),
                jnp.zeros(size, jnp.float32),
                jnp.zeros(size, jnp.int32),
            )
        )
        return PBTState(
            self.population.init(members_key),
            hyperparameters,
            fitness,
            return_sum,
            episodes,
            jnp.zeros((), jnp.int32),
            key,
        )

    @eqx.filter_jit
    def train(self, state: PBTState, *, num_updates: int, metrics: str | Iterable[str] = DEFAULT_METRICS) -> PBTResult:
        """Trains every member for `num_updates` updates, exploiting and exploring every `interval` updates.

        The ready steps fall on multiples of `interval` updates since the run started,
        whatever the calls' sizes, so a run split into calls equals one call.

        **Arguments:**

        - `state`: from `init` or a previous call.
        - `num_updates`: updates per member in this call (a compile-time constant).
        - `metrics`: what each update reports beyond its loss, as in [`podrace.Anakin.train`][]
            (the episodes are computed all the same: they are the members' fitness).

        **Returns:**

        A [`podrace.executors.pbt.PBTResult`][]: the state, the members' metrics and
        the call's [`podrace.executors.pbt.Lineage`][].
        """
        check_positive_int("PBT.train", "num_updates", num_updates)
        names = check_metrics("PBT.train", metrics)

        def update(state: PBTState, _: None) -> tuple[PBTState, tuple[TrainMetrics, Lineage]]:
            result = self.population_at(state).train(state.members, num_updates=1, metrics=names | {"episodes"})
            metrics = jax.tree.map(lambda x: x[:, 0], result.metrics)
            state = eqx.tree_at(
                lambda s: (s.members, s.return_sum, s.episodes, s.update),
                state,
                (
                    result.state,
                    state.return_sum + metrics.episode_return_sum,
                    state.episodes + metrics.episodes_completed,
                    state.update + 1,
                ),
            )
            ready = state.update % self.interval == 0
            state, parent = jax.lax.cond(
                ready, lambda state: self._exploit_and_explore(state), lambda state: self._keep(state), state
            )
            size = self.population.size
            lineage = Lineage(
                ready=jnp.full(size, ready),
                parent=parent,
                fitness=state.fitness,
                hyperparameters=state.hyperparameters,
                update=jnp.full(size, state.update),
            )
            return state, (metrics.select(names), lineage)

        state, (reported, lineage) = jax.lax.scan(update, state, length=num_updates)
        members_first = lambda x: jnp.moveaxis(x, 0, 1)  # noqa: E731
        return PBTResult(state, jax.tree.map(members_first, reported), jax.tree.map(members_first, lineage))

    def _keep(self, state: PBTState) -> tuple[PBTState, Int[Array, " members"]]:
        return state, jnp.arange(self.population.size)

    def _exploit_and_explore(self, state: PBTState) -> tuple[PBTState, Int[Array, " members"]]:
        # Selection sorts and gathers across members: with several devices, on a copy of
        # the population on every device, split again afterwards.
        population = self.population
        members, hyperparameters, fitness, return_sum, episodes = population.on_every_device(
            (state.members, state.hyperparameters, state.fitness, state.return_sum, state.episodes)
        )
        fitness = jnp.where(episodes > 0, return_sum / jnp.maximum(episodes, 1), fitness)
        key, select_key, explore_key, fresh_key = jax.random.split(state.key, 4)
        parent = self.selection.parents(fitness, select_key)
        copied = parent != jnp.arange(population.size)

        def take(leaf: Array, fresh: Array | None = None) -> Array:
            taken = leaf[parent]
            if fresh is None:
                return taken
            return jnp.where(copied.reshape((-1,) + (1,) * (leaf.ndim - 1)), fresh, taken)

        def copy_member(leaf: Array, key: PRNGKeyArray) -> Array:
            if jnp.issubdtype(leaf.dtype, jax.dtypes.prng_key):
                return take(leaf, jax.random.split(key, leaf.shape))
            return take(leaf)

        member_leaves, member_structure = jax.tree.flatten(members)
        fresh_keys = jax.random.split(fresh_key, len(member_leaves))
        members = member_structure.unflatten(
            [copy_member(leaf, k) for leaf, k in zip(member_leaves, fresh_keys, strict=True)]
        )

        hyper_leaves, hyper_structure = jax.tree.flatten(hyperparameters)
        explore_keys = jax.random.split(explore_key, len(hyper_leaves))
        explored = []
        for explorer, leaf, k in zip(self._explorers(hyperparameters), hyper_leaves, explore_keys, strict=True):
            inherited = take(leaf)
            explored.append(inherited if explorer is None else take(leaf, explorer(inherited, k)))
        members, hyperparameters, fitness, return_sum, episodes = population.split_over_devices(
            (
                members,
                hyper_structure.unflatten(explored),
                fitness[parent],
                jnp.zeros_like(return_sum),
                jnp.zeros_like(episodes),
            )
        )
        state = PBTState(members, hyperparameters, fitness, return_sum, episodes, state.update, key)
        return state, parent
