"""Graph hygiene in the front end (real torch.export + PT2E): constants computed in forward are
folded at compile time, no-op nodes go, buffers stay buffers, stateful models and what stays out
of scope are refused with an UnsupportedOpError naming the op, its file:line and its module."""
from __future__ import annotations

import contextlib

import numpy as np
import pytest
import torch
from torch import nn

import mcutorch
from mcutorch.errors import InputError, UnsupportedOpError
from mcutorch.frontend._torchao import pt2e
from mcutorch.frontend.capture import capture

prepare_pt2e, convert_pt2e = pt2e()
A = torch.ops.aten
SHAPE = (1, 3, 5, 6)


class Net(nn.Module):
    """conv -> fn(self, y): each case is a function of the conv output (a quantized value)."""

    def __init__(self, fn):
        super().__init__()
        self.fn = fn
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.w = nn.Parameter(torch.randn(4, 1, 1))
        self.register_buffer("b", torch.randn(1, 4, 5, 6))

    def forward(self, x):
        return self.fn(self, self.conv(x))


class Wrap(nn.Module):
    """The case inside a named submodule, for errors that must name the module."""

    def __init__(self, fn):
        super().__init__()
        self.inner = Net(fn)

    def forward(self, x):
        return self.inner(x)


def compare(model, x=None, batches=6):
    """Quantize + compile + run; the program's output and the fake-quant model's, in LSBs."""
    torch.manual_seed(0)
    x = torch.randn(SHAPE) if x is None else x
    cal = [x, *(torch.randn(x.shape) for _ in range(batches))]
    qmodel = mcutorch.quantize(model.eval(), (x,), calibration=cal)
    program = mcutorch.compile(qmodel, (x,))
    out = program.program.tensors[program.program.outputs[0]]
    lsb = np.abs(program.run(x).numpy() - qmodel(x).detach().numpy()) / out.scale
    return program, float(lsb.max())


def targets(gm) -> set:
    return {n.target for n in gm.graph.nodes if n.op == "call_function"}


# --- constants --------------------------------------------------------------------------------
CONSTANTS = {  # torch.export 2.13 records the factory ops named here; all are folded
    "zeros": lambda s, y: y + torch.zeros(1, 4, 5, 6),  # aten.zeros
    "ones": lambda s, y: y * torch.ones(1, 4, 5, 6),  # aten.ones
    "full": lambda s, y: torch.minimum(y, torch.full((1, 4, 5, 6), 0.5)),  # aten.full
    "full_like": lambda s, y: torch.maximum(y, torch.full_like(y, -0.25)),  # of an activation
    "zeros_like_of_const": lambda s, y: y + torch.zeros_like(torch.arange(6).float()),
    "arange_div": lambda s, y: y + torch.arange(6).float() / 6,  # arange, _assert.., to, div
    "arange_step": lambda s, y: y * (torch.arange(0, 8, 2).float() * 0.25).reshape(1, 4, 1, 1),
    "eye": lambda s, y: y + torch.eye(5, 6),  # aten.eye.m
    "scalar_tensor": lambda s, y: y + torch.scalar_tensor(0.25),  # broadcast at compile time
    "tensor": lambda s, y: y * torch.tensor([1.0, -2.0, 3.0, 0.5]).reshape(4, 1, 1),
    "linspace": lambda s, y: y + torch.linspace(-1, 1, 6),  # aten.linspace
    "int_constant": lambda s, y: y + torch.arange(6),  # int64, promoted to float by the add
    "parameter_arith": lambda s, y: y * torch.sigmoid(s.w * 2),  # parameters are constants
    "concat": lambda s, y: torch.cat([y, torch.ones(1, 2, 5, 6)], 1),
}
FACTORIES = {A.zeros.default, A.ones.default, A.full.default, A.full_like.default, A.eye.m,
             A.zeros_like.default, A.arange.default, A.arange.start_step, A.linspace.default,
             A.scalar_tensor.default, A.lift_fresh_copy.default, A.div.Tensor, A.sigmoid.default,
             A.to.dtype, A.reshape.default}


