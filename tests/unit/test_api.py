"""The one-call API on in-memory data: ``zdebias.z_filter`` and ``zdebias.find_shortcuts`` on
DataFrames, ``datasets.Dataset``s, lists of dicts and Records give the Record path's results,
aligned to the input's rows, without changing the input."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import zdebias
from zdebias.data.schema import Record
from zdebias.errors import ConfigError, DataError
from zdebias.stats.zfilter import z_filter as z_filter_records

LABELS = ("entailment", "neutral", "contradiction")
#: hypothesis unigrams only, so the hand-computed cases below stay small
UNIGRAMS = {"features": ["unigrams"], "ngram_fields": ["hypothesis"]}


def _toy() -> list[dict[str, object]]:
    return [
        {"id": "a", "premise": "p q.", "hypothesis": "x", "label": "entailment"},
        {"id": "b", "premise": "p q.", "hypothesis": "y", "label": "neutral"},
        {"id": "c", "premise": "p q.", "hypothesis": "x", "label": "entailment"},
        {"id": "d", "premise": "p q.", "hypothesis": "x", "label": "neutral"},
    ]


def test_hand_computed_filter_on_a_dataframe() -> None:
    # batch 1 (a, b) meets an empty Z and is accepted whole; then z(x@hypothesis, entailment)
    # = (1 - 1/3) / sqrt((1/3)(2/3)/1) = 1.4142, the top-1 for entailment, so c is rejected
    # by it; d (neutral) has only x, which is not biased for neutral (top-1: y), so it stays.
    df = pd.DataFrame(_toy())
    before = df.copy()
    out, summary = zdebias.z_filter(
        df,
        task="nli",
        biased_k=1,
        zfilter_batch_size=2,
        shuffle=False,
        return_summary=True,
        **UNIGRAMS,
    )
    assert isinstance(out, pd.DataFrame)
    pd.testing.assert_frame_equal(df, before)  # the input is untouched
    assert list(out.index) == list(df.index)
    assert out["keep"].dtype == bool
    assert out["keep"].tolist() == [True, True, False, True]
    assert out["rejected_by"].tolist() == [[], [], ["x@hypothesis"], []]
    assert out["rejected_by_z"].tolist()[2] == [pytest.approx(1.4142, abs=1e-4)]
    assert summary["n_kept"] == 3 and summary["n_rejected"] == 1 and summary["n_rows"] == 4


def test_mapping_unlabelled_rows_and_a_custom_index() -> None:
    df = pd.DataFrame(
        {
            "sentence1": ["A man sleeps.", "A dog runs.", "Kids play.", "A cat sits."],
            "sentence2": ["A man naps.", "An animal moves.", "Nobody plays.", "A cat."],
            "y": [0, None, 2, 1],
        },
        index=[10, 20, 30, 40],
    )
    out, summary = zdebias.z_filter(
        df,
        columns={"premise": "sentence1", "hypothesis": "sentence2", "label": "y"},
        label_map={0: "entailment", 1: "neutral", 2: "contradiction"},  # issue 27: numbers need it
        return_summary=True,
    )
    assert list(out.index) == [10, 20, 30, 40]
    # the row without a label is not filtered, and is counted
    assert out["keep"].tolist() == [True, False, True, True]
    assert out["rejected_by"].tolist()[1] is None
    assert summary["read"]["n_unlabelled"] == 1 and summary["n_input"] == 3
    assert summary["label_counts_before"] == {"entailment": 1, "neutral": 1, "contradiction": 1}


def test_bad_rows_name_the_row_and_field() -> None:
    df = pd.DataFrame(_toy())
    df.loc[2, "label"] = "maybe"
    with pytest.raises(DataError, match=r"^DataFrame:2: field 'label': unknown label 'maybe'"):
        zdebias.z_filter(df)
    out, summary = zdebias.z_filter(df, on_error="skip", return_summary=True)
    assert summary["read"]["n_errors"] == 1
    assert out["rejected_by"].tolist()[2] is None and not out["keep"].tolist()[2]
    with pytest.raises(ConfigError, match="unknown setting 'biased_kk'"):
        zdebias.z_filter(df, biased_kk=3)
    with pytest.raises(ConfigError, match="cannot read a str"):
        zdebias.z_filter("train.jsonl")


def test_dataset_and_dataset_dict() -> None:
    datasets = pytest.importorskip("datasets")
    features = datasets.Features(
        {
            "premise": datasets.Value("string"),
            "hypothesis": datasets.Value("string"),
            "label": datasets.ClassLabel(names=list(LABELS)),
        }
    )
    rows = _toy()
    ds = datasets.Dataset.from_dict(
        {
            "premise": [r["premise"] for r in rows],
            "hypothesis": [r["hypothesis"] for r in rows],
            "label": [LABELS.index(str(r["label"])) for r in rows],
        },
        features=features,
    )
    options = {"biased_k": 1, "zfilter_batch_size": 2, "shuffle": False, **UNIGRAMS}
    out = zdebias.z_filter(ds, **options)
    assert isinstance(out, datasets.Dataset)
    assert ds.column_names == ["premise", "hypothesis", "label"]
    assert out["keep"] == [True, True, False, True]
    assert out["rejected_by"] == [[], [], ["x@hypothesis"], []]
    assert out["label"] == ds["label"]
    dd = datasets.DatasetDict({"train": ds, "test": ds.select([0, 1])})
    with pytest.raises(ConfigError, match="has splits train, test; pass split=NAME"):
        zdebias.z_filter(dd, **options)
    assert zdebias.z_filter(dd, split="train", **options)["keep"] == out["keep"]


def test_records_keep_the_record_result() -> None:
    records = [
        Record(str(r["id"]), str(r["label"]), str(r["premise"]), str(r["hypothesis"]))
        for r in _toy()
    ]
    result = zdebias.z_filter(records, biased_k=1, zfilter_batch_size=2, shuffle=False, **UNIGRAMS)
    assert [r.id for r in result.kept] == ["a", "b", "d"]
    assert result.rejected[0].meta["rejected_by"] == ["x@hypothesis"]


WORDS = ["a", "man", "dog", "sleeps", "runs", "nobody", "outside", "is"]
_text = st.lists(st.sampled_from(WORDS), min_size=1, max_size=4).map(" ".join)
_rows = st.lists(st.tuples(_text, _text, st.sampled_from(LABELS)), min_size=1, max_size=30).map(
    lambda rows: [
        {"id": f"r{i}", "premise": p, "hypothesis": h, "label": lab}
        for i, (p, h, lab) in enumerate(rows)
    ]
)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=_rows, batch=st.integers(1, 8), k=st.integers(1, 4), seed=st.integers(0, 3))
def test_every_input_type_keeps_the_record_paths_ids(rows, batch, k, seed) -> None:
    datasets = pytest.importorskip("datasets")
    options = {
        "task": "nli",
        "biased_k": k,
        "zfilter_batch_size": batch,
        "seed": seed,
        "features": ["unigrams", "hypo-len", "lex-overlap", "null"],
    }
    records = [Record(r["id"], r["label"], r["premise"], r["hypothesis"]) for r in rows]
    expected = z_filter_records(
        records, **{k: v for k, v in options.items() if k != "task"}, labels=LABELS
    )
    want = [r.id for r in expected.accepted]
    kept_reasons = {r.id: r.meta["rejected_by"] for r in expected.rejected}
    original = copy.deepcopy(rows)
    df = pd.DataFrame(rows)
    ds = datasets.Dataset.from_list(rows)
    outputs = {
        "DataFrame": zdebias.z_filter(df, **options).to_dict("records"),
        "Dataset": zdebias.z_filter(ds, **options).to_list(),
        "dicts": zdebias.z_filter(rows, **options),
    }
    assert rows == original
    for kind, out in outputs.items():
        assert [r["id"] for r in out] == [r["id"] for r in rows], kind
        assert [r["id"] for r in out if r["keep"]] == want, kind
        assert {r["id"]: r["rejected_by"] for r in out if not r["keep"]} == kept_reasons, kind
    via_records = zdebias.z_filter(records, **options)
    assert [r.id for r in via_records.accepted] == want


def test_find_shortcuts_on_a_dataframe() -> None:
    # 30 rows: "nobody" in every contradiction hypothesis, never elsewhere
    rows = []
    for i in range(30):
        label = LABELS[i % 3]
        hyp = "nobody sleeps" if label == "contradiction" else f"w{i} sleeps"
        rows.append({"premise": f"p{i}", "hypothesis": hyp, "label": label})
    df = pd.DataFrame(rows)
    found = zdebias.find_shortcuts(df, top=3, min_n=5, **UNIGRAMS)
    table = found.table
    top = table[table["label"] == "contradiction"].iloc[0]
    # z = (1 - 1/3) / sqrt((1/3)(2/3)/10) = 4.4721
    assert top["feature"] == "nobody@hypothesis" and top["n"] == 10
    assert top["z"] == pytest.approx(4.4721, abs=1e-4)
    assert found.summary["n_examples"] == 30
    z_c = found.summary["z_critical"]
    assert bool(top["significant"]) == (4.4721 > z_c)
    assert len(found.rows) == 30 and list(found.rows.columns)[-2:] == ["shortcuts", "shortcut_z"]
    expected = [["nobody@hypothesis"] if 4.4721 > z_c else []] * 10
    assert found.rows["shortcuts"].tolist()[2::3] == expected
    fig = found.plot(label_top=1)
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert texts == ["nobody@hypothesis"]


@pytest.mark.real_data
def test_snli_20k_dataframe_keeps_exactly_what_the_cli_keeps(data_dir: Path) -> None:
    path = data_dir / "snli_20k" / "train.jsonl"
    df = pd.read_json(path, lines=True)
    out = zdebias.z_filter(df, task="nli")
    assert len(out) == 19_993 and int(out["keep"].sum()) == 7_668
    # the records path (what `zdebias filter` runs) keeps the same lines of the file
    from zdebias.data.readers import read_records

    result = z_filter_records(read_records(path), labels=LABELS)
    lines = [int(r.id.rsplit(":", 1)[1]) - 1 for r in result.kept]
    assert out.index[out["keep"]].tolist() == lines
    first = out[~out["keep"]].iloc[0]
    assert json.dumps(first["rejected_by"]) == json.dumps(result.rejected[0].meta["rejected_by"])


def test_confidence_filter_on_a_dataframe(tiny_model) -> None:
    from zdebias.classify.confidence import confidence_filter as confidence_records

    model = tiny_model("bert")  # random 3-way head: probabilities near 1/3, spread by input
    rows = [
        {"premise": f"A man number {i} sleeps.", "hypothesis": h, "label": LABELS[i % 3]}
        for i, h in enumerate(["He naps.", "He is tired.", "Nobody sleeps.", "A dog."] * 3)
    ]
    rows.insert(5, {"premise": "x", "hypothesis": "y", "label": "-"})  # no gold label
    df = pd.DataFrame(rows)
    records = [
        Record(str(i), str(r["label"]), str(r["premise"]), str(r["hypothesis"]))
        for i, r in enumerate(rows)
        if r["label"] != "-"
    ]
    every, _, _ = confidence_records(records, model, threshold=0.0, progress=False)
    probs = sorted(float(r.meta["confidence"]) for r in every)
    tau = probs[len(probs) // 2]  # the median: about half are kept
    kept, _, _ = confidence_records(records, model, threshold=tau, progress=False)
    out, summary = zdebias.confidence_filter(df, model, threshold=tau, return_summary=True)
    assert list(out.columns) == ["premise", "hypothesis", "label", "keep", "confidence"]
    assert out.index[out["keep"]].tolist() == [int(r.id) for r in kept]
    assert out["confidence"].tolist()[5] is None and not out["keep"].tolist()[5]
    assert summary["n_input"] == 12 and summary["read"]["n_unlabelled"] == 1
    assert all(c > tau for c in out.loc[out["keep"], "confidence"])


def test_settings_that_choose_another_filter_method_are_refused() -> None:
    """``FilterSettings(method="aflite")`` given to z-filtering used to run z-filtering (the
    fields z-filtering lacks were dropped): now it is refused, naming ``method``; so is a
    method's settings object given to an operation that is no filter."""
    from zdebias.stats.settings import FilterSettings

    with pytest.raises(ConfigError, match=r"method.*'aflite'"):
        zdebias.z_filter(_toy(), FilterSettings(method="aflite"))
    with pytest.raises(ConfigError, match=r"method.*'cartography'"):
        zdebias.z_filter(_toy(), FilterSettings(method="cartography", region="easy"))
    with pytest.raises(ConfigError, match=r"'method' \(= 'aflite'\).*zdebias\.filter\("):
        zdebias.find_shortcuts(_toy(), FilterSettings(method="aflite"))
    # every setting left at its default, or honoured, is fine: the same verdicts as z's own
    keys = {"biased_k": 1, "zfilter_batch_size": 2, "shuffle": False, **UNIGRAMS}
    same = zdebias.z_filter(_toy(), FilterSettings(**keys))
    own = zdebias.z_filter(_toy(), **keys)
    assert [r["keep"] for r in same] == [r["keep"] for r in own] == [True, True, False, True]


