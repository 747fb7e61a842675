// A small SoC in simulation: PicoRV32 (RV32I, cycle counter), 16 KiB of RAM at 0 holding the
// firmware, the AHASD controller's AXI4-Lite port at 0x40000000 (4 KiB) through a bridge from
// the core's memory interface, and a console word at 0x10000000 (each write printed) and an
// exit word at 0x10000004 (the firmware's result; the simulation ends); the controller's
// irq is the core's interrupt 3 (firmware/start.S has the entry). One clock: the
// controller's pim, npu and cpu domains all run on it. The controller's event and queue
// inputs are tied off (ahasd_tieoff.vh, generated from the top's ports): the firmware's
// side alone is exercised.
`timescale 1ns / 1ps
module ahasd_soc (input clk, input rst, output reg done, output reg [31:0] result);
    wire        mem_valid, mem_instr;
    reg         mem_ready;
    wire [31:0] mem_addr, mem_wdata;
    wire [3:0]  mem_wstrb;
    reg  [31:0] mem_rdata;

    wire irq;
    // The controller's irq is a level (high until its causes are cleared): not latched.
    picorv32 #(.ENABLE_COUNTERS(1), .ENABLE_IRQ(1), .ENABLE_IRQ_QREGS(0), .LATCHED_IRQ(~32'h8),
               .PROGADDR_RESET(32'h0), .PROGADDR_IRQ(32'h10), .STACKADDR(32'h4000)) cpu (
        .clk(clk), .resetn(!rst), .mem_valid(mem_valid), .mem_instr(mem_instr),
        .mem_ready(mem_ready), .mem_addr(mem_addr), .mem_wdata(mem_wdata),
        .mem_wstrb(mem_wstrb), .mem_rdata(mem_rdata), .pcpi_wr(1'b0), .pcpi_rd(32'h0),
        .pcpi_wait(1'b0), .pcpi_ready(1'b0), .irq({28'h0, irq, 3'h0}));

    // The CPU's cost of an event: cycles from the rise of irq to the AW handshake of the
    // write that answers it (the clear of IRQ_STATUS), one line per interrupt.
    integer now = 0, irq_rose = -1;
    reg irq_before = 0;
    always @(posedge clk) begin
        now <= now + 1;
        irq_before <= irq;
        if (irq && !irq_before) irq_rose <= now;
        if (awvalid && awready && mem_addr[11:0] == 12'h014 && irq_rose >= 0) begin
            $display("FW irq to answer %0d cycles", now - irq_rose);
            irq_rose <= -1;
        end
    end

    reg [31:0] ram [0:4095];
    integer i;
    initial begin
        for (i = 0; i < 4096; i = i + 1) ram[i] = 32'h0;
        $readmemh(`FIRMWARE_HEX, ram);
    end

    // The bridge: one AXI4-Lite transaction per access of the core to the controller.
    reg        awvalid, wvalid, arvalid, bready, rready;
    wire       awready, wready, arready, bvalid, rvalid;
    wire [31:0] rdata;
    wire [1:0] bresp, rresp;
    reg        busy;
    wire       ahasd = mem_addr[31:12] == 20'h40000;

    always @(posedge clk) begin
        mem_ready <= 1'b0;
        if (rst) begin
            awvalid <= 0; wvalid <= 0; arvalid <= 0; bready <= 0; rready <= 0; busy <= 0;
            done <= 0; result <= 0;
        end else if (mem_valid && !mem_ready) begin
            if (ahasd) begin
                if (!busy) begin
                    busy <= 1;
                    if (|mem_wstrb) begin awvalid <= 1; wvalid <= 1; bready <= 1; end
                    else begin arvalid <= 1; rready <= 1; end
                end else begin
                    if (awvalid && awready) awvalid <= 0;
                    if (wvalid && wready) wvalid <= 0;
                    if (arvalid && arready) arvalid <= 0;
                    if (bready && bvalid) begin bready <= 0; busy <= 0; mem_ready <= 1; end
                    if (rready && rvalid) begin
                        rready <= 0; busy <= 0; mem_ready <= 1; mem_rdata <= rdata;
                    end
                end
            end else if (mem_addr == 32'h10000000) begin
                if (|mem_wstrb) $display("FW console %0d", mem_wdata);
                mem_ready <= 1;
            end else if (mem_addr == 32'h10000004) begin
                if (|mem_wstrb) begin done <= 1; result <= mem_wdata; end
                mem_ready <= 1;
            end else begin
                mem_ready <= 1;
                mem_rdata <= ram[mem_addr[13:2]];
                if (mem_wstrb[0]) ram[mem_addr[13:2]][7:0] <= mem_wdata[7:0];
                if (mem_wstrb[1]) ram[mem_addr[13:2]][15:8] <= mem_wdata[15:8];
                if (mem_wstrb[2]) ram[mem_addr[13:2]][23:16] <= mem_wdata[23:16];
                if (mem_wstrb[3]) ram[mem_addr[13:2]][31:24] <= mem_wdata[31:24];
            end
        end
    end

    ahasd_top controller (
        .pim_clk(clk), .pim_rst(rst), .npu_clk(clk), .npu_rst(rst), .cpu_clk(clk), .cpu_rst(rst),
        .s_axi__awvalid(awvalid), .s_axi__awaddr(mem_addr[11:0]), .s_axi__awprot(3'b0),
        .s_axi__awready(awready),
        .s_axi__wvalid(wvalid), .s_axi__wdata(mem_wdata), .s_axi__wstrb(mem_wstrb),
        .s_axi__wready(wready),
        .s_axi__bvalid(bvalid), .s_axi__bready(bready), .s_axi__bresp(bresp),
        .s_axi__arvalid(arvalid), .s_axi__araddr(mem_addr[11:0]), .s_axi__arprot(3'b0),
        .s_axi__arready(arready),
        .s_axi__rvalid(rvalid), .s_axi__rready(rready), .s_axi__rdata(rdata),
        .s_axi__rresp(rresp),
        .irq(irq),
`include "ahasd_tieoff.vh"
    );
endmodule

module tb;
    reg clk = 0, rst = 1;
    wire done;
    wire [31:0] result;
    integer cycle = 0;
    ahasd_soc soc (.clk(clk), .rst(rst), .done(done), .result(result));
    always #5 clk = !clk;
    always @(posedge clk) begin
        cycle <= cycle + 1;
        if (cycle == 8) rst <= 0;
        if (done) begin
            $display("FW result %0d after %0d cycles", result, cycle);
            $finish;
        end
        if (cycle == `MAX_CYCLES) begin
            $display("FW timeout after %0d cycles", cycle);
            $finish;
        end
    end
endmodule
