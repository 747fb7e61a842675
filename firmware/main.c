/* Firmware of the SoC in simulation (firmware/soc.v): the controller brought up and
 * configured through the C driver alone, on a RISC-V core (PicoRV32, RV32I), each step
 * checked by reading the block back. Reports through the SoC's console word (0x10000000:
 * one value per write, the testbench prints them) and ends with main's return value
 * (0 when every check held, else the number of the first that failed). */
#include <stdint.h>

#include "ahasd_driver.h"

#define AHASD_BASE ((uintptr_t)0x40000000u)
#define CONSOLE (*(volatile uint32_t *)0x10000000u)

/* What the interrupt handler found, for main to check. */
static volatile uint32_t irq_count;
static volatile uint32_t irq_causes;
static volatile uint32_t irq_reset_blocks;

void irq_handler(void);

/* The controller's irq (the core's interrupt 3): served by the driver, which reads and
 * clears the causes first (the answering write the testbench times), then soft-resets a
 * block that flagged an error. */
void irq_handler(void)
{
    ahasd_irq_t found;
    irq_causes = ahasd_irq_service(AHASD_BASE, &found);
    irq_reset_blocks = found.reset_blocks;
    irq_count = irq_count + 1u;
}

static uint32_t cycles(void)
{
    uint32_t value;
    __asm__ volatile("rdcycle %0" : "=r"(value));
    return value;
}

static const uint64_t nvct[AHASD_TVC_DEPTH] = {100u << 8, 110u << 8, 120u << 8, 130u << 8};
static const uint64_t pdct[AHASD_TVC_DEPTH] = {0u, 1u, 2u, 3u};
static const uint64_t pvct[AHASD_TVC_DEPTH] = {
    (200u << 8) | ((uint64_t)0x12u << 32), 201u << 8, 202u << 8, (uint64_t)0xABu << 32};

int main(void)
{
    ahasd_config_t config;
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
    config.irq_enable = AHASD_IRQ_ENABLE_EDC_ERROR_MASK | AHASD_IRQ_ENABLE_GTSU_ERROR_MASK;

    start = cycles();
    if (ahasd_bring_up(AHASD_BASE, &config) != 0)
        return 1;
    CONSOLE = cycles() - start; /* bring-up, in CPU cycles */
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
    /* An EDC protocol error (Hmax 0, written raw: the driver refuses it): the cause rises,
     * irq interrupts the core, the handler clears the cause and soft-resets the EDC, which
     * restores Hmax. */
    start = cycles();
    ahasd_write32(AHASD_BASE, AHASD_EDC_HMAX_OFFSET, 0u);
    while (irq_count == 0u && cycles() - start < 100000u)
        ;
    CONSOLE = cycles() - start; /* the raw write to the handler's return, in CPU cycles */
    if (irq_count != 1u || (irq_causes & AHASD_IRQ_STATUS_EDC_ERROR_MASK) == 0u)
        return 9;
    if (irq_reset_blocks != AHASD_SOFT_RESET_EDC_MASK)
        return 10;
    if (ahasd_read32(AHASD_BASE, AHASD_ERROR_OFFSET) != 0u ||
        ahasd_read32(AHASD_BASE, AHASD_EDC_HMAX_OFFSET) != AHASD_EDC_HMAX_RESET ||
        ahasd_read32(AHASD_BASE, AHASD_IRQ_STATUS_OFFSET) != 0u)
        return 11;
    return 0;
}
