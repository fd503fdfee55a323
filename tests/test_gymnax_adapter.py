"""The gymnax adapter: step by step against gymnax, every registered env, meta-batches of
env params, static params, the old single-`done` API, spaces and errors."""

import functools
import gzip
import importlib.util
import pathlib
import re
import sys
from typing import Any

import equinox as eqx
import gymnax
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import struct
from gymnax.environments import environment, spaces
from gymnax.environments.classic_control import cartpole
from gymnax.utils import load_mnist

import podrace as pr
from podrace.envs import from_gymnax
from podrace.envs.from_gymnax import GymnaxEnv

from . import helpers


@functools.cache
def _make(env_id: str) -> tuple[Any, Any]:
    """One gymnax env object per id: it is static and hashed by identity, so sharing it
    shares compiled code between tests."""
    return gymnax.make(env_id)


def _with_max_steps(env_id: str, max_steps: int) -> tuple[Any, Any]:
    gym_env, gym_params = _make(env_id)
    return gym_env, gym_params.replace(max_steps_in_episode=max_steps)


# --------------------------------------------------------------------------------------
# Step by step against gymnax's own functions, from the same states and keys.
# --------------------------------------------------------------------------------------


def _side_by_side(env, gym_env, gym_params, key, num_steps):
    """Runs `AutoReset(GymnaxEnv)` with random actions and, from each of its states and
    with the same keys, gymnax's `step_env` + `is_truncated`, `reset_env` and its public
    auto-resetting `step` (which hands `step_env` the first half of its key)."""
    reset_key, key = jax.random.split(key)
    state, first = env.reset(reset_key)
    # gymnax states start with Python numbers (the adapter makes them arrays).
    gym_reset = jax.tree.map(jnp.asarray, gym_env.reset_env(reset_key, gym_params))

    def step(state, key):
        action_key, key = jax.random.split(key)
        step_key, _ = jax.random.split(key)
        action = env.action_space.sample(action_key)
        next_state, timestep = env.step(state, action, step_key)
        env_state = state.env_state
        obs, gym_next, reward, terminated, _ = gym_env.step_env(step_key, env_state, action, gym_params)
        gym = dict(
            obs=obs,
            state=gym_next,
            reward=reward,
            terminated=terminated,
            truncated=gym_env.is_truncated(gym_next, gym_params),
            reset=gym_env.reset_env(step_key, gym_params),
            step=gym_env.step(key, env_state, action, gym_params),
        )
        return next_state, (state.is_last, timestep, next_state.env_state, gym)

    _, outs = jax.lax.scan(step, state, jax.random.split(key, num_steps))
    return (first, state.env_state, gym_reset), outs


SIDE_BY_SIDE = helpers.Compiled(_side_by_side)
NUM_STEPS = 60
TOLERANCES = dict(rtol=1e-5, atol=1e-5)

# (env id, max_steps_in_episode, the kinds of episode ends the run must show)
COMPARED = [
    ("CartPole-v1", 15, {"terminated", "truncated"}),
    ("Pendulum-v1", 7, {"truncated"}),
    ("Acrobot-v1", 7, {"truncated"}),
    ("MountainCar-v0", 7, {"truncated"}),
    ("MountainCarContinuous-v0", 7, {"truncated"}),
    ("Catch-bsuite", 6, {"truncated"}),
    ("Catch-bsuite", 1000, {"terminated"}),
    # DeepSea's episodes end on step `size` = 8: with the time limit on that same step the
    # termination wins (discount 0); with a shorter limit they are truncated.
    ("DeepSea-bsuite", 8, {"terminated"}),
    ("DeepSea-bsuite", 5, {"truncated"}),
    ("Breakout-MinAtar", 12, {"terminated", "truncated"}),
    ("FrozenLake-misc", 6, {"terminated", "truncated"}),
]
COMPARED_IDS = [f"{env_id}-max{max_steps}" for env_id, max_steps, _ in COMPARED]


@functools.cache
def _compared_run(env_id: str, max_steps: int, seed: int = 0):
    gym_env, gym_params = _with_max_steps(env_id, max_steps)
    env = pr.envs.AutoReset(GymnaxEnv(gym_env, gym_params))
    return SIDE_BY_SIDE(env, gym_env, gym_params, jax.random.key(seed), NUM_STEPS)


