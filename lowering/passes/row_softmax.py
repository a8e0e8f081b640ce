"""Softmax along the last axis as one parallel loop over rows, one exp per element.

After fusion a softmax `exp(f(x, max)) / sum(...)` along the last axis (f32, rows of
a multiple of 16 elements, any number of leading dimensions) is five generics: the
lane-split max ([..., 16] lanes, then the lanes combined), the lane-split sum of
`f(x, max)` (likewise; f is `exp(x - max)`, or `exp(x * scale - max)`...), and the
division, which computes f again. Each is its own parallel pass over the whole
input, the lane combinations are scalar loops of their own, and every element's exp
is computed twice. `rows_softmax` replaces them by one `scf.forall` over the rows
whose iteration does its row in three vector passes while it is in L1: the max,
then `e = f(x, max)` written to the result row while summed, then the division of
the result row, in place. Where in_place.py made x (a temporary nothing reads
later: attention's scores) the division's destination, each row is read from the
result itself before it is overwritten: no buffer besides x.

The result is the one the generics compute, bit for bit: the vector bodies are the
generics' own bodies (cloned lane-wise), the sums accumulate chunk by chunk from
the same initial values and fold their lanes in the same order (lane 0 first), and
the `e` stored is the value the division would recompute. The max alone runs in
MAX_CHAINS interleaved accumulators (its NaN-propagating combiner is a chain of
compares and selects whose latency bound the loop); a maximum does not depend on
the order, except which NaN's payload propagates when a row holds several (a first
combiner that rounds, a sum, keeps one chain). The
match is structural (any combiner bodies, any f the division's body starts with).
Imports generic_attrs.
"""

from __future__ import annotations

from typing import Any

from mlir import ir

from .generic_attrs import indexing_maps, iterator_kinds

LANES = 16  # the lane split of lowering/ops/reduce.py for f32 rows
# Rows x columns below which the rows run on one core (the dispatch costs microseconds).
PARALLEL_MIN_ELEMENTS = 1 << 15
MAX_CHAINS = 4  # interleaved accumulators of the row maximum
_ELEMENT = "f32"
_ROUNDING = ("arith.addf", "arith.subf", "arith.mulf", "arith.divf", "arith.remf")
_SCALARS = ("i1", "i8", "i16", "i32", "i64", "f16", "bf16", "f32", "f64")


def _maps(op: Any) -> list[str]:
    return [str(m) for m in indexing_maps(op)]


def _generic(value: ir.Value) -> Any | None:
    owner = value.owner
    if isinstance(owner, ir.Block) or owner.name != "linalg.generic" or len(owner.results) != 1:
        return None
    return owner.operation


def _split(op: Any) -> tuple[list[ir.Value], ir.Value]:
    return list(op.operands)[:-1], op.operands[len(op.operands) - 1]


def _fill_value(init: ir.Value) -> ir.Attribute | None:
    """The constant a `linalg.fill` of a `tensor.empty` writes, if `init` is one."""
    owner = init.owner
    if isinstance(owner, ir.Block) or owner.name != "linalg.fill":
        return None
    scalar, empty = owner.operation.operands[0], owner.operation.operands[1]
    if isinstance(empty.owner, ir.Block) or empty.owner.name != "tensor.empty":
        return None
    if isinstance(scalar.owner, ir.Block) or scalar.owner.name != "arith.constant":
        return None
    return scalar.owner.attributes["value"]


def _tensor(shape: list[int]) -> str:
    return f"tensor<{'x'.join(map(str, shape))}x{_ELEMENT}>"


def _map(n: int, results: list[int]) -> str:
    """The text of the affine map (d0, ..., d{n-1}) -> (d{results}...)."""
    dims = ", ".join(f"d{i}" for i in range(n))
    return f"({dims}) -> ({', '.join(f'd{i}' for i in results)})"


