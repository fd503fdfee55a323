"""The EnvPool adapter: pools stepped inside compiled programs, checked by check_pool_env;
terminations, truncations, lives and resets against EnvPool's flags; CartPole's and
Pendulum's steps against podrace's JAX ones; PPO through Anakin; a restored state's
restart; the compilation cache; what a pool refuses; the command line's `envpool:ID`."""

import functools
import math
import os
import re
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import Mesh

import podrace as pr
from podrace import cli
from podrace.checkpoint import Checkpointer
from podrace.envs import from_envpool
from podrace.envs.names import check_env_name, make_env

from . import helpers


pytest.importorskip("envpool", reason="EnvPool is not installed: pip install 'podrace[envpool]' (Linux only)")


@functools.cache
def _cartpole(max_episode_steps: int = 500) -> pr.envs.EnvPoolEnv:
    """One adapter per setting: its pools and compiled programs are shared between tests."""
    return pr.envs.EnvPoolEnv("CartPole-v1", max_episode_steps=max_episode_steps)


def _run(env: pr.envs.EnvPoolEnv, actions: jax.Array) -> pr.TimeStep:
    """The time steps `[T + 1, B]` of a reset and `T` steps of the pool of `B`, checked."""
    return jax.tree.map(np.asarray, pr.envs.check_pool_env(env, num_envs=actions.shape[1], actions=actions))


def test_cartpole_passes_check_pool_env_and_spaces_are_envpool_s():
    env = _cartpole(20)
    timesteps = pr.envs.check_pool_env(env, num_envs=4, num_steps=60)
    assert timesteps.observation.shape == (61, 4, 4) and timesteps.observation.dtype == jnp.float32
    assert timesteps.is_first[1:].any(), "no episode ended in 60 steps of 20-step episodes"
    assert env.action_space == pr.Discrete(2)
    observations = env.observation_space
    assert isinstance(observations, pr.Box) and observations.shape == (4,) and observations.dtype == jnp.float32
    np.testing.assert_allclose(observations.high, [4.8, np.inf, 2 * 12 * 2 * math.pi / 360, np.inf], rtol=1e-6)


def test_a_fall_terminates_the_time_limit_truncates_and_the_next_step_is_a_reset():
    # Environment 0 pushes left and right in turn and keeps the pole up until the limit;
    # environment 1 always pushes right, and the pole falls.
    limit, num_steps = 20, 24
    actions = jnp.stack([jnp.arange(num_steps) % 2, jnp.ones(num_steps, jnp.int32)], axis=1)
    timesteps = _run(_cartpole(limit), actions.astype(jnp.int32))
    balanced = jax.tree.map(lambda x: x[:, 0], timesteps)
    assert not balanced.terminated.any()
    assert np.flatnonzero(balanced.truncated).tolist() == [limit]
    assert balanced.discount[limit] == 1 and balanced.is_first[limit + 1] and balanced.reward[limit + 1] == 0
    fallen = jax.tree.map(lambda x: x[:, 1], timesteps)
    end = np.flatnonzero(fallen.terminated)[0]
    assert end < limit and not fallen.truncated.any()
    x, _, theta, _ = fallen.observation[end]
    assert abs(x) > 2.4 or abs(theta) > 12 * 2 * math.pi / 360  # Gymnasium's thresholds
    assert fallen.discount[end] == 0 and fallen.reward[end] == 1
    assert fallen.is_first[end + 1] and fallen.reward[end + 1] == 0 and fallen.discount[end + 1] == 1
    np.testing.assert_array_less(np.abs(fallen.observation[end + 1]), 0.05 + 1e-7)  # a fresh start
    np.testing.assert_array_equal(fallen.is_first[1:], fallen.terminated[:-1] | fallen.truncated[:-1])


