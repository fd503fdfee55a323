"""Populations: many agents (seeds, hyperparameters, environment variants) trained as one program.

Every component is a pytree whose sweepable values are array leaves, so a population
is the pipeline of one member under `vmap`: one compiled program for all members,
whose hyperparameter values can change between calls without recompiling. With
several devices the members are split over them with `jax.shard_map`.

Reference: Hessel et al., "Podracer architectures for scalable Reinforcement
Learning", 2021 (Anakin populations); Lange, "gymnax: A JAX-based Reinforcement
Learning Environment Library", 2022 (population and meta-batch rollouts).
"""

from collections.abc import Callable, Iterable
from typing import Any, final

import equinox as eqx
import jax
from jax.sharding import Mesh, NamedSharding, PartitionSpec
from jaxtyping import Array, ArrayLike, PRNGKeyArray, PyTree

from .._validation import check_positive_int
from ..agent import AbstractAgent
from ..compilation import compiled_once
from ..envs import AbstractEnv
from ..networks import AbstractNetwork
from ..policies import AbstractPolicy
from ..results import DEFAULT_METRICS, EvaluationResult, check_metrics
from .anakin import Anakin, AnakinState, TrainResult, init_state, train_steps
from .evaluation import Evaluation, evaluate
from .pipeline import AbstractPipeline, check_member


