"""The other process of the checkpoint tests (test_checkpoint.py).

python tests/checkpoint_worker.py resume DIR
    (run on the test session's platform) For every pipeline of `PIPELINES`: restores
    the latest checkpoint in DIR/NAME into a freshly built pipeline, trains
    `NUM_UPDATES` more updates and saves the state as the next checkpoint.
python tests/checkpoint_worker.py other-device-count DIR
    (run with two forced CPU devices) The same for the A2C pipeline saved on one
    device with twice as many environments per device; then writes to
    DIR/refused.txt the error of a restore into a pipeline of another total.
python tests/checkpoint_worker.py interrupted DIR
    Saves checkpoint 1, starts writing checkpoint 2 (with a large extra array, so
    that the write takes a while) and kills itself while it is being written.
"""

import os
import pathlib
import signal
import sys
import warnings

import jax


with warnings.catch_warnings():
    # Deprecation inside tensorflow_probability (imported by distrax), not podrace.
    warnings.filterwarnings("ignore", "jax.core.pytype_aval_mappings is deprecated", DeprecationWarning)
    import distrax  # noqa: F401

import jax.numpy as jnp
import optax

import podrace as pr
from podrace.checkpoint import Checkpointer


sys.path.insert(0, str(pathlib.Path(__file__).parents[1]))
from tests import helpers


# As in conftest.py: full float32 matmuls, so that the two processes compute alike on a GPU too.
jax.config.update("jax_default_matmul_precision", "highest")


NUM_UPDATES = 3


def a2c(num_envs: int = 6) -> pr.Anakin:
    learner = helpers.policy_gradient_learner(jax.random.key(1), pr.losses.A2CLoss(discount=0.9))
    env = pr.envs.Catch(rows=helpers.CATCH_ROWS, columns=helpers.CATCH_COLUMNS)
    return pr.Anakin(env, learner, num_envs=num_envs, rollout_length=6)


def dqn() -> pr.Anakin:
    env = pr.envs.Catch(rows=helpers.CATCH_ROWS, columns=helpers.CATCH_COLUMNS)
    return pr.Anakin(env, helpers.dqn_learner(jax.random.key(1)), num_envs=4, rollout_length=6)


def _member(hyperparameters) -> pr.Anakin:
    learning_rate, key = hyperparameters
    learner = helpers.make_learner(key, optimizer=optax.adam(learning_rate))
    env = pr.envs.Catch(rows=helpers.CATCH_ROWS, columns=helpers.CATCH_COLUMNS)
    return pr.Anakin(env, learner, num_envs=2, rollout_length=6)


def population() -> pr.Population:
    learning_rates = jnp.asarray([1e-3, 1e-2], jnp.float32)
    return pr.Population(_member, (learning_rates, jax.random.split(jax.random.key(2), 2)))


PIPELINES = {"a2c": a2c, "dqn": dqn, "population": population}


def resume(directory: pathlib.Path, pipeline: pr.Anakin | pr.Population) -> None:
    """Restores the latest checkpoint, trains `NUM_UPDATES` updates and saves the result."""
    with Checkpointer(directory) as checkpointer:
        step = checkpointer.latest_step
        assert step is not None
        state = checkpointer.restore(pipeline.init(jax.random.key(123)))
        state = pipeline.train(state, num_updates=NUM_UPDATES).state
        checkpointer.save(step + NUM_UPDATES, state)


def main() -> None:
    command, directory = sys.argv[1], pathlib.Path(sys.argv[2])
    if command == "resume":
        for name, build in PIPELINES.items():
            resume(directory / name, build())
    elif command == "other-device-count":
        assert jax.device_count() == 2
        resume(directory, a2c(num_envs=3))
        try:
            Checkpointer(directory).restore(a2c(num_envs=2).init(jax.random.key(0)))
        except ValueError as error:
            (directory / "refused.txt").write_text(str(error))
    elif command == "interrupted":
        pipeline = a2c()
        state = pipeline.init(jax.random.key(0))
        checkpointer = Checkpointer(directory)
        checkpointer.save(1, {"state": state, "extra": jnp.zeros(1)})
        checkpointer.wait()
        checkpointer.save(2, {"state": state, "extra": jnp.zeros(2**27)})
        os.kill(os.getpid(), signal.SIGKILL)
    else:
        raise SystemExit(f"unknown command {command}")


if __name__ == "__main__":
    main()
