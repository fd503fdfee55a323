"""Executors: what runs a learner.

- `anakin`: acting, environment steps and learning in one
  compiled program, the environment batch split over the devices of a mesh.
- `population`: many Anakin pipelines side by side (`vmap`),
  split over devices.
- `pbt`: population-based training of a population (exploit and explore between
  updates, in the same compiled program).
- `host`: host environments (Gymnasium) feeding a learner on
  the device.
- `sebulba`: actor threads stepping host environments on actor devices,
  their trajectories learnt from on learner devices of their own (the Sebulba
  architecture).
- `ray_actors`: host environments in Ray actors (other processes or
  machines), returning trajectories or gradients to a learner on the driver
  (needs the `ray` extra; Ray is imported when a pool is built).
- `normalization`: running normalisation of observations and rewards, its
  statistics in the pipeline's state.
- `evaluation`: whole episodes with a fixed network and policy.
- `match`: games of a two-player game between an agent and a fixed opponent.
- `pipeline`: the contract every executor's pipeline keeps (`init`, `train`, the
  sizes that turn updates into environment steps, and each member's evaluation,
  network and evaluation environment).
- `actor`: an agent behind rlplay's actor interface, for host loops.

The learner never knows which executor feeds it: every one produces the same
[`podrace.Trajectory`][].
"""

from . import (
    actor as actor,
    anakin as anakin,
    evaluation as evaluation,
    host as host,
    match as match,
    normalization as normalization,
    pbt as pbt,
    pipeline as pipeline,
    population as population,
    ray_actors as ray_actors,
    sebulba as sebulba,
)


__all__ = [
    "actor",
    "anakin",
    "evaluation",
    "host",
    "match",
    "normalization",
    "pbt",
    "pipeline",
    "population",
    "ray_actors",
    "sebulba",
]