@final
class Population(AbstractPipeline[AnakinState]):
    """Trains a population of Anakin pipelines side by side in one compiled call.

    `make_pipeline` builds the pipeline of one member from that member's slice of
    `hyperparameters`, a pytree of arrays with a leading population axis. Whatever it
    builds from them varies across members: seeds of the network initialisation (a
    key array), learning rates (`optax.adam(learning_rate)` inside `make_pipeline`),
    loss coefficients, epsilon, environment constants such as CartPole's pole
    length. The member pipelines must have the same shapes and static settings.

    The module is a pytree whose hyperparameters are array leaves: calling `train`
    with new values of the same shapes reuses the compiled program. Each member
    trains on one device, with `num_envs` environments; with several devices, the
    members are split evenly over them (the population size must be a multiple of the
    device count). A member's run equals the run of its pipeline alone, from the
    member's key of `init`.

    **Arguments:**

    - `make_pipeline`: builds one member's [`podrace.Anakin`][] from its
        hyperparameters (called inside `vmap`; its `mesh` is not used).
    - `hyperparameters`: arrays with a leading axis of the population size, in any
        pytree; `None` for a population of seeds alone (then give `size`).
    - `size`: the number of members; by default the leading axis of `hyperparameters`.
    - `mesh`: a one-axis device mesh to split the members over; by default all devices.

    ```python
    def make_pipeline(hyperparameters):
        learning_rate, lambda_, key = hyperparameters
        network = ...  # built from key
        loss = pr.losses.TDLambdaQLoss(discount=0.99, lambda_=lambda_)
        learner = pr.Learner(network, pr.policies.Greedy(), loss, optax.adam(learning_rate))
        return pr.Anakin(pr.envs.Catch(), learner, num_envs=32, rollout_length=16)

    population = pr.Population(make_pipeline, (learning_rates, lambdas, keys))
    result = population.train(population.init(jax.random.key(0)), num_updates=500)
    result.metrics.mean_episode_return  # one value per member
    ```
    """

    make_pipeline: Callable[[Any], Anakin] = eqx.field(static=True)
    hyperparameters: PyTree[Array]
    size: int = eqx.field(static=True)
    mesh: Mesh = eqx.field(static=True)

    def __init__(
        self,
        make_pipeline: Callable[[Any], Anakin],
        hyperparameters: PyTree[ArrayLike] = None,
        *,
        size: int | None = None,
        mesh: Mesh | None = None,
    ):
        shapes = [getattr(leaf, "shape", ()) for leaf in jax.tree.leaves(hyperparameters)]
        sizes = {shape[0] if shape else None for shape in shapes}
        if None in sizes or len(sizes) > 1:
            raise ValueError(
                "Population: every hyperparameter must be an array with the same leading (population) axis, one "
                f"value per member (e.g. jnp.asarray([1e-3, 1e-4])); got shapes {shapes}."
            )
        if sizes and size is not None and size != next(iter(sizes)):
            raise ValueError(f"Population: size={size} but the hyperparameters have {next(iter(sizes))} members.")
        size = next(iter(sizes)) if sizes else size
        if size is None:
            raise ValueError("Population: give the number of members (size=...) when there are no hyperparameters.")
        check_positive_int("Population", "size", size)
        if mesh is None:
            mesh = jax.make_mesh((jax.device_count(),), ("population",))
        if len(mesh.axis_names) != 1:
            raise ValueError(f"Population: the mesh must have one axis (the devices), got axes {mesh.axis_names}.")
        if size % mesh.size:
            raise ValueError(
                f"Population: {size} members cannot be split evenly over {mesh.size} devices; use a multiple of "
                f"{mesh.size} members or a mesh of fewer devices."
            )
        member = eqx.filter_eval_shape(make_pipeline, jax.tree.map(lambda x: x[0], hyperparameters))
        if not isinstance(member, Anakin):
            raise TypeError(f"Population: make_pipeline must return a podrace.Anakin, got {type(member).__name__}.")
        self.make_pipeline = make_pipeline
        self.hyperparameters = hyperparameters
        self.size = size
        self.mesh = mesh

    @property
    def frames_per_update(self) -> int:
        """Environment steps per update of one member (`num_envs * rollout_length`)."""
        member = eqx.filter_eval_shape(self.make_pipeline, jax.tree.map(lambda x: x[0], self.hyperparameters))
        return member.num_envs * member.rollout_length

    @property
    def num_members(self) -> int:
        """The population's size."""
        return self.size

    @property
    def num_devices(self) -> int:
        """The number of devices the members are split over."""
        return self.mesh.size

    def member(self, index: int) -> Anakin:
        """The pipeline of member `index` (to evaluate it, say, or train it alone)."""
        return self.make_pipeline(jax.tree.map(lambda x: x[index], self.hyperparameters))

    def network_at(self, state: AnakinState, member: int = 0) -> AbstractNetwork:
        """The network of member `member` with its parameters learnt in `state` (see
        `networks` for every member's, stacked)."""
        check_member(self, member)
        return self.member(member).network_at(_member_state(state, member))

    def agent_at(self, state: AnakinState, member: int = 0) -> AbstractAgent:
        """The agent of member `member` with its parameters learnt in `state`."""
        check_member(self, member)
        return self.member(member).agent_at(_member_state(state, member))

    def evaluation_env(self, state: AnakinState, member: int = 0) -> AbstractEnv:
        """The [`podrace.Anakin.evaluation_env`][] of member `member`, with its own
        normalisation statistics in `state` (if any)."""
        check_member(self, member)
        return self.member(member).evaluation_env(_member_state(state, member))

    @property
    def observation_spec(self) -> PyTree[jax.ShapeDtypeStruct]:
        """The shape and dtype of one observation of a member's environment, before any normalisation."""
        return self.member(0).observation_spec

    def networks(self, state: AnakinState) -> AbstractNetwork:
        """The members' networks with their trained parameters, stacked along a leading axis.

        **Arguments:**

        - `state`: the population's state (from `init` or `train`).

        **Returns:**

        One network whose parameter arrays have a leading population axis, as
        [`podrace.evaluate_population`][] takes it.
        """
        learner = self.member(0).learner
        return eqx.filter_vmap(learner.network_at)(state.learner)

    @compiled_once
    def init(self, key: PRNGKeyArray) -> AnakinState:
        """Initialises every member: member `i` from `jax.random.split(key, size)[i]`.

        **Arguments:**

        - `key`: the population's randomness.

        **Returns:**

        The members' states stacked along a leading axis, split over the mesh.
        """

        def init_members(hyperparameters, keys):
            def init_member(hyperparameters, key):
                pipeline = self.make_pipeline(hyperparameters)
                return init_state(
                    pipeline.env,
                    pipeline.learner,
                    key,
                    num_envs=pipeline.num_envs,
                    normalization=pipeline.normalization,
                )

            return jax.vmap(init_member)(hyperparameters, keys)

        keys = jax.random.split(key, self.size)
        return self._over_members(init_members, self.hyperparameters, keys)

    @eqx.filter_jit
    def train(
        self,
        state: AnakinState,
        *,
        num_updates: int,
        metrics: str | Iterable[str] = DEFAULT_METRICS,
        evaluation: Evaluation | None = None,
    ) -> TrainResult:
        """Trains every member for `num_updates` updates in one compiled call.

        **Arguments:**

        - `state`: from `init` or a previous call.
        - `num_updates`: updates per member in this call (a compile-time constant).
        - `metrics`: what each update reports beyond its loss, as in [`podrace.Anakin.train`][].
        - `evaluation`: episodes for every member's trained network to play at the end
            of the call, in the same program, as [`podrace.Anakin.train`][] plays them.
            All members play them with the same key (common random numbers, as in
            [`podrace.evaluate_population`][]).

        **Returns:**

        The members' results stacked along a leading axis: `metrics` has axes
        `[size, num_updates]` and `evaluation` (if any) `[size, num_episodes]`.
        """
        check_positive_int("Population.train", "num_updates", num_updates)
        names = check_metrics("Population.train", metrics)

        def train_members(hyperparameters, state):
            def train_member(hyperparameters, state):
                pipeline = self.make_pipeline(hyperparameters)
                state, metrics = train_steps(
                    pipeline.env,
                    pipeline.learner,
                    state,
                    rollout_length=pipeline.rollout_length,
                    num_updates=num_updates,
                    normalization=pipeline.normalization,
                    metrics=names,
                )
                return TrainResult(state, metrics)

            return jax.vmap(train_member)(hyperparameters, state)

        result = self._over_members(train_members, self.hyperparameters, state)
        if evaluation is None:
            return result
        return TrainResult(result.state, result.metrics, self._play(result.state, evaluation))

    @eqx.filter_jit
    def evaluate(self, state: AnakinState, evaluation: Evaluation) -> EvaluationResult:
        """Every member's network plays `evaluation`'s episodes in its own
        [`podrace.Anakin.evaluation_env`][] (with its own normalisation statistics, if
        any), in one compiled call, as `train` plays them at the end of a call.

        **Arguments:**

        - `state`: the members' states.
        - `evaluation`: the episodes, played with the same key by every member.

        **Returns:**

        The episodes, with axes `[size, num_episodes]`.
        """
        return self._play(state, evaluation)

    def _play(self, state: AnakinState, evaluation: Evaluation) -> EvaluationResult:
        def play_members(hyperparameters, state):
            def play(hyperparameters, state):
                return self.make_pipeline(hyperparameters).evaluate(state, evaluation)

            return jax.vmap(play)(hyperparameters, state)

        return self._over_members(play_members, self.hyperparameters, state)

    def _over_members(self, function: Callable, *stacked: PyTree[Array]):
        """`function` of stacked members, its members split over the mesh's devices.

        Each member runs on one device, with no communication, so JAX's check of the axes
        each value varies over has nothing to check, and is off: environments of other
        packages return constants from one branch of a `lax.cond` and varying values from
        the other, which it refuses (as does an evaluation's loop started from a key
        shared by all members).
        """
        if self.mesh.size == 1:
            return function(*stacked)
        split = PartitionSpec(*self.mesh.axis_names)
        return jax.shard_map(function, mesh=self.mesh, in_specs=split, out_specs=split, check_vma=False)(
            *self.split_over_devices(stacked)
        )

    def on_every_device(self, stacked: PyTree[Array]) -> PyTree[Array]:
        """Arrays with a leading population axis, whole on every device of the mesh (to sort members, say)."""
        if self.mesh.size == 1:
            return stacked
        return jax.device_put(stacked, NamedSharding(self.mesh, PartitionSpec()))

    def split_over_devices(self, stacked: PyTree[Array]) -> PyTree[Array]:
        """Arrays with a leading population axis, laid out as the members are: split over the mesh."""
        if self.mesh.size == 1:
            return stacked
        return jax.device_put(stacked, NamedSharding(self.mesh, PartitionSpec(*self.mesh.axis_names)))


