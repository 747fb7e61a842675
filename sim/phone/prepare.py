"""A phone run prepared once: :class:`PreparedPhoneRun`, :func:`prepare_phone_run`.

Preparing looks the mode up in the phone mode table, loads the platform and the spec
library and finds the pair and the platform's two devices, once. The hardware assembly
(:func:`~ahasd.sim.phone.cost.build_phone_hardware`) and the engine
(:func:`~ahasd.sim.phone.run.simulate_prepared_phone`) read the prepared run and never look
any of them up again.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ahasd.sim.library.loading import SpecLibrary, load_library
from ahasd.sim.library.specs import PairSpec
from ahasd.sim.phone.platform import PlatformSpec, find_platform
from ahasd.sim.phone.settings import PhoneMode, PhoneSettings, find_phone_mode

__all__ = ["PreparedPhoneRun", "prepare_phone_run"]


@dataclass(frozen=True)
class PreparedPhoneRun:
    """One phone run's settings, its mode row, platform, spec library and pair."""

    settings: PhoneSettings = field(metadata={"help": "The run's settings."})
    mode: PhoneMode = field(metadata={"help": "The row of settings.mode in the mode table."})
    platform: PlatformSpec = field(metadata={"help": "The phone SoC of settings.platform."})
    library: SpecLibrary = field(metadata={"help": "Built-in specs plus settings.spec_dirs."})
    pair: PairSpec = field(metadata={"help": "settings.pair, or the platform's pair."})


def prepare_phone_run(settings: PhoneSettings) -> PreparedPhoneRun:
    """Find the mode's row, the platform, the pair and the platform's GPU and NPU;
    UserError on an unknown platform, pair or device (or a device of the wrong kind)."""
    mode = find_phone_mode(settings.mode)
    platform = find_platform(settings.platform, settings.spec_dirs)
    library = load_library(settings.spec_dirs)
    pair = library.pair(settings.pair or platform.pair)
    library.device(platform.gpu, "gpu")
    library.device(platform.npu, "npu")
    return PreparedPhoneRun(settings, mode, platform, library, pair)
