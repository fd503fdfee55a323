"""Metric logging: summaries of a call, episode lengths against a count of the steps, and
the sinks read back (JSON lines, CSV, TensorBoard event files, a stand-in for wandb)."""

import csv
import dataclasses
import io
import json
import struct
import sys
import types

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from tensorboardX.proto import event_pb2

import podrace as pr
from podrace.loggers import (
    ConsoleSink,
    CSVSink,
    JsonLinesSink,
    TensorBoardSink,
    WandbSink,
    make_sinks,
    summarize,
)
from podrace.progress import TrainingLog, plot_learning_curve, train_with_progress

from . import helpers


# Catch 5x3: every episode takes 4 steps.
CATCH_EPISODE_LENGTH = helpers.CATCH_ROWS - 1


def _read_jsonl(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def _read_csv(path):
    with path.open(newline="") as file:
        return list(csv.DictReader(file))


def _read_tensorboard(logdir):
    """`{tag: [(step, value), ...]}` from the event files, read as TFRecords: a length
    (8 bytes) and its checksum (4), the serialised `Event`, then its checksum (4)."""
    series = {}
    for path in logdir.glob("events.out.tfevents.*"):
        data, offset = path.read_bytes(), 0
        while offset < len(data):
            (length,) = struct.unpack("<Q", data[offset : offset + 8])
            event = event_pb2.Event.FromString(data[offset + 12 : offset + 12 + length])
            offset += 12 + length + 4
            for value in event.summary.value:
                series.setdefault(value.tag, []).append((event.step, value.simple_value))
    return series


# --------------------------------------------------------------------------------------
# Summaries.
# --------------------------------------------------------------------------------------


def _stack(trees):
    return jax.tree.map(lambda *leaves: jnp.stack(leaves), *trees)


def _metrics(returns, completed, lengths):
    """The metrics of updates whose losses are 1, 2, 3, ... (terms and norm scaled)."""
    updates = []
    for i, (episode_return, count, length) in enumerate(zip(returns, completed, lengths, strict=True)):
        loss = jnp.asarray(i + 1.0)
        update = pr.UpdateMetrics(loss, {"policy_loss": 2 * loss, "entropy": -loss}, 10 * loss)
        episodes = jnp.asarray(episode_return, jnp.float32), jnp.asarray(count), jnp.asarray(length)
        updates.append(pr.TrainMetrics(update, *episodes))
    return _stack(updates)


def test_summarize_reduces_a_call_to_scalars():
    summary = summarize(_metrics(returns=[0.0, 3.0, -1.0], completed=[0, 2, 1], lengths=[0, 9, 3]))
    assert summary == {
        "loss": 2.0,
        "loss/policy_loss": 4.0,
        "loss/entropy": -2.0,
        "grad_norm": 20.0,
        "episodes": 3.0,
        "episode_return": 2.0 / 3.0,
        "episode_length": 4.0,
    }
    assert all(type(value) is float for value in summary.values())


def test_summarize_leaves_out_episode_statistics_before_an_episode_ends():
    summary = summarize(_metrics(returns=[0.0, 0.0], completed=[0, 0], lengths=[0, 0]))
    assert summary["episodes"] == 0.0
    assert "episode_return" not in summary and "episode_length" not in summary


def test_summarize_gives_each_member_of_a_population_its_series():
    first = _metrics(returns=[1.0, 0.0], completed=[1, 0], lengths=[4, 0])
    second = _metrics(returns=[0.0, 0.0], completed=[0, 0], lengths=[0, 0])
    second = eqx.tree_at(lambda m: m.update.loss, second, jnp.asarray([5.0, 7.0]))
    summary = summarize(_stack([first, second]))
    assert summary["loss/member_0"] == 1.5 and summary["loss/member_1"] == 6.0
    assert summary["loss/entropy/member_1"] == -1.5
    assert summary["episode_return/member_0"] == 1.0 and summary["episode_length/member_0"] == 4.0
    assert "episode_return/member_1" not in summary and summary["episodes/member_1"] == 0.0
    assert not any(name.startswith(("loss/member", "episodes/member")) for name in summarize(first))


# --------------------------------------------------------------------------------------
# Episode lengths.
# --------------------------------------------------------------------------------------


def test_catch_episode_lengths_across_rollout_boundaries():
    # Rollouts of 3 steps against episodes of 4 steps plus a reset: episodes start and
    # end at every position of a rollout, including its first and last steps.
    pipeline = helpers.small_pipeline(jax.random.key(0), rollout_length=3)
    metrics = pipeline.train(pipeline.init(jax.random.key(1)), num_updates=10).metrics
    completed = np.asarray(metrics.episodes_completed)
    assert completed.sum() == 6 * pipeline.num_envs
    np.testing.assert_array_equal(metrics.episode_length_sum, CATCH_EPISODE_LENGTH * completed)
    assert float(metrics.mean_episode_length) == CATCH_EPISODE_LENGTH


def test_episode_lengths_equal_a_count_of_the_steps():
    # Random actions in CartPole cut at 12 steps: episodes of many lengths, terminated
    # or truncated, spanning the rollouts of 5 steps.
    env = pr.envs.TimeLimit(pr.envs.CartPole(), max_episode_steps=12)
    learner = helpers.make_learner(
        jax.random.key(0), policy=pr.policies.EpsilonGreedy(1.0), observation_shape=(4,), num_actions=2
    )
    pipeline = pr.Anakin(env, learner, num_envs=4, rollout_length=5)
    state = pipeline.init(jax.random.key(2))
    num_updates, length = 8, pipeline.rollout_length
    metrics = pipeline.train(state, num_updates=num_updates).metrics
    # The same steps in one rollout (the actions do not depend on the parameters).
    rollout = eqx.filter_jit(pr.executors.anakin.rollout)
    _, trajectory, _ = rollout(pipeline.env, learner.agent(state.learner), state.envs, num_updates * length)
    is_first, is_last = np.asarray(trajectory.timestep.is_first), np.asarray(trajectory.timestep.is_last)
    steps, lengths = np.zeros(pipeline.num_envs, np.int64), [[] for _ in range(num_updates)]
    for t in range(1, num_updates * length + 1):
        steps = np.where(is_first[t], 0, steps + 1)  # a reset step starts an episode at 0
        lengths[(t - 1) // length] += steps[is_last[t]].tolist()
    np.testing.assert_array_equal(metrics.episodes_completed, [len(ended) for ended in lengths])
    np.testing.assert_array_equal(metrics.episode_length_sum, [sum(ended) for ended in lengths])
    assert {10, 11, 12} <= {steps for ended in lengths for steps in ended}, "terminated and truncated episodes"


# --------------------------------------------------------------------------------------
# Sinks fed by train_with_progress.
# --------------------------------------------------------------------------------------


def test_train_with_progress_writes_every_call_to_every_sink(tmp_path):
    pipeline = helpers.small_pipeline(jax.random.key(0))
    with (
        JsonLinesSink(tmp_path / "metrics.jsonl") as jsonl,
        CSVSink(tmp_path / "metrics.csv") as table,
        TensorBoardSink(tmp_path / "tensorboard") as tensorboard,
    ):
        _, log = train_with_progress(
            pipeline,
            pipeline.init(jax.random.key(1)),
            num_updates=4,
            updates_per_call=2,
            show=False,
            sinks=[jsonl, table, tensorboard],
        )
    rows = _read_jsonl(tmp_path / "metrics.jsonl")
    frames_per_call = 2 * pipeline.frames_per_update
    assert [row["step"] for row in rows] == [2, 4]
    assert [row["frames"] for row in rows] == [frames_per_call, 2 * frames_per_call] == log.frames.tolist()
    names = {"loss", "loss/td_loss", "grad_norm", "episodes", "episode_return", "episode_length", "frames_per_second"}
    assert set(rows[0]) == {"step", "frames"} | names
    # Catch 5x3 from a reset: every environment ends episodes at steps 4, 9, 14, 19 and
    # 24, i.e. twice in the first call (steps 1 to 12) and three times in the second.
    assert [row["episodes"] for row in rows] == [2 * pipeline.num_envs, 3 * pipeline.num_envs]
    assert [row["episode_length"] for row in rows] == [CATCH_EPISODE_LENGTH] * 2
    np.testing.assert_allclose([row["episode_return"] for row in rows], log.mean_episode_return, rtol=1e-6)
    assert all(row["frames_per_second"] > 0 for row in rows)

    csv_rows = _read_csv(tmp_path / "metrics.csv")
    assert [{name: float(value) for name, value in row.items()} for row in csv_rows] == rows

    scalars = _read_tensorboard(tmp_path / "tensorboard")
    assert set(scalars) == names | {"frames"}
    for name, series in scalars.items():
        assert [step for step, _ in series] == [2, 4]
        np.testing.assert_allclose([value for _, value in series], [row[name] for row in rows], rtol=1e-6)


def test_episode_return_is_left_out_until_an_episode_ends(tmp_path):
    # Catch 5x3 with rollouts of 2: the first episodes end on the fourth step, in the
    # second call, and the next ones on the ninth, after the third.
    pipeline = helpers.small_pipeline(jax.random.key(0), rollout_length=2)
    with CSVSink(tmp_path / "metrics.csv") as table, TensorBoardSink(tmp_path) as tensorboard:
        _, log = train_with_progress(
            pipeline,
            pipeline.init(jax.random.key(1)),
            num_updates=3,
            updates_per_call=1,
            show=False,
            sinks=[table, tensorboard],
        )
    np.testing.assert_array_equal(np.isnan(log.mean_episode_return), [True, False, True])
    rows = _read_csv(tmp_path / "metrics.csv")
    assert [row["episodes"] for row in rows] == ["0.0", str(float(pipeline.num_envs)), "0.0"]
    assert [row["episode_return"] == "" for row in rows] == [True, False, True]
    assert [row["episode_length"] for row in rows] == ["", str(float(CATCH_EPISODE_LENGTH)), ""]
    scalars = _read_tensorboard(tmp_path)
    assert [step for step, _ in scalars["episode_return"]] == [2]
    assert [step for step, _ in scalars["loss"]] == [1, 2, 3]


def _catch_member(key) -> pr.Anakin:
    return helpers.small_pipeline(key, num_envs=2, rollout_length=6)


def test_a_population_logs_a_series_per_member(tmp_path):
    population = pr.Population(_catch_member, jax.random.split(jax.random.key(0), 2))
    state = population.init(jax.random.key(1))
    with JsonLinesSink(tmp_path / "metrics.jsonl") as jsonl:
        final, log = train_with_progress(
            population, state, num_updates=2, updates_per_call=1, show=False, sinks=[jsonl]
        )
    rows = _read_jsonl(tmp_path / "metrics.jsonl")
    member_frames = 2 * 6
    assert [row["frames"] for row in rows] == [member_frames, 2 * member_frames] == log.frames.tolist()
    assert log.mean_episode_return.shape == (2, 2)
    for row, returns in zip(rows, log.mean_episode_return, strict=True):
        assert {"loss/member_0", "loss/td_loss/member_1", "grad_norm/member_1"} <= set(row)
        np.testing.assert_allclose([row["episode_return/member_0"], row["episode_return/member_1"]], returns)
        assert row["episode_length/member_0"] == row["episode_length/member_1"] == CATCH_EPISODE_LENGTH
    # The same calls made directly: the same losses per member and the same final state.
    first = population.train(state, num_updates=1)
    second = population.train(first.state, num_updates=1)
    for row, metrics in zip(rows, [first.metrics, second.metrics], strict=True):
        np.testing.assert_allclose([row["loss/member_0"], row["loss/member_1"]], metrics.update.loss[:, 0], rtol=1e-6)
    helpers.assert_trees_close(final, second.state)


# --------------------------------------------------------------------------------------
# Sinks on their own.
# --------------------------------------------------------------------------------------


def test_console_sink_prints_one_line_per_row():
    out = io.StringIO()
    with ConsoleSink(out) as console:
        console.write(5, {"frames": 640.0, "loss": 0.123456})
        console.write(10, {"frames": 1280.0, "episode_return": -1.0})
    assert out.getvalue() == "step 5  frames 640  loss 0.1235\nstep 10  frames 1280  episode_return -1\n"


def test_csv_sink_adds_columns_that_appear_later(tmp_path):
    with CSVSink(tmp_path / "a" / "metrics.csv") as table:
        table.write(1, {"loss": 1.0})
        table.write(2, {"loss": 0.5, "episode_return": 1.0})
        table.write(3, {"episode_return": 0.0})
    assert (tmp_path / "a" / "metrics.csv").read_text().splitlines() == [
        "step,loss,episode_return",
        "1,1.0,",
        "2,0.5,1.0",
        "3,,0.0",
    ]


@pytest.mark.parametrize("sink_type", [CSVSink, JsonLinesSink])
def test_a_resumed_file_sink_keeps_the_rows_up_to_its_step(sink_type, tmp_path):
    path = tmp_path / "metrics"
    with sink_type(path) as sink:
        for step in (2, 4, 6):  # 6: written after the checkpoint of step 4
            sink.write(step, {"loss": step / 10} | ({"episode_return": 1.0} if step > 2 else {}))
    with sink_type(path, resume_from=4) as sink:
        sink.write(6, {"loss": 0.7, "episode_return": 2.0})
    with sink_type(path, resume_from=6) as sink:
        sink.write(8, {"loss": 0.8, "episode_return": 3.0})
    if sink_type is CSVSink:
        rows = list(csv.DictReader(path.read_text().splitlines()))
    else:
        rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert [float(row["step"]) for row in rows] == [2, 4, 6, 8]
    assert [float(row["loss"]) for row in rows] == [0.2, 0.4, 0.7, 0.8]
    with sink_type(path) as sink:  # afresh
        sink.write(1, {"loss": 1.0})
    assert len(path.read_text().splitlines()) == 1 + (sink_type is CSVSink)


def test_wandb_sink_passes_the_settings_and_logs_each_row(monkeypatch):
    calls = []

    class Run:
        def log(self, data, step):
            calls.append(("log", data, step))

        def finish(self):
            calls.append(("finish",))

    fake = types.ModuleType("wandb")
    fake.init = lambda **kwargs: calls.append(("init", kwargs)) or Run()  # pyright: ignore[reportAttributeAccessIssue]
    monkeypatch.setitem(sys.modules, "wandb", fake)
    with WandbSink(project="podrace-tests", mode="offline", config={"seed": 0}) as sink:
        sink.write(3, {"loss": 0.5})
    assert calls == [
        ("init", {"project": "podrace-tests", "mode": "offline", "config": {"seed": 0}}),
        ("log", {"loss": 0.5}, 3),
        ("finish",),
    ]


def test_wandb_sink_without_wandb_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "wandb", None)
    with pytest.raises(ImportError, match=r'pip install "podrace\[wandb\]"'):
        WandbSink()


def test_make_sinks_by_name(tmp_path, monkeypatch):
    sinks = make_sinks("console, csv,jsonl,tensorboard", tmp_path / "run")
    assert [type(sink) for sink in sinks] == [ConsoleSink, CSVSink, JsonLinesSink, TensorBoardSink]
    for sink in sinks:
        sink.close()
    assert {path.name for path in (tmp_path / "run").iterdir()} >= {"metrics.csv", "metrics.jsonl"}
    assert any((tmp_path / "run").glob("events.out.tfevents.*"))
    assert make_sinks([], tmp_path) == []
    with pytest.raises(ValueError, match="unknown sinks \\['csvv'\\]; choose from console, csv"):
        make_sinks("csv,csvv", tmp_path)
    monkeypatch.setitem(sys.modules, "wandb", None)
    with pytest.raises(ImportError, match="podrace\\[wandb\\]"):
        make_sinks("csv,wandb", tmp_path / "failed")


def test_the_learning_curve_of_a_population_draws_its_spread(tmp_path):
    import matplotlib.image

    returns = np.asarray([[np.nan, np.nan, np.nan], [0.1, np.nan, 0.3], [0.5, 0.6, 0.9]])
    log = TrainingLog(np.asarray([10, 20, 30]), returns, compile_seconds=1.0, frames_per_second=10.0)
    for name, curve in (("population", log), ("member", dataclasses.replace(log, mean_episode_return=returns[:, 0]))):
        image = matplotlib.image.imread(plot_learning_curve(curve, tmp_path / f"{name}.png", title=name))
        assert image.shape[:2] == (480, 720)
