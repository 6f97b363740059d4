"""The run report's shortcut-breaking cells (docs/design.md §12): per cell a targeted ``sample``
stage filled, what was asked, generated and written, what each judge accepted, the rule-made pairs
that fill it, and its feature's z before → after.

Read from saved JSON only: the sample stage's ``summary.json`` (its ``cells`` block), the
``confidence-filter`` stages that read it (their ``per_cell`` pass counts, by ``meta.cell``),
the ``transform`` stages' ``cells`` counts, and the stats stages the report compares (the z of
the feature for the label it favours: a tracked feature's, else from the Gardner points,
features seen more than ``min_n`` times).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from zdebias.stats.cells import z_value

#: a run's view for this module: (stage kind) → finished stages; (stage, output) → its JSON
Stages = Callable[[str], list[dict[str, Any]]]
Json = Callable[[dict[str, Any], str], Any]


def feature_z(stats: dict[str, Any] | None, feature: str, label: str) -> dict[str, Any] | None:
    """``{"z", "n", "significant"}`` of ``feature`` for ``label`` in a saved stats report: a
    ``track``-ed feature's own numbers, else from its Gardner points; None where the report
    has neither (a feature seen ``min_n`` times or fewer, and not tracked)."""
    tracked = ((stats or {}).get("tracked") or {}).get(feature) or {}
    if label in tracked:
        assert stats is not None
        z = float(tracked[label]["z"])
        n = int(tracked[label]["n"])
        return {"z": z, "n": n, "significant": z > float(stats["z_critical"])}
    points = (stats or {}).get("gardner") or {}
    names = points.get("features") or []
    if feature not in names or label not in (points.get("p") or {}):
        return None
    assert stats is not None
    i = names.index(feature)
    n = int(points["n"][i])
    count = round(float(points["p"][label][i]) * n)
    z = z_value(count, n, len(stats["labels"]))
    return {"z": round(z, 4), "n": n, "significant": z > float(stats["z_critical"])}


def cell_rows(
    stages: Stages,
    json_output: Json,
    config: dict[str, Any],
    before: dict[str, Any] | None,
    after: dict[str, Any] | None,
) -> list[dict[str, Any]]:
    """Per targeted ``sample`` stage: ``{"stage", "judges", "rules", "rows"}``, a row per cell
    (``cell``, ``feature``, ``label``, ``favoured``, ``steer``, ``asked``, ``generated``,
    ``written``, ``accepted`` {judge stage: {"n", "kept", "pass_rate"}}, ``rule_made`` (rows
    of the transform stages with this ``meta.cell``), ``z_before`` / ``z_after``
    (:func:`feature_z` of the stats stages ``before`` / ``after``, for the favoured label)).
    ``config``: the resolved recipe's stages (which judge reads which sample stage)."""
    sb = json_output(before, "stats") if before else None
    sa = json_output(after, "stats") if after else None
    rule_made: dict[str, int] = {}
    for stage in stages("transform"):
        for key, count in ((json_output(stage, "summary") or {}).get("cells") or {}).items():
            rule_made[key] = rule_made.get(key, 0) + int(count)
    out = []
    for stage in stages("sample"):
        cells = (json_output(stage, "summary") or {}).get("cells")
        if not cells:
            continue
        judges = {}
        for judge in stages("confidence-filter"):
            if (config.get(judge["name"]) or {}).get("input") == stage["name"]:
                judges[judge["name"]] = (json_output(judge, "summary") or {}).get("per_cell") or {}
        rows = []
        for row in cells["rows"]:
            feature, favoured = row["feature"], row["favoured"]
            rows.append(
                {
                    **{k: row[k] for k in ("cell", "feature", "label", "favoured", "steer")},
                    "asked": row["asked"],
                    "generated": row["generated"],
                    "written": row["fired"],
                    "accepted": {
                        name: per.get(row["cell"], {"n": 0, "kept": 0, "pass_rate": None})
                        for name, per in judges.items()
                    },
                    "rule_made": rule_made.get(row["cell"], 0),
                    "z_before": feature_z(sb, feature, favoured),
                    "z_after": feature_z(sa, feature, favoured),
                }
            )
        out.append(
            {"stage": stage["name"], "judges": list(judges), "rules": bool(rule_made), "rows": rows}
        )
    return out


__all__ = ["cell_rows", "feature_z"]