@pytest.mark.parametrize(("env_id", "max_steps", "ends"), COMPARED, ids=COMPARED_IDS)
def test_matches_gymnax_step_by_step(env_id, max_steps, ends):
    (first, first_state, gym_reset), (prev_last, timesteps, env_states, gym) = _compared_run(env_id, max_steps)
    helpers.assert_trees_close((first.observation, first_state), gym_reset, **TOLERANCES)
    assert bool(first.is_first)

    reset = np.asarray(prev_last)
    stepped = ~reset
    terminated, truncated = np.asarray(timesteps.terminated), np.asarray(timesteps.truncated)
    gym_terminated = np.asarray(gym["terminated"], bool)
    gym_truncated = np.asarray(gym["truncated"], bool)

    # Steps inside an episode: gymnax's step_env from the same state with the same key.
    on_step = functools.partial(helpers.take, where=stepped)
    helpers.assert_trees_close(on_step(timesteps.observation), on_step(gym["obs"]), **TOLERANCES)
    helpers.assert_trees_close(on_step(env_states), on_step(gym["state"]), **TOLERANCES)
    np.testing.assert_allclose(
        np.asarray(timesteps.reward)[stepped], np.asarray(gym["reward"], np.float32)[stepped], **TOLERANCES
    )
    np.testing.assert_array_equal(terminated[stepped], gym_terminated[stepped])
    np.testing.assert_array_equal(truncated[stepped], (gym_truncated & ~gym_terminated)[stepped])
    np.testing.assert_array_equal(np.asarray(timesteps.discount), np.where(terminated, 0.0, 1.0))
    shown = {name for name, flags in (("terminated", terminated), ("truncated", truncated)) if flags.any()}
    assert shown == ends

    # The step after an episode's last one is a reset with that step's key.
    is_last = terminated | truncated
    np.testing.assert_array_equal(reset, np.concatenate([[False], is_last[:-1]]))
    assert reset.any()
    on_reset = functools.partial(helpers.take, where=reset)
    helpers.assert_trees_close(
        (on_reset(timesteps.observation), on_reset(env_states)), on_reset(gym["reset"]), **TOLERANCES
    )
    assert np.all(np.asarray(timesteps.is_first) == reset)
    assert not np.any((terminated | truncated)[reset])
    assert np.all(np.asarray(timesteps.reward)[reset] == 0.0)


@pytest.mark.parametrize(("env_id", "max_steps", "ends"), COMPARED, ids=COMPARED_IDS)
def test_auto_reset_shows_gymnax_final_observation_then_a_first_step(env_id, max_steps, ends):
    del ends
    _, (prev_last, timesteps, _, gym) = _compared_run(env_id, max_steps)
    obs, _, reward, terminated, truncated, info = gym["step"]
    reset = np.asarray(prev_last)
    is_last = np.asarray(timesteps.is_last)
    assert is_last.any()
    # gymnax's step shows a reset observation on a last step and keeps the final one
    # in its info; podrace shows the final observation on the last step itself.
    on_last = functools.partial(helpers.take, where=is_last)
    helpers.assert_trees_close(on_last(timesteps.observation), on_last(info["final_observation"]), **TOLERANCES)
    running = ~reset & ~is_last
    helpers.assert_trees_close(helpers.take(timesteps.observation, running), helpers.take(obs, running), **TOLERANCES)
    stepped = ~reset
    np.testing.assert_allclose(
        np.asarray(timesteps.reward)[stepped], np.asarray(reward, np.float32)[stepped], **TOLERANCES
    )
    terminated, truncated = np.asarray(terminated, bool), np.asarray(truncated, bool)
    np.testing.assert_array_equal(np.asarray(timesteps.terminated)[stepped], terminated[stepped])
    np.testing.assert_array_equal(np.asarray(timesteps.truncated)[stepped], (truncated & ~terminated)[stepped])
    if "discount" in info:  # FrozenLake-misc's info has none
        np.testing.assert_array_equal(np.asarray(timesteps.discount)[stepped], np.asarray(info["discount"])[stepped])
    # Then a first time step: no reward, discount 1, not last.
    after_last = np.flatnonzero(is_last[:-1]) + 1
    assert np.all(np.asarray(timesteps.is_first)[after_last])
    assert np.all(np.asarray(timesteps.reward)[after_last] == 0.0)
    assert np.all(np.asarray(timesteps.discount)[after_last] == 1.0)
    assert not np.any(is_last[after_last])


