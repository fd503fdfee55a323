"""Videos of episodes: the frames of one episode played by an agent, written to GIF or MP4.

[`podrace.video.record_episode`][] plays a JAX environment in one compiled program and
draws each state with [`podrace.envs.render`][] ([`podrace.video.record_agent_episode`][]
with any agent, a search agent searching);
[`podrace.video.record_gymnasium_episode`][] collects a Gymnasium environment's
`rgb_array` frames. [`podrace.video.write_video`][] writes frames with imageio.

Writing videos requires the `video` extra: `pip install "podrace[video]"`.
"""

import os
import pathlib
import types
import warnings
from typing import Any, final

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Int, PRNGKeyArray, Shaped, UInt8

from ._types import Box
from ._validation import check_agent_fits, check_positive_int, network_observation_spec
from .agent import AbstractAgent, Agent
from .envs import AbstractEnv, render
from .envs._packages import import_package
from .envs.from_envpool import quiet_envpool_spaces
from .envs.gymnasium import import_gymnasium, space_from_gymnasium
from .executors.actor import RlplayActor
from .executors.match import act
from .networks import AbstractNetwork
from .policies import AbstractPolicy


def record_episode(
    env: AbstractEnv,
    network: AbstractNetwork,
    policy: AbstractPolicy,
    *,
    key: PRNGKeyArray,
    max_steps: int = 1000,
) -> UInt8[Array, "frames height width 3"]:
    """Plays one episode of a JAX environment and draws each of its states.

    The episode runs in one compiled program: a `lax.scan` of `max_steps` steps that
    acts as [`podrace.evaluate`][] does and draws every state
    ([`podrace.envs.render`][]); the frames after the episode's last step are dropped.

    **Arguments:**

    - `env`: a bare (not auto-resetting) environment that draws, a
        [`podrace.envs.AbstractRenderableEnv`][] (another raises `NotImplementedError`).
    - `network`: the network, with the parameters to act with.
    - `policy`: the policy over the network's outputs.
    - `key`: the policy's and the environment's randomness.
    - `max_steps`: the step budget of the episode.

    **Returns:**

    The frames, one for the first state and one after each step: `uint8` of shape
    `(episode length + 1, height, width, 3)`.
    """
    check_positive_int("record_episode", "max_steps", max_steps)
    observation = jax.eval_shape(lambda: env.reset(jax.random.key(0))[1].observation)
    check_agent_fits(network, policy, env.action_space, observation, env_name=type(env).__name__)
    return record_agent_episode(env, Agent(network, policy), key=key, max_steps=max_steps)


def record_agent_episode(
    env: AbstractEnv, agent: AbstractAgent, *, key: PRNGKeyArray, max_steps: int = 1000
) -> UInt8[Array, "frames height width 3"]:
    """Plays one episode of a JAX environment with any agent, as it acts (as
    [`podrace.evaluate_agent`][] plays it: a search agent with its search, AlphaZero's in
    the environment's own state), and draws each of its states.

    **Arguments:**

    - `env`: a bare (not auto-resetting) environment that draws, a
        [`podrace.envs.AbstractRenderableEnv`][] (another raises `NotImplementedError`).
    - `agent`: the agent, such as a learner's `agent(state)`.
    - `key`: the agent's and the environment's randomness.
    - `max_steps`: the step budget of the episode.

    **Returns:**

    The frames, one for the first state and one after each step: `uint8` of shape
    `(episode length + 1, height, width, 3)`.
    """
    check_positive_int("record_agent_episode", "max_steps", max_steps)
    frames, num_frames = _record_episode(env, agent, key, max_steps)
    return frames[: int(num_frames)]


@eqx.filter_jit
def _record_episode(
    env: AbstractEnv, agent: AbstractAgent, key: PRNGKeyArray, max_steps: int
) -> tuple[UInt8[Array, "frames height width 3"], Int[Array, ""]]:
    reset_key, key = jax.random.split(key)
    state, timestep = env.reset(reset_key)

    def step(carry, key):
        state, timestep, agent_carry, ended = carry
        act_key, step_key = jax.random.split(key)
        policy_step, agent_carry = act(agent, env, state, timestep, agent_carry, act_key)
        state, timestep = env.step(state, policy_step.action, step_key)
        # A step after the episode's last one is not part of it.
        return (state, timestep, agent_carry, ended | timestep.is_last), (render(env, state), ~ended)

    init = (state, timestep, agent.initial_carry(), jnp.asarray(False))
    _, (frames, in_episode) = jax.lax.scan(step, init, jax.random.split(key, max_steps))
    frames = jnp.concatenate([render(env, state)[None], frames])
    return frames, 1 + jnp.sum(in_episode)


