"""Run Vela in-process on one TOSA flatbuffer and read its raw output.

Vela (`ethos-u-vela`, imported as `ethosu.vela`) treats a network as TOSA only when the file name
ends in `.tosa`, so each call writes the flatbuffer into a fresh temporary folder, runs
`ethosu.vela.vela.main` with `--output-format raw`, and reads back:

  * `<name>_vela.npz`: command stream, weights, scratch and fast-scratch sizes and regions, and
    every input/output's offset inside the scratch area, its 6-D shape and element size;
  * `<name>_summary_<system config>.csv`: Vela's performance estimate (NPU cycles, total cycles,
    inference time, SRAM used, ...).

Nothing is cached: every call compiles. Vela's console output is captured and returned in
`VelaResult.log` (and quoted in a `VelaError` when Vela refuses the graph).

    >>> cfg = vela_config("ethos-u55-128")
    >>> r = compile_tosa(tosa_graph.flatbuffer, cfg)
    >>> r.inputs[0].offset, r.inputs[0].shape, r.estimate["inference_time"]
    (0, (1, 1, 1, 49, 10, 1), 0.000177826)
"""
from __future__ import annotations

import csv
import ctypes
import os
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from mcutorch.errors import McutorchError

from mcutorch.backends.ethos_u.constraints import family
from mcutorch.ui.progress import status

# Vela's own defaults per family when no system config / memory mode is named (Vela 5.2).
DEFAULTS = {
    "u55": ("Ethos_U55_High_End_Embedded", "Shared_Sram"),
    "u65": ("Ethos_U65_Client_Server", "Dedicated_Sram_384KB"),
    "u85": ("Ethos_U85_SYS_DRAM_Mid", "Dedicated_Sram_384KB"),
}
SCRATCH_REGION = 1  # Vela's base-pointer slots: 0 weights, 1 scratch, 2 fast scratch
ESTIMATE_KEYS = ("cycles_npu", "cycles_total", "inference_time", "sram_memory_used",
                 "off_chip_flash_memory_used", "dram_memory_used", "nn_macs", "core_clock")


class VelaError(McutorchError):
    """Vela refused a graph (or failed); `reason` is Vela's message, `log` its console output."""

    def __init__(self, reason: str, log: str = ""):
        self.reason, self.log = reason, log
        super().__init__(f"Vela: {reason}")


@dataclass(frozen=True)
class VelaConfig:
    """How Vela compiles: accelerator, system config and memory mode of `vela.ini`, extra flags."""

    accelerator: str
    system_config: str
    memory_mode: str
    extra: tuple[str, ...] = ()

    def args(self) -> list[str]:
        return ["--config", str(config_file()), "--accelerator-config", self.accelerator,
                "--system-config", self.system_config, "--memory-mode", self.memory_mode,
                *self.extra]

    def as_dict(self) -> dict:
        return {"accelerator": self.accelerator, "system_config": self.system_config,
                "memory_mode": self.memory_mode, "extra": list(self.extra)}


def config_file() -> Path:
    """The `vela.ini` shipped in the ethos-u-vela wheel."""
    import ethosu.vela  # `ethosu` is a namespace package: locate the wheel through `vela`

    return Path(ethosu.vela.__file__).parents[1] / "config_files" / "Arm" / "vela.ini"


def vela_config(npu: str, system_config: str | None = None, memory_mode: str | None = None,
                extra=()) -> VelaConfig:
    """The VelaConfig for an NPU name, with the family's defaults for what is not given.

        >>> vela_config("ethos-u55-128").memory_mode
        'Shared_Sram'
    """
    sys_default, mode_default = DEFAULTS[family(npu)]
    config = VelaConfig(npu, system_config or sys_default, memory_mode or mode_default,
                        tuple(extra))
    _check_names(config)
    return config


def _check_names(config: VelaConfig) -> None:
    """VelaError unless vela.ini defines the system config and memory mode (a misspelt name
    must fail the compile, not push every op to the CPU as 'refused by Vela')."""
    import configparser

    ini = configparser.ConfigParser()
    ini.read(config_file())
    for kind, name in (("System_Config", config.system_config),
                       ("Memory_Mode", config.memory_mode)):
        if not ini.has_section(f"{kind}.{name}"):
            known = [s.split(".", 1)[1] for s in ini.sections() if s.startswith(kind + ".")]
            raise VelaError(f"unknown {kind} {name!r} in {config_file().name}; known: "
                            f"{', '.join(known)}")


def as_config(npu: str, options) -> VelaConfig:
    """`options`: None, a VelaConfig (its accelerator is replaced by `npu`) or a dict with
    system_config / memory_mode / extra."""
    if isinstance(options, VelaConfig):
        config = replace(options, accelerator=npu)
        _check_names(config)
        return config
    return vela_config(npu, **(options or {}))