@pytest.mark.parametrize("case", sorted(CONSTANTS))
def test_constants_are_folded_and_compile(case):
    model = Net(CONSTANTS[case]).eval()
    gm = capture(model, (torch.randn(SHAPE),))
    assert not targets(gm) & FACTORIES, gm.graph
    assert any(n.op == "get_attr" and n.target.startswith("_mcutorch_const_")
               for n in gm.graph.nodes)
    assert [n.target for n in gm.graph.nodes if n.op == "get_attr"][:2] == ["conv.weight",
                                                                            "conv.bias"]
    program, lsb = compare(model)
    assert lsb <= 1, case
    assert program.program.ops[0].name == "conv2d"


def test_folded_constant_keeps_its_shape():
    """The int8 add broadcasts it at run time: the constant is stored once, not expanded."""
    gm = capture(Net(CONSTANTS["arange_div"]).eval(), (torch.randn(SHAPE),))
    const = next(n for n in gm.graph.nodes if n.op == "get_attr" and "const" in n.target)
    value = getattr(gm, const.target)
    assert value.shape == (6,) and value.dtype == torch.float32
    assert torch.equal(value, torch.arange(6).float() / 6)


def test_random_ops_are_never_folded():
    gm = capture(Net(lambda s, y: y + torch.rand(1, 4, 5, 6)).eval(), (torch.randn(SHAPE),))
    assert A.rand.default in targets(gm)


# --- buffers and state ------------------------------------------------------------------------
def test_a_buffer_read_stays_a_buffer():
    model = Net(lambda s, y: y + s.b).eval()
    gm = capture(model, (torch.randn(SHAPE),))
    add = next(n for n in gm.graph.nodes if n.target == A.add.Tensor)
    assert add.args[1].op == "get_attr" and add.args[1].target == "b"
    assert "b" in dict(gm.named_buffers())
    program, lsb = compare(model)  # a random [1, C, H, W] constant: transposed to NHWC too
    assert lsb <= 1 and [op.name for op in program.program.ops] == ["conv2d", "add"]


def test_arithmetic_on_a_buffer_is_not_folded():
    gm = capture(Net(lambda s, y: y + s.b * 2).eval(), (torch.randn(SHAPE),))
    mul = next(n for n in gm.graph.nodes if n.target == A.mul.Tensor)
    assert mul.args[0].op == "get_attr" and mul.args[0].target == "b"


class Stateful(nn.Module):
    def __init__(self, kind):
        super().__init__()
        self.kind = kind
        self.conv = nn.Conv2d(3, 4, 1)
        self.register_buffer("count", torch.zeros(1, 4, 5, 6))

    def forward(self, x):
        y = self.conv(x)
        if self.kind == "add_":
            self.count.add_(1)  # STATE
        elif self.kind == "iadd":
            self.count += 1  # STATE
        elif self.kind == "copy_":
            self.count.copy_(y)  # STATE
        elif self.kind == "assign":
            self.count = self.count + 1  # STATE
        elif self.kind == "view":
            self.count[:, 0].mul_(0.5)  # STATE
        elif self.kind == "parameter":
            with torch.no_grad():
                self.conv.bias.add_(1)  # STATE
            y = y + self.conv.bias.reshape(1, 4, 1, 1)
        return y + self.count


@pytest.mark.parametrize("kind", ["add_", "iadd", "assign"])
def test_a_buffer_updated_in_forward_is_state(kind):
    """In-place writes and reassignment of a buffer: a persistent tensor, the program = the
    converted model with its state carried from call to call (tests/py/test_persistent.py)."""
    torch.manual_seed(0)
    xs = [torch.randn(SHAPE) for _ in range(4)]
    q = mcutorch.quantize(Stateful(kind), (xs[0],), calibration=xs)
    p = mcutorch.compile(q, target="cortex-m55")
    assert p.program.persistent
    state = [r["init"] for r in q.meta["mcutorch_state"]]
    for x in xs:
        out = q(x, *state)
        state = [out[-1]]
        assert np.array_equal(out[0].detach().numpy(), p.run(x).numpy())


