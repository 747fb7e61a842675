"""The controller top's register map (spec 2.6), as data.

One list of :class:`Register` records, a function of :class:`~ahasd.params.TopParams`, is the
single description of the CPU's view of the controller. The RTL top (``ahasd.hw.top``) decodes
its bus from it, the golden controller (``ahasd.golden.top``) answers reads and writes from it,
and ``ahasd regmap`` renders it as ``docs/registers.md``. This module imports nothing from
Amaranth.

The bus (``docs/top.md``): 32-bit data, ``ADDR_BITS``-bit *word* addresses (one register per
address), in the ``pim`` clock domain. A read presented in cycle ``c`` returns the register's
value during cycle ``c``, on ``rdata`` in cycle ``c + 1``. A write taken at the edge that ends
cycle ``c`` holds from cycle ``c + 1``. Writes keep the low ``width`` bits of ``wdata``.

Access types
------------
``RO``
    Read only; writes are ignored.
``RW``
    Read and write; reads return the block's current value of the field.
``W1P``
    Write one to pulse: each 1 bit written acts once, at the write's edge; reads return 0.

Unmapped addresses read 0 and ignore writes.
"""

from __future__ import annotations

from dataclasses import dataclass

from ahasd.params import TopParams

__all__ = [
    "ACCESS_TYPES",
    "ADDR_BITS",
    "DATA_BITS",
    "ERROR_BITS",
    "ID_VALUE",
    "SOFT_RESET_BITS",
    "STATUS_BITS",
    "SWITCH_COUNTER_BITS",
    "TABLE_BASES",
    "TABLE_REGION",
    "VERSION_VALUE",
    "Register",
    "RegisterMap",
    "register_map",
]

DATA_BITS = 32
ADDR_BITS = 8
ID_VALUE = 0x41485344  # "AHSD" in ASCII, most significant byte first
VERSION_VALUE = 0x0001_0000  # major 1, minor 0 (register map layout version)
SWITCH_COUNTER_BITS = 32  # width of the GTSU's switch counter (the GTSU's default)
ACCESS_TYPES = ("RO", "RW", "W1P")

#: Word address of entry 0 of each TVC table; entry ``i`` is at ``base + i``. Each region has
#: room for 64 entries (``TVCParams.depth`` is at most 64).
TABLE_BASES = {"nvct": 0x40, "pdct": 0x80, "pvct": 0xC0}
TABLE_REGION = 64

#: Bits of the ``ERROR`` register (sticky flags of the blocks).
ERROR_BITS = {"edc": 0, "tvc": 1, "gtsu_config": 2}
#: Bits of the ``SOFT_RESET`` register (one reset pulse per block).
SOFT_RESET_BITS = {"edc": 0, "tvc": 1, "gtsu": 2}
#: Fields of the ``STATUS`` register: name -> (lsb, width).
STATUS_BITS = {
    "gtsu_task": (0, 2),
    "gtsu_ready": (2, 1),
    "gtsu_gating": (3, 1),
    "tvc_busy": (4, 1),
    "tvc_npu_busy": (5, 1),
}


@dataclass(frozen=True)
class Register:
    """One register of the map.

    Attributes
    ----------
    name : upper-case identifier (``EDC_HMAX``).
    address : word address on the bus.
    width : meaningful bits (the rest read as 0).
    access : ``"RO"``, ``"RW"`` or ``"W1P"``.
    reset : value read back after reset.
    field : the block field it shows or sets, as ``block.member`` (``"edc.hmax"``,
        ``"tvc.nvct[2]"``, ``"top"`` for the top's own registers).
    description : one sentence for the documentation.
    """

    name: str
    address: int
    width: int
    access: str
    reset: int
    field: str
    description: str

    @property
    def readable(self) -> bool:
        return self.access in ("RO", "RW")

    @property
    def writable(self) -> bool:
        return self.access in ("RW", "W1P")

    @property
    def block(self) -> str:
        """The block the register belongs to (``edc``, ``tvc``, ``gtsu``, ``queues``, ``top``)."""
        return self.field.split(".", 1)[0]


