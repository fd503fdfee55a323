"""`check_env`: every registered environment passes, and an environment that breaks one
rule fails with an error that names that rule."""

import itertools
import re
from typing import final

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jaxtyping import Array, PRNGKeyArray

import podrace as pr
from podrace.envs.checker import RULES, EnvCheckError, EnvCheckReport, check_env

from . import helpers


@pytest.mark.parametrize("name", helpers.ENVS)
def test_every_env_passes(name):
    report = check_env(helpers.ENVS[name]())
    assert isinstance(report, EnvCheckReport)
    assert set(report.passed) | set(report.skipped) == set(RULES)
    assert not set(report.passed) & set(report.skipped)
    assert all(rule in str(report) for rule in RULES)


# --------------------------------------------------------------------------------------
# A walk on a line, and broken versions of it that each break one rule.
# --------------------------------------------------------------------------------------


@final
class WalkState(eqx.Module):
    position: Array
    steps: Array


class AbstractWalk(pr.envs.AbstractEnv[WalkState]):
    """A walk on [-2, 2] from a random start in [-1, 1]: action 1 moves right by 0.5,
    action 0 left; the episode terminates at either end; the reward is -|position|."""

    @property
    def observation_space(self) -> pr.Box:
        return pr.Box(-2.0, 2.0, (1,))

    @property
    def action_space(self) -> pr.Discrete:
        return pr.Discrete(2)

    def walk_reset(self, key: PRNGKeyArray) -> tuple[WalkState, pr.TimeStep]:
        state = WalkState(jax.random.uniform(key, (), minval=-1.0, maxval=1.0), jnp.asarray(0, jnp.int32))
        return state, pr.TimeStep.first(state.position[None])

    def walk_step(self, state: WalkState, action: Array, *, clip: bool = True) -> tuple[WalkState, pr.TimeStep]:
        position = state.position + jnp.where(action == 1, 0.5, -0.5)
        position = jnp.clip(position, -2.0, 2.0) if clip else position
        state = WalkState(position, state.steps + jnp.int32(1))
        return state, pr.TimeStep.transition(position[None], -jnp.abs(position), jnp.abs(position) >= 2.0)


@final
class Walk(AbstractWalk):
    """The walk as it should be."""

    def reset(self, key: PRNGKeyArray) -> tuple[WalkState, pr.TimeStep]:
        return self.walk_reset(key)

    def step(self, state: WalkState, action: Array, key: PRNGKeyArray) -> tuple[WalkState, pr.TimeStep]:
        return self.walk_step(state, action)


@final
class IntegerRewardWalk(AbstractWalk):
    """Counts rewards in whole points, as int32."""

    def reset(self, key: PRNGKeyArray) -> tuple[WalkState, pr.TimeStep]:
        return self.walk_reset(key)

    def step(self, state: WalkState, action: Array, key: PRNGKeyArray) -> tuple[WalkState, pr.TimeStep]:
        state, timestep = self.walk_step(state, action)
        return state, eqx.tree_at(lambda t: t.reward, timestep, jnp.round(timestep.reward).astype(jnp.int32))


@final
class TransitionOnResetWalk(AbstractWalk):
    """Builds the reset's time step with `TimeStep.transition`, so `is_first` is unset."""

    def reset(self, key: PRNGKeyArray) -> tuple[WalkState, pr.TimeStep]:
        state, _ = self.walk_reset(key)
        return state, pr.TimeStep.transition(state.position[None], 0.0, False)

    def step(self, state: WalkState, action: Array, key: PRNGKeyArray) -> tuple[WalkState, pr.TimeStep]:
        return self.walk_step(state, action)


@final
class DiscountedTerminationWalk(AbstractWalk):
    """Keeps the discount at 1 when the episode terminates."""

    def reset(self, key: PRNGKeyArray) -> tuple[WalkState, pr.TimeStep]:
        return self.walk_reset(key)

    def step(self, state: WalkState, action: Array, key: PRNGKeyArray) -> tuple[WalkState, pr.TimeStep]:
        state, timestep = self.walk_step(state, action)
        return state, eqx.tree_at(lambda t: t.discount, timestep, jnp.ones((), jnp.float32))