@pytest.mark.parametrize("kind,why", [
    ("copy_", "overwritten in forward before it is read"),
    ("view", "a state written through a view by an in-place aten.mul_.Tensor")])
def test_a_buffer_write_mcutorch_does_not_take_is_refused(kind, why):
    with pytest.raises(UnsupportedOpError, match=why):
        mcutorch.quantize(Stateful(kind), (torch.randn(SHAPE),))


@pytest.mark.parametrize("kind", ["parameter"])
def test_a_buffer_mutated_in_forward_is_refused(kind):
    with pytest.raises(UnsupportedOpError) as err:
        mcutorch.quantize(Stateful(kind), (torch.randn(SHAPE),))
    msg = str(err.value)
    what = "parameter conv.bias" if kind == "parameter" else "buffer count"
    assert f"stateful models ({what} mutated in forward) are not supported yet" in msg, msg
    assert "test_hygiene.py:" in msg
    lines = [i for i, ln in enumerate(open(__file__).read().splitlines(), 1)
             if ln.rstrip().endswith("# STATE")]
    assert int(msg.split("test_hygiene.py:")[1].split()[0]) in lines


# --- no-op nodes ------------------------------------------------------------------------------
NOOPS = {  # what torch.export 2.13 records for each (a no-op node unless said otherwise)
    "float": (lambda s, y: y.float(), A.to.dtype),  # + _assert_tensor_metadata
    "to_same_dtype": (lambda s, y: y.to(torch.float32, copy=True), A.to.dtype),
    "to_device": (lambda s, y: y.to("cpu"), A.to.dtype_layout),
    "type_as": (lambda s, y: y.type_as(y), A.type_as.default),
    "clone": (lambda s, y: y.clone(), A.clone.default),
    "detach": (lambda s, y: y.detach(), A.detach.default),
    "contiguous": (lambda s, y: y.contiguous(), None),  # not recorded at all
    "alias_slice": (lambda s, y: y[:, :], A.alias.default),  # x[:, :], x[:, 0:4]: alias
    "slice_ellipsis": (lambda s, y: y[..., 0:100], A.alias.default),
    "narrow_full": (lambda s, y: y.narrow(1, 0, 4), A.narrow.default),
    "expand_as": (lambda s, y: y.expand_as(y), A.expand_as.default),
    "view_as": (lambda s, y: y.view_as(y), A.view_as.default),
    "dropout": (lambda s, y: nn.functional.dropout(y, 0.5, training=False), A.dropout.default),
    "dropout2d": (lambda s, y: nn.functional.dropout2d(y, 0.5, training=False),
                  A.feature_dropout.default),
    "alpha_dropout": (lambda s, y: nn.functional.alpha_dropout(y, 0.5, training=False),
                      A.alpha_dropout.default),
    "feature_alpha_dropout": (lambda s, y: nn.functional.feature_alpha_dropout(
        y, 0.5, training=False), A.feature_alpha_dropout.default),
}


@pytest.mark.parametrize("case", sorted(NOOPS))
def test_noop_nodes_go(case):
    fn, recorded = NOOPS[case]
    model = Net(lambda s, y: torch.relu(fn(s, y)) + s.b).eval()
    x = torch.randn(SHAPE)
    if recorded is not None:  # what torch.export records (the table above)
        ep = torch.export.export(model, (x,), strict=False)
        assert recorded in {n.target for n in ep.graph.nodes}
    gm = capture(model, (x,))
    assert targets(gm) == {A.conv2d.default, A.relu.default, A.add.Tensor}, gm.graph
    program, lsb = compare(model)
    assert lsb <= 1 and [op.name for op in program.program.ops] == ["conv2d", "add"]