class RegisterMap:
    """The registers of one parameter set, looked up by name or address.

    Parameters
    ----------
    params : TopParams
    registers : the records, in address order.
    """

    def __init__(self, params: TopParams, registers: list[Register]):
        self.params = params
        self.registers = tuple(sorted(registers, key=lambda r: r.address))
        self._by_name = {r.name: r for r in self.registers}
        self._by_address = {r.address: r for r in self.registers}
        if len(self._by_name) != len(self.registers) or len(self._by_address) != len(
            self.registers
        ):
            raise ValueError("register names and addresses must be unique")

    def __iter__(self):
        return iter(self.registers)

    def __len__(self) -> int:
        return len(self.registers)

    def __contains__(self, key: object) -> bool:
        return key in self._by_name or key in self._by_address

    def get(self, key: str | int) -> Register:
        """The register called ``key`` (a name) or at ``key`` (an address)."""
        if isinstance(key, str):
            try:
                return self._by_name[key]
            except KeyError:
                raise KeyError(f"no register named {key!r}") from None
        if isinstance(key, bool) or not isinstance(key, int):
            raise TypeError(f"register must be a name or an address, not {key!r}")
        try:
            return self._by_address[key]
        except KeyError:
            raise KeyError(f"no register at address {key:#04x}") from None

    def find(self, address: int) -> Register | None:
        """The register at ``address``, or ``None`` when the address is unmapped."""
        return self._by_address.get(address)


def _check_widths(params: TopParams) -> None:
    """Every register must fit the 32-bit data bus; say which parameter does not."""
    limits = [
        ("edc.stats_bits", params.edc.stats_bits),
        ("tvc.ratio_bits", params.tvc.ratio_bits),
        ("tvc.cycle_bits", params.tvc.cycle_bits),
        ("gtsu.ranks", params.gtsu.ranks),
    ]
    for name, value in limits:
        if value > DATA_BITS:
            raise ValueError(
                f"{name} must be at most {DATA_BITS} to fit the register bus, not {value!r}"
            )


