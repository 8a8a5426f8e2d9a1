/* checksum.c - mcutorch board test: host file in, transform, host file out.
 *
 * usage: checksum <in> <out> <status>
 * Reads <in> through semihosting, writes to <out>
 *     out[i] = in[i] ^ (uint8_t)(i * 131 + 7)      for every input byte, then
 *     CRC-32 of the input, byte sum, byte sum / 2   (three little-endian uint32)
 * prints "mt_ticks <n>" for the work and returns <status>.
 * The byte sum takes the ISA's own path (MVE, DSP or scalar) and the halving
 * goes through the FPU when the build has one, so a wrong -mcpu/CPACR set-up
 * shows.  It also checks that start-up copied .data and cleared .bss.
 */
#include <string.h>

#include "board.h"

#if defined(__ARM_FEATURE_MVE)
#include <arm_mve.h>
#elif defined(__ARM_FEATURE_DSP)
#include <arm_acle.h>
#endif

#define MAX_IN 65536

static uint8_t mt_buf[MAX_IN + 12]; /* .bss */
static uint32_t mt_crc_table[256]; /* .bss, filled at run time */
static uint32_t mt_data_check = 0x1234ABCDu; /* .data */

static uint32_t parse_u32(const char *s)
{
  uint32_t v = 0;
  while (*s >= '0' && *s <= '9') {
    v = v * 10u + (uint32_t)(*s++ - '0');
  }
  return v;
}

static uint32_t crc32(const uint8_t *p, uint32_t n)
{
  for (uint32_t i = 0; i < 256; i++) {
    uint32_t c = i;
    for (int k = 0; k < 8; k++) {
      c = (c & 1u) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    }
    mt_crc_table[i] = c;
  }
  uint32_t crc = 0xFFFFFFFFu;
  for (uint32_t i = 0; i < n; i++) {
    crc = mt_crc_table[(crc ^ p[i]) & 0xFFu] ^ (crc >> 8);
  }
  return crc ^ 0xFFFFFFFFu;
}

static uint32_t byte_sum(const uint8_t *p, uint32_t n)
{
  uint32_t acc = 0;
#if defined(__ARM_FEATURE_MVE)
  while (n > 0) { /* 16 lanes, tail-predicated */
    mve_pred16_t m = vctp8q(n);
    acc = vaddvaq_p_u8(acc, vldrbq_z_u8(p, m), m);
    p += 16;
    n = n > 16 ? n - 16 : 0;
  }
#elif defined(__ARM_FEATURE_DSP)
  for (; n >= 4; n -= 4, p += 4) { /* sum of |b - 0| over 4 bytes */
    uint32_t w;
    memcpy(&w, p, 4);
    acc = __usada8(w, 0, acc);
  }
  while (n-- > 0) {
    acc += *p++;
  }
#else
  while (n-- > 0) {
    acc += *p++;
  }
#endif
  return acc;
}

static uint32_t half(uint32_t v)
{
#if defined(__ARM_FP)
  volatile float f = (float)v; /* exact below 2^24 */
  return (uint32_t)(f * 0.5f);
#else
  return v >> 1;
#endif
}

static void put_u32(uint8_t *p, uint32_t v)
{
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
  p[2] = (uint8_t)(v >> 16);
  p[3] = (uint8_t)(v >> 24);
}

int main(int argc, char **argv)
{
  if (argc < 4) {
    mt_sh_write0("usage: checksum <in> <out> <status>\n");
    return 2;
  }
  if (mt_data_check != 0x1234ABCDu || mt_crc_table[17] != 0 || mt_buf[MAX_IN - 1] != 0) {
    mt_sh_write0("start-up did not initialise .data/.bss\n");
    return 3;
  }
  int32_t fd = mt_sh_open(argv[1], MT_SH_MODE_RB);
  if (fd < 0) {
    mt_sh_write0("cannot open input\n");
    return 4;
  }
  int32_t len = mt_sh_flen(fd);
  if (len < 0 || len > MAX_IN || mt_sh_read(fd, mt_buf, (size_t)len) != len) {
    mt_sh_write0("cannot read input\n");
    return 5;
  }
  mt_sh_close(fd);
  uint32_t n = (uint32_t)len;

  mt_counter_start();
  uint32_t crc = crc32(mt_buf, n);
  uint32_t sum = byte_sum(mt_buf, n);
  for (uint32_t i = 0; i < n; i++) {
    mt_buf[i] ^= (uint8_t)(i * 131u + 7u);
  }
  put_u32(mt_buf + n, crc);
  put_u32(mt_buf + n + 4, sum);
  put_u32(mt_buf + n + 8, half(sum));
  mt_counter_report(0, mt_counter_read());

  fd = mt_sh_open(argv[2], MT_SH_MODE_WB);
  if (fd < 0 || mt_sh_write(fd, mt_buf, n + 12) != 0 || mt_sh_close(fd) != 0) {
    mt_sh_write0("cannot write output\n");
    return 6;
  }
  mt_sh_write0("checksum: ");
  mt_print_u64(n);
  mt_sh_write0(" bytes, crc ");
  mt_print_hex32(crc);
  mt_sh_write0("\n");
  return (int)parse_u32(argv[3]);
}
