"""``zdebias train-generator``, ``debias-generator`` and ``sample`` (SPEC §6).

Options come from the settings objects (``zdebias.generation.settings``; for debias-generator
also the z-filter's). torch and transformers are imported inside the commands only.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import create_model
from pydantic.fields import FieldInfo

from zdebias.commands._cli import CliOptions, check_output, command, emit, report_skips, require
from zdebias.data.options import ReadOptions
from zdebias.errors import ConfigError
from zdebias.generation.settings import DebiasSettings, GeneratorSettings, SampleSettings
from zdebias.stats.settings import ZFilterSettings

log = logging.getLogger("zdebias")

OutOpt = Annotated[str, typer.Option("--out", help="Output folder.")]
GeneratorOpt = Annotated[str, typer.Option("--generator", help="A trained generator folder.")]
TrainOpt = Annotated[
    str | None, typer.Option("--train", help="Training data (any supported input).")
]
DataOpt = Annotated[str | None, typer.Option("--data", hidden=True, help="Deprecated: --train.")]
SetOpt = Annotated[
    list[str] | None,
    typer.Option("--set", help=GeneratorSettings.model_fields["extra"].description),
]


def _without_old_batch_flag() -> type[ZFilterSettings]:
    """The z-filter settings without 0.1's ``--batch-size`` spelling of
    ``--zfilter-batch-size``: on debias-generator ``--batch-size`` is the training batch."""
    info = ZFilterSettings.model_fields["zfilter_batch_size"]
    cli = dict(info.json_schema_extra["cli"])  # type: ignore[index]
    cli["deprecated"] = [d for d in cli["deprecated"] if d != "--batch-size"]
    field = FieldInfo.merge_field_infos(info, json_schema_extra={"cli": cli})
    return create_model(  # type: ignore[call-overload,no-any-return]
        "ZFilterSettings", __base__=ZFilterSettings, zfilter_batch_size=(int, field)
    )


DebiasZFilterSettings = _without_old_batch_flag()


def _train_set(train: str | None, data: str | None, read: ReadOptions) -> tuple[list[Any], str]:
    if data:
        log.warning("--data is deprecated; use --train")
    path = require(train or data, "--train", "--data")
    records, report = read.read(path, what="training")
    report_skips(report)
    return records, report.task


def _with_sets(settings: Any, sets: list[str] | None) -> Any:
    return type(settings).of(settings, extra=sets) if sets else settings


def _stdout_to_stderr() -> Any:
    """Training logs (HF Trainer prints them) go to stderr; stdout keeps only the summary."""
    return contextlib.redirect_stdout(sys.stderr)


def _emit_train(summary: dict[str, Any], cli: CliOptions) -> None:
    def text() -> str:
        s = summary
        lines = [
            f"generator saved to {s['out']}: {s['n_trained']:,} sequences trained "
            f"({s['n_dropped_too_long']:,} too long dropped), {s['steps']} steps, "
            f"loss {s['train_loss']}, {s['train_tokens_per_s']:,.0f} tokens/s"
        ]
        if "z_filter" in s:
            z, mask = s["z_filter"], s.get("mask", {})
            lines.append(
                f"z-filter: kept {z['n_kept']:,} (Z), rejected {z['n_rejected']:,} (Z⁻); "
                f"unlikelihood on {mask.get('n_biased_tokens', 0):,} tokens "
                f"{mask.get('biased_tokens_by_kind', {})}; "
                f"{mask.get('n_unmatched_ngrams', 0)} n-grams not found"
            )
        return "\n".join(lines)

    emit({k: v for k, v in summary.items() if k != "log_history"}, cli, text)


@command(exclude=("limit",))
def train_generator_cmd(
    model: Annotated[
        str,
        typer.Option("--model", help="Causal LM: packaged alias (smollm2), local folder or hub."),
    ],
    out: OutOpt,
    settings: GeneratorSettings,
    read: ReadOptions,
    cli: CliOptions,
    train: TrainOpt = None,
    data: DataOpt = None,
    sets: SetOpt = None,
) -> None:
    """Fine-tune a causal LM into a P → label → H data generator (L_MLE + λ·L_consistency)."""
    from zdebias.generation.trainer import train_generator

    check_output(out, cli)
    records, task = _train_set(train, data, read)
    with _stdout_to_stderr():
        summary = train_generator(
            records, model, out, _with_sets(settings, sets), task=task, progress=cli.progress
        )
    _emit_train(summary, cli)


#: the z-filter summary keys debias-generator reports
_ZSHOWN = ("n_input", "kept_share_of_input", "batch_size", "top_k", "features")
_ZSHOWN += ("top_z_before", "top_z_after", "rejections_by_feature")


@command(exclude=("limit",))
def debias_generator_cmd(
    generator: GeneratorOpt,
    out: OutOpt,
    zfilter: DebiasZFilterSettings,  # type: ignore[valid-type]  # first: its --seed aliases
    settings: DebiasSettings,
    read: ReadOptions,
    cli: CliOptions,
    train: TrainOpt = None,
    data: DataOpt = None,
    sets: SetOpt = None,
) -> None:
    """z-filter the data, then fine-tune the generator: L_MLE(Z) + α·masked L_UL(Z⁻)."""
    from zdebias.generation.format import GeneratorFormat
    from zdebias.generation.trainer import debias_generator
    from zdebias.stats.zfilter import z_filter

    if not GeneratorFormat.is_generator(generator):
        raise ConfigError(
            f"{generator}: not a generator folder; train one with `zdebias train-generator`"
        )
    check_output(out, cli)
    records, _ = _train_set(train, data, read)
    result = z_filter(settings.pick(records), zfilter, progress=cli.progress)
    z = {"n_kept": len(result.kept), "n_rejected": len(result.rejected)}
    z.update((k, result.summary[k]) for k in _ZSHOWN if k in result.summary)
    with _stdout_to_stderr():
        summary = debias_generator(
            generator,
            result.kept,
            result.rejected,
            out,
            _with_sets(settings, sets),
            progress=cli.progress,
            extra_info={"z_filter": z},
        )
    _emit_train(summary, cli)


@command
def sample_cmd(
    generator: GeneratorOpt, out: OutOpt, settings: SampleSettings, cli: CliOptions
) -> None:
    """Sample N unique (premise, label, hypothesis) records into resumable shards."""
    import shutil

    from zdebias.generation.sample import STATE, sample_generator

    path = Path(out)
    if cli.overwrite or not (path / STATE).is_file():  # a sampling run here is resumed
        check_output(path, cli)
        if cli.overwrite and path.is_dir():
            shutil.rmtree(path)
        elif cli.overwrite and path.exists():
            path.unlink()
    with _stdout_to_stderr():
        summary = sample_generator(generator, out, settings, progress=cli.progress)

    def text() -> str:
        s = summary
        state = "complete" if s["complete"] else "stopped (rerun the same command to resume)"
        return (
            f"{s['n_written']:,}/{s['n_requested']:,} samples in {s['out']}, {state}; "
            f"generated {s['n_generated']:,}, malformed {s['n_malformed']:,} {s['malformed']}, "
            f"duplicates {s['n_duplicates']:,}; parseable {s['parseable_share']}, "
            f"{s['samples_per_s']} samples/s"
        )

    emit(summary, cli, text)


def register(app: typer.Typer) -> None:
    """Add the generator commands."""
    app.command("train-generator")(train_generator_cmd)
    app.command("debias-generator")(debias_generator_cmd)
    app.command("sample")(sample_cmd)
