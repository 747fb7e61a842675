/* Reset entry of the firmware on the PicoRV32 of firmware/soc.v: a stack at the top of the
 * RAM, zeroed .bss, then main(); main's return value is reported as the result. */
    .section .text.start
    .global _start
_start:
    la sp, __stack_top
    la t0, __bss_start
    la t1, __bss_end
1:  bgeu t0, t1, 2f
    sw zero, 0(t0)
    addi t0, t0, 4
    j 1b
2:  call main
    li t0, 0x10000004
    sw a0, 0(t0)
3:  j 3b