@dataclass(frozen=True)
class VelaTensor:
    """A delegate input/output as Vela placed it: byte offset inside the scratch area (of
    `region`), 6-D shape and element size."""

    offset: int
    shape: tuple[int, ...]
    elem_size: int
    region: int

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape)) * self.elem_size


@dataclass
class VelaResult:
    """Vela's raw output for one subgraph, and its performance estimate."""

    command_stream: bytes
    weights: bytes
    weight_region: int
    scratch_size: int
    scratch_region: int
    fast_scratch_size: int
    fast_scratch_region: int
    inputs: list[VelaTensor]
    outputs: list[VelaTensor]
    estimate: dict = field(default_factory=dict)
    config: VelaConfig | None = None
    seconds: float = 0.0
    log: str = ""


@contextmanager
def _console_to(path: Path):
    """Send this process's stdout/stderr (Python and C++ writers alike) to `path`."""
    sys.stdout.flush()
    sys.stderr.flush()
    with open(path, "wb") as sink:
        saved = {fd: os.dup(fd) for fd in (1, 2)}
        try:
            for fd in saved:
                os.dup2(sink.fileno(), fd)
            yield
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            ctypes.CDLL(None).fflush(None)  # Vela's C++ core writes through C stdio
            for fd, copy in saved.items():
                os.dup2(copy, fd)
                os.close(copy)


def compile_tosa(flatbuffer: bytes, config: VelaConfig, name: str = "subgraph") -> VelaResult:
    """Compile one TOSA 1.0 flatbuffer with Vela in this process; VelaError when Vela refuses.

        >>> compile_tosa(tg.flatbuffer, vela_config("ethos-u85-256")).fast_scratch_size
        22048
    """
    from ethosu.vela import vela

    with tempfile.TemporaryDirectory(prefix="mcutorch-vela-") as tmp:
        folder = Path(tmp)
        network = folder / f"{name}.tosa"
        network.write_bytes(flatbuffer)
        argv = [str(network), "--output-format", "raw", "--output-dir", str(folder),
                *config.args()]
        t0 = time.perf_counter()
        log_path = folder / "vela.log"
        try:
            with status(f"Vela: {name} for {config.accelerator}"), _console_to(log_path):
                rc = vela.main(argv)
        except (Exception, SystemExit) as e:  # noqa: BLE001 - any Vela failure is a refusal
            raise VelaError(_message(e), log_path.read_text(errors="replace")) from None
        seconds = time.perf_counter() - t0
        log = log_path.read_text(errors="replace")
        raw = folder / f"{name}_vela.npz"
        if rc != 0 or not raw.is_file():
            raise VelaError(f"exit status {rc}, no raw output", log)
        result = read_raw(raw)
        result.estimate = read_summary(folder / f"{name}_summary_{config.system_config}.csv")
    result.config, result.seconds, result.log = config, seconds, log
    return result


def _message(e: BaseException) -> str:
    """Vela's refusals are RuntimeErrors with a sentence; name the type of anything else."""
    if isinstance(e, SystemExit):
        return f"bad arguments (exit {e.code})"
    text = str(e).strip()
    return text if isinstance(e, RuntimeError) and text else f"{type(e).__name__}: {text}"


def _tensors(z, kind: str) -> list[VelaTensor]:
    shapes, sizes = z[f"{kind}_shape"], z[f"{kind}_elem_size"]
    offsets, regions = z[f"{kind}_offset"], z[f"{kind}_region"]
    return [VelaTensor(int(o), tuple(int(d) for d in s), int(e), int(r))
            for s, e, o, r in zip(shapes, sizes, offsets, regions)]


def _blob(arr: np.ndarray) -> bytes:
    """A byte string numpy stored as a 0-d `S<n>` array; an empty one comes back as `S1` b"\\0"
    (numpy has no zero-size string dtype), and Vela's blobs are never a single byte."""
    data = arr.tobytes()
    return b"" if data == b"\0" else data


def read_raw(path) -> VelaResult:
    """Parse Vela's `--output-format raw` .npz (blobs are stored as fixed-size byte strings)."""
    with np.load(path, allow_pickle=True) as z:
        return VelaResult(
            command_stream=_blob(z["cmd_data"]), weights=_blob(z["weight_data"]),
            weight_region=int(z["weight_region"]),
            scratch_size=int(z["scratch_size"]), scratch_region=int(z["scratch_region"]),
            fast_scratch_size=int(z["scratch_fast_size"]),
            fast_scratch_region=int(z["scratch_fast_region"]),
            inputs=_tensors(z, "input"), outputs=_tensors(z, "output"))


def read_summary(path: Path) -> dict:
    """The numeric columns of Vela's summary CSV that bench/inspect use ({} when absent)."""
    if not path.is_file():
        return {}
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        return {}
    return {k: float(rows[0][k]) for k in ESTIMATE_KEYS if rows[0].get(k) not in (None, "")}