@final
class TruncatedTerminationWalk(AbstractWalk):
    """Marks every end of an episode as truncated too, terminations included."""

    def reset(self, key: PRNGKeyArray) -> tuple[WalkState, pr.TimeStep]:
        return self.walk_reset(key)

    def step(self, state: WalkState, action: Array, key: PRNGKeyArray) -> tuple[WalkState, pr.TimeStep]:
        state, timestep = self.walk_step(state, action)
        return state, eqx.tree_at(lambda t: t.truncated, timestep, timestep.terminated)


@final
class UnclippedWalk(AbstractWalk):
    """Forgets to clip the position, so observations leave the [-2, 2] box."""

    def reset(self, key: PRNGKeyArray) -> tuple[WalkState, pr.TimeStep]:
        return self.walk_reset(key)

    def step(self, state: WalkState, action: Array, key: PRNGKeyArray) -> tuple[WalkState, pr.TimeStep]:
        return self.walk_step(state, action, clip=False)


@final
class IntegerObservationWalk(AbstractWalk):
    """Observes the position in half steps as int32, while its space declares float32."""

    def reset(self, key: PRNGKeyArray) -> tuple[WalkState, pr.TimeStep]:
        state, timestep = self.walk_reset(key)
        return state, eqx.tree_at(lambda t: t.observation, timestep, self.half_steps(state))

    def step(self, state: WalkState, action: Array, key: PRNGKeyArray) -> tuple[WalkState, pr.TimeStep]:
        state, timestep = self.walk_step(state, action)
        return state, eqx.tree_at(lambda t: t.observation, timestep, self.half_steps(state))

    def half_steps(self, state: WalkState) -> Array:
        return jnp.round(2 * state.position).astype(jnp.int32)[None]


MOVES = (-0.5, 0.5)


@final
class PythonLookupWalk(AbstractWalk):
    """Looks the move up in a Python tuple, which a traced action cannot index."""

    def reset(self, key: PRNGKeyArray) -> tuple[WalkState, pr.TimeStep]:
        return self.walk_reset(key)

    def step(self, state: WalkState, action: Array, key: PRNGKeyArray) -> tuple[WalkState, pr.TimeStep]:
        move = MOVES[action]
        return self.walk_step(state, jnp.asarray(move > 0, jnp.int32))


@final
class FloatCounterWalk(AbstractWalk):
    """Counts steps with a float literal: the int32 counter becomes float32."""

    def reset(self, key: PRNGKeyArray) -> tuple[WalkState, pr.TimeStep]:
        return self.walk_reset(key)

    def step(self, state: WalkState, action: Array, key: PRNGKeyArray) -> tuple[WalkState, pr.TimeStep]:
        next_state, timestep = self.walk_step(state, action)
        return WalkState(next_state.position, state.steps + 1.0), timestep


CALLS = itertools.count()


@final
class PythonCurriculumWalk(AbstractWalk):
    """Scales rewards by a curriculum that a Python counter of calls drives: jit freezes
    the scale of its trace."""

    def reset(self, key: PRNGKeyArray) -> tuple[WalkState, pr.TimeStep]:
        return self.walk_reset(key)

    def step(self, state: WalkState, action: Array, key: PRNGKeyArray) -> tuple[WalkState, pr.TimeStep]:
        state, timestep = self.walk_step(state, action)
        scale = 1.0 + next(CALLS) % 3
        return state, eqx.tree_at(lambda t: t.reward, timestep, scale * timestep.reward)


def _host_starts(key_data: np.ndarray) -> np.ndarray:
    # Written for a batch of keys, but seeds one generator from the first key only.
    rng = np.random.default_rng(key_data.reshape(-1, key_data.shape[-1])[0].tolist())
    return rng.uniform(-1.0, 1.0, key_data.shape[:-1]).astype(np.float32)


