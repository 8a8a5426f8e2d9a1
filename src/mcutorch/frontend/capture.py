"""Capture a torch.nn.Module with torch.export (static shapes) and tidy the graph for PT2E.

`capture` returns a GraphModule in eval form: a model that writes its buffers in forward becomes
a function of its state (frontend/state.py: the buffers as extra inputs, their new values as
extra outputs, meta[STATE_KEY] lists them), no-op nodes removed (`remove_identities`),
constants folded (frontend/fold.py), BatchNorm folded into the conv/linear before it (any other
one a depthwise 1x1 conv), max/min over a dim reduced to their values. What torch.export cannot
capture becomes an ExportError that says why and where.
"""
from __future__ import annotations

import re
from contextlib import nullcontext

import torch
import torch.fx.traceback as fx_traceback
from torch.fx import GraphModule, Node

from mcutorch.errors import ExportError, UnsupportedOpError

A = torch.ops.aten
BATCH_NORMS = {A.batch_norm.default, A._native_batch_norm_legit_no_training.default}
FOLDABLE = {A.conv2d.default, A.linear.default, A.conv1d.default, A.conv1d.padding,
            A.conv3d.default, A.conv_transpose2d.input, A.conv_transpose1d.default}
DROPOUTS = {A.dropout.default, A.feature_dropout.default, A.alpha_dropout.default,
            A.feature_alpha_dropout.default}  # (input, p, train): the identity when not training
IDENTITIES = {*DROPOUTS, A.contiguous.default, A.clone.default, A.alias.default,
              A.detach.default, A.detach_.default, A.lift_fresh_copy.default}
CASTS = {A.to.dtype, A.to.dtype_layout, A.to.device, A.to.other, A._to_copy.default,
         A.type_as.default}  # the identity when the dtype (and device) stay the same
SAME_SHAPE = {A.expand_as.default, A.view_as.default, A.expand.default, A.slice.Tensor,
              A.narrow.default}  # the identity when the shape stays the same (x[:, :], ...)
CHECKS = ("_assert", "sym_constrain_range", "_functional_sym_constrain_range")  # no value


def as_tuple(example_inputs) -> tuple:
    """Example inputs as a tuple of tensors (a lone tensor is allowed)."""
    if isinstance(example_inputs, torch.Tensor):
        return (example_inputs,)
    return tuple(example_inputs)


def capture(model: torch.nn.Module, example_inputs, train: bool = False) -> GraphModule:
    """torch.export the model in eval mode; fold BatchNorm and drop dropout. `train` (QAT,
    frontend/qat.py): export in training mode, BatchNorm kept for PT2E, dropout dropped (its
    training-mode 1/(1-p) scaling would widen the ranges the fake quants after it learn).

    Example:
        >>> gm = capture(torch.nn.Conv2d(1, 4, 3).eval(), (torch.randn(1, 1, 8, 8),))
    """
    from mcutorch.frontend.builders.recurrent import swap

    args = as_tuple(example_inputs)
    unrolled = swap(model.train(train))  # nn.LSTM / GRU / RNN as observable steps
    tags = fx_traceback.preserve_node_meta() if unrolled is not model else nullcontext()
    model = unrolled
    try:  # no_grad: inference, no `with torch.no_grad()` blocks wrapped as subgraphs
        with torch.no_grad(), tags:  # tags: the unrolled steps' meta["custom"]
            ep = torch.export.export(model, args, strict=False)
    except UnsupportedOpError:  # an unrolled LSTM's refusal names the module and file:line
        raise
    except Exception as exc:  # torch raises many types; all mean "cannot capture"
        raise ExportError(_explain(exc)) from exc
    from mcutorch.frontend.builders.movement import split_tuples
    from mcutorch.frontend.fold import check_stateless, fold_constants
    from mcutorch.frontend import state

    records = []
    # stateful: the state as inputs and outputs (QAT's training graph: BatchNorm's statistics
    # are the only writes, and a stateful model is refused before it is captured for training)
    names = () if train else state.mutated(ep.module(check_guards=False), ep)
    if names:
        ep, args, records = state.functional(model, args, names)
    gm = ep.module(check_guards=False)
    _strip_guards(gm)
    if records:
        state.tidy(gm)
        state.mark(gm, records)
    sig = ep.graph_signature
    if train:
        from mcutorch.frontend.qat import drop_batch_counters

        drop_batch_counters(gm)  # BatchNorm's num_batches_tracked += 1: training state only
    check_stateless(gm, tuple(sig.buffers_to_mutate.values()))
    remove_identities(gm, training=train)
    split_tuples(gm)  # split/chunk/unbind pieces as slices: each quantizes on its own
    fold_constants(gm, {*sig.parameters, *sig.lifted_tensor_constants})
    if not train:
        fold_batch_norm(gm)
    from mcutorch.frontend.builders.conv import conv3d_as_conv2d

    conv3d_as_conv2d(gm)  # one conv2d on the gathered depth slices
    from mcutorch.frontend.builders.reduce import max_values

    max_values(gm)  # max/min over a dim: their values only
    from mcutorch.frontend.builders.attention import decompose_attention
    from mcutorch.frontend.builders.matmul import rewrite

    decompose_attention(gm)  # scaled_dot_product_attention as matmul, scale, mask, softmax

    rewrite(gm)  # einsum, addmm, baddbmm, products with a constant: matmul / linear
    gm.graph.eliminate_dead_code()
    gm.recompile()
    gm.meta[state.STATE_KEY] = records
    return gm


