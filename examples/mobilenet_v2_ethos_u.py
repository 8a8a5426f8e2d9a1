"""MobileNetV2, PyTorch -> int8 -> TOSA -> Vela -> one program for a Cortex-M55 + Ethos-U55-128.

    python examples/mobilenet_v2_ethos_u.py            # width 0.35 at 96x96 (seconds)
    python examples/mobilenet_v2_ethos_u.py --large    # width 1.0 at 224x224
    python examples/mobilenet_v2_ethos_u.py --board    # also run it on the emulated M55 (QEMU)

The same from the command line (docs/ethos_u.md):
    mcutorch compile my_model.py --target cortex-m55+ethos-u55-128 --board mps3-an547 \\
        --emit-tosa out/tosa -o mobilenet_v2_u55.mtp
    mcutorch inspect mobilenet_v2_u55.mtp
"""
import argparse

import mcutorch
from mcutorch.models import example_input, mobilenet_v2

args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
args.add_argument("--large", action="store_true", help="width 1.0 at 224x224")
args.add_argument("--board", action="store_true", help="also run on mps3-an547 in QEMU")
args = args.parse_args()
width, resolution = (1.0, 224) if args.large else (0.35, 96)

# --- the user code: ten lines ---------------------------------------------------------------
model = mobilenet_v2(width=width, resolution=resolution).eval()
images = [example_input(model, seed=i) for i in range(8)]  # your calibration images here
qmodel = mcutorch.quantize(model, (images[0],), calibration=images)  # PT2E int8
program = mcutorch.compile(qmodel, (images[0],), target="cortex-m55+ethos-u55-128",
                           board="mps3-an547", emit_tosa="out/tosa")  # TOSA -> Vela -> plan
program.save("mobilenet_v2_u55.mtp")
scores = program.run(images[0])  # Python reference runtime (delegates run their CPU version)
print("class", int(scores.argmax()), "(random weights: load yours for a real answer)")
# ---------------------------------------------------------------------------------------------

meta = program.program.metadata
for d in meta["ethos_u"]["delegates"]:
    est = d["estimate"]
    print(f"delegate {d['index']}: {d['ops']} ops, {d['macs']:,} MACs on the NPU; Vela estimate "
          f"{1e3 * est['inference_time']:.2f} ms, {est['sram_memory_used']:.0f} KiB SRAM")
print("on the CPU:", [r["op"] for r in meta["placement"] if r["on"] == "CPU"] or "nothing")
print("TOSA handed to Vela: out/tosa/; program: mobilenet_v2_u55.mtp (mcutorch inspect it)")
if args.board:
    x = program.quantize_inputs([images[0]])
    same = [(a == b).all() for a, b in zip(program.run_on_board(x, "mps3-an547"),
                                          program.run_int8(x))]
    print("emulated Cortex-M55 (CPU versions of the delegates) matches the reference:", all(same))
