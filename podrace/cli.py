"""The podrace console command.

`podrace train ENV [ALGO]` trains an agent on a built-in environment, any gymnax id
(`gymnax:ID`), a Gymnasium id (`gymnasium:ID`, through the host collector) or an
environment of another JAX package (`brax:ID`, `playground:ID`, `navix:ID`,
`jumanji:ID`, `craftax:ID`, `xminigrid:ID`), with any algorithm of
`podrace.configs.ALGORITHMS`, its flags generated from its configuration's fields where the algorithm
allows. `podrace train catch` runs the Podracer paper's Anakin experiment. `podrace
evaluate CHECKPOINT_DIR` plays the trained agent of a checkpoint and can write a video
of it; `podrace export CHECKPOINT_DIR` writes its deterministic policy as an ONNX model
or as StableHLO. `podrace reproduce NAME` trains a published recipe of
`podrace.recipes` for `--seeds` seeds (5 by default) and judges it against the
published number; the verdict rule asks for at least 5 seeds, and with fewer the
verdict is printed with that caveat.
"""

import argparse
import contextlib
import dataclasses
import json
import pathlib
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import equinox as eqx
import jax
import numpy as np

from . import configs, distributed
from ._validation import unknown_name
from ._version import __version__
from .agent import AbstractAgent
from .checkpoint import Checkpointer
from .compilation import CACHE_VARIABLE, default_compilation_cache, enable_compilation_cache
from .configs.base import flag_name, non_negative_int, positive_float, positive_int, whole_number
from .configs.run import steps_on_host
from .envs import AbstractEnv, NormalizeObservation
from .envs._packages import import_package
from .envs.from_envpool import EnvPoolEnv, quiet_envpool_spaces
from .envs.names import ENVPOOL_PREFIX, GYMNASIUM_PREFIX, check_env_name, env_names_help
from .executors.evaluation import Evaluation, evaluate, evaluate_agent
from .executors.pipeline import AbstractPipeline
from .export import FORMATS, export_policy
from .loggers import SINK_NAMES, make_sinks
from .progress import import_pyplot, plot_learning_curve, train_with_progress


if TYPE_CHECKING:
    from .recipes import Published


# --------------------------------------------------------------------------------------
# Flags: the run's own, and those generated from the configurations' fields.
# --------------------------------------------------------------------------------------


