"""MuZero's agent: mctx's search over a learnt model, acting from the observation alone."""

from typing import Any, final

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, PRNGKeyArray, PyTree

from .._types import PolicyStep, legal_actions
from .._validation import as_float_array, check_in_unit_interval
from ..agent import AbstractMemorylessAgent, Agent
from ..networks import MuZeroNetwork, split_action_mask
from ..policies import Categorical
from ._mctx import import_mctx
from .operators import AbstractSearchOperator, GumbelMuZeroSearch, search_policy_step


@final
class MuZeroAgent(AbstractMemorylessAgent):
    """MuZero: acts by mctx's search over a learnt model, from the observation alone.

    The root is the network's representation of the observation and its prediction
    there; each simulation steps the learnt dynamics from a latent state and predicts at
    the latent state reached. In mctx's terms, a step gives the dynamics' `reward`,
    `discount` (the agent's, on every step: the model does not learn where episodes end),
    and the prediction's `prior_logits` and `value`. Where observations are
    [`podrace.MaskedObservation`][]s, the illegal actions are mctx's `invalid_actions` at
    the root; below it every action is searched. The policy step's `extras` is the
    search's [`podrace.SearchStatistics`][]; its `log_prob` and `entropy` are those of the
    search's policy.

    Unlike [`podrace.search.AlphaZeroAgent`][] it needs no environment state, so every
    executor runs it (Anakin's rollout, the host collectors and the actors).

    Reference: Schrittwieser et al., "Mastering Atari, Go, Chess and Shogi by Planning with
    a Learned Model", Nature 2020; Danihelka et al., "Policy improvement by planning with
    Gumbel", ICLR 2022; mctx, https://github.com/google-deepmind/mctx.

    **Arguments:**

    - `network`: the learnt model, a [`podrace.networks.MuZeroNetwork`][].
    - `search`: mctx's policy-improvement operator, [`podrace.search.GumbelMuZeroSearch`][]
        (the default) or [`podrace.search.MuZeroSearch`][].
    - `discount`: the discount of the search's returns, in [0, 1].
    """

    network: MuZeroNetwork
    search: AbstractSearchOperator = eqx.field(default_factory=GumbelMuZeroSearch)
    discount: Float[Array, ""] = eqx.field(default=1.0, converter=as_float_array, kw_only=True)

    def __check_init__(self):
        check_in_unit_interval("MuZeroAgent", "discount", self.discount)
        if not isinstance(self.network, MuZeroNetwork):
            raise ValueError(
                f"MuZeroAgent searches with a learnt model, but its network is a {type(self.network).__name__}: "
                "give it a podrace.networks.MuZeroNetwork (representation, dynamics and prediction), or use "
                "podrace.search.AlphaZeroAgent to search with the environment itself."
            )

    def __call__(
        self, observation: PyTree[Array], carry: PyTree[Array], key: PRNGKeyArray
    ) -> tuple[PolicyStep, PyTree[Array]]:
        mctx = import_mctx("MuZeroAgent")
        observation, mask = split_action_mask(observation)
        latent = self.network.represent(observation)
        output = self.network.predict(latent)
        assert output.value is not None
        legal = jnp.ones(self.network.num_actions, bool) if mask is None else legal_actions(mask)
        root = mctx.RootFnOutput(prior_logits=output.logits[None], value=output.value[None], embedding=latent[None])

        def recurrent_fn(params: None, key: PRNGKeyArray, action: Array, latent: Array) -> tuple[Any, Array]:
            del params, key
            return jax.vmap(lambda latent, action: self._model_step(mctx, latent, action))(latent, action)

        return search_policy_step(self.search(root, recurrent_fn, ~legal[None], key)), carry

    def _model_step(self, mctx: Any, latent: Array, action: Array) -> tuple[Any, Array]:
        """mctx's recurrent function for one node: the dynamics and the prediction there."""
        latent, reward = self.network.transition(latent, action)
        output = self.network.predict(latent)
        assert output.value is not None
        step = mctx.RecurrentFnOutput(
            reward=reward, discount=self.discount, prior_logits=output.logits, value=output.value
        )
        return step, latent

    def prior(self) -> Agent:
        """The network and the categorical policy of its prediction at the observation's
        latent state: what the losses differentiate (and what acts without a search).

        **Returns:**

        `Agent(network, Categorical())`.
        """
        return Agent(self.network, Categorical())
