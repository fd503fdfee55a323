"""Runs Anakin on forced CPU devices in a fresh process (used by test_device_matrix.py).

The device count is fixed when JAX starts, so the tests run this script in a
subprocess with `XLA_FLAGS=--xla_force_host_platform_device_count=N` set and compare
the arrays it saves:

    python tests/multidevice_worker.py OUT_DIR --num-envs 4 [--pmap | --separate]

- `anakin.npz`: parameters and losses after `NUM_UPDATES` updates of
  `Anakin(..., num_envs)` over all devices, and the per-device shapes of the
  environment batch before and after training.
- `pmap.npz` (with `--pmap`, on two devices): `eqx.filter_pmap` of init + train over
  two keys with a single-device mesh.
- `separate.npz` (with `--separate`): the same two runs done one after the other.
- `dqn.npz` (with `--dqn`): a DQN learner over all devices: the per-device rows of
  its replay buffer, its counters and losses.
- `learner-NAME.npz` (with `--learners`): for every learner of the registry in
  `helpers.LEARNERS`, its parameters and losses after `NUM_UPDATES` updates of an
  Anakin pipeline in the learner's environment over all devices.
- `members.npz` (with `--population`): two members trained with their environments
  split over all devices inside a `vmap` (population outer, devices inner), or, on one
  device, each alone.
- With `--coordinator-address`, `--num-processes` and `--process-id`, the script is
  one process of a `jax.distributed` run and writes to `OUT_DIR/process-ID`; `--only`
  restricts `--learners` to some of the registry.
- `population.npz` (with `--population`): a `Population` of four members (learning
  rates and seeds) split over all devices: the per-device shard sizes of its state,
  its learner states and metrics.
"""

import argparse
import pathlib
import sys
import warnings

import jax


with warnings.catch_warnings():
    # Deprecation inside tensorflow_probability (imported by distrax), not podrace.
    warnings.filterwarnings("ignore", "jax.core.pytype_aval_mappings is deprecated", DeprecationWarning)
    import distrax  # noqa: F401

import equinox as eqx
import jax.numpy as jnp
import numpy as np
import optax

import podrace as pr


sys.path.insert(0, str(pathlib.Path(__file__).parents[1]))
from tests import helpers


NUM_UPDATES = 5
PMAP_UPDATES = 3


def build(num_envs: int, mesh: jax.sharding.Mesh | None = None) -> pr.Anakin:
    env = pr.envs.Catch(rows=5, columns=3)
    torso_key, head_key = jax.random.split(jax.random.key(1))
    network = pr.networks.FeedForwardNetwork(
        pr.networks.MLPTorso(env.observation_space.shape, (16,), key=torso_key),
        pr.networks.QValueHead(16, 3, key=head_key),
    )
    learner = pr.Learner(
        network, pr.policies.Greedy(), pr.losses.TDLambdaQLoss(discount=0.99, lambda_=0.9), optax.adam(1e-2)
    )
    return pr.Anakin(env, learner, num_envs=num_envs, rollout_length=6, mesh=mesh)


def shard_shapes(tree) -> np.ndarray:
    """For every leaf, the leading size of each device's shard: `[leaves, devices]`."""
    return np.asarray([[shard.data.shape[0] for shard in leaf.addressable_shards] for leaf in jax.tree.leaves(tree)])


def leaves(tree) -> dict[str, np.ndarray]:
    """The leaves as NumPy arrays (PRNG keys as their raw data), gathered from every process."""
    return {f"{i:03d}": leaf for i, leaf in enumerate(jax.tree.leaves(pr.distributed.gather(tree)))}


def run_anakin(out: pathlib.Path, num_envs: int) -> None:
    pipeline = build(num_envs)
    state = pipeline.init(jax.random.key(0))
    before = shard_shapes(state.envs.episode_return)
    evaluation = pr.Evaluation(pipeline.learner.policy, num_episodes=4, key=jax.random.key(3), max_steps=30)
    result = pipeline.train(state, num_updates=NUM_UPDATES, evaluation=evaluation)
    network = pipeline.learner.network_at(result.state.learner)
    alone = pr.evaluate(
        pipeline.evaluation_env(), network, evaluation.policy, num_episodes=4, key=evaluation.key, max_steps=30
    )
    np.savez(
        out / "anakin.npz",
        evaluation=np.asarray(result.evaluation.returns),
        evaluation_alone=np.asarray(alone.returns),
        num_devices=pipeline.num_devices,
        device_count=jax.device_count(),
        shards_before=before,
        shards_after=shard_shapes(result.state.envs),
        loss=np.asarray(result.metrics.update.loss),
        **{f"param_{k}": v for k, v in leaves(result.state.learner.params).items()},
    )