def record_gymnasium_episode(
    env: str | Any,
    network: AbstractNetwork,
    policy: AbstractPolicy,
    *,
    key: PRNGKeyArray,
    max_steps: int = 1000,
    seed: int | None = None,
) -> UInt8[np.ndarray, "frames height width 3"]:
    """Plays one episode of a Gymnasium environment and collects its `rgb_array` frames.

    The agent acts through a [`podrace.executors.actor.RlplayActor`][], one jitted call
    a step, so recurrent networks and networks that read the previous action and
    reward act as they do in training.

    **Arguments:**

    - `env`: a Gymnasium environment id (made with `render_mode="rgb_array"` and
        closed afterwards) or a `gymnasium.Env` made with `render_mode="rgb_array"`.
    - `network`: the network, with the parameters to act with.
    - `policy`: the policy over the network's outputs.
    - `key`: the policy's randomness.
    - `max_steps`: the step budget of the episode.
    - `seed`: seeds the environment's reset.

    **Returns:**

    The frames that `env.render()` returns after the reset and after each step:
    `uint8` of shape `(episode length + 1, height, width, 3)`.

    **Raises:**

    `ValueError` for an environment whose `render_mode` is not `"rgb_array"`.
    """
    check_positive_int("record_gymnasium_episode", "max_steps", max_steps)
    if isinstance(env, str):
        with import_gymnasium().make(env, render_mode="rgb_array") as made:
            return record_gymnasium_episode(made, network, policy, key=key, max_steps=max_steps, seed=seed)
    env_name = f"the Gymnasium env {env.spec.id if env.spec else type(env).__name__}"
    if env.render_mode != "rgb_array":
        raise ValueError(
            f"record_gymnasium_episode needs {env_name} made with render_mode='rgb_array', got "
            f"{env.render_mode!r}: gymnasium.make(env_id, render_mode='rgb_array')."
        )
    action_space = space_from_gymnasium(env.action_space)
    observation_space = space_from_gymnasium(env.observation_space)
    if not isinstance(observation_space, Box):
        raise ValueError(f"podrace takes Box observations from Gymnasium, got {env.observation_space}.")
    observation = jax.ShapeDtypeStruct(observation_space.shape, observation_space.dtype)
    check_agent_fits(
        network, policy, action_space, network_observation_spec(network, action_space, observation), env_name=env_name
    )
    actor = RlplayActor(Agent(network, policy), key)
    carry = actor.initial_hx(1)
    observation, _ = env.reset(seed=seed)
    # The previous action and reward (ignored on an episode's first step) and whether it is the first.
    action, reward, first = np.asarray(action_space.zeros())[None], np.zeros(1, np.float32), np.ones(1, bool)
    frames = [env.render()]
    for _ in range(max_steps):
        action, carry, _ = actor.step(observation[None], action, reward, first, carry)
        action = np.asarray(action)
        observation, step_reward, terminated, truncated, _ = env.step(action[0])
        frames.append(env.render())
        if terminated or truncated:
            break
        reward, first = np.full(1, step_reward, np.float32), np.zeros(1, bool)
    return np.stack(frames)


