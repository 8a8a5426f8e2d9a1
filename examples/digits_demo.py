"""mcutorch demo: a small CNN trained on scikit-learn's handwritten digits, compiled to int8.

Trains for a few seconds on 1,797 real 8x8 digits shipped inside scikit-learn, quantizes with
PT2E, compiles for the default target (Cortex-M55), runs the held-out split through the compiled
program and prints float vs int8 accuracy, program size and planned RAM.

    python examples/digits_demo.py [--target cortex-m55] [--board mps3-an547] [--out digits.mtp]
"""
from __future__ import annotations

import argparse
import time

import torch
from sklearn.datasets import load_digits
from torch import nn

import mcutorch


class DigitsNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
            nn.Conv2d(16, 16, 3, padding=1, groups=16), nn.BatchNorm2d(16), nn.ReLU(),
            nn.Conv2d(16, 32, 1), nn.BatchNorm2d(32), nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(32, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU6(),
            nn.AdaptiveAvgPool2d(1))
        self.classifier = nn.Linear(32, 10)

    def forward(self, x):
        return self.classifier(torch.flatten(self.features(x), 1))


def load_split(seed: int = 0):
    digits = load_digits()
    x = torch.tensor(digits.images, dtype=torch.float32).unsqueeze(1) / 16.0
    y = torch.tensor(digits.target)
    order = torch.randperm(len(x), generator=torch.Generator().manual_seed(seed))
    cut = int(0.8 * len(x))
    return x[order[:cut]], y[order[:cut]], x[order[cut:]], y[order[cut:]]


def train(model, x, y, epochs: int = 12, seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny batches: one thread is several times faster
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    model.train()
    for _ in range(epochs):
        for idx in torch.randperm(len(x)).split(64):
            opt.zero_grad()
            nn.functional.cross_entropy(model(x[idx]), y[idx]).backward()
            opt.step()
    torch.set_num_threads(threads)
    return model.eval()


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default="cortex-m55")
    ap.add_argument("--board", default=None, help="run on an emulated board (QEMU)")
    ap.add_argument("--out", default="digits.mtp")
    ap.add_argument("--epochs", type=int, default=12)
    args = ap.parse_args(argv)

    xtr, ytr, xte, yte = load_split()
    t0 = time.perf_counter()
    model = train(DigitsNet(), xtr, ytr, args.epochs)
    with torch.no_grad():
        float_acc = (model(xte).argmax(1) == yte).float().mean().item()
    print(f"trained DigitsNet in {time.perf_counter() - t0:.1f} s on {len(xtr)} digits")

    qmodel = mcutorch.quantize(model, (xtr[:1],), calibration=xtr[:256].split(32))
    t0 = time.perf_counter()
    program = mcutorch.compile(qmodel, (xtr[:1],), target=args.target, board=args.board)
    compile_s = time.perf_counter() - t0
    program.save(args.out)

    loaded = mcutorch.load(args.out)
    where = f"emulated {args.board} (QEMU)" if args.board else "host (Python reference runtime)"
    result = loaded.run(xte, board=args.board) if args.board else loaded.run(xte)
    int8_acc = (torch.as_tensor(result).argmax(1) == yte).float().mean().item()
    summary = loaded.summary()
    print(f"compiled for {args.target} in {compile_s:.2f} s -> {args.out}")
    print(f"  float accuracy : {float_acc * 100:6.2f} %  ({len(xte)} held-out digits)")
    print(f"  int8 accuracy  : {int8_acc * 100:6.2f} %  (ran on {where})")
    print(f"  program size   : {summary['program_bytes']:,} B "
          f"({summary['const_bytes']:,} B constants)")
    for region, size in summary["regions"].items():
        print(f"  planned RAM    : {size:,} B in {region} (live lower bound "
              f"{summary['lower_bound']:,} B)")
    if args.board:
        from mcutorch.device.crt import state_size

        print(f"  runtime state  : {state_size(loaded.program):,} B")
    if args.board:
        host = loaded.run(xte)
        same = torch.equal(host, result)
        print(f"  instructions   : {loaded.last_run.instructions:,} per inference "
              f"(C runtime on {args.board}; outputs {'identical to' if same else 'DIFFER from'} "
              "the host reference)")
        from mcutorch.device.firmware import build, flash_split

        split = flash_split(build(loaded.program, args.board), loaded.program)
        print(f"  flash          : runtime {split['runtime_core']:,} B, kernels "
              f"{split['kernels']:,} B, program {split['program']:,} B")
    return {"float_acc": float_acc, "int8_acc": int8_acc}


if __name__ == "__main__":
    main()