def source_of(node: Node) -> str:
    """`file:line in module.path: ModuleType (aten.op)` of the user code that created the node."""
    trace = node.meta.get("stack_trace") or ""
    frames = re.findall(r'File "([^"]+)", line (\d+)', trace)
    user = [f for f in frames if "/torch/" not in f[0] and "/torchao/" not in f[0]
            and not f[0].startswith("<eval_with_key>")  # torch.cond's traced graph
            and not f[0].endswith("frontend/builders/recurrent.py")]  # an unrolled LSTM's steps
    op = _op_name(node)
    module = module_of(node)
    module = f" in {module}" if module else ""
    if user:
        path, line = user[-1]
        return f"{path.rsplit('/', 1)[-1]}:{line}{module} ({op})"
    return f"{module.strip()} ({op})" if module else op


def module_of(node: Node) -> str:
    """`name: type` of the innermost nn.Module whose forward created the node ("" for the root
    module): e.g. `rnn: torch.nn.LSTM` for the aten.zeros an LSTM makes for its initial state."""
    stack = list((node.meta.get("nn_module_stack") or {}).values())
    if not stack or not stack[-1][0]:
        return ""
    name, kind = stack[-1][0], stack[-1][1]
    kind = kind if isinstance(kind, str) else f"{kind.__module__}.{kind.__qualname__}"
    if kind.startswith(("torch.nn.modules.", "mcutorch.frontend.builders.recurrent.")):
        kind = "torch.nn." + kind.rsplit(".", 1)[-1]  # an unrolled LSTM shows as the user's
    return f"{name}: {kind.removeprefix('__main__.')}"


def _op_name(node: Node) -> str:
    target = node.target
    if isinstance(target, torch._ops.HigherOrderOperator):
        return f"torch.{target.name()}"
    if not hasattr(target, "name"):
        return str(target)
    ns, _, name = target.name().rpartition("::")
    return f"{ns or 'aten'}.{name}"


def _explain(exc: Exception) -> str:
    text = str(exc).strip()
    lines = [ln for ln in text.splitlines() if ln.strip()]
    head = "\n".join(lines[:12])
    hint = ""
    if "data-dependent" in text or "GuardOnDataDependent" in type(exc).__name__:
        hint = ("\nhint: the model branches on tensor values; mcutorch needs one static graph "
                "(replace Python `if` on tensors with torch.where, or fix the branch)")
    elif "dynamic" in text.lower() or "Constraints violated" in text:
        hint = "\nhint: mcutorch compiles static shapes only; pass example inputs of the real shape"
    return f"torch.export could not capture the model ({type(exc).__name__}):\n{head}{hint}"


def _strip_guards(gm: GraphModule) -> None:
    for node in list(gm.graph.nodes):
        if node.op == "call_module" and node.target == "_guards_fn":
            gm.graph.erase_node(node)


def _param(gm: GraphModule, node) -> torch.Tensor | None:
    if node is None:
        return None
    if not isinstance(node, Node) or node.op != "get_attr":
        raise UnsupportedOpError(f"BatchNorm with computed parameters at {source_of(node)}")
    try:
        return gm.get_parameter(node.target)
    except AttributeError:
        return gm.get_buffer(node.target)


