"""``ahasd reproduce``: the paper's evaluation on every platform and GPU baseline, the
sensitivity of each rung's gain to the uncertain numbers, a regime map, and a report
(:mod:`ahasd.sim.reproduce`). Resumable like a sweep: the results go to ``DIR/results.jsonl``.
"""

from __future__ import annotations

from pathlib import Path

from ahasd.cli.simulate import add_backend_options, check_names
from ahasd.errors import UserError
from ahasd.sim.config import DEFAULT_PLATFORM, field_default, load_library
from ahasd.sim.modes import MODES
from ahasd.sim.reproduce import ReproduceConfig, run_reproduce

__all__ = ["register"]


def _default(name: str):
    return field_default(ReproduceConfig, name)


def register(subparsers) -> None:
    """Add ``ahasd reproduce``."""
    parser = subparsers.add_parser(
        "reproduce",
        help="the paper's evaluation on every platform and GPU baseline, sensitivity, regime map",
        description="Run the paper's grid on every NPU+PIM platform against every GPU "
        "baseline, vary every medium- or low-confidence number over its range, map the "
        "gain of each rung over NPU bandwidth and PIM throughput, and write DIR/report.md.",
    )
    parser.add_argument(
        "--out", type=Path, default=Path("build/reproduce"), help="results and report directory"
    )
    parser.add_argument("--platforms", nargs="+", help="NPU+PIM platforms (default: all)")
    parser.add_argument(
        "--gpus", nargs="+", help="GPU baselines (default: the platforms' gpu_baselines)"
    )
    parser.add_argument("--pairs", nargs="+", help="pairs (default: the paper's three)")
    parser.add_argument("--policies", nargs="+", help="algorithms (default: the paper's four)")
    parser.add_argument("--seeds", nargs="+", type=int, help="seeds (default 0)")
    parser.add_argument(
        "--tokens", type=int, default=_default("tokens"), help=f"({_default('tokens')})"
    )
    parser.add_argument(
        "--sensitivity-platform",
        default=DEFAULT_PLATFORM,
        help=f"platform of the sensitivity analysis ({DEFAULT_PLATFORM})",
    )
    parser.add_argument(
        "--regime-platform",
        default=DEFAULT_PLATFORM,
        help=f"platform of the regime map ({DEFAULT_PLATFORM})",
    )
    parser.add_argument(
        "--regime-policies",
        nargs="+",
        help=f"algorithms of the regime map ({', '.join(_default('regime_policies'))})",
    )
    parser.add_argument(
        "--regime-npu-bandwidth",
        nargs="+",
        type=float,
        help="NPU bandwidths of the regime map, B/s (default: 25.6e9 to 819.2e9, x2 steps)",
    )
    parser.add_argument(
        "--regime-pim-scale",
        nargs="+",
        type=float,
        help="PIM throughput scales of the regime map (default: 0.5 1 4 16 64)",
    )
    parser.add_argument("--spec-dir", action="append", default=[], help="extra spec directory")
    add_backend_options(parser)
    parser.set_defaults(func=_reproduce)


def _reproduce(args) -> int:
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
        spec_dirs=tuple(str(Path(d).resolve()) for d in args.spec_dir),
    )
    if config.tokens < 1:
        raise UserError(f"--tokens must be at least 1, not {config.tokens}")
    for name in ("regime_npu_bandwidth", "regime_pim_scale"):
        if any(not value > 0 for value in getattr(config, name)):
            raise UserError(f"--{name.replace('_', '-')} values must be positive")
    library = load_library(config.spec_dirs)
    check_names(library, MODES, config.pairs, (*config.policies, *config.regime_policies))
    study = run_reproduce(
        config, args.out, jobs=args.jobs, backend=args.backend, address=args.address
    )
    runs = sum(len(points) for points in study.points.values())
    simulated = sum(study.simulated.values())
    seconds = sum(study.seconds.values())
    print(f"{runs} runs ({simulated} simulated, {seconds:.1f} s); report: {args.out}/report.md")
    return 0
