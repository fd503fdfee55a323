"""The `podrace` command: every environment with every algorithm, checkpoints, logs, evaluation."""

import contextlib
import json
import os
import pathlib
import re
import subprocess
import sys
import time

import jax
import numpy as np
import pytest

import podrace as pr
from podrace import cli, configs
from podrace.checkpoint import Checkpointer
from podrace.envs.names import BUILT_IN_ENVS, make_env

from . import helpers


# A run small enough to compile and train in seconds (Pendulum's PPO adds --num-minibatches 2).
TINY = [
    *("--num-updates", "2", "--updates-per-call", "1", "--hidden", "8"),
    *("--num-envs", "4", "--rollout-length", "4"),
]


def test_train_catch_prints_its_measurements_and_saves_the_learning_curve(tmp_path, capsys):
    output = tmp_path / "c.png"
    argv = ["train", "catch", "--num-updates", "200", "--updates-per-call", "100", "--output", str(output)]
    assert cli.main(argv) == 0
    printed = capsys.readouterr().out
    # The Podracer paper's configuration by default.
    assert "catch td-lambda (tuned defaults, RolloutQConfig)" in printed, printed
    assert "128 envs per device" in printed and "rollouts of 16" in printed, printed
    assert "learning_rate=0.0001" in printed and "discount=1.0" in printed and "lambda_=0.99" in printed, printed
    for line in ("compile: ", "frames per second: ", "mean episode reward (last 100 updates): "):
        assert line in printed, printed
    reward = float(printed.split("mean episode reward (last 100 updates): ")[1].split()[0])
    assert -1.0 <= reward <= 1.0
    assert f"learning curve: {output}" in printed
    assert output.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")


@pytest.mark.parametrize("env", BUILT_IN_ENVS)
@pytest.mark.parametrize("algo", configs.ALGORITHMS)
def test_every_built_in_env_builds_with_every_algorithm_or_is_refused_clearly(env, algo):
    run = helpers.cli_run(env, algo)
    continuous = env == "pendulum"
    if continuous and isinstance(run.config.evaluation_policy(), pr.policies.Greedy):
        with pytest.raises(ValueError, match="learns Q-values of discrete actions"):
            run.make()
    elif not continuous and isinstance(run.config, configs.TD3Config):
        with pytest.raises(ValueError, match="learns continuous actions"):
            run.make()
    elif continuous and isinstance(run.config, configs.AbstractSearchConfig):
        with pytest.raises(ValueError, match="searches over discrete actions"):
            run.make()
    else:
        pipeline, _ = run.make()
        assert pipeline.learner.initial_agent().network.output_type is not None
        if algo == "sac":  # SAC of the action space
            expected = pr.learners.SACLearner if continuous else pr.learners.DiscreteSACLearner
            assert isinstance(pipeline.learner, expected)


@pytest.mark.parametrize(
    "command",
    [
        # td-lambda, q-learning and a2c train in the tests below.
        *(["catch", algo] for algo in ("dqn", "reinforce", "ppo", "vtrace")),
        *([env] for env in BUILT_IN_ENVS if env not in ("catch", "pendulum")),  # each with its default algorithm
        ["pendulum", "a2c"],
        ["pendulum", "sac"],
        ["catch", "sac", "--target-entropy", "0.5"],
        ["cartpole", "pqn", "--layer-norm"],
        ["catch", "c51", "--num-atoms", "11", "--v-min", "-1", "--v-max", "1"],
        ["catch", "qr-dqn", "--num-quantiles", "8", "--double"],
        ["catch", "ppo", "--core", "lstm"],
        ["catch", "td-lambda", "--core", "gru"],
        ["pendulum", "--num-minibatches", "2"],
        ["gymnax:MountainCar-v0", "vtrace"],
        ["gymnasium:CartPole-v1", "a2c"],
    ],
    ids=" ".join,
)
def test_train_runs(command, tmp_path, capsys):
    argv = ["train", *command, *TINY, "--output", str(tmp_path / "c.png")]
    if command[0] == "deep-sea" or command[1:] == ["sac"]:  # replay needs a few transitions first
        argv += ["--min-replay-size", "8", "--batch-size", "4"]
    assert cli.main(argv) == 0, capsys.readouterr().err
    printed = capsys.readouterr().out
    assert "mean episode reward (last 1 updates): " in printed, printed
    assert (tmp_path / "c.png").exists()