@final
class HostBatchStartWalk(AbstractWalk):
    """Draws starts on the host, a batch at a time from one generator seeded by the
    batch's first key."""

    def reset(self, key: PRNGKeyArray) -> tuple[WalkState, pr.TimeStep]:
        shape = jax.ShapeDtypeStruct((), jnp.float32)
        position = jax.pure_callback(_host_starts, shape, jax.random.key_data(key), vmap_method="broadcast_all")
        return WalkState(position, jnp.asarray(0, jnp.int32)), pr.TimeStep.first(position[None])

    def step(self, state: WalkState, action: Array, key: PRNGKeyArray) -> tuple[WalkState, pr.TimeStep]:
        return self.walk_step(state, action)


HOST_RNG = np.random.default_rng(0)


@final
class HostRandomStartWalk(AbstractWalk):
    """Draws starts from a NumPy generator on the host, ignoring the key."""

    def reset(self, key: PRNGKeyArray) -> tuple[WalkState, pr.TimeStep]:
        def start():
            return np.float32(HOST_RNG.uniform(-1.0, 1.0))

        position = jax.pure_callback(start, jax.ShapeDtypeStruct((), jnp.float32), vmap_method="sequential")
        return WalkState(position, jnp.asarray(0, jnp.int32)), pr.TimeStep.first(position[None])

    def step(self, state: WalkState, action: Array, key: PRNGKeyArray) -> tuple[WalkState, pr.TimeStep]:
        return self.walk_step(state, action)


@final
class WeakCounterWalk(AbstractWalk):
    """Starts the step counter at `jnp.asarray(0)`, weakly typed, while steps make it a
    strong int32: a jitted step traces twice."""

    def reset(self, key: PRNGKeyArray) -> tuple[WalkState, pr.TimeStep]:
        state, timestep = self.walk_reset(key)
        return WalkState(state.position, jnp.asarray(0)), timestep

    def step(self, state: WalkState, action: Array, key: PRNGKeyArray) -> tuple[WalkState, pr.TimeStep]:
        return self.walk_step(state, action)


@final
class AutoResetWalkState(eqx.Module):
    walk: WalkState
    is_last: Array


@final
class LeakyAutoResetWalk(pr.envs.AbstractEnv[AutoResetWalkState]):
    """A hand-written auto-resetting walk whose reset step keeps the reward of the
    ignored move."""

    walk: Walk = Walk()

    @property
    def observation_space(self) -> pr.Box:
        return self.walk.observation_space

    @property
    def action_space(self) -> pr.Discrete:
        return self.walk.action_space

    def reset(self, key: PRNGKeyArray) -> tuple[AutoResetWalkState, pr.TimeStep]:
        state, timestep = self.walk.reset(key)
        return AutoResetWalkState(state, timestep.is_last), timestep

    def step(
        self, state: AutoResetWalkState, action: Array, key: PRNGKeyArray
    ) -> tuple[AutoResetWalkState, pr.TimeStep]:
        moved = self.walk.step(state.walk, action, key)
        walk, timestep = jax.tree.map(lambda r, m: jnp.where(state.is_last, r, m), self.walk.reset(key), moved)
        timestep = eqx.tree_at(lambda t: t.reward, timestep, moved[1].reward)
        return AutoResetWalkState(walk, timestep.is_last), timestep


@final
class NoLegalMoveWalk(pr.envs.AbstractEnv[WalkState]):
    """The walk, marking its legal actions, but with masks that allow none."""

    walk: Walk = Walk()

    @property
    def observation_space(self) -> pr.MaskedObservationSpace:
        return pr.MaskedObservationSpace(self.walk.observation_space, self.action_space)

    @property
    def action_space(self) -> pr.Discrete:
        return self.walk.action_space

    def masked(self, timestep: pr.TimeStep) -> pr.TimeStep:
        observation = pr.MaskedObservation(timestep.observation, jnp.zeros(2, bool))
        return eqx.tree_at(lambda t: t.observation, timestep, observation)

    def reset(self, key: PRNGKeyArray) -> tuple[WalkState, pr.TimeStep]:
        state, timestep = self.walk.reset(key)
        return state, self.masked(timestep)

    def step(self, state: WalkState, action: Array, key: PRNGKeyArray) -> tuple[WalkState, pr.TimeStep]:
        state, timestep = self.walk.step(state, action, key)
        return state, self.masked(timestep)


