/* Reset and interrupt entries of the firmware on the PicoRV32 of firmware/soc.v.
 *
 * Reset (address 0): a stack at the top of the RAM, zeroed .bss, interrupts unmasked, then
 * main(); main's return value is reported as the result (the exit word).
 * Interrupt (address 0x10, PicoRV32's PROGADDR_IRQ; built without q registers, so the core
 * puts the return address in x3 and the pending causes in x4, which GCC never allocates):
 * the caller-saved registers on the stack, irq_handler(pending causes) in C, then retirq. PicoRV32's
 * custom instructions are written as words (its custom_ops.S encodings). */
#define MASKIRQ_ZERO_ZERO .word 0x0600600b  /* maskirq zero, zero: unmask every interrupt */
#define RETIRQ .word 0x0400000b             /* retirq */

    .section .text.start
    .global _start
_start:
    j reset
    .balign 16
irq_entry:                        /* 0x10 */
    addi sp, sp, -64
    sw ra, 0(sp)
    sw t0, 4(sp)
    sw t1, 8(sp)
    sw t2, 12(sp)
    sw a0, 16(sp)
    sw a1, 20(sp)
    sw a2, 24(sp)
    sw a3, 28(sp)
    sw a4, 32(sp)
    sw a5, 36(sp)
    sw a6, 40(sp)
    sw a7, 44(sp)
    sw t3, 48(sp)
    sw t4, 52(sp)
    sw t5, 56(sp)
    sw t6, 60(sp)
    mv a0, tp                     /* x4: the interrupts pending */
    call irq_handler
    lw ra, 0(sp)
    lw t0, 4(sp)
    lw t1, 8(sp)
    lw t2, 12(sp)
    lw a0, 16(sp)
    lw a1, 20(sp)
    lw a2, 24(sp)
    lw a3, 28(sp)
    lw a4, 32(sp)
    lw a5, 36(sp)
    lw a6, 40(sp)
    lw a7, 44(sp)
    lw t3, 48(sp)
    lw t4, 52(sp)
    lw t5, 56(sp)
    lw t6, 60(sp)
    addi sp, sp, 64
    RETIRQ
reset:
    la sp, __stack_top
    la t0, __bss_start
    la t1, __bss_end
1:  bgeu t0, t1, 2f
    sw zero, 0(t0)
    addi t0, t0, 4
    j 1b
2:  MASKIRQ_ZERO_ZERO
    call main
    li t0, 0x10000004
    sw a0, 0(t0)
3:  j 3b
