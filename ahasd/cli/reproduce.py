"""``ahasd reproduce``: the paper's evaluation on every platform and GPU baseline, the
sensitivity of each rung's gain to the uncertain numbers, a regime map, and a report
(:mod:`ahasd.sim.reproduce`). Resumable like a sweep: the results go to ``DIR/results.jsonl``.
"""

from __future__ import annotations

from pathlib import Path

from ahasd.cli.args import UniqueList, integer, path_arg, real
from ahasd.cli.options import (
    add_backend_options,
    add_list_options,
    add_setting,
    check_backend,
    check_names,
    settings_values,
)
from ahasd.cli.progress import Progress
from ahasd.output import check_folder
from ahasd.sim.library.loading import load_library
from ahasd.sim.library.platforms import DEFAULT_PLATFORM
from ahasd.sim.modes import MODES
from ahasd.sim.reproduce import ReproduceConfig, run_reproduce
from ahasd.sim.settings import KV_LENGTH_MAX, RunSettings, field_default

__all__ = ["DEFAULT_OUT", "register"]

DEFAULT_OUT = Path("build/reproduce")


def _default(name: str):
    return field_default(ReproduceConfig, name)


def register(subparsers) -> None:
    """Add ``ahasd reproduce``."""
    parser = subparsers.add_parser(
        "reproduce",
        help="the paper's evaluation on every platform and GPU baseline, sensitivity, regime map",
        description="Run the paper's grid on every NPU+PIM platform against every GPU "
        "baseline, vary every medium- or low-confidence number over its range, map the "
        "gain of each rung over NPU bandwidth and PIM throughput, and write DIR/report.md "
        "(docs/reproduce.md). Resumable: finished runs in DIR/results.jsonl are not rerun.",
    )
    parser.add_argument(
        "--out",
        type=path_arg,
        default=DEFAULT_OUT,
        help=f"results and report folder (default: {DEFAULT_OUT})",
    )
    add_list_options(
        parser,
        platforms="NPU+PIM platforms (default: all)",
        gpus="GPU baselines (default: the platforms' gpu_baselines)",
        pairs="pairs (default: the paper's three)",
        policies="algorithms (default: the paper's four)",
    )
    parser.add_argument(
        "--tokens",
        type=integer(1, KV_LENGTH_MAX - field_default(RunSettings, "prompt_tokens")),
        default=_default("tokens"),
        help=f"generation length of every run, tokens (default: {_default('tokens')})",
    )
    parser.add_argument(
        "--sensitivity-platform",
        default=DEFAULT_PLATFORM,
        help=f"platform of the sensitivity analysis (default: {DEFAULT_PLATFORM})",
    )
    parser.add_argument(
        "--regime-platform",
        default=DEFAULT_PLATFORM,
        help=f"platform of the regime map (default: {DEFAULT_PLATFORM})",
    )
    parser.add_argument(
        "--regime-policies",
        nargs="+",
        action=UniqueList,
        help=f"algorithms of the regime map (default: {' '.join(_default('regime_policies'))})",
    )
    parser.add_argument(
        "--regime-npu-bandwidth",
        nargs="+",
        type=real(1e6, 1e15),
        action=UniqueList,
        help="NPU bandwidths of the regime map, B/s (default: "
        f"{' '.join(f'{v:g}' for v in _default('regime_npu_bandwidth'))})",
    )
    parser.add_argument(
        "--regime-pim-scale",
        nargs="+",
        type=real(1e-3, 1e4),
        action=UniqueList,
        help="PIM throughput scales of the regime map (default: "
        f"{' '.join(f'{v:g}' for v in _default('regime_pim_scale'))})",
    )
    add_setting(parser, RunSettings, "spec_dirs")
    add_backend_options(parser)
    parser.set_defaults(func=_reproduce)


def _reproduce(args) -> int:
    check_backend(args)
    given = {
        "platforms": args.platforms,
        "gpus": args.gpus,
        "pairs": args.pairs,
        "policies": args.policies,
        "seeds": args.seeds,
        "regime_policies": args.regime_policies,
        "regime_npu_bandwidth": args.regime_npu_bandwidth,
        "regime_pim_scale": args.regime_pim_scale,
    }
    config = ReproduceConfig(
        **{key: tuple(value) for key, value in given.items() if value},
        tokens=args.tokens,
        sensitivity_platform=args.sensitivity_platform,
        regime_platform=args.regime_platform,
        **settings_values(args, ["spec_dirs"]),
    )
    library = load_library(config.spec_dirs)
    check_names(library, MODES, config.pairs, (*config.policies, *config.regime_policies))
    check_folder(args.out, option="--out")
    study = run_reproduce(
        config,
        args.out,
        jobs=args.jobs,
        backend=args.backend,
        address=args.address,
        progress=lambda label, total: Progress(label, total, "runs"),
    )
    runs = sum(len(points) for points in study.points.values())
    simulated = sum(study.simulated.values())
    seconds = sum(study.seconds.values())
    print(f"{runs} runs ({simulated} simulated, {seconds:.1f} s); report: {args.out}/report.md")
    return 0
