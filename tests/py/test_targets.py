"""Targets and boards without a toolchain: target names, ids, can_run, linker scripts."""

import dataclasses
import doctest
import subprocess
from pathlib import Path

import pytest

from mcutorch.device import boards, qemu, toolchain
import mcutorch.targets as targets
from mcutorch.device.boards import BOARDS, board_for, can_run, get_board
from mcutorch.device.toolchain import linker_script
from mcutorch.errors import TargetError, ToolchainError
from mcutorch.plan import Region
from mcutorch.targets import CPU_IDS, CPUS, ISA_IDS, NPU_IDS, NPUS, parse_target

# cpu -> (arch, isa, gcc flags)
EXPECTED = {
    "cortex-m0": ("armv6-m", "scalar", "-mcpu=cortex-m0 -mthumb -mfloat-abi=soft"),
    "cortex-m0plus": ("armv6-m", "scalar", "-mcpu=cortex-m0plus -mthumb -mfloat-abi=soft"),
    "cortex-m3": ("armv7-m", "scalar", "-mcpu=cortex-m3 -mthumb -mfloat-abi=soft"),
    "cortex-m4": ("armv7e-m", "dsp", "-mcpu=cortex-m4 -mthumb -mfloat-abi=hard"),
    "cortex-m7": ("armv7e-m", "dsp", "-mcpu=cortex-m7 -mthumb -mfloat-abi=hard"),
    "cortex-m23": ("armv8-m.base", "scalar", "-mcpu=cortex-m23 -mthumb -mfloat-abi=soft"),
    "cortex-m33": ("armv8-m.main", "dsp", "-mcpu=cortex-m33 -mthumb -mfloat-abi=hard"),
    "cortex-m35p": ("armv8-m.main", "dsp", "-mcpu=cortex-m35p -mthumb -mfloat-abi=hard"),
    "cortex-m55": ("armv8.1-m.main", "mve", "-mcpu=cortex-m55 -mthumb -mfloat-abi=hard"),
    "cortex-m85": (
        "armv8.1-m.main", "mve", "-march=armv8.1-m.main+mve.fp+fp.dp -mthumb -mfloat-abi=hard",
    ),
}  # fmt: skip

# target -> (isa, gcc flags)
SWITCHED = {
    "cortex-m33+nodsp": ("scalar", "-mcpu=cortex-m33+nodsp -mthumb -mfloat-abi=hard"),
    "cortex-m35p+nodsp": ("scalar", "-mcpu=cortex-m35p+nodsp -mthumb -mfloat-abi=hard"),
    "cortex-m55+nomve": ("dsp", "-mcpu=cortex-m55+nomve -mthumb -mfloat-abi=hard"),
    "cortex-m85+nomve": ("dsp", "-march=armv8.1-m.main+dsp+fp.dp -mthumb -mfloat-abi=hard"),
    "cortex-m4+nofp": ("dsp", "-mcpu=cortex-m4+nofp -mthumb -mfloat-abi=soft"),
    "cortex-m7+nofp": ("dsp", "-mcpu=cortex-m7+nofp -mthumb -mfloat-abi=soft"),
    "cortex-m33+nodsp+nofp": ("scalar", "-mcpu=cortex-m33+nodsp+nofp -mthumb -mfloat-abi=soft"),
}  # fmt: skip


@pytest.mark.parametrize("cpu", sorted(EXPECTED))
def test_every_cpu(cpu):
    t = parse_target(cpu)
    arch, isa, flags = EXPECTED[cpu]
    assert (t.name, t.cpu, t.arch, t.isa) == (cpu, cpu, arch, isa)
    assert " ".join(t.gcc_flags) == flags
    assert t.switches == () and t.npu is None and t.npu_id == 0
    assert t.isa_id == ISA_IDS[isa]
    assert t.float_abi == ("hard" if "-mfloat-abi=hard" in flags else "soft")
    baseline = arch in ("armv6-m", "armv8-m.base")
    assert t.unaligned_faults == baseline
    assert t.has_long_multiply == (not baseline)
    assert t.has_saturation == (not baseline)
    assert t.has_dsp == (isa != "scalar") and t.has_mve == (isa == "mve")


@pytest.mark.parametrize("name", sorted(SWITCHED))
def test_switches(name):
    t = parse_target(name)
    isa, flags = SWITCHED[name]
    assert t.name == name and t.isa == isa
    assert " ".join(t.gcc_flags) == flags