def test_a_continuous_env_refuses_q_learning_with_a_message(capsys):
    assert cli.main(["train", "pendulum", "dqn", *TINY]) == 2
    assert "dqn learns Q-values of discrete actions" in capsys.readouterr().err


def test_a_setting_the_algorithm_does_not_read_is_refused_with_those_that_do(capsys):
    assert cli.main(["train", "pendulum", "td3", "--core", "gru", *TINY]) == 2
    error = capsys.readouterr().err
    assert "td3 does not read --core (a setting of reinforce, a2c, ppo, vtrace, td-lambda, q-learning)" in error
    assert cli.main(["train", "catch", "dqn", "--num-minibatches", "2", *TINY]) == 2
    assert "dqn does not read --num-minibatches (a setting of" in capsys.readouterr().err
    assert cli.main(["train", "catch", "a2c", "--no-normalize-advantages", *TINY]) == 2
    assert "normalize_advantages is a setting of ppo; a2c does not read it" in capsys.readouterr().err


def test_discrete_sac_refuses_random_first_steps_with_a_message(capsys):
    assert cli.main(["train", "cartpole", "sac", "--random-steps", "100", *TINY]) == 2
    assert "random_steps takes uniformly random actions of continuous control" in capsys.readouterr().err


def test_c51_refuses_an_empty_support_with_a_message(capsys):
    assert cli.main(["train", "catch", "c51", "--v-min", "1", "--v-max", "1", *TINY]) == 2
    assert "needs num_atoms >= 2 and v_min < v_max" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ("catchh", r"No environment 'catchh'\. Did you mean catch.* The environments: catch, cartpole, .*gymnax:ID"),
        ("gymnax:Acrobat-v1", r"No gymnax environment 'Acrobat-v1'\. Did you mean Acrobot-v1.* CartPole-v1, "),
        ("gymnasium:CartPol-v1", r"No gymnasium environment 'CartPol-v1'\. Did you mean CartPole-v1.* Acrobot-v1"),
    ],
)
def test_an_unknown_env_is_answered_with_the_nearest_ids_and_all_of_them(env, message, capsys):
    assert cli.main(["train", env, *TINY]) == 2
    error = capsys.readouterr().err
    assert re.search(message, error), error


@pytest.mark.parametrize(
    ("flag", "message"),
    [
        (["--num-updates", "1.5"], "argument --num-updates: must be a whole number, got '1.5'"),
        (["--num-updates", "abc"], "argument --num-updates: must be a number, got 'abc'"),
        (["--learning-rate", "x"], "argument --learning-rate: must be a number, got 'x'"),
        (["--seed", "1e400"], "argument --seed: must be a whole number, got '1e400'"),
    ],
)
def test_a_bad_number_is_answered_with_the_flag_and_what_it_takes(flag, message, capsys):
    with pytest.raises(SystemExit):
        cli.main(["train", "catch", *flag])
    error = capsys.readouterr().err
    assert message in error and "_int" not in error and "_float" not in error, error


def test_integral_floats_count_as_integers(capsys):
    assert cli.main(["train", "catch", "--num-updates", "1e3", "--num-envs", "64.0", "--show-settings"]) == 0
    settings = capsys.readouterr().out
    assert "num_updates=1000," in settings and "num_envs=64," in settings


