"""The device side: everything that builds or runs C.

    paths.py      where the C runtime, kernels, board files and QEMU plugin sources live
    boards.py     emulated boards (data): memory maps, which board runs which target
    toolchain.py  arm-none-eabi-gcc builds, generated linker scripts, ELF sizes
    qemu.py       QEMU runs: command line, exit codes, faults, SysTick counts; UART runs
    crt.py        the C runtime on the host (gcc, sanitizers) and firmware defines
    firmware.py   semihosting test firmware: build and run a program on a board
    exact.py      exact instruction counts with mcutorch's QEMU TCG plugin
    export_c.py   the C export of a program for a user's project (named: several per firmware)
    standalone.py deployable firmware: the export + a main, console on the UART, no semihosting

Nothing here imports torch: a program file is all these modules need.
"""