def test_pendulum_takes_a_shape_1_action():
    env = GymnaxEnv.make("Pendulum-v1")
    assert env.action_space == pr.Box(-2.0, 2.0, (1,))
    gym_env, gym_params = _make("Pendulum-v1")
    state, _ = env.reset(jax.random.key(0))
    action = jnp.asarray([1.5], jnp.float32)
    next_state, timestep = env.step(state, action, jax.random.key(1))
    obs, gym_next, reward, _, _ = gym_env.step_env(jax.random.key(1), state, action, gym_params)
    assert timestep.observation.shape == (3,) and timestep.reward.shape == ()
    helpers.assert_trees_close((timestep.observation, next_state), (obs, gym_next), **TOLERANCES)
    np.testing.assert_allclose(timestep.reward, reward, **TOLERANCES)


# --------------------------------------------------------------------------------------
# Every registered environment.
# --------------------------------------------------------------------------------------


def _write_mnist(directory: pathlib.Path, num_images: int = 8) -> None:
    """MNIST files of random pixels, in the format of the files that gymnax's loader
    downloads to `directory` when they are missing. Every image has a pixel of 128,
    which gymnax reads as int8 -128: the lowest observation it can emit."""
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (num_images, 28, 28), dtype=np.uint8)
    images[:, 0, 0] = 128
    labels = rng.integers(0, 10, num_images, dtype=np.uint8)
    for prefix in ("train", "t10k"):
        header = np.asarray([2051, num_images, 28, 28], ">u4").tobytes()
        with gzip.open(directory / f"{prefix}-images-idx3-ubyte.gz", "wb") as file:
            file.write(header + images.tobytes())
        with gzip.open(directory / f"{prefix}-labels-idx1-ubyte.gz", "wb") as file:
            file.write(np.asarray([2049, num_images], ">u4").tobytes() + labels.tobytes())


@pytest.fixture
def offline_mnist(tmp_path, monkeypatch):
    """MNISTBandit-bsuite built on `_write_mnist`'s images, without a download."""
    _write_mnist(tmp_path)
    monkeypatch.setattr(load_mnist, "load_mnist", functools.partial(load_mnist.load_mnist, directory=str(tmp_path)))


# Episodes this long end a few times in CHECK_ENV_STEPS random steps, so that check_env's
# auto-reset rule is checked too (most default limits are in the hundreds).
CHECK_ENV_MAX_STEPS = 8
CHECK_ENV_STEPS = 24


# Checking these takes 10 to 40 s each on two cores: they run in the slow session.
SLOW_TO_CHECK = {
    "Asterix-MinAtar",
    "Breakout-MinAtar",
    "Freeway-MinAtar",
    "Seaquest-MinAtar",
    "SpaceInvaders-MinAtar",
    "Pong-misc",
}


