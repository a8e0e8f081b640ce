"""Duplicating cheap elementwise producers into each of their consumers.

`linalg-fuse-elementwise-ops` only fuses a producer generic into its consumer
when the producer has one use (its default control), so a value with several
users (softmax's `exp(x - max)`: summed, then divided by the sum) is written
to a temporary as big as the input and read back by every user. XLA instead
recomputes such a cheap producer inside every consumer: no temporary, one
pass over memory less per user.

`duplicate_cheap_producers` gives every fusable use of a cheap, all-parallel
producer generic its own copy, so that the upstream pass that follows in the
"fused" stage fuses each copy into its consumer (directly, or through a
`tensor.expand_shape` by expanding the copy's loops: the lane-split reductions
of lowering/ops/reduce.py read their operand through one). A use is fusable when
its consumer is a linalg.generic reading the value as an input through a
permutation map (every producer element is recomputed once per consumer, not
once per element of a broadcast), possibly behind an expand_shape whose users
all are such consumers. Uses that are not fusable keep the original.

Only cheap producers are copied (a bounded number of arith/math ops, few
transcendental ones, no reads of their own output), and the number of copies
per function is capped so that compile time stays bounded. Imports generic_attrs.
"""

from __future__ import annotations

from typing import Any

from mlir import ir

from .generic_attrs import all_parallel, indexing_maps

MAX_BODY_OPS = 12  # arith/math ops in the producer's body
MAX_TRANSCENDENTAL = 2  # of which math.* ops (exp, tanh, log...): each is ~15 vector ops
MAX_FULL_INPUTS = 2  # inputs read element for element (each copy reads them again)
MAX_COPIES_PER_PRODUCER = 4
MAX_COPIES_PER_FUNCTION = 32

_RESHAPES = ("tensor.expand_shape",)  # upstream folds these into a producer by expansion


def _num_inputs(op: Any) -> int:
    return ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"])[0]


def _is_permutation(m: ir.AffineMap) -> bool:
    return m.n_dims == len(m.results) and m.is_permutation


def _is_projected_permutation(m: ir.AffineMap) -> bool:
    return m.is_projected_permutation


def _cheap_producer(op: Any) -> bool:
    """An all-parallel, single-result generic on tensors whose body is a few pure
    arith/math ops that never read the output, with permutation output map."""
    if op.name != "linalg.generic" or len(op.results) != 1 or len(op.regions) != 1:
        return False
    if not str(op.results[0].type).startswith("tensor<"):
        return False
    if not all_parallel(op):
        return False
    maps = indexing_maps(op)
    n_in = _num_inputs(op)
    if len(maps) != n_in + 1 or not _is_permutation(maps[-1]):
        return False
    if not all(_is_projected_permutation(m) for m in maps[:n_in]):
        return False
    # Inputs read element for element are read again by every copy; broadcast (smaller)
    # inputs are cheap to re-read.
    if sum(1 for m in maps[:n_in] if _is_permutation(m)) > MAX_FULL_INPUTS:
        return False
    block = op.regions[0].blocks[0]
    if sum(1 for _ in block.arguments[n_in].uses):  # reads its output: not elementwise
        return False
    ops = transcendental = 0
    for inner in block.operations:
        name = inner.operation.name
        if name == "linalg.yield":
            continue
        if name.startswith("math."):
            transcendental += 1
        elif not name.startswith("arith."):
            return False  # linalg.index, tensor.extract, nested regions...
        ops += 1
    return ops <= MAX_BODY_OPS and transcendental <= MAX_TRANSCENDENTAL


def _fusable_consumer(owner: Any, operand_number: int) -> bool:
    """A generic reading the value as an input through a permutation map (the fused
    body then runs once per producer element)."""
    if owner.name != "linalg.generic" or operand_number >= _num_inputs(owner):
        return False
    return _is_permutation(indexing_maps(owner)[operand_number])


def _fusable_use(owner: Any, operand_number: int) -> bool:
    if owner.name in _RESHAPES:
        # Every user of the reshaped value must take the expanded copy.
        uses = [(u.owner, u.operand_number) for u in owner.results[0].uses]
        return bool(uses) and all(_fusable_consumer(o, n) for o, n in uses)
    return _fusable_consumer(owner, operand_number)


def _duplicate_in(func_op: Any, budget: int) -> int:
    """Give the fusable uses of multi-use cheap producers in `func_op` their own copies;
    the number of copies made (at most `budget`)."""
    producers: list[Any] = []

    def visit(inner: Any) -> ir.WalkResult:
        if inner.name == "linalg.generic" and _cheap_producer(inner):
            producers.append(inner)
        return ir.WalkResult.ADVANCE

    func_op.walk(visit)
    made = 0
    for producer in producers:
        result = producer.results[0]
        uses = [(u.owner, u.operand_number) for u in result.uses]
        if len(uses) < 2:
            continue  # upstream fuses single-use producers itself
        fusable, rest = [], []
        for o, n in uses:
            # A consumer in a nested region (a loop body) would recompute the producer on
            # every trip: only consumers in the producer's own block.
            same_block = o.operation.block == producer.operation.block
            (fusable if same_block and _fusable_use(o, n) else rest).append((o, n))
        if not fusable or len(fusable) > MAX_COPIES_PER_PRODUCER:
            continue
        # One remaining use of the original would become its only use, which upstream
        # fuses whatever the map: into a broadcasting consumer that recomputes the
        # producer per broadcast element. Leave such producers alone.
        if len(rest) == 1 and rest[0][0].name.startswith(("linalg.", "tensor.")):
            continue
        # When every use is fusable the first keeps the original (it dies once fused).
        to_copy = fusable[1:] if not rest else fusable
        if made + len(to_copy) > budget:
            break
        for owner, number in to_copy:
            # A copy right after the producer: its operands dominate it, and it dominates
            # the consumer as the producer did.
            clone = producer.clone(ip=ir.InsertionPoint(producer))
            owner.operands[number] = clone.results[0]
            made += 1
    return made


def duplicate_cheap_producers(op: Any, pass_: Any) -> None:
    """Copy each cheap elementwise producer generic with several fusable uses once per
    use, for `linalg-fuse-elementwise-ops` to fuse every copy into its consumer."""
    for func_op in op.regions[0].blocks[0].operations:
        if func_op.operation.name == "func.func":
            _duplicate_in(func_op.operation, MAX_COPIES_PER_FUNCTION)