def _pmap_pipeline() -> pr.Anakin:
    return build(3, mesh=jax.sharding.Mesh(jax.devices()[:1], ("devices",)))


def _pmap_keys() -> jax.Array:
    return jax.random.split(jax.random.key(2), 2)


def run_pmap(out: pathlib.Path) -> None:
    pipeline = _pmap_pipeline()
    result = eqx.filter_pmap(lambda key: pipeline.train(pipeline.init(key), num_updates=PMAP_UPDATES))(_pmap_keys())
    np.savez(out / "pmap.npz", **leaves((result.state.learner, result.metrics)))


def run_separate(out: pathlib.Path) -> None:
    pipeline = _pmap_pipeline()
    results = [pipeline.train(pipeline.init(key), num_updates=PMAP_UPDATES) for key in _pmap_keys()]
    stacked = jax.tree.map(lambda *x: jnp.stack(x), *[(r.state.learner, r.metrics) for r in results])
    np.savez(out / "separate.npz", **leaves(stacked))


def run_dqn(out: pathlib.Path, num_envs: int) -> None:
    pipeline = build(num_envs)
    learner = pr.learners.DQNLearner(
        pipeline.learner.network,
        pr.losses.QLearningLoss(discount=0.99, double=True),
        optax.adam(1e-3),
        epsilon=0.1,
        buffer_size=40 * num_envs * jax.device_count(),
        batch_size=8,
        min_replay_size=12 * num_envs * jax.device_count(),
        target_update_period=2,
    )
    pipeline = pr.Anakin(pipeline.env, learner, num_envs=num_envs, rollout_length=6)
    state = pipeline.init(jax.random.key(0))
    before = shard_shapes(state.learner.replay.experience)
    result = pipeline.train(state, num_updates=NUM_UPDATES)
    learner_state = result.state.learner
    np.savez(
        out / "dqn.npz",
        rows_before=before,
        rows_after=shard_shapes(learner_state.replay.experience),
        num_transitions=np.asarray(learner_state.num_transitions),
        num_gradient_steps=np.asarray(learner_state.num_gradient_steps),
        loss=np.asarray(result.metrics.update.loss),
        **{f"param_{k}": v for k, v in leaves(learner_state.params).items()},
    )


def run_learners(out: pathlib.Path, num_envs: int, names: list[str] | None = None) -> None:
    for name, case in helpers.LEARNERS.items():
        if names is not None and name not in names:
            continue
        pipeline = pr.Anakin(case.env(), case.make(jax.random.key(1)), num_envs=num_envs, rollout_length=6)
        result = pipeline.train(pipeline.init(jax.random.key(0)), num_updates=NUM_UPDATES)
        params = pipeline.learner.network_at(result.state.learner)
        np.savez(
            out / f"learner-{name}.npz",
            loss=np.asarray(result.metrics.update.loss),
            **{f"param_{k}": v for k, v in leaves(eqx.filter(params, eqx.is_inexact_array)).items()},
        )


def _population_member(hyperparameters) -> pr.Anakin:
    learning_rate, key = hyperparameters
    pipeline = build(2)
    torso_key, head_key = jax.random.split(key)
    network = pr.networks.FeedForwardNetwork(
        pr.networks.MLPTorso(pipeline.env.observation_space.shape, (16,), key=torso_key),
        pr.networks.QValueHead(16, 3, key=head_key),
    )
    learner = pr.Learner(network, pipeline.learner.policy, pipeline.learner.loss, optax.adam(learning_rate))
    return pr.Anakin(pipeline.env, learner, num_envs=2, rollout_length=6)


def run_population(out: pathlib.Path) -> None:
    learning_rates = jnp.asarray([1e-3, 1e-2, 3e-2, 1e-1], jnp.float32)
    population = pr.Population(_population_member, (learning_rates, jax.random.split(jax.random.key(3), 4)))
    evaluation = pr.Evaluation(pr.policies.Greedy(), num_episodes=3, key=jax.random.key(5), max_steps=20)
    result = population.train(population.init(jax.random.key(4)), num_updates=NUM_UPDATES, evaluation=evaluation)
    np.savez(
        out / "population.npz",
        num_devices=population.mesh.size,
        shards=shard_shapes(result.state),
        **{f"leaf_{k}": v for k, v in leaves((result.state.learner, result.metrics, result.evaluation)).items()},
    )


