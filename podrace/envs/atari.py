"""Pong from pixels for host loops: the preprocessing of Ray's Pong example, as Gymnasium wrappers.

`make_pong()` gives ALE's `Pong-v5` with two actions (up, down) and 6400 inputs a step:
the court cropped and downsampled by 2, the background erased, what is left set to 1,
minus the previous frame's. It is a picklable function that registers ALE's
environments where it runs, so Ray actors and worker processes can build it themselves.

Reference: A. Karpathy, "Deep Reinforcement Learning: Pong from Pixels", 2016 (the
preprocessing that Ray's Pong example uses).

Requires Gymnasium and ale-py (which ships the ROMs): `pip install 'podrace[atari]'`.
"""

from typing import Any, final

import gymnasium
import numpy as np


PONG_INPUTS = 80 * 80
_BACKGROUND = (144, 109)  # the two background colours of the red channel


@final
class PongFrameDifference(gymnasium.ObservationWrapper):
    """6400 inputs: the court (rows 35-194) downsampled by 2 in the red channel, background
    erased, binarised, minus the previous frame's (zeros on the first frame of a game)."""

    def __init__(self, env: gymnasium.Env):
        super().__init__(env)
        self.observation_space = gymnasium.spaces.Box(-1.0, 1.0, (PONG_INPUTS,), np.float32)
        self._previous: np.ndarray | None = None

    def reset(self, **kwargs: Any):
        self._previous = None
        return super().reset(**kwargs)

    def observation(self, observation: np.ndarray) -> np.ndarray:
        court = observation[35:195:2, ::2, 0]
        current = ((court != _BACKGROUND[0]) & (court != _BACKGROUND[1]) & (court != 0)).astype(np.float32).ravel()
        difference = np.zeros_like(current) if self._previous is None else current - self._previous
        self._previous = current
        return difference


@final
class PongUpOrDown(gymnasium.ActionWrapper):
    """Actions 0 and 1 for Pong's RIGHT (2, the paddle goes up) and LEFT (3, down)."""

    def __init__(self, env: gymnasium.Env):
        super().__init__(env)
        self.action_space = gymnasium.spaces.Discrete(2)

    def action(self, action: Any) -> int:
        return 2 + int(action)


def make_pong(**kwargs: Any) -> gymnasium.Env:
    """ALE's `Pong-v5` (`kwargs` go to `gymnasium.make`) with the two wrappers above."""
    try:
        import ale_py
    except ImportError as error:
        raise ImportError("Pong needs ale-py: pip install 'podrace[atari]'.") from error
    gymnasium.register_envs(ale_py)
    return PongUpOrDown(PongFrameDifference(gymnasium.make("ALE/Pong-v5", **kwargs)))
