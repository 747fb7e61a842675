"""cocotb testbench library: how the tests and ``ahasd cosim`` build and drive the Verilog.

Both the cocotb test tier (``tests/``) and the co-simulation (:mod:`ahasd.sim.cosim`) drive
the generated Verilog through these modules, so a port is driven one way everywhere.

:mod:`ahasd.hw.tb.build`
    The Verilator/Icarus build path: convert a component, build it once per parameter set
    (incremental, locked against concurrent builders), run a cocotb module in a simulator
    process and read its results.
:mod:`ahasd.hw.tb.clocking`
    The clocking discipline (drive after the falling edge, sample in ``ReadOnly``), clock
    start-up, reset, a cycle counter for agents that count their clock's cycles, and the
    domain loop that runs every agent of one clock in one coroutine.
:mod:`ahasd.hw.tb.pins`
    Integer reads and writes of the design's signals without cocotb's ``LogicArray``
    (about ten times cheaper than ``handle.value``).
:mod:`ahasd.hw.tb.streams`
    Stream ports (``x__valid/ready/payload``): packing and unpacking payloads through a
    ``data.StructLayout`` (and nested struct/union layouts), cycle-level drive and sample
    of a port, whole handshakes as coroutines, and free-running source and sink drivers.
:mod:`ahasd.hw.tb.top`
    The controller top (:class:`ahasd.hw.top.ControllerTop`): its register-bus driver, the
    EDC event/decision, TVC command/answer, GTSU request/output and the three queues' port
    drivers, and the monitors that sample every port of a clock domain in one cycle.
:mod:`ahasd.hw.tb.checker`
    The scoreboard pieces: a bounded error log and an in-order checker that can say what
    is still expected at the end of a test.

The modules that touch the simulator import cocotb; none of them runs anything on import,
and this package imports none of them, so ``import ahasd.hw.tb.build`` works in any process.
"""