def run_pbt(out: pathlib.Path) -> None:
    """PBT of `run_population`'s members, every member ready after each update: the copies gather
    states across devices."""
    learning_rates = jnp.asarray([1e-3, 1e-2, 3e-2, 1e-1], jnp.float32)
    population = pr.Population(_population_member, (learning_rates, jax.random.split(jax.random.key(3), 4)))
    pbt = pr.PBT(population, (pr.executors.pbt.Perturb(), None), interval=1)
    result = pbt.train(pbt.init(jax.random.key(4)), num_updates=NUM_UPDATES)
    np.savez(
        out / "pbt.npz",
        num_devices=population.mesh.size,
        shards=shard_shapes(result.state.members),
        **{f"leaf_{k}": v for k, v in leaves((result.state, result.metrics, result.lineage)).items()},
    )


MEMBER_LEARNING_RATES = (1e-2, 3e-2)


def _member(learning_rate, num_envs: int) -> pr.Anakin:
    pipeline = build(num_envs)
    learner = pipeline.learner
    learner = pr.Learner(learner.network, learner.policy, learner.loss, optax.adam(learning_rate))
    return pr.Anakin(pipeline.env, learner, num_envs=num_envs, rollout_length=6)


def run_members_over_devices(out: pathlib.Path, num_envs: int) -> None:
    """Two members (learning rates), population outer and devices inner: under `shard_map`
    over all devices, a `vmap` over the members of the device-free core, each member's
    environments split over the devices. On one device, each member's pipeline alone."""
    rates, keys = jnp.asarray(MEMBER_LEARNING_RATES), jax.random.split(jax.random.key(5), 2)
    if jax.device_count() == 1:
        states = []
        for rate, key in zip(MEMBER_LEARNING_RATES, keys, strict=True):
            member = _member(rate, num_envs)
            states.append(member.train(member.init(key), num_updates=NUM_UPDATES).state.learner)
        params = jax.tree.map(lambda *x: jnp.stack(x), *[state.params for state in states])
    else:
        mesh = jax.make_mesh((jax.device_count(),), ("devices",))
        split, replicated = jax.sharding.PartitionSpec(None, "devices"), jax.sharding.PartitionSpec()

        def init(rate, key):
            member = _member(rate, num_envs)
            return pr.executors.anakin.init_state(member.env, member.learner, key, num_envs=num_envs * mesh.size)

        def train(rates, learner_states, envs):
            def train_member(rate, learner_state, envs):
                member = _member(rate, num_envs)
                state, _ = pr.executors.anakin.train_steps(
                    member.env,
                    member.learner,
                    pr.AnakinState(learner_state, envs),
                    rollout_length=member.rollout_length,
                    num_updates=NUM_UPDATES,
                    axis_name="devices",
                )
                return state.learner

            return jax.vmap(train_member)(rates, learner_states, envs)

        layout = pr.AnakinState(jax.sharding.NamedSharding(mesh, replicated), jax.sharding.NamedSharding(mesh, split))
        states = jax.jit(jax.vmap(init), out_shardings=layout)(rates, keys)
        trained = jax.jit(
            jax.shard_map(train, mesh=mesh, in_specs=(replicated, replicated, split), out_specs=replicated)
        )(rates, states.learner, states.envs)
        params = trained.params
    np.savez(out / "members.npz", **leaves(params))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=pathlib.Path)
    parser.add_argument("--num-envs", type=int, required=True)
    parser.add_argument("--pmap", action="store_true")
    parser.add_argument("--separate", action="store_true")
    parser.add_argument("--dqn", action="store_true")
    parser.add_argument("--population", action="store_true")
    parser.add_argument("--learners", action="store_true")
    parser.add_argument("--only", nargs="+", help="with --learners, these learners of the registry alone")
    parser.add_argument("--coordinator-address", help="run as one process of a jax.distributed run")
    parser.add_argument("--num-processes", type=int)
    parser.add_argument("--process-id", type=int)
    args = parser.parse_args()
    if args.coordinator_address is not None:
        pr.distributed.initialize(args.coordinator_address, args.num_processes, args.process_id, timeout_s=120)
        args.out = args.out / f"process-{args.process_id}"
        args.out.mkdir()
    run_anakin(args.out, args.num_envs)
    if args.pmap:
        run_pmap(args.out)
    if args.separate:
        run_separate(args.out)
    if args.dqn:
        run_dqn(args.out, args.num_envs)
    if args.population:
        run_population(args.out)
        run_pbt(args.out)
        run_members_over_devices(args.out, args.num_envs)
    if args.learners:
        run_learners(args.out, args.num_envs, args.only)


if __name__ == "__main__":
    main()
