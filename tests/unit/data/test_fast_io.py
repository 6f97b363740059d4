"""The fast routes of reading and writing JSONL give exactly what the careful ones give."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from zdebias.data import Record, read_records, write_jsonl
from zdebias.data import sources as sources_module
from zdebias.data.options import ReadOptions
from zdebias.data.writers import RecordEncoder, _json_default

# Lines that orjson reads differently from json (a 21-digit integer, which it turns into a
# float), rejects (Infinity, a BOM, a blank line) or reads the same (plain rows, nested
# meta);
# the reader must give one result whatever route each line takes. Numbers are labels by
# the map given (issue 27: never by position).
NLI_MAP = {"0": "entailment", "1": "neutral", "2": "contradiction"}
LINES = [
    '\ufeff{"id": "a", "premise": "P one.", "hypothesis": "H one.", "label": "entailment", '
    '"score": 1, "w": 2, "extra": false}',
    '{"id": 123456789012345678901, "premise": "P", "hypothesis": "H", "label": 1}',
    "   ",
    '{"id": "c", "premise": "P", "hypothesis": "H", "label": "neutral", "score": Infinity}',
    '{"id": "d", "premise": "P", "hypothesis": "H", "label": "2", "w": 1.5}',
    '{"id": "e", "premise": "Pé 😀", "hypothesis": "H", "label": " Neutral ", '
    '"meta": {"type": "generated", "n": [1, 2, {"x": null}]}}',
    '{"id": "f", "premise": "P", "hypothesis": "H", "label": "-"}',
    '{"id": "g", "premise": "P", "hypothesis": "H", "label": 0, "extra": true}',
]


def _read_both(path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[list[Record], ...]:
    assert sources_module._fast_loads() is not None  # orjson is installed: both routes run
    fast, fast_report = ReadOptions(label_map=NLI_MAP).read(path)
    monkeypatch.setattr(sources_module, "_fast_loads", lambda: None)
    slow, slow_report = ReadOptions(label_map=NLI_MAP).read(path)
    assert fast_report.summary() == slow_report.summary()
    return fast, slow


def test_fast_reader_reads_every_line_as_json_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "mixed.jsonl"
    path.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    fast, slow = _read_both(path, monkeypatch)
    assert fast == slow
    assert [r.id for r in fast] == ["a", "123456789012345678901", "c", "d", "e", "g"]
    assert [r.label for r in fast] == [
        "entailment",
        "neutral",
        "neutral",
        "contradiction",
        "neutral",
        "entailment",
    ]
    assert fast[0].meta == {"score": 1, "w": 2, "extra": False}
    assert fast[2].meta == {"score": float("inf")}
    assert fast[3].meta == {"w": 1.5}
    assert fast[4].meta == {"type": "generated", "n": [1, 2, {"x": None}]}
    assert fast[5].meta == {"extra": True}


def test_fast_reader_locates_bad_lines_as_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "bad.jsonl"
    good = '{"id": "a", "premise": "P", "hypothesis": "H", "label": "entailment"}\n'
    path.write_bytes(
        good.encode() + b'{"id": "b", "premise": "P\xff", "hypothesis": "H", "label": 0}\n'
        b'{"id": "c", "premise": "P", "hypothesis": "\\ud800", "label": 0}\n'
        b'{"id": "d", "premise": "P", "hypothesis": "H", "label": "maybe"}\n'
        b"{not json\n" + good.encode()
    )
    messages = []
    for route in ("fast", "slow"):
        if route == "slow":
            monkeypatch.setattr(sources_module, "_fast_loads", lambda: None)
        records, report = ReadOptions(on_error="skip").read(path)
        assert [r.id for r in records] == ["a", "a"]
        messages.append([str(e) for e in report.errors])
    assert messages[0] == messages[1]
    assert [m.split(":")[1] for m in messages[0]] == ["2", "3", "4", "5"]


def test_label_cache_keeps_int_and_str_apart(tmp_path: Path) -> None:
    # 1 (an index: neutral) and "1" (the same) and True (not a label) must not share a cache
    path = tmp_path / "labels.jsonl"
    rows = [
        {"premise": "P", "hypothesis": "H", "label": 1},
        {"premise": "P", "hypothesis": "H", "label": "1"},
        {"premise": "P", "hypothesis": "H", "label": True},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    records, report = ReadOptions(on_error="skip", label_map=NLI_MAP).read(path)
    assert [r.label for r in records] == ["neutral", "neutral"]
    assert report.n_errors == 1 and report.errors[0].line == 3


def test_record_encoder_writes_the_bytes_json_writes() -> None:
    shared = {"name": "a@hypothesis", "kind": "ngram", "field": "hypothesis", "tokens": ["a"]}
    records = [
        Record("r1", "entailment", 'A man "sleeps".\n', "Très bien 😀\u2028", meta={}),
        Record("r2", "neutral", "P", "H", meta={"rejected_by": ["a@hypothesis"]}),
        Record("r3", "neutral", "P", "H", meta={"rejected_by_features": [shared, shared]}),
        Record("r4", "neutral", "P", "H", meta={"rejected_by_features": [shared, shared]}),
        Record("t1", "positive", text="tëxt\x01", meta={"x": 1.5, "y": np.int64(3)}),
        Record("t2", "positive", text="t", meta={"v": np.arange(2), "z": {}, "n": None}),
        Record(7, "neutral", "P", "H"),  # not a string id: the plain encoder
        Record("p", "neutral", None, "H"),  # a pair without premise: the plain encoder
        Record("k", "neutral", "P", "H", meta={1: "int key"}),
        Record("s", "neutral", "\ud800", "H", meta={"u": float("nan"), "l": [[1], []]}),
    ]
    plain = json.JSONEncoder(ensure_ascii=False, default=_json_default).encode
    encode = RecordEncoder()
    assert [encode(r) for r in records] == [plain(r.to_dict()) for r in records]
    assert encode(records[1]) == (
        '{"id": "r2", "premise": "P", "hypothesis": "H", "label": "neutral", '
        '"meta": {"rejected_by": ["a@hypothesis"]}}'
    )


def test_record_encoder_shares_a_meta_dict_of_shared_lists() -> None:
    """A meta dict made of lists met before (the z-filter's rejected records without meta of
    their own share one) is encoded once; a dict with fresh lists is never remembered."""
    by = (["a@hypothesis"], [{"name": "a@hypothesis", "kind": "ngram"}])
    shared_meta = {"rejected_by": by[0], "rejected_by_features": by[1]}
    own = {"rejected_by": ["b"], "rejected_by_features": [{"name": "b"}]}
    records = [
        Record("r1", "neutral", "P", "H", meta=shared_meta),
        Record("r2", "neutral", "P", "H", meta=shared_meta),
        Record("r3", "neutral", "P", "H", meta=own),
        Record("r4", "neutral", "P", "H", meta={"rejected_by": by[0], "x": "y"}),
    ]
    plain = json.JSONEncoder(ensure_ascii=False, default=_json_default).encode
    encode = RecordEncoder()
    assert [encode(r) for r in records] == [plain(r.to_dict()) for r in records]
    remembered = [v[0] for v in encode._shared.values()]
    assert any(m is shared_meta for m in remembered)  # met a second time with known lists
    assert not any(m is own or m is records[3].meta for m in remembered)
    assert encode(records[0]) == plain(records[0].to_dict())


def test_encoded_lines_are_the_encoder_s_bytes_with_or_without_items() -> None:
    """Lines encoded ahead (EncodedLines) equal RecordEncoder's, as they are and with the
    z-filter's items added to meta; records the fast route cannot take, or whose meta holds
    an added key already, are encoded when written."""
    from zdebias.data.writers import EncodedLines

    records = [
        Record("r1", "entailment", 'A man "sleeps".\n', "Très bien 😀\u2028", meta={}),
        Record("r2", "neutral", "P", "H", meta={"source": "x", "n": [1, {"a": None}]}),
        Record("r3", "neutral", "P", "H", meta={"rejected_by": ["old"], "note": "é"}),
        Record("t1", "positive", text="tëxt", meta={"x": 1.5, "y": np.int64(3)}),
        Record("t2", "positive", text="t"),
        Record(7, "neutral", "P", "H"),  # not a string id: the plain encoder
        Record("k", "neutral", "P", "H", meta={1: "int key"}),
    ]
    added = {
        "rejected_by": ["a@hypothesis", "b@premise"],
        "rejected_by_features": [{"name": "a@hypothesis", "kind": "ngram", "tokens": ["a"]}],
    }
    plain = json.JSONEncoder(ensure_ascii=False, default=_json_default).encode
    lines = EncodedLines(records, added)
    assert len(lines) == len(records)
    assert sorted(lines.records) == [2, 5, 6]  # kept as records: encoded when written
    items_json = lines.encode.meta_items(added)
    assert items_json == plain(added)[1:-1]
    for i, r in enumerate(records):
        assert lines.line(i) == plain(r.to_dict())
        tagged = Record(r.id, r.label, r.premise, r.hypothesis, r.text, {**r.meta, **added})
        assert lines.line_with(i, added, items_json) == plain(tagged.to_dict()), i


def test_write_jsonl_round_trip(tmp_path: Path) -> None:
    records = [
        Record(f"r{i}", "neutral", f"P {i}", "H", meta={"rejected_by": ["x"]}) for i in range(5)
    ]
    path = tmp_path / "out.jsonl"
    assert write_jsonl(records, path) == 5
    assert read_records(path) == records
