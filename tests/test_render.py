"""Pictures of environment states (`podrace.envs.render`) and videos of episodes (`podrace.video`)."""

import sys
from typing import final

import gymnasium
import imageio.v3 as iio
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jaxtyping import Array

import podrace as pr
from podrace import video

from . import helpers


def _render(env, state):
    return pr.envs.render(env, state)


RENDER = helpers.Compiled(_render)


def _pixels(frame, colour) -> np.ndarray:
    """Where `frame` has the RGB `colour`, as a boolean `(height, width)` mask."""
    return np.all(np.asarray(frame) == np.asarray(colour, np.uint8), axis=-1)


def _centre(mask: np.ndarray) -> tuple[float, float]:
    """The mean row and column of a mask's pixels."""
    assert mask.any(), "no pixel of that colour"
    rows, columns = np.nonzero(mask)
    return float(rows.mean()), float(columns.mean())


# --------------------------------------------------------------------------------------
# Contract over the registered environments: fixed-shape uint8 pictures, or a clear error.
# --------------------------------------------------------------------------------------


NUM_STEPS = 6
# Environments that do not draw, and the start of the error that says so (a wrapper's
# names the environment it wraps).
NOT_RENDERED = {
    "point": "Point does not draw its states",
    "gymnax-cartpole": "GymnaxEnv does not draw its states",
    "gymnax-catch": "GymnaxEnv does not draw its states",
    "auto-reset-observation-reward-probe": "ObservationRewardProbe does not draw its states",
    "auto-reset-observation-action-reward-probe": "ObservationActionRewardProbe does not draw its states",
    "auto-reset-picks": "Picks does not draw its states",
}
RENDERED = [name for name in helpers.ENVS if name not in NOT_RENDERED]


def _render_run(env, key):
    """The pictures of a reset state and of the states after `NUM_STEPS` random actions."""
    reset_key, key = jax.random.split(key)
    state, _ = env.reset(reset_key)

    def step(state, key):
        action_key, step_key = jax.random.split(key)
        state, _ = env.step(state, env.action_space.sample(action_key), step_key)
        return state, pr.envs.render(env, state)

    _, frames = jax.lax.scan(step, state, jax.random.split(key, NUM_STEPS))
    return jnp.concatenate([pr.envs.render(env, state)[None], frames])


RENDER_RUN = helpers.Compiled(_render_run)
RENDER_RUN_BATCH = helpers.Compiled(helpers.vmap_over_last(_render_run, 1))


@pytest.mark.parametrize("name", RENDERED)
def test_render_gives_fixed_shape_uint8_pictures_under_scan_and_vmap(name):
    env = helpers.ENVS[name]()
    keys = jax.random.split(jax.random.key(0), 2)
    frames = helpers.check_vmap_equals_loop(RENDER_RUN, RENDER_RUN_BATCH, (env,), (keys,))
    assert frames.dtype == np.uint8
    assert frames.shape[:2] == (2, NUM_STEPS + 1) and frames.ndim == 5 and frames.shape[-1] == 3


@pytest.mark.parametrize("name", NOT_RENDERED)
def test_render_of_an_environment_without_pictures_says_so(name):
    env = helpers.ENVS[name]()
    state, _ = env.reset(jax.random.key(0))
    with pytest.raises(NotImplementedError, match=NOT_RENDERED[name]):
        pr.envs.render(env, state)


def test_an_environment_that_does_not_opt_in_is_refused_with_the_way_to_draw():
    # Point, as a user writes one, has only reset, step and its spaces.
    env = helpers.Point()
    assert not isinstance(env, pr.envs.AbstractRenderableEnv)
    state, _ = env.reset(jax.random.key(0))
    with pytest.raises(NotImplementedError, match=r"subclasses podrace\.envs\.AbstractRenderableEnv"):
        pr.envs.render(env, state)
    # A wrapper draws what it wraps, so drawing through it names the environment inside.
    wrapped = pr.envs.AutoReset(pr.envs.TimeLimit(env, max_episode_steps=3))
    with pytest.raises(NotImplementedError, match=r"^Point does not draw its states"):
        pr.envs.render(wrapped, wrapped.reset(jax.random.key(0))[0])


@final
class Lamp(pr.envs.AbstractRenderableEnv[Array]):
    """A user's environment that draws: the action switches a lamp off (0) or on (1)."""

    @property
    def observation_space(self) -> pr.Box:
        return pr.Box(0.0, 1.0, (1,))

    @property
    def action_space(self) -> pr.Discrete:
        return pr.Discrete(2)

    def reset(self, key):
        del key
        state = jnp.zeros((), jnp.int32)
        return state, pr.TimeStep.first(state.astype(jnp.float32)[None])

    def step(self, state, action, key):
        del state, key
        state = jnp.asarray(action, jnp.int32)
        return state, pr.TimeStep.transition(state.astype(jnp.float32)[None], state, False)

    def render(self, state):
        return jnp.full((2, 3, 3), 255 * state, jnp.uint8)


