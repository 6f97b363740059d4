"""Label sets: inferring a task from records, mapping labels to ids (the one place for both)."""

from __future__ import annotations

import pytest

from zdebias.data.labels import infer_task, label_ids
from zdebias.data.schema import Record
from zdebias.errors import DataError

LABELS = ("entailment", "neutral", "contradiction")


def test_infer_task_label_sets() -> None:
    # moved from tests/unit/stats/test_zstats.py (infer_labels)
    assert infer_task([Record("1", "neutral", "p", "h")]).labels == LABELS
    assert infer_task([Record("1", "positive", text="t")]).labels == ("negative", "positive")
    texts = [Record("1", "b", text="t"), Record("2", "a", text="t")]
    assert infer_task(texts).labels == ("a", "b")
    assert infer_task([]).labels == ()


def test_infer_task_keeps_the_records_kind() -> None:
    assert infer_task([Record("1", "neutral", "p", "h")]).name == "nli"
    texts = [Record("a", "positive", text="good"), Record("b", "negative", text="bad")]
    assert infer_task(texts).name == "sentiment"
    odd = infer_task([Record("a", "yes", "p", "h"), Record("b", "no", "p", "h")])
    assert (odd.labels, odd.pair) == (("no", "yes"), True)
    # a built-in label set on the other kind of record: its label order, the records' kind
    text_nli = infer_task([Record("1", "neutral", text="t")])
    assert (text_nli.labels, text_nli.pair) == (LABELS, False)
    assert text_nli.normalize(" Entailment ") == "entailment"
    with pytest.raises(ValueError, match="unknown label '0'"):  # issue 27: never by position
        text_nli.normalize("0")


def test_label_ids() -> None:
    recs = [Record("1", "neutral", "p", "h"), Record("2", "contradiction", "p", "h")]
    assert label_ids(recs, LABELS).tolist() == [1, 2]
    assert label_ids(iter(recs), LABELS).tolist() == [1, 2]
    assert label_ids([], LABELS).tolist() == []
    odd = [*recs, Record("odd", "maybe", "p", "h")]
    with pytest.raises(DataError, match="record 'odd' has label 'maybe', not one of entail"):
        label_ids(odd, LABELS)
    with pytest.raises(DataError, match="training record 'odd' has label 'maybe'"):
        label_ids(odd, LABELS, "training")
    assert label_ids(odd, LABELS, unknown=-1).tolist() == [1, 2, -1]
