"""Compilation targets: Cortex-M CPUs, their feature switches, Ethos-U NPUs.

A target name is a CPU, optional feature switches and an optional NPU, joined by ``+``::

    cortex-m55                      MVE (Helium) kernels
    cortex-m55+nomve                the same core without MVE: DSP kernels
    cortex-m33+nodsp                scalar kernels
    m55+ethos-u55-128               short CPU names are accepted

`parse_target` turns such a name into a frozen `Target` that records everything later
stages need: the ISA level that picks the kernel variants ("scalar", "dsp" or "mve"), the
architecture, the arm-none-eabi-gcc flags, and facts about the core that kernels care
about (unaligned accesses fault, 64-bit multiply results, saturation instructions).

Integer ids for program files (stable; never renumber, only append):

=====  ===============  ==============  ====================
 id    CPU              architecture    ISA level (default)
=====  ===============  ==============  ====================
  0    cortex-m0        armv6-m         scalar
  1    cortex-m0plus    armv6-m         scalar
  2    cortex-m3        armv7-m         scalar
  3    cortex-m4        armv7e-m        dsp
  4    cortex-m7        armv7e-m        dsp
  5    cortex-m23       armv8-m.base    scalar
  6    cortex-m33       armv8-m.main    dsp (``+nodsp``: scalar)
  7    cortex-m35p      armv8-m.main    dsp (``+nodsp``: scalar)
  8    cortex-m55       armv8.1-m.main  mve (``+nomve``: dsp)
  9    cortex-m85       armv8.1-m.main  mve (``+nomve``: dsp)
=====  ===============  ==============  ====================

ISA ids: ``ISA_IDS = {"scalar": 0, "dsp": 1, "mve": 2}``. NPU ids (`NPU_IDS`): 0 = none,
then ethos-u55-32/64/128/256 = 1-4, ethos-u65-256/512 = 5-6,
ethos-u85-128/256/512/1024/2048 = 7-11 (the names Vela's ``--accelerator-config`` takes).

Feature switches: ``+nodsp`` (M33, M35P), ``+nomve`` (M55, M85), ``+nofp`` (the cores whose
FPU is optional and not needed by MVE: M4, M7, M33, M35P; soft-float ABI). GCC 12 has no
``-mcpu=cortex-m85``; that core is compiled with the equivalent ``-march`` (PACBTI is not
used by mcutorch code, so it is not needed).
"""

from __future__ import annotations

from dataclasses import dataclass

from mcutorch.errors import TargetError

ISA_LEVELS = ("scalar", "dsp", "mve")
ISA_IDS = {"scalar": 0, "dsp": 1, "mve": 2}

# Architectures each architecture contains (a program for X runs on a core implementing Y
# when X is in ARCH_CONTAINS[Y]). The DSP extension (v7E-M / v8-M with DSP) is a feature,
# checked separately, so armv7e-m here means "armv7-m instructions".
ARCH_CONTAINS: dict[str, frozenset[str]] = {
    "armv6-m": frozenset({"armv6-m"}),
    "armv7-m": frozenset({"armv6-m", "armv7-m"}),
    "armv7e-m": frozenset({"armv6-m", "armv7-m", "armv7e-m"}),
    "armv8-m.base": frozenset({"armv6-m", "armv8-m.base"}),
    "armv8-m.main": frozenset(
        {"armv6-m", "armv7-m", "armv7e-m", "armv8-m.base", "armv8-m.main"}
    ),
    "armv8.1-m.main": frozenset(
        {"armv6-m", "armv7-m", "armv7e-m", "armv8-m.base", "armv8-m.main", "armv8.1-m.main"}
    ),
}

# Feature names: "dsp" (SIMD MAC instructions), "mve" (integer Helium), "mve.fp",
# "fp" (single-precision FPU), "fp.dp" (double-precision FPU).
FEATURES = ("dsp", "mve", "mve.fp", "fp", "fp.dp")

# What each switch removes from a CPU's features.
SWITCH_REMOVES: dict[str, frozenset[str]] = {
    "nodsp": frozenset({"dsp"}),
    "nomve": frozenset({"mve", "mve.fp"}),
    "nofp": frozenset({"fp", "fp.dp", "mve.fp"}),
}
SWITCH_ORDER = ("nodsp", "nomve", "nofp")


@dataclass(frozen=True)
class Cpu:
    """One Cortex-M core as mcutorch sees it (an entry of `CPUS`)."""

    name: str
    id: int
    arch: str
    features: frozenset[str]  # with no switch applied
    switches: tuple[str, ...]  # the switches this core accepts
    gcc_mcpu: str | None  # None: gcc 12 lacks -mcpu for it, see _gcc_flags
    short: tuple[str, ...] = ()

    @property
    def baseline(self) -> bool:
        """Armv6-M / Armv8-M Baseline: unaligned accesses fault, no SMULL, no SSAT."""
        return self.arch in ("armv6-m", "armv8-m.base")


