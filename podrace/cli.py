"""The podrace console command.

`podrace train catch` runs the Podracer paper's Anakin experiment: TD(lambda)
Q-learning with a greedy policy on Catch, 128 environments per device, rollouts of 16
steps, Adam at 1e-4, lambda 0.99.
"""

import argparse
import math
import pathlib
import sys

import jax
import optax

from . import distributed
from .envs import Catch
from .executors.anakin import Anakin
from .learners import Learner
from .losses import TDLambdaQLoss
from .networks import FeedForwardNetwork, MLPTorso, QValueHead
from .policies import Greedy
from .progress import plot_learning_curve, train_with_progress


def _positive_int(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {value}")
    return value


def _positive_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive finite number, got {text}")
    return value


def _non_negative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a non-negative integer, got {value}")
    return value


def _join_processes(args: argparse.Namespace) -> None:
    """Starts `jax.distributed` when the launch flags are given (all three, or none)."""
    flags = (args.coordinator_address, args.num_processes, args.process_id)
    if all(flag is None for flag in flags):
        return
    if any(flag is None for flag in flags):
        raise ValueError("--coordinator-address, --num-processes and --process-id go together: give all three.")
    distributed.initialize(args.coordinator_address, args.num_processes, args.process_id)


def _train_catch(args: argparse.Namespace) -> int:
    _join_processes(args)
    # Every process runs the same program; process 0 alone prints and plots.
    say = print if distributed.is_coordinator() else lambda *_: None
    env = Catch()
    network_key, head_key, run_key = jax.random.split(jax.random.key(args.seed), 3)
    network = FeedForwardNetwork(
        MLPTorso(env.observation_space.shape, (256,), key=network_key),
        QValueHead(256, env.action_space.num_values, key=head_key),
    )
    learner = Learner(
        network, Greedy(), TDLambdaQLoss(discount=args.discount, lambda_=args.lambda_), optax.adam(args.learning_rate)
    )
    pipeline = Anakin(env, learner, num_envs=args.num_envs, rollout_length=args.rollout_length)
    say(
        f"Catch on {pipeline.num_devices} {jax.default_backend()} device(s) in {jax.process_count()} process(es): "
        f"{args.num_envs} envs per device, rollouts of {args.rollout_length}, {args.num_updates} updates "
        f"({args.updates_per_call} per call)."
    )
    _, log = train_with_progress(
        pipeline,
        pipeline.init(run_key),
        num_updates=args.num_updates,
        updates_per_call=args.updates_per_call,
        show=distributed.is_coordinator(),
    )
    final_return = float(log.mean_episode_return[-1])
    say(f"compile: {log.compile_seconds:.2f} s")
    say(f"frames per second: {log.frames_per_second:.3g}")
    say(f"mean episode reward (last {args.updates_per_call} updates): {final_return:.3f}")
    if distributed.is_coordinator():
        path = plot_learning_curve(log, args.output, title="TD(lambda) Q-learning on Catch")
        say(f"learning curve: {path}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `podrace` command."""
    parser = argparse.ArgumentParser(prog="podrace", description=(__doc__ or "").splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    train = commands.add_parser("train", help="train an agent")
    experiments = train.add_subparsers(dest="experiment", required=True)
    catch = experiments.add_parser("catch", help="the Anakin TD(lambda) agent on Catch")
    catch.add_argument("--seed", type=int, default=0, help="PRNG seed of the network and the run")
    catch.add_argument("--num-updates", type=_positive_int, default=3000, help="total learner updates")
    catch.add_argument("--updates-per-call", type=_positive_int, default=100, help="updates compiled into one call")
    catch.add_argument("--num-envs", type=_positive_int, default=128, help="environments per device")
    catch.add_argument("--rollout-length", type=_positive_int, default=16, help="environment steps per update")
    catch.add_argument("--learning-rate", type=_positive_float, default=1e-4, help="Adam step size")
    catch.add_argument("--discount", type=float, default=1.0, help="agent discount in [0, 1]")
    catch.add_argument(
        "--lambda", dest="lambda_", type=float, default=0.99, help="TD(lambda) trace coefficient in [0, 1]"
    )
    catch.add_argument(
        "--output",
        type=pathlib.Path,
        default=pathlib.Path("catch_learning_curve.png"),
        help="where to save the learning curve",
    )
    launch = catch.add_argument_group(
        "multi-process launch (jax.distributed; every process runs the same command, process 0 prints)"
    )
    launch.add_argument("--coordinator-address", help="host:port of process 0, reachable from every process")
    launch.add_argument("--num-processes", type=_positive_int, help="the number of processes")
    launch.add_argument("--process-id", type=_non_negative_int, help="this process's index, from 0")
    catch.set_defaults(run=_train_catch)
    args = parser.parse_args(argv)
    try:
        return args.run(args)
    except (ValueError, ImportError, ConnectionError) as error:
        print(f"podrace: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
