"""Training on tiny models: folder contract, best epoch, losses inside the trainer, cross-fit."""

from __future__ import annotations

import json
import random
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from zdebias.classify.losses import learned_mixin, product_of_experts
from zdebias.classify.predict import CLASSIFIER_INFO, load_classifier, predict_proba
from zdebias.classify.train import (
    BIAS_HEAD_ATTR,
    GATE_ATTR,
    BestEpochCallback,
    ClassifierTrainer,
    ClassifierTrainingArguments,
    _Collator,
    _encode,
    bias_head_logits,
    cross_fit_predictions,
    fold_assignment,
    train_classifier,
)
from zdebias.data.labels import infer_task
from zdebias.data.schema import Record
from zdebias.errors import ConfigError, DataError

PREMISES = [
    "A man is sleeping on a bench in the park.",
    "Two dogs are running through the snow.",
    "A woman is playing a guitar outside.",
    "The child is eating an apple.",
    "People are sitting at a table and talking.",
    "A boy jumps into a swimming pool.",
]
CUES = {
    "entailment": "A person is outside.",
    "neutral": "The team celebrates their win.",
    "contradiction": "Nobody is sleeping.",
}


def toy_nli(n: int, seed: int = 0) -> list[Record]:
    """Pairs whose hypothesis gives the label away (so a tiny model learns them in seconds)."""
    rng = random.Random(seed)
    labels = list(CUES)
    return [
        Record(f"toy:{seed}:{i}", labels[i % 3], rng.choice(PREMISES), CUES[labels[i % 3]])
        for i in range(n)
    ]


FAST = dict(learning_rate=5e-3, batch_size=8, warmup_steps=0, progress=False)


def test_fold_assignment_is_balanced_and_seeded() -> None:
    folds = fold_assignment(10, 3, seed=1)
    assert sorted(np.bincount(folds).tolist()) == [3, 3, 4]
    assert fold_assignment(10, 3, seed=1).tolist() == folds.tolist()
    assert fold_assignment(10, 3, seed=2).tolist() != folds.tolist()
    with pytest.raises(ConfigError, match="at least 2 folds"):
        fold_assignment(10, 1)
    with pytest.raises(ConfigError, match="cannot cut 2 examples into 3"):
        fold_assignment(2, 3)


def test_infer_task() -> None:
    assert infer_task(toy_nli(3)).name == "nli"
    texts = [Record("a", "positive", text="good"), Record("b", "negative", text="bad")]
    assert infer_task(texts).name == "sentiment"
    odd = [Record("a", "yes", "p", "h"), Record("b", "no", "p", "h")]
    assert infer_task(odd).labels == ("no", "yes")


def test_best_epoch_callback_keeps_best_weights_and_stops() -> None:
    model = torch.nn.Linear(2, 1)
    cb = BestEpochCallback(patience=2)
    control = SimpleNamespace(should_training_stop=False)
    for step, acc in enumerate([0.5, 0.7, 0.6, 0.7], start=1):
        with torch.no_grad():
            model.weight.fill_(float(step))
        cb.on_evaluate(
            None,
            SimpleNamespace(global_step=step, epoch=step),
            control,
            metrics={"eval_accuracy": acc, "eval_loss": 1.0},
            model=model,
        )
    assert cb.best_accuracy == 0.7 and cb.best_step == 2  # a tie does not replace the best
    assert cb.best_state["weight"].tolist() == [[2.0, 2.0]]
    assert cb.stopped_early and control.should_training_stop
    assert [h["dev_accuracy"] for h in cb.history] == [0.5, 0.7, 0.6, 0.7]