def test_switch_effects_on_features():
    assert "dsp" not in parse_target("m33+nodsp").features
    assert parse_target("m33+nodsp").has_fpu
    m55 = parse_target("m55+nomve")
    assert not m55.has_mve and m55.has_dsp and {"fp", "fp.dp"} <= m55.features
    assert not parse_target("m4+nofp").has_fpu
    assert parse_target("m4+nofp").float_abi == "soft"


def test_ids_are_stable():
    assert ISA_IDS == {"scalar": 0, "dsp": 1, "mve": 2}
    assert CPU_IDS == {
        "cortex-m0": 0, "cortex-m0plus": 1, "cortex-m3": 2, "cortex-m4": 3, "cortex-m7": 4,
        "cortex-m23": 5, "cortex-m33": 6, "cortex-m35p": 7, "cortex-m55": 8, "cortex-m85": 9,
    }  # fmt: skip
    assert NPU_IDS["ethos-u55-32"] == 1 and NPU_IDS["ethos-u85-2048"] == 11
    assert sorted(NPU_IDS.values()) == list(range(12))
    assert parse_target("cortex-m55").cpu_id == 8


@pytest.mark.parametrize(
    "short, canonical",
    [
        ("m0", "cortex-m0"), ("m0plus", "cortex-m0plus"), ("cortex-m0+", "cortex-m0plus"),
        ("cortex-m0++ethos-u55-64", "cortex-m0plus+ethos-u55-64"), ("cm3", "cortex-m3"),
        ("M4", "cortex-m4"), ("m7", "cortex-m7"), ("m23", "cortex-m23"),
        ("m33+nodsp", "cortex-m33+nodsp"), ("m35p", "cortex-m35p"), (" M55 ", "cortex-m55"),
        ("m85+nomve", "cortex-m85+nomve"),
        ("m33+nofp+nodsp", "cortex-m33+nodsp+nofp"),
        ("m55+ethos-u55-128+nomve", "cortex-m55+nomve+ethos-u55-128"),
        ("m55+u65-256", "cortex-m55+ethos-u65-256"),
    ],
)  # fmt: skip
def test_short_names_and_canonical_order(short, canonical):
    assert parse_target(short).name == canonical
    assert parse_target(canonical).name == canonical


@pytest.mark.parametrize("npu", NPUS)
def test_every_npu(npu):
    t = parse_target(f"cortex-m55+{npu}")
    assert t.npu == npu and t.npu_id == NPU_IDS[npu] and t.isa == "mve"
    assert t.gcc_flags == parse_target("cortex-m55").gcc_flags


def test_vela_names():
    assert NPUS == (
        "ethos-u55-32", "ethos-u55-64", "ethos-u55-128", "ethos-u55-256",
        "ethos-u65-256", "ethos-u65-512",
        "ethos-u85-128", "ethos-u85-256", "ethos-u85-512", "ethos-u85-1024", "ethos-u85-2048",
    )  # fmt: skip


@pytest.mark.parametrize(
    "bad, words",
    [
        ("cortex-m99", ["unknown CPU", "cortex-m55+nomve", "ethos-u55-128"]),
        ("", ["empty"]),
        ("cortex-m3+nodsp", ["does not take +nodsp", "none"]),
        ("cortex-m4+nomve", ["does not take +nomve", "+nofp"]),
        ("cortex-m55+nodsp", ["does not take +nodsp", "+nomve"]),
        ("cortex-m33+nodsp+nodsp", ["twice"]),
        ("m55+ethos-u55-128+ethos-u65-256", ["more than one NPU"]),
        ("m55+ethos-u55-100", ["unknown part", "ethos-u55-128"]),
        ("m55+", ["unknown part"]),
        ("x86", ["unknown CPU"]),
    ],
)  # fmt: skip
def test_errors(bad, words):
    with pytest.raises(TargetError) as e:
        parse_target(bad)
    for w in words:
        assert w in str(e.value)


def test_target_is_frozen_and_passes_through():
    t = parse_target("m55")
    with pytest.raises(dataclasses.FrozenInstanceError):
        t.isa = "dsp"
    assert parse_target(t) is t
    assert str(t) == "cortex-m55"
    assert hash(t) == hash(parse_target("cortex-m55"))


# --- boards -------------------------------------------------------------------------------

