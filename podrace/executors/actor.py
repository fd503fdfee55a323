"""rlplay's actor interface: a podrace agent acting for a host loop, one batched call a step.

An rlplay actor maps `(x_t, a_{t-1}, r_t, d_t, h_t)` to `(a_t, h_{t+1}, info)`: the
observation, the previous action and reward, whether the observation starts a new
episode, and the recurrent state, to the action, the next recurrent state and what a
learner needs about the step. [`podrace.executors.actor.RlplayActor`][] presents any
[`podrace.Agent`][] this way, so host loops written for rlplay drive podrace agents,
feed-forward or recurrent, and the steps they collect train a podrace learner.

Reference: rlplay's `BaseActorModule` (`reset`, `step` and `value`).
"""

from collections.abc import Sequence
from typing import final

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, PRNGKeyArray, PyTree

from .._types import (
    AbstractActionValues,
    AbstractNetworkOutput,
    AbstractPolicyOutput,
    ObservationActionReward,
    PolicyLogits,
)
from .._validation import check_positive_int
from ..agent import Agent
from ..losses import greedy_value


def _step_info(output: AbstractNetworkOutput) -> dict[str, Array]:
    """The value and scores of one network output (a value of 0 where the network has none)."""
    if isinstance(output, AbstractActionValues):
        return {"value": greedy_value(output.q_values), "logits": output.q_values}
    value = output.value if isinstance(output, AbstractPolicyOutput) else None
    info = {"value": jnp.zeros((), jnp.float32) if value is None else value}
    if isinstance(output, PolicyLogits):
        info["logits"] = output.logits
    return info