@pytest.mark.slow
def test_train_saves_contract_folder_and_best_epoch(tiny_model, tmp_path: Path) -> None:
    base = tiny_model("bert", head="encoder")
    train, dev = toy_nli(96, seed=1), toy_nli(12, seed=2)
    out = tmp_path / "clf"
    metrics = train_classifier(
        train, dev, out, model=base, epochs=5, seed=7, patience=0, **{**FAST, "learning_rate": 2e-3}
    )
    info = json.loads((out / CLASSIFIER_INFO).read_text())
    assert info["input"] == "pair" and info["task"] == "nli" and info["max_length"] == 128
    assert info["labels"] == ["entailment", "neutral", "contradiction"] and info["seed"] == 7
    config = json.loads((out / "config.json").read_text())
    assert config["id2label"] == {"0": "entailment", "1": "neutral", "2": "contradiction"}
    saved = json.loads((out / "metrics.json").read_text())
    assert saved["n_train"] == 96 and saved["n_dev"] == 12 and saved["steps"] == 60
    assert [h["step"] for h in saved["history"]] == [12, 24, 36, 48, 60]
    assert saved["compute"] == {
        "device": "cuda:0" if torch.cuda.is_available() else "cpu",
        "dtype": saved["compute"]["dtype"] if torch.cuda.is_available() else "float32",
        "setting": "auto",
        "bf16_by_auto": saved["compute"]["dtype"] == "bfloat16",
        "torch": torch.__version__,
    }
    best = max(h["dev_accuracy"] for h in saved["history"])
    assert saved["best"]["dev_accuracy"] == best == metrics["best"]["dev_accuracy"]
    assert saved["history"][0]["dev_accuracy"] == pytest.approx(1 / 3)  # one label at first
    assert best >= 0.6  # the cue words give the label away; the model picks them up
    # the saved weights are the best epoch's: predicting dev again gives that accuracy
    clf = load_classifier(out)
    probs = predict_proba(clf, dev)
    correct = [clf.labels[i] == r.label for i, r in zip(probs.argmax(1), dev, strict=True)]
    assert sum(correct) / len(dev) == pytest.approx(best)
    hidden = [p.name for p in out.iterdir() if p.name.startswith(".")]
    assert hidden == [".zdebias-output.json"]  # the ownership marker only (issue 27)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_train_refuses_bad_settings(tiny_model, tmp_path: Path) -> None:
    base = tiny_model("bert", head="encoder")
    train = toy_nli(6)
    with pytest.raises(ConfigError, match="needs --bias-model"):
        train_classifier(
            train, None, tmp_path / "a", model=base, loss="poe", bias_mode="frozen", **FAST
        )
    with pytest.raises(ConfigError, match="bias_mode joint is for loss poe"):
        train_classifier(
            train, None, tmp_path / "a", model=base, loss="conf-reg", bias_mode="joint", **FAST
        )
    with pytest.raises(ConfigError, match="used with --bias-mode frozen"):
        train_classifier(
            train,
            None,
            tmp_path / "a",
            model=base,
            loss="poe",
            bias_mode="joint",
            bias_model=base,
            **FAST,
        )
    with pytest.raises(ConfigError, match="needs --teacher-model"):
        train_classifier(
            train, None, tmp_path / "a", model=base, loss="conf-reg", bias_model=base, **FAST
        )
    texts = [Record("t", "positive", text="fine")]
    with pytest.raises(ConfigError, match="needs premise/hypothesis records"):
        train_classifier(
            texts, None, tmp_path / "a", model=base, input_kind="hypothesis-only", **FAST
        )
    with pytest.raises(DataError, match="record 'odd' has label 'maybe'"):
        train_classifier(
            [*train, Record("odd", "maybe", "p", "h")],
            None,
            tmp_path / "a",
            model=base,
            task="nli",
            **FAST,
        )
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    with pytest.raises(ConfigError, match="full holds files zdebias did not write"):
        train_classifier(train, None, tmp_path / "full", model=base, **FAST)


def _batch(tokenizer, records: list[Record], bias: np.ndarray) -> dict[str, torch.Tensor]:
    enc = tokenizer([r.premise for r in records], [r.hypothesis for r in records])
    rows = [
        {
            **{k: enc[k][i] for k in enc},
            "labels": ["entailment", "neutral", "contradiction"].index(r.label),
            "bias_probs": bias[i],
        }
        for i, r in enumerate(records)
    ]
    return _Collator(tokenizer)(rows)


