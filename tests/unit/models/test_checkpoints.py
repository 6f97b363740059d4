"""Resumable training: a run cut after a checkpoint and started again ends with exactly the
weights of an uninterrupted run (on CPU, forced where a GPU is visible; fixed seed), for the
classifier, the generator and the infiller; checkpoints live beside the output, never in it,
and are removed once it is published."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import load_file

from zdebias.data.schema import Record
from zdebias.errors import ConfigError
from zdebias.models import checkpoints as ck
from zdebias.models.checkpoints import COMPLETE, checkpoint_root

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from helpers.nli_toy import toy_records


class Cut(Exception):
    """Stands in for a kill right after a checkpoint was written."""


@pytest.fixture
def cut_after(monkeypatch: pytest.MonkeyPatch) -> Callable[[int], None]:
    """``cut_after(k)``: the next training stops (raises :class:`Cut`) once the checkpoint
    of step ``k`` or later is complete."""

    def arm(step: int) -> None:
        original = ck.Checkpointing.on_save

        def on_save(self, args, state, control, **kwargs):  # type: ignore[no-untyped-def]
            out = original(self, args, state, control, **kwargs)
            if state.global_step >= step:
                monkeypatch.setattr(ck.Checkpointing, "on_save", original)
                raise Cut(state.global_step)
            return out

        monkeypatch.setattr(ck.Checkpointing, "on_save", on_save)

    return arm


def _weights(folder: Path) -> dict[str, torch.Tensor]:
    return load_file(folder / "model.safetensors")


def _assert_same_weights(a: Path, b: Path) -> None:
    wa, wb = _weights(a), _weights(b)
    assert wa.keys() == wb.keys()
    assert [k for k in wa if not torch.equal(wa[k], wb[k])] == []


def _checkpoints(out: Path) -> list[str]:
    root = checkpoint_root(out)
    return sorted(p.name for p in root.iterdir()) if root.is_dir() else []


def _toy_nli(n: int, seed: int) -> list[Record]:
    cues = {
        "entailment": "A person is outside.",
        "neutral": "The team celebrates their win.",
        "contradiction": "Nobody is sleeping.",
    }
    premises = ["A man sleeps on a bench.", "Two dogs run in the snow.", "A woman plays."]
    labels = list(cues)
    return [
        Record(f"t{seed}-{i}", labels[i % 3], premises[(i * 7 + seed) % 3], cues[labels[i % 3]])
        for i in range(n)
    ]


@pytest.mark.slow
def test_classifier_resumes_to_the_same_weights(
    tiny_model: Callable[..., Path], tmp_path: Path, cut_after: Callable[[int], None]
) -> None:
    from zdebias.classify.train import train_classifier

    bert = tiny_model("bert")
    train, dev = _toy_nli(48, 0), _toy_nli(12, 1)  # 6 steps per epoch, 12 in all
    kw: dict[str, Any] = dict(
        model=str(bert), epochs=2, batch_size=8, learning_rate=5e-3, warmup_steps=0,
        patience=5, checkpoint_steps=3, device="cpu", progress=False,
    )  # fmt: skip
    whole = train_classifier(train, dev, tmp_path / "a", **kw)
    assert whole["steps"] == 12 and whole["resumed_from_step"] is None
    assert not checkpoint_root(tmp_path / "a").exists()  # removed once published

    # cut three times: mid-epoch, at the end of an epoch (saved after its evaluation), in
    # the second epoch; each start resumes from the checkpoint the previous one left
    for cut, resumed_from in [(3, None), (6, 3), (9, 6)]:
        cut_after(cut)
        with pytest.raises(Cut):
            train_classifier(train, dev, tmp_path / "b", **kw)
        assert _checkpoints(tmp_path / "b") == [f"checkpoint-{cut}", "zdebias-run.json"]
        assert not (tmp_path / "b").exists()
        if resumed_from is not None:
            assert (checkpoint_root(tmp_path / "b") / f"checkpoint-{cut}" / COMPLETE).is_file()
    resumed = train_classifier(train, dev, tmp_path / "b", **kw)
    assert resumed["resumed_from_step"] == 9 and resumed["steps"] == 12
    _assert_same_weights(tmp_path / "a", tmp_path / "b")
    # the loss is the mean over all 12 steps, not over the 3 after the last cut
    assert resumed["train_loss"] == pytest.approx(whole["train_loss"], rel=1e-6)
    assert resumed["history"] == whole["history"]  # early stopping's state survived
    assert len(whole["history"]) == 2 and resumed["best"] == whole["best"]
    assert not checkpoint_root(tmp_path / "b").exists()
    assert sorted(p.name for p in (tmp_path / "b").iterdir()) == sorted(
        p.name for p in (tmp_path / "a").iterdir()
    )
    # the training dynamics of the epochs before the cuts were kept in the checkpoints
    dynamics = "training_dynamics.jsonl"
    assert (tmp_path / "b" / dynamics).read_bytes() == (tmp_path / "a" / dynamics).read_bytes()
    assert whole["training_dynamics"]["values"] == 96  # 48 examples x 2 epochs


@pytest.mark.slow
def test_a_checkpoint_without_totals_takes_the_loss_before_the_cut_from_its_log_lines(
    tiny_model: Callable[..., Path], tmp_path: Path, cut_after: Callable[[int], None]
) -> None:
    """Checkpoints written before zdebias kept the loss sum: a run resumed from one adds the
    logged losses of the steps before the cut (exact when the cut falls on a log line)."""
    import json

    from zdebias.classify.train import train_classifier

    bert = tiny_model("bert")
    train, dev = _toy_nli(48, 0), _toy_nli(12, 1)
    kw: dict[str, Any] = dict(
        model=str(bert), epochs=2, batch_size=8, learning_rate=5e-3, warmup_steps=0,
        patience=5, checkpoint_steps=3, logging_steps=3, device="cpu", progress=False,
    )  # fmt: skip
    whole = train_classifier(train, dev, tmp_path / "a", **kw)
    cut_after(9)
    with pytest.raises(Cut):
        train_classifier(train, dev, tmp_path / "b", **kw)
    state = checkpoint_root(tmp_path / "b") / "checkpoint-9" / ck.STATE_FILE
    saved = json.loads(state.read_text())
    assert saved["run_totals"]["seconds"] > 0
    steps_1_to_9 = saved["run_totals"]["loss_sum"]
    assert steps_1_to_9 / 9 != pytest.approx(whole["train_loss"], rel=1e-3)  # it matters
    state.write_text(json.dumps({k: v for k, v in saved.items() if k != "run_totals"}))
    resumed = train_classifier(train, dev, tmp_path / "b", **kw)
    assert resumed["resumed_from_step"] == 9
    assert resumed["train_loss"] == pytest.approx(whole["train_loss"], rel=1e-6)


@pytest.mark.slow
def test_generator_resumes_to_the_same_weights(
    tiny_model: Callable[..., Path], tmp_path: Path, cut_after: Callable[[int], None]
) -> None:
    from zdebias.generation.trainer import train_generator

    gpt = tiny_model("gpt2")
    records = toy_records()  # 12 records: 3 steps per epoch; λ = 0.5 draws wrong labels
    kw: dict[str, Any] = dict(
        epochs=3,
        batch_size=4,
        learning_rate=1e-3,
        checkpoint_steps=1,
        use_cpu=True,
        progress=False,
    )
    whole = train_generator(records, gpt, tmp_path / "a", **kw)
    cut_after(4)
    with pytest.raises(Cut):
        train_generator(records, gpt, tmp_path / "b", **kw)
    resumed = train_generator(records, gpt, tmp_path / "b", **kw)
    assert (whole["steps"], resumed["steps"], resumed["resumed_from_step"]) == (9, 9, 4)
    assert resumed["train_tokens"] == whole["train_tokens"]  # our counters survived
    assert resumed["train_loss"] == pytest.approx(whole["train_loss"], abs=1e-4)  # all 9 steps
    _assert_same_weights(tmp_path / "a", tmp_path / "b")
    assert not checkpoint_root(tmp_path / "b").exists()


@pytest.mark.slow
def test_infiller_resumes_to_the_same_weights(
    tiny_model: Callable[..., Path], tmp_path: Path, cut_after: Callable[[int], None]
) -> None:
    from zdebias.counterfactual.trainer import train_infiller

    t5 = tiny_model("t5")
    text = Record("t", "positive", text="A wonderful and moving film.")
    spans = {"text": [(2, 11)]}
    kw: dict[str, Any] = dict(
        model=t5, labels=["negative", "positive"], spans=[spans] * 6, dev=[text],
        dev_spans=[spans], epochs=2, batch_size=2, learning_rate=1e-3, checkpoint_steps=2,
        use_cpu=True, progress=False,
    )  # fmt: skip
    records = [text.replace(id=f"t{i}") for i in range(6)]
    whole = train_infiller(records, tmp_path / "a", **kw)
    cut_after(4)
    with pytest.raises(Cut):
        train_infiller(records, tmp_path / "b", **kw)
    resumed = train_infiller(records, tmp_path / "b", **kw)
    assert resumed["resumed_from_step"] == 4
    _assert_same_weights(tmp_path / "a", tmp_path / "b")
    assert resumed["train_loss"] == pytest.approx(whole["train_loss"], abs=1e-6)  # all 6 steps
    evals = [[h for h in run["history"] if "eval_loss" in h] for run in (whole, resumed)]
    assert evals[0] == evals[1] and len(evals[0]) == 3  # 2 epochs + the final evaluation
    assert not checkpoint_root(tmp_path / "b").exists()


@pytest.mark.slow
def test_other_settings_start_over_and_incomplete_checkpoints_are_dropped(
    tiny_model: Callable[..., Path], tmp_path: Path, cut_after: Callable[[int], None]
) -> None:
    from zdebias.generation.trainer import train_generator

    gpt = tiny_model("gpt2")
    records = toy_records()
    kw: dict[str, Any] = dict(max_steps=4, batch_size=4, checkpoint_steps=1, progress=False)
    cut_after(2)
    with pytest.raises(Cut):
        train_generator(records, gpt, tmp_path / "g", learning_rate=1e-3, **kw)
    root = checkpoint_root(tmp_path / "g")
    (root / "checkpoint-3").mkdir()  # cut while HF was saving: no completion marker
    assert (root / "checkpoint-2" / COMPLETE).is_file()
    # the same run resumes from step 2 and ignores the incomplete step 3
    other = train_generator(records, gpt, tmp_path / "g", learning_rate=1e-3, **kw)
    assert other["resumed_from_step"] == 2
    # another learning rate is another run: its checkpoints are not used
    cut_after(2)
    with pytest.raises(Cut):
        train_generator(records, gpt, tmp_path / "h", learning_rate=1e-3, **kw)
    fresh = train_generator(records, gpt, tmp_path / "h", learning_rate=2e-3, **kw)
    assert fresh["resumed_from_step"] is None and fresh["steps"] == 4
    assert not root.exists() and not checkpoint_root(tmp_path / "h").exists()


def test_checkpoint_settings_are_shared_and_validated() -> None:
    from zdebias.classify.settings import ClassifierSettings
    from zdebias.counterfactual.settings import InfillSettings
    from zdebias.generation.settings import DebiasSettings, GeneratorSettings
    from zdebias.models.trainer_settings import TrainerSettings

    for cls in (ClassifierSettings, GeneratorSettings, DebiasSettings, InfillSettings):
        assert issubclass(cls, TrainerSettings)
        for name in ("checkpoint_steps", "checkpoint_limit", "report_to", "extra"):
            assert cls.model_fields[name] is TrainerSettings.model_fields[name] or (
                cls.model_fields[name].description == TrainerSettings.model_fields[name].description
            )
    s = ClassifierSettings.of(extra=["max_grad_norm=0.5", "logging_steps=5"], optim="sgd")
    assert s.extra == {"max_grad_norm": 0.5, "logging_steps": 5, "optim": "sgd"}
    assert (s.checkpoint_steps, s.checkpoint_limit, s.report_to) == (500, 1, "none")
    with pytest.raises(ConfigError, match="--set learning_rate: a zdebias setting; use"):
        ClassifierSettings.of(extra=["learning_rate=1"])
    with pytest.raises(ConfigError, match="--set num_train_epochs: a zdebias setting; use --ep"):
        InfillSettings.of(model="t5", extra=["num_train_epochs=1"])
    with pytest.raises(ConfigError, match="--set output_dir: zdebias sets it; use --out"):
        GeneratorSettings.of(extra=["output_dir=x"])
    with pytest.raises(ConfigError, match="bad --set 'oops': expected KEY=VALUE"):
        GeneratorSettings.of(extra=["oops"])
    with pytest.raises(ConfigError, match="report_to"):
        ClassifierSettings.of(report_to="mlflow")
    with pytest.raises(ConfigError, match="checkpoint_steps"):
        ClassifierSettings.of(checkpoint_steps=-1)


def test_unknown_set_keys_and_missing_trackers_fail_before_work() -> None:
    from zdebias.classify.settings import ClassifierSettings
    from zdebias.classify.train import ClassifierTrainingArguments
    from zdebias.models.checkpoints import check_extra

    with pytest.raises(
        ConfigError,
        match=r"--set max_grad_nrm: not a TrainingArguments field; did you mean max_grad_norm",
    ):
        check_extra(ClassifierTrainingArguments, ClassifierSettings.of(max_grad_nrm=0.1))
    with pytest.raises(ConfigError, match="--set poe_beta: not a TrainingArguments field"):
        check_extra(
            ClassifierTrainingArguments, ClassifierSettings.of(poe_beta=2.0), own=("poe_beta",)
        )
    check_extra(ClassifierTrainingArguments, ClassifierSettings.of(max_grad_norm=0.1))
    missing = ClassifierSettings.of(report_to="wandb")
    import importlib.util

    if importlib.util.find_spec("wandb") is None:
        with pytest.raises(ConfigError, match="--report-to wandb needs the wandb package"):
            check_extra(ClassifierTrainingArguments, missing)


def test_checkpoint_policy_is_not_part_of_a_stage_hash() -> None:
    from zdebias.pipeline.digests import stage_hash
    from zdebias.pipeline.loader import recipe_from_dict

    def hashed(**settings: Any) -> str:
        stage = {"stage": "train-classifier", "train": "d", **settings}
        recipe = recipe_from_dict(
            {"name": "r", "task": "nli", "data": {"d": {"path": "x.jsonl"}}, "stages": {"c": stage}}
        )
        return stage_hash(recipe, "c", recipe.stages["c"], {})

    plain = hashed()
    assert hashed(checkpoint_steps=7, checkpoint_limit=3) == plain
    assert hashed(learning_rate=1e-3) != plain
    assert hashed(extra=["max_grad_norm=0.5"]) != plain
    assert hashed(report_to="tensorboard") != plain


def test_a_folder_zdebias_did_not_write_at_the_checkpoint_path_is_kept(tmp_path: Path) -> None:
    """Issue 52 (foreign files): ``.OUT.checkpoints`` without zdebias's run file was removed
    as "checkpoints of another run"."""
    from zdebias.models.trainer_settings import TrainerSettings

    root = checkpoint_root(tmp_path / "clf")
    root.mkdir()
    (root / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError, match="holds files zdebias did not write"):
        ck.Checkpointing(tmp_path / "clf", TrainerSettings(), "f1").resume_point()
    assert (root / "notes.txt").read_text() == "mine"
    ours = ck.Checkpointing(tmp_path / "other", TrainerSettings(), "f1")
    assert ours.resume_point() is None  # a new one is made and used
    assert (checkpoint_root(tmp_path / "other") / ck.RUN_FILE).is_file()
    again = ck.Checkpointing(tmp_path / "other", TrainerSettings(), "f2")
    assert again.resume_point() is None  # another run's: started over, as before