@pytest.mark.parametrize(("flag", "field"), [("4", "resets_per_step=4,"), ("all", "resets_per_step=None,")])
def test_resets_per_step_takes_a_count_or_all(flag, field, capsys):
    assert cli.main(["train", "catch", "--resets-per-step", flag, "--show-settings"]) == 0
    assert field in capsys.readouterr().out
    run = helpers.cli_run("catch", "ppo", resets_per_step=int(flag) if flag != "all" else None)
    assert run.pipeline(jax.random.key(0)).env.resets_per_step == run.config.resets_per_step


@pytest.mark.parametrize(
    "flag",
    [
        ["--num-envs", "0"],
        ["--rollout-length", "-1"],
        ["--num-updates", "0"],
        ["--updates-per-call", "x"],
        ["--learning-rate", "nan"],
        ["--learning-rate", "-1e-3"],
        ["--learning-rate", "0"],
        ["--learning-rate", "inf"],
        ["--discount", "nan"],
        ["--lambda", "1.5"],
        ["--epsilon", "-0.1"],
        ["--entropy-coefficient", "nan"],
        ["--hidden", "64,0"],
        ["--core", "transformer"],
        ["--activation", "gelu"],
        ["--max-grad-norm", "-1"],
        ["--resets-per-step", "0"],
        ["--log", "csv,stdout"],
        ["--seeds", "0"],
    ],
)
def test_bad_flags_exit_with_a_usage_error(flag, capsys):
    with pytest.raises(SystemExit) as error:
        cli.main(["train", "catch", *flag])
    assert error.value.code == 2
    assert flag[0] in capsys.readouterr().err


def test_parts_that_do_not_fit_are_reported(tmp_path, capsys):
    argv = ["train", "catch", "ppo", "--num-envs", "6", "--num-minibatches", "4", "--output", str(tmp_path / "c.png")]
    assert cli.main(argv) == 2
    assert "num_minibatches" in capsys.readouterr().err
    assert not (tmp_path / "c.png").exists()


def test_a_command_is_required(capsys):
    with pytest.raises(SystemExit) as error:
        cli.main([])
    assert error.value.code == 2
    assert "usage: podrace" in capsys.readouterr().err


def test_show_settings_prints_the_tasks_defaults_and_the_flags_given(capsys):
    assert cli.main(["train", "cartpole", "dqn", "--show-settings", "--learning-rate", "0.01"]) == 0
    printed = capsys.readouterr().out
    assert "cartpole dqn (tuned defaults, DQNConfig)" in printed
    assert "learning_rate=0.01," in printed and "buffer_size=10000" in printed and "num_updates=50000" in printed
    assert cli.main(["train", "deep-sea", "ppo", "--show-settings"]) == 0
    assert "deep-sea ppo (generic defaults, OnPolicyConfig)" in capsys.readouterr().out


def _trained_state(run: configs.Run, num_updates: int):
    pipeline, key = run.make()
    return pipeline.train(pipeline.init(key), num_updates=num_updates).state


def test_checkpoint_resume_and_evaluate(tmp_path, capsys):
    """Trains 4 updates with checkpoints every 2 and logs, resumes to 6, and the state
    equals 6 updates in one go; `evaluate` plays the agent and writes a video."""
    run = ["train", "catch", "a2c", "--num-envs", "4", "--rollout-length", "5", "--hidden", "16"]
    directory, logs = tmp_path / "run", tmp_path / "logs"
    saving = ["--checkpoint-dir", str(directory), "--checkpoint-every", "2", "--updates-per-call", "2"]
    output = ["--output", str(tmp_path / "c.png"), "--log", "csv,jsonl", "--log-dir", str(logs)]
    assert cli.main([*run, "--num-updates", "4", *saving, *output]) == 0
    assert cli.main([*run, "--num-updates", "6", *saving, *output, "--resume"]) == 0
    printed = capsys.readouterr().out
    assert f"resumed from update 4 in {directory}" in printed, printed
    run = helpers.cli_run("catch", "a2c", num_envs=4, rollout_length=5, hidden=(16,), num_updates=6, updates_per_call=2)
    with Checkpointer(directory) as checkpointer:
        assert checkpointer.all_steps() == [2, 4, 6]
        assert configs.Run.from_json(checkpointer.config()["run"]) == run
        pipeline, key = run.make()
        restored = checkpointer.restore(pipeline.init(key))
    helpers.assert_trees_close(restored, _trained_state(run, 6), rtol=0, atol=0)
    assert (logs / "metrics.csv").read_text().count("\n") == 4  # a header and the 3 calls
    video = tmp_path / "episode.gif"
    assert cli.main(["evaluate", str(directory), "--num-episodes", "5", "--video", str(video)]) == 0
    printed = capsys.readouterr().out
    assert "catch a2c, checkpoint 6" in printed and "over 5 episodes (Mode policy)" in printed, printed
    assert video.read_bytes().startswith(b"GIF8")


