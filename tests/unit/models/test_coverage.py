"""Packaged English models given text their vocabulary does not cover: one warning naming
multilingual hub models (issue 53.1)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from zdebias.data.schema import Record
from zdebias.models import coverage
from zdebias.models.coverage import (
    non_latin_share,
    packaged_base,
    unknown_share,
    vocabulary_line,
    warn_vocabulary,
)

ZH = [
    Record(f"z{i}", "entailment", "一个男人在街上走着，手里拿着伞。", h)
    for i, h in enumerate(["一个男人在外面。", "没有人在街上。", "孩子们在玩耍。"])
]
EN = [Record("e1", "entailment", "A man is walking with an umbrella.", "A café is naïve.")]


@pytest.fixture
def minilm_tokenizer():
    from transformers import AutoTokenizer

    from zdebias.models.resolve import resolve_model

    return AutoTokenizer.from_pretrained(resolve_model("minilm"))


def test_non_latin_share_counts_letters_only() -> None:
    assert non_latin_share(["A café, 42!"]) == 0.0
    assert non_latin_share(["ab 中文"]) == pytest.approx(0.5)  # 2 of 4 letters
    assert non_latin_share(["ไม่ ok."]) == pytest.approx(0.5)  # ไ ม letters, ่ a mark: 2 of 4
    assert non_latin_share(["", "123 !"]) == 0.0


@pytest.mark.real_model
def test_minilm_warns_on_chinese_not_on_english(minilm_tokenizer, monkeypatch, caplog) -> None:
    texts = coverage.sample_texts(ZH)
    assert len(texts) == 6
    unk = unknown_share(minilm_tokenizer, texts)
    assert unk is not None and unk > coverage.POOR_SHARE
    line = vocabulary_line(minilm_tokenizer, texts, model="minilm", english=True)
    assert line is not None and line.startswith("model minilm: ")
    assert "are unknown ([UNK])" in line
    assert line.endswith(
        "use a multilingual model, e.g. --model xlm-roberta-base or bert-base-multilingual-cased"
    )
    assert coverage.sample_texts(["a", "b", "c"], sample=2) == ["a", "c"]  # texts, spread
    en = coverage.sample_texts(EN)
    assert unknown_share(minilm_tokenizer, en) == 0.0
    assert vocabulary_line(minilm_tokenizer, en, model="minilm", english=True) is None
    # Japanese kana the vocabulary knows: not unknown, but not Latin either
    ja = ["コーヒーを飲みました"]
    assert unknown_share(minilm_tokenizer, ja) <= coverage.POOR_SHARE
    line = vocabulary_line(minilm_tokenizer, ja, model="minilm", english=True)
    assert line is not None and "English model and 100% of the letters are not Latin" in line
    assert vocabulary_line(minilm_tokenizer, ja, model="x", english=False) is None
    # once per model and process
    monkeypatch.setattr(coverage, "_warned", set())
    with caplog.at_level(logging.WARNING, logger="zdebias"):
        assert warn_vocabulary(minilm_tokenizer, ZH, "minilm") is not None
        assert warn_vocabulary(minilm_tokenizer, ZH, "minilm") is None
        assert warn_vocabulary(minilm_tokenizer, EN, "other") is None
    assert sum("model minilm:" in r.getMessage() for r in caplog.records) == 1


def test_packaged_base_of_aliases_and_trained_folders(tmp_path: Path) -> None:
    assert packaged_base("minilm") == "minilm" and packaged_base("smollm2") == "smollm2"
    assert packaged_base("xlm-roberta-base") is None
    folder = tmp_path / "clf"
    folder.mkdir()
    assert packaged_base(folder) is None
    (folder / "zdebias_classifier.json").write_text(json.dumps({"base_model": "minilm"}))
    assert packaged_base(folder) == "minilm"
    (folder / "zdebias_classifier.json").write_text(json.dumps({"base_model": "roberta-base"}))
    assert packaged_base(folder) is None


def test_predict_warns_when_the_vocabulary_misses_the_text(tiny_model, monkeypatch, caplog):
    """A tiny BERT whose WordPiece vocabulary was built on English: Chinese is all [UNK]."""
    from zdebias.classify.predict import load_classifier, predict_proba

    monkeypatch.setattr(coverage, "_warned", set())
    clf = load_classifier(tiny_model("bert"))
    with caplog.at_level(logging.WARNING, logger="zdebias"):
        predict_proba(clf, EN, batch_size=4)
        assert not [r for r in caplog.records if "unknown" in r.getMessage()]
        predict_proba(clf, ZH, batch_size=4)
    [line] = [r.getMessage() for r in caplog.records if "unknown" in r.getMessage()]
    assert "100% of its tokens of these texts are unknown ([UNK])" in line
    assert "xlm-roberta-base" in line


def test_training_warns_once_naming_multilingual_models(tiny_model, tmp_path, monkeypatch, caplog):
    """train-classifier on Chinese with an English vocabulary: the warning, before training."""
    from zdebias.classify.train import train_classifier

    monkeypatch.setattr(coverage, "_warned", set())
    rows = [*ZH, Record("z3", "neutral", "一位女士在做饭。", "她在做晚饭。")]
    rows += [Record("z4", "contradiction", "一位女士在做饭。", "她不在厨房。")]
    base = tiny_model("bert")
    with caplog.at_level(logging.WARNING, logger="zdebias"):
        train_classifier(
            rows, None, tmp_path / "clf", model=base, epochs=1, max_steps=1, progress=False
        )
    lines = [r.getMessage() for r in caplog.records if "multilingual" in r.getMessage()]
    assert len(lines) == 1 and lines[0].startswith(f"model {base}: 100% of its tokens")