def test_a_setting_the_function_cannot_honour_is_refused_by_name() -> None:
    """A wider settings object is refused, naming its first field that is set and that the
    function lacks; the same field at its default passes (its value changes nothing)."""
    from zdebias.stats.settings import FilterSettings, StatsSettings, ZFilterSettings

    with pytest.raises(ConfigError, match=r"setting 'aflite_n' \(= 3\) of FilterSettings is not"):
        zdebias.z_filter(_toy(), FilterSettings(aflite_n=3))
    with pytest.raises(ConfigError, match=r"'biased_k' \(= 3\) of ZFilterSettings .*StatsSettings"):
        zdebias.find_shortcuts(_toy(), ZFilterSettings(biased_k=3))
    prior = ZFilterSettings(biased_k=20, label_prior="empirical")
    assert StatsSettings.of(prior).label_prior == "empirical"
    # a stage config (or any source) narrowed on purpose: ``take`` leaves the rest behind
    assert ZFilterSettings.take(FilterSettings(method="aflite", biased_k=4)).biased_k == 4


def test_zdebias_errors_are_value_errors_and_survive_validation() -> None:
    """``except ValueError`` catches the library's errors; one raised inside a settings
    validator still leaves as itself, not folded into pydantic's ValidationError."""
    from zdebias.stats.settings import ZFilterSettings

    with pytest.raises(ValueError, match="unknown setting 'biased_kk'"):
        zdebias.z_filter(_toy(), biased_kk=3)
    with pytest.raises(ConfigError, match=r"cannot read the pattern file .*nowhere\.txt"):
        ZFilterSettings(keep_features=["@/nowhere.txt"])
    with pytest.raises(ConfigError, match=r"cannot read the pattern file"):
        ZFilterSettings.model_validate({"keep_features": ["@/nowhere.txt"]})
