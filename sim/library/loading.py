"""The spec library: every spec file of the built-in directory and the user's
``--spec-dir`` directories, cached per directory list and file signature.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass, field
from pathlib import Path

from ahasd.errors import UserError
from ahasd.sim.library.files import described
from ahasd.sim.library.platforms import (
    DEVICE_SETTINGS,
    PLATFORM_KIND,
    PlatformSpec,
    load_system_platform,
    platform_kind,
)
from ahasd.sim.library.specs import (
    DeviceSpec,
    ModelSpec,
    PairSpec,
    PowerSpec,
    load_device,
    load_model,
    load_pairs,
    load_power,
)

BUILTIN_SPEC_DIR = Path(__file__).parents[1] / "specs"


@dataclass(frozen=True)
class SpecLibrary:
    """Every device, power, model and pair spec found in the spec directories.

    Later directories override earlier ones by name, so a user directory can replace a
    built-in file or add new ones.
    """

    devices: dict = field(metadata={"help": "name -> DeviceSpec"})
    power: dict = field(metadata={"help": "device name -> PowerSpec"})
    models: dict = field(metadata={"help": "name -> ModelSpec"})
    pairs: dict = field(metadata={"help": "name -> PairSpec"})
    directories: tuple = described("Directories read, in order.", ())
    platforms: dict = field(default_factory=dict, metadata={"help": "name -> PlatformSpec"})
    overrides: tuple = described("(path, value) spec-field overrides applied to the files.", ())
    root: object = described("The library as read from the files (None: this one).", None)

    def device(self, name: str, kind: str | None = None) -> DeviceSpec:
        if name not in self.devices:
            raise UserError(f"unknown device {name!r} (known: {', '.join(sorted(self.devices))})")
        spec = self.devices[name]
        if kind is not None and spec.kind != kind:
            raise UserError(f"device {name!r} is a {spec.kind}, not a {kind}")
        return spec

    def power_of(self, device: str) -> PowerSpec:
        # A device without a power file consumes nothing we model: say so with zeros.
        return self.power.get(device, PowerSpec(device=device))

    def model(self, name: str) -> ModelSpec:
        if name not in self.models:
            raise UserError(f"unknown model {name!r} (known: {', '.join(sorted(self.models))})")
        return self.models[name]

    def pair(self, name: str) -> PairSpec:
        if name not in self.pairs:
            raise UserError(f"unknown pair {name!r} (known: {', '.join(sorted(self.pairs))})")
        return self.pairs[name]

    def platform(self, name: str) -> PlatformSpec:
        if name not in self.platforms:
            known = ", ".join(sorted(self.platforms))
            raise UserError(
                f"unknown platform {name!r} (known NPU+PIM platforms: {known}; phone SoCs: "
                "see docs/phone-soc.md)"
            )
        return self.platforms[name]


@functools.lru_cache(maxsize=8)
def _load(directories: tuple[Path, ...], signature: tuple) -> SpecLibrary:
    devices, power, models, pairs, platforms = {}, {}, {}, {}, {}
    for directory in directories:
        if not directory.is_dir():
            raise UserError(f"spec directory {directory} does not exist")
        for path in spec_paths(directory, "devices"):
            spec = load_device(path)
            devices[spec.name] = spec
        for path in spec_paths(directory, "power"):
            spec = load_power(path)
            power[spec.device] = spec
        for path in spec_paths(directory, "models"):
            spec = load_model(path)
            models[spec.name] = spec
        if os.path.lexists(directory / "pairs.toml"):
            pairs.update(load_pairs(directory / "pairs.toml"))
        for path in spec_paths(directory, "platforms"):
            if platform_kind(path) == PLATFORM_KIND:
                spec = load_system_platform(path)
                platforms[spec.name] = spec
    for pair in pairs.values():
        for role, name in (("draft", pair.draft), ("target", pair.target)):
            if name not in models:
                raise UserError(f"pair {pair.name!r}: unknown {role} model {name!r}")
    for platform in platforms.values():
        roles = [*platform.devices, *(("gpu", name) for name in platform.gpu_baselines)]
        for role, name in roles:
            if name not in devices:
                raise UserError(f"{platform.path}: devices.{role}: unknown device {name!r}")
            if devices[name].kind != DEVICE_SETTINGS[role]:
                raise UserError(
                    f"{platform.path}: devices.{role}: {name!r} is a {devices[name].kind}, "
                    f"not a {DEVICE_SETTINGS[role]}"
                )
    return SpecLibrary(devices, power, models, pairs, directories, platforms)


def load_library(extra_dirs=()) -> SpecLibrary:
    """The built-in specs plus ``extra_dirs`` (later wins), cached per directory list and
    the size and modification time of every spec file in them (an edited file is read
    again, so a long-lived process never runs on stale numbers)."""
    directories = (BUILTIN_SPEC_DIR, *(Path(d).resolve() for d in extra_dirs))
    return _load(directories, _files_signature(directories))


# The folders of a spec directory, each of ``*.toml`` files (``pairs.toml`` at the top).
SPEC_FOLDERS = ("devices", "power", "models", "platforms")


def spec_paths(directory: Path, folder: str) -> list[Path]:
    """The spec files of ``directory/folder``, sorted: ``*.toml`` names not starting with
    a dot (an editor's lock or backup file such as ``.#npu.toml``, often a dangling link,
    is not a spec). Only that folder is listed, never a whole tree (``--spec-dir /``)."""
    return sorted(p for p in (directory / folder).glob("*.toml") if not p.name.startswith("."))


def _files_signature(directories: tuple[Path, ...]) -> tuple:
    signature = []
    for directory in directories:
        paths = [p for folder in SPEC_FOLDERS for p in spec_paths(directory, folder)]
        for path in [*paths, directory / "pairs.toml"]:
            try:
                info = os.stat(path)
            except OSError:
                # Missing or dangling: the loader says which (pairs.toml is optional).
                signature.append((str(path), None, None))
                continue
            signature.append((str(path), info.st_mtime_ns, info.st_size))
    return tuple(signature)
