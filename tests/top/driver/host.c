/* Host run of ahasd_driver.h on a fake register block (tests/top/test_driver.py).
 *
 * Every access goes through the MMIO hooks, which log it ("R offset value" / "W offset
 * value", one line each) and keep a small model of the registers the driver's sequences
 * depend on: the ID and VERSION constants, IRQ_STATUS write-one-to-clear, and the two GTSU
 * masks, whose overlap after any write is logged ("OVERLAP"). The test reads the log. */
#include <stdio.h>
#include <stdlib.h>

#define AHASD_MMIO_HOOKS
#include "ahasd_driver.h"

#define WORDS 1024u
static uint32_t words[WORDS];
static const uintptr_t BASE = 0x40000000u;

static uint32_t word_index(uintptr_t address)
{
    uintptr_t offset = address - BASE;
    if (address < BASE || offset >= 4u * WORDS || (offset & 3u) != 0u) {
        printf("BAD %lx\n", (unsigned long)address);
        exit(1);
    }
    return (uint32_t)(offset / 4u);
}

uint32_t ahasd_mmio_read32(uintptr_t address)
{
    uint32_t value = words[word_index(address)];
    printf("R %03lx %08lx\n", (unsigned long)(address - BASE), (unsigned long)value);
    return value;
}

void ahasd_mmio_write32(uintptr_t address, uint32_t value)
{
    uint32_t index = word_index(address);
    printf("W %03lx %08lx\n", (unsigned long)(address - BASE), (unsigned long)value);
    if (index * 4u == AHASD_IRQ_STATUS_OFFSET)
        words[index] &= ~value;
    else
        words[index] = value;
    if ((words[AHASD_GTSU_DLM_MASK_OFFSET / 4u] & words[AHASD_GTSU_TLM_MASK_OFFSET / 4u]) != 0u)
        printf("OVERLAP\n");
}

static void mark(const char *what)
{
    printf("# %s\n", what);
}

int main(int argc, char **argv)
{
    static const uint64_t nvct[AHASD_TVC_DEPTH] = {0};
    uint64_t pdct[AHASD_TVC_DEPTH], pvct[AHASD_TVC_DEPTH];
    ahasd_config_t config;
    ahasd_irq_t irq;
    uint32_t i;
    (void)argc;
    (void)argv;
    for (i = 0u; i < AHASD_TVC_DEPTH; i++) {
        pdct[i] = ((uint64_t)(0x10u + i) << 32) | (0xA0000000u + i);
        pvct[i] = ((uint64_t)(0x20u + i) << 32) | (0xB0000000u + i);
    }
    words[AHASD_ID_OFFSET / 4u] = AHASD_ID_RESET;
    words[AHASD_VERSION_OFFSET / 4u] = AHASD_VERSION_RESET;
    words[AHASD_GTSU_DLM_MASK_OFFSET / 4u] = AHASD_GTSU_DLM_MASK_RESET;
    words[AHASD_GTSU_TLM_MASK_OFFSET / 4u] = AHASD_GTSU_TLM_MASK_RESET;

    mark("bring_up");
    config.hmax = 40960u;
    config.n_max = 8u;
    config.nvct = nvct;
    config.pdct = pdct;
    config.pvct = pvct;
    /* The reset masks swapped: every rank moves to the other mask. */
    config.dlm_mask = AHASD_GTSU_TLM_MASK_RESET;
    config.tlm_mask = AHASD_GTSU_DLM_MASK_RESET;
    config.t_off = 16u;
    config.t_on = 32u;
    config.irq_enable = AHASD_IRQ_ENABLE_PREVERIFY_MASK | AHASD_IRQ_ENABLE_EDC_ERROR_MASK;
    printf("= %d\n", ahasd_bring_up(BASE, &config));

    mark("masks");
    printf("= %d\n", ahasd_gtsu_set_masks(BASE, 0x0F0Fu, 0xF0F0u));
    printf("= %d\n", ahasd_gtsu_set_masks(BASE, 0xF0F0u, 0x0F0Fu));
    printf("= %d\n", ahasd_gtsu_set_masks(BASE, 0x0003u, 0x0004u));
    mark("masks_refused");
    printf("= %d\n", ahasd_gtsu_set_masks(BASE, 0x0003u, 0x0002u));

    mark("ncr");
    words[AHASD_TVC_NCR_OFFSET / 4u] = 0x89ABCDEFu;
    words[AHASD_TVC_NCR_OFFSET / 4u + 1u] = 0x12u;
    printf("= %llx\n", (unsigned long long)ahasd_tvc_ncr(BASE));

    mark("irq");
    words[AHASD_IRQ_STATUS_OFFSET / 4u] =
        AHASD_IRQ_STATUS_PREVERIFY_MASK | AHASD_IRQ_STATUS_TVC_ERROR_MASK;
    words[AHASD_ERROR_OFFSET / 4u] = AHASD_ERROR_TVC_MASK;
    words[AHASD_PREVERIFY_QUEUE_LEVEL_OFFSET / 4u] = 3u;
    i = ahasd_irq_service(BASE, &irq);
    printf("= %lx %lx %lx %lx %lx\n", (unsigned long)i, (unsigned long)irq.causes,
           (unsigned long)irq.errors, (unsigned long)irq.reset_blocks,
           (unsigned long)irq.preverify_level);

    mark("refused");
    printf("= %d\n", ahasd_edc_configure(BASE, 0u));
    config.tlm_mask |= config.dlm_mask & (0u - config.dlm_mask); /* one rank in both */
    printf("= %d\n", ahasd_bring_up(BASE, &config));
    config.tlm_mask = AHASD_GTSU_DLM_MASK_RESET;
    words[AHASD_ID_OFFSET / 4u] = 0u;
    printf("= %d\n", ahasd_bring_up(BASE, &config));
    mark("end");
    return 0;
}
