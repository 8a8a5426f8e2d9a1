"""Constant folding and the stateless check of a captured graph (before quantization).

`check_stateless`: a model that writes a buffer or a parameter in forward (`self.b.add_(1)`,
`self.b.copy_(x)`, `self.b = self.b + 1`) is stateful: its program would have to keep the new
value for the next inference, which mcutorch programs do not do yet. It is refused, naming the
buffer and the line that writes it, before anything could freeze the buffer into a constant.

`fold_constants`: a value that depends on no model input and on no buffer is computed once, at
compile time: zeros/ones/full/arange/eye/linspace/scalar_tensor, `torch.tensor(...)` constants
(torch.export's lifted constants), arithmetic on them and on parameters (`self.w * 2`), and
zeros_like/ones_like/full_like of anything (their value depends on its static shape only). The
folded value reaches its consumer as a constant (a get_attr), which PT2E then quantizes with the
consumer's rules; a constant operand of an element-wise add/mul/maximum/minimum takes the op's
output dtype and keeps its shape (the int8 ops broadcast it at run time). Parameters that
feed an op directly (conv/linear weights) and buffers (which a stateful model may change) are
left as they are. Random ops (torch.rand, ...) are never folded.
"""
from __future__ import annotations

import operator

import torch
from torch.fx import GraphModule, Node

from mcutorch import ops
from mcutorch.errors import UnsupportedOpError
from mcutorch.frontend.capture import source_of

A = torch.ops.aten
SHAPE_ONLY = {A.zeros_like.default, A.ones_like.default, A.full_like.default,
              A.new_zeros.default, A.new_ones.default, A.new_full.default}
BROADCAST = {s for s, (op, _) in ops.SOURCES.items()
             if op.name in ("add", "sub", "mul", "div", "maximum", "minimum")}


def _state(gm: GraphModule) -> dict[str, str]:
    """get_attr target -> "buffer" / "parameter" for the module's state."""
    return {**{n: "parameter" for n, _ in gm.named_parameters()},
            **{n: "buffer" for n, _ in gm.named_buffers()}}


def _aliases_input(node: Node) -> bool:
    """Whether the node's output is a view of (or the same tensor as) its first argument."""
    schema = getattr(node.target, "_schema", None)
    return bool(schema and schema.returns and schema.returns[0].alias_info is not None
                and node.args)


def _root(arg):
    """The tensor an argument is a view of: follows views and in-place ops back."""
    while isinstance(arg, Node) and arg.op == "call_function" and _aliases_input(arg):
        arg = arg.args[0]
    return arg


def _written(node: Node) -> list:
    """The arguments an op writes (self of add_/copy_, out=...)."""
    schema = getattr(node.target, "_schema", None)
    return [node.args[i] if i < len(node.args) else node.kwargs.get(a.name)
            for i, a in enumerate(schema.arguments if schema else ())
            if a.alias_info is not None and a.alias_info.is_write]


def check_stateless(gm: GraphModule, mutated: tuple[str, ...] = ()) -> None:
    """Refuse a model that writes its own buffers or parameters in forward (see the module
    docstring); `mutated`: the buffers an ExportedProgram's graph signature says it mutates."""
    state = _state(gm)
    for node in gm.graph.nodes:
        if node.op != "call_function":
            continue
        if "embedding_renorm" in str(node.target):
            raise UnsupportedOpError(f"{source_of(node)}: an embedding with max_norm renormalizes "
                                     "its table's rows in forward; mcutorch takes max_norm=None "
                                     "(renormalize the weights once before quantizing)")
        for arg in _written(node):
            root = _root(arg)
            if isinstance(root, Node) and root.op == "get_attr" and root.target in state:
                raise UnsupportedOpError(
                    f"{source_of(node)}: stateful models ({state[root.target]} {root.target} "
                    "mutated in forward) are not supported yet: a program computes its outputs "
                    "from its inputs only; keep the state outside the model (pass it in, return "
                    "the new value)")
    if mutated:
        raise UnsupportedOpError(f"stateful models (buffer {mutated[0]} mutated in forward) are "
                                 "not supported yet")


def _foldable(node: Node, values: dict) -> bool:
    target = node.target
    if node.op != "call_function" or isinstance(target, torch._ops.HigherOrderOperator):
        return False
    if not isinstance(target, torch._ops.OpOverload) and target.__module__ != "_operator":
        return False
    if torch.Tag.nondeterministic_seeded in getattr(target, "tags", ()):
        return False
    inputs = node.all_input_nodes
    if target in SHAPE_ONLY:
        inputs = inputs[1:]
    return all(a in values for a in inputs)


def _evaluate(node: Node, values: dict) -> bool:
    """Compute a foldable node into `values`; False if torch refuses (the node stays)."""
    def value(a: Node):
        if a in values:
            return values[a]
        val = a.meta["val"]  # SHAPE_ONLY: any tensor of the static shape and dtype
        return torch.empty(val.shape, dtype=val.dtype)

    args = torch.fx.node.map_arg(node.args, value)
    kwargs = torch.fx.node.map_arg(node.kwargs, value)
    try:
        with torch.no_grad():
            values[node] = node.target(*args, **kwargs)
    except Exception:  # torch refuses it: left in the graph, where check_supported names it
        return False
    return True


def fold_constants(gm: GraphModule, leaves: set[str]) -> int:
    """Fold every input- and buffer-free subgraph into constants (see the module docstring);
    `leaves`: get_attr targets that are constants (parameters, lifted tensor constants).
    Returns the number of constants made."""
    values: dict[Node, object] = {}
    made: dict[tuple, Node] = {}
    for node in list(gm.graph.nodes):
        if node.op == "get_attr" and node.target in leaves:
            values[node] = operator.attrgetter(node.target)(gm).detach()
        elif _foldable(node, values) and _evaluate(node, values):
            pass
        elif node.op in ("call_function", "output"):
            for arg in node.all_input_nodes:
                value = values.get(arg)
                if isinstance(value, torch.Tensor):
                    const = _materialize(gm, node, arg, value, made)
                    if const is not None:
                        node.replace_input_with(arg, const)
    for node in reversed(list(values)):
        if not node.users:
            gm.graph.erase_node(node)
    return len(made)


def _materialize(gm: GraphModule, user: Node, arg: Node, value: torch.Tensor, made: dict):
    """The get_attr that gives `user` the constant `value` of `arg` (None: keep `arg`)."""
    out = user.meta.get("val")
    others = [a for a in user.args[:2] if a is not arg]
    if (str(user.target) in BROADCAST and isinstance(out, torch.Tensor)
            and value.dtype != out.dtype and others):
        value = value.to(out.dtype)  # the kernels broadcast: the constant keeps its shape
    elif arg.op == "get_attr":
        return None  # a parameter or constant used as it is (a conv weight, ...)
    key = (arg, value._version, tuple(value.shape), value.dtype)
    if key not in made:
        name = f"_mcutorch_const_{len(made)}"
        gm.register_buffer(name, value.contiguous().clone())
        with gm.graph.inserting_before(user):
            made[key] = gm.graph.get_attr(name)
        made[key].meta.update(val=getattr(gm, name), stack_trace=arg.meta.get("stack_trace"),
                              nn_module_stack=arg.meta.get("nn_module_stack"))
    return made[key]