def record_envpool_episode(
    task_id: str,
    network: AbstractNetwork,
    policy: AbstractPolicy,
    *,
    key: PRNGKeyArray,
    max_steps: int = 27_000,
    seed: int = 0,
    **options: Any,
) -> UInt8[np.ndarray, "frames height width 3"]:
    """Plays one episode of an EnvPool environment and collects the frames EnvPool draws.

    The episode is played in a pool of one environment of its own, through EnvPool's
    Gymnasium interface, as [`podrace.video.record_gymnasium_episode`][] plays a
    Gymnasium environment (one jitted call a step).

    **Arguments:**

    - `task_id`: an EnvPool id, e.g. `"Pong-v5"` or `"CartPole-v1"`.
    - `network`: the network, with the parameters to act with.
    - `policy`: the policy over the network's outputs.
    - `key`: the policy's randomness.
    - `max_steps`: the step budget of the episode.
    - `seed`: the pool's seed.
    - `options`: passed on to EnvPool, under its names (`episodic_life`, ...).

    **Returns:**

    The frames after the reset and after each step: `uint8` of shape `(episode length
    + 1, height, width, 3)` (Atari's full 210x160 screen, not the agent's 84x84 view).
    """
    envpool = import_package("envpool", extra="envpool", owner="record_envpool_episode")
    with quiet_envpool_spaces():
        pool = envpool.make_gymnasium(task_id, num_envs=1, seed=seed, render_mode="rgb_array", **options)
        try:
            return record_gymnasium_episode(_OneOfPool(pool, task_id), network, policy, key=key, max_steps=max_steps)
        finally:
            pool.close()


@final
class _OneOfPool:
    """The one environment of an EnvPool pool of one, as a Gymnasium environment (the
    pool's batch axis dropped); EnvPool seeds it where the pool is made."""

    def __init__(self, pool: Any, task_id: str):
        self.pool = pool
        self.spec = types.SimpleNamespace(id=f"EnvPool's {task_id}")  # named so in messages
        self.render_mode = "rgb_array"
        self.action_space = pool.action_space
        self.observation_space = pool.observation_space

    def reset(self, seed: int | None = None) -> tuple[np.ndarray, dict[str, Any]]:
        del seed
        observation, info = self.pool.reset()
        return observation[0], info

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        observation, reward, terminated, truncated, info = self.pool.step(np.asarray([action]))
        return observation[0], float(reward[0]), bool(terminated[0]), bool(truncated[0]), info

    def render(self) -> np.ndarray:
        return self.pool.render()[0]


def write_video(
    frames: Shaped[ArrayLike, "frames height width 3"], path: str | os.PathLike, *, fps: int | float = 30
) -> None:
    """Writes frames to a GIF or an MP4 file, by the path's suffix.

    **Arguments:**

    - `frames`: `uint8` RGB frames, e.g. from [`podrace.video.record_episode`][].
    - `path`: where to write; `.gif` (with Pillow) or `.mp4` (H.264, with imageio-ffmpeg).
    - `fps`: frames per second.

    **Raises:**

    `ImportError` if imageio (or, for MP4, imageio-ffmpeg) is not installed, and
    `ValueError` for another suffix or for frames of another dtype or shape.
    """
    path = pathlib.Path(path)
    suffix = path.suffix.lower()
    if suffix not in (".gif", ".mp4"):
        raise ValueError(f"write_video writes .gif or .mp4 files, got {str(path)!r}.")
    frames = np.asarray(frames)
    if frames.dtype != np.uint8 or frames.ndim != 4 or frames.shape[-1] != 3:
        raise ValueError(f"write_video takes uint8 frames of shape (T, H, W, 3), got {frames.dtype} {frames.shape}.")
    iio = _import_imageio(suffix)
    if suffix == ".gif":
        iio.imwrite(path, frames, duration=1000 / fps, loop=0)  # duration: milliseconds per frame
    else:
        with warnings.catch_warnings():
            # imageio-ffmpeg forks and execs ffmpeg: JAX's warning that a fork may deadlock
            # its threads does not apply, as exec leaves none of them behind.
            warnings.filterwarnings("ignore", r"os\.fork\(\) was called", RuntimeWarning)
            # H.264 (yuv420p) needs even sizes; frames of an odd size are resized by a pixel.
            iio.imwrite(path, frames, plugin="FFMPEG", fps=fps, macro_block_size=2)


def _import_imageio(suffix: str) -> Any:
    """imageio's v3 API, imported on first use so that podrace imports without it."""
    try:
        import imageio.v3 as iio

        if suffix == ".mp4":
            import imageio_ffmpeg  # noqa: F401
    except ImportError as error:
        raise ImportError(
            f'Writing {suffix} videos needs imageio and imageio-ffmpeg: pip install "podrace[video]"'
        ) from error
    return iio