def _cpu(name, id, arch, features, switches=(), gcc_mcpu="", short=()):
    return Cpu(
        name,
        id,
        arch,
        frozenset(features),
        tuple(switches),
        name if gcc_mcpu == "" else gcc_mcpu,
        tuple(short),
    )


CPUS: dict[str, Cpu] = {
    c.name: c
    for c in (
        _cpu("cortex-m0", 0, "armv6-m", (), short=("m0", "cm0")),
        _cpu("cortex-m0plus", 1, "armv6-m", (), short=("m0plus", "cm0plus", "cortex-m0+")),
        _cpu("cortex-m3", 2, "armv7-m", (), short=("m3", "cm3")),
        _cpu("cortex-m4", 3, "armv7e-m", ("dsp", "fp"), ("nofp",), short=("m4", "cm4")),
        _cpu("cortex-m7", 4, "armv7e-m", ("dsp", "fp", "fp.dp"), ("nofp",), short=("m7", "cm7")),
        _cpu("cortex-m23", 5, "armv8-m.base", (), short=("m23", "cm23")),
        _cpu(
            "cortex-m33", 6, "armv8-m.main", ("dsp", "fp"), ("nodsp", "nofp"),
            short=("m33", "cm33"),
        ),
        _cpu(
            "cortex-m35p", 7, "armv8-m.main", ("dsp", "fp"), ("nodsp", "nofp"),
            short=("m35p", "cm35p"),
        ),
        _cpu(
            "cortex-m55", 8, "armv8.1-m.main", ("dsp", "mve", "mve.fp", "fp", "fp.dp"),
            ("nomve",), short=("m55", "cm55"),
        ),
        _cpu(
            "cortex-m85", 9, "armv8.1-m.main", ("dsp", "mve", "mve.fp", "fp", "fp.dp"),
            ("nomve",), gcc_mcpu=None, short=("m85", "cm85"),
        ),
    )
}
CPU_IDS = {name: cpu.id for name, cpu in CPUS.items()}

NPUS = (
    "ethos-u55-32", "ethos-u55-64", "ethos-u55-128", "ethos-u55-256",
    "ethos-u65-256", "ethos-u65-512",
    "ethos-u85-128", "ethos-u85-256", "ethos-u85-512", "ethos-u85-1024", "ethos-u85-2048",
)  # fmt: skip
NPU_IDS = {"": 0} | {name: i + 1 for i, name in enumerate(NPUS)}

_CPU_ALIASES = {alias: c.name for c in CPUS.values() for alias in (c.name, *c.short)}


@dataclass(frozen=True)
class Target:
    """A parsed target: CPU + switches + optional NPU. Build one with `parse_target`.

    >>> t = parse_target("cortex-m55+nomve")
    >>> (t.cpu, t.isa, t.arch)
    ('cortex-m55', 'dsp', 'armv8.1-m.main')
    >>> " ".join(t.gcc_flags)
    '-mcpu=cortex-m55+nomve -mthumb -mfloat-abi=hard'
    """

    name: str  # canonical name, e.g. "cortex-m55+nomve+ethos-u55-128"
    cpu: str
    arch: str
    isa: str  # "scalar" | "dsp" | "mve"
    switches: tuple[str, ...]  # applied switches, canonical order
    features: frozenset[str]  # what the built code may use (see FEATURES)
    npu: str | None
    gcc_flags: tuple[str, ...]

    @property
    def cpu_id(self) -> int:
        """Stable CPU id for program files (table in the module docstring)."""
        return CPU_IDS[self.cpu]

    @property
    def isa_id(self) -> int:
        """`ISA_IDS[self.isa]`."""
        return ISA_IDS[self.isa]

    @property
    def npu_id(self) -> int:
        """`NPU_IDS[self.npu]`, 0 without an NPU."""
        return NPU_IDS[self.npu or ""]

    @property
    def float_abi(self) -> str:
        """"hard" when the build has an FPU, else "soft"."""
        return "hard" if "fp" in self.features else "soft"

    @property
    def unaligned_faults(self) -> bool:
        """Word/halfword accesses must be aligned (Armv6-M, Armv8-M Baseline)."""
        return CPUS[self.cpu].baseline

    @property
    def has_long_multiply(self) -> bool:
        """SMULL/UMULL/SMLAL (32x32 -> 64 bit) exist (not on Armv6-M / Armv8-M Baseline)."""
        return not CPUS[self.cpu].baseline

    @property
    def has_saturation(self) -> bool:
        """SSAT/USAT exist (not on Armv6-M / Armv8-M Baseline)."""
        return not CPUS[self.cpu].baseline

    @property
    def has_dsp(self) -> bool:
        return "dsp" in self.features

    @property
    def has_mve(self) -> bool:
        return "mve" in self.features

    @property
    def has_fpu(self) -> bool:
        return "fp" in self.features

    def __str__(self) -> str:
        return self.name


