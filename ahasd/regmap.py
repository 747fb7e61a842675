"""The controller top's register map (spec 2.6): the SystemRDL source, compiled into records.

``hw/regmap.rdl`` (installed as ``ahasd/hw/regmap.rdl``) is the single source of truth. This
module compiles it with ``systemrdl-compiler``, its parameters set from a
:class:`~ahasd.params.TopParams` (:func:`rdl_parameters`), and turns the compiled model into
plain records (:class:`Register`, :class:`Field`) looked up by name or by bus address
(:class:`RegisterMap`). The RTL's register decode (``ahasd.hw.registers``) is generated from
these records, the golden controller (``ahasd.golden.top``) answers bus accesses from them,
and the tests and ``ahasd cosim`` program the block through them. The PeakRDL exporters write
``docs/registers.md``, the C header and the HTML map from the same compiled model
(:func:`markdown`, :func:`write_c_header`, :func:`write_html`). This module imports nothing
from Amaranth.

The bus (``docs/integration.md``): AXI4-Lite, 32-bit data, :data:`ADDR_BITS`-bit byte
addresses, little endian. A register is one 32-bit word or, for the 64-bit ones, two words
with PeakRDL's ``buffer_writes``/``buffer_reads`` rule: a write to the low word is buffered,
and the register is written whole when its high word is written; a read of the low word
snapshots the register, and a read of the high word returns the snapshot.

Field access kinds (:attr:`Field.access`)
-----------------------------------------
``"r"``
    Read only (``sw = r``): a live hardware value, or a constant (``hw = na``).
``"rw"``
    Read and write (``sw = rw``); stored in a block (``external`` registers) or in the
    register file.
``"w1c"``
    Interrupt cause (``sw = rw; onwrite = woclr; intr``): set by hardware, cleared by
    writing 1.
``"w1p"``
    Write 1 to pulse (``sw = w; singlepulse``): acts at the edge that takes the write;
    reads 0.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path

from ahasd.params import TopParams

__all__ = [
    "ACCESS_KINDS",
    "ADDR_BITS",
    "DATA_BITS",
    "IRQ_ENABLE",
    "IRQ_STATUS",
    "STRB_BITS",
    "TOP_NAME",
    "Field",
    "Register",
    "RegisterMap",
    "c_driver",
    "markdown",
    "rdl_parameters",
    "rdl_source",
    "register_map",
    "write_c_header",
    "write_html",
]

DATA_BITS = 32
STRB_BITS = DATA_BITS // 8
ADDR_BITS = 12  # a 4 KiB window
TOP_NAME = "ahasd_controller"
ACCESS_KINDS = ("r", "rw", "w1c", "w1p")
#: The interrupt status register and the register of its enable bits (same field names).
IRQ_STATUS = "IRQ_STATUS"
IRQ_ENABLE = "IRQ_ENABLE"


def rdl_source() -> Path:
    """Where the SystemRDL source is (``hw/regmap.rdl``, installed with ``ahasd.hw``)."""
    return Path(str(resources.files("ahasd.hw").joinpath("regmap.rdl")))


@dataclass(frozen=True)
class Field:
    """One field of a register.

    Attributes
    ----------
    name : lower-case identifier (``hmax``).
    lsb, width : position in the register (bits ``lsb`` to ``lsb + width - 1``).
    access : ``"r"``, ``"rw"``, ``"w1c"`` or ``"w1p"`` (module docstring).
    reset : value after reset (0 for ``w1p``).
    constant : ``"r"`` with no hardware behind it (``hw = na``): always reads ``reset``.
    description : the RDL's ``desc``, one line.
    """

    name: str
    lsb: int
    width: int
    access: str
    reset: int
    constant: bool
    description: str

    @property
    def mask(self) -> int:
        return ((1 << self.width) - 1) << self.lsb

    @property
    def readable(self) -> bool:
        return self.access in ("r", "rw", "w1c")

    @property
    def writable(self) -> bool:
        return self.access in ("rw", "w1c", "w1p")


@dataclass(frozen=True)
class Register:
    """One register (one element of a register array).

    Attributes
    ----------
    name : ``EDC_HMAX``, or ``TVC_NVCT[2]`` for an array element.
    group : the RDL instance name (``TVC_NVCT``); ``index`` its array index (else None).
    address : byte address of its low word.
    width : 32 or 64 bits (one or two bus words).
    fields : tuple of Field, by ``lsb``.
    external : its storage is in a block (writes go to the block's write port).
    buffer_writes, buffer_reads : the wide-register rule (module docstring).
    title, description : the RDL's ``name`` and ``desc``.
    """

    name: str
    group: str
    index: int | None
    address: int
    width: int
    fields: tuple[Field, ...]
    external: bool
    buffer_writes: bool
    buffer_reads: bool
    title: str
    description: str

    @property
    def words(self) -> int:
        return self.width // DATA_BITS

    @property
    def word_addresses(self) -> tuple[int, ...]:
        return tuple(self.address + 4 * word for word in range(self.words))

    @property
    def readable(self) -> bool:
        return any(f.readable for f in self.fields)

    @property
    def writable(self) -> bool:
        return any(f.writable for f in self.fields)

    @property
    def reset(self) -> int:
        """What a read returns after reset (write-only fields read 0)."""
        return sum(f.reset << f.lsb for f in self.fields if f.readable)

    @property
    def read_mask(self) -> int:
        return sum(f.mask for f in self.fields if f.readable)

    @property
    def write_mask(self) -> int:
        return sum(f.mask for f in self.fields if f.writable)

    def field(self, name: str) -> Field:
        for f in self.fields:
            if f.name == name:
                return f
        raise KeyError(f"register {self.name} has no field {name!r}")


class RegisterMap:
    """The registers of one parameter set, looked up by name or by bus address.

    Parameters
    ----------
    params : TopParams
    registers : the records, in address order.
    root : the compiled SystemRDL model (for the PeakRDL exporters).
    """

    def __init__(self, params: TopParams, registers: list[Register], root: object):
        self.params = params
        self.root = root
        self.registers = tuple(sorted(registers, key=lambda r: r.address))
        self._by_name = {r.name: r for r in self.registers}
        self._by_word: dict[int, tuple[Register, int]] = {}
        for reg in self.registers:
            for word, address in enumerate(reg.word_addresses):
                if address in self._by_word:
                    raise ValueError(f"registers overlap at {address:#05x}")
                self._by_word[address] = (reg, word)
        if len(self._by_name) != len(self.registers):
            raise ValueError("register names must be unique")

    def __iter__(self):
        return iter(self.registers)

    def __len__(self) -> int:
        return len(self.registers)

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def get(self, name: str) -> Register:
        """The register called ``name`` (``EDC_HMAX``, ``TVC_PVCT[1]``)."""
        try:
            return self._by_name[name]
        except KeyError:
            raise KeyError(f"no register named {name!r}") from None

    def at(self, address: int) -> tuple[Register, int] | None:
        """``(register, word)`` of the bus word at byte ``address`` (its two low bits are
        ignored, as the bus does), or None when no register covers it."""
        if isinstance(address, bool) or not isinstance(address, int):
            raise TypeError(f"address must be an integer, not {address!r}")
        if not 0 <= address < 1 << ADDR_BITS:
            raise ValueError(f"address must be between 0 and {(1 << ADDR_BITS) - 1}, not {address}")
        return self._by_word.get(address & ~(STRB_BITS - 1))

    def groups(self) -> dict[str, tuple[Register, ...]]:
        """Registers by RDL instance: ``{"TVC_NVCT": (TVC_NVCT[0], ...), "ID": (ID,), ...}``."""
        groups: dict[str, list[Register]] = {}
        for reg in self.registers:
            groups.setdefault(reg.group, []).append(reg)
        return {name: tuple(regs) for name, regs in groups.items()}

    def irq_enable(self, field: str) -> Field:
        """The ``IRQ_ENABLE`` field that enables the ``IRQ_STATUS`` cause ``field``."""
        return self.get(IRQ_ENABLE).field(field)


def _check_fits(params: TopParams) -> None:
    """Fields the map keeps in one 32-bit register must fit it; say which parameter does not."""
    limits = [
        ("edc.stats_bits", params.edc.stats_bits),
        ("gtsu.ranks", params.gtsu.ranks),
    ]
    for name, value in limits:
        if value > DATA_BITS:
            raise ValueError(
                f"{name} must be at most {DATA_BITS} to fit its {DATA_BITS}-bit register, "
                f"not {value!r}"
            )


def rdl_parameters(params: TopParams) -> dict[str, int]:
    """The SystemRDL parameters of the map for ``params`` (names as in ``hw/regmap.rdl``)."""
    edc, tvc, gtsu, queues = params.edc, params.tvc, params.gtsu, params.queues
    return {
        "TVC_DEPTH": tvc.depth,
        "TVC_RATIO_BITS": tvc.ratio_bits,
        "TVC_CYCLE_BITS": tvc.cycle_bits,
        "TVC_N_BITS": tvc.n_bits,
        "TVC_N_MAX_RESET": tvc.n_max,
        "EDC_HMAX_RESET": edc.hmax,
        "EDC_LLR_BITS": edc.llr_bits,
        "EDC_STATS_BITS": edc.stats_bits,
        "GTSU_RANKS": gtsu.ranks,
        "GTSU_TIMER_BITS": gtsu.timer_bits,
        "GTSU_T_OFF_RESET": gtsu.t_off,
        "GTSU_T_ON_RESET": gtsu.t_on,
        "GTSU_SWITCH_BITS": 32,  # the GTSU's switch counter (its default width)
        # A level counts 0 .. depth entries.
        "DRAFT_LEVEL_BITS": queues.draft_depth.bit_length(),
        "FEEDBACK_LEVEL_BITS": queues.feedback_depth.bit_length(),
        "PREVERIFY_LEVEL_BITS": queues.preverify_depth.bit_length(),
    }


@cache
def _compiler():
    from systemrdl import RDLCompiler

    compiler = RDLCompiler()
    compiler.compile_file(str(rdl_source()))
    return compiler


def _elaborate(params: TopParams):
    return _compiler().elaborate(TOP_NAME, parameters=rdl_parameters(params))


def _one_line(text: str | None) -> str:
    return " ".join((text or "").split())


def _access(node) -> str:
    """The access kind of a compiled field; a construct the decode does not implement is
    refused (so the RDL cannot promise what the RTL does not do)."""
    from systemrdl.rdltypes import AccessType, OnWriteType

    sw = node.get_property("sw")
    onwrite = node.get_property("onwrite")
    intr = node.get_property("intr")
    if sw == AccessType.r and onwrite is None and not intr:
        return "r"
    if sw == AccessType.rw and onwrite is None and not intr:
        return "rw"
    if sw == AccessType.rw and onwrite == OnWriteType.woclr and intr:
        return "w1c"
    if sw == AccessType.w and node.get_property("singlepulse"):
        return "w1p"
    raise ValueError(f"field {node.get_path()}: access not supported by the register decode")


def _records(root) -> list[Register]:
    from systemrdl.node import RegNode
    from systemrdl.rdltypes import AccessType

    registers = []
    for node in root.top.descendants(unroll=True):
        if not isinstance(node, RegNode):
            continue
        width = node.get_property("regwidth")
        if width not in (DATA_BITS, 2 * DATA_BITS) or node.get_property("accesswidth") != 32:
            raise ValueError(f"register {node.get_path()}: only 32- and 64-bit registers")
        fields = []
        for f in node.fields():
            access = _access(f)
            fields.append(
                Field(
                    name=f.inst_name,
                    lsb=f.lsb,
                    width=f.width,
                    access=access,
                    reset=0 if access == "w1p" else int(f.get_property("reset") or 0),
                    constant=access == "r" and f.get_property("hw") == AccessType.na,
                    description=_one_line(f.get_property("desc")),
                )
            )
        index = node.current_idx[0] if node.is_array else None
        registers.append(
            Register(
                name=node.inst_name if index is None else f"{node.inst_name}[{index}]",
                group=node.inst_name,
                index=index,
                address=node.absolute_address,
                width=width,
                fields=tuple(sorted(fields, key=lambda f: f.lsb)),
                external=bool(node.external),
                buffer_writes=bool(node.get_property("buffer_writes")),
                buffer_reads=bool(node.get_property("buffer_reads")),
                title=_one_line(node.get_property("name")),
                description=_one_line(node.get_property("desc")),
            )
        )
    return registers


@cache
def register_map(params: TopParams | None = None) -> RegisterMap:
    """The register map of the controller top built with ``params`` (defaults when ``None``).

    Raises ``ValueError`` when a block field is wider than the register the map gives it.
    """
    params = TopParams() if params is None else params
    if not isinstance(params, TopParams):
        raise TypeError(f"params must be a TopParams, not {params!r}")
    _check_fits(params)
    root = _elaborate(params)
    regmap = RegisterMap(params, _records(root), root)
    status = regmap.get(IRQ_STATUS)
    for cause in status.fields:
        if cause.access != "w1c" or regmap.irq_enable(cause.name).access != "rw":
            raise ValueError(f"{IRQ_STATUS}.{cause.name} has no read/write enable bit")
    return regmap


# -- the C driver ---------------------------------------------------------------------------

#: The error causes of ``IRQ_STATUS`` (the driver's interrupt service reads ``ERROR`` then).
IRQ_ERROR_CAUSES = ("edc_error", "tvc_error", "gtsu_error")


def _c_hex(value: int) -> str:
    return f"0x{value:08X}u" if value < 1 << 32 else f"0x{value:X}ull"


def _driver_macros(regmap: RegisterMap) -> str:
    """The generated part of ``ahasd_driver.h``: offsets, resets, write masks, fields."""
    lines = []
    for group, regs in regmap.groups().items():
        first = regs[0]
        name = f"AHASD_{group}"
        kind = f"{first.width} bits" + (f", array of {len(regs)}" if len(regs) > 1 else "")
        lines.append(f"/* {first.title} ({kind}) */")
        if len(regs) > 1:
            stride = regs[1].address - first.address
            lines.append(
                f"#define {name}_OFFSET(i) (0x{first.address:03X}u + {stride}u * (uint32_t)(i))"
            )
        else:
            lines.append(f"#define {name}_OFFSET 0x{first.address:03X}u")
        if first.width == DATA_BITS:
            lines.append(f"#define {name}_RESET {_c_hex(first.reset)}")
            lines.append(f"#define {name}_WRITE_MASK {_c_hex(first.write_mask)}")
        for f in first.fields:
            field = f"{name}_{f.name.upper()}"
            lines.append(f"#define {field}_SHIFT {f.lsb}u")
            lines.append(f"#define {field}_WIDTH {f.width}u")
            if first.width == DATA_BITS:
                lines.append(f"#define {field}_MASK {_c_hex(f.mask)}")
    depth = len(regmap.groups()["TVC_NVCT"])
    lines.append(f"#define AHASD_TVC_DEPTH {depth}u")
    causes = " | ".join(f"AHASD_{IRQ_STATUS}_{c.upper()}_MASK" for c in IRQ_ERROR_CAUSES)
    lines.append(f"#define AHASD_IRQ_ERROR_CAUSES ({causes})")
    return "\n".join(lines)


def c_driver(params: TopParams | None = None) -> str:
    """The C driver ``ahasd_driver.h`` of the map for ``params``: register offsets, resets,
    write masks and fields generated from the compiled map, and the driver's functions
    (fixed text, ``hw/ahasd_driver.h.in``): 32-bit volatile accesses only, the 64-bit
    register protocol, bring-up, EDC/TVC configuration, the GTSU mask change, interrupt
    service (``docs/integration.md``)."""
    regmap = register_map(params)
    template = resources.files("ahasd.hw").joinpath("ahasd_driver.h.in").read_text()
    described = ", ".join(f"{k}={v}" for k, v in rdl_parameters(regmap.params).items())
    return template.replace("@PARAMS@", described).replace("@REGISTERS@", _driver_macros(regmap))


# -- PeakRDL exporters ---------------------------------------------------------------------


def markdown(params: TopParams | None = None) -> str:
    """The map as Markdown (peakrdl-markdown), for ``docs/registers.md``."""
    from peakrdl_markdown import MarkdownExporter

    regmap = register_map(params)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "registers.md"
        MarkdownExporter().export(regmap.root, str(path))
        return path.read_text()


def write_c_header(path: Path, params: TopParams | None = None) -> None:
    """The C header (peakrdl-cheader, C11): the register struct and per-field macros
    (``_bm`` mask, ``_bp`` position, ``_bw`` width, ``_reset``). Writes ``path`` always; the
    caller keeps mtimes stable (``ahasd.hw.verilog.write_if_changed``)."""
    from peakrdl_cheader.exporter import CHeaderExporter

    CHeaderExporter().export(register_map(params).root, str(path))


def write_html(folder: Path, params: TopParams | None = None) -> None:
    """The HTML register map (peakrdl-html) into ``folder`` (``index.html`` and its assets).

    peakrdl-html stamps ``index.html`` with the build time (to defeat browser caches); the
    stamp is replaced by one derived from the map's data files, so that the same map gives
    the same files (and a changed map still a new stamp).
    """
    import hashlib
    import re

    from peakrdl_html import HTMLExporter

    exporter = HTMLExporter(
        generate_source_links=False, extra_doc_properties=["buffer_writes", "buffer_reads"]
    )
    exporter.export(register_map(params).root.top, str(folder), title="AHASD controller registers")
    digest = hashlib.sha1()
    for path in sorted(Path(folder).glob("data/*")):
        digest.update(path.read_bytes())
    stamp = str(int(digest.hexdigest()[:8], 16))
    index = Path(folder) / "index.html"
    text = index.read_text()
    found = re.search(r"BUILD_TS = (\d+);", text)
    if found:
        index.write_text(text.replace(found.group(1), stamp))
