/* Firmware of the SoC in simulation (firmware/soc.v): the CPU's side of the controller's
 * protocol, on a RISC-V core (PicoRV32, RV32I), through the C driver alone.
 *
 * 1. Bring-up (ahasd_bring_up), each value read back; every rank moved to the other mask
 *    twice; an EDC error and a GTSU error provoked and served by the interrupt handler.
 * 2. Service until the testbench stops the run (the stop word), every event an interrupt:
 *    - the doorbell (the PIM side's message: the TVC's answer to its ASK after a suppress):
 *      with at least one token to pre-verify, a pre-verification order into the queue
 *      (spec section 1: "if the answer is at least one, the CPU queues a pre-verification
 *      order");
 *    - the controller's irq: ahasd_irq_service (causes read and cleared first, the blocks
 *      that flagged an error soft-reset), then those blocks configured again as at bring-up.
 * 3. ERROR read (0), and main's return value as the result (0 when every check held, else
 *    the number of the first that failed).
 *
 * The console word (0x10000000) carries (code << 24) | value, codes CONSOLE_* below. */
#include <stdint.h>

#include "ahasd_driver.h"

#define AHASD_BASE ((uintptr_t)0x40000000u)
#define CONSOLE (*(volatile uint32_t *)0x10000000u)
#define MAILBOX (*(volatile uint32_t *)0x10000008u)
#define ORDER (*(volatile uint32_t *)0x1000000Cu)
#define STOP (*(volatile uint32_t *)0x10000010u)

/* The core's interrupts (soc.v): the controller's irq, the PIM side's doorbell. */
#define IRQ_CONTROLLER (1u << 3)
#define IRQ_DOORBELL (1u << 4)

/* Console codes (tests/firmware/tb_firmware.py reads them). */
#define CONSOLE_BRING_UP 1u     /* the bring-up's CPU cycles */
#define CONSOLE_READY 2u        /* bring-up checked: serving the protocol */
#define CONSOLE_RECONFIGURED 3u /* the SOFT_RESET bits of the blocks configured again */
#define CONSOLE_ORDERS 4u       /* pre-verification orders written */
#define CONSOLE_SERVED 5u       /* controller interrupts served */
#define CONSOLE_CODE(code, value) (((code) << 24) | (value))

/* The mailbox: the batch id in bits 0-15, the TVC's answer n (tokens) in bits 16-31. An
 * order is the queue entry's bits: the batch id, then the token count above it. */
#define MAILBOX_BATCH_MASK 0xFFFFu
#define MAILBOX_TOKENS_SHIFT 16u
#define ORDER_BATCH_MASK ((1u << AHASD_BATCH_ID_BITS) - 1u)

static const uint64_t nvct[AHASD_TVC_DEPTH] = {0x180u, 0x180u, 0x180u, 0x180u | (1ull << 32)};
static const uint64_t pdct[AHASD_TVC_DEPTH] = {3u << 8, 3u << 8, 3u << 8, 3u << 8};
static const uint64_t pvct[AHASD_TVC_DEPTH] = {4u << 8, 4u << 8, 4u << 8, 4u << 8};

static ahasd_config_t config;

/* What the interrupt handler did, for main to check. */
static volatile uint32_t irq_count;
static volatile uint32_t irq_causes;
static volatile uint32_t irq_reset_blocks;
static volatile uint32_t orders;
static volatile uint32_t reconfigure_failures;
#ifdef AHASD_PLANTED_FAULT
static volatile uint32_t skipped;
#endif

void irq_handler(uint32_t pending);

static uint32_t cycles(void)
{
    uint32_t value;
    __asm__ volatile("rdcycle %0" : "=r"(value));
    return value;
}

/* The blocks a soft reset brought back to their reset values, configured again. Not inlined
 * (nor serve_doorbell): inlined, their registers would be saved in the handler's prologue,
 * before the first access of every interrupt (about 60 cycles more from irq to answer). */
