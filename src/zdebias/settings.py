"""One settings object per operation, shared by the library, the recipe stage and the CLI.

Each operation (z-filtering, classifier training, sampling, ...) declares its settings once,
as a :class:`Settings` subclass in its own area::

    class ZFilterSettings(Settings):
        biased_k: int = setting(20, "biased features per label (k, Table 8)", ge=1)

- the library function takes the data plus one such object: ``z_filter(records, settings)``;
- the recipe stage's config subclasses it and adds only its references (``input: RecordsRef``);
- the CLI command's options are generated from its fields (``zdebias.commands._cli``).

Field metadata for the CLI lives in ``json_schema_extra["cli"]`` (see :func:`setting`): a flag
name other than ``--field-name``, a short flag, old spellings kept for one release (accepted
with a deprecation message), or ``cli=False`` for settings that only a recipe can set.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from zdebias.errors import ConfigError, ZdebiasError

if TYPE_CHECKING:
    from pydantic.json_schema import JsonDict

#: the one default random seed of every operation run from the command line or Python
DEFAULT_SEED = 0


def setting(
    default: Any = ...,
    help: str = "",
    *,
    flag: str | None = None,
    short: str | None = None,
    deprecated: tuple[str, ...] = (),
    cli: bool = True,
    repeat: bool = False,
    default_factory: Any = None,
    **constraints: Any,
) -> Any:
    """A settings field: default, one-line help, CLI metadata and pydantic constraints.

    ``flag``: the CLI spelling when it is not ``--field-name``; ``short``: e.g. ``-q``;
    ``deprecated``: old spellings, still accepted for one release with a warning: CLI flags
    (``--lr``) and recipe / Python keys (``lr``);
    ``cli=False``: the field is not offered on the command line (recipe / Python only);
    ``repeat``: a list field given by repeating the option (``--redo a --redo b``), not a
    comma-separated value.
    """
    meta: JsonDict = {"flag": flag, "short": short, "deprecated": list(deprecated), "cli": cli}
    extra: JsonDict = {"cli": {**meta, "repeat": repeat}}
    if default_factory is not None:
        return Field(
            default_factory=default_factory,
            description=help,
            json_schema_extra=extra,
            **constraints,
        )
    return Field(default, description=help, json_schema_extra=extra, **constraints)


def cli_meta(info: Any) -> dict[str, Any]:
    """The CLI metadata of a pydantic ``FieldInfo`` (defaults when the field has none)."""
    extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
    meta = dict(extra.get("cli") or {})
    meta.setdefault("flag", None)
    meta.setdefault("short", None)
    meta.setdefault("deprecated", [])
    meta.setdefault("cli", True)
    meta.setdefault("repeat", False)
    return meta


class OwnErrors(BaseModel):
    """A model whose validators' :class:`~zdebias.errors.ZdebiasError` (a ``ValueError``,
    which pydantic folds into a ``ValidationError``) leaves validation as itself."""

    def __init__(self, /, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as err:
            raise _own_error(err) from None

    @classmethod
    def model_validate(cls, obj: Any, *args: Any, **kwargs: Any) -> Self:
        """As pydantic's, raising a validator's own ZdebiasError as itself."""
        try:
            return super().model_validate(obj, *args, **kwargs)
        except ValidationError as err:
            raise _own_error(err) from None


def _own_error(err: ValidationError) -> Exception:
    """The first ZdebiasError a validator raised inside ``err``, else ``err``."""
    for problem in err.errors():
        cause = (problem.get("ctx") or {}).get("error")
        if isinstance(cause, ZdebiasError):
            return cause
    return err


class Settings(OwnErrors):
    """Base of every operation's settings: validated, no unknown keys."""

    model_config = ConfigDict(extra="forbid", validate_default=True, allow_inf_nan=False)

    @model_validator(mode="before")
    @classmethod
    def _renamed_keys(cls, data: Any) -> Any:
        """Old recipe / Python key spellings still work for one release, with a warning."""
        return cls.renamed(data) if isinstance(data, dict) else data

    @classmethod
    def renamed(cls, data: dict[str, Any]) -> dict[str, Any]:
        """``data`` with deprecated keys renamed to today's (warning once per key)."""
        out = data
        for name, info in cls.model_fields.items():
            for old in cli_meta(info)["deprecated"]:
                if old.startswith("-") or old not in out:
                    continue
                out = dict(out) if out is data else out
                value = out.pop(old)
                if name in out:  # one setting given twice: never last-wins
                    same = "the same value" if out[name] == value else "different values"
                    raise ValueError(
                        f"both {old!r} (deprecated) and {name!r} are set, to {same}; "
                        f"keep only {name!r}"
                    )
                logging.getLogger("zdebias").warning("%r is deprecated; use %r", old, name)
                out[name] = value
        return out

    @classmethod
    def take(cls, source: BaseModel, **update: Any) -> Self:
        """This class's fields taken from ``source`` (e.g. a stage config), then ``update``;
        the fields of ``source`` this class lacks are left behind on purpose."""
        return cls._made(source, update)

    @classmethod
    def of(cls, settings: BaseModel | None = None, /, **overrides: Any) -> Self:
        """``settings`` (default: all defaults) with ``overrides``, validated as this class.

        The one way library functions turn their ``settings`` argument and keyword shortcuts
        into a settings object: a keyword must be a field of this class, and so must every
        field that ``settings`` sets to other than its default (a wider object, e.g.
        ``FilterSettings(method="aflite")`` given to z-filtering, is refused, not narrowed).
        """
        if settings is not None and type(settings) is not cls:
            unhonoured = cls.unhonoured(settings)
            if unhonoured:
                name, value = next(iter(unhonoured.items()))
                raise ConfigError(
                    f"setting {name!r} (= {value!r}) of {type(settings).__name__} is not a "
                    f"setting of {cls.__name__}: this function cannot honour it; leave it at "
                    "its default or call the function that takes it"
                )
        return cls._made(settings, overrides)

    @classmethod
    def unhonoured(cls, source: BaseModel) -> dict[str, Any]:
        """The fields of ``source`` that this class lacks and that are not at their default."""
        out = {}
        for name, info in type(source).model_fields.items():
            if name in cls.model_fields:
                continue
            value = getattr(source, name)
            if info.is_required() or value != info.get_default(call_default_factory=True):
                out[name] = value
        return out

    @classmethod
    def _made(cls, settings: BaseModel | None, overrides: dict[str, Any]) -> Self:
        if type(settings) is cls and not overrides:
            return settings
        values = {} if settings is None else cls._fields_of(settings)
        try:
            renamed = cls.renamed(overrides)
        except ValueError as err:  # an old and a new spelling of one setting
            raise ConfigError(str(err)) from None
        return cls.checked({**values, **renamed})

    @classmethod
    def _fields_of(cls, source: BaseModel) -> dict[str, Any]:
        return {k: getattr(source, k) for k in cls.model_fields if k in type(source).model_fields}

    @classmethod
    def checked(cls, data: dict[str, Any], *, names: dict[str, str] | None = None) -> Self:
        """Validate ``data``; a bad value ends in one :class:`ConfigError` line per problem.

        ``names``: how to call each field in the message (e.g. its CLI flag).
        """
        try:
            return cls.model_validate(data)
        except ValidationError as err:
            problems = []
            for e in err.errors():
                loc = [str(x) for x in e.get("loc", ())]
                where = (names or {}).get(loc[0], loc[0]) if loc else cls.__name__
                where = ".".join([where, *loc[1:]])
                if e.get("type") == "extra_forbidden":
                    valid = ", ".join(sorted(cls.model_fields))
                    problems.append(f"unknown setting {where!r}; valid settings: {valid}")
                else:
                    msg = e.get("msg", "invalid value")
                    problems.append(f"{where}: {msg} (got {e.get('input')!r})")
            raise ConfigError("; ".join(problems)) from None


__all__ = ["DEFAULT_SEED", "Settings", "cli_meta", "setting"]