def test_an_environment_that_opts_in_draws_bare_and_wrapped():
    env = Lamp()
    state, _ = env.reset(jax.random.key(0))
    on, _ = env.step(state, jnp.asarray(1, jnp.int32), jax.random.key(1))
    np.testing.assert_array_equal(RENDER(env, state), np.zeros((2, 3, 3), np.uint8))
    np.testing.assert_array_equal(RENDER(env, on), np.full((2, 3, 3), 255, np.uint8))
    wrapped = pr.envs.AutoReset(pr.envs.PreviousActionReward(env))
    wrapped_on, _ = wrapped.step(wrapped.reset(jax.random.key(0))[0], jnp.asarray(1, jnp.int32), jax.random.key(1))
    np.testing.assert_array_equal(RENDER(wrapped, wrapped_on), RENDER(env, on))


# --------------------------------------------------------------------------------------
# The built-in environments' pictures.
# --------------------------------------------------------------------------------------


def _catch_state(ball_row, ball_column, paddle_column):
    return pr.envs.CatchState(*(jnp.asarray(x, jnp.int32) for x in (ball_row, ball_column, paddle_column)))


def _cartpole_state(x, theta):
    return pr.envs.CartPoleState(*(jnp.asarray(v, jnp.float32) for v in (x, 0.0, theta, 0.0)))


def _pendulum_state(theta):
    return pr.envs.PendulumState(jnp.asarray(theta, jnp.float32), jnp.zeros((), jnp.float32))


def _deep_sea_state(row, column):
    return pr.envs.DeepSeaState(jnp.asarray(row, jnp.int32), jnp.asarray(column, jnp.int32))


# Each built-in environment, the shape of its pictures and two states drawn differently.
BUILT_IN = {
    "catch": (pr.envs.Catch(), (160, 80, 3), _catch_state(0, 1, 2), _catch_state(3, 1, 2)),
    "cartpole": (pr.envs.CartPole(), (160, 240, 3), _cartpole_state(0.0, 0.0), _cartpole_state(0.0, 0.2)),
    "pendulum": (pr.envs.Pendulum(), (160, 160, 3), _pendulum_state(0.0), _pendulum_state(1.0)),
    "deep-sea": (pr.envs.DeepSea(size=4), (64, 64, 3), _deep_sea_state(0, 0), _deep_sea_state(1, 1)),
}


@pytest.mark.parametrize("name", BUILT_IN)
def test_built_in_pictures_have_a_fixed_shape_and_follow_the_state(name):
    env, shape, state, other_state = BUILT_IN[name]
    frame = helpers.check_jit_equals_eager(RENDER, env, state)
    other_frame = RENDER(env, other_state)
    assert frame.dtype == other_frame.dtype == np.uint8
    assert frame.shape == other_frame.shape == shape
    assert not np.array_equal(frame, other_frame)


BALL, PADDLE, CAUGHT = (230, 80, 60), (240, 240, 240), (80, 200, 120)


def test_catch_draws_the_ball_and_the_paddle_in_their_cells():
    env = pr.envs.Catch(rows=5, columns=3, pixels_per_cell=4)
    frame = RENDER(env, _catch_state(1, 2, 0))
    assert frame.shape == (20, 12, 3)
    ball, paddle = np.zeros((20, 12), bool), np.zeros((20, 12), bool)
    ball[4:8, 8:12] = True
    paddle[16:20, 0:4] = True
    np.testing.assert_array_equal(_pixels(frame, BALL), ball)
    np.testing.assert_array_equal(_pixels(frame, PADDLE), paddle)
    caught = RENDER(env, _catch_state(4, 1, 1))
    assert _pixels(caught, CAUGHT)[16:20, 4:8].all() and _pixels(caught, CAUGHT).sum() == 16
    assert not (_pixels(caught, BALL) | _pixels(caught, PADDLE)).any()


POLE = (202, 152, 101)


