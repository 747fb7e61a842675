// A small SoC in simulation: PicoRV32 (RV32I, cycle counter), 16 KiB of RAM at 0 holding the
// firmware, the AHASD controller's AXI4-Lite port at 0x40000000 (4 KiB) through a bridge from
// the core's memory interface, and a few words of the SoC itself:
//
//   0x10000000  console (write): console_valid/console_data for one cycle
//   0x10000004  exit (write): the firmware's result; done rises
//   0x10000008  mailbox (read): the PIM side's message with the doorbell (the TVC's answer)
//   0x1000000C  order (write): a pre-verification order into the controller's queue (the
//               store waits until the queue takes it)
//   0x10000010  stop (read): nonzero once the testbench ends the run
//
// The controller's irq is the core's interrupt 3 (level, not latched: high until the handler
// clears the causes); the doorbell is interrupt 4 (latched: the PIM side pulses it).
// firmware/start.S has the entry. One clock: the controller's pim, npu and cpu domains all run
// on it. Every event and queue port of the controller but the pre-verification queue's writer
// (the CPU's, through the order word) is a port of the SoC, for the testbench's NPU and PIM
// sides: firmware/build.py writes them where the markers are, from the controller's ports.
// The firmware is read at time zero from the file named by the plusarg +firmware=PATH.
`timescale 1ns / 1ps
module ahasd_soc(clk, rst, done, result, doorbell, mailbox, stop, console_valid,
    console_data/*PORTS*/);
    input clk;
    input rst;
    output reg done;
    output reg [31:0] result;
    input doorbell;
    input [31:0] mailbox;
    input stop;
    output reg console_valid;
    output reg [31:0] console_data;
/*DECLARATIONS*/
    wire        mem_valid, mem_instr;
    reg         mem_ready;
    wire [31:0] mem_addr, mem_wdata;
    wire [3:0]  mem_wstrb;
    reg  [31:0] mem_rdata;

    wire irq;
    picorv32 #(.ENABLE_COUNTERS(1), .ENABLE_IRQ(1), .ENABLE_IRQ_QREGS(0), .LATCHED_IRQ(~32'h8),
               .PROGADDR_RESET(32'h0), .PROGADDR_IRQ(32'h10), .STACKADDR(32'h4000)) cpu (
        .clk(clk), .resetn(!rst), .mem_valid(mem_valid), .mem_instr(mem_instr),
        .mem_ready(mem_ready), .mem_addr(mem_addr), .mem_wdata(mem_wdata),
        .mem_wstrb(mem_wstrb), .mem_rdata(mem_rdata), .pcpi_wr(1'b0), .pcpi_rd(32'h0),
        .pcpi_wait(1'b0), .pcpi_ready(1'b0), .irq({27'h0, doorbell, irq, 3'h0}));

    reg [31:0] ram [0:4095];
    reg [8*512-1:0] firmware;
    integer i;
    initial begin
        for (i = 0; i < 4096; i = i + 1) ram[i] = 32'h0;
        if ($value$plusargs("firmware=%s", firmware)) $readmemh(firmware, ram);
    end

    // The bridge: one AXI4-Lite transaction per access of the core to the controller.
    reg        awvalid, wvalid, arvalid, bready, rready;
    wire       awready, wready, arready, bvalid, rvalid;
    wire [31:0] rdata;
    wire [1:0] bresp, rresp;
    reg        busy;
    wire       ahasd = mem_addr[31:12] == 20'h40000;
    // The order word: the store is held until the pre-verification queue takes the order.
    reg        order_valid;
    reg [31:0] order_payload;
    wire       order_ready;

    always @(posedge clk) begin
        mem_ready <= 1'b0;
        console_valid <= 1'b0;
        if (rst) begin
            awvalid <= 0; wvalid <= 0; arvalid <= 0; bready <= 0; rready <= 0; busy <= 0;
            done <= 0; result <= 0; order_valid <= 0; order_payload <= 0; console_data <= 0;
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
                if (|mem_wstrb) begin console_valid <= 1; console_data <= mem_wdata; end
                mem_ready <= 1;
            end else if (mem_addr == 32'h10000004) begin
                if (|mem_wstrb) begin done <= 1; result <= mem_wdata; end
                mem_ready <= 1;
            end else if (mem_addr == 32'h10000008) begin
                mem_rdata <= mailbox;
                mem_ready <= 1;
            end else if (mem_addr == 32'h1000000C && |mem_wstrb) begin
                if (!order_valid) begin
                    order_valid <= 1;
                    order_payload <= mem_wdata;
                end else if (order_ready) begin
                    order_valid <= 0;
                    mem_ready <= 1;
                end
            end else if (mem_addr == 32'h10000010) begin
                mem_rdata <= {31'h0, stop};
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
        .preverify_w__valid(order_valid), .preverify_w__ready(order_ready),
        .irq(irq)/*CONNECTIONS*/
    );
endmodule
