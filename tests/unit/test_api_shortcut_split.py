"""``zdebias.shortcut_split`` on a DataFrame, a list of dicts and a list of Records: the test
rows in their own type and order with their slice, verdict and deciding features."""

from __future__ import annotations

import pandas as pd

import zdebias
from zdebias.stats.shortcut_split import ShortcutSplit


def _train() -> list[dict[str, str]]:
    """``good`` on 40 positive rows, ``bad`` on 40 negative ones (z = √40 each way)."""
    rows = [{"text": "good film", "label": "positive"}] * 40
    return rows + [{"text": "bad film", "label": "negative"}] * 40


def test_shortcut_split_of_a_dataframe_keeps_rows_and_order() -> None:
    test = pd.DataFrame(
        {
            "text": ["bad", "film", "good", "good", "bad"],
            "label": ["positive", "positive", "positive", None, "negative"],
        },
        index=[10, 11, 12, 13, 14],
    )
    out, summary = zdebias.shortcut_split(
        pd.DataFrame(_train()), test, features=["unigrams"], return_summary=True
    )
    assert list(out.index) == [10, 11, 12, 13, 14] and "shortcut_slice" not in test
    assert out["shortcut_slice"].tolist() == ["conflicting", "free", "aligned", None, "aligned"]
    assert out["shortcut_label"].tolist() == ["negative", None, "positive", None, "negative"]
    assert out["shortcut_features"].tolist() == [
        ["bad@text"],
        [],
        ["good@text"],
        None,
        ["bad@text"],
    ]
    assert summary["counts"] == {"aligned": 2, "conflicting": 1, "free": 1}
    assert summary["n_rows"] == 5 and summary["read"]["n_unlabelled"] == 1


def test_shortcut_split_of_dicts_and_records() -> None:
    test = [{"text": "good", "label": "negative"}]
    rows = zdebias.shortcut_split(_train(), test, features=["unigrams"])
    assert rows == [
        {
            "text": "good",
            "label": "negative",
            "shortcut_slice": "conflicting",
            "shortcut_label": "positive",
            "shortcut_features": ["good@text"],
        }
    ]
    records = [zdebias.Record("x", "negative", text="bad")]
    train = [zdebias.Record(f"t{i}", r["label"], text=r["text"]) for i, r in enumerate(_train())]
    result = zdebias.shortcut_split(train, records, features=["unigrams"], task="sentiment")
    assert isinstance(result, ShortcutSplit) and [r.id for r in result.aligned] == ["x"]