def test_noop_nodes_go_in_a_users_own_flow():
    model = Net(lambda s, y: y.float().clone()[:, :].type_as(y) + s.b).eval()
    x = torch.randn(SHAPE)
    ep = torch.export.export(model, (x,), strict=False)
    assert A._assert_tensor_metadata.default in {n.target for n in ep.graph.nodes}
    qmodel = prepare_pt2e(ep.module(), mcutorch.Quantizer())
    qmodel(x)
    qmodel = convert_pt2e(qmodel)
    program = mcutorch.compile(qmodel, (x,))
    assert [op.name for op in program.program.ops] == ["conv2d", "add"]


def test_a_constant_in_a_users_own_flow_names_the_fix():
    model = Net(lambda s, y: y + torch.zeros(1, 4, 5, 6)).eval()
    x = torch.randn(SHAPE)
    qmodel = prepare_pt2e(torch.export.export(model, (x,), strict=False).module(),
                          mcutorch.Quantizer())
    qmodel(x)
    with pytest.raises(UnsupportedOpError, match=r"aten\.zeros.*a constant computed in forward"
                                                 r".*mcutorch\.frontend\.capture\.capture"):
        mcutorch.compile(convert_pt2e(qmodel), (x,))


# --- mean over every element ------------------------------------------------------------------
@pytest.mark.parametrize("case", ["mean", "dim_none", "keepdim"])
def test_mean_of_every_element(case):
    fn = {"mean": lambda s, y: y.mean(), "dim_none": lambda s, y: y.mean(dim=None),
          "keepdim": lambda s, y: y.mean(dim=None, keepdim=True)}[case]
    program, lsb = compare(Net(fn))
    assert lsb <= 1
    assert "avg_pool2d" in [op.name for op in program.program.ops]
    y = program.run(torch.randn(SHAPE))
    assert y.shape == ((1, 1, 1, 1) if case == "keepdim" else ())
    scalar = case != "keepdim"  # a scalar output cannot be split by inference
    with pytest.raises(InputError, match="scalar") if scalar else contextlib.nullcontext():
        program.run(torch.randn(2, *SHAPE[1:]))


class Mean(nn.Module):
    def __init__(self, body):
        super().__init__()
        self.body = body

    def forward(self, x):
        return self.body(x).mean()


def test_mean_of_every_element_of_a_linear_output():
    program, lsb = compare(Mean(nn.Sequential(nn.Linear(8, 6), nn.ReLU())), torch.randn(1, 8))
    assert lsb <= 1


# --- what stays out of scope ------------------------------------------------------------------
REFUSED = {  # case: (function of the conv output, what the message must say)
    "cond": (lambda s, y: torch.cond(y.sum() > 0, lambda v: v + 1, lambda v: v - 1, (y,)),
             r"\(torch\.cond\): control flow is not supported"),
    "while_loop": (lambda s, y: torch._higher_order_ops.while_loop(
        lambda i, v: i < 3, lambda i, v: (i + 1, v * 2), (torch.tensor(0), y))[1],
        r"\(torch\.while_loop\): control flow is not supported"),
    "fft": (lambda s, y: torch.fft.fft(y).real, r"\(aten\.fft_fft\): FFT"),
    "rfft": (lambda s, y: torch.fft.rfft(y).abs(), r"\(aten\.fft_rfft\): FFT"),
    "argmax": (lambda s, y: y.argmax(1), r"\(aten\.argmax\): its output is a torch\.int64"),
    "comparison": (lambda s, y: y > 0, r"\(aten\.gt\.Scalar\): its output is a torch\.bool"),
    "mask_and": (lambda s, y: torch.where((y > 0) & (y < 1), y, 0.0),
                 r"\(aten\.gt\.Scalar\): its output is a torch\.bool mask used by .*and"),
    "mask_not": (lambda s, y: torch.where(~(y > 0), y, 0.0),
                 r"\(aten\.gt\.Scalar\): .*mask used by .*bitwise_not"),
    "mask_float": (lambda s, y: y * (y > 0).float(), r"\(aten\.gt\.Scalar\): .*mask used by"),
    "int_cast": (lambda s, y: y.to(torch.int32).float(), r"\(aten\.to\.dtype\).*torch\.int32"),
    "scatter": (lambda s, y: y.scatter(1, torch.zeros(1, 1, 5, 6, dtype=torch.long), 1.0),
                r"\(aten\.scatter\.value\): scatter / index_put"),
    "index_put": (lambda s, y: y.index_put((torch.tensor([0]),), torch.tensor(1.0)),
                  r"\(aten\.index_put\): scatter / index_put"),
    "setitem": (lambda s, y: y.index_put_((torch.tensor([0]),), torch.tensor(1.0)),
                r"\(aten\.index_put_\): scatter / index_put"),
    "permute_7d": (lambda s, y: y[None, None, None].permute(0, 2, 1, 3, 4, 5, 6),
                   r"\(aten\.permute\): transpose of a 7-D tensor.* ranks up to 6"),
    "pad_7d": (lambda s, y: nn.functional.pad(y[None, None, None], (1, 1)),
               r"\(aten\.pad\): pad of a 7-D tensor.* ranks up to 6"),
    "constant_pad_nd_7d": (lambda s, y: torch.constant_pad_nd(y[None, None, None], [1, 1]),
                           r"\(aten\.constant_pad_nd\): pad of a 7-D tensor"),
    "cat_7d": (lambda s, y: torch.cat([y[None, None, None]] * 2, 1),
               r"\(aten\.cat\): concat of a 7-D tensor"),
    "slice_7d": (lambda s, y: y[None, None, None][:, :, :, :, 1:],
                 r"\(aten\.slice\.Tensor\): strided_slice of a 7-D tensor"),
}