def test_cartpole_draws_the_pole_at_its_angle_on_the_cart():
    env = pr.envs.CartPole()
    middle = 240 / 2
    _, column = _centre(_pixels(RENDER(env, _cartpole_state(0.0, 0.0)), POLE))
    assert abs(column - middle) < 1
    # A positive angle leans the pole right (as in Gymnasium), a negative one left.
    assert _centre(_pixels(RENDER(env, _cartpole_state(0.0, 0.2)), POLE))[1] > middle + 3
    assert _centre(_pixels(RENDER(env, _cartpole_state(0.0, -0.2)), POLE))[1] < middle - 3
    # The cart carries the pole along the track: 1 m is 240 / 5.8 pixels.
    _, column = _centre(_pixels(RENDER(env, _cartpole_state(1.0, 0.0)), POLE))
    assert abs(column - middle - 240 / 5.8) < 1


ROD = (204, 77, 77)


def test_pendulum_draws_the_rod_up_at_zero_and_turning_anticlockwise():
    env = pr.envs.Pendulum()
    row, column = _centre(_pixels(RENDER(env, _pendulum_state(0.0)), ROD))
    assert row < 80 - 10 and abs(column - 80) < 1
    row, column = _centre(_pixels(RENDER(env, _pendulum_state(np.pi / 2)), ROD))
    assert abs(row - 80) < 1 and column < 80 - 10


AGENT = (250, 200, 40)


def test_deep_sea_draws_the_agent_in_its_cell():
    env = pr.envs.DeepSea(size=4, pixels_per_cell=8)
    agent = _pixels(RENDER(env, _deep_sea_state(2, 1)), AGENT)
    expected = np.zeros((32, 32), bool)
    expected[17:23, 9:15] = True  # the cell without its one-pixel border
    np.testing.assert_array_equal(agent, expected)
    assert not _pixels(RENDER(env, _deep_sea_state(4, 1)), AGENT).any()  # after the last step


def test_wrappers_draw_the_wrapped_state():
    catch = pr.envs.Catch(rows=5, columns=3)
    env = pr.envs.AutoReset(pr.envs.TimeLimit(pr.envs.PreviousActionReward(catch), max_episode_steps=3))
    state, _ = env.reset(jax.random.key(0))
    state, _ = env.step(state, jnp.asarray(0, jnp.int32), jax.random.key(1))
    np.testing.assert_array_equal(RENDER(env, state), RENDER(catch, state.env_state.env_state))


# --------------------------------------------------------------------------------------
# Videos.
# --------------------------------------------------------------------------------------


CATCH = pr.envs.Catch(rows=helpers.CATCH_ROWS, columns=helpers.CATCH_COLUMNS, pixels_per_cell=4)
CATCH_NETWORK = helpers.q_network(jax.random.key(0))


