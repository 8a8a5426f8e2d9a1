#!/usr/bin/env bash
# Installs the Debian packages mcutorch's C builds and emulated boards need, when missing.
set -euo pipefail
need=()
command -v arm-none-eabi-gcc >/dev/null || need+=(gcc-arm-none-eabi libnewlib-arm-none-eabi)
command -v qemu-system-arm >/dev/null || need+=(qemu-system-arm)
command -v clang >/dev/null || need+=(clang)
# CMake and make: export-c's projects (tests link two exported models with CMake)
command -v cmake >/dev/null || need+=(cmake)
command -v make >/dev/null || need+=(make)
# the C style check (.clang-format, tests/py/test_c_guards.py)
command -v clang-format >/dev/null || need+=(clang-format)
# libFuzzer's runtime (clang -fsanitize=fuzzer) for the loader fuzzing test
ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1 \
  || need+=(libclang-rt-14-dev)
# 32-bit host builds of the fuzzers (clang -m32: Cortex-M's 32-bit size_t): i386 libc, libgcc
# and libstdc++ (libFuzzer is C++); clang's i386 libFuzzer comes with libclang-rt-14-dev
[ -e /usr/lib32/crt1.o ] || need+=(gcc-multilib)
ls /usr/lib/gcc/x86_64-linux-gnu/*/32/libstdc++.so >/dev/null 2>&1 || need+=(lib32stdc++-12-dev)
[ -e /usr/lib/arm-none-eabi/newlib/libc.a ] || need+=(libnewlib-arm-none-eabi)
# headless Chromium opens `mcutorch analyze --html` pages in tests/py/test_analyze.py
command -v chromium >/dev/null || need+=(chromium)
if [ ${#need[@]} -eq 0 ]; then exit 0; fi
echo "installing ${need[*]} (Debian packages)"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
