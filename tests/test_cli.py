"""The `podrace` command."""

import os
import subprocess
import sys

import pytest

from podrace import cli

from . import helpers


def test_train_catch_prints_its_measurements_and_saves_the_learning_curve(tmp_path, capsys):
    output = tmp_path / "c.png"
    argv = ["train", "catch", "--num-updates", "200", "--updates-per-call", "100", "--output", str(output)]
    assert cli.main(argv) == 0
    printed = capsys.readouterr().out
    # The Podracer paper's configuration by default.
    assert "128 envs per device" in printed and "rollouts of 16" in printed, printed
    for line in ("compile: ", "frames per second: ", "mean episode reward (last 100 updates): "):
        assert line in printed, printed
    reward = float(printed.split("mean episode reward (last 100 updates): ")[1].split()[0])
    assert -1.0 <= reward <= 1.0
    assert f"learning curve: {output}" in printed
    assert output.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")


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
    ],
)
def test_bad_flags_exit_with_a_usage_error(flag, capsys):
    with pytest.raises(SystemExit) as error:
        cli.main(["train", "catch", *flag])
    assert error.value.code == 2
    assert flag[0] in capsys.readouterr().err


def test_a_hyperparameter_outside_its_range_is_reported(tmp_path, capsys):
    argv = ["train", "catch", "--lambda", "1.5", "--num-updates", "1", "--output", str(tmp_path / "c.png")]
    assert cli.main(argv) == 2
    assert r"lambda_ must lie in [0, 1]" in capsys.readouterr().err
    assert not (tmp_path / "c.png").exists()


def test_a_command_is_required(capsys):
    with pytest.raises(SystemExit) as error:
        cli.main([])
    assert error.value.code == 2
    assert "usage: podrace" in capsys.readouterr().err


def test_train_catch_over_two_processes_prints_once(tmp_path):
    coordinator = f"127.0.0.1:{helpers.free_port()}"
    small = ["--num-updates", "2", "--updates-per-call", "1", "--num-envs", "2", "--rollout-length", "4"]
    launch = ["--coordinator-address", coordinator, "--num-processes", "2"]
    command = [sys.executable, "-m", "podrace.cli", "train", "catch", *small, *launch]
    processes = [
        subprocess.Popen(
            [*command, "--process-id", str(i), "--output", str(tmp_path / f"{i}.png")],
            env=dict(os.environ, JAX_PLATFORMS="cpu", XLA_FLAGS="--xla_force_host_platform_device_count=1"),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(2)
    ]
    (out_0, err_0), (out_1, err_1) = (process.communicate(timeout=300) for process in processes)
    assert [process.returncode for process in processes] == [0, 0], err_0 + err_1
    assert "Catch on 2 cpu device(s) in 2 process(es): 2 envs per device" in out_0
    assert "mean episode reward (last 1 updates): " in out_0
    # Process 1 prints nothing of its own (Gloo's connection line comes from C++).
    assert "Catch on" not in out_1 and "mean episode reward" not in out_1, out_1
    assert (tmp_path / "0.png").exists() and not (tmp_path / "1.png").exists()


def test_the_launch_flags_go_together(capsys):
    assert cli.main(["train", "catch", "--process-id", "1"]) == 2
    assert "give all three" in capsys.readouterr().err
