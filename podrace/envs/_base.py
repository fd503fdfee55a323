import abc
from typing import Generic, TypeVar

import equinox as eqx
from jaxtyping import Array, Int, PRNGKeyArray, UInt8

from .._types import AbstractSpace, TimeStep


StateT = TypeVar("StateT")


class AbstractEnv(eqx.Module, Generic[StateT]):
    """A pure, unbatched environment.

    Hyperparameters that one may vary across a batch (physics constants, rewards) are
    array leaves of the module, so a batch of differently-parameterised environments is
    one `eqx.filter_vmap`; sizes that fix shapes are static fields.

    Episodes end on a step whose time step has `is_last` set. Stepping past that is
    undefined for a bare environment: wrap it in [`podrace.envs.AutoReset`][].

    An environment is defined by `reset`, `step`, `observation_space` and
    `action_space`: a subclass implements those four. One that also draws its states as
    RGB pictures, for videos of episodes ([`podrace.video.record_episode`][]), subclasses
    [`podrace.envs.AbstractRenderableEnv`][] instead.
    """

    @abc.abstractmethod
    def reset(self, key: PRNGKeyArray) -> tuple[StateT, TimeStep]:
        """Starts an episode.

        **Arguments:**

        - `key`: randomness of the initial state.

        **Returns:**

        The environment state and a first time step (`TimeStep.first`).
        """

    @abc.abstractmethod
    def step(self, state: StateT, action: Array, key: PRNGKeyArray) -> tuple[StateT, TimeStep]:
        """Advances the environment by one transition.

        **Arguments:**

        - `state`: the current state.
        - `action`: an element of `action_space`.
        - `key`: randomness of the transition.

        **Returns:**

        The next state and its time step.
        """

    @property
    @abc.abstractmethod
    def observation_space(self) -> AbstractSpace:
        """The space of observations."""

    @property
    @abc.abstractmethod
    def action_space(self) -> AbstractSpace:
        """The space of actions."""


class AbstractRenderableEnv(AbstractEnv[StateT], Generic[StateT]):
    """An environment that draws its states as RGB pictures, in JAX.

    A subclass implements `render` beside what defines every
    [`podrace.envs.AbstractEnv`][]. Callers draw through [`podrace.envs.render`][], which
    refuses an environment that does not draw. The wrappers of podrace are renderable
    environments that draw the state of the environment they wrap, so drawing through
    them raises where the wrapped environment does not draw.
    """

    @abc.abstractmethod
    def render(self, state: StateT) -> UInt8[Array, "height width 3"]:
        """Draws a state as an RGB picture, in JAX (so `jit`, `vmap` and `scan` take it).

        The picture's shape is fixed for an environment.

        **Arguments:**

        - `state`: the state to draw.

        **Returns:**

        The picture, `uint8` of shape `(height, width, 3)`.
        """


class AbstractTurnBasedEnv(AbstractEnv[StateT]):
    """An environment of players who take turns (a board game), where one learner acts for
    every player (self-play): each time step shows the player to move, and the reward after
    a step is that of the player who moved.

    A subclass implements `current_player` beside what defines every
    [`podrace.envs.AbstractEnv`][]. A search that steps the environment as its model
    ([`podrace.search.AlphaZeroAgent`][]) reads it to negate values where the player to
    move changes, as in two-player zero-sum games one player's return is minus the
    other's (mctx's discount of -1 between players). [`podrace.envs.PgxEnv`][] is one.

    Reference: Silver et al., "Mastering the game of Go without human knowledge",
    Nature 2017 (self-play, one network for both players).
    """

    @abc.abstractmethod
    def current_player(self, state: StateT) -> Int[Array, ""]:
        """The player to move in `state` (its id, e.g. 0 or 1).

        **Arguments:**

        - `state`: one (unbatched) state.

        **Returns:**

        The player's id, an `int32` scalar.
        """


def render(env: AbstractEnv[StateT], state: StateT) -> UInt8[Array, "height width 3"]:
    """Draws a state of `env` as an RGB picture, in JAX: `env.render(state)` for an
    [`podrace.envs.AbstractRenderableEnv`][].

    **Arguments:**

    - `env`: the environment.
    - `state`: one (unbatched) state of it.

    **Returns:**

    The picture, `uint8` of shape `(height, width, 3)`.

    **Raises:**

    `NotImplementedError`, naming the environment, if it does not draw (it is not an
    `AbstractRenderableEnv`, or it wraps one that is not).
    """
    if isinstance(env, AbstractRenderableEnv):
        return env.render(state)
    raise NotImplementedError(
        f"{type(env).__name__} does not draw its states: an environment that draws subclasses "
        "podrace.envs.AbstractRenderableEnv and implements render(self, state), returning a uint8 "
        "(height, width, 3) picture in JAX."
    )


class AbstractPoolEnv(AbstractEnv[StateT]):
    """A batch of environments simulated outside JAX and stepped as one: EnvPool's pools
    of C++ environments ([`podrace.envs.EnvPoolEnv`][]), called from inside a compiled
    program.

    Its `reset` and `step` are those of one environment of the batch, and run only under
    one `jax.vmap` over the batch, as [`podrace.Anakin`][] runs them: the vmapped call is
    one call of the pool, which keeps the environments' states itself (the JAX state
    holds what orders the calls, and little else). Hence such an environment:

    - starts the next episode itself, on the step after an episode's last one, ignoring
        that step's action and returning a first time step (`is_first` set), as
        [`podrace.envs.AutoReset`][] would; `AutoReset` leaves its steps as they are;
    - cannot be vmapped over again (a [`podrace.Population`][] of pipelines on one pool),
        nor have its batch split over devices: it is one pool on the host;
    - is stateful: stepping it twice from the same state gives two different steps, and
        evaluation episodes cannot share the pool that training steps;
    - is not in a checkpoint: the environments live in the pool, so a restored state
        cannot resume their episodes exactly ([`podrace.envs.EnvPoolEnv`][] restarts
        them on its first step, flagged first).

    Its randomness is the pool's own, seeded where the pool is built, not the keys that
    `reset` and `step` take.
    """
