import abc
from typing import Generic, TypeVar

import equinox as eqx
from jaxtyping import Array, PRNGKeyArray, UInt8

from .._types import AbstractSpace, TimeStep


StateT = TypeVar("StateT")


class AbstractEnv(eqx.Module, Generic[StateT]):
    """A pure, unbatched environment.

    Hyperparameters that one may vary across a batch (physics constants, rewards) are
    array leaves of the module, so a batch of differently-parameterised environments is
    one `eqx.filter_vmap`; sizes that fix shapes are static fields.

    Episodes end on a step whose time step has `is_last` set. Stepping past that is
    undefined for a bare environment: wrap it in [`podrace.envs.AutoReset`][].

    An environment may also draw its states as RGB pictures (`render`), for videos of
    episodes ([`podrace.video.record_episode`][]); wrappers draw the state of the
    environment they wrap.
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

    @abc.abstractmethod
    def render(self, state: StateT) -> UInt8[Array, "height width 3"]:
        """Draws a state as an RGB picture, in JAX (so `jit`, `vmap` and `scan` take it).

        The picture's shape is fixed for an environment. An environment that does not
        draw raises `NotImplementedError` (`raise cannot_render(self)`).

        **Arguments:**

        - `state`: the state to draw.

        **Returns:**

        The picture, `uint8` of shape `(height, width, 3)`.
        """


def cannot_render(env: AbstractEnv) -> NotImplementedError:
    """The error an environment that does not draw raises from `render`:
    `def render(self, state): raise cannot_render(self)`."""
    return NotImplementedError(
        f"{type(env).__name__} does not implement `render`: implement `render(self, state)` to draw its "
        "states as uint8 (height, width, 3) pictures."
    )
