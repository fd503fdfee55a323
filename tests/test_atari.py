"""The Pong preprocessing of `podrace.envs.atari`, on synthetic frames (no emulator)."""

import gymnasium
import numpy as np
import pytest

from podrace.envs.atari import PONG_INPUTS, PongFrameDifference, PongUpOrDown


class _Frames(gymnasium.Env):
    """Pong-shaped RGB frames: background colour 144 with one pixel of colour 236 that
    moves one column to the right each step; records the actions it is given."""

    observation_space = gymnasium.spaces.Box(0, 255, (210, 160, 3), np.uint8)
    action_space = gymnasium.spaces.Discrete(6)

    def __init__(self):
        self.column, self.actions = 0, []

    def _frame(self) -> np.ndarray:
        frame = np.full((210, 160, 3), 144, np.uint8)
        frame[35:195:2, 0::2, 0][10, :4] = 109  # the other background colour, erased too
        frame[35 + 2 * 20, 2 * self.column, 0] = 236
        return frame

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.column = 0
        return self._frame(), {}

    def step(self, action):
        self.actions.append(action)
        self.column += 1
        return self._frame(), 0.0, False, False, {}


def test_frame_differences_of_the_binarised_court():
    env = PongFrameDifference(_Frames())
    assert env.observation_space.shape == (PONG_INPUTS,)
    first, _ = env.reset()
    np.testing.assert_array_equal(first, np.zeros(PONG_INPUTS, np.float32))
    second, *_ = env.step(0)
    expected = np.zeros((80, 80), np.float32)
    expected[20, 1], expected[20, 0] = 1.0, -1.0  # the pixel moved from column 0 to 1
    np.testing.assert_array_equal(second, expected.ravel())
    assert second.dtype == np.float32
    again, _ = env.reset()  # a new game starts from zeros, not from the last frame
    np.testing.assert_array_equal(again, np.zeros(PONG_INPUTS, np.float32))


@pytest.mark.parametrize(("action", "pong_action"), [(0, 2), (1, 3)])
def test_two_actions_move_the_paddle_up_or_down(action, pong_action):
    frames = _Frames()
    env = PongUpOrDown(frames)
    assert env.action_space == gymnasium.spaces.Discrete(2)
    env.reset()
    env.step(action)
    assert frames.actions == [pong_action]
