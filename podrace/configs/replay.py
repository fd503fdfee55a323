"""The settings of the families that learn from a replay buffer."""

from .base import AbstractConfig, positive_int, setting


class AbstractReplayConfig(AbstractConfig):
    """A family that stores transitions in a uniform replay buffer and learns from batches of them."""

    buffer_size: int = setting(10_000, "replay capacity, in transitions", positive_int)
    batch_size: int = setting(128, "transitions per gradient step", positive_int)
    min_replay_size: int = setting(1_000, "transitions stored before learning starts", positive_int)
    gradient_steps: int = setting(1, "gradient steps per update", positive_int)

    @property
    def gradient_steps_per_update(self) -> int:
        return self.gradient_steps
