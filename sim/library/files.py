"""Reading spec files: TOML with a source and a confidence note for every number.

A numeric field is written ``field = { value = 1.0, source = "...", confidence = "..." }``
(a ``[field]`` table is the same thing); a model's operator fields (``norm``, ``activation``)
take a name in the same shape, ``norm = { value = "rmsnorm", source = "..." }``.
``confidence`` may be given once at file level instead. An uncertain number may add
``range = [lo, hi]`` with a ``range_source`` justifying it: ``ahasd reproduce`` varies it
over that range. Anything a user can get wrong (unknown key, missing or non-positive
number, bad TOML, a file too big or not a regular file) raises
:class:`ahasd.errors.UserError` naming the file and the field.
"""

from __future__ import annotations

import difflib
import math
import os
import stat
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from ahasd.errors import UserError
from ahasd.output import file_kind

CONFIDENCE_LEVELS = ("high", "medium", "low")

# Every spec number in SI units lies far inside this range (the shipped ones span 2e-6 to
# 1.3e14); outside it, the cost model's products and quotients leave float range.
# The largest spec or grid file read (the shipped ones are under 10 kB): a bigger one is
# refused rather than read whole.
SPEC_FILE_MAX_BYTES = 1 << 20
SPEC_VALUE_MIN = 1e-12
SPEC_VALUE_MAX = 1e18


def described(text: str, default=None, **metadata):
    """A dataclass field with a default and a help text, plus any further ``metadata`` (the
    command-line details of a run setting, read by :mod:`ahasd.cli.options`)."""
    return field(default=default, metadata={"help": text, **metadata})


@dataclass(frozen=True)
class Sourced:
    """Where one number (or one named choice, e.g. a model's norm) comes from, and (for
    uncertain numbers) how far it may be off.

    ``span`` is the ``range = [lo, hi]`` of the spec file (``None`` when not given) and
    ``span_source`` its justification; ``ahasd reproduce`` varies the number over it.
    """

    value: float | str
    source: str
    confidence: str
    span: tuple[float, float] | None = None
    span_source: str = ""

    @property
    def level(self) -> str:
        """The first word of the confidence note: ``high``, ``medium`` or ``low``."""
        word = self.confidence.strip().split()[0].rstrip(":;,.").lower()
        return word if word in CONFIDENCE_LEVELS else "unstated"


def read_toml(path: Path) -> dict:
    """The parsed TOML file ``path``; unreadable or invalid TOML is a UserError naming it,
    and so is anything but a regular file of at most :data:`SPEC_FILE_MAX_BYTES` (a FIFO
    would hang the read, a link to ``/dev/zero`` fill memory; a dangling link is named)."""
    path = Path(path)
    try:
        info = os.stat(path)
    except FileNotFoundError:
        if os.path.islink(path):
            raise UserError(f"{path}: a symbolic link to nothing (dangling)") from None
        raise UserError(f"{path}: cannot read: No such file or directory") from None
    except OSError as error:
        raise UserError(f"{path}: cannot read: {error.strerror}") from None
    if not stat.S_ISREG(info.st_mode):
        raise UserError(f"{path}: is {file_kind(info.st_mode)}, not a regular file")
    try:
        with path.open("rb") as handle:
            data = handle.read(SPEC_FILE_MAX_BYTES + 1)
        if len(data) > SPEC_FILE_MAX_BYTES:
            raise UserError(
                f"{path}: more than {SPEC_FILE_MAX_BYTES:,} bytes, the limit of a spec or grid file"
            )
        return tomllib.loads(data.decode("utf-8"))
    except tomllib.TOMLDecodeError as error:
        raise UserError(f"{path}: not valid TOML: {error}") from None
    except UnicodeDecodeError as error:
        raise UserError(
            f"{path}: not valid TOML: not UTF-8 (byte {error.start}: {error.reason})"
        ) from None
    except RecursionError:
        raise UserError(f"{path}: not valid TOML: arrays or tables nested too deeply") from None
    except ValueError:  # past TOMLDecodeError and UnicodeDecodeError: Python's digit limit
        raise UserError(
            f"{path}: not valid TOML: an integer of more digits than Python reads "
            f"({sys.get_int_max_str_digits()})"
        ) from None
    except OSError as error:
        raise UserError(f"{path}: cannot read: {error.strerror}") from None


# The keys of a number's table (``field = {value, source, confidence, ...}``); ``unit`` is a
# note for readers.
FIELD_KEYS = ("value", "source", "confidence", "range", "range_source", "unit")
# Notes any spec file may carry at its top level (read by people, or as every field's
# confidence).
FILE_NOTES = ("description", "source", "confidence")


def check_keys(path: Path, data: dict, known, *, where: str | None = None) -> None:
    """UserError naming the file ``path``, the first key of ``data`` not in ``known`` and
    the nearest known key: a misspelt optional field would otherwise be ignored and its
    default used without a word. ``where`` names the table ``data`` is (``eta_memory``
    for the keys of that field's table)."""
    known = list(dict.fromkeys(known))
    for key in data:
        if key in known:
            continue
        name = f"{where}.{key}" if where else key
        near = difflib.get_close_matches(str(key), known, n=1, cutoff=0.0)
        hint = f"; the nearest known key is {near[0]!r}" if near else ""
        raise UserError(f"{path}: unknown key {name!r}{hint}")


