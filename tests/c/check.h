/* check.h - the C tests' CHECK: count a check, print the failed ones (file:line and the
 * condition) and go on; the test ends with g_failed of g_checks. */
#ifndef MT_TEST_CHECK_H
#define MT_TEST_CHECK_H

#include <stdio.h>

static int g_checks, g_failed;

#define CHECK(cond)                                                                                \
  do {                                                                                             \
    g_checks++;                                                                                    \
    if (!(cond)) {                                                                                 \
      printf("%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);                              \
      g_failed++;                                                                                  \
    }                                                                                              \
  } while (0)

#endif /* MT_TEST_CHECK_H */
