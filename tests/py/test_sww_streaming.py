"""Streaming wake word (MLPerf Tiny v1.3): ds_cnn_sww_streaming fed the 45 real windows frame by
frame (reset between windows) gives, after the 30th frame, the 30-frame program's output bit for
bit when both use the same qparams (the 30-frame model calibrated on the windows, its observers'
ranges given to the streaming model by layer name: mcutorch.frontend.quantize.quantize_like), on
the reference runtime, the host C runtime and every emulated board."""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest
import torch

import mcutorch
from mcutorch.device import crt
from mcutorch.frontend.quantize import quantize_like
from mcutorch.models import ds_cnn_sww, ds_cnn_sww_streaming, load_tflite_weights

SHARED = Path(__file__).resolve().parents[3] / "shared" / "mlperf_tiny"
if not SHARED.is_dir():
    SHARED = Path("/work/shared/mlperf_tiny")
BOARDS = [("mps2-an385", "cortex-m0plus"), ("mps2-an385", "cortex-m3"),
          ("mps2-an386", "cortex-m4"), ("mps2-an500", "cortex-m7"),
          ("mps2-an505", "cortex-m33"), ("mps3-an547", "cortex-m55")]


@lru_cache(maxsize=None)
def data():
    d = np.load(SHARED / "sww_calibration_samples.npz")
    x = torch.from_numpy(d["specs"].astype(np.float32)).permute(0, 3, 1, 2)  # [45, 40, 30, 1]
    return x, d["labels"].ravel()


@lru_cache(maxsize=None)
def converted():
    weights = SHARED / "str_ww_ref_model.tflite"
    full = load_tflite_weights(ds_cnn_sww(), weights)
    stream = load_tflite_weights(ds_cnn_sww_streaming(), weights)
    x, _ = data()
    windows = [x[i:i + 1] for i in range(len(x))]
    return quantize_like(stream, (x[:1, :, :1],), full, (windows[0],), windows)


@lru_cache(maxsize=None)
def programs(target: str = "cortex-m55"):
    q30, qs = converted()
    return mcutorch.compile(q30, target=target), mcutorch.compile(qs, target=target)


def frames_of(p, i):
    x, _ = data()
    return [p.quantize_inputs([x[i:i + 1, :, t:t + 1]]) for t in range(30)]


def streamed(p, i):
    p.reset()
    return [p.run_int8(f)[0] for f in frames_of(p, i)][-1]


def test_streaming_model_layers_and_state():
    m = ds_cnn_sww_streaming()
    assert [getattr(m, f"hist{k}").shape[2] for k in range(4)] == [2, 4, 9, 14]
    _, ps = programs()
    p = ps.program
    rings = [p.tensors[r.tensor] for r in p.persistent]
    # each history is a ring window of k frames (NHWC [1, k, 1, C]) over a block of 2k - 1 slots
    assert all(t.ring for t in rings) and sorted(t.shape[1] for t in rings) == [3, 5, 10, 15]
    assert sorted(t.extent for t in rings) == [16 + (2 * k - 1) * c for k, c in
                                               ((3, 40), (5, 128), (10, 128), (15, 128))]
    names = [op.name for op in p.ops]
    assert names.count("ring_write") == 4 and not {"concat", "strided_slice", "copy"} & set(names)
    assert p.inputs and p.tensors[p.inputs[0]].shape == (1, 1, 1, 40)


def test_ring_rewrite_off_keeps_the_copies():
    _, qs = converted()
    names = [op.name for op in mcutorch.compile(qs, ring_buffers=False).program.ops]
    assert names.count("concat") == 4 and names.count("strided_slice") == 4
    assert "ring_write" not in names


@pytest.mark.parametrize("i", [0, 17, 44])
def test_equal_to_30_frame_program_reference_and_host_c(i):
    p30, ps = programs()
    x, _ = data()
    want = p30.run_int8(p30.quantize_inputs([x[i:i + 1]]))[0]
    assert np.array_equal(streamed(ps, i), want)
    host, _ = crt.run_host_sequence(ps, frames_of(ps, i))
    assert np.array_equal(host[-1][0], want)


def test_all_windows_reference_accuracy():
    p30, ps = programs()
    x, labels = data()
    same = right = 0
    for i in range(len(x)):
        y = streamed(ps, i)
        same += np.array_equal(y, p30.run_int8(p30.quantize_inputs([x[i:i + 1]]))[0])
        right += int(y.argmax() == labels[i])
    print(f"SWW streaming: {same}/45 bit-identical to the 30-frame program, {right}/45 correct")
    assert same == 45 and right >= 40


def _board_check(board, cpu, windows):
    p30, ps = programs(cpu)
    x, _ = data()
    from mcutorch.device import firmware

    sets = [f for i in windows for f in frames_of(ps, i)]  # one QEMU run, reset every 30 frames
    outs = firmware.run(ps.program, sets, board, reset_every=30).outputs
    for k, i in enumerate(windows):
        want = p30.run_int8(p30.quantize_inputs([x[i:i + 1]]))[0]
        assert np.array_equal(outs[30 * k + 29][0], want), (board, cpu, i)


def test_m55_board_two_windows_one_run():
    _board_check("mps3-an547", "cortex-m55", [3, 30])


@pytest.mark.slow
@pytest.mark.parametrize("board,cpu", BOARDS)
def test_every_board_all_windows(board, cpu):
    _board_check(board, cpu, range(45))


def test_ethos_u_program_equals_the_cpu_program():
    """cortex-m55+ethos-u55-128: the rings and their readers stay on the CPU, the pointwise
    convs go to the NPU; the program's outputs (its CPU versions on the reference) equal the
    CPU-only program's frame by frame."""
    _, qs = converted()
    _, ps = programs()
    npu = mcutorch.compile(qs, target="cortex-m55+ethos-u55-128", board="mps3-an547")
    place = {}
    for row in npu.program.metadata["placement"]:
        place.setdefault(row["op"], set()).add(row["on"])
    assert place["ring_write"] == {"CPU"} and "NPU" in place["conv2d"]
    for i in (5, 40):
        ps.reset()
        npu.reset()
        for f in frames_of(ps, i):
            assert np.array_equal(ps.run_int8(f)[0], npu.run_int8(f)[0])