def fold_batch_norm(gm: GraphModule) -> None:
    """Fold eval-mode BatchNorm into the conv, transposed conv or linear that feeds it (that
    producer only); any other BatchNorm becomes a depthwise 1x1 conv2d (builders/norm.py)."""
    for bn in list(gm.graph.nodes):
        if bn.op != "call_function" or bn.target not in BATCH_NORMS:
            continue
        prod = bn.args[0]
        gamma, beta, mean, var = (_param(gm, a) for a in bn.args[1:5])
        eps = bn.args[7] if bn.target == A.batch_norm.default else bn.args[6]
        if isinstance(prod, Node) and prod.target in FOLDABLE and len(prod.users) == 1:
            _fold_into(gm, prod, gamma, beta, mean, var, float(eps))
        else:  # a per-channel affine: a depthwise 1x1 conv
            from mcutorch.frontend.builders.norm import batch_norm_as_conv

            prod = batch_norm_as_conv(gm, bn, gamma, beta, mean, var, float(eps))
        if bn.target == A._native_batch_norm_legit_no_training.default:
            for user in list(bn.users):  # getitem(bn, 0)
                user.replace_all_uses_with(prod)
                gm.graph.erase_node(user)
        bn.replace_all_uses_with(prod)
        gm.graph.erase_node(bn)


def _fold_into(gm, prod: Node, gamma, beta, mean, var, eps: float) -> None:
    from mcutorch.frontend.builders.norm import scale_out_channels

    w = _param(gm, prod.args[1]).detach()
    bias_node = prod.args[2] if len(prod.args) > 2 else None
    inv = (gamma.detach() if gamma is not None else 1.0) / torch.sqrt(var.detach() + eps)
    b = _param(gm, bias_node).detach() if bias_node is not None else torch.zeros(inv.shape[0])
    new_w = scale_out_channels(prod, w, inv)
    new_b = (b - mean.detach()) * inv + (beta.detach() if beta is not None else 0.0)
    wname, bname = f"_folded_w_{prod.name}", f"_folded_b_{prod.name}"
    gm.register_parameter(wname, torch.nn.Parameter(new_w, requires_grad=False))
    gm.register_parameter(bname, torch.nn.Parameter(new_b, requires_grad=False))
    with gm.graph.inserting_before(prod):
        wnode, bnode = gm.graph.get_attr(wname), gm.graph.get_attr(bname)
    wnode.meta["val"], bnode.meta["val"] = new_w, new_b
    args = list(prod.args) + [None] * (3 - len(prod.args))
    args[1], args[2] = wnode, bnode
    prod.args = tuple(args)


def _is_noop(node: Node) -> bool:
    """Whether a node passes its first argument through unchanged (see remove_identities)."""
    if node.target in IDENTITIES:
        return True
    val, src = node.meta.get("val"), node.args[0] if node.args else None
    while isinstance(src, Node) and "val" not in src.meta and "quantize" in str(src.target):
        src = src.args[0]  # a converted graph's dequantize(quantize(v)) has v's shape and dtype
    src = src.meta.get("val") if isinstance(src, Node) else None
    if not (isinstance(val, torch.Tensor) and isinstance(src, torch.Tensor)):
        return False
    same = val.dtype == src.dtype and val.device == src.device
    if node.target in CASTS:
        return same
    return node.target in SAME_SHAPE and same and val.shape == src.shape


def remove_identities(gm: GraphModule, training: bool = False) -> None:
    """Drop eval-time no-ops: eval-mode dropout (all variants), contiguous, clone, alias, detach,
    lift_fresh_copy, same-dtype to/_to_copy/type_as, same-shape expand(_as)/view_as/slice/narrow,
    and the checks torch.export records (_assert_tensor_metadata, _assert_scalar,
    sym_constrain_range, ...). A dropout exported in training mode is random, which no int8
    program computes: an error (`training`, QAT's training graph: dropped)."""
    for node in list(gm.graph.nodes):
        if node.op != "call_function":
            continue
        name = getattr(node.target, "__name__", "")
        if not node.users and name.startswith(CHECKS):
            gm.graph.erase_node(node)
        elif _is_noop(node):
            train = node.args[2] if len(node.args) > 2 else node.kwargs.get("train", False)
            if node.target in DROPOUTS and train and not training:
                raise UnsupportedOpError(
                    f"{source_of(node)} is a training-mode dropout (random): call model.eval() "
                    "before torch.export")
            node.replace_all_uses_with(node.args[0])
            gm.graph.erase_node(node)
    for node in gm.graph.nodes:  # without contiguous() a view may meet strides it cannot take
        if node.op == "call_function" and node.target == A.view.default:
            node.target = A.reshape.default
