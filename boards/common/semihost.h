/* semihost.h - minimal Arm semihosting layer for mcutorch board firmware.
 *
 * Semihosting lets firmware running under QEMU (or a debugger) use the host:
 * print text, read and write host files, and exit with a status code.  Every
 * call is a `bkpt 0xAB` with an operation number in r0 and an argument in r1.
 * Only the handful of operations mcutorch needs are wrapped here; no newlib
 * stdio is involved, so this costs a few hundred bytes of code.
 *
 * Paths are resolved by the host relative to the emulator's working
 * directory (mcutorch.boards.run_elf chooses it).
 */
#ifndef MT_SEMIHOST_H
#define MT_SEMIHOST_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* File open modes (semihosting SYS_OPEN mode numbers, ISO C fopen names). */
#define MT_SH_MODE_RB  1 /* "rb": read, binary          */
#define MT_SH_MODE_RPB 3 /* "r+b": read and write, binary */
#define MT_SH_MODE_WB  5 /* "wb": create/truncate, binary */
#define MT_SH_MODE_AB  9 /* "ab": append, binary        */

/* Raw call: op in r0, arg in r1; returns r0. */
int32_t mt_sh_call(int32_t op, const void *arg);

/* Print a NUL-terminated string on the semihosting console (SYS_WRITE0). */
void mt_sh_write0(const char *s);

/* Open a host file; returns a handle >= 0, or -1 on failure. */
int32_t mt_sh_open(const char *path, int32_t mode);
/* Close a handle; returns 0 on success. */
int32_t mt_sh_close(int32_t fd);
/* Read up to n bytes; returns the number of bytes read (0 at end of file),
 * or -1 on error. */
int32_t mt_sh_read(int32_t fd, void *buf, size_t n);
/* Write n bytes; returns 0 on success, -1 if not everything was written. */
int32_t mt_sh_write(int32_t fd, const void *buf, size_t n);
/* Move to byte `pos` of an open file (SYS_SEEK); returns 0 on success. */
int32_t mt_sh_seek(int32_t fd, uint32_t pos);
/* Length of an open file in bytes, or -1. */
int32_t mt_sh_flen(int32_t fd);
/* Copy the command line (kernel path + QEMU -append text) into buf (NUL
 * terminated); returns its length or -1. */
int32_t mt_sh_cmdline(char *buf, size_t n);

/* Stop the emulator with an exit status (SYS_EXIT_EXTENDED). */
void mt_sh_exit(int32_t status) __attribute__((noreturn));

/* Tiny integer formatting, no printf: each writes into buf (>= 24 bytes for
 * decimal, >= 11 for hex), NUL terminates, and returns buf. */
char *mt_fmt_u64(char *buf, uint64_t v);
char *mt_fmt_i32(char *buf, int32_t v);
char *mt_fmt_hex32(char *buf, uint32_t v); /* "0x" + 8 hex digits */

/* Convenience printers on the console. */
void mt_print_u64(uint64_t v);
void mt_print_i32(int32_t v);
void mt_print_hex32(uint32_t v);

#ifdef __cplusplus
}
#endif

#endif /* MT_SEMIHOST_H */