def _default_masks(ranks: int) -> tuple[int, int]:
    # The GTSU's reset masks (docs/spec-decisions.md): the low half DLM, the high half TLM.
    dlm = (1 << (ranks // 2)) - 1
    return dlm, ((1 << ranks) - 1) & ~dlm


def register_map(params: TopParams | None = None) -> RegisterMap:
    """The register map of the controller top built with ``params`` (defaults when ``None``).

    Raises ``ValueError`` when a block field is wider than the 32-bit data bus.
    """
    params = TopParams() if params is None else params
    if not isinstance(params, TopParams):
        raise TypeError(f"params must be a TopParams, not {params!r}")
    _check_widths(params)
    edc, tvc, gtsu, queues = params.edc, params.tvc, params.gtsu, params.queues
    dlm, tlm = _default_masks(gtsu.ranks)
    status_reset = 1 << STATUS_BITS["gtsu_ready"][0]  # IDLE, ready, not gating, TVC idle

    def level_bits(depth: int) -> int:
        return depth.bit_length()  # range(depth + 1)

    regs = [
        Register("ID", 0x00, 32, "RO", ID_VALUE, "top", 'Identification: "AHSD" in ASCII.'),
        Register(
            "VERSION",
            0x01,
            32,
            "RO",
            VERSION_VALUE,
            "top",
            "Register map version: major in bits 31-16, minor in bits 15-0.",
        ),
        Register(
            "ERROR",
            0x02,
            len(ERROR_BITS),
            "RO",
            0,
            "top",
            "Sticky error flags: bit 0 EDC protocol error, bit 1 TVC protocol error, "
            "bit 2 GTSU mask overlap (config_error). Cleared by reset or SOFT_RESET.",
        ),
        Register(
            "STATUS",
            0x03,
            6,
            "RO",
            status_reset,
            "top",
            "Bits 1-0 GTSU task (0 IDLE, 1 DRAFT, 2 PREVERIFY), bit 2 GTSU ready, "
            "bit 3 GTSU gating, bit 4 TVC busy (LEARN or ASK in progress), bit 5 NPU busy.",
        ),
        Register(
            "SOFT_RESET",
            0x04,
            len(SOFT_RESET_BITS),
            "W1P",
            0,
            "top",
            "Write 1 to reset a block to its reset state (tables, registers, counters, "
            "error flags): bit 0 EDC, bit 1 TVC, bit 2 GTSU. The queues are not affected.",
        ),
        Register(
            "DRAFT_QUEUE_LEVEL",
            0x08,
            level_bits(queues.draft_depth),
            "RO",
            0,
            "queues.draft_w_level",
            "Fill level of the unverified-draft queue as its PIM-side writer sees it.",
        ),
        Register(
            "FEEDBACK_QUEUE_LEVEL",
            0x09,
            level_bits(queues.feedback_depth),
            "RO",
            0,
            "queues.feedback_r_level",
            "Fill level of the feedback queue as its PIM-side reader sees it.",
        ),
        Register(
            "PREVERIFY_QUEUE_LEVEL",
            0x0A,
            level_bits(queues.preverify_depth),
            "RO",
            0,
            "queues.preverify_r_level",
            "Fill level of the pre-verification queue as its PIM-side reader sees it.",
        ),
        Register(
            "EDC_HMAX",
            0x10,
            16,
            "RW",
            edc.hmax,
            "edc.hmax",
            "Maximum entropy Hmax, UQ4.12 nats; used by events accepted after the write. "
            "Writing 0 sets the EDC error flag and keeps the old value.",
        ),
        Register(
            "EDC_LLR",
            0x11,
            edc.llr_bits,
            "RO",
            0,
            "edc.llr",
            "Leading length register: batches drafted and not yet verified.",
        ),
    ]
    counters = [
        ("DRAFTS", "drafts", "accepted DRAFT events"),
        ("CONTINUES", "continues", "DRAFT decisions to continue drafting"),
        ("SUPPRESSIONS", "suppressions", "DRAFT decisions to stop drafting ahead"),
        ("VERIFIES", "verifies", "accepted VERIFY events"),
        ("ROLLBACKS", "rollbacks", "VERIFY events that rejected a token (rollbacks)"),
    ]
    for offset, (name, member, what) in enumerate(counters):
        regs.append(
            Register(
                f"EDC_{name}",
                0x12 + offset,
                edc.stats_bits,
                "RO",
                0,
                f"edc.{member}",
                f"Count of {what}, saturating.",
            )
        )
    regs += [
        Register(
            "TVC_N_MAX",
            0x20,
            tvc.n_bits,
            "RW",
            tvc.n_max,
            "tvc.n_max",
            "Clamp N_max on the ASK answer; a larger value saturates to the register's maximum. "
            "A write waits (bus ready low) while a LEARN or an ASK is in progress.",
        ),
        Register(
            "TVC_NCR",
            0x21,
            tvc.cycle_bits,
            "RO",
            0,
            "tvc.ncr",
            "NPU current-cycle register: PIM cycles since the last NPU_START, frozen by "
            "NPU_DONE, saturating.",
        ),
        Register(
            "GTSU_DLM_MASK",
            0x30,
            gtsu.ranks,
            "RW",
            dlm,
            "gtsu.dlm_mask",
            "Ranks holding draft-model weights; takes effect at the next switch.",
        ),
        Register(
            "GTSU_TLM_MASK",
            0x31,
            gtsu.ranks,
            "RW",
            tlm,
            "gtsu.tlm_mask",
            "Ranks holding target-model weights; takes effect at the next switch.",
        ),
        Register(
            "GTSU_T_OFF",
            0x32,
            gtsu.timer_bits,
            "RW",
            gtsu.t_off,
            "gtsu.t_off",
            "Cycles between gating off the old ranks and enabling the new ones.",
        ),
        Register(
            "GTSU_T_ON",
            0x33,
            gtsu.timer_bits,
            "RW",
            gtsu.t_on,
            "gtsu.t_on",
            "Cycles between enabling the new ranks and ready.",
        ),
        Register(
            "GTSU_LAST_SWITCH",
            0x34,
            gtsu.timer_bits,
            "RO",
            0,
            "gtsu.last_switch_cycles",
            "Latency in PIM cycles of the last completed switch, saturating.",
        ),
        Register(
            "GTSU_SWITCHES",
            0x35,
            SWITCH_COUNTER_BITS,
            "RO",
            0,
            "gtsu.switches",
            "Completed switches, saturating.",
        ),
        Register(
            "GTSU_DLM_ENABLE",
            0x36,
            gtsu.ranks,
            "RO",
            0,
            "gtsu.dlm_enable",
            "Ranks enabled for the draft model in this cycle.",
        ),
        Register(
            "GTSU_TLM_ENABLE",
            0x37,
            gtsu.ranks,
            "RO",
            0,
            "gtsu.tlm_enable",
            "Ranks enabled for the target model in this cycle.",
        ),
    ]
    learned = {
        "nvct": "NPU cycles per KV-cache token",
        "pdct": "PIM cycles per drafted token",
        "pvct": "PIM cycles per pre-verified token",
    }
    for table, base in TABLE_BASES.items():
        for index in range(tvc.depth):
            regs.append(
                Register(
                    f"TVC_{table.upper()}_{index}",
                    base + index,
                    tvc.ratio_bits,
                    "RW",
                    0,
                    f"tvc.{table}[{index}]",
                    f"{table.upper()} entry {index} ({learned[table]}, "
                    f"UQ{tvc.ratio_bits - tvc.frac_bits}.{tvc.frac_bits}; 0 newest). "
                    "A write waits while a LEARN or an ASK is in progress.",
                )
            )
    return RegisterMap(params, regs)
