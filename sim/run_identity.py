"""The identity of a run: what a results row was asked for, and what it computed from.

- :func:`settings_key`: the requested settings as canonical JSON;
- :func:`scenario_label`: what a run was asked for beyond mode, pair, policy, seed and
  trace, as ``key=value`` words (the report compares runs within one scenario);
- :func:`run_identity`: a hash of the fully resolved configuration (the resolved settings,
  every spec value of the devices, models and pair it reads, the controller and policy
  parameters), the content hash of its trace and the model's version
  (:func:`model_version`), and their combination ``run_id``. Resume skips exactly the runs
  whose identity is already in the results file, so a changed spec or trace file reruns
  what it affects; two requested runs with one identity (the GPU-only baseline under two
  NPU+PIM platforms) are simulated once.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
from dataclasses import fields
from pathlib import Path

import ahasd
from ahasd import golden
from ahasd.sim.library.loading import SpecLibrary
from ahasd.sim.library.platforms import DEVICE_SETTINGS
from ahasd.sim.modes import prepare_run
from ahasd.sim.modes.hardware import ASSEMBLY_ROLES
from ahasd.sim.settings import RunSettings
from ahasd.sim.traces.format import builtin_trace_paths

__all__ = ["model_version", "run_identity", "scenario_label", "settings_key"]

# Settings that do not change what a run computes (labels, or folded into spec values).
_NOT_HASHED = {"platform", "spec_overrides", "spec_dirs", "record_timeline"}
# Settings only the asynchronous engine reads (the controller's are hashed as parameters).
_ASYNC_ONLY = (
    "draft_queue_tokens",
    "tvc_ratio_bits",
    "tvc_cycle_bits",
    "controller_params",
    "preverify_kv_reuse",
)
# Settings that label a scenario only when they differ from their default.
_SCENARIO_SKIP = {"mode", "pair", "policy", "seed", "trace", "spec_dirs", "record_timeline"}


def settings_key(settings: RunSettings) -> str:
    """The requested settings as canonical JSON (what a results row was asked for)."""
    data = dataclasses.asdict(settings)
    data.pop("record_timeline")
    return json.dumps(data, sort_keys=True)


def scenario_label(settings: RunSettings) -> str:
    """Everything a run was asked for beyond mode, pair, policy, seed and trace, as
    ``key=value`` words (settings that differ from their default, overrides, parameters);
    runs of one scenario are compared with each other in the report."""
    words = []
    for item in fields(RunSettings):
        name = item.name
        value = getattr(settings, name)
        if name in _SCENARIO_SKIP or (name != "platform" and value == item.default):
            continue
        if name in ("spec_overrides", "controller_params", "policy_params"):
            words += [f"{path}={_short(v)}" for path, v in value]
        else:
            words.append(f"{name}={_short(value)}")
    return " ".join(words)


def _short(value) -> str:
    return format(value, "g") if isinstance(value, float) else str(value)


def _spec_dict(spec) -> dict:
    data = dataclasses.asdict(spec)
    data.pop("sources", None)
    return data


def run_identity(settings: RunSettings, library: SpecLibrary) -> dict:
    """``config_hash``, ``trace_hash``, ``version`` and their combination ``run_id``.

    The configuration hash covers the resolved settings (without the platform's name and
    the override list: their effect is in the spec values), the specs of the devices the
    mode's hardware assembly reads (and their power figures), the pair and its two models,
    the controller parameters (asynchronous modes) and the policy parameters.
    """
    prepared = prepare_run(settings, library)
    resolved, used, mode = prepared.settings, prepared.library, prepared.mode
    roles = ASSEMBLY_ROLES[mode.assembly]
    config = {
        key: value
        for key, value in dataclasses.asdict(resolved).items()
        if key not in _NOT_HASHED and (key not in DEVICE_SETTINGS or key in roles)
    }
    if "pim" not in roles:
        del config["memory_sharing"]  # a mode without the LPDDR5-PIM shares nothing
    if mode.engine != "async":
        for name in _ASYNC_ONLY:
            del config[name]
    if mode.assembly not in ("specpim-gpu", "specpim-npu"):
        del config["specpim_planned_draft"]
    if "pim" not in roles:
        del config["rank_split"]
    pair = used.pair(resolved.pair)
    draft = used.model(resolved.draft_model or pair.draft)
    target = used.model(resolved.target_model or pair.target)
    specs = {
        "devices": {role: _spec_dict(used.device(getattr(resolved, role))) for role in roles},
        "power": {role: _spec_dict(used.power_of(getattr(resolved, role))) for role in roles},
        "pair": dataclasses.asdict(pair),
        "models": [_spec_dict(draft), _spec_dict(target)],
    }
    if mode.engine == "async":
        specs["controller"] = [p.as_dict() for p in prepared.controller]
    config_hash = _digest({"settings": config, "specs": specs})
    trace_hash = _trace_hash(resolved, pair.preset)
    version = model_version()
    return {
        "run_id": _digest([config_hash, trace_hash, version]),
        "config_hash": config_hash,
        "trace_hash": trace_hash,
        "version": version,
    }


@functools.cache
def model_version() -> str:
    """The tool version plus a digest of the code a run's result depends on.

    ``ahasd.__version__`` alone would let a resumed sweep reuse rows an edited model would
    now compute differently; the digest covers the source of the system model, the golden
    models and the shared parameters (``+`` and 12 hex digits, e.g. ``0.1.0+3f2a...``).
    """
    root = Path(ahasd.__file__).parent
    packages = (Path(__file__).parent, Path(golden.__file__).parent)
    files = sorted(p for package in packages for p in package.rglob("*.py"))
    files += [root / "params.py", root / "errors.py"]
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return f"{ahasd.__version__}+{digest.hexdigest()[:12]}"


def _digest(obj) -> str:
    text = json.dumps(obj, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def _trace_hash(settings: RunSettings, preset: str) -> str:
    """Content hash of a trace file; for a generated trace, of what generates it."""
    spec = settings.trace
    builtin = {p.name.removesuffix(".jsonl"): p for p in builtin_trace_paths()}
    if spec is not None and not spec.startswith("iid:") and spec in builtin:
        return _file_digest(builtin[spec])
    if spec is not None and not spec.startswith("iid:") and Path(spec).is_file():
        return _file_digest(Path(spec))
    generated = spec or f"synthetic:{preset}"
    return _digest([generated, settings.tokens, settings.seed])


def _file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:20]