@pytest.mark.usefixtures("offline_mnist")
@pytest.mark.parametrize(
    "env_id",
    [
        pytest.param(env_id, marks=pytest.mark.slow) if env_id in SLOW_TO_CHECK else env_id
        for env_id in gymnax.registered_envs
    ],
)
def test_every_registered_env_passes_check_env(env_id):
    gym_env, gym_params = _make(env_id)
    # Some params hold the limit as a float (BernoulliBandit-misc): keep its type.
    limit = type(gym_params.max_steps_in_episode)(CHECK_ENV_MAX_STEPS)
    gym_params = gym_params.replace(max_steps_in_episode=limit)
    env = GymnaxEnv(gym_env, gym_params)
    # Every params leaf is an array leaf of the adapter (none of these envs needs one as
    # a value), so it is a plain pytree of arrays for jax.jit and jax.vmap.
    leaves = jax.tree.leaves(env)
    assert all(isinstance(leaf, jax.Array) for leaf in leaves)
    assert len(leaves) == len(jax.tree.leaves(gym_params))

    report = pr.envs.check_env(env, num_steps=CHECK_ENV_STEPS)
    assert report.passed == pr.envs.checker.RULES, report.skipped

    # The observations lie in the space (check_env), which has gymnax's bounds, widened
    # only where gymnax declares them too narrow.
    space, gym_space = env.observation_space, gym_env.observation_space(gym_params)
    if isinstance(space, pr.Discrete):
        assert space.num_values == gym_space.n
        return
    assert isinstance(space, pr.Box)
    low, high = (
        np.broadcast_to(from_gymnax._bound(bound, space.dtype), space.shape)
        for bound in (gym_space.low, gym_space.high)
    )
    if from_gymnax._class_path(gym_env) in from_gymnax.OBSERVATION_BOUNDS_CORRECTIONS:
        assert np.all(space.low <= low) and np.all(space.high >= high)
        assert not (np.array_equal(space.low, low) and np.array_equal(space.high, high))
    else:
        np.testing.assert_array_equal(space.low, low)
        np.testing.assert_array_equal(space.high, high)


# --------------------------------------------------------------------------------------
# Dtypes and spaces that gymnax gets wrong.
# --------------------------------------------------------------------------------------


def _types(tree: Any) -> list[tuple[str, tuple[int, ...], bool]]:
    return [(str(leaf.dtype), leaf.shape, leaf.weak_type) for leaf in jax.tree.leaves(tree)]


STEP = helpers.Compiled(lambda env, state, action, key: env.step(state, action, key))


def test_mountain_car_state_is_strongly_typed_and_step_traces_once():
    # gymnax's reset_env builds MountainCar-v0's velocity from a Python 0.0: a weakly
    # typed float32, which a step makes strong, so a jitted step traced twice.
    gym_env, gym_params = _make("MountainCar-v0")
    _, gym_state = jax.tree.map(jnp.asarray, gym_env.reset_env(jax.random.key(0), gym_params))
    assert gym_state.velocity.weak_type
    env = GymnaxEnv(gym_env, gym_params)
    state, first = env.reset(jax.random.key(0))
    assert not any(weak for _, _, weak in _types((state, first)))
    assert state.velocity.dtype == jnp.float32 and state.time.dtype == jnp.int32
    next_state, timestep = STEP(env, state, jnp.int32(2), jax.random.key(1))
    assert _types((state, first)) == _types((next_state, timestep))
    helpers.check_traced_once(
        STEP, (env, state, jnp.int32(2), jax.random.key(1)), (env, next_state, jnp.int32(0), jax.random.key(2))
    )
    helpers.assert_trees_close(state, gym_state)  # gymnax's values


@struct.dataclass
class _DriftState(environment.EnvState):
    position: Any


class _Drift(environment.Environment):
    """A test environment whose state starts as Python numbers and whose position becomes
    a float after a step: the adapter holds it as float32 from the reset on."""

    @property
    def default_params(self) -> environment.EnvParams:
        return environment.EnvParams(max_steps_in_episode=5)

    def reset_env(self, key, params):
        state = _DriftState(time=0, position=0)
        return jnp.zeros(1), state

    def step_env(self, key, state, action, params):
        position = state.position + 0.5 * jax.random.normal(key)
        state = _DriftState(time=state.time + 1, position=position)
        return jnp.reshape(position, (1,)), state, position, jnp.asarray(False), {}

    def observation_space(self, params):
        return spaces.Box(-jnp.inf, jnp.inf, (1,), jnp.float32)

    def action_space(self, params):
        return spaces.Discrete(2)


class _Shapeshifter(_Drift):
    """Steps into a state without a position."""

    def step_env(self, key, state, action, params):
        return jnp.zeros(1), environment.EnvState(time=state.time + 1), 0.0, jnp.asarray(False), {}


def test_state_leaves_take_the_dtype_that_holds_them_after_reset_and_step():
    env = GymnaxEnv(_Drift())
    assert env.state_dtypes == (np.dtype(np.int32), np.dtype(np.float32))
    state, first = env.reset(jax.random.key(0))
    assert _types(state) == [("int32", (), False), ("float32", (), False)]
    next_state, timestep = STEP(env, state, jnp.int32(1), jax.random.key(1))
    assert _types((state, first)) == _types((next_state, timestep))
    assert float(next_state.position) != 0.0 and int(next_state.time) == 1
    pr.envs.check_env(env, num_steps=12)