def _isa_of(features: frozenset[str]) -> str:
    if "mve" in features:
        return "mve"
    if "dsp" in features:
        return "dsp"
    return "scalar"


def _gcc_flags(cpu: Cpu, switches: tuple[str, ...], features: frozenset[str]) -> tuple[str, ...]:
    abi = "-mfloat-abi=hard" if "fp" in features else "-mfloat-abi=soft"
    if cpu.gcc_mcpu is not None:
        mcpu = cpu.gcc_mcpu + "".join("+" + s for s in switches)
        return (f"-mcpu={mcpu}", "-mthumb", abi)
    # Cortex-M85 with GCC 12: the same instructions as -mcpu=cortex-m85 minus PACBTI.
    ext = "+mve.fp" if "mve.fp" in features else "+mve" if "mve" in features else "+dsp"
    if "fp.dp" in features:
        ext += "+fp.dp"
    return (f"-march={cpu.arch}{ext}", "-mthumb", abi)


def valid_target_names() -> list[str]:
    """Every CPU with every single switch, plus the NPU names (for error messages).

    >>> "cortex-m33+nodsp" in valid_target_names()
    True
    """
    names = []
    for cpu in CPUS.values():
        names.append(cpu.name)
        names.extend(f"{cpu.name}+{s}" for s in cpu.switches)
    return names


def parse_target(name: str | Target) -> Target:
    """Parse ``cpu[+switch...][+npu]`` into a `Target`; raises `TargetError` if unknown.

    Accepts short CPU names (``m55``, ``cm4``), any order of the ``+`` parts after the CPU,
    and upper case. The returned `Target.name` is canonical.

    >>> parse_target("m55+ethos-u55-128+nomve").name
    'cortex-m55+nomve+ethos-u55-128'
    >>> parse_target("cortex-m33+nodsp").isa
    'scalar'
    """
    if isinstance(name, Target):
        return name
    if not isinstance(name, str) or not name.strip():
        raise TargetError(f"empty target name; valid CPUs: {', '.join(CPUS)}")
    text = name.strip().lower()
    # "cortex-m0+" (a common spelling of M0+) would otherwise split into an empty part.
    text = text.replace("cortex-m0++", "cortex-m0plus+")
    if text == "cortex-m0+":
        text = "cortex-m0plus"
    head, *rest = text.split("+")
    if head not in _CPU_ALIASES:
        raise TargetError(
            f"unknown CPU {head!r} in target {name!r}; valid targets: "
            f"{', '.join(valid_target_names())} (optionally +<npu>: {', '.join(NPUS)})"
        )
    cpu = CPUS[_CPU_ALIASES[head]]
    switches: set[str] = set()
    npu: str | None = None
    for part in rest:
        if part in SWITCH_REMOVES:
            if part not in cpu.switches:
                allowed = ", ".join("+" + s for s in cpu.switches) or "none"
                raise TargetError(
                    f"{cpu.name} does not take +{part} (its switches: {allowed}); "
                    f"valid targets: {', '.join(valid_target_names())}"
                )
            if part in switches:
                raise TargetError(f"switch +{part} given twice in {name!r}")
            switches.add(part)
            continue
        npu_name = part if part.startswith("ethos-") else "ethos-" + part
        if npu_name in NPU_IDS and npu_name:
            if npu is not None:
                raise TargetError(f"more than one NPU in {name!r}: {npu} and {npu_name}")
            npu = npu_name
            continue
        raise TargetError(
            f"unknown part +{part} in target {name!r}; {cpu.name} takes "
            f"{', '.join('+' + s for s in cpu.switches) or 'no switches'}, "
            f"NPUs: {', '.join(NPUS)}"
        )
    ordered = tuple(s for s in SWITCH_ORDER if s in switches)
    features = cpu.features
    for s in ordered:
        features = features - SWITCH_REMOVES[s]
    canonical = "+".join((cpu.name, *ordered, *((npu,) if npu else ())))
    return Target(
        name=canonical,
        cpu=cpu.name,
        arch=cpu.arch,
        isa=_isa_of(features),
        switches=ordered,
        features=frozenset(features),
        npu=npu,
        gcc_flags=_gcc_flags(cpu, ordered, features),
    )
