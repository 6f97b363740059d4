"""Where the units of work run: in this process (the default) or on a Ray cluster.

One settings object, :class:`ExecutorSettings`, is shared by the operations that can run on Ray
(sampling, predict, confidence-filter, evaluate): their settings classes subclass it, so the
commands offer ``--ray auto|ADDRESS``, ``--ray-actors``, ``--ray-num-gpus`` and
``--ray-num-cpus``, and a recipe stage takes ``executor: ray`` with
``ray: {address, actors, num_gpus, num_cpus}``. Without them nothing changes.

Ray is an optional extra (``pip install 'zdebias[ray]'``); it is imported only by
:func:`ray_session`, when an operation runs on Ray.
"""

from __future__ import annotations

import contextlib
import importlib.util
from collections.abc import Iterator
from typing import Any, ClassVar, Literal

from pydantic import model_validator

from zdebias.errors import ConfigError
from zdebias.settings import Settings, setting

#: the recipe's ``ray: {...}`` keys → the settings' fields
_RAY_KEYS = {
    "address": "ray",
    "actors": "ray_actors",
    "num_gpus": "ray_num_gpus",
    "num_cpus": "ray_num_cpus",
}


class ExecutorSettings(Settings):
    """Where an operation's units of work run: here, or on Ray actors with these resources."""

    help_panel: ClassVar[str] = "Execution"

    executor: Literal["local", "ray"] | None = setting(
        None,
        "Where the work runs: local (this process) or ray (Ray actors; default: ray when --ray "
        "is given, else local).",
    )
    ray: str | None = setting(
        None,
        "Run on a Ray cluster (needs the ray extra): auto (the cluster this machine "
        "belongs to, else a local one) or its address (HOST:6379, ray://HOST:10001).",
    )
    ray_actors: int | None = setting(
        None,
        "Ray actors, each holding the model (default: the cluster's GPUs / --ray-num-gpus, "
        "else its CPUs / --ray-num-cpus).",
        ge=1,
    )
    ray_num_gpus: float = setting(0.0, "GPUs per Ray actor (0: the actors run on CPUs).", ge=0)
    ray_num_cpus: float = setting(1.0, "CPUs per Ray actor.", gt=0)

    @model_validator(mode="before")
    @classmethod
    def _recipe_form(cls, data: Any) -> Any:
        """A recipe's ``ray: {address, actors, num_gpus, num_cpus}`` as the flat fields."""
        if not isinstance(data, dict) or not isinstance(data.get("ray"), dict):
            return data
        out = {k: v for k, v in data.items() if k != "ray"}
        for key, value in data["ray"].items():
            if key not in _RAY_KEYS:
                raise ValueError(f"ray.{key}: unknown; expected {', '.join(_RAY_KEYS)}")
            out[_RAY_KEYS[key]] = value
        out.setdefault("ray", "auto")
        out.setdefault("executor", "ray")
        return out

    @model_validator(mode="after")
    def _one_executor(self) -> ExecutorSettings:
        if self.executor == "local" and self.ray is not None:
            raise ValueError(f"executor is local but ray is {self.ray!r}; drop one")
        return self

    @property
    def on_ray(self) -> bool:
        """Whether the units run on Ray."""
        return self.executor == "ray" or self.ray is not None

    @property
    def address(self) -> str:
        """The Ray cluster to run on: ``ray``, else ``auto``."""
        return self.ray or "auto"

    def actor_options(self) -> dict[str, float]:
        """The resources of one actor, as ``ray.remote`` options."""
        return {"num_cpus": self.ray_num_cpus, "num_gpus": self.ray_num_gpus}

    def actor_count(self, resources: dict[str, float]) -> int:
        """``ray_actors``, else as many actors as the cluster's ``resources`` hold (at least 1)."""
        if self.ray_actors is not None:
            return self.ray_actors
        if self.ray_num_gpus > 0:
            return max(1, int(resources.get("GPU", 0) // self.ray_num_gpus))
        return max(1, int(resources.get("CPU", 1) // self.ray_num_cpus))


def require_ray() -> Any:
    """The ``ray`` module, or a clear error when the extra is not installed."""
    if importlib.util.find_spec("ray") is None:
        raise ConfigError("--ray needs Ray: pip install 'zdebias[ray]'")
    import ray

    return ray


@contextlib.contextmanager
def ray_session(settings: ExecutorSettings) -> Iterator[Any]:
    """Ray connected to ``settings.ray`` (yields the ``ray`` module): a session already open in
    this process is used as it is; one opened here is shut down at the end."""
    ray = require_ray()
    if ray.is_initialized():
        yield ray
        return
    address = None if settings.address == "auto" else settings.address
    try:
        ray.init(address=address, include_dashboard=False, log_to_driver=False)
    except (ConnectionError, ValueError) as err:
        raise ConfigError(f"--ray {settings.address}: cannot connect ({err})") from None
    try:
        yield ray
    finally:
        ray.shutdown()


__all__ = ["ExecutorSettings", "ray_session", "require_ray"]