static __attribute__((noinline)) void reconfigure(uint32_t blocks)
{
    if ((blocks & AHASD_SOFT_RESET_EDC_MASK) != 0u &&
        ahasd_edc_configure(AHASD_BASE, config.hmax) != 0)
        reconfigure_failures = reconfigure_failures + 1u;
    if ((blocks & AHASD_SOFT_RESET_TVC_MASK) != 0u &&
        ahasd_tvc_configure(AHASD_BASE, config.n_max, nvct, pdct, pvct) != 0)
        reconfigure_failures = reconfigure_failures + 1u;
    if ((blocks & AHASD_SOFT_RESET_GTSU_MASK) != 0u &&
        (ahasd_gtsu_set_masks(AHASD_BASE, config.dlm_mask, config.tlm_mask) != 0 ||
         ahasd_gtsu_set_timers(AHASD_BASE, config.t_off, config.t_on) != 0))
        reconfigure_failures = reconfigure_failures + 1u;
    CONSOLE = CONSOLE_CODE(CONSOLE_RECONFIGURED, blocks);
}

/* The TVC's answer to the PIM side's ASK: an order when there is a token to pre-verify. */
static __attribute__((noinline)) void serve_doorbell(void)
{
    uint32_t message = MAILBOX;
    uint32_t tokens = message >> MAILBOX_TOKENS_SHIFT;
    if (tokens == 0u)
        return;
#ifdef AHASD_PLANTED_FAULT
    /* The planted fault: the first order is never written. */
    if (skipped == 0u) {
        skipped = 1u;
        return;
    }
#endif
    ORDER = (message & MAILBOX_BATCH_MASK & ORDER_BATCH_MASK) | (tokens << AHASD_BATCH_ID_BITS);
    orders = orders + 1u;
}

/* The core's interrupt entry (start.S) with the pending interrupts: the doorbell first (a
 * pre-verification waits on it), then the controller's causes. */
void irq_handler(uint32_t pending)
{
    if ((pending & IRQ_DOORBELL) != 0u)
        serve_doorbell();
    if ((pending & IRQ_CONTROLLER) != 0u) {
        ahasd_irq_t found;
        irq_causes = ahasd_irq_service(AHASD_BASE, &found);
        irq_reset_blocks = found.reset_blocks;
        irq_count = irq_count + 1u;
        if (found.reset_blocks != 0u)
            reconfigure(found.reset_blocks);
    }
}

/* Wait until the handler has served one more controller interrupt than ``count``. */
static int served_after(uint32_t count)
{
    uint32_t start = cycles();
    while (irq_count == count && cycles() - start < 100000u)
        ;
    return irq_count == count + 1u;
}