def _flag_type(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """`parse` as an argparse type: its `ValueError` becomes a usage error that names the flag."""

    def flag_type(text: str) -> Any:
        try:
            return parse(text)
        except ValueError as error:
            raise argparse.ArgumentTypeError(str(error)) from None

    return flag_type


def _range(text: str) -> tuple[float, float]:
    parts = text.split(",")
    if len(parts) != 2:
        raise ValueError(f"expected LOW,HIGH (e.g. 1e-4,1e-2), got {text!r}")
    low, high = (positive_float(part) for part in parts)
    if not low < high:
        raise ValueError(f"LOW must be below HIGH, got {text!r}")
    return low, high


def _sink_names(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in SINK_NAMES]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown sinks {unknown}; choose from {', '.join(SINK_NAMES)}")
    return names


_whole_number = _flag_type(whole_number)
_positive_int = _flag_type(positive_int)
_non_negative_int = _flag_type(non_negative_int)
_positive_float = _flag_type(positive_float)


def _executor_name(text: str) -> str:
    if text not in configs.EXECUTORS:
        raise ValueError(unknown_name("executor", text, configs.EXECUTORS))
    return text


# The flags of a run that are not its configuration's: (field of `configs.Run`, type, help).
_RUN_FLAGS: dict[str, list[tuple[str, Callable[[str], Any] | None, str]]] = {
    "seeds": [
        ("seed", _whole_number, "seed of the networks and the run (the first seed, with --seeds)"),
        ("seeds", _positive_int, "train this many seeds side by side as one population"),
    ],
    "executors (by default Anakin, or the host collector for gymnasium:ID)": [
        ("executor", _flag_type(_executor_name), "what runs the learner: anakin, host or sebulba"),
        ("actor_threads", _positive_int, "sebulba: actor threads, each stepping num_envs / actor_threads environments"),
        ("actor_devices", _positive_int, "sebulba: the first local devices act, the learner updates on the others"),
    ],
    "population-based training (of the learning rate, with --seeds 4 or more)": [
        ("pbt", None, "exploit and explore: the lowest quarter copy the top quarter and perturb its learning rate"),
        ("pbt_interval", _positive_int, "updates between PBT's ready steps"),
        ("pbt_learning_rates", _flag_type(_range), "the log-uniform range the learning rates start in, e.g. 1e-4,1e-2"),
    ],
}


def _add_flag(group: Any, name: str, kind: Callable[[str], Any] | None, help_text: str) -> None:
    if kind is None:
        group.add_argument(flag_name(name), dest=name, action=argparse.BooleanOptionalAction, help=help_text)
    else:
        metavar = name.rstrip("_").upper()
        group.add_argument(flag_name(name), dest=name, type=kind, metavar=metavar, help=help_text)


def _setting_fields(family: type[configs.AbstractConfig]) -> list[dataclasses.Field]:
    return [field for field in dataclasses.fields(family) if field.name != "algorithm"]


def _readers() -> dict[str, list[str]]:
    """The algorithms that read each setting, by field name."""
    readers: dict[str, list[str]] = {}
    for family in configs.FAMILIES:
        for field in _setting_fields(family):
            readers.setdefault(field.name, []).extend(family.ALGORITHMS)
    return readers


def _add_setting_flags(train: argparse.ArgumentParser) -> None:
    """A flag for every field of every configuration: first the settings every algorithm has,
    then each family's own (a setting that several families have is listed with the first)."""
    shared = {field.name for field in dataclasses.fields(configs.AbstractConfig)}
    added: set[str] = set()
    common = train.add_argument_group("settings of every algorithm (each defaults to the task's: --show-settings)")
    for family in configs.FAMILIES:
        own = [field for field in _setting_fields(family) if field.name not in shared]
        new = [field for field in own if field.name not in added]
        also = [flag_name(field.name) for field in own if field.name in added]
        description = f"and reads {', '.join(also)}" if also else None
        group = train.add_argument_group(f"{family.__name__}: {', '.join(family.ALGORITHMS)}", description)
        for field in (field for field in _setting_fields(family) if field.name in shared - added):
            _add_flag(common, field.name, _parser_of(field), field.metadata["help"])
            added.add(field.name)
        for field in new:
            _add_flag(group, field.name, _parser_of(field), field.metadata["help"])
            added.add(field.name)


def _parser_of(field: dataclasses.Field) -> Callable[[str], Any] | None:
    parse = field.metadata["parse"]
    return None if parse is None else _flag_type(parse)


def _add_train_parser(commands: Any) -> None:
    train = commands.add_parser(
        "train",
        help="train an agent",
        description="Trains an agent; the flags left out take the task's defaults.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=_tuned_tasks_help(),
    )
    train.add_argument("env", metavar="ENV", help=env_names_help())
    train.add_argument(
        "algo",
        metavar="ALGO",
        nargs="?",
        choices=configs.ALGORITHMS,
        help=f"one of {', '.join(configs.ALGORITHMS)} (by default the environment's: "
        + ", ".join(f"{env} {algo}" for env, algo in configs.DEFAULT_ALGORITHMS.items())
        + ")",
    )
    for group_name, flags in _RUN_FLAGS.items():
        group = train.add_argument_group(group_name)
        for name, kind, help_text in flags:
            _add_flag(group, name, kind, help_text)
    _add_setting_flags(train)
    output = train.add_argument_group("output")
    output.add_argument("--output", type=pathlib.Path, help="where to save the learning curve (ENV_learning_curve.png)")
    output.add_argument("--log", type=_sink_names, default=[], help=f"metric sinks, from {', '.join(SINK_NAMES)}")
    output.add_argument("--log-dir", type=pathlib.Path, default=pathlib.Path("logs"), help="where the sinks write")
    output.add_argument("--checkpoint-dir", type=pathlib.Path, help="save checkpoints of the whole state here")
    output.add_argument(
        "--checkpoint-every", type=_positive_int, help="updates between checkpoints (a multiple of --updates-per-call)"
    )
    output.add_argument(
        "--resume", action="store_true", help="go on from the latest checkpoint in --checkpoint-dir, as it was built"
    )
    output.add_argument("--show-settings", action="store_true", help="print the run's settings and exit")
    _add_compilation_cache_flag(train)
    launch = train.add_argument_group(
        "multi-process launch (jax.distributed; every process runs the same command, process 0 prints)"
    )
    launch.add_argument("--coordinator-address", help="host:port of process 0, reachable from every process")
    launch.add_argument("--num-processes", type=_positive_int, help="the number of processes")
    launch.add_argument("--process-id", type=_non_negative_int, help="this process's index, from 0")
    launch.add_argument(
        "--coordinator-timeout",
        type=_positive_float,
        default=60.0,
        help="seconds to wait for the coordinator to answer and for every process to join (default 60)",
    )
    train.set_defaults(run=_train)


def _tuned_tasks_help() -> str:
    lines = ["defaults tested to solve the task (9 of the seeds 0-9 reach the return):"]
    for (env, algo), tuned in configs.TUNED.items():
        measure = "" if tuned.measure == "return" else f" ({tuned.measure})"
        lines.append(f"  {env} {algo}: {tuned.solved_at:g}{measure}")
    lines.append("other pairs start from generic defaults.")
    return "\n".join(lines)


def _add_evaluate_parser(commands: Any) -> None:
    evaluate_ = commands.add_parser("evaluate", help="play the trained agent of a checkpoint")
    evaluate_.add_argument("checkpoint_dir", metavar="CHECKPOINT_DIR", type=pathlib.Path, help="a --checkpoint-dir")
    evaluate_.add_argument("--step", type=_non_negative_int, help="which checkpoint (the latest by default)")
    evaluate_.add_argument("--num-episodes", type=_positive_int, default=100, help="episodes to play")
    evaluate_.add_argument("--seed", type=_whole_number, default=0, help="seed of the evaluation")
    evaluate_.add_argument("--member", type=_non_negative_int, default=0, help="the population member of the video")
    evaluate_.add_argument("--video", type=pathlib.Path, help="write one episode to this .gif or .mp4")
    _add_compilation_cache_flag(evaluate_)
    evaluate_.set_defaults(run=_evaluate)


def _add_export_parser(commands: Any) -> None:
    export = commands.add_parser(
        "export", help="write the trained agent's deterministic policy as an ONNX model or as StableHLO"
    )
    export.add_argument("checkpoint_dir", metavar="CHECKPOINT_DIR", type=pathlib.Path, help="a --checkpoint-dir")
    export.add_argument("--format", choices=FORMATS, default="onnx", help="onnx (extra podrace[onnx]) or stablehlo")
    export.add_argument(
        "--out", type=pathlib.Path, help="the model's path (default: ENV_ALGO.FORMAT in the current directory)"
    )
    export.add_argument("--step", type=_non_negative_int, help="which checkpoint (the latest by default)")
    export.add_argument("--member", type=_non_negative_int, default=0, help="the population member to export")
    _add_compilation_cache_flag(export)
    export.set_defaults(run=_export)


def _add_reproduce_parser(commands: Any) -> None:
    reproduce = commands.add_parser(
        "reproduce",
        help="run a published experiment's recipe for several seeds and judge it against the published number",
        description="Trains a recipe (the published hyperparameters, podrace's faithful configuration) for "
        "--seeds seeds as one compiled population, prints the mean and standard deviation over seeds against "
        "the published value with a verdict, and saves NAME.json and the learning curves NAME.png in --out.",
    )
    reproduce.add_argument("name", metavar="NAME", nargs="?", help="a recipe (see --list)")
    reproduce.add_argument("--list", action="store_true", help="list every recipe, published and last measured")
    reproduce.add_argument("--seeds", type=_positive_int, default=5, help="seeds to run (default 5)")
    reproduce.add_argument("--seed", type=_whole_number, default=0, help="the first seed")
    reproduce.add_argument(
        "--out", type=pathlib.Path, default=pathlib.Path("reproductions"), help="where results are saved and listed"
    )
    reproduce.add_argument("--no-plot", action="store_true", help="do not draw the learning curves")
    _add_compilation_cache_flag(reproduce)
    reproduce.set_defaults(run=_reproduce)


def _add_compilation_cache_flag(parser: argparse.ArgumentParser) -> None:
    cache = parser.add_mutually_exclusive_group()
    cache.add_argument(
        "--compilation-cache",
        type=pathlib.Path,
        metavar="DIR",
        help="where to keep the compiled programs, so that the next run of the same settings loads them "
        f"(podrace.enable_compilation_cache; default ${CACHE_VARIABLE}, else ~/.cache/podrace)",
    )
    cache.add_argument(
        "--no-compilation-cache",
        action="store_true",
        help=f"compile every program afresh and keep none (as does an empty ${CACHE_VARIABLE})",
    )


def _compilation_cache(args: argparse.Namespace) -> str | None:
    """The directory where the command keeps its compiled programs, or `None` for none."""
    if args.no_compilation_cache:
        return None
    if args.compilation_cache is not None:
        return str(args.compilation_cache)
    return default_compilation_cache()


# --------------------------------------------------------------------------------------
# Settings: the task's defaults, the flags given, and a resumed run's stored settings.
# --------------------------------------------------------------------------------------


def _given(args: argparse.Namespace) -> dict[str, Any]:
    """The settings named on the command line, the run's and the configuration's."""
    names = {name for flags in _RUN_FLAGS.values() for name, _, _ in flags} | set(_readers())
    return {name: getattr(args, name) for name in names if getattr(args, name) is not None}


def _with_given(run: configs.Run, given: dict[str, Any]) -> configs.Run:
    """`run` with the settings given on the command line, refusing those its algorithm does not read."""
    own = {field.name for field in dataclasses.fields(run.config)}
    run_fields = {field.name for field in dataclasses.fields(run)}
    algorithm = run.config.algorithm
    unread = sorted(set(given) - own - run_fields)
    if unread:
        readers = ", ".join(_readers()[unread[0]])
        raise ValueError(
            f"{algorithm} does not read {flag_name(unread[0])} (a setting of {readers}); "
            f"leave it out. The settings of {algorithm}: podrace train ENV {algorithm} --show-settings."
        )
    changes = {name: value for name, value in given.items() if name in own}
    config = dataclasses.replace(run.config, **changes) if changes else run.config
    return dataclasses.replace(run, config=config, **{name: given[name] for name in run_fields & set(given)})


def _run(args: argparse.Namespace) -> tuple[configs.Run, Checkpointer | None]:
    """The run the command line asks for and, with --checkpoint-dir, its checkpointer."""
    if args.resume and args.checkpoint_dir is None:
        raise ValueError("--resume needs --checkpoint-dir: the directory of the run to go on with.")
    check_env_name(args.env)
    algo = args.algo or configs.default_algorithm(args.env)
    checkpointer = None if args.checkpoint_dir is None else Checkpointer(args.checkpoint_dir)
    given = _given(args)
    if not args.resume:
        return _with_given(configs.Run(args.env, configs.default_config(args.env, algo)), given), checkpointer
    assert checkpointer is not None
    if checkpointer.latest_step is None:
        raise ValueError(f"--resume: there is no checkpoint in {args.checkpoint_dir}.")
    stored = _stored_run(checkpointer.config())
    settings = vars(stored) | configs.settings_of(stored.config)
    changed = {name: value for name, value in given.items() if name != "num_updates" and settings.get(name) != value}
    if (args.env, algo) != (stored.env, stored.config.algorithm) or changed:
        raise ValueError(
            f"--resume: the run in {args.checkpoint_dir} is {stored.env} {stored.config.algorithm}"
            + "".join(f", {flag_name(name)} {settings.get(name)}" for name in changed)
            + "; resume it with the same ENV, ALGO and settings (--num-updates may grow)."
        )
    return _with_given(stored, given), checkpointer


def _stored_run(config: dict[str, Any]) -> configs.Run:
    """The run a checkpoint's config stores (under "settings" before configurations)."""
    return configs.Run.from_json(config["run"] if "run" in config else config["settings"])


def _print_settings(run: configs.Run, say: Callable[..., None]) -> None:
    algorithm = run.config.algorithm
    defaults = "tuned" if (run.env, algorithm) in configs.TUNED else "generic"
    say(f"{run.env} {algorithm} ({defaults} defaults, {type(run.config).__name__}):")
    own: dict[str, Any] = {"seed": run.seed, "seeds": run.seeds}
    if run.executor is not None:
        own |= {"executor": run.executor}
    if run.executor == "sebulba":
        own |= {"actor_threads": run.actor_threads, "actor_devices": run.actor_devices}
    if run.pbt:
        own |= {"pbt": run.pbt, "pbt_interval": run.pbt_interval, "pbt_learning_rates": run.pbt_learning_rates}
    settings = own | {name: value for name, value in configs.settings_of(run.config).items() if name != "algorithm"}
    say("  " + ", ".join(f"{name}={value}" for name, value in settings.items()))


# --------------------------------------------------------------------------------------
# train
# --------------------------------------------------------------------------------------


def _join_processes(args: argparse.Namespace) -> None:
    """Starts `jax.distributed` when the launch flags are given (all three, or none)."""
    flags = (args.coordinator_address, args.num_processes, args.process_id)
    if all(flag is None for flag in flags):
        return
    if any(flag is None for flag in flags):
        raise ValueError("--coordinator-address, --num-processes and --process-id go together: give all three.")
    distributed.initialize(
        args.coordinator_address, args.num_processes, args.process_id, timeout_s=args.coordinator_timeout
    )


def _host_vector_env(name: str, num_envs: int, seed: int) -> Any:
    """A Gymnasium vector environment of `num_envs` of `gymnasium:ID` or `envpool:ID` (an EnvPool
    pool through its Gymnasium interface, seeded from `seed`)."""
    if name.startswith(GYMNASIUM_PREFIX):
        import gymnasium

        return gymnasium.make_vec(name.removeprefix(GYMNASIUM_PREFIX), num_envs=num_envs)
    envpool = import_package("envpool", extra="envpool", owner=name)
    return envpool.make_gymnasium(name.removeprefix(ENVPOOL_PREFIX), num_envs=num_envs, seed=seed)


def _make_host_run(run: configs.Run) -> tuple[AbstractPipeline, jax.Array]:
    """The host or Sebulba pipeline of a run on host environments and the key of its learner."""
    from .envs.gymnasium import space_from_gymnasium
    from .executors.host import GymnasiumCollector, HostPipeline
    from .executors.sebulba import Sebulba

    config = run.config
    if config.normalization() is not None:
        raise ValueError(
            "--normalize-observations and --normalize-rewards normalise inside on-device pipelines; host "
            "environments (gymnasium:ID, or envpool:ID with --executor host or sebulba) take their own "
            "normalisation wrappers."
        )
    threads = run.actor_threads if run.executor == "sebulba" else 1
    if config.num_envs % threads:
        raise ValueError(f"--num-envs {config.num_envs} does not split evenly over --actor-threads {threads}.")
    per_thread = config.num_envs // threads
    # The threads of every process, numbered across processes: each steps environments of its own seeds.
    slots = [jax.process_index() * threads + i for i in range(threads)]
    first_seed = run.seed * config.num_envs * jax.process_count()
    envs = [_host_vector_env(run.env, per_thread, first_seed + slot * per_thread) for slot in slots]
    action_space = space_from_gymnasium(envs[0].single_action_space)
    network_key, run_key, collector_key = jax.random.split(jax.random.key(run.seed), 3)
    learner = config.learner(action_space, tuple(envs[0].single_observation_space.shape or ()), network_key)
    collectors = [
        GymnasiumCollector(
            env,
            learner,
            rollout_length=config.rollout_length,
            key=jax.random.fold_in(collector_key, slot) if threads * jax.process_count() > 1 else collector_key,
            # EnvPool seeds a pool where it is made, above.
            seed=run.seed + slot * per_thread if run.env.startswith(GYMNASIUM_PREFIX) else None,
        )
        for slot, env in zip(slots, envs, strict=True)
    ]
    if run.executor != "sebulba":
        return HostPipeline(learner, collectors[0]), run_key
    devices = jax.local_devices()
    if run.actor_devices >= len(devices) and len(devices) > 1:
        raise ValueError(
            f"--actor-devices {run.actor_devices} leaves none of the {len(devices)} local devices to the learner."
        )
    return Sebulba(learner, collectors, actor_devices=devices[: run.actor_devices]), run_key


def _make_run(run: configs.Run) -> tuple[AbstractPipeline, jax.Array]:
    if run.runs_on_host:
        return _make_host_run(run)
    return run.make()


def _train(args: argparse.Namespace) -> int:
    _join_processes(args)
    # Every process runs the same program; process 0 alone prints, plots and logs.
    coordinator = distributed.is_coordinator()
    say = print if coordinator else lambda *_: None
    run, checkpointer = _run(args)
    config = run.config
    with contextlib.ExitStack() as stack:
        if checkpointer is not None:
            stack.enter_context(checkpointer)
        _print_settings(run, say)
        if args.show_settings:
            return 0
        if coordinator:
            import_pyplot()  # the learning curve is drawn at the end: fail before training without matplotlib
        pipeline, key = _make_run(run)
        state = pipeline.init(key)
        start = 0
        if args.resume:
            assert checkpointer is not None
            start = checkpointer.latest_step or 0
            state = checkpointer.restore(state)
            say(f"resumed from update {start} in {checkpointer.directory}")
        remaining = config.num_updates - start
        if remaining <= 0:
            say(f"nothing to do: the run has done {start} of its {config.num_updates} updates.")
            return 0
        devices = pipeline.num_devices
        members = f", {run.seeds} seeds side by side" if run.seeds > 1 else ""
        # Host environments are stepped by each process (Sebulba's split over its actor
        # threads); a JAX environment's batch is per device.
        if run.runs_on_host:
            threads = f" over {run.actor_threads} actor threads" if run.executor == "sebulba" else ""
            envs = f"{config.num_envs} envs per process{threads}"
        else:
            envs = f"{config.num_envs} envs per device"
        say(
            f"{run.env} {config.algorithm} on {devices} {jax.default_backend()} device(s) in "
            f"{jax.process_count()} process(es): {envs}, rollouts of "
            f"{config.rollout_length}, {remaining} updates "
            f"({min(config.updates_per_call, remaining)} per call){members}."
        )
        resume_from = start if args.resume else None
        sinks = make_sinks(args.log, args.log_dir, resume_from=resume_from) if args.log and coordinator else []
        for sink in sinks:
            stack.enter_context(sink)
        state, log = train_with_progress(
            pipeline,
            state,
            num_updates=remaining,
            updates_per_call=config.updates_per_call,
            show=coordinator,
            sinks=sinks,
            checkpointer=checkpointer,
            checkpoint_every=args.checkpoint_every,
            config={"run": run.to_json(), "podrace": __version__},
            start_update=start,
            on_call=_lineage_writer(args.log_dir, fresh=not args.resume) if run.pbt and coordinator else None,
        )
        last = log.mean_episode_return[-1][np.isfinite(log.mean_episode_return[-1])]
        say(f"compile: {log.compile_seconds:.2f} s")
        say(f"frames per second: {log.frames_per_second:.3g}")
        final_return = f"{last.mean():.3f}" if last.size else "none (no episode ended)"
        last_call = remaining % config.updates_per_call or min(config.updates_per_call, remaining)
        say(f"mean episode reward (last {last_call} updates): {final_return}")
        if pipeline.num_members > 1:
            returns = ", ".join(f"{value:.4g}" for value in log.mean_episode_return[-1])
            say(f"by seed ({run.seed} to {run.seed + run.seeds - 1}): {returns}")
        if run.pbt:
            rates = ", ".join(f"{value:.3g}" for value in np.asarray(state.hyperparameters["learning_rate"]))
            say(f"learning rates by member: {rates}")
            say(f"PBT lineage: {args.log_dir / _LINEAGE_FILE}")
        if coordinator:
            output = args.output or pathlib.Path(f"{_slug(run.env)}_learning_curve.png")
            path = plot_learning_curve(log, output, title=f"{config.algorithm} on {run.env}")
            say(f"learning curve: {path}")
        if checkpointer is not None:
            checkpointer.wait()
            say(f"checkpoint: {checkpointer.directory} (update {checkpointer.latest_step})")
    return 0


_LINEAGE_FILE = "pbt_lineage.jsonl"


def _lineage_writer(log_dir: pathlib.Path, *, fresh: bool) -> Callable[[int, Any], None]:
    """Appends each call's PBT copies to `log_dir/pbt_lineage.jsonl`, one JSON object a line
    (emptied first unless the run resumes)."""
    path = log_dir / _LINEAGE_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    if fresh:
        path.write_text("")

    def write(updates_done: int, result: Any) -> None:
        del updates_done
        with path.open("a") as file:
            file.writelines(json.dumps(event) + "\n" for event in result.lineage.events())

    return write


def _slug(env: str) -> str:
    return env.replace(":", "_").replace("/", "_")


# --------------------------------------------------------------------------------------
# evaluate
# --------------------------------------------------------------------------------------


def _restore(checkpoint_dir: pathlib.Path, step: int | None) -> tuple[configs.Run, AbstractPipeline, Any, int]:
    """The run, pipeline and state of a checkpoint (the latest one by default)."""
    with Checkpointer(checkpoint_dir) as checkpointer:
        step = checkpointer.latest_step if step is None else step
        if step is None:
            raise ValueError(f"There is no checkpoint in {checkpoint_dir}.")
        run = _stored_run(checkpointer.config(step=step))
        pipeline, key = _make_run(run)
        state = checkpointer.restore(pipeline.init(key), step=step)
        return run, pipeline, state, step


def _acting_parts(
    run: configs.Run, pipeline: AbstractPipeline, state: Any, member: int
) -> tuple[AbstractEnv | None, Any]:
    """The evaluation environment (`None` for a run on host environments; a pool of its own
    for `envpool:ID` on Anakin, whose training pool no evaluation can share) and the
    network of member `member` of a restored run."""
    if member and pipeline.num_members == 1:
        raise ValueError(
            f"--member {member}: the checkpoint holds one agent, not a population (it was trained with one seed); "
            "drop --member."
        )
    if member >= pipeline.num_members:
        raise ValueError(f"--member {member}: the population has {pipeline.num_members} members.")
    if _evaluates_in_a_pool_of_its_own(run):
        env = EnvPoolEnv(run.env.removeprefix(ENVPOOL_PREFIX), seed=EVALUATION_POOL_SEED)
        return env, pipeline.network_at(state, member)
    return pipeline.evaluation_env(state, member), pipeline.network_at(state, member)


EVALUATION_POOL_SEED = 1_000_003
"""The seed of the pool that `podrace evaluate` plays an `envpool:ID` run of Anakin in."""


def _evaluates_in_a_pool_of_its_own(run: configs.Run) -> bool:
    return run.env.startswith(ENVPOOL_PREFIX) and not run.runs_on_host


def _evaluate(args: argparse.Namespace) -> int:
    run, pipeline, state, step = _restore(args.checkpoint_dir, args.step)
    print(f"{run.env} {run.config.algorithm}, checkpoint {step} of {args.checkpoint_dir}")
    policy = run.config.evaluation_policy()
    eval_key, video_key = jax.random.split(jax.random.key(args.seed))
    env, network = _acting_parts(run, pipeline, state, args.member)
    # Each member plays in its own evaluation environment (its own normalisation statistics).
    searches_in_jax = isinstance(env, AbstractEnv) and not isinstance(env, EnvPoolEnv)
    search_config = run.config if isinstance(run.config, configs.AbstractSearchConfig) and searches_in_jax else None
    if search_config is not None:
        # A search agent plays with its search, without the noise it explores with.
        search = search_config.evaluation_search()
        returns = np.stack(
            [
                evaluate_agent(
                    *_searching_agent(pipeline, state, member, search), num_episodes=args.num_episodes, key=eval_key
                ).returns
                for member in range(pipeline.num_members)
            ]
        )
        played_by = (
            f"the agent's {search_config.search} search of {search_config.num_simulations} simulations, no noise"
        )
    else:
        if isinstance(env, EnvPoolEnv):  # a pool of its own (see `_acting_parts`)
            episodes = evaluate(env, network, policy, num_episodes=args.num_episodes, key=eval_key)
        else:
            episodes = pipeline.evaluate(state, Evaluation(policy, num_episodes=args.num_episodes, key=eval_key))
        returns = np.asarray(episodes.returns).reshape(pipeline.num_members, -1)
        played_by = f"{type(policy).__name__} policy"
    for member, member_returns in enumerate(returns):
        label = f"seed {run.seed + member}: " if len(returns) > 1 else ""
        print(
            f"{label}mean return {member_returns.mean():.3f} +- {member_returns.std():.3f} over "
            f"{args.num_episodes} episodes ({played_by})"
        )
    if args.video is not None:
        if search_config is not None:
            from . import video

            searcher = _searching_agent(pipeline, state, args.member, search_config.evaluation_search())
            video.write_video(video.record_agent_episode(*searcher, key=video_key), args.video)
        else:
            _write_video(run.env, run.seed, env, network, policy, video_key, args.video)
        print(f"video: {args.video}" + (f" ({played_by})" if search_config is not None else ""))
    return 0


def _searching_agent(
    pipeline: AbstractPipeline, state: Any, member: int, search: Any
) -> tuple[AbstractEnv, AbstractAgent]:
    """Member `member`'s evaluation environment and its search agent, searching with `search`."""
    env = pipeline.evaluation_env(state, member)
    assert env is not None  # a JAX environment: the caller checked
    return env, eqx.tree_at(lambda agent: agent.search, pipeline.agent_at(state, member), search)


def _write_video(
    env_name: str,
    seed: int,
    env: AbstractEnv | None,
    network: Any,
    policy: Any,
    key: jax.Array,
    path: pathlib.Path,
) -> None:
    """One episode of `network` as a video: in `env`, or in the Gymnasium environment of a `gymnasium:ID` run, or
    an EnvPool pool of its own for an `envpool:ID` run."""
    from . import video

    if env_name.startswith(GYMNASIUM_PREFIX):
        frames = video.record_gymnasium_episode(
            env_name.removeprefix(GYMNASIUM_PREFIX), network, policy, key=key, seed=seed
        )
    elif env_name.startswith(ENVPOOL_PREFIX):
        frames = video.record_envpool_episode(
            env_name.removeprefix(ENVPOOL_PREFIX), network, policy, key=key, seed=EVALUATION_POOL_SEED
        )
    else:
        assert env is not None
        frames = video.record_episode(env, network, policy, key=key)
    video.write_video(frames, path)


# --------------------------------------------------------------------------------------
# export
# --------------------------------------------------------------------------------------


def _export(args: argparse.Namespace) -> int:
    if args.format == "onnx":  # before anything is restored
        import_package("jax2onnx", extra="onnx", owner="podrace export --format onnx")
    run, pipeline, state, step = _restore(args.checkpoint_dir, args.step)
    env, network = _acting_parts(run, pipeline, state, args.member)
    normalization = env if isinstance(env, NormalizeObservation) else None
    path = args.out or pathlib.Path(f"{_slug(run.env)}_{run.config.algorithm}.{args.format}")
    policy = run.config.evaluation_policy()
    exported = export_policy(
        network, policy, pipeline.observation_spec, path, format=args.format, normalization=normalization
    )
    print(
        f"{run.env} {run.config.algorithm}, checkpoint {step} of {args.checkpoint_dir}: {type(policy).__name__} policy"
    )
    print(f"model: {exported.path}")
    print(f"description: {exported.description}")
    return 0


# --------------------------------------------------------------------------------------
# reproduce
# --------------------------------------------------------------------------------------


def _published_value(published: "Published") -> str:
    """The published value and spread, or a dash where the source publishes no result."""
    if published.value is None:
        return "-"
    return f"{published.value:g}" + ("" if published.spread is None else f" ± {published.spread:g}")


def _reproduce(args: argparse.Namespace) -> int:
    from . import recipes, reproduction

    if args.list:
        measured = reproduction.load(args.out) if args.out.is_dir() else {}
        width = max(len(name) for name in recipes.RECIPES)
        print(f"{'recipe':{width}} {'algorithm':20} {'published':>18} {f'measured ({args.out})':>26}")
        for name, recipe in recipes.RECIPES.items():
            published = recipe.published
            run = measured.get(name)
            last = "-" if run is None else f"{run.mean:.4g} ± {run.std:.2g} ({len(run.seeds)} seeds)"
            print(f"{name:{width}} {recipe.settings.algorithm:20} {_published_value(published):>18} {last:>26}")
            if recipe.cannot_fail:
                print(f"{'':{width}}   cannot fail its verdict: {recipe.cannot_fail}")
        return 0
    if args.name is None:
        raise ValueError("name a recipe to run, or list them with podrace reproduce --list.")
    try:
        recipe = recipes.find_recipe(args.name)
    except KeyError as error:
        raise ValueError(error.args[0]) from None
    published = recipe.published
    print(f"{recipe.name}: {recipe.settings.algorithm} on {recipe.suite} {recipe.env_id}, {args.seeds} seeds")
    print(f"published: {_published_value(published)}")
    print(f"source: {published.source}")
    run = reproduction.reproduce(recipe, num_seeds=args.seeds, seed=args.seed)
    paths = reproduction.save(run, args.out, plot=not args.no_plot)
    scores = ", ".join(f"{score:.4g}" for score in run.scores)
    print(f"scores by seed ({', '.join(map(str, run.seeds))}): {scores}")
    print(f"podrace: {run.mean:.4g} ± {run.std:.2g} over {len(run.seeds)} seeds in {run.wall_seconds:.0f} s")
    if run.threshold is None:
        print(f"verdict: none, nothing is published (random policy {run.random_return:.4g})")
    else:
        verdict = "reaches the published result" if run.reaches_published else "below published"
        print(f"verdict: {verdict} (threshold {run.threshold:.4g}; random policy {run.random_return:.4g})")
    if len(run.seeds) < 5:
        print("(the verdict rule asks for at least 5 seeds)")
    print("saved: " + ", ".join(map(str, paths)))
    return 0


# --------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `podrace` command."""
    parser = argparse.ArgumentParser(prog="podrace", description=(__doc__ or "").splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    _add_train_parser(commands)
    _add_evaluate_parser(commands)
    _add_export_parser(commands)
    _add_reproduce_parser(commands)
    args = parser.parse_args(argv)
    if steps_on_host(getattr(args, "env", ""), getattr(args, "executor", None)):
        # Host acting runs one small program a step, which JAX's CPU client runs fastest in the calling
        # thread (set before JAX's first computation; see docs/scaling.md).
        jax.config.update("jax_cpu_enable_async_dispatch", False)
    cache = _compilation_cache(args)
    if cache is not None:
        enable_compilation_cache(cache)
    try:
        with contextlib.ExitStack() as stack:
            if getattr(args, "env", "").startswith(ENVPOOL_PREFIX):
                stack.enter_context(quiet_envpool_spaces())
            return args.run(args)
    except (ValueError, ImportError, ConnectionError, FileNotFoundError) as error:
        print(f"podrace: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
