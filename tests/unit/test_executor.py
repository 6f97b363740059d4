"""The one execution setting (``--ray`` / ``executor: ray``): its two spellings, its checks, and
the clear refusals; none of this needs Ray installed."""

from __future__ import annotations

import importlib.util

import pytest

from helpers.cli_main import run_main
from zdebias.classify.settings import ConfidenceSettings, InferenceSettings
from zdebias.errors import ConfigError
from zdebias.executor import ExecutorSettings, require_ray
from zdebias.generation.settings import SampleSettings
from zdebias.pipeline.catalogue import get_stage


def test_without_the_setting_nothing_runs_on_ray() -> None:
    assert not InferenceSettings().on_ray and not SampleSettings(n=1).on_ray
    assert not ExecutorSettings(executor="local").on_ray


def test_cli_form_and_recipe_form_are_one_setting() -> None:
    flat = ConfidenceSettings(ray="auto", ray_actors=4, ray_num_gpus=1)
    nested = ConfidenceSettings.checked({"executor": "ray", "ray": {"actors": 4, "num_gpus": 1}})
    for s in (flat, nested):
        assert s.on_ray and s.address == "auto" and s.ray_actors == 4
        assert s.actor_options() == {"num_cpus": 1.0, "num_gpus": 1.0}
    assert ExecutorSettings.checked({"executor": "ray"}).address == "auto"
    head = ExecutorSettings.checked({"ray": {"address": "ray://head:10001"}})
    assert head.on_ray and head.address == "ray://head:10001"


def test_a_recipe_stage_takes_executor_ray() -> None:
    config = get_stage("sample").config.model_validate(
        {"stage": "sample", "generator": "g", "n": 10, "executor": "ray", "ray": {"actors": 2}}
    )
    assert config.on_ray and config.ray_actors == 2


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"ray": {"gpus": 1}}, "ray.gpus: unknown; expected address, actors, num_gpus, num_cpus"),
        ({"executor": "local", "ray": "auto"}, "executor is local but ray is 'auto'"),
        ({"ray_actors": 0}, "ray_actors: Input should be greater than or equal to 1"),
    ],
)
def test_bad_settings_say_what_is_wrong(data: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        ExecutorSettings.checked(data)


def test_actor_count_follows_the_resources() -> None:
    cluster = {"CPU": 16.0, "GPU": 8.0}
    assert ExecutorSettings(ray="auto").actor_count(cluster) == 16
    assert ExecutorSettings(ray="auto", ray_num_cpus=4).actor_count(cluster) == 4
    assert ExecutorSettings(ray="auto", ray_num_gpus=1).actor_count(cluster) == 8
    assert ExecutorSettings(ray="auto", ray_num_gpus=2, ray_actors=3).actor_count(cluster) == 3


def test_ray_with_workers_is_refused_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    code = run_main(
        ["sample", "--generator", "g", "--n", "5", "--out", "o", "--ray", "auto", "--workers", "2"]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1
    assert "ray runs the rounds on its actors: drop worker / workers" in err[0]


def test_without_the_extra_the_error_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "ray" else real(name, *a)
    )
    with pytest.raises(ConfigError, match=r"--ray needs Ray: pip install 'zdebias\[ray\]'"):
        require_ray()


def test_running_a_stage_on_ray_does_not_redo_it() -> None:
    from zdebias.pipeline.digests import stage_hash
    from zdebias.pipeline.loader import recipe_from_dict

    def hashed(**settings: object) -> str:
        stage = {"stage": "confidence-filter", "input": "d", "classifier": "c", **settings}
        recipe = recipe_from_dict(
            {"name": "r", "task": "nli", "data": {"d": {"path": "x.jsonl"}}, "stages": {"f": stage}}
        )
        return stage_hash(recipe, "f", recipe.stages["f"], {})

    plain = hashed()
    assert hashed(executor="ray", ray={"actors": 4, "num_gpus": 1}) == plain
    assert hashed(threshold=0.5) != plain