def test_resume_refuses_other_settings(tmp_path, capsys):
    directory = tmp_path / "run"
    assert cli.main(["train", "catch", "a2c", *TINY, "--checkpoint-dir", str(directory)]) == 0
    assert cli.main(["train", "catch", "a2c", *TINY, "--checkpoint-dir", str(directory), "--discount", "0.5"]) == 0
    argv = ["train", "catch", "ppo", "--checkpoint-dir", str(directory), "--resume"]
    assert cli.main(argv) == 2
    assert "the run in" in capsys.readouterr().err
    assert cli.main(["train", "catch", "a2c", "--checkpoint-dir", str(tmp_path / "none"), "--resume"]) == 2
    assert "there is no checkpoint" in capsys.readouterr().err


def test_seeds_train_a_population_that_evaluates_by_seed(tmp_path, capsys):
    directory = tmp_path / "run"
    argv = ["train", "catch", "q-learning", *TINY, "--seeds", "2", "--seed", "3", "--checkpoint-dir", str(directory)]
    assert cli.main([*argv, "--output", str(tmp_path / "c.png")]) == 0
    printed = capsys.readouterr().out
    assert "2 seeds side by side" in printed and "by seed (3 to 4): " in printed, printed
    assert cli.main(["evaluate", str(directory), "--num-episodes", "3", "--member", "1"]) == 0
    printed = capsys.readouterr().out
    assert "seed 3: mean return" in printed and "seed 4: mean return" in printed, printed
    assert cli.main(["evaluate", str(directory), "--member", "2"]) == 2
    assert "the population has 2 members" in capsys.readouterr().err


def test_pbt_trains_resumes_writes_its_lineage_and_evaluates_by_seed(tmp_path, capsys):
    directory, logs = tmp_path / "run", tmp_path / "logs"
    argv = ["train", "catch", "a2c", *TINY, "--seeds", "4", "--pbt", "--pbt-interval", "1", "--log-dir", str(logs)]
    argv += ["--checkpoint-dir", str(directory), "--output", str(tmp_path / "c.png")]
    assert cli.main(argv) == 0
    printed = capsys.readouterr().out
    assert "pbt=True" in printed and "pbt_interval=1" in printed and "learning rates by member: " in printed, printed
    events = [json.loads(line) for line in (logs / "pbt_lineage.jsonl").read_text().splitlines()]
    assert [event["update"] for event in events] == [1, 2]  # one copy of the lowest quarter per ready step
    assert cli.main([*argv[:3], "--num-updates", "3", *argv[5:], "--resume"]) == 0
    events = [json.loads(line) for line in (logs / "pbt_lineage.jsonl").read_text().splitlines()]
    assert [event["update"] for event in events] == [1, 2, 3]
    _, pbt, state, step = cli._restore(directory, None)
    rates = np.asarray(state.hyperparameters["learning_rate"])
    assert step == 3 and pbt.num_members == 4
    assert events[-1]["hyperparameters"]["learning_rate"] == pytest.approx(float(rates[events[-1]["member"]]))
    capsys.readouterr()
    assert cli.main(["evaluate", str(directory), "--num-episodes", "3", "--member", "3"]) == 0
    assert "seed 3: mean return" in capsys.readouterr().out