def test_a_state_whose_structure_changes_raises_a_clear_error():
    with pytest.raises(ValueError, match="returns states of different tree structures from reset and step"):
        GymnaxEnv(_Shapeshifter())


@pytest.mark.usefixtures("offline_mnist")
@pytest.mark.parametrize(
    ("env_id", "low", "high"),
    [
        # The time entry ends at -1 / memory_length; the context bits are -1 or 1.
        ("MemoryChain-bsuite", [-1.0, -1.0, -1.0], [2.0, 2.0, 2.0]),
        # 1 - time / chain_length rounds to just below 0 under XLA.
        ("UmbrellaChain-bsuite", [0.0, 0.0, -np.finfo(np.float32).eps], [1.0, 1.0, 1.0]),
        # [last reward (Gaussian), one-hot last action, time in [-1, 1]].
        ("GaussianBandit-misc", [-np.finfo(np.float32).max, 0, 0, -1], [np.finfo(np.float32).max, 1, 1, 100]),
        # [receptive field, one-hot last action, last reward (0 or 10), time (raw)].
        ("MetaMaze-misc", [0.0] * 14 + [-1.0], [1.0] * 13 + [10.0, 200.0]),
        # Pixels read as int8 (-128..127), divided by 255.
        ("MNISTBandit-bsuite", np.full((28, 28), -128 / 255), np.ones((28, 28))),
    ],
)
def test_observation_bounds_that_gymnax_declares_too_narrow_are_widened(env_id, low, high):
    gym_env, gym_params = _make(env_id)
    space = GymnaxEnv(gym_env, gym_params).observation_space
    assert isinstance(space, pr.Box)
    np.testing.assert_array_equal(space.low, np.asarray(low, np.float32))
    np.testing.assert_array_equal(space.high, np.asarray(high, np.float32))
    assert from_gymnax._class_path(gym_env) in from_gymnax.OBSERVATION_BOUNDS_CORRECTIONS


def test_memory_chain_observations_lie_in_the_widened_space_and_not_in_gymnax_s():
    gym_env, gym_params = _make("MemoryChain-bsuite")
    env = GymnaxEnv(gym_env, gym_params)
    _, timesteps, _ = RUN(env, jax.random.key(0))
    observations = np.asarray(timesteps.observation)
    assert observations.min() == -1.0  # context bits of -1 on first steps, below gymnax's low of 0
    assert bool(jnp.all(jax.vmap(env.observation_space.contains)(observations)))
    gym_space = gym_env.observation_space(gym_params)
    assert not bool(jnp.all(jax.vmap(gym_space.contains)(observations)))


# --------------------------------------------------------------------------------------
# A meta-batch of env params: one vmap over adapters.
# --------------------------------------------------------------------------------------


def _cartpole(length) -> GymnaxEnv:
    gym_env, gym_params = _make("CartPole-v1")
    params = gym_params.replace(length=length, polemass_length=gym_params.masspole * length, max_steps_in_episode=30)
    return GymnaxEnv(gym_env, params)


def _run(env, key):
    return helpers.run_env(pr.envs.AutoReset(env), key, 40)


RUN = helpers.Compiled(_run)
RUN_META_BATCH = helpers.Compiled(eqx.filter_vmap(_run))


def test_meta_batch_of_pole_lengths_equals_separate_adapters():
    lengths = [0.25, 0.5, 1.0, 2.0]
    envs = eqx.filter_vmap(_cartpole)(jnp.asarray(lengths))
    assert envs.params.length.shape == (4,)
    keys = jax.random.split(jax.random.key(0), 4)
    batched = RUN_META_BATCH(envs, keys)
    looped = [RUN(_cartpole(length), keys[i]) for i, length in enumerate(lengths)]
    helpers.assert_trees_close(batched, helpers.stack(looped), **TOLERANCES)
    # The lengths matter: the same key gives different runs.
    same_key = RUN_META_BATCH(envs, jnp.stack([keys[0]] * 4))
    observations = np.asarray(same_key[1].observation)
    assert len({row.tobytes() for row in observations}) == 4
    # One trace for every batch of lengths, and one for every separately built adapter.
    other = eqx.filter_vmap(_cartpole)(jnp.asarray([0.3, 0.6, 0.9, 1.2]))
    helpers.check_traced_once(RUN_META_BATCH, (envs, keys), (other, keys))
    helpers.check_traced_once(RUN, *[(_cartpole(length), keys[0]) for length in lengths])


