/*
 * mt_run.h - what the runner (mt_run.c) needs from the machine it runs on.
 *
 * Two implementations: mt_run_host.c (a POSIX host: stdio, heap buffers of exactly the
 * requested size so that AddressSanitizer sees every overrun) and mt_run_board.c (board
 * firmware: semihosting files and console, static buffers placed in the board's memory
 * regions, SysTick instruction counts).
 *
 * Usage of the runner (argv; on a board, the QEMU semihosting command line):
 *
 *   mt_run PROGRAM [INPUT ...] [-o OUTPUT ...] [-n COUNT] [-p STATE] [-r K]
 *                               load, run COUNT inferences (default 1): INPUT k holds COUNT
 *                               sets of input k's raw bytes back to back, inference j reads
 *                               set j; OUTPUT k (default outK.bin) gets the COUNT outputs the
 *                               same way. A stateful program keeps its persistent tensors
 *                               across the COUNT inferences; -p STATE reads them from the file
 *                               STATE (exactly mt_persistent_size bytes) before the first
 *                               and writes them back after the last; -r K resets them
 *                               (mt_reset) before inference K, 2K, ...
 *   mt_run --check PROGRAM ...  validate each file only (no kernels needed)
 *   mt_run --status-names       print "code name" for every status
 *
 * It prints "mt_status <code> <name>" after a run ("mt_status <code> <name> <path>" per file
 * with --check), "mt_ticks <n>" per inference (instructions of mt_invoke, boards only) and, in
 * MT_PROFILE builds, "mt_ticks op<i> <n>" per op before it. Exit status: the run's mt_status
 * (0 = ok, a load error 1..63, a runtime status 64..), MT_RUN_EXIT_IO when a file could not be
 * read or written, MT_RUN_EXIT_USAGE for a bad command line.
 */
#ifndef MT_RUN_H
#define MT_RUN_H

#include <stddef.h>
#include <stdint.h>

#define MT_RUN_EXIT_IO    100
#define MT_RUN_EXIT_USAGE 101

/* Read the whole program file into a 16-byte aligned buffer; NULL on failure. The buffer
 * stays valid until the next call. */
void *mt_run_read_program(const char *path, size_t *size);
/* Read record `index` (bytes [index * size, (index + 1) * size)) of a file that holds exactly
 * `count` records of `size` bytes into buf; 0 on success, -1 otherwise (also when the file
 * has another length). */
int mt_run_read(const char *path, void *buf, size_t size, uint32_t index, uint32_t count);
/* Record `index` of a file: index 0 creates or replaces the file with `size` bytes, a later
 * index appends them; 0 on success, -1 otherwise. */
int mt_run_write(const char *path, const void *buf, size_t size, uint32_t index);
/* Memory for the state buffer and for the arena of region `region` (name as in the program,
 * e.g. "SRAM"); NULL when it cannot be provided. */
void *mt_run_state(size_t size);
void *mt_run_arena(uint32_t region, const char *name, size_t size, size_t alignment);
/* The persistent buffer of a stateful program (16-aligned); NULL when it cannot be provided. */
void *mt_run_persistent(size_t size);
/* Give back everything the calls above handed out. */
void mt_run_release(void);
/* Console text, no newline added. */
void mt_run_print(const char *text);
/* Count the instructions of what runs between start and stop, print "mt_ticks <n>" (no-op
 * on the host). */
void mt_run_counter_start(void);
void mt_run_counter_stop(void);

#endif /* MT_RUN_H */