def test_pbt_settings_survive_a_checkpoint_config():
    run = helpers.cli_run("catch", "ppo", seeds=4, pbt=True, pbt_learning_rates=(1e-4, 1e-2))
    assert configs.Run.from_json(json.loads(json.dumps(run.to_json()))) == run
    rates = run.learning_rates()
    assert (rates.low, rates.high, rates.log) == (1e-4, 1e-2, True)
    default = helpers.cli_run("catch", "ppo", seeds=4, pbt=True, learning_rate=1e-3).learning_rates()
    assert (default.low, default.high) == pytest.approx((1e-4, 1e-2))


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--seeds", "2", "--pbt"], "give --seeds 4 or more"),
        (["--seeds", "4", "--pbt", "--pbt-learning-rates", "1e-2,1e-3"], "LOW must be below HIGH"),
    ],
)
def test_pbt_refuses_too_few_members_and_a_bad_range(flags, message, capsys):
    try:
        status = cli.main(["train", "catch", *TINY, *flags])
    except SystemExit as exit:
        status = exit.code
    assert status == 2 and message in capsys.readouterr().err


def test_normalised_seeds_train_and_evaluate_each_with_its_own_statistics(tmp_path, capsys):
    directory, normalized = tmp_path / "run", ["--normalize-observations", "--normalize-rewards"]
    argv = ["train", "pendulum", "ppo", *TINY, "--num-minibatches", "2", "--seeds", "2", *normalized]
    argv += ["--checkpoint-dir", str(directory)]
    assert cli.main([*argv, "--output", str(tmp_path / "c.png")]) == 0
    video = tmp_path / "episode.gif"
    argv = ["evaluate", str(directory), "--num-episodes", "2", "--member", "1", "--video", str(video)]
    assert cli.main(argv) == 0
    printed = capsys.readouterr().out
    assert "seed 0: mean return" in printed and "seed 1: mean return" in printed, printed
    assert video.read_bytes().startswith(b"GIF8")
    with Checkpointer(directory) as checkpointer:
        run = configs.Run.from_json(checkpointer.config()["run"])
        population, key = run.make()
        state = checkpointer.restore(population.init(key))
    assert run.config.normalize_observations and run.config.normalize_rewards
    statistics = state.envs.normalization.observations
    assert statistics is not None and not np.allclose(statistics.mean[0, 0], statistics.mean[1, 0])
    argv = ["train", "gymnasium:CartPole-v1", "ppo", *TINY, "--normalize-rewards"]
    assert cli.main(argv) == 2
    assert "host environments (gymnasium:ID, or envpool:ID with --executor host or sebulba) take their own" in (
        capsys.readouterr().err
    )


def test_a_gymnasium_run_checkpoints_its_learner_and_evaluates(tmp_path, capsys):
    directory = tmp_path / "run"
    argv = ["train", "gymnasium:CartPole-v1", "ppo", *TINY, "--checkpoint-dir", str(directory)]
    assert cli.main([*argv, "--output", str(tmp_path / "c.png")]) == 0
    assert "4 envs per process, rollouts of" in capsys.readouterr().out  # host environments: per process
    assert cli.main(["evaluate", str(directory), "--num-episodes", "4"]) == 0
    assert "gymnasium:CartPole-v1 ppo, checkpoint 2" in capsys.readouterr().out


