"""An option given twice is an error, never last-wins (issue 52, item 1).

The parser keeps the last value of a plain option: ``--where split=TRAIN --where lang=en``
dropped the first condition and let TEST rows into training data. Now ``--where`` repeated
adds conditions, and every other option of every command given twice (or with its old
spelling) stops with one line naming it, exit 2. ``--set`` and recipe overrides refuse a
key given twice too.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import pytest
import typer.main

from helpers.cli_main import run_main
from zdebias.cli import app


def _input(tmp_path: Path) -> Path:
    rows = [
        {
            "premise": "a b",
            "hypothesis": "c d",
            "label": "entailment",
            "split": "TRAIN",
            "lang": "en",
        },
        {"premise": "a e", "hypothesis": "c f", "label": "neutral", "split": "TEST", "lang": "en"},
        {
            "premise": "a g",
            "hypothesis": "c h",
            "label": "contradiction",
            "split": "TRAIN",
            "lang": "de",
        },
    ]
    path = tmp_path / "w.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _error(capsys: pytest.CaptureFixture[str]) -> str:
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1, lines
    return lines[0]


def test_convert_where_repeated_keeps_both_conditions(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, out = _input(tmp_path), tmp_path / "o.jsonl"
    assert run_main(["convert", path, out, "--where", "split=TRAIN", "--where", "lang=en"]) == 0
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [r["meta"] for r in rows] == [{"split": "TRAIN", "lang": "en"}]  # no TEST row
    assert "left out 2 rows not selected by --where split=TRAIN,lang=en" in capsys.readouterr().err
    # one column twice: no row could hold both values, so it is refused
    again = tmp_path / "again.jsonl"
    args = ["convert", path, again, "--where", "split=TRAIN", "--where=split=TEST"]
    assert run_main(args) == 2
    assert "'split' is given twice (split=TRAIN and split=TEST)" in _error(capsys)
    assert not again.exists()


@pytest.mark.parametrize(
    ("command", "options", "named"),
    [
        ("convert", ["--label-map", "0=entailment", "--label-map", "1=neutral"], "--label-map"),
        ("convert", ["--columns", "premise=a", "--columns=hypothesis=b"], "--columns"),
        ("stats", ["--json", "--json"], "--json"),
        ("stats", ["-q", "--quiet"], "--quiet"),
        ("stats", ["--format", "jsonl", "--format", "csv"], "--format"),
        ("filter", ["--seed", "1", "--seed", "2"], "--seed"),
        (
            "filter",
            ["--where", "split=TRAIN", "--on-error", "skip", "--on-error=raise"],
            "--on-error",
        ),
    ],
)
def test_a_repeated_option_is_one_line_naming_it(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    command: str,
    options: list[str],
    named: str,
) -> None:
    path = _input(tmp_path)
    outs = {"convert": [tmp_path / "o.jsonl"], "stats": [], "filter": ["--out", tmp_path / "f"]}
    assert run_main([command, path, *outs[command], *options]) == 2
    assert _error(capsys).startswith(f"error: {named} is given twice; give it once")
    assert not (tmp_path / "o.jsonl").exists() and not (tmp_path / "f").exists()


def test_an_old_spelling_with_the_new_one_is_refused_even_when_they_agree(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _input(tmp_path)
    args = ["filter", path, "--out", tmp_path / "f", "--biased-k", "3", "--top-k", "3"]
    assert run_main(args) == 2
    assert _error(capsys).startswith(
        "error: --biased-k and --top-k are both given (--top-k is an old spelling of the same "
        "setting); give only --biased-k"
    )


@functools.cache
def _commands() -> dict[str, Any]:
    group = typer.main.get_command(app)
    found: dict[str, Any] = {"": group}
    for name, cmd in group.commands.items():  # type: ignore[attr-defined]
        found[name] = cmd
        for sub, sub_cmd in (getattr(cmd, "commands", None) or {}).items():
            found[f"{name} {sub}"] = sub_cmd
    return found


def _twice(param: Any) -> list[str]:
    flag = next(o for o in param.opts if o.startswith("--"))
    return [flag, flag] if param.is_flag else [flag, "1", f"{flag}=1"]


def _cases() -> list[tuple[str, str]]:
    cases = []
    for name, cmd in _commands().items():
        for param in cmd.params:
            if type(param).__name__.endswith("Argument") or param.is_eager:
                continue
            if not (param.multiple or param.count):
                cases.append((name, param.name))
    return cases


def test_every_option_of_every_command_is_covered() -> None:
    # the options that legitimately repeat (each occurrence adds an item)
    repeatable = sorted(
        {
            (name, p.name)
            for name, cmd in _commands().items()
            for p in cmd.params
            if getattr(p, "multiple", False)
        }
    )
    assert {"extra", "redo", "suite", "track", "where"} <= {p for _, p in repeatable}
    assert len(_cases()) > 300


@pytest.mark.parametrize(("name", "option"), _cases())
def test_every_option_given_twice_is_refused(name: str, option: str) -> None:
    cmd = _commands()[name]
    param = next(p for p in cmd.params if p.name == option)
    with pytest.raises(Exception) as info:  # click's UsageError (typer vendors click)
        cmd.make_context(name or "zdebias", _twice(param))
    assert type(info.value).__name__ == "UsageError", info.value
    message = info.value.format_message()  # type: ignore[attr-defined]
    if "__" in option:  # an old spelling given twice is named as itself
        assert "is given twice" in message and param.opts[0] in message
    else:
        assert message.startswith(f"{param.opts[0]}") and "is given twice" in message


def test_set_and_recipe_overrides_refuse_a_key_given_twice() -> None:
    from zdebias.errors import ConfigError
    from zdebias.models.trainer_settings import parse_sets
    from zdebias.pipeline.loader import apply_overrides

    assert parse_sets(["warmup_ratio=0.1", "weight_decay=0.01"]) == {
        "warmup_ratio": 0.1,
        "weight_decay": 0.01,
    }
    with pytest.raises(ConfigError, match="--set warmup_ratio is given twice"):
        parse_sets(["warmup_ratio=0.1", "warmup_ratio=0.2"])
    with pytest.raises(ConfigError, match=r"override seed is given twice \(seed=1 and seed=2\)"):
        apply_overrides({"seed": 0}, ["seed=1", "seed=2"])
    with pytest.raises(ConfigError, match=r"data.train.path is given twice \(data.train=a.jsonl"):
        apply_overrides({"data": {"train": "x"}}, ["data.train=a.jsonl", "data.train.path=b"])


def test_an_old_and_a_new_key_of_one_setting_are_refused_even_when_equal() -> None:
    from zdebias.commands._cli import legacy_argv
    from zdebias.errors import ConfigError
    from zdebias.generation.settings import GeneratorSettings

    with pytest.raises(ConfigError, match=r"both 'lr' \(deprecated\) and 'learning_rate' are set"):
        GeneratorSettings.of(None, lr=1e-3, learning_rate=1e-3)
    with pytest.raises(ConfigError, match="logging_steps is given twice"):
        GeneratorSettings.of(None, extra=["logging_steps=5"], logging_steps=6)
    with pytest.raises(ConfigError, match=r"--json a.json \(the old spelling of --out a.json\)"):
        legacy_argv(["stats", "d.jsonl", "--json", "a.json", "--out", "b.json"])


def test_a_legacy_feature_settings_key_beside_its_own_is_refused() -> None:
    from zdebias.errors import ConfigError
    from zdebias.features.settings import FeatureSettings

    legacy = {"feature_settings": {"hypo_only_folds": 3, "my_option": 1}}
    read = FeatureSettings.checked(legacy)
    assert (read.hypo_only_folds, read.feature_options) == (3, {"my_option": 1})
    with pytest.raises(ConfigError, match="'hypo_only_folds' is given both in feature_settings"):
        FeatureSettings.checked({**legacy, "hypo_only_folds": 5})
    with pytest.raises(ConfigError, match="'my_option' is given both in feature_settings"):
        FeatureSettings.checked({**legacy, "feature_options": {"my_option": 2}})
