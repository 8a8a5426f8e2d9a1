/*
 * rk_io.h - what run_kernel.c needs from its platform: files, console, memory.
 *
 * rk_io_host.c implements it with stdio and malloc (gcc + sanitizers on the host: every buffer
 * is its own allocation, so ASan sees any read or write past a tensor); rk_io_board.c with Arm
 * semihosting (boards/common/semihost.h) and a static arena (QEMU boards).
 */
#ifndef RK_IO_H
#define RK_IO_H

#include <stdint.h>

int32_t rk_open(const char *path); /* a handle >= 0, or -1 */
int32_t rk_read(int32_t fd, void *buf, uint32_t n); /* bytes read: < n at end of file, -1 */
void rk_close(int32_t fd);
void rk_print(const char *s); /* console text, no newline added */

void *rk_alloc(uint32_t n); /* 16-aligned, NULL when out of memory */
void rk_release_all(void); /* returns every rk_alloc buffer (between cases) */

#endif /* RK_IO_H */