WHERES = {  # comparisons feeding where / masked_fill compile (what REFUSED keeps out)
    "where_buffer": lambda s, y: torch.where(y > 0, y, s.b),
    "where_leaky": lambda s, y: torch.where(y > 0, y, 0.1 * y),
    "where_tensor_tensor": lambda s, y: torch.where(torch.gt(y, s.b), s.b, y),
    "where_param_threshold": lambda s, y: torch.where(y <= s.w, y, 0.0),
    "masked_fill_computed": lambda s, y: y.masked_fill(y < 0, 0.0),
    "masked_fill_const": lambda s, y: y.masked_fill(torch.ones(5, 6).triu(1).bool(), -1e9),
    "eq_ne_methods": lambda s, y: torch.where(y.eq(s.b), 1.0, y) + torch.where(y.ne(0.5), y, -2),
}


@pytest.mark.parametrize("case", sorted(WHERES))
def test_comparisons_feeding_where_compile(case):
    program, lsb = compare(Net(WHERES[case]))
    names = [op.name for op in program.program.ops]
    assert "where" in names and lsb <= 1, (names, lsb)


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_out_of_scope_is_refused_naming_op_line_and_module(case):
    fn, pattern = REFUSED[case]
    with pytest.raises(UnsupportedOpError, match=pattern) as err:
        mcutorch.quantize(Wrap(fn), (torch.randn(SHAPE),))
    msg = str(err.value)
    assert "test_hygiene.py:" in msg and "in inner: " in msg and "Net" in msg, msg


def test_mean_over_other_dims_is_a_reduce_sum():
    qmodel = mcutorch.quantize(Net(lambda s, y: y.mean(dim=1)).eval(), (torch.randn(SHAPE),))
    assert [op.name for op in mcutorch.compile(qmodel).program.ops][-1] == "reduce_sum"


def test_out_of_scope_is_refused_in_a_users_own_flow():
    model = Net(lambda s, y: y[None, None, None].permute(0, 2, 1, 3, 4, 5, 6)).eval()
    x = torch.randn(SHAPE)
    qmodel = prepare_pt2e(torch.export.export(model, (x,), strict=False).module(),
                          mcutorch.Quantizer())
    qmodel(x)
    with pytest.raises(UnsupportedOpError, match="transpose of a 7-D tensor"):
        mcutorch.compile(convert_pt2e(qmodel), (x,))
