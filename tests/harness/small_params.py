"""The reduced parameter set of each block that the formal tier proves properties at.

The cocotb tier runs each of these as well (beside the defaults), and the mutation
campaigns (``tests/mutation/run.py``) mutate the block at exactly this set, so that one
mutant is the same change to the same netlist in both tiers. Narrow widths and shallow
tables keep the solvers quick and bring saturations and full states within a few steps;
the logic is the same as at the defaults.
"""

from __future__ import annotations

from ahasd.params import AAUParams, EDCParams, GTSUParams, QueueParams, TVCParams

#: 4 ranks, 2-bit waits (0..3 cycles), and a 3-bit switch counter (GTSU's ``counter_bits``,
#: not a ``GTSUParams`` field), so the counter saturates after 7 switches.
GTSU = GTSUParams(ranks=4, timer_bits=2, t_off=1, t_on=2)
GTSU_COUNTER_BITS = 3

#: Two-entry tables (so the sums and the ``log2(depth)`` shift are exercised), F = 2, 8-bit
#: cycle counts (NCR saturates at 255), 4-bit lengths, 3-bit answers.
TVC = TVCParams(depth=2, frac_bits=2, cycle_bits=8, length_bits=4, ratio_bits=8, n_bits=3, n_max=5)

#: 2-bit LLR (three batches in flight), two-entry histories (a 256-entry PHT), 2-bit PHT
#: and event counters, 2-bit lengths.
EDC = EDCParams(counter_bits=2, llr_bits=2, history_len=2, length_bits=2, stats_bits=2)

#: Queues of 4, 2 and 4 entries, narrow fields, 2-bit epochs.
QUEUES = QueueParams(
    draft_depth=4,
    feedback_depth=2,
    preverify_depth=4,
    batch_id_bits=3,
    epoch_bits=2,
    pos_bits=4,
    length_bits=2,
)

#: Vectors of at most 8 elements (narrow accumulators), 3-bit tables.
AAU = AAUParams(max_length=8, exp_table_bits=3, ln_table_bits=3)