# --------------------------------------------------------------------------------------
# Params an environment needs as values stay static.
# --------------------------------------------------------------------------------------


@struct.dataclass
class _RingState(environment.EnvState):
    position: jax.Array


@struct.dataclass
class _RingParams(environment.EnvParams):
    max_steps_in_episode: int = 10
    num_cells: int = 5  # sets the observation's shape
    noisy: bool = False  # Python control flow
    layout: np.ndarray = struct.field(default_factory=lambda: np.asarray([1, 0]))  # read as a value
    reward_scale: float = 1.0  # an ordinary hyperparameter


class _Ring(environment.Environment):
    """A test environment whose params include structural ones: walk on a ring of
    `num_cells` cells, reward `reward_scale` on the last cell."""

    @property
    def default_params(self) -> _RingParams:
        return _RingParams()

    def _obs(self, position, params):
        return jnp.zeros(params.num_cells).at[position].set(1.0)

    def reset_env(self, key, params):
        position = jax.random.randint(key, (), 0, params.num_cells)
        state = _RingState(time=0, position=position)
        return self._obs(position, params), state

    def step_env(self, key, state, action, params):
        step = 1 if int(params.layout[0]) > 0 else -1
        position = (state.position + step * action) % params.num_cells
        reward = params.reward_scale * (position == params.num_cells - 1)
        if params.noisy:
            reward = reward + jax.random.normal(key)
        state = _RingState(time=state.time + 1, position=position)
        return self._obs(position, params), state, reward, jnp.asarray(False), {}

    def observation_space(self, params):
        return spaces.Box(0.0, 1.0, (params.num_cells,), jnp.float32)

    def action_space(self, params):
        return spaces.Discrete(2)


RING = _Ring()


def test_params_needed_as_values_stay_static():
    env = GymnaxEnv(RING)
    gym_params = env.env_params
    # num_cells (a shape), noisy (an `if`) and layout (`int()` of an element) stay values.
    assert type(gym_params.num_cells) is int and gym_params.num_cells == 5
    assert gym_params.noisy is False
    assert isinstance(gym_params.layout, np.ndarray) and gym_params.layout.tolist() == [1, 0]
    leaves = jax.tree.leaves(env)
    assert all(isinstance(leaf, jax.Array) for leaf in leaves)
    assert isinstance(env.params.reward_scale, jax.Array) and isinstance(env.params.max_steps_in_episode, jax.Array)
    assert len(leaves) == 2
    assert env.observation_space == pr.Box(0.0, 1.0, (5,))

    # It runs under jit, equals gymnax, and a batch of reward scales is one vmap.
    state, first = env.reset(jax.random.key(0))
    gym_reset = jax.tree.map(jnp.asarray, RING.reset_env(jax.random.key(0), RING.default_params))
    helpers.assert_trees_close((first.observation, state), gym_reset)
    _, timesteps, _ = RUN(env, jax.random.key(1))
    assert timesteps.observation.shape == (41, 5)
    assert np.asarray(timesteps.truncated).sum() >= 3

    scaled = eqx.filter_vmap(lambda scale: GymnaxEnv(RING, _RingParams(reward_scale=scale)))(jnp.asarray([1.0, 3.0]))
    keys = jnp.stack([jax.random.key(1)] * 2)
    _, batch_timesteps, _ = RUN_META_BATCH(scaled, keys)
    np.testing.assert_allclose(batch_timesteps.reward[1], 3.0 * batch_timesteps.reward[0])
    np.testing.assert_allclose(batch_timesteps.reward[0], timesteps.reward)

    # A static leaf is part of the structure: other values are another environment.
    wider = GymnaxEnv(RING, _RingParams(num_cells=7, noisy=True, layout=np.asarray([-1, 0])))
    assert jax.tree.structure(wider) != jax.tree.structure(env)
    assert wider.observation_space == pr.Box(0.0, 1.0, (7,))
    _, timesteps, _ = RUN(wider, jax.random.key(1))
    assert timesteps.observation.shape == (41, 7)