@pytest.mark.parametrize("loss", ["poe", "learned-mixin-h"])
def test_trainer_compute_loss_applies_the_named_loss(tiny_model, tmp_path: Path, loss: str) -> None:
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    path = tiny_model("bert")
    model = AutoModelForSequenceClassification.from_pretrained(path)
    tokenizer = AutoTokenizer.from_pretrained(path)
    if loss.startswith("learned-mixin"):
        model.add_module(GATE_ATTR, torch.nn.Linear(model.config.hidden_size, 1))
    args = ClassifierTrainingArguments(
        output_dir=str(tmp_path / "t"),
        loss=loss,
        poe_beta=2.0,
        poe_gamma=0.4,
        use_cpu=True,
        report_to="none",
        remove_unused_columns=False,
    )
    trainer = ClassifierTrainer(model=model, args=args)
    bias = np.array([[0.6, 0.3, 0.1], [0.2, 0.2, 0.6], [0.1, 0.8, 0.1]], dtype=np.float32)
    batch = _batch(tokenizer, toy_nli(3), bias)
    model.train()
    torch.manual_seed(0)  # same dropout masks in both forward passes
    got = trainer.compute_loss(model, batch)
    torch.manual_seed(0)
    tokens = {k: v for k, v in batch.items() if k not in ("labels", "bias_probs")}
    out = model(**tokens, output_hidden_states=True)
    if loss == "poe":
        want = product_of_experts(
            out.logits, batch["labels"], bias_probs=batch["bias_probs"], beta=2.0, gamma=0.4
        )
    else:
        gate = getattr(model, GATE_ATTR)(out.hidden_states[-1][:, 0]).squeeze(-1)
        want = learned_mixin(
            out.logits,
            batch["labels"],
            bias_probs=batch["bias_probs"],
            gate_logits=gate,
            entropy_weight=0.03,
        )
    assert float(got.detach()) == pytest.approx(float(want.detach()), abs=1e-6)
    model.eval()  # evaluation scores the main model alone
    plain = torch.nn.functional.cross_entropy(model(**tokens).logits, batch["labels"])
    got_eval = trainer.compute_loss(model, batch).detach()
    assert float(got_eval) == pytest.approx(float(plain.detach()), abs=1e-6)


@pytest.mark.slow
def test_learned_mixin_training_drops_the_gate(tiny_model, tmp_path: Path) -> None:
    from safetensors.torch import load_file

    base = tiny_model("bert", head="encoder")
    train = toy_nli(24, seed=3)
    hyp = tmp_path / "hyp"
    train_classifier(train, None, hyp, model=base, input_kind="hypothesis-only", epochs=1, **FAST)
    out = tmp_path / "mixin"
    metrics = train_classifier(
        train, None, out, model=base, loss="learned-mixin", bias_model=hyp, epochs=1, **FAST
    )
    assert metrics["loss"] == "learned-mixin" and metrics["steps"] == 3
    keys = load_file(out / "model.safetensors")
    assert not [k for k in keys if GATE_ATTR in k]
    assert json.loads((hyp / CLASSIFIER_INFO).read_text())["input"] == "hypothesis-only"


@pytest.mark.slow
def test_cross_fit_predicts_each_record_with_a_model_that_did_not_see_it(
    tiny_model, tmp_path: Path
) -> None:
    base = tiny_model("bert", head="encoder")
    records = toy_nli(15, seed=4)
    out_file = tmp_path / "oof.jsonl"
    done = cross_fit_predictions(
        records,
        None,
        out_file,
        cross_fit=3,
        seed=5,
        folds_dir=tmp_path / "folds",
        model=base,
        epochs=1,
        **FAST,
    )
    folds = fold_assignment(15, 3, seed=5)
    assert [r.id for r in done] == [r.id for r in records]
    assert [r.meta["hypo_only_fold"] for r in done] == folds.tolist()
    for fold in range(3):
        fold_dir = tmp_path / "folds" / f"fold-{fold}"
        assert json.loads((fold_dir / "metrics.json").read_text())["n_train"] == 10
        held = [r for r in done if r.meta["hypo_only_fold"] == fold]
        probs = predict_proba(fold_dir, held)
        clf_labels = load_classifier(fold_dir).labels
        for row, rec in zip(probs, held, strict=True):
            assert rec.meta["hypo_only_pred"] == clf_labels[int(row.argmax())]
            assert rec.meta["hypo_only_probs"][clf_labels[0]] == pytest.approx(row[0])
    from zdebias.data.readers import read_records

    again = read_records(out_file)
    assert [r.meta["hypo_only_pred"] for r in again] == [r.meta["hypo_only_pred"] for r in done]


# --------------------------------------------------------------------------- joint PoE