def test_sebulba_trains_envpool_pools_in_actor_threads_checkpoints_and_resumes(tmp_path, capsys):
    pytest.importorskip("envpool")
    directory = tmp_path / "run"
    sebulba = ["--executor", "sebulba", "--num-minibatches", "2"]  # each thread's 2 environments
    argv = ["train", "envpool:CartPole-v1", "ppo", *TINY, *sebulba, "--checkpoint-dir", str(directory)]
    assert cli.main([*argv, "--output", str(tmp_path / "c.png")]) == 0
    printed = capsys.readouterr().out
    assert "executor=sebulba, actor_threads=2, actor_devices=1" in printed, printed
    assert "4 envs per process over 2 actor threads" in printed, printed
    with Checkpointer(directory) as checkpointer:
        run = configs.Run.from_json(checkpointer.config()["run"])
    assert (run.executor, run.actor_threads) == ("sebulba", 2)
    assert cli.main([*argv, "--num-updates", "3", "--resume", "--output", str(tmp_path / "c.png")]) == 0
    assert f"resumed from update 2 in {directory}" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv, message",
    [
        (["catch", "ppo", "--executor", "sebulba"], "--executor sebulba steps host environments: name one as"),
        (["gymnasium:CartPole-v1", "ppo", "--executor", "anakin"], "use --executor host or sebulba"),
        (["gymnasium:CartPole-v1", "ppo", "--seeds", "2"], "on the host executor runs one seed"),
        (["gymnasium:CartPole-v1", "ppo", "--executor", "sebula"], "No executor 'sebula'. Did you mean sebulba"),
        (
            ["gymnasium:CartPole-v1", "ppo", "--executor", "sebulba", "--num-envs", "5"],
            "--num-envs 5 does not split evenly over --actor-threads 2",
        ),
    ],
)
def test_an_executor_that_cannot_run_the_environment_is_refused_with_the_fix(argv, message, capsys):
    with contextlib.suppress(SystemExit):
        assert cli.main(["train", *argv, "--num-updates", "1"]) == 2
    assert message in capsys.readouterr().err


def _train_over_two_processes(argv: list[str], out: pathlib.Path, *, num_devices: int) -> tuple[str, str]:
    """What processes 0 and 1 of `podrace train *argv`, joined on 127.0.0.1, print, once both
    have exited 0; each is given `--output out/ID.png`."""

    def command(address: str, process_id: int) -> list[str]:
        launch = ["--coordinator-address", address, "--num-processes", "2", "--process-id", str(process_id)]
        output = ["--output", str(out / f"{process_id}.png")]
        return [sys.executable, "-m", "podrace.cli", "train", *argv, *launch, *output]

    finished = helpers.run_processes(command, num_devices=num_devices, timeout=300)
    assert [process.returncode for process in finished] == [0, 0], "".join(process.stderr for process in finished)
    # Process 0 alone plots.
    assert (out / "0.png").exists() and not (out / "1.png").exists()
    return finished[0].stdout, finished[1].stdout


def test_train_catch_over_two_processes_prints_once(tmp_path):
    small = ["--num-updates", "2", "--updates-per-call", "1", "--num-envs", "2", "--rollout-length", "4"]
    out_0, out_1 = _train_over_two_processes(["catch", *small], tmp_path, num_devices=1)
    assert "catch td-lambda on 2 cpu device(s) in 2 process(es): 2 envs per device" in out_0
    assert "mean episode reward (last 1 updates): " in out_0
    # Process 1 prints nothing of its own (Gloo's connection line comes from C++).
    assert "catch td-lambda" not in out_1 and "mean episode reward" not in out_1, out_1


