"""``zdebias.aflite_filter`` on in-memory data: rows aligned to the input (rows not read
included), given embeddings, the same verdicts as the Record path."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import zdebias
from zdebias.errors import ConfigError
from zdebias.stats.aflite import aflite_filter as aflite_records

LABELS = ("entailment", "neutral", "contradiction")


def _frame(rows: int = 150) -> tuple[pd.DataFrame, np.ndarray]:
    rng = np.random.default_rng(0)
    y = np.arange(rows) % 3
    x = rng.normal(size=(rows, 8))
    x[:, :3] = 0.0
    x[: rows // 3, :3] = 3.0 * np.eye(3)[y[: rows // 3]]  # the first third gives its label away
    labels: list[str | None] = [LABELS[v] for v in y]
    labels[5] = None  # a row without a gold label: not read, not filtered
    df = pd.DataFrame(
        {"premise": ["p"] * rows, "hypothesis": [f"h{i}" for i in range(rows)], "label": labels},
        index=[f"i{i}" for i in range(rows)],
    )
    return df, x


def test_a_dataframe_with_given_embeddings() -> None:
    df, x = _frame()
    before = df.copy()
    out, summary = zdebias.aflite_filter(
        df, task="nli", embeddings=x, aflite_n=16, return_summary=True
    )
    pd.testing.assert_frame_equal(df, before)
    assert list(out.index) == list(df.index) and out["keep"].dtype == bool
    assert out.loc["i5", "rejected_by"] is None and not out.loc["i5", "keep"]
    assert summary["n_rows"] == 150 and summary["n_input"] == 149
    removed = out[out["rejected_by"].map(lambda v: v == ["aflite"])]
    assert len(removed) == summary["n_rejected"] > 0
    assert removed["aflite_round"].min() == 1 and (removed["aflite_score"] >= 0.75).all()
    assert out.loc[out["keep"], "aflite_round"].isna().all()
    # the same verdicts as the Record path on the rows read
    records = zdebias.api._read(df, zdebias.api.ReadOptions(task="nli")).records
    kept = {
        r.hypothesis
        for r in aflite_records(
            records, embeddings=np.delete(x, 5, axis=0), labels=LABELS, aflite_n=16
        ).kept
    }
    assert set(out.loc[out["keep"], "hypothesis"]) == kept
    # most removed rows are the planted first third (44 of 56 here: models of m = 37 rows
    # on 8 dimensions overfit some noise)
    assert np.mean([int(i[1:]) < 50 for i in removed.index]) >= 0.75


def test_a_list_of_dicts_and_bad_embeddings() -> None:
    df, x = _frame(60)
    rows = [{**r, "label": r["label"] or None} for r in df.fillna("").to_dict("records")]
    out = zdebias.aflite_filter(rows, task="nli", embeddings=x, aflite_n=8)
    assert isinstance(out, list) and len(out) == 60
    assert set(out[0]) == {"premise", "hypothesis", "label", *zdebias.api.AFLITE_COLUMNS}
    with pytest.raises(ConfigError, match=r"embeddings of shape \(59, 8\) for 60 rows"):
        zdebias.aflite_filter(rows, task="nli", embeddings=x[:59])