# --------------------------------------------------------------------------------------
# The old gymnax API: `step_env` returns one `done`, there is no `is_truncated`.
# --------------------------------------------------------------------------------------


@struct.dataclass
class _UntimedState:
    inner: Any


class _OldApi:
    """gymnax 0.0.x's API over a gymnax 1.x environment: `done` includes the time limit
    and there is no `is_truncated`. With `timed=False` the state has no `time`."""

    def __init__(self, env, *, timed: bool = True):
        self.env = env
        self.timed = timed

    @property
    def name(self) -> str:
        return f"old-{self.env.name}"

    @property
    def default_params(self):
        return self.env.default_params

    def observation_space(self, params):
        return self.env.observation_space(params)

    def action_space(self, params):
        return self.env.action_space(params)

    def reset_env(self, key, params):
        obs, state = self.env.reset_env(key, params)
        return obs, state if self.timed else _UntimedState(state)

    def step_env(self, key, state, action, params):
        inner = state if self.timed else state.inner
        obs, inner, reward, terminated, info = self.env.step_env(key, inner, action, params)
        done = terminated | (inner.time >= params.max_steps_in_episode)
        return obs, inner if self.timed else _UntimedState(inner), reward, done, info


OLD_CATCH = _OldApi(_make("Catch-bsuite")[0])
UNTIMED_CATCH = _OldApi(_make("Catch-bsuite")[0], timed=False)


@pytest.mark.parametrize(
    ("max_steps", "expected"),
    # Catch-bsuite's episodes terminate on step 9.
    [(5, "truncated"), (20, "terminated"), (9, "both")],
)
def test_old_api_done_is_split_into_terminated_and_truncated(max_steps, expected):
    gym_env, gym_params = _with_max_steps("Catch-bsuite", max_steps)
    new = GymnaxEnv(gym_env, gym_params)
    old = GymnaxEnv(OLD_CATCH, gym_params)
    untimed = GymnaxEnv(UNTIMED_CATCH, gym_params)
    key = jax.random.key(max_steps)
    _, new_steps, new_actions = RUN(new, key)
    _, old_steps, old_actions = RUN(old, key)
    _, untimed_steps, _ = RUN(untimed, key)
    helpers.assert_trees_close(
        (old_steps.observation, old_steps.reward, old_steps.is_first, old_actions),
        (new_steps.observation, new_steps.reward, new_steps.is_first, new_actions),
    )
    new_terminated, new_truncated = np.asarray(new_steps.terminated), np.asarray(new_steps.truncated)
    old_terminated, old_truncated = np.asarray(old_steps.terminated), np.asarray(old_steps.truncated)
    is_last = new_terminated | new_truncated
    assert is_last.sum() >= 3
    np.testing.assert_array_equal(old_terminated | old_truncated, is_last)
    if expected == "both":
        # A termination on the time limit's step: the 1.x API says terminated, the old
        # single `done` cannot tell and the adapter reports it as a truncation.
        assert np.all(new_terminated == is_last) and not new_truncated.any()
        assert np.all(old_truncated == is_last) and not old_terminated.any()
    else:
        np.testing.assert_array_equal(old_terminated, new_terminated)
        np.testing.assert_array_equal(old_truncated, new_truncated)
        assert (new_terminated if expected == "terminated" else new_truncated).any()
    np.testing.assert_array_equal(np.asarray(old_steps.discount), np.where(old_terminated, 0.0, 1.0))
    # Without a time counter every `done` is a termination.
    np.testing.assert_array_equal(np.asarray(untimed_steps.terminated), is_last)
    assert not np.asarray(untimed_steps.truncated).any()


# --------------------------------------------------------------------------------------
# Spaces, construction and errors.
# --------------------------------------------------------------------------------------