def test_sebulba_over_two_processes_learns_as_one_process_checkpoints_and_resumes(tmp_path):
    # Two processes of two forced CPU devices: each acts with two threads of two
    # environments on its first device, and the learner spans the second device of both.
    cartpole = ["gymnasium:CartPole-v1", "ppo", "--executor", "sebulba", "--hidden", "8", "--rollout-length", "4"]
    cartpole += ["--num-minibatches", "1", "--updates-per-call", "1"]  # one minibatch whatever the devices
    directory, cache = tmp_path / "two-processes", tmp_path / "cache"  # the resume loads the programs
    two = [*cartpole, "--num-envs", "4", "--checkpoint-dir", str(directory), "--compilation-cache", str(cache)]
    out_0, out_1 = _train_over_two_processes([*two, "--num-updates", "1"], tmp_path, num_devices=2)
    assert "gymnasium:CartPole-v1 ppo on 2 cpu device(s) in 2 process(es)" in out_0, out_0
    assert "mean episode reward (last 1 updates): " in out_0 and f"checkpoint: {directory} (update 1)" in out_0
    assert "gymnasium:CartPole-v1" not in out_1 and "mean episode reward" not in out_1, out_1
    # One process with the same four threads' environments, on one learner device.
    one = tmp_path / "one-process"
    argv = [*cartpole, "--num-envs", "8", "--actor-threads", "4", "--num-updates", "1", "--checkpoint-dir", str(one)]
    assert cli.main(["train", *argv, "--output", str(tmp_path / "one.png")]) == 0
    both = [cli._restore(path, 1)[2] for path in (directory, one)]
    helpers.assert_trees_close(both[0].learner, both[1].learner, rtol=1e-5, atol=1e-6)
    # Both processes go on from update 1 (they run one program: a process that did not would hang it).
    out_0, out_1 = _train_over_two_processes([*two, "--num-updates", "2", "--resume"], tmp_path, num_devices=2)
    assert f"resumed from update 1 in {directory}" in out_0 and f"checkpoint: {directory} (update 2)" in out_0, out_0
    assert "resumed" not in out_1, out_1
    _, _, state, _ = cli._restore(directory, 2)
    # Each thread's 2 environments of 4 steps, for 2 updates.
    np.testing.assert_array_equal(state.actor_steps, [2 * 2 * 4] * 2)
    np.testing.assert_array_equal(state.learnt_steps, state.actor_steps)