def test_steps_agree_with_podrace_s_jax_cartpole():
    # EnvPool's CartPole observes its whole state, so each of its steps can be taken again
    # by podrace's CartPole from the observed state: the same dynamics (EnvPool integrates
    # in float64, podrace in float32), rewards and terminations. Their initial states are
    # drawn from the same uniform [-0.05, 0.05], by different generators.
    num_steps, num_envs = 150, 4
    actions = jax.random.bernoulli(jax.random.key(3), 0.5, (num_steps, num_envs)).astype(jnp.int32)
    timesteps = _run(_cartpole(), actions)
    first = timesteps.observation[timesteps.is_first]
    assert len(first) > num_envs  # episodes ended and restarted
    np.testing.assert_array_less(np.abs(first), 0.05 + 1e-7)
    stepped = ~timesteps.is_first[1:]  # step t + 1 follows step t (not a reset)
    cartpole = pr.envs.CartPole()
    before = timesteps.observation[:-1][stepped]
    step = lambda observation, action: cartpole.step(pr.envs.CartPoleState(*observation), action, jax.random.key(0))  # noqa: E731
    _, jax_steps = jax.vmap(step)(jnp.asarray(before), jnp.asarray(actions)[stepped])
    np.testing.assert_allclose(jax_steps.observation, timesteps.observation[1:][stepped], rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(jax_steps.reward, timesteps.reward[1:][stepped])
    np.testing.assert_array_equal(jax_steps.terminated, timesteps.terminated[1:][stepped])
    assert timesteps.terminated.sum() >= num_envs


def test_a_fall_on_the_time_limit_s_step_is_reported_truncated_and_the_observation_shows_it():
    # EnvPool's classic control flags an episode done on its time limit's step as
    # truncated, even where the pole falls on that step. Its observation is the whole
    # state, so the fall is there to see; the adapter does not re-apply CartPole's rules.
    # Always pushing right from a new pool of the same seed, the pole falls at the same
    # step: a limit set to that step ends the episode there with the same observation.
    actions = jnp.ones((40, 1), jnp.int32)
    falls = np.flatnonzero(_run(pr.envs.EnvPoolEnv("CartPole-v1"), actions).terminated[:, 0])[0]
    timesteps = _run(pr.envs.EnvPoolEnv("CartPole-v1", max_episode_steps=int(falls)), actions)
    assert timesteps.truncated[falls, 0] and not timesteps.terminated[: falls + 1, 0].any()
    assert timesteps.discount[falls, 0] == 1 and timesteps.is_first[falls + 1, 0]
    x, _, theta, _ = timesteps.observation[falls, 0]
    assert abs(x) > 2.4 or abs(theta) > 12 * 2 * math.pi / 360  # fallen, past Gymnasium's thresholds


def test_pendulum_agrees_with_podrace_s_pendulum_where_the_speed_is_not_clipped():
    # EnvPool's Pendulum-v1 observes (cos, sin, angular velocity), its whole state. Its
    # angle moves by the angular velocity before the clip to 8 rad/s, Gymnasium's and
    # podrace's by the clipped one: the steps agree where the new velocity is not clipped,
    # and differ by (|velocity| - 8) * dt where it is (full torque spins up to the limit).
    num_steps, num_envs = 100, 4
    actions = jax.random.uniform(jax.random.key(1), (num_steps, num_envs, 1), minval=-2, maxval=2)
    actions = actions.at[:, :2].set(2.0)
    timesteps = _run(pr.envs.EnvPoolEnv("Pendulum-v1"), actions)
    stepped = ~timesteps.is_first[1:]
    before, after = timesteps.observation[:-1][stepped], timesteps.observation[1:][stepped]
    torques = np.asarray(actions)[stepped][:, 0]
    pendulum = pr.envs.Pendulum()

    def step(observation, action):
        state = pr.envs.PendulumState(jnp.arctan2(observation[1], observation[0]), observation[2])
        return pendulum.step(state, action, jax.random.key(0))[1]

    jax_steps = jax.vmap(step)(jnp.asarray(before), jnp.asarray(actions)[stepped])
    theta = np.arctan2(before[:, 1], before[:, 0])
    clipped = np.abs(before[:, 2] + 3 * (10 / 2 * np.sin(theta) + torques) * 0.05) > 8
    assert 0 < clipped.sum() < len(clipped) // 2
    np.testing.assert_allclose(jax_steps.observation[~clipped], after[~clipped], rtol=1e-5, atol=1e-6)
    assert np.abs(jax_steps.observation[clipped] - after[clipped]).max() > 1e-3
    np.testing.assert_allclose(jax_steps.reward, timesteps.reward[1:][stepped], rtol=1e-5, atol=1e-5)
    assert not timesteps.terminated.any()


def test_one_pool_call_per_step_inside_the_scan():
    env = _cartpole()

    def run(actions):
        states, _ = jax.vmap(env.reset)(jax.random.split(jax.random.key(0), 4))
        step = lambda states, actions: jax.vmap(env.step)(states, actions, jax.random.split(jax.random.key(0), 4))  # noqa: E731
        return jax.lax.scan(step, states, actions)[1]

    jaxpr = jax.make_jaxpr(run)(jnp.zeros((3, 4), jnp.int32)).jaxpr
    (scan,) = [eqn for eqn in jaxpr.eqns if eqn.primitive.name == "scan"]
    assert [name.rpartition("_")[2] for name in _pool_calls(jaxpr)] == ["reset"]  # the host reset, once
    # A step is EnvPool's send and recv, or, for a state of another pool, the pool's restart.
    (step,) = [eqn for eqn in _nested_eqns(scan.params["jaxpr"].jaxpr) if eqn.primitive.name == "cond"]
    restart, xla_step = (branch.jaxpr for branch in reversed(step.params["branches"]))
    assert _pool_calls(restart) == ["reset"]
    assert [name.rpartition("_")[2] for name in _pool_calls(xla_step)] == ["send", "recv"]


def _nested_eqns(jaxpr):
    """The equations of `jaxpr` and of the programs it calls, cond's branches included."""
    for eqn in jaxpr.eqns:
        yield eqn
        for param in eqn.params.values():
            for inner in param if isinstance(param, tuple) else (param,):
                inner = getattr(inner, "jaxpr", inner)
                if hasattr(inner, "eqns"):
                    yield from _nested_eqns(inner)


def _pool_calls(jaxpr) -> list[str]:
    """The pool's calls in `jaxpr` and the programs it calls, in order: EnvPool's XLA
    calls by target name, and host callbacks as `reset`."""
    calls = []
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "ffi_call":
            calls.append(eqn.params["target_name"])
        elif eqn.primitive.name in ("io_callback", "pure_callback"):
            calls.append("reset")
        elif eqn.primitive.name not in ("scan", "cond"):
            for param in eqn.params.values():
                inner = getattr(param, "jaxpr", param)
                if hasattr(inner, "eqns"):
                    calls.extend(_pool_calls(inner))
    return calls


def test_a_call_without_vmap_steps_a_pool_of_one():
    env = _cartpole()
    state, first = env.reset(jax.random.key(0))
    assert first.is_first and first.observation.shape == (4,)
    _, timestep = env.step(state, jnp.asarray(1), jax.random.key(0))
    assert not timestep.is_first and timestep.reward == 1
    assert env.pool(1).config["num_envs"] == 1


def test_auto_reset_leaves_the_pool_s_steps_as_they_are():
    # The pool resets its environments itself: AutoReset, with or without limited resets,
    # neither resets the pool again nor changes its time steps.
    env = _cartpole(5)
    keys = jax.random.split(jax.random.key(0), 4)
    actions = jnp.ones((8, 4), jnp.int32)

    def run(wrapper):
        states, _ = jax.vmap(wrapper.reset)(keys)
        step = lambda states, actions: wrapper.step_batch(states, actions, keys)  # noqa: E731
        return jax.lax.scan(step, states, actions)[1]

    wrapped = jax.jit(run)(pr.envs.AutoReset(env, resets_per_step=1))
    assert wrapped.is_first[5].all() and not wrapped.is_first[:5].any()  # the pool's own resets
    assert _pool_calls(jax.make_jaxpr(run)(pr.envs.AutoReset(env)).jaxpr).count("reset") == 1


def test_atari_options_pass_through_under_envpool_s_names():
    env = pr.envs.EnvPoolEnv(
        "Pong-v5",
        seed=1,
        episodic_life=True,
        reward_clip=True,
        repeat_action_probability=0.25,
        noop_max=10,
        frame_skip=3,
        stack_num=2,
        img_height=64,
        img_width=48,
    )
    timesteps = pr.envs.check_pool_env(env, num_envs=2, num_steps=20)
    assert timesteps.observation.shape == (21, 2, 2, 64, 48) and timesteps.observation.dtype == jnp.uint8
    assert env.action_space == pr.Discrete(6)
    config = env.pool(2).config
    expected = dict(episodic_life=True, reward_clip=True, noop_max=10, frame_skip=3, stack_num=2, img_height=64)
    assert {name: config[name] for name in expected} == expected
    assert config["repeat_action_probability"] == pytest.approx(0.25) and config["seed"] == 1


def test_episodic_life_ends_an_episode_at_a_lost_life():
    # The same seed and actions play the same game until Breakout's first lost life: with
    # episodic_life it is a termination, and the game goes on; without it, nothing ends.
    actions = jax.random.randint(jax.random.key(0), (300, 1), 0, 4, dtype=jnp.int32)
    by_life = _run(pr.envs.EnvPoolEnv("Breakout-v5", episodic_life=True), actions)
    by_game = _run(pr.envs.EnvPoolEnv("Breakout-v5"), actions)
    (life_lost, *_) = np.flatnonzero(by_life.terminated[:, 0])
    assert by_life.discount[life_lost, 0] == 0 and by_life.is_first[life_lost + 1, 0]
    np.testing.assert_array_equal(by_life.observation[: life_lost + 1], by_game.observation[: life_lost + 1])
    assert not (by_game.terminated | by_game.truncated)[: life_lost + 1].any()


@functools.cache
def _ppo_pipeline() -> pr.Anakin:
    config = pr.configs.OnPolicyConfig(algorithm="ppo", num_envs=8, rollout_length=16, hidden=(32,))
    return config.pipeline(_cartpole(), jax.random.key(0))


def test_ppo_trains_on_envpool_cartpole_through_anakin():
    pipeline = _ppo_pipeline()
    result = pipeline.train(pipeline.init(jax.random.key(1)), num_updates=3)
    summary = result.summary()
    assert all(np.isfinite(value) for value in summary.values()), summary
    assert summary["episodes"] > 0 and summary["episode_length"] > 5
    assert result.state.envs.env_state.env_state.handle.shape == (8, 8)  # the pool's handle, per environment
    again = pipeline.train(result.state, num_updates=3)  # the pool goes on where it stopped
    assert all(np.isfinite(value) for value in again.summary().values())


def test_a_restored_state_restarts_the_pool_with_flagged_resets(tmp_path):
    # The pool's environments are not in the checkpoint: a pipeline restored onto a new
    # pool (a new process, here a new adapter) cuts the episodes running at the save, and
    # its first step resets every environment, flagged first. The cut episodes are not
    # counted as ended: CartPole's returns (1 a step) stay equal to its episodes' lengths.
    pipeline = _ppo_pipeline()
    state = pipeline.train(pipeline.init(jax.random.key(1)), num_updates=1).state
    assert (state.envs.episode_length > 0).any()  # episodes are running at the save
    with Checkpointer(tmp_path) as checkpointer:
        checkpointer.save(1, state)
        config = pr.configs.OnPolicyConfig(algorithm="ppo", num_envs=8, rollout_length=16, hidden=(32,))
        resumed = config.pipeline(pr.envs.EnvPoolEnv("CartPole-v1"), jax.random.key(0))
        restored = checkpointer.restore(resumed.init(jax.random.key(1)))
    keys = jax.random.split(jax.random.key(0), 8)
    step = jax.jit(lambda envs, actions: resumed.env.step_batch(envs, actions, keys))
    envs, first = step(restored.envs.env_state, jnp.ones(8, jnp.int32))
    assert first.is_first.all() and not (first.terminated | first.truncated).any()
    assert (first.reward == 0).all() and (first.discount == 1).all()
    np.testing.assert_array_less(np.abs(first.observation), 0.05 + 1e-7)  # fresh starts
    _, after = step(envs, jnp.ones(8, jnp.int32))
    assert not after.is_first.any() and (after.reward == 1).all()  # then the pool steps on
    metrics = resumed.train(restored, num_updates=2).metrics
    np.testing.assert_array_equal(metrics.episode_length_sum, metrics.episode_return_sum.astype(np.int32))


def test_a_program_that_steps_a_pool_names_the_pool_s_address():
    # EnvPool's XLA step finds its pool by an attribute of the call, the pool's address,
    # not by the handle it takes: each process's program is its own.
    env, keys = _cartpole(), jax.random.split(jax.random.key(0), 2)
    states, _ = jax.vmap(env.reset)(keys)
    text = jax.jit(lambda states: jax.vmap(env.step)(states, jnp.zeros(2, jnp.int32), keys)).lower(states).as_text()
    address = int.from_bytes(env._pool(2).handle.tobytes(), sys.byteorder)
    assert f"handle = {address} : i64" in text


_TRAIN_ON_A_POOL = textwrap.dedent(
    """
    import sys

    import jax

    import podrace as pr

    pr.enable_compilation_cache(sys.argv[1])
    jax.config.update("jax_explain_cache_misses", True)
    jax.config.update("jax_log_compiles", True)
    config = pr.configs.OnPolicyConfig(algorithm="ppo", num_envs=4, rollout_length=8, hidden=(16,))
    pipeline = config.pipeline(pr.envs.EnvPoolEnv("CartPole-v1"), jax.random.key(0))
    jax.block_until_ready(pipeline.train(pipeline.init(jax.random.key(1)), num_updates=1))
    """
)


def test_the_compilation_cache_keeps_no_program_that_steps_a_pool(tmp_path):
    # Programs that step a pool hold its address (above) and the pool's restart, a host
    # callback; JAX writes no program with a host callback to its cache, so a second run
    # (the command line keeps a cache by default) adds no entry and loads the others.
    def train_in_a_new_process() -> str:
        environment = {**os.environ, "JAX_PLATFORMS": "cpu"}
        command = [sys.executable, "-c", _TRAIN_ON_A_POOL, str(tmp_path)]
        return subprocess.run(command, capture_output=True, text=True, env=environment, check=True).stderr

    first = train_in_a_new_process()
    assert "Not writing persistent cache entry for 'jit__train' because it uses host callbacks" in first
    assert "Not writing persistent cache entry for 'jit__init' because it uses host callbacks" in first
    entries = sorted(os.listdir(tmp_path))
    assert "Persistent compilation cache hit" in train_in_a_new_process()
    assert sorted(os.listdir(tmp_path)) == entries


def test_what_a_pool_cannot_do_is_refused_with_the_fix():
    pipeline = _ppo_pipeline()
    with pytest.raises(ValueError, match=r"cannot be vmapped over: its batch of 8 environments is one stateful pool"):
        jax.vmap(pipeline.init)(jax.random.split(jax.random.key(0), 2))
    with pytest.raises(
        ValueError, match=r"evaluation episodes cannot play in it; evaluate in an environment of its own"
    ):
        pipeline.evaluation_env()
    device = jax.devices()[0]
    with pytest.raises(ValueError, match=r"cannot be split over the mesh's 2 devices; run it on one device"):
        pr.Anakin(
            _cartpole(),
            pipeline.learner,
            num_envs=8,
            rollout_length=16,
            mesh=Mesh(np.array([device, device]), ("devices",)),
        )
    with pytest.raises(ValueError, match=r"EnvPoolEnv sets num_envs itself"):
        pr.envs.EnvPoolEnv("CartPole-v1", num_envs=8)
    with pytest.raises(ValueError, match=r"No EnvPool environment 'CartPol-v1'\. Did you mean CartPole-v1"):
        pr.envs.EnvPoolEnv("CartPol-v1")
    with pytest.raises(ValueError, match=r"No option of EnvPool's Pong-v5 'episodic_lfe'\. Did you mean episodic_life"):
        pr.envs.EnvPoolEnv("Pong-v5", episodic_lfe=True)


def test_a_population_is_refused_at_its_entry_point():
    population = pr.Population(lambda key: _ppo_pipeline(), jax.random.split(jax.random.key(0), 2))
    with pytest.raises(ValueError, match=r"cannot be vmapped over.*Train one pipeline at a time"):
        population.init(jax.random.key(0))


def test_the_command_line_names_envpool_ids(capsys):
    assert isinstance(make_env("envpool:CartPole-v1"), pr.envs.EnvPoolEnv)
    with pytest.raises(ValueError, match=r"No envpool environment 'CartPol-v1'\. Did you mean CartPole-v1"):
        check_env_name("envpool:CartPol-v1")
    assert cli.main(["train", "envpool:CartPole-v1", "ppo", "--show-settings"]) == 0
    assert "envpool:CartPole-v1 ppo" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        cli.main(["train", "--help"])
    assert "envpool:ID (an EnvPool environment" in " ".join(capsys.readouterr().out.split())


def test_the_command_line_resumes_an_envpool_run(tmp_path, capsys):
    # A new pool for the resumed run (the pipeline is built again): it restarts its episodes.
    run = ["train", "envpool:CartPole-v1", "ppo", "--num-envs", "4", "--rollout-length", "8", "--hidden", "8"]
    saving = ["--checkpoint-dir", str(tmp_path), "--updates-per-call", "1"]
    assert cli.main([*run, "--num-updates", "2", *saving]) == 0
    assert cli.main([*run, "--num-updates", "3", *saving, "--resume"]) == 0
    assert f"resumed from update 2 in {tmp_path}" in capsys.readouterr().out
    with Checkpointer(tmp_path) as checkpointer:
        assert checkpointer.all_steps()[-1] == 3
    # Evaluated in a pool of its own (training's cannot be shared), and drawn by EnvPool.
    video = tmp_path / "episode.gif"
    assert cli.main(["evaluate", str(tmp_path), "--num-episodes", "3", "--video", str(video)]) == 0
    printed = capsys.readouterr().out
    assert "over 3 episodes (Mode policy)" in printed and video.read_bytes().startswith(b"GIF8"), printed


def test_missing_envpool_raises_an_install_hint(monkeypatch):
    fresh = helpers.fresh_module_without(from_envpool.__name__, ("envpool",), monkeypatch)
    with pytest.raises(ImportError, match=re.escape("pip install 'podrace[envpool]'")):
        fresh.EnvPoolEnv("CartPole-v1")


@pytest.mark.slow
def test_ppo_solves_envpool_cartpole_on_seeds_0_to_9():
    # At the settings that solve podrace's JAX CartPole (the registry's tuned PPO). A pool
    # cannot be vmapped, so the seeds train one after another, each in pools of its own.
    tuned = pr.configs.registry.TUNED[("cartpole", "ppo")]
    config = tuned.config
    returns = []
    for seed in range(10):
        pool_seed = 10_000 * seed  # EnvPool seeds environment i of a pool from seed + i
        pipeline = config.pipeline(pr.envs.EnvPoolEnv("CartPole-v1", seed=pool_seed), jax.random.key(seed))
        result = pipeline.train(pipeline.init(jax.random.key(seed + 100)), num_updates=config.updates_per_call)
        for _ in range(config.num_updates // config.updates_per_call - 1):
            result = pipeline.train(result.state, num_updates=config.updates_per_call)
        # Evaluated in a pool of its own: training's pool cannot be shared.
        episodes = pr.evaluate(
            pr.envs.EnvPoolEnv("CartPole-v1", seed=pool_seed + 5_000),
            pipeline.network_at(result.state),
            config.evaluation_policy(),
            num_episodes=16,
            key=jax.random.key(seed + 200),
        )
        returns.append(float(np.mean(episodes.returns)))
    solved = sum(value >= tuned.solved_at for value in returns)
    per_seed = ", ".join(f"{seed}: {value:.4g}" for seed, value in enumerate(returns))
    print(f"{solved}/10 seeds reach {tuned.solved_at} (by seed: {per_seed})")  # shown by pytest -rP
    assert solved >= 9, per_seed