@final
class RlplayActor:
    """An agent as rlplay's actor: `reset(j, hx)`, `step(obs, act, rew, fin, hx)` and `value(...)`.

    All arguments are batched over environments (leading axis `B`). `fin[j]` is set when
    `obs[j]` is the first observation of an episode (the one before it ended); the
    actor then resets environment `j`'s recurrent state, and zeroes its previous action
    and reward, before acting, as [`podrace.envs.PreviousActionReward`][] does on
    device, so an agent acts the same here and in [`podrace.Anakin`][]. A network that
    reads [`podrace.ObservationActionReward`][] observations gets `(obs, act, rew)`;
    others read `obs` alone. The recurrent state `hx` is the network's carry with a
    leading batch axis (`()` for a feed-forward network).

    Each method is one jitted call. The policy's randomness is the actor's own key,
    split on every `step`.

    **Arguments:**

    - `agent`: the network (with the parameters to act with) and its policy.
    - `key`: the policy's randomness.
    """

    def __init__(self, agent: Agent, key: PRNGKeyArray):
        arrays, static = eqx.partition(agent, eqx.is_array)
        self._treedef = jax.tree.structure(arrays)
        self._leaves = jax.tree.leaves(arrays)
        self._key_data = jax.random.key_data(key)
        network = agent.network
        self._initial_carry = network.initial_carry()
        reads_action_reward = network.reads_previous_action_reward

        def rebuild(leaves: list[Array]) -> Agent:
            return eqx.combine(jax.tree.unflatten(self._treedef, leaves), static)

        def outputs(agent: Agent, obs, act, rew, fin, hx):
            def one(obs, act, rew, fin, hx):
                if reads_action_reward:
                    act, rew = jnp.where(fin, jnp.zeros_like(act), act), jnp.where(fin, 0.0, rew).astype(jnp.float32)
                    obs = ObservationActionReward(obs, act, rew)
                return agent.network(obs, agent.network.reset_carry(hx, fin))

            return jax.vmap(one)(obs, act, rew, fin, hx)

        def step(leaves, obs, act, rew, fin, hx, key_data):
            agent = rebuild(leaves)
            output, hx = outputs(agent, obs, act, rew, fin, hx)
            key, act_key = jax.random.split(jax.random.wrap_key_data(key_data))
            policy_step = jax.vmap(agent.policy)(output, jax.random.split(act_key, fin.shape[0]))
            info = jax.vmap(_step_info)(output)
            info.update(log_prob=policy_step.log_prob, entropy=policy_step.entropy)
            return policy_step.action, hx, info, jax.random.key_data(key)

        def value(leaves, obs, act, rew, fin, hx):
            return jax.vmap(_step_info)(outputs(rebuild(leaves), obs, act, rew, fin, hx)[0])["value"]

        def reset(hx, mask):
            return jax.tree.map(
                lambda c, initial: jnp.where(jnp.reshape(mask, mask.shape + (1,) * (c.ndim - 1)), initial, c),
                hx,
                self._initial_carry,
            )

        self._step, self._value, self._reset = jax.jit(step), jax.jit(value), jax.jit(reset)

    def load(self, agent: Agent) -> None:
        """Acts with `agent`'s parameters from now on (an agent of the same structure,
        e.g. `learner.agent(state)` after an update)."""
        arrays = eqx.filter(agent, eqx.is_array)
        if jax.tree.structure(arrays) != self._treedef:
            raise ValueError("RlplayActor.load: the agent's structure differs from the one the actor was built with.")
        self._leaves = jax.tree.leaves(arrays)

    def initial_hx(self, num_envs: int) -> PyTree[Array]:
        """The recurrent state of `num_envs` environments at the start of their episodes."""
        check_positive_int("RlplayActor.initial_hx", "num_envs", num_envs)
        return jax.tree.map(lambda c: jnp.broadcast_to(c, (num_envs, *jnp.shape(c))), self._initial_carry)

    def reset(self, j: int | Sequence[int] | ArrayLike, hx: PyTree[Array]) -> PyTree[Array]:
        """The recurrent state `hx` with environment `j`'s reset (a new tree; `hx` is unchanged).

        **Arguments:**

        - `j`: an environment index, a sequence of them, or a boolean mask over the batch.
        - `hx`: the recurrent state of the batch.

        **Returns:**

        `hx` with the chosen environments' state set to the initial one.
        """
        leaves = jax.tree.leaves(hx)
        if not leaves:
            return hx
        num_envs = leaves[0].shape[0]
        mask = np.asarray(j)
        if mask.dtype != np.bool_:
            indices = mask
            mask = np.zeros(num_envs, bool)
            mask[indices] = True
        if mask.shape != (num_envs,):
            raise ValueError(f"RlplayActor.reset: a mask needs shape ({num_envs},), got {mask.shape}.")
        return self._reset(hx, mask)

    def step(
        self, obs: ArrayLike, act: ArrayLike, rew: ArrayLike, fin: ArrayLike, hx: PyTree[Array]
    ) -> tuple[Array, PyTree[Array], dict[str, Array]]:
        """The next actions, the next recurrent state and what a learner needs about the step.

        **Arguments:**

        - `obs`: the observations `x_t`, `[B, ...]`.
        - `act`: the previous actions `a_{t-1}` (anything where `fin`).
        - `rew`: the rewards `r_t` of the previous step (anything where `fin`).
        - `fin`: `[B]` booleans, set where `obs` starts an episode.
        - `hx`: the recurrent state `h_t`, as the previous `step` returned it.

        **Returns:**

        The actions `a_t`, the recurrent state `h_{t+1}` and a dict of `[B]`-batched
        arrays: `value` (the state value: the network's value head, `max_a Q` for action
        values, 0 for a network without one), `logits` (for discrete outputs: the
        policy logits or the action values), `log_prob` and `entropy` of the policy
        that chose the actions.
        """
        fin = jnp.asarray(fin, bool)
        action, hx, info, self._key_data = self._step(
            self._leaves, obs, jnp.asarray(act), jnp.asarray(rew, jnp.float32), fin, hx, self._key_data
        )
        return action, hx, info

    def value(self, obs: ArrayLike, act: ArrayLike, rew: ArrayLike, fin: ArrayLike, hx: PyTree[Array]) -> Array:
        """The state values `v(x_t)` for the same arguments as `step`, without acting."""
        return self._value(
            self._leaves, obs, jnp.asarray(act), jnp.asarray(rew, jnp.float32), jnp.asarray(fin, bool), hx
        )
