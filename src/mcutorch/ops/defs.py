"""The shape of a registry entry: `OpDef` (one op) and `Source` (one aten overload it comes
from)."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

VARIADIC = "*"  # operand list of any length (concat inputs, delegate I/O)
MAC_OPERANDS = ("x", "weight", "bias", "mult", "shift")  # the operands of a MAC op, in order
DEFAULT_VARIANT = "default"  # the kernel every op has: MVE, DSP and pure-C paths in one C function

# How the quantizer annotates an aten node (frontend/quantizer.py implements each rule).
QUANT_RULES = {
    "mac": "int8 input, int8 symmetric weight (per channel), int32 bias at s_in * s_w; a "
           "following ReLU/ReLU6/clamp is fused (only its output is observed)",
    "binary": "each float tensor input gets the activation spec; a following activation fuses "
              "(with a constant scalar operand, x * 0.5, only x is observed: a lut of Source.fn)",
    "activation": "a standalone ReLU/ReLU6/hardtanh/clamp: input and output observed",
    "shared": "the output and every further tensor input share the first input's qparams",
    "fixed": "the output takes fixed qparams (Source.qparams); the input is observed",
    "free": "input and output each observed (a lut's output over its finite values only)",
    "compare": "each float tensor input gets the activation spec; the bool output none (it "
               "feeds where / masked_fill as their mask)",
    "select": "where / masked_fill: each float tensor value input gets the activation spec, the "
              "mask none; the output is observed when both values are tensors, else it shares "
              "the tensor value's qparams (a scalar, -inf included, saturates into them)",
}
# How an IR op's output qparams relate to its inputs' (passes/requant.py enforces "shared").
QPARAM_RULES = {
    "own": "the output has its own qparams; the op requantizes",
    "shared": "the output has its inputs' qparams; a rescale is inserted where they differ",
    "fixed": "the output qparams are fixed by the op's definition",
}
# Ways the operands of one op may share bytes. Otherwise an op's output shares no byte with
# another output, an input or its scratch (both program readers refuse it, bad_op); the planner
# uses only these. "inplace": an output on exactly the bytes (region, offset, size) of an input
# of the same size, e.g. one that dies at this op (element-wise kernels read element i before
# writing it). "delegate": any overlap; the operands are where Vela placed them in its scratch
# area (the ops of the delegate's CPU version follow the rules of their own ops). "residual":
# the output on exactly the bytes of the op's last input (the skip of a fused residual add, read
# at the output's own position before it is written), never on another input's. "overlap": the
# output over its first input x, starting at least OpDef.overlap(...) bytes below it (same
# region): every output byte is written after the last read of the input bytes under it
# (docs/numerics.md, "Overlap"; format 1.8).
ALIAS_KINDS = ("inplace", "delegate", "residual", "overlap")
# Operands whose dtype OpDef.dtypes states (the activations); the others (weights, biases,
# tables, indices, masks) have their own checks. Both program readers check the rule (bad_op).
# "ids": embedding's int32 token ids, a program input (format 1.6); "h0", "c0": the initial
# state of lstm / gru (format 1.8).
ACTIVATION_OPERANDS = ("x", "a", "b", "ids", "h0", "c0", VARIADIC)
INT8_ONLY = (("int8", "int8"),)


@dataclass(frozen=True)
class Source:
    """An aten overload an op is lifted from: `aten` is str(torch.ops.aten.<op>.<overload>)."""

    aten: str
    quant: str  # a QUANT_RULES key
    qparams: tuple[float, int] | None = None  # "fixed": output (scale, zero point)
    # The float function of a 256-entry `lut` (lut sources; add/mul: their form with a constant
    # scalar operand): float64 array -> array, called fn(v, **{name: value for name in args})
    # with the node's constant arguments, named as in the aten schema (`other`, `alpha`,
    # `exponent`, `approximate`, ...; defaults from the schema). `operand` names the tensor.
    fn: Callable | None = None
    args: tuple[str, ...] = ()  # the schema arguments fn takes: Python constants, never tensors
    operand: str = "self"  # the schema argument holding the int8 tensor the table is indexed by

    def __post_init__(self):
        assert self.aten.startswith("aten."), self.aten
        assert self.quant in QUANT_RULES, self.quant
        assert (self.qparams is not None) == (self.quant == "fixed"), self.aten
        assert self.fn is not None or not self.args, self.aten
        assert self.operand not in self.args, self.aten


@dataclass(frozen=True)
class OpDef:
    """One op. `opcode` None = IR only (never stored in a program: `reshape` is a free view)."""

    name: str  # Python name; the C opcode is MT_OP_<NAME.upper()>, the kernel mt_<name>_s8
    opcode: int | None
    inputs: tuple[str, ...]  # operand names, activations first; VARIADIC = any number
    outputs: tuple[str, ...]
    attrs: tuple[str, ...]  # int32 attributes, stored in this order
    layouts: dict = field(default_factory=dict)  # operand name -> memory layout
    variants: tuple[str, ...] = (DEFAULT_VARIANT,)  # kernel variants; index stored per op record
    doc: str = ""
    family: str = ""  # runtime/kernels/<family>/ holds its C kernel; "" = no kernel
    sources: tuple[Source, ...] = ()  # aten overloads lifted into this op
    qparams: str = "own"  # a QPARAM_RULES key
    fusable: bool = False  # a following clamp folds into its act_min/act_max
    alias: tuple[str, ...] = ()  # ALIAS_KINDS its operands may use
    macs: Callable | None = None  # (input shapes, output shapes, attrs) -> multiply-accumulates
    c_sources: dict = field(default_factory=dict)  # variant -> C files under runtime/kernels
    tosa: str = ""  # "" = lowered to TOSA 1.0 (backends/tosa/rules.py); else why not
    since: int = 0  # program format minor version (1.x) that added the opcode
    # MAC ops (operands x, weight, bias, mult, shift): the weight's output-channel axis (0 or -1)
    # and the variants whose accumulator reads x itself (in_zp folded into the bias). Both
    # program readers bound every channel's accumulator from the constant weights at load.
    mac_axis: int | None = None
    zp_folded: tuple[str, ...] = ()
    # (input dtype, output dtype) pairs its kernels take: every activation input
    # (ACTIVATION_OPERANDS) has the first, every output the second. None = not checked (delegate).
    dtypes: tuple[tuple[str, str], ...] | None = INT8_ONLY
    # alias "overlap": (x shape, y shape, weight shape, attrs) -> the least bytes y must start
    # below x, or None where the kernel's loops give no such bound (the C twin: mt_overlap_delta)
    overlap: Callable | None = None

    def __post_init__(self):
        assert self.qparams in QPARAM_RULES, (self.name, self.qparams)
        assert set(self.alias) <= set(ALIAS_KINDS), (self.name, self.alias)
        assert self.variants[0] == DEFAULT_VARIANT and len(self.variants) <= 4, self.name
        assert set(self.c_sources) <= set(self.variants), self.name
        assert not self.fusable or {"act_min", "act_max"} <= set(self.attrs), self.name
        assert self.mac_axis in (None, 0, -1) and set(self.zp_folded) <= set(self.variants)
        assert self.mac_axis is None or (self.inputs[:5] == MAC_OPERANDS
                                         and "in_zp" in self.attrs), self.name
        assert self.dtypes is None or all(len(d) == 2 for d in self.dtypes), self.name
        assert ("overlap" in self.alias) == (self.overlap is not None), self.name

    @property
    def c_name(self) -> str:
        return "MT_OP_" + self.name.upper()

    @property
    def has_kernel(self) -> bool:
        return bool(self.family)

    def activation_inputs(self) -> tuple[int, ...]:
        """Indices of the inputs OpDef.dtypes covers (a variadic list: every input, (-1,))."""
        if VARIADIC in self.inputs:
            return (-1,)
        return tuple(i for i, n in enumerate(self.inputs) if n in ACTIVATION_OPERANDS)

    def attr_index(self, attr: str) -> int:
        return self.attrs.index(attr)

    def kernel_function(self, variant: str = DEFAULT_VARIANT) -> str:
        """C function of (op, variant): mt_<op>_s8, or mt_<op>_<variant>_s8."""
        suffix = "" if variant == DEFAULT_VARIANT else f"_{variant}"
        return f"mt_{self.name}{suffix}_s8"

    def kernel_sources(self, variant: str = DEFAULT_VARIANT) -> tuple[str, ...]:
        """C files (relative to runtime/kernels) implementing (op, variant); the first defines
        its function. Default: <family>/<function>.c."""
        assert self.family and variant in self.variants, (self.name, variant)
        return self.c_sources.get(variant, (f"{self.family}/{self.kernel_function(variant)}.c",))