# board -> targets it runs (every other CPU/switch combination in ALL must be refused)
RUNS = {
    "mps2-an385": {"cortex-m0", "cortex-m0plus", "cortex-m3"},
    "mps2-an386": {"cortex-m0", "cortex-m0plus", "cortex-m3", "cortex-m4", "cortex-m4+nofp",
                   "cortex-m7+nofp"},
    "mps2-an500": {"cortex-m0", "cortex-m0plus", "cortex-m3", "cortex-m4", "cortex-m4+nofp",
                   "cortex-m7", "cortex-m7+nofp"},
    "mps2-an505": {"cortex-m0", "cortex-m0plus", "cortex-m3", "cortex-m4", "cortex-m4+nofp",
                   "cortex-m7+nofp", "cortex-m23", "cortex-m33", "cortex-m33+nodsp",
                   "cortex-m33+nofp", "cortex-m33+nodsp+nofp", "cortex-m35p",
                   "cortex-m35p+nodsp", "cortex-m35p+nofp", "cortex-m35p+nodsp+nofp"},
}  # fmt: skip
# every CPU alone, with each switch, and with all its switches
ALL = {
    "+".join((cpu.name, *combo))
    for cpu in CPUS.values()
    for combo in [(), *((s,) for s in cpu.switches), tuple(cpu.switches)]
}
RUNS["mps3-an547"] = ALL  # the M55 (MVE + double-precision FPU) runs every program


@pytest.mark.parametrize("board", sorted(RUNS))
def test_can_run_matrix(board):
    for name in sorted(ALL):
        ok, reason = can_run(board, name)
        assert ok == (name in RUNS[board]), (board, name, reason)
        if not ok:
            assert board in reason and "needs" in reason


def test_can_run_reasons():
    ok, reason = can_run("mps2-an505", "cortex-m55")
    assert not ok and "MVE" in reason and "armv8.1-m.main" in reason
    ok, reason = can_run("mps2-an505", "cortex-m55+nomve")
    assert not ok and "double-precision" in reason
    ok, reason = can_run("mps2-an385", "cortex-m4")
    assert not ok and "DSP" in reason and "FPU" in reason
    ok, reason = can_run("mps2-an385", "cortex-m23")
    assert not ok and "armv8-m.base" in reason
    ok, reason = can_run("mps2-an385", "cortex-m0plus")
    assert ok and "UNALIGN_TRP" in reason
    assert can_run("mps3-an547", "cortex-m55+ethos-u55-128") == (True, "")


def test_board_for():
    expected = {
        "cortex-m0": "mps2-an385", "cortex-m0plus": "mps2-an385", "cortex-m3": "mps2-an385",
        "cortex-m4": "mps2-an386", "cortex-m7": "mps2-an500", "cortex-m23": "mps2-an505",
        "cortex-m33": "mps2-an505", "cortex-m35p": "mps2-an505", "cortex-m55": "mps3-an547",
        "cortex-m85": "mps3-an547", "cortex-m55+nomve": "mps3-an547",
    }  # fmt: skip
    for t, b in expected.items():
        assert board_for(t) == b
    for name in ALL:
        assert can_run(board_for(name), name)[0]


def test_board_table():
    assert list(BOARDS) == ["mps2-an385", "mps2-an386", "mps2-an500", "mps2-an505", "mps3-an547"]
    ipt = {b.name: b.instructions_per_tick for b in BOARDS.values()}
    assert ipt == {"mps2-an385": 40.0, "mps2-an386": 40.0, "mps2-an500": 40.0,
                   "mps2-an505": 50.0, "mps3-an547": 31.25}  # fmt: skip
    an547 = get_board("mps3-an547")
    assert an547.regions == (
        Region("DTCM", 512 * 1024, 0, False, 0x2000_0000),
        Region("SRAM", 4 << 20, 1, True, 0x2100_0000),
        Region("DDR", 16 << 20, 2, True, 0x6000_0000),
    )
    assert (an547.code.name, an547.code.base, an547.code.size) == ("ITCM", 0, 512 * 1024)
    assert get_board("mps2-an505").regions == (Region("data", 2 << 20, 0, False, 0x3800_0000),)
    assert get_board("mps2-an505").code.base == 0x1000_0000
    for name in ("mps2-an385", "mps2-an386", "mps2-an500"):
        assert get_board(name).regions == (Region("data", 4 << 20, 0, False, 0x2000_0000),)
    for b in BOARDS.values():
        assert b.cpu in CPUS and b.qemu_machine == b.name
        assert [r.rank for r in b.regions] == list(range(len(b.regions)))
    with pytest.raises(TargetError, match="mps3-an547"):
        get_board("mps2-an999")


