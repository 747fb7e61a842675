"""The system model's side of a co-simulation: settings, matching parameters, a recorded run.

A job crosses into the simulator process as JSON (:func:`settings_to_dict`,
:func:`settings_from_dict`); the RTL top is built with the parameters of the controller the
model would build (:func:`model_top_params`); :func:`run_model` runs the model on any
controller and records its decisions, so that the golden run and the co-simulation are made
the same way.
"""

from __future__ import annotations

from ahasd.params import TopParams
from ahasd.sim.cosim.recording import RecordingController

__all__ = [
    "model_inputs",
    "model_top_params",
    "run_model",
    "settings_from_dict",
    "settings_to_dict",
]


def settings_to_dict(settings) -> dict:
    """A :class:`~ahasd.sim.settings.RunSettings` as JSON-able fields."""
    from dataclasses import asdict

    return asdict(settings)


def settings_from_dict(fields: dict):
    """Inverse of :func:`settings_to_dict` (lists back to the tuples the dataclass holds)."""
    from ahasd.sim.settings import RunSettings

    fields = dict(fields)
    fields["policy_params"] = tuple(
        (key, tuple(value) if isinstance(value, list) else value)
        for key, value in fields.get("policy_params", ())
    )
    # JSON turns every tuple into a list; the settings hold tuples (they key caches).
    for name in ("spec_overrides", "controller_params"):
        fields[name] = tuple((key, value) for key, value in fields.get(name, ()))
    fields["spec_dirs"] = tuple(fields.get("spec_dirs", ()))
    return RunSettings(**fields)


def model_top_params(settings) -> TopParams:
    """The controller top's parameters matching the model's controller for ``settings``:
    the TVC widths and every ``--controller-param`` (``ahasd.sim.modes.simulate`` builds
    its golden controller with the same :func:`~ahasd.sim.settings.controller_params`), so
    the RTL is built, and the golden side run, with what the settings ask for.

    Raises
    ------
    ahasd.errors.UserError
        when the controller top's register map cannot hold a block field these parameters
        widen (naming the controller parameters given), before anything is built.
    """
    from ahasd.errors import UserError
    from ahasd.params import TVCParams
    from ahasd.regmap import register_map
    from ahasd.sim.settings import controller_params

    edc, tvc, gtsu = controller_params(settings)
    params = TopParams(edc=edc, tvc=tvc, gtsu=gtsu)
    try:
        register_map(params)
    except ValueError as error:
        given = [f"--controller-param {p}={v}" for p, v in settings.controller_params]
        given += [
            f"--{name.replace('_', '-')} {getattr(settings, name)}"
            for name in ("tvc_ratio_bits", "tvc_cycle_bits")
            if getattr(settings, name) != getattr(TVCParams(), name.removeprefix("tvc_"))
        ]
        raise UserError(
            f"cosim: the controller top cannot be built with {', '.join(given)}: {error} "
            "(ahasd simulate runs the golden controller with them)"
        ) from None
    return params


def model_inputs(settings):
    """``(prepared run, hardware, tvc_presets)`` of a run, as ``simulate`` computes them."""
    from ahasd.sim.library.loading import load_library
    from ahasd.sim.modes import build_hardware, prepare_run, tvc_presets

    prepared = prepare_run(settings, load_library(settings.spec_dirs))
    hardware = build_hardware(prepared)
    return prepared, hardware, tvc_presets(hardware, prepared.settings.prompt_tokens)


def run_model(settings, controller=None) -> tuple[dict, list]:
    """Run the system model; returns ``(summary, decision log)``.

    ``controller`` is a :class:`~ahasd.sim.controller.Controller` or ``None`` for the golden
    controller (built exactly as ``simulate`` builds its default). The summary is passed
    through JSON so that a golden run and a co-simulation compare as the CLI prints them.
    """
    import json

    from ahasd.sim.controller import GoldenController
    from ahasd.sim.modes import simulate_prepared

    prepared, hardware, presets = model_inputs(settings)
    if controller is None:
        p = model_top_params(settings)
        controller = GoldenController(p.edc, p.tvc, p.gtsu, tvc_presets=presets)
    recorder = RecordingController(controller)
    result = simulate_prepared(prepared, hardware=hardware, controller=recorder)
    return json.loads(json.dumps(result.summary)), recorder.log