@pytest.mark.parametrize("max_steps", [10, 2])
def test_record_episode_draws_each_state_of_the_episode(max_steps):
    frames = video.record_episode(
        CATCH, CATCH_NETWORK, pr.policies.Greedy(), key=jax.random.key(1), max_steps=max_steps
    )
    # An episode of Catch is `rows - 1` steps; a smaller budget cuts it.
    num_frames = min(max_steps, helpers.CATCH_ROWS - 1) + 1
    assert frames.dtype == np.uint8 and frames.shape == (
        num_frames,
        4 * helpers.CATCH_ROWS,
        4 * helpers.CATCH_COLUMNS,
        3,
    )
    for t, frame in enumerate(np.asarray(frames)):
        ball_rows, _ = np.nonzero(_pixels(frame, BALL) | _pixels(frame, CAUGHT))
        np.testing.assert_array_equal(ball_rows // 4, t)  # the ball falls a row a step


def test_record_episode_checks_that_the_agent_fits():
    network = helpers.q_network(jax.random.key(0), num_actions=2)
    with pytest.raises(ValueError, match="num_actions=3"):
        video.record_episode(CATCH, network, pr.policies.Greedy(), key=jax.random.key(0))


def test_record_episode_of_an_environment_that_does_not_draw_says_so():
    env = pr.envs.RepeatFirst(num_symbols=2, delay=1)
    network = helpers.q_network(jax.random.key(0), env.observation_space.shape, env.action_space.num_values)
    with pytest.raises(NotImplementedError, match="RepeatFirst does not draw its states"):
        video.record_episode(env, network, pr.policies.Greedy(), key=jax.random.key(0))


def test_record_agent_episode_draws_a_search_agent_searching():
    """AlphaZero's search in Catch's own states, with a network that knows nothing (a
    uniform prior, the value 0), catches the ball from every start: its last frame draws
    the catch. The prior alone (its mode, the same action at every step) misses some."""
    pytest.importorskip("mctx")
    network = helpers.uninformed_network(CATCH.action_space, CATCH.observation_space.shape)
    searcher = pr.search.AlphaZeroAgent(network, pr.search.GumbelMuZeroSearch(32, gumbel_scale=0.0))
    prior = pr.Agent(network, pr.configs.AlphaZeroConfig(algorithm="alphazero").evaluation_policy())
    searched, unsearched = [], []
    for seed in range(4):
        frames = video.record_agent_episode(CATCH, searcher, key=jax.random.key(seed))
        assert frames.shape[0] == helpers.CATCH_ROWS
        searched.append(_pixels(np.asarray(frames[-1]), CAUGHT).any())
        frames = video.record_agent_episode(CATCH, prior, key=jax.random.key(seed))
        unsearched.append(_pixels(np.asarray(frames[-1]), CAUGHT).any())
    assert all(searched) and not all(unsearched), (searched, unsearched)
    # A network and a policy: as record_episode draws them.
    np.testing.assert_array_equal(
        video.record_agent_episode(CATCH, prior, key=jax.random.key(0)),
        video.record_episode(CATCH, prior.network, prior.policy, key=jax.random.key(0)),
    )


def _catch_frames():
    return video.record_episode(CATCH, CATCH_NETWORK, pr.policies.Greedy(), key=jax.random.key(1), max_steps=10)


def test_write_video_gif_reads_back_frame_by_frame(tmp_path):
    frames = np.asarray(_catch_frames())
    video.write_video(frames, tmp_path / "catch.gif", fps=4)
    np.testing.assert_array_equal(iio.imread(tmp_path / "catch.gif", index=None), frames)


# Counting an MP4's frames runs ffmpeg: JAX warns at the fork once its threads run (the
# exec leaves none of them behind). Decoding frames leaves ffmpeg's pipes open, which
# warns too, so the test counts them.
@pytest.mark.filterwarnings(r"ignore:os\.fork\(\) was called:RuntimeWarning")
def test_write_video_mp4_has_every_frame(tmp_path):
    imageio_ffmpeg = pytest.importorskip("imageio_ffmpeg")
    frames = np.asarray(_catch_frames())
    video.write_video(frames, tmp_path / "catch.mp4", fps=4)
    num_frames, seconds = imageio_ffmpeg.count_frames_and_secs(str(tmp_path / "catch.mp4"))
    assert num_frames == len(frames) and seconds == pytest.approx(len(frames) / 4)


def test_write_video_refuses_other_formats_and_frames(tmp_path):
    frames = np.asarray(_catch_frames())
    with pytest.raises(ValueError, match=r"\.gif or \.mp4"):
        video.write_video(frames, tmp_path / "catch.avi")
    with pytest.raises(ValueError, match="uint8 frames"):
        video.write_video(frames.astype(np.float32), tmp_path / "catch.gif")


def test_write_video_without_imageio_names_the_extra(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "imageio.v3", None)
    with pytest.raises(ImportError, match=r'pip install "podrace\[video\]"'):
        video.write_video(np.zeros((2, 4, 4, 3), np.uint8), tmp_path / "blank.gif")


CARTPOLE_NETWORK = helpers.q_network(jax.random.key(0), observation_shape=(4,), num_actions=2)


def test_record_gymnasium_episode_collects_rgb_array_frames():
    pytest.importorskip("pygame")  # Gymnasium draws its classic-control environments with it
    frames = video.record_gymnasium_episode(
        "CartPole-v1", CARTPOLE_NETWORK, pr.policies.Greedy(), key=jax.random.key(0), max_steps=5, seed=0
    )
    # CartPole lasts longer than 5 steps, so the budget cuts the episode.
    assert frames.dtype == np.uint8 and frames.shape == (6, 400, 600, 3)
    assert not np.array_equal(frames[0], frames[-1])


def test_record_envpool_episode_collects_the_frames_envpool_draws():
    pytest.importorskip("envpool")
    frames = video.record_envpool_episode(
        "CartPole-v1", CARTPOLE_NETWORK, pr.policies.Greedy(), key=jax.random.key(0), max_steps=5, seed=3
    )
    assert frames.dtype == np.uint8 and frames.shape == (6, 400, 600, 3)
    assert not np.array_equal(frames[0], frames[-1])
    # Atari's full screen, not the agent's 84x84 view; the greedy agent plays until its game or the budget ends.
    network = helpers.q_network(jax.random.key(0), observation_shape=(4, 84, 84), num_actions=6)
    frames = video.record_envpool_episode("Pong-v5", network, pr.policies.Greedy(), key=jax.random.key(0), max_steps=3)
    assert frames.shape == (4, 210, 160, 3)


def test_record_gymnasium_episode_needs_rgb_array_frames():
    with gymnasium.make("CartPole-v1") as env, pytest.raises(ValueError, match="render_mode='rgb_array'"):
        video.record_gymnasium_episode(env, CARTPOLE_NETWORK, pr.policies.Greedy(), key=jax.random.key(0))
