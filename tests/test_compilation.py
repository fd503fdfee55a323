"""The persistent compilation cache: a second process loads what the first compiled; the
options of programs a run calls once."""

import os
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np

import podrace as pr


_PROGRAM = textwrap.dedent(
    """
    import sys

    import jax
    import optax

    import podrace as pr

    pr.enable_compilation_cache(sys.argv[1])
    jax.config.update("jax_log_compiles", True)
    env = pr.envs.Catch(rows=5, columns=3)
    network = pr.networks.FeedForwardNetwork(
        pr.networks.MLPTorso(env.observation_space.shape, (8,), key=jax.random.key(0)),
        pr.networks.QValueHead(8, 3, key=jax.random.key(1)),
    )
    learner = pr.Learner(
        network, pr.policies.Greedy(), pr.losses.TDLambdaQLoss(discount=0.9, lambda_=0.9), optax.sgd(0.1)
    )
    pipeline = pr.Anakin(env, learner, num_envs=2, rollout_length=3)
    jax.block_until_ready(pipeline.train(pipeline.init(jax.random.key(0)), num_updates=2))
    """
)


def _train_in_a_new_process(cache_directory) -> str:
    """What a fresh process that trains a small pipeline with the cache on logs."""
    environment = {**os.environ, "JAX_PLATFORMS": "cpu"}
    environment.pop("XLA_FLAGS", None)
    result = subprocess.run(
        [sys.executable, "-c", _PROGRAM, str(cache_directory)],
        capture_output=True,
        text=True,
        env=environment,
        check=True,
        timeout=600,
    )
    return result.stderr


def test_a_second_process_loads_the_programs_the_first_compiled(tmp_path):
    cache = tmp_path / "cache"
    first = _train_in_a_new_process(cache)
    assert "Persistent compilation cache hit" not in first
    entries = sorted(os.listdir(cache))
    assert entries, "the first process wrote nothing to the cache"
    second = _train_in_a_new_process(cache)
    assert "Persistent compilation cache hit" in second
    assert "train" in "".join(line for line in second.splitlines() if "Persistent compilation cache hit" in line)
    assert sorted(os.listdir(cache)) == entries, "the second process compiled programs the first had cached"


def test_a_program_run_once_compiles_alone_and_inside_another_program():
    double = pr.compilation.compiled_once(lambda x: 2 * x)
    np.testing.assert_array_equal(double(jnp.ones(2)), [2.0, 2.0])
    # Inside another program it is traced plainly: XLA takes options only for a whole program.
    np.testing.assert_array_equal(jax.jit(double)(jnp.ones(2)), [2.0, 2.0])


def test_options_that_this_xla_does_not_know_are_left_out(monkeypatch):
    monkeypatch.setitem(pr.compilation.RUN_ONCE_OPTIONS, "xla_no_such_option", True)
    pr.compilation._known_run_once_options.cache_clear()
    try:
        assert pr.compilation._known_run_once_options() == {}
        double = pr.compilation.compiled_once(lambda x: 2 * x)
        np.testing.assert_array_equal(double(jnp.ones(2)), [2.0, 2.0])
    finally:
        pr.compilation._known_run_once_options.cache_clear()