def _member_state(state: AnakinState, member: int) -> AnakinState:
    """Member `member`'s slice of the members' stacked states."""
    return jax.tree.map(lambda x: x[member], state)


def evaluate_population(
    env: AbstractEnv,
    networks: AbstractNetwork,
    policy: AbstractPolicy,
    *,
    num_episodes: int,
    key: PRNGKeyArray,
    max_steps: int = 10_000,
) -> EvaluationResult:
    """Plays whole episodes with each network of a stacked population, in one compiled call.

    Every member plays `num_episodes` episodes with the same randomness (common random
    numbers), so that differences in return come from the parameters. This is the
    population rollout that evolution strategies need: stack candidate parameters
    (e.g. `evosax`'s `ask`) into a network with `eqx.combine`, evaluate, and return
    the mean returns as fitness.

    **Arguments:**

    - `env`: a bare (not auto-resetting) JAX environment.
    - `networks`: one network whose parameter arrays have a leading population axis
        (e.g. [`podrace.Population.networks`][]).
    - `policy`: the policy over the networks' outputs.
    - `num_episodes`: episodes per member.
    - `key`: the randomness of the episodes, shared by all members.
    - `max_steps`: the step budget per episode.

    **Returns:**

    An [`podrace.EvaluationResult`][] whose arrays have axes `[population, num_episodes]`.
    """
    return eqx.filter_vmap(
        lambda network: evaluate(env, network, policy, num_episodes=num_episodes, key=key, max_steps=max_steps)
    )(networks)