def require_string(path: Path, data: dict, key: str, default: str | None = None) -> str:
    """``data[key]`` (else ``default``) as a non-empty string; otherwise a UserError naming
    the file ``path`` and the field."""
    value = data.get(key, default)
    if not isinstance(value, str) or not value:
        raise UserError(f"{path}: field '{key}': must be a non-empty string, not {value!r}")
    return value


def sourced_number(path: Path, data: dict, key: str, *, integer: bool, zero_ok: bool) -> Sourced:
    """Parse ``key = {value, source, confidence}``; positive (or >= 0 when ``zero_ok``).

    The spec-file number format of every loader (devices, power, models, phone platforms);
    anything malformed is a UserError naming the file ``path`` and the field.
    """
    entry = _field_table(path, data, key)
    value = entry.get("value")
    kind = "an integer" if integer else "a number"
    ok_type = isinstance(value, int) if integer else isinstance(value, int | float)
    if isinstance(value, bool) or not ok_type or not math.isfinite(value):
        raise UserError(f"{path}: field '{key}': value must be {kind}, not {value!r}")
    if value < 0 or (value == 0 and not zero_ok):
        bound = "non-negative" if zero_ok else "positive"
        raise UserError(f"{path}: field '{key}': value must be {bound}, not {value!r}")
    if value != 0 and not SPEC_VALUE_MIN <= value <= SPEC_VALUE_MAX:
        raise UserError(
            f"{path}: field '{key}': value must lie in {SPEC_VALUE_MIN:g}..{SPEC_VALUE_MAX:g} "
            f"(or be 0 where allowed), not {value!r}"
        )
    source, confidence = _provenance(path, data, key, entry)
    span = _span(path, key, entry, value, integer=integer, zero_ok=zero_ok)
    return Sourced(
        value=value,
        source=source,
        confidence=confidence,
        span=span,
        span_source=str(entry.get("range_source", "")),
    )


def _span(path: Path, key: str, entry: dict, value, *, integer: bool, zero_ok: bool):
    """The ``range = [lo, hi]`` of a number (None if absent): two numbers of the field's
    kind with lo <= value <= hi, justified by a ``range_source`` string."""
    if "range" not in entry:
        return None
    span = entry["range"]
    kind = int if integer else int | float
    ok = isinstance(span, list) and len(span) == 2
    ok = ok and all(isinstance(v, kind) and not isinstance(v, bool) for v in span)
    if not ok or not all(math.isfinite(v) and (v > 0 or (zero_ok and v == 0)) for v in span):
        raise UserError(f"{path}: field '{key}': range must be [lo, hi], two valid values")
    low, high = span
    if not low <= value <= high:
        raise UserError(
            f"{path}: field '{key}': range [{low}, {high}] must contain the value {value}"
        )
    note = entry.get("range_source")
    if not isinstance(note, str) or not note.strip():
        raise UserError(f"{path}: field '{key}': a range needs a 'range_source' string")
    return (low, high)


def _field_table(path: Path, data: dict, key: str) -> dict:
    """The table of field ``key`` (``value``, ``source``, ``confidence``, ...), its keys
    checked; UserError naming the file and the field if it is not a table."""
    entry = data[key]
    if not isinstance(entry, dict):
        raise UserError(
            f"{path}: field '{key}': must be a table with value, source and confidence, "
            f"not {entry!r}"
        )
    check_keys(path, entry, FIELD_KEYS, where=key)
    return entry


def sourced_choice(path: Path, data: dict, key: str, choices: tuple[str, ...]) -> Sourced:
    """Parse ``key = {value = "<name>", source, confidence}`` with ``<name>`` one of
    ``choices``; anything else is a UserError naming the file ``path`` and the field."""
    entry = _field_table(path, data, key)
    value = entry.get("value")
    if value not in choices:
        raise UserError(
            f"{path}: field '{key}': value must be one of {', '.join(choices)}, not {value!r}"
        )
    source, confidence = _provenance(path, data, key, entry)
    return Sourced(value=value, source=source, confidence=confidence)


def _provenance(path: Path, data: dict, key: str, entry: dict) -> tuple[str, str]:
    """The ``source`` and ``confidence`` of the field ``key`` (``entry``, or the file's
    confidence); a UserError naming the file and the field when one is missing."""
    source = entry.get("source")
    if not isinstance(source, str) or not source.strip():
        raise UserError(f"{path}: field '{key}': needs a 'source' string")
    confidence = entry.get("confidence", data.get("confidence"))
    if not isinstance(confidence, str) or not confidence.strip():
        raise UserError(f"{path}: field '{key}': needs a 'confidence' note (or a file-level one)")
    return source, confidence


def sourced_numbers(path: Path, data: dict, names, int_fields, zero_ok) -> dict[str, Sourced]:
    return {
        name: sourced_number(path, data, name, integer=name in int_fields, zero_ok=name in zero_ok)
        for name in names
        if name in data
    }
