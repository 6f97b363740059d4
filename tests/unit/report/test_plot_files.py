"""Issue 27 item 9: ``stats --plot OUT`` publishes OUT.png and OUT.html together, and the HTML
is the same bytes for the same plot (plotly's element id comes from the file name)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers.cli_main import run_main

LABELS = ("entailment", "neutral", "contradiction")


def _data(path: Path, n: int = 90) -> Path:
    words = ("not", "a", "the", "dog", "cat")
    rows = [
        {
            "id": f"r{i}",
            "premise": f"p {i}",
            "hypothesis": f"{words[i % 5]} {words[(i * 7) % 5]} h",
            "label": LABELS[i % 3],
        }
        for i in range(n)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_the_plot_html_is_byte_identical_between_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = _data(tmp_path / "d.jsonl")
    pages = []
    for run in ("a", "b"):
        out = tmp_path / run / "gardner"
        assert run_main(["-q", "stats", data, "--plot", out, "--min-n", "5"]) == 0
        pages.append((out.parent / "gardner.html").read_bytes())
        assert (out.parent / "gardner.png").read_bytes().startswith(b"\x89PNG")
    assert pages[0] == pages[1]
    assert b'id="gardner-gardner"' in pages[0]
    capsys.readouterr()


def test_a_failed_plot_writes_neither_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import plotly.graph_objects as go

    def broken(self: object, **_: object) -> str:
        raise KeyboardInterrupt  # as if killed while the HTML is made

    data = _data(tmp_path / "d.jsonl")
    monkeypatch.setattr(go.Figure, "to_html", broken)
    assert run_main(["-q", "stats", data, "--plot", tmp_path / "g", "--min-n", "5"]) != 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.jsonl"]
    capsys.readouterr()