def _lane_source(value: ir.Value, x: ir.Value, lead: list[int], cols: int) -> bool:
    """Whether `value` is `x` [*lead, cols] viewed as [*lead, cols / LANES, LANES]."""
    owner = value.owner
    if isinstance(owner, ir.Block) or owner.name != "tensor.expand_shape":
        return False
    if owner.operation.operands[0] != x:
        return False
    return str(value.type) == _tensor([*lead, cols // LANES, LANES])


def _body(op: Any) -> tuple[list[ir.BlockArgument], list[Any], ir.Value]:
    """A generic's block arguments, its body ops without the yield, and the yielded value."""
    block = op.regions[0].blocks[0]
    ops = [o.operation for o in block.operations]
    return list(block.arguments), ops[:-1], ops[-1].operands[0]


def _pure(ops: list[Any]) -> bool:
    return all(o.name.startswith(("arith.", "math.")) and len(o.results) == 1
               and not o.regions for o in ops)


class _Softmax:
    """The five generics of one softmax and what the kernel needs of them."""

    def __init__(self, out: Any) -> None:
        self.out = out
        self.ok = False
        inputs, init = _split(out)
        result = out.results[0].type
        if (len(inputs) != 3 or not isinstance(result, ir.RankedTensorType)
                or len(result.shape) < 2 or str(result.element_type) != _ELEMENT
                or not result.has_static_shape):
            return
        *self.lead, self.cols = result.shape
        self.rank = n = len(result.shape)
        if self.cols % LANES or self.cols < LANES:
            return
        if iterator_kinds(out) != ["parallel"] * n:
            return
        row, whole = _map(n, list(range(n - 1))), _map(n, list(range(n)))
        if _maps(out) != [whole, row, row, whole]:
            return
        self.x, self.init = inputs[0], init
        if self.x.type != result or isinstance(init.owner, ir.Block):
            return
        # The result goes to a fresh buffer, or over x (in_place.py made x, a temporary
        # nothing reads later, the division's destination): each row is then read from
        # the result itself before it is overwritten.
        self.over_x = init == self.x
        if not self.over_x and init.owner.name != "tensor.empty":
            return
        self.max_combine = _generic(inputs[1])
        self.sum_combine = _generic(inputs[2])
        if self.max_combine is None or self.sum_combine is None:
            return
        self.max_lanes = self._lanes_of(self.max_combine)
        self.sum_lanes = self._lanes_of(self.sum_combine)
        if self.max_lanes is None or self.sum_lanes is None:
            return
        self.ok = self._max_lanes_ok() and self._sum_lanes_ok() and self._division_ok()

    def _lanes_of(self, combine: Any) -> Any | None:
        """The lane-split generic a [rows] combination reads, checking the combination."""
        inputs, init = _split(combine)
        n = self.rank
        if (len(inputs) != 1 or iterator_kinds(combine) != ["parallel"] * (n - 1) + ["reduction"]
                or _maps(combine) != [_map(n, list(range(n))), _map(n, list(range(n - 1)))]
                or _fill_value(init) is None or not self._combiner(combine)):
            return None
        lanes = _generic(inputs[0])
        if lanes is None or str(lanes.results[0].type) != _tensor([*self.lead, LANES]):
            return None
        if iterator_kinds(lanes) != ["parallel"] * (n - 1) + ["reduction", "parallel"]:
            return None
        if _fill_value(_split(lanes)[1]) is None:
            return None
        return lanes

    @staticmethod
    def _combiner(op: Any) -> bool:
        """A body of pure ops of (in, out) yielding one value."""
        args, ops, _ = _body(op)
        return len(args) == 2 and _pure(ops)

    def _max_lanes_ok(self) -> bool:
        lanes = self.max_lanes
        inputs, _ = _split(lanes)
        n = self.rank
        return (len(inputs) == 1 and _lane_source(inputs[0], self.x, self.lead, self.cols)
                and _maps(lanes) == [_map(n + 1, list(range(n + 1))),
                                     _map(n + 1, [*range(n - 1), n])]
                and self._combiner(lanes))

    def _sum_lanes_ok(self) -> bool:
        """The lane sum reads (x as lanes, the row max) and its body is `f(in, max)`
        combined with the output by its last op."""
        lanes = self.sum_lanes
        inputs, _ = _split(lanes)
        if (len(inputs) != 2 or not _lane_source(inputs[0], self.x, self.lead, self.cols)
                or inputs[1] != self.max_combine.results[0]):
            return False
        n = self.rank
        if _maps(lanes) != [_map(n + 1, list(range(n + 1))), _map(n + 1, list(range(n - 1))),
                            _map(n + 1, [*range(n - 1), n])]:
            return False
        args, ops, yielded = _body(lanes)
        if len(ops) < 2 or not _pure(ops) or yielded != ops[-1].results[0]:
            return False
        out = args[2]
        combine = ops[-1]
        self.f_ops, self.add = ops[:-1], combine
        value = self.f_ops[-1].results[0]
        if sorted(map(str, combine.operands)) != sorted(map(str, [out, value])) \
                or len(combine.operands) != 2:
            return False
        # The accumulator is read by the combination only.
        return all(u.owner == combine for u in out.uses)

    def _division_ok(self) -> bool:
        """The division's body starts with the lane sum's f (on x and the max, the same
        ops in the same order) and the rest reads only f's value, the max and the sum."""
        args, ops, _ = _body(self.out)
        n = len(self.f_ops)
        if len(ops) <= n or not _pure(ops):
            return False
        sum_args = _body(self.sum_lanes)[0]
        same = {sum_args[0]: args[0], sum_args[1]: args[1]}
        for mine, theirs in zip(self.f_ops, ops[:n]):
            if mine.name != theirs.name or len(mine.operands) != len(theirs.operands):
                return False
            if {k: str(mine.attributes[k]) for k in mine.attributes} != \
                    {k: str(theirs.attributes[k]) for k in theirs.attributes}:
                return False
            for a, b in zip(mine.operands, theirs.operands):
                if same.get(a, a) != b:
                    return False
            same[mine.results[0]] = theirs.results[0]
        self.e = ops[n - 1].results[0]
        self.g_ops = ops[n:]
        allowed = {self.e, args[1], args[2]} | {o.results[0] for o in self.g_ops}
        block = self.out.regions[0].blocks[0]
        for o in self.g_ops:
            for v in o.operands:
                if v in allowed:
                    continue
                if isinstance(v.owner, ir.Block) and v.owner == block:
                    return False  # x itself, or the output
                if _defined_inside(v, block):
                    return False  # another of f's values
        return True


def _defined_inside(value: ir.Value, block: ir.Block) -> bool:
    owner = value.owner
    if isinstance(owner, ir.Block):
        return owner == block
    return owner.operation.block == block


class _Text:
    """MLIR text of the kernel, with fresh SSA names."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.count = 0
        self.types: dict[tuple[ir.Type, bool], str] = {}

    def typed(self, t: ir.Type, vector: bool) -> str:
        key = (t, vector)
        if key not in self.types:
            self.types[key] = _typed(t, vector)
        return self.types[key]

    def fresh(self) -> str:
        self.count += 1
        return f"%v{self.count}"

    def add(self, line: str) -> None:
        self.lines.append(line)

    def constant(self, attr: ir.Attribute, vector: bool) -> str:
        name = self.fresh()
        self.add(f"{name} = arith.constant {attr}")
        if not vector:
            return name
        splat = self.fresh()
        self.add(f"{splat} = vector.broadcast {name} : {attr.type} to vector<{LANES}x{attr.type}>")
        return splat

    def ops(self, ops: list[Any], names: dict[ir.Value, str], vector: bool) -> bool:
        """Append `ops` (lane-wise on vectors if `vector`), reading `names`; values from
        outside must be constants. False if an op cannot be written."""
        for op in ops:
            operands = []
            for v in op.operands:
                if v not in names:
                    owner = v.owner
                    if isinstance(owner, ir.Block) or owner.name != "arith.constant":
                        return False
                    names[v] = self.constant(owner.attributes["value"], vector)
                operands.append(names[v])
            types = [self.typed(v.type, vector) for v in op.operands]
            result = self.typed(op.results[0].type, vector)
            attrs = ", ".join(f"{k} = {op.attributes[k]}" for k in op.attributes)
            props = f" <{{{attrs}}}>" if attrs else ""
            name = self.fresh()
            self.add(f'{name} = "{op.name}"({", ".join(operands)}){props} : '
                     f'({", ".join(types)}) -> {result}')
            names[op.results[0]] = name
        return True


def _typed(t: ir.Type, vector: bool) -> str:
    """The text of scalar type `t`, or of the vector of LANES of it."""
    text = str(t)
    if not vector:
        return text
    if text not in _SCALARS:
        raise ValueError(text)
    return f"vector<{LANES}x{text}>"


def _lane_fold(text: _Text, lanes: Any, combine: Any, vec: str) -> str | None:
    """The row value: the combination's initial value combined with lane 0, 1, ... of `vec`
    by the combination's body, in order."""
    acc = text.constant(_fill_value(_split(combine)[1]), False)
    args, ops, yielded = _body(combine)
    for lane in range(LANES):
        element = text.fresh()
        text.add(f"{element} = vector.extract {vec}[{lane}] : {_ELEMENT} from vector<{LANES}x{_ELEMENT}>")
        names = {args[0]: element, args[1]: acc}
        if not text.ops(ops, names, False):
            return None
        acc = names[yielded]
    return acc


def _accumulation(lanes: Any) -> tuple[list[Any], ir.Value] | None:
    """How to combine two lane accumulators: the body ops to run and the value v the
    second accumulator takes the place of (the element, or what is computed from it
    first: attention's scaled score), when that is exact in any order (up to NaN
    payloads): the accumulator is then always one of the v values (or the initial
    value), as with a select-based max. So no op on the accumulator's path may round
    (float arithmetic); compares, selects and bit ops qualify. None otherwise."""
    args, ops, yielded = _body(lanes)
    on_path = {args[1]}
    for op in ops:
        if any(v in on_path for v in op.operands):
            if op.name in _ROUNDING or op.name.startswith("math."):
                return None
            on_path.add(op.results[0])
    if yielded not in on_path:
        return None
    inside = {args[0]} | {op.results[0] for op in ops}
    candidates = [args[0]] + [op.results[0] for op in ops if op.results[0] not in on_path]
    for value in reversed(candidates):
        if value.type != args[1].type:
            continue
        derived, chosen = {value}, []
        for op in ops:
            if op.results[0] in on_path or any(v in derived for v in op.operands):
                if op.results[0] not in on_path:
                    derived.add(op.results[0])
                chosen.append(op)
        # Everything the chosen ops read comes from the path, from v, or from outside
        # the body (constants).
        if all(v in on_path or v in derived or v not in inside
               for op in chosen for v in op.operands):
            return chosen, value
    return None


def _kernel(s: _Softmax) -> str | None:
    """The function `@rows(%x, %init) -> result` computing the softmax, as text."""
    lead, cols = s.lead, s.cols
    tensor = _tensor([*lead, cols])
    vector = f"vector<{LANES}x{_ELEMENT}>"
    rows = 1
    for extent in lead:
        rows *= extent
    accumulation = _accumulation(s.max_lanes)
    chains = next(c for c in (MAX_CHAINS, 2, 1) if (cols // LANES) % c == 0) \
        if accumulation is not None else 1
    t = _Text()
    t.add(f"func.func private @rows(%x: {tensor}, %init: {tensor}) -> {tensor} {{")
    t.add("%c0 = arith.constant 0 : index")
    t.add("%c1 = arith.constant 1 : index")
    t.add(f"%cl = arith.constant {LANES} : index")
    t.add(f"%cc = arith.constant {cols} : index")
    t.add(f"%cs = arith.constant {LANES * chains} : index")
    t.add(f"%pad = arith.constant 0.0 : {_ELEMENT}")
    ids = [f"%i{d}" for d in range(len(lead))]
    row_tensor = _tensor([1] * len(lead) + [cols])
    ones = ", ".join(["1"] * len(lead))
    row_at = f"[{', '.join(ids)}, 0] [{ones}, {cols}] [{ones}, 1]"
    if rows * cols >= PARALLEL_MIN_ELEMENTS and rows > 1:
        t.add(f"%r = scf.forall ({', '.join(ids)}) in ({', '.join(map(str, lead))}) "
              f"shared_outs(%o = %init) -> ({tensor}) {{")
        close = ["scf.forall.in_parallel {",
                 f"tensor.parallel_insert_slice %row_out into %o{row_at} : {row_tensor} into {tensor}",
                 "}", "}"]
    else:  # one loop per leading dimension, the result threaded through them
        outer = "%init"
        last = len(lead) - 1
        for d, extent in enumerate(lead):
            result, carried = ("%r" if d == 0 else f"%r{d}"), ("%o" if d == last else f"%o{d}")
            t.add(f"%n{d} = arith.constant {extent} : index")
            t.add(f"{result} = scf.for {ids[d]} = %c0 to %n{d} step %c1 "
                  f"iter_args({carried} = {outer}) -> ({tensor}) {{")
            outer = carried
        close = [f"%o_next = tensor.insert_slice %row_out into %o{row_at} : {row_tensor} into {tensor}",
                 f"scf.yield %o_next : {tensor}", "}"]
        for d in reversed(range(last)):
            close += [f"scf.yield %r{d + 1} : {tensor}", "}"]
    t.add(f"%row = tensor.extract_slice %o{row_at} : {tensor} to {row_tensor}")
    zeros = ", ".join(["%c0"] * len(lead))
    def read_row(row: str) -> str:
        return (f"vector.transfer_read {row}[{zeros}, %k], %pad {{in_bounds = [true]}} "
                f": {row_tensor}, {vector}")

    if s.over_x:  # x's row is the result's row, read before it is overwritten
        read_x, read_x2 = read_row("%row"), read_row("%r_in")
    else:
        read_x = (f"vector.transfer_read %x[{', '.join(ids)}, %k], %pad {{in_bounds = [true]}} "
                  f": {tensor}, {vector}")
        read_x2 = read_x
    # Pass 1: the lane maxima in `chains` interleaved accumulators (chunk k goes to
    # accumulator k mod chains: the combiner's latency is not paid per chunk), then the
    # accumulators combined in order, then the lanes folded.
    max_init = t.constant(_fill_value(_split(s.max_lanes)[1]), True)
    accs = [f"%acc{j}" for j in range(chains)]
    t.add(f"%m_all:{chains} = scf.for %k0 = %c0 to %cc step %cs "
          f"iter_args({', '.join(f'{a} = {max_init}' for a in accs)}) -> ({', '.join([vector] * chains)}) {{")
    args, ops, yielded = _body(s.max_lanes)
    combined = []
    for j, acc in enumerate(accs):
        t.add(f"%k_{j} = affine.apply affine_map<(d0) -> (d0 + {j * LANES})>(%k0)")
        t.add(f"%xv_{j} = {read_x.replace('%k]', f'%k_{j}]')}")
        names = {args[0]: f"%xv_{j}", args[1]: acc}
        if not t.ops(ops, names, True):
            return None
        combined.append(names[yielded])
    t.add(f"scf.yield {', '.join(combined)} : {', '.join([vector] * chains)}")
    t.add("}")
    lanes = "%m_all#0"
    for j in range(1, chains):  # the accumulators combined by the combining ops alone
        assert accumulation is not None
        combining, value = accumulation
        names = {args[1]: lanes, value: f"%m_all#{j}"}
        if not t.ops(combining, names, True):
            return None
        lanes = names[yielded]
    if chains > 1:
        # A row holding a NaN: its maxima again in one accumulator, the reduce's order, so
        # that the NaN it returns (the first in that order) is the reduce's; combined in
        # chain order, a NaN of chain 0 won over an earlier one of chain 1.
        mask, any_nan, fast = t.fresh(), t.fresh(), lanes
        t.add(f"{mask} = arith.cmpf uno, {fast}, {fast} : {vector}")
        t.add(f"{any_nan} = vector.reduction <or>, {mask} : vector<{LANES}xi1> into i1")
        lanes, again, acc, k = t.fresh(), t.fresh(), t.fresh(), t.fresh()
        t.add(f"{lanes} = scf.if {any_nan} -> ({vector}) {{")
        t.add(f"{again} = scf.for {k} = %c0 to %cc step %cl iter_args({acc} = {max_init}) -> ({vector}) {{")
        xv = t.fresh()
        t.add(f"{xv} = {read_x.replace('%k]', f'{k}]')}")
        names = {args[0]: xv, args[1]: acc}
        if not t.ops(ops, names, True):
            return None
        t.add(f"scf.yield {names[yielded]} : {vector}")
        t.add("}")
        t.add(f"scf.yield {again} : {vector}")
        t.add("} else {")
        t.add(f"scf.yield {fast} : {vector}")
        t.add("}")
    row_max = _lane_fold(t, s.max_lanes, s.max_combine, lanes)
    if row_max is None:
        return None
    # Pass 2: e = f(x, max) written to the result row and summed lane-wise.
    t.add(f"%m_splat = vector.broadcast {row_max} : {_ELEMENT} to {vector}")
    sum_init = t.constant(_fill_value(_split(s.sum_lanes)[1]), True)
    t.add(f"%s_lanes, %row_e = scf.for %k = %c0 to %cc step %cl "
          f"iter_args(%acc = {sum_init}, %r_in = %row) -> ({vector}, {row_tensor}) {{")
    t.add(f"%xv = {read_x2}")
    args, _, _ = _body(s.sum_lanes)
    names = {args[0]: "%xv", args[1]: "%m_splat", args[2]: "%acc"}
    if not t.ops([*s.f_ops, s.add], names, True):
        return None
    e = names[s.f_ops[-1].results[0]]
    t.add(f"%r_out = vector.transfer_write {e}, %r_in[{zeros}, %k] {{in_bounds = [true]}} "
          f": {vector}, {row_tensor}")
    t.add(f"scf.yield {names[s.add.results[0]]}, %r_out : {vector}, {row_tensor}")
    t.add("}")
    row_sum = _lane_fold(t, s.sum_lanes, s.sum_combine, "%s_lanes")
    if row_sum is None:
        return None
    # Pass 3: the result row, from e, the max and the sum, in place.
    t.add(f"%s_splat = vector.broadcast {row_sum} : {_ELEMENT} to {vector}")
    t.add(f"%row_out = scf.for %k = %c0 to %cc step %cl iter_args(%r_in = %row_e) -> ({row_tensor}) {{")
    t.add(f"%ev = {read_row('%r_in')}")
    args, ops, yielded = _body(s.out)
    names = {s.e: "%ev", args[1]: "%m_splat", args[2]: "%s_splat"}
    if not t.ops(s.g_ops, names, True):
        return None
    t.add(f"%r_out = vector.transfer_write {names[yielded]}, %r_in[{zeros}, %k] {{in_bounds = [true]}} "
          f": {vector}, {row_tensor}")
    t.add(f"scf.yield %r_out : {row_tensor}")
    t.add("}")
    for line in close:
        t.add(line)
    t.add(f"return %r : {tensor}")
    t.add("}")
    return "\n".join(t.lines)


def _inline(func_op: Any, before: Any, args: list[ir.Value]) -> ir.Value:
    """Clone `func_op`'s body before `before`, its arguments replaced by `args`; the
    returned value."""
    block = func_op.regions[0].blocks[0]
    mapping: dict[ir.Value, ir.Value] = dict(zip(block.arguments, args))

    def remap(op: Any) -> ir.WalkResult:
        for i, v in enumerate(op.operands):
            if v in mapping:
                op.operands[i] = mapping[v]
        return ir.WalkResult.ADVANCE

    result = None
    for op in block.operations:
        op = op.operation
        if op.name == "func.return":
            result = mapping[op.operands[0]]
            break
        clone = op.clone(ip=ir.InsertionPoint(before))
        clone.walk(remap)
        for old, new in zip(op.results, clone.results):
            mapping[old] = new
    assert result is not None
    return result


def _erase_dead(ops: list[Any]) -> None:
    """Erase those of `ops` (users before producers) left without uses, each once."""
    unique: list[Any] = []
    for op in ops:
        if not any(op == seen for seen in unique):
            unique.append(op)
    for op in unique:
        if all(not any(True for _ in r.uses) for r in op.results):
            op.erase()


def rows_softmax(op: Any, pass_: Any) -> None:
    """Rewrite every recognised last-axis softmax as one loop over rows (see above)."""
    found: list[_Softmax] = []

    def visit(inner: Any) -> ir.WalkResult:
        if inner.name == "linalg.generic":
            s = _Softmax(inner.operation)
            if s.ok:
                found.append(s)
        return ir.WalkResult.ADVANCE

    op.walk(visit)
    for s in found:
        try:
            text = _kernel(s)
        except ValueError:  # a body type that has no vector form
            continue
        if text is None:
            continue
        with op.context, s.out.location:
            kernel = ir.Module.parse(text)
            result = _inline(kernel.body.operations[0].operation, s.out, [s.x, s.init])
        s.out.results[0].replace_all_uses_with(result)
        generics = [s.sum_combine, s.sum_lanes, s.max_combine, s.max_lanes]
        fills = [_split(g)[1].owner.operation for g in generics]
        empties = [f.operands[1].owner.operation for f in fills]
        sources = [_split(g)[0][0].owner.operation for g in (s.sum_lanes, s.max_lanes)]
        s.out.erase()
        _erase_dead(generics + sources + fills + empties)
