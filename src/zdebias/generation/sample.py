"""Sample a generator into shards, resumably (docs/design.md §6; ``zdebias sample``): the front
door.

:func:`sample_generator` checks what it is asked (backend, premises, worker mode), reads the
premises and examples when they are files, and runs one of:

- backends ``hf`` and ``vllm``: a trained generator folder (:mod:`zdebias.generation.trained`)
  in one process; with ``worker`` I/N one worker's rounds, with ``workers`` N all of them as
  processes, then merged (:mod:`zdebias.generation.workers`); with ``ray`` the rounds decoded
  by Ray actors, the folder the one-process run's (:mod:`zdebias.generation.on_ray`); with
  ``premises`` each row goes on from a given premise (labels sampled, or forced by
  ``per_premise`` quotas: :mod:`zdebias.generation.conditioned`);
- backends ``openai`` and ``local``: an instruction model prompted with the premises
  (:mod:`zdebias.generation.prompted`).

All write the same sampling folder (:mod:`zdebias.generation.store`: shards, ``state.json``,
``samples.jsonl``, ``summary.json``; :func:`~zdebias.generation.store.read_samples`) through
the same round loop (:mod:`zdebias.generation.rounds`: seeded rounds, exact counts,
byte-identical resume). Changing a sampling setting in a folder that holds a run is refused;
raising ``n`` extends the run.

>>> summary = sample_generator("runs/gen", "runs/samples", n=1000, batch_size=64)  # doctest: +SKIP
>>> records = read_samples("runs/samples")                                          # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from zdebias.data.ownership import foreign, is_empty
from zdebias.data.schema import Record
from zdebias.data.writers import claim
from zdebias.errors import ConfigError
from zdebias.generation.backends import PROMPTED
from zdebias.generation.settings import PromptSettings, SampleSettings
from zdebias.generation.store import STATE, start_over

if TYPE_CHECKING:
    from zdebias.data.options import ReadOptions
    from zdebias.stats.cells import Cell


#: the backends that prompt an instruction model (:data:`zdebias.generation.backends.PROMPTED`)
PROMPTED_BACKENDS = PROMPTED


def sample_generator(
    generator: str | Path,
    out_dir: str | Path,
    settings: SampleSettings | int | None = None,
    *,
    prompt: PromptSettings | None = None,
    premises: Sequence[Record] | str | Path | None = None,
    examples: Sequence[Record] | str | Path | None = None,
    cells: Sequence[Cell] | Mapping[str, Any] | str | Path | None = None,
    measure_with: Sequence[Record] | str | Path | None = None,
    read: ReadOptions | None = None,
    overwrite: bool = False,
    check_out: Callable[[], object] | None = None,
    progress: bool = True,
    **overrides: Any,
) -> dict[str, Any]:
    """Sample ``n`` unique well-formed records from a generator into ``out_dir``.

    ``settings``: a :class:`~zdebias.generation.settings.SampleSettings` (an int: ``n``);
    ``overrides``: its fields (and :class:`PromptSettings`' fields) as keywords (``n=1000,
    batch_size=48``). Resumes a run already in ``out_dir`` (same settings); ``overwrite``
    removes it first (with ``worker`` I/N only that worker's folder). ``check_out``: the
    caller's policy for an output that holds no run to continue (the CLI's ``--overwrite``
    rules), called once the request is checked, before anything is read or written; every
    input is checked before ``overwrite`` removes anything; with it
    the folder of a ``worker`` / ``workers`` run may hold worker folders only. ``max_shards``
    stops after writing that many shards in this call (the run stays resumable);
    ``patience_rounds`` fails when that many rounds in a row yield nothing new. Returns the
    summary (``complete`` says whether ``n`` samples are there). ``dtype`` defaults to bfloat16
    on CUDA, float32 elsewhere.

    With ``backend="openai"`` or ``"local"``, ``generator`` is an instruction model (the
    served model name, or a local model reference such as ``smollm2``) prompted for one
    hypothesis per premise of ``premises`` and target label, labels balanced, with few-shot
    examples from ``examples`` (default: ``premises``); see :mod:`zdebias.generation.prompted`.
    ``premises`` and ``examples`` are records or files (read with ``read``).

    With a trained generator (``hf``, ``vllm``), ``premises`` conditions each row on a
    premise (visited in a seeded order): the generator writes the label and the hypothesis,
    or, with ``per_premise="entailment=1,neutral=1,contradiction=1"``, the hypothesis of each
    forced label, that many rows per label and premise (``n`` a multiple of their sum).
    With ``cells`` too (a ``zdebias stats --cells`` file, a stats report or
    :class:`~zdebias.stats.cells.Cell` objects; ``cells_top`` K: the cells of the K most
    biased features that can be sampled),
    the rows fill those shortcut-breaking cells, at most ``n`` rows in all
    (:mod:`zdebias.generation.targeted`); ``measure_with`` (D0's records or file) adds each
    cell's z before (D0) and after (D0 ∪ samples) to the summary's ``cells`` rows.
    """
    if isinstance(settings, int):
        settings, overrides = None, {"n": settings, **overrides}
    prompt_keys = {k: overrides.pop(k) for k in list(overrides) if k in PromptSettings.model_fields}
    cfg = SampleSettings.of(settings, **overrides)
    _check_request(cfg, premises, examples, prompt_keys)
    _check_cells(cfg, premises, cells, measure_with)
    if cfg.backend != "openai":  # a model loaded here: on a device torch has
        from zdebias.models.compute import check_device

        check_device(cfg.device)
    chosen = None
    if cells is not None:  # read before anything is removed
        from zdebias.stats.cells import load_cells

        chosen = load_cells(cells) if isinstance(cells, str | Path | Mapping) else list(cells)
    d0 = _records(measure_with, read, "D0")
    out = Path(out_dir)
    if check_out is not None and not _continues_run(out, cfg, overwrite=overwrite):
        check_out()
    gen = None
    if cfg.backend not in PROMPTED_BACKENDS:
        from zdebias.generation.trained import TrainedGenerator

        gen = TrainedGenerator.load(generator, cfg)  # checked before anything is removed
    if gen is None:
        from zdebias.generation.prompted import sample_prompted

        prompting = PromptSettings.of(prompt, **prompt_keys)
        rows = _records(premises, read, "premise")
        assert rows is not None  # _check_request refuses a prompted run without premises
        pool = _records(examples, read, "example")
        engine = None
        if overwrite:  # reach the server (load the model) before removing the old run
            from zdebias.generation.prompted import open_backend

            engine = open_backend(str(generator), cfg, prompting)
            start_over(out)
        return sample_prompted(
            str(generator),
            out,
            cfg,
            prompting,
            premises=rows,
            examples=pool,
            engine=engine,
            progress=progress,
        )
    from zdebias.generation.trained import sample_trained
    from zdebias.generation.workers import find_workers, run_workers, sample_worker, worker_folder

    rows = _records(premises, read, "premise")  # read before anything is removed
    worker = cfg.worker_index()
    if overwrite:
        start_over(worker_folder(out, *worker) if worker is not None else out)
    if (worker is not None or cfg.workers > 1) and (not out.exists() or is_empty(out)):
        claim(out, "samples")  # the folder of the workers' folders
    if cfg.workers > 1:
        return run_workers(generator, out, cfg, progress=progress)
    if worker is not None:
        return sample_worker(gen, out, cfg, progress=progress)
    if find_workers(out):
        raise ConfigError(
            f"{out}: holds --worker runs; merge them with `zdebias sample merge {out}` "
            "or use another --out"
        )
    if cfg.on_ray:
        from zdebias.generation.on_ray import sample_on_ray

        return sample_on_ray(gen, out, cfg, progress=progress)
    summary = sample_trained(gen, out, cfg, premises=rows, cells=chosen, progress=progress)
    if chosen is not None and d0 is not None and summary["complete"]:
        from zdebias.generation.targeted import measure_cells

        measure_cells(summary, out, chosen, d0)
    return summary


def _check_cells(
    cfg: SampleSettings, premises: object, cells: object, measure_with: object
) -> None:
    """Refuse cells without premise-conditioned sampling of a trained generator, with
    forced per-premise labels or workers, and ``cells_top`` / ``cells_max`` /
    ``measure_with`` without cells."""
    if cells is None:
        given = {
            "--cells-top": cfg.cells_top,
            "--cells-max": cfg.cells_max,
            "--measure-with": measure_with,
        }
        for flag, value in given.items():
            if value is not None:
                raise ConfigError(f"{flag}: only targeted sampling (--cells FILE) takes it")
        return
    if cfg.backend in PROMPTED_BACKENDS or premises is None:
        raise ConfigError(
            "--cells: only premise-conditioned sampling of a trained generator "
            "(--backend hf/vllm with --premises) takes it"
        )
    if cfg.per_premise is not None:
        raise ConfigError("--cells with --per-premise: the cells set the labels; drop one")


def _check_request(
    cfg: SampleSettings,
    premises: object,
    examples: object,
    prompt_keys: dict[str, Any],
) -> None:
    """Refuse prompted sampling on several workers, examples or prompt settings for a trained
    generator, premises on several workers or on Ray, per-premise quotas without a trained generator
    and premises, and a prompted backend without premises."""
    prompted = cfg.backend in PROMPTED_BACKENDS
    if prompted and (cfg.worker is not None or cfg.workers > 1 or cfg.on_ray):
        raise ConfigError(
            f"--worker/--workers/--ray: backend {cfg.backend!r} balances labels over one "
            "process; use backend hf or vllm, or --concurrency for more requests in flight"
        )
    if not prompted and examples is not None:
        raise ConfigError(
            f"--examples: only --backend openai or local prompts; --backend is {cfg.backend}"
        )
    if not prompted and premises is not None and (cfg.worker is not None or cfg.workers > 1):
        raise ConfigError(
            "--premises with --worker/--workers: not supported yet; sample the premises in "
            "one process (--batch-size sets the rows decoded together)"
        )
    if not prompted and premises is not None and cfg.on_ray:
        raise ConfigError(
            "--premises with --ray: not supported yet; sample the premises in one process "
            "(--batch-size sets the rows decoded together)"
        )
    if prompted and not premises:
        raise ConfigError(f"--backend {cfg.backend} needs --premises PATH")
    if cfg.per_premise is not None and (prompted or premises is None):
        raise ConfigError(
            "--per-premise: only premise-conditioned sampling of a trained generator "
            "(--backend hf/vllm with --premises) takes it"
        )
    if not prompted and prompt_keys:
        raise ConfigError(
            f"{', '.join(prompt_keys)}: only prompted sampling (backend openai or local) takes "
            f"these; backend is {cfg.backend!r}"
        )


def _continues_run(out: Path, cfg: SampleSettings, *, overwrite: bool) -> bool:
    """Whether ``out`` holds the run this call goes on with, in a folder zdebias wrote (a
    foreign folder is the caller's ``check_out`` to refuse): the folder of a ``worker`` I/N
    run (refused when it holds other files; with ``overwrite`` the worker replaces only its
    own folder), of a ``workers`` run (unless ``overwrite``: then the whole folder is replaced,
    as for one process), or a one-process run's ``state.json`` (unless ``overwrite``)."""
    if not out.is_dir() or foreign(out):
        return False
    if cfg.worker is not None or (cfg.workers > 1 and not overwrite):
        from zdebias.generation.workers import check_workers_folder

        check_workers_folder(out)
        return True
    return not overwrite and (out / STATE).is_file()


def _records(
    given: Sequence[Record] | str | Path | None, read: ReadOptions | None, what: str
) -> Sequence[Record] | None:
    """``given`` records, or those of the file ``given`` (what the read skipped is logged)."""
    if not isinstance(given, str | Path):
        return given
    from zdebias.data.options import read_logged

    return read_logged(given, read, what=what)[0]


__all__ = ["PROMPTED_BACKENDS", "sample_generator"]