def test_spaces_are_converted():
    cartpole_env = GymnaxEnv.make("CartPole-v1")
    assert cartpole_env.action_space == pr.Discrete(2)
    space = cartpole_env.observation_space
    assert isinstance(space, pr.Box) and space.shape == (4,) and space.dtype == jnp.float32
    gym_space = _make("CartPole-v1")[0].observation_space(_make("CartPole-v1")[1])
    np.testing.assert_allclose(space.low, gym_space.low)
    np.testing.assert_allclose(space.high, gym_space.high)
    assert GymnaxEnv.make("FrozenLake-misc").observation_space == pr.Discrete(16)
    # Catch-bsuite declares int32 boards and returns float32 ones; FourRooms-misc the
    # reverse: the observation space has the dtype of the observations.
    catch = GymnaxEnv.make("Catch-bsuite").observation_space
    assert catch.dtype == jnp.float32 and catch.shape == (10, 5)  # pyright: ignore[reportAttributeAccessIssue]
    rooms = GymnaxEnv.make("FourRooms-misc").observation_space
    assert isinstance(rooms, pr.Box) and rooms.dtype == jnp.int32
    np.testing.assert_array_equal(rooms.low, 1)
    np.testing.assert_array_equal(rooms.high, 11)


def test_make_passes_its_keyword_arguments_to_gymnax():
    env = GymnaxEnv.make("DeepSea-bsuite", size=5)
    assert env.observation_space.shape == (5, 5)  # pyright: ignore[reportAttributeAccessIssue]
    assert env.env.size == 5


def test_params_default_to_the_env_default_params():
    gym_env, gym_params = _make("CartPole-v1")
    env = GymnaxEnv(gym_env)
    helpers.assert_trees_close(env.env_params, jax.tree.map(jnp.asarray, gym_params))
    assert len(jax.tree.leaves(env)) == len(jax.tree.leaves(gym_params))


class _DictObservationCartPole(cartpole.CartPole):
    def observation_space(self, params):
        return spaces.Dict({"position": spaces.Box(-1.0, 1.0, (2,)), "angle": spaces.Box(-1.0, 1.0, (2,))})


class _TupleActionCartPole(cartpole.CartPole):
    def action_space(self, params):
        return spaces.Tuple([spaces.Discrete(2), spaces.Discrete(2)])


class _MisdeclaredCartPole(cartpole.CartPole):
    def observation_space(self, params):
        return spaces.Box(-1.0, 1.0, (5,))


@pytest.mark.parametrize(
    ("env", "message"),
    [
        (_DictObservationCartPole(), "the observation space of the gymnax environment CartPole-v1 is Dict("),
        (_TupleActionCartPole(), "the action space of the gymnax environment CartPole-v1 is Tuple("),
        (_MisdeclaredCartPole(), "CartPole-v1 declares the observation space Box("),
    ],
    ids=["dict-observation", "tuple-action", "misdeclared-shape"],
)
def test_unsupported_spaces_raise_clear_errors(env, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        GymnaxEnv(env)


def test_missing_gymnax_raises_an_install_hint(monkeypatch):
    monkeypatch.setitem(sys.modules, "gymnax", None)
    with pytest.raises(ImportError, match=re.escape("pip install 'podrace[gymnax]'")):
        GymnaxEnv.make("CartPole-v1")
    # The module itself imports without gymnax (a fresh copy, outside sys.modules).
    spec = importlib.util.find_spec("podrace.envs.from_gymnax")
    assert spec is not None and spec.loader is not None
    fresh = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fresh)
    with pytest.raises(ImportError, match=re.escape("pip install 'podrace[gymnax]'")):
        fresh.GymnaxEnv.make("CartPole-v1")


@pytest.mark.parametrize(
    ("bound", "dtype", "expected"),
    [
        (np.float32(np.finfo(np.float32).max), np.int32, 2**31 - 128),  # the largest float32 below 2**31
        (np.float32(np.finfo(np.float32).min), np.int32, -(2**31)),
        (127.0, np.int8, 127),
        (-5.0, np.uint8, 0),
        (11.0, np.int32, 11),
    ],
)
def test_float_bounds_of_integer_observations_are_clipped_to_the_dtype(bound, dtype, expected):
    converted = from_gymnax._bound(bound, np.dtype(dtype))
    assert converted.dtype == dtype and int(converted) == expected