int main(void)
{
    uint32_t i, start;

    config.hmax = 40960u;
    config.n_max = 6u;
    config.nvct = nvct;
    config.pdct = pdct;
    config.pvct = pvct;
    config.dlm_mask = 0x00FFu;
    config.tlm_mask = 0xFF00u;
    config.t_off = 4u;
    config.t_on = 8u;
    config.irq_enable = AHASD_IRQ_ENABLE_PREVERIFY_MASK | AHASD_IRQ_ENABLE_EDC_BACKPRESSURE_MASK |
                        AHASD_IRQ_ENABLE_EDC_ERROR_MASK | AHASD_IRQ_ENABLE_TVC_ERROR_MASK |
                        AHASD_IRQ_ENABLE_GTSU_ERROR_MASK;

    start = cycles();
    if (ahasd_bring_up(AHASD_BASE, &config) != 0)
        return 1;
    CONSOLE = CONSOLE_CODE(CONSOLE_BRING_UP, cycles() - start);
    if (ahasd_read32(AHASD_BASE, AHASD_EDC_HMAX_OFFSET) != config.hmax)
        return 2;
    if (ahasd_read32(AHASD_BASE, AHASD_TVC_N_MAX_OFFSET) != config.n_max)
        return 3;
    for (i = 0u; i < AHASD_TVC_DEPTH; i++) {
        if (ahasd_read64(AHASD_BASE, AHASD_TVC_NVCT_OFFSET(i)) != nvct[i] ||
            ahasd_read64(AHASD_BASE, AHASD_TVC_PDCT_OFFSET(i)) != pdct[i] ||
            ahasd_read64(AHASD_BASE, AHASD_TVC_PVCT_OFFSET(i)) != pvct[i])
            return 4;
    }
    if (ahasd_read32(AHASD_BASE, AHASD_IRQ_ENABLE_OFFSET) != config.irq_enable)
        return 5;
    /* Every rank to the other mask, twice: never an overlap. */
    if (ahasd_gtsu_set_masks(AHASD_BASE, 0xFF00u, 0x00FFu) != 0 ||
        ahasd_gtsu_set_masks(AHASD_BASE, 0x0F0Fu, 0xF0F0u) != 0)
        return 6;
    if (ahasd_read32(AHASD_BASE, AHASD_GTSU_DLM_MASK_OFFSET) != 0x0F0Fu ||
        ahasd_read32(AHASD_BASE, AHASD_GTSU_TLM_MASK_OFFSET) != 0xF0F0u)
        return 7;
    if (ahasd_read32(AHASD_BASE, AHASD_ERROR_OFFSET) != 0u ||
        ahasd_read32(AHASD_BASE, AHASD_IRQ_STATUS_OFFSET) != 0u)
        return 8;
    /* An EDC protocol error (Hmax 0, written raw: the driver refuses it): the handler clears
     * the cause, soft-resets the EDC and configures Hmax again. */
    ahasd_write32(AHASD_BASE, AHASD_EDC_HMAX_OFFSET, 0u);
    if (!served_after(0u) || (irq_causes & AHASD_IRQ_STATUS_EDC_ERROR_MASK) == 0u)
        return 9;
    if (irq_reset_blocks != AHASD_SOFT_RESET_EDC_MASK)
        return 10;
    if (ahasd_read32(AHASD_BASE, AHASD_ERROR_OFFSET) != 0u ||
        ahasd_read32(AHASD_BASE, AHASD_EDC_HMAX_OFFSET) != config.hmax ||
        ahasd_read32(AHASD_BASE, AHASD_IRQ_STATUS_OFFSET) != 0u)
        return 11;
    /* A GTSU configuration error (a rank in both masks, written raw): the GTSU is reset and
     * its masks and timers configured again. */
    ahasd_write32(AHASD_BASE, AHASD_GTSU_DLM_MASK_OFFSET, 0xFFFFu);
    if (!served_after(1u) || irq_reset_blocks != AHASD_SOFT_RESET_GTSU_MASK)
        return 12;
    if (ahasd_read32(AHASD_BASE, AHASD_GTSU_DLM_MASK_OFFSET) != config.dlm_mask ||
        ahasd_read32(AHASD_BASE, AHASD_GTSU_TLM_MASK_OFFSET) != config.tlm_mask ||
        ahasd_read32(AHASD_BASE, AHASD_GTSU_T_ON_OFFSET) != config.t_on ||
        ahasd_read32(AHASD_BASE, AHASD_ERROR_OFFSET) != 0u)
        return 13;

    CONSOLE = CONSOLE_CODE(CONSOLE_READY, 0u);
    while (STOP == 0u)
        ;
    CONSOLE = CONSOLE_CODE(CONSOLE_ORDERS, orders);
    CONSOLE = CONSOLE_CODE(CONSOLE_SERVED, irq_count);
    if (reconfigure_failures != 0u)
        return 14;
    if (ahasd_read32(AHASD_BASE, AHASD_ERROR_OFFSET) != 0u)
        return 15;
    return 0;
}