@pytest.mark.parametrize("board", sorted(BOARDS))
def test_linker_scripts_are_generated_from_the_table(board):
    path = toolchain.linker_script_path(board)
    assert path.read_text() == linker_script(board), "run: python -m mcutorch.device.toolchain"
    text = path.read_text()
    b = get_board(board)
    for r in b.regions:
        assert f"{r.name} (rwx) : ORIGIN = 0x{r.base:08X}" in text
        assert f".mt_bss.{r.name} (NOLOAD)" in text
    assert f"{b.code.name} (rx) : ORIGIN = 0x{b.code.base:08X}" in text


def test_qemu_command():
    cmd = qemu.qemu_command("/tmp/x/prog.elf", "mps3-an547", ["in,1.bin", "7"])
    assert cmd[:4] == ["qemu-system-arm", "-M", "mps3-an547", "-nographic"]
    assert "shift=0" in cmd and cmd[-2:] == ["-kernel", "/tmp/x/prog.elf"]
    sh = cmd[cmd.index("-semihosting-config") + 1]
    assert "target=native" in sh and "arg=prog.elf,arg=in,,1.bin,arg=7" in sh
    with pytest.raises(ValueError):
        qemu.qemu_command("p.elf", "mps2-an385", ["two words"])


def test_missing_toolchain_names_the_packages(monkeypatch, tmp_path):
    monkeypatch.setattr(toolchain.shutil, "which", lambda name: None)
    packages = "gcc-arm-none-eabi libnewlib-arm-none-eabi qemu-system-arm"
    with pytest.raises(ToolchainError, match=packages):
        toolchain.build_elf([tmp_path / "a.c"], [], "mps2-an385", "cortex-m3", tmp_path / "a.elf")
    (tmp_path / "a.elf").write_bytes(b"")
    with pytest.raises(ToolchainError, match="qemu-system-arm"):
        qemu.run_elf(tmp_path / "a.elf", "mps2-an385")


def test_build_refuses_a_board_that_cannot_run_the_target(tmp_path):
    with pytest.raises(TargetError, match="MVE"):
        toolchain.build_elf([tmp_path / "a.c"], [], "mps2-an505", "cortex-m55", tmp_path / "a.elf")


def test_run_result_parsing(monkeypatch, tmp_path):
    """Console parsing, with QEMU replaced by a canned process."""
    console = (
        "hello\nmt_ticks conv 100\nmt_ticks 1000\nmt_ticks tail 3\n"
        "\nmt_fault: HardFault pc=0x0000004a lr=0x00000217 xpsr=0x01000000\n"
    )

    def fake_run(cmd, **kw):
        if "qemu" in cmd[0]:
            (Path(kw["cwd"]) / "out.bin").write_bytes(b"\x07")
            return subprocess.CompletedProcess(cmd, 243, console.encode(), b"")
        return subprocess.CompletedProcess(cmd, 1, "", "")  # addr2line: no location

    monkeypatch.setattr(toolchain.shutil, "which", lambda name: "/usr/bin/" + name)
    monkeypatch.setattr(toolchain.subprocess, "run", fake_run)
    elf = tmp_path / "p.elf"
    elf.write_bytes(b"")
    r = qemu.run_elf(elf, "mps2-an505", ["a"], files={"in.bin": b"\x01"})
    assert r.exit_code == 243 and not r.ok and not r.timed_out
    assert r.ticks == 1000 and r.instructions == 50_000
    assert r.counts == {"conv": 5000, "": 50_000, "tail": 150}
    assert r.fault.startswith("HardFault pc=0x0000004a")
    assert r.files == {"out.bin": b"\x07"}  # in.bin is unchanged, so not returned
    with pytest.raises(ToolchainError, match="faulted: HardFault"):
        r.check()
    assert boards.FAULT_EXIT_CODES[243] == "HardFault"


def test_docstring_examples():
    for mod in (targets, boards):
        failed, _ = doctest.testmod(mod, optionflags=doctest.ELLIPSIS)
        assert failed == 0, mod.__name__