# Each broken walk, the rule it breaks and what the error reports as found.
BROKEN = [
    (IntegerRewardWalk, "timestep-types", r"found:    reward int32\[\]"),
    (TransitionOnResetWalk, "timestep-types", r"found:    is_first=False, reward=0.0, discount=1.0"),
    (DiscountedTerminationWalk, "timestep-types", r"found:    discount 1.0 with terminated=True on step \d+"),
    (TruncatedTerminationWalk, "timestep-types", r"found:    both set on step \d+"),
    (
        UnclippedWalk,
        "observation-and-action-spaces",
        r"found:    the observation of step \d+: float32\[1\] \[-?[2-9]\.",
    ),
    (
        IntegerObservationWalk,
        "observation-and-action-spaces",
        r"dtype=float32\).*\n  found:    the observation of the reset: int32\[1\] \[-?[0-2]\]",
    ),
    (PythonLookupWalk, "observation-and-action-spaces", r"found:    TracerIntegerConversionError"),
    (NoLegalMoveWalk, "legal-actions", r"found:    no legal action on the reset"),
    (FloatCounterWalk, "stable-shapes-and-dtypes", r"found:    .*state.steps changes from int32\[\] to float32"),
    (PythonCurriculumWalk, "jit-equals-eager", r"found:    step \d of a chain from a reset: timestep.reward"),
    (HostBatchStartWalk, "vmap-equals-loop", r"found:    reset vmapped over 3 keys: state.position"),
    (HostRandomStartWalk, "deterministic-under-a-key", r"found:    reset with sample key 0: state.position"),
    (WeakCounterWalk, "step-traces-once", r"found:    2 traces.*state.steps is int32\[\] \(weakly typed\) then"),
    (LeakyAutoResetWalk, "auto-reset", r"found:    step \d+ has is_first=True, reward=-"),
]


def test_the_walk_passes():
    report = check_env(Walk())
    assert report.passed == RULES and not report.skipped


def test_every_rule_has_a_broken_walk():
    assert {rule for _, rule, _ in BROKEN} == set(RULES)


@pytest.mark.parametrize(("env_type", "rule", "found"), BROKEN, ids=[env_type.__name__ for env_type, _, _ in BROKEN])
def test_a_broken_env_fails_its_rule(env_type, rule, found):
    with pytest.raises(EnvCheckError, match=f"{env_type.__name__} breaks the check_env rule '{rule}'") as error:
        check_env(env_type())
    assert isinstance(error.value, AssertionError) and error.value.rule == rule
    message = str(error.value)
    assert re.search(found, message) and "\n  expected: " in message and "\n  fix: " in message, message


def test_auto_reset_is_skipped_when_no_episode_ends():
    # Catch on 5 rows ends on step 4; a raw uint32 key is accepted too.
    report = check_env(pr.envs.Catch(rows=5, columns=3), key=jax.random.PRNGKey(1), num_steps=3)
    assert set(report.skipped) == {"auto-reset"} and "raise num_steps" in report.skipped["auto-reset"]
    assert report.passed == tuple(rule for rule in RULES if rule != "auto-reset")
    assert "skipped  auto-reset: no episode ended before the last of 3 random steps" in str(report)


@pytest.mark.parametrize("num_steps", [0, -1])
def test_num_steps_must_be_positive(num_steps):
    with pytest.raises(ValueError, match=f"check_env needs num_steps > 0 to step the environment, got {num_steps}"):
        check_env(Walk(), num_steps=num_steps)
