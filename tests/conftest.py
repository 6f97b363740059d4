"""Shared fixtures: real data (skips without ZDEBIAS_TEST_DATA) and tiny random models."""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from helpers import fake_cuda

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

fake_cuda.install_if_wanted()  # ZDEBIAS_TEST_FAKE_CUDA=1: a CPU torch that claims a GPU


#: fixtures that train and sample a tiny generator: a test using one is in the slow tier
SLOW_FIXTURES = frozenset({"tiny_generator", "ending_generator"})


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked ``cuda`` skip without a real CUDA GPU (``scripts/gpu_tests.sh`` runs them);
    tests that use a generator fixture are marked ``slow``."""
    for item in items:
        if SLOW_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)
    marked = [item for item in items if item.get_closest_marker("cuda")]
    if marked and not fake_cuda.real_cuda():
        skip = pytest.mark.skip(reason="needs a CUDA GPU")
        for item in marked:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _zdebias_logs_reach_caplog(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch):
    """A test that reads ``caplog`` sees zdebias's records even after an in-process CLI run
    turned their propagation off (``configure_logging``): pytest < 9.1 reads only records
    that reach the root logger."""
    if "caplog" in request.fixturenames:
        monkeypatch.setattr(logging.getLogger("zdebias"), "propagate", True)


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The shared real datasets; tests that use it skip when ZDEBIAS_TEST_DATA is unset."""
    value = os.environ.get("ZDEBIAS_TEST_DATA")
    if not value or not Path(value).is_dir():
        pytest.skip("ZDEBIAS_TEST_DATA is not set (real datasets unavailable)")
    return Path(value)


@pytest.fixture(scope="session")
def _tiny_model_store(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., Path]:
    from zdebias.models.tiny import make_tiny_model

    root = tmp_path_factory.mktemp("tiny-models")
    built: dict[tuple, Path] = {}

    def get(kind: str, **options: object) -> Path:
        key = (kind, *sorted(options.items()))
        if key not in built:
            name = "-".join([kind, *(f"{k}={v}" for k, v in sorted(options.items()))])
            built[key] = make_tiny_model(kind, root / name.replace(",", "_"), **options)
        return built[key]

    return get


@pytest.fixture
def tiny_model(_tiny_model_store: Callable[..., Path], tmp_path: Path) -> Callable[..., Path]:
    """``tiny_model("gpt2")`` → a private copy of a random tiny model folder (built once).

    Kinds: bert (sequence classification by default), gpt2, llama, t5. Options are passed to
    :func:`zdebias.models.tiny.make_tiny_model` (``head=``, ``num_labels=``, ``labels=``).
    """

    def copy(kind: str, **options: object) -> Path:
        source = _tiny_model_store(kind, **options)
        target = tmp_path / f"model-{kind}-{len(list(tmp_path.glob('model-*')))}"
        shutil.copytree(source, target)
        return target

    return copy


@pytest.fixture(scope="session")
def tiny_generator(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random tiny GPT-2 saved as an nli generator folder (format tokens added, no
    training), built once; tests only read it."""
    from zdebias.generation.tiny import make_tiny_generator

    return make_tiny_generator(tmp_path_factory.mktemp("gen") / "g", max_length=24)