def test_joint_bias_head_gradient_by_hand() -> None:
    """p = (0.5, 0.25, 0.25), b = (0.25, 0.5, 0.25), gold 0, β = 1, γ = 0.4:
    p' = (0.4, 0.4, 0.2); dL/dz_b = β(p' − e0) + γ(b − e0) = (−0.9, 0.6, 0.3);
    the head z_b = W·h with h = (1, 2) gets dL/dW = outer((−0.9, 0.6, 0.3), (1, 2)), and the
    encoder summary h gets nothing (the branch is detached)."""
    head = torch.nn.Linear(2, 3, bias=False)
    with torch.no_grad():
        head.weight.copy_(
            torch.tensor([[np.log(0.25), 0.0], [np.log(0.5), 0.0], [np.log(0.25), 0.0]])
        )
    h = torch.tensor([[1.0, 2.0]], requires_grad=True)
    z_b = bias_head_logits(head, h * 1.0)
    assert torch.softmax(z_b, -1).tolist()[0] == pytest.approx([0.25, 0.5, 0.25])
    logits = torch.log(torch.tensor([[0.5, 0.25, 0.25]]))
    loss = product_of_experts(
        logits, torch.tensor([0]), bias_probs=torch.softmax(z_b, -1), beta=1.0, gamma=0.4
    )
    loss.backward()
    want = [[-0.9, -1.8], [0.6, 1.2], [0.3, 0.6]]
    for got_row, want_row in zip(head.weight.grad.tolist(), want, strict=True):
        assert got_row == pytest.approx(want_row, abs=1e-5)
    assert h.grad is None


def _no_dropout(model: torch.nn.Module) -> None:
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0


def test_joint_poe_trainer_blocks_the_bias_gradient_into_the_encoder(
    tiny_model, tmp_path: Path
) -> None:
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    path = tiny_model("bert")
    model = AutoModelForSequenceClassification.from_pretrained(path)
    tokenizer = AutoTokenizer.from_pretrained(path)
    _no_dropout(model)
    model.add_module(BIAS_HEAD_ATTR, torch.nn.Linear(model.config.hidden_size, 3))
    args = ClassifierTrainingArguments(
        output_dir=str(tmp_path / "t"),
        loss="poe",
        poe_beta=2.0,
        poe_gamma=0.4,
        use_cpu=True,
        report_to="none",
        remove_unused_columns=False,
    )
    trainer = ClassifierTrainer(model=model, args=args)
    records = toy_nli(3)
    ids = np.array([0, 1, 2])
    rows = _encode(tokenizer, records, "pair", ids, 64, {}, with_hypothesis=True).rows
    batch = _Collator(tokenizer)(rows)
    assert "hyp_input_ids" in batch and batch["hyp_input_ids"].shape[0] == 3
    model.train()
    trainer.compute_loss(model, batch).backward()
    head = getattr(model, BIAS_HEAD_ATTR)
    joint = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    assert float(head.weight.grad.abs().sum()) > 0  # the head learns
    # by hand: the same loss with b a constant gives the encoder the same gradients
    model.zero_grad()
    tokens = {k: v for k, v in batch.items() if k != "labels" and not k.startswith("hyp_")}
    hyp = {k[4:]: v for k, v in batch.items() if k.startswith("hyp_")}
    pooled = model.bert(**hyp).pooler_output
    b = torch.softmax(head(pooled), -1).detach()
    product_of_experts(
        model(**tokens).logits, batch["labels"], bias_probs=b, beta=2.0, gamma=0.4
    ).backward()
    for name, param in model.named_parameters():
        if name.startswith(BIAS_HEAD_ATTR):
            continue
        want = param.grad if param.grad is not None else torch.zeros_like(param)
        got = joint.get(name, torch.zeros_like(param))
        assert torch.allclose(got, want, atol=1e-6), name


@pytest.mark.slow
def test_joint_poe_gamma_changes_the_trained_weights(tiny_model, tmp_path: Path) -> None:
    from safetensors.torch import load_file

    base = tiny_model("bert", head="encoder")
    train = toy_nli(24, seed=5)
    weights = {}
    for run, gamma in enumerate((0.0, 1.0, 1.0)):
        out = tmp_path / f"run{run}"
        metrics = train_classifier(
            train, None, out, model=base, loss="poe", beta=2.0, gamma=gamma, max_steps=3, **FAST
        )
        assert metrics["settings"]["bias_mode"] == "joint" and metrics["steps"] == 3
        weights[run] = load_file(out / "model.safetensors")
        assert not [k for k in weights[run] if BIAS_HEAD_ATTR in k]

    def max_diff(a: dict, b: dict) -> float:
        assert a.keys() == b.keys()
        return max(float((a[k].float() - b[k].float()).abs().max()) for k in a)

    assert max_diff(weights[1], weights[2]) == 0.0  # the same γ twice: the same weights
    assert max_diff(weights[0], weights[1]) > 1e-6  # γ moves the weights
