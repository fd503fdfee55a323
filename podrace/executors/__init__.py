"""Executors: what runs a learner.

- `anakin`: acting, environment steps and learning in one
  compiled program, the environment batch split over the devices of a mesh.
- `population`: many Anakin pipelines side by side (`vmap`),
  split over devices.
- `host`: host environments (Gymnasium) feeding a learner on
  the device.
- `evaluation`: whole episodes with a fixed network and policy.

The learner never knows which executor feeds it: every one produces the same
[`podrace.Trajectory`][].
"""

from . import anakin as anakin, evaluation as evaluation, host as host, population as population


__all__ = ["anakin", "evaluation", "host", "population"]
