"""Partial offload: a network with ops an Ethos-U55 cannot run, split between NPU and CPU.

    python examples/partial_offload.py           # Python reference + host C runtime
    python examples/partial_offload.py --board   # also the emulated Cortex-M55 (QEMU)

Two ops stay off the U55 here:
  * a 9x9 average pool with padding not counted (a local smoothing): Vela's U55/U65 AVG_POOL2D
    takes padding only up to 8x8 kernels; the Ethos-U85 runs it;
  * a softmax over channels in the middle of the network: TOSA 1.0 has no softmax, so it runs on
    the Cortex-M55 for every NPU.
The compiler cuts the network into delegates around them; `mcutorch inspect` shows the same
placement table. With no NPU driver linked (this machine), each delegate runs its CPU version,
and the program's outputs are bit-identical to the CPU-only program's on every executor.
"""
import argparse

import numpy as np
import torch

import mcutorch
from mcutorch.device import crt

F = torch.nn.functional


class SmoothedClassifier(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = torch.nn.Conv2d(3, 16, 3, padding=1)
        self.mix = torch.nn.Conv2d(16, 16, 3, padding=1)
        self.head = torch.nn.Conv2d(16, 32, 1)
        self.fc = torch.nn.Linear(32, 10)

    def forward(self, x):
        x = F.relu(self.stem(x))
        x = F.avg_pool2d(x, 9, 1, padding=4, count_include_pad=False)  # U55: CPU, U85: NPU
        x = torch.softmax(self.mix(x), dim=1)  # CPU on every Ethos-U
        x = F.relu(self.head(x))
        return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))


def show(program) -> None:
    p = program.program
    print(f"\n{p.target.npu}: {len(p.delegates)} delegate(s)")
    for r in p.metadata["placement"]:
        dlg = "" if r["delegate"] is None else f"d{r['delegate']}"
        print(f"  {r['op']:<17} {r['on']:<5} {dlg:<3} {r['why'][:90]}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--board", action="store_true", help="also run on mps3-an547 (QEMU)")
    args = ap.parse_args()
    torch.manual_seed(0)
    model = SmoothedClassifier().eval()
    images = [torch.randn(1, 3, 32, 32) for _ in range(8)]
    qmodel = mcutorch.quantize(model, (images[0],), calibration=images)
    cpu_only = mcutorch.compile(qmodel, (images[0],), target="cortex-m55", board="mps3-an547")
    x = cpu_only.quantize_inputs([images[-1]])
    want = cpu_only.run_int8(x)
    for npu in ("ethos-u55-128", "ethos-u85-256"):
        program = mcutorch.compile(qmodel, (images[0],), target=f"cortex-m55+{npu}",
                                   board="mps3-an547")
        show(program)
        runs = {"Python reference": program.run_int8(x),
                "host C runtime": crt.run_host(program.program, x)}
        if args.board:
            runs["emulated Cortex-M55"] = program.run_on_board(x, "mps3-an547")
        for where, got in runs.items():
            same = all(np.array_equal(a, b) for a, b in zip(got, want))
            print(f"  {where}: {'identical to' if same else 'DIFFERS from'} the CPU-only program")


if __name__ == "__main__":
    main()