def test_a_wrong_coordinator_address_ends_the_run_after_the_timeout_flag(tmp_path):
    coordinator = f"127.0.0.1:{helpers.free_port()}"  # nobody listens there
    launch = ["--coordinator-address", coordinator, "--num-processes", "2", "--process-id", "1"]
    start = time.monotonic()
    run = subprocess.run(
        [sys.executable, "-m", "podrace.cli", "train", "catch", *launch, "--coordinator-timeout", "2"],
        env=dict(os.environ, JAX_PLATFORMS="cpu"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 2, run.stderr
    assert f"waiting up to 2 s for the coordinator (process 0) to answer at {coordinator}" in run.stderr
    assert f"could not reach the coordinator at {coordinator} within 2 s" in run.stderr
    assert time.monotonic() - start < 60


def test_train_without_matplotlib_stops_before_training(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if it were not installed
    monkeypatch.setattr(cli, "train_with_progress", lambda *_, **__: pytest.fail("trained without matplotlib"))
    assert cli.main(["train", "catch", *TINY]) == 2
    assert 'Plotting needs matplotlib: pip install "podrace[plot]"' in capsys.readouterr().err


def test_the_launch_flags_go_together(capsys):
    assert cli.main(["train", "catch", "--process-id", "1"]) == 2
    assert "give all three" in capsys.readouterr().err


def test_the_command_keeps_the_compiled_programs_in_the_users_cache_by_default(tmp_path):
    # In a new process: the cache is a setting of the whole process.
    command = [sys.executable, "-m", "podrace.cli", "train", "catch", *TINY, "--output", str(tmp_path / "c.png")]
    environment = {name: value for name, value in os.environ.items() if name != pr.compilation.CACHE_VARIABLE}
    run = subprocess.run(
        command,
        env=dict(environment, JAX_PLATFORMS="cpu", XDG_CACHE_HOME=str(tmp_path / "cache")),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    assert any((tmp_path / "cache" / "podrace").iterdir())


def test_the_compilation_cache_is_the_flags_then_the_variables(monkeypatch, tmp_path):
    monkeypatch.delenv(pr.compilation.CACHE_VARIABLE)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert pr.compilation.default_compilation_cache() == str(tmp_path / "podrace")
    monkeypatch.setenv(pr.compilation.CACHE_VARIABLE, str(tmp_path / "mine"))
    assert pr.compilation.default_compilation_cache() == str(tmp_path / "mine")
    monkeypatch.setenv(pr.compilation.CACHE_VARIABLE, "")
    assert pr.compilation.default_compilation_cache() is None
    with pytest.raises(SystemExit):  # a directory and none at once
        cli.main(["train", "catch", "--compilation-cache", str(tmp_path), "--no-compilation-cache"])


def test_the_member_keys_are_the_seeds():
    keys = helpers.cli_run("catch", "a2c", seed=5, seeds=3).member_keys()
    assert [int(jax.random.key_data(key)[-1]) for key in keys] == [5, 6, 7]


@pytest.mark.parametrize(
    ("env", "algo", "changes"),
    [("cartpole", "ppo", {}), ("pendulum", "ppo", {}), ("catch", "a2c", {"core": "gru"}), ("catch", "dqn", {})],
)
def test_the_network_built_in_one_program_equals_the_eager_one(env, algo, changes):
    config = helpers.cli_run(env, algo, **changes).config
    assert isinstance(config, configs.AbstractTorsoHeadConfig)
    environment = make_env(env)
    spaces = (environment.action_space, configs.observation_shape(environment))
    key = jax.random.key(3)
    options = dict(core=changes.get("core"), core_size=32, separate_critic=False)
    compiled = configs.torso_head.network_in_one_program(config, *spaces, key, **options)
    eager = configs.torso_head.network_in_one_program.__wrapped__(config, *spaces, key, **options)
    assert type(compiled) is type(eager)
    helpers.assert_trees_close(compiled, eager, rtol=0, atol=0)


# --------------------------------------------------------------------------------------
# podrace reproduce
# --------------------------------------------------------------------------------------


def test_reproduce_list_shows_every_recipe_with_its_published_and_measured_numbers(tmp_path, capsys):
    from podrace import recipes, reproduction

    run = reproduction.Reproduction(
        recipe="cleanrl-dqn-cartpole-v1",
        seeds=(0, 1, 2),
        scores=(500.0, 490.0, 480.0),
        random_return=22.0,
        env_steps=(10,),
        curves=((1.0, 1.0, 1.0),),
        wall_seconds=1.0,
        platform="test",
    )
    reproduction.save(run, tmp_path, plot=False)
    assert cli.main(["reproduce", "--list", "--out", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    notes = [line.strip() for line in lines if "cannot fail its verdict" in line]
    assert len(lines) == 1 + len(recipes.RECIPES) + len(notes)
    assert len(notes) == sum(bool(recipe.cannot_fail) for recipe in recipes.RECIPES.values()) > 0
    mountaincar = lines.index(next(line for line in lines if line.startswith("cleanrl-ppo-mountaincar-v0 ")))
    assert "cannot fail its verdict" in lines[mountaincar + 1]
    dqn = next(line for line in lines if line.startswith("cleanrl-dqn-cartpole-v1 "))
    assert "498.38 ± 2.29" in dqn and "490 ± 8.2 (3 seeds)" in dqn
    breakout = next(line for line in lines if line.startswith("gymnax-ppo-breakout-minatar "))
    assert breakout.split()[-1] == "-"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["reproduce", "gymnax-ppo-cartpol"], r"No recipe 'gymnax-ppo-cartpol'\. Did you mean gymnax-ppo-cartpole-v1"),
        (["reproduce"], r"name a recipe to run, or list them with podrace reproduce --list"),
    ],
)
def test_reproduce_names_the_nearest_recipe_or_asks_for_one(argv, message, capsys):
    assert cli.main(argv) == 2
    assert re.search(message, capsys.readouterr().err)
