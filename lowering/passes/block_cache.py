"""Large temporaries kept for the program's next call instead of freed (issue #17).

`finalize-memref-to-llvm{use-generic-functions=1}` makes every `memref.alloc` call
`_mlir_memref_to_llvm_alloc(bytes)` and every dealloc `_mlir_memref_to_llvm_free(ptr)`;
`cache_blocks` defines the two in the module. A block of at least MIN_BYTES is not given
back to libc when freed but parked in one of SLOTS slots (a global of the module), and the
next allocation of about its size (at least the request, at most twice it) takes it.
At most PARKED_LIMIT bytes are parked per module; a block that would pass it is freed.

Why: glibc serves such a block with a fresh mmap (or trims its heap top after the free),
so every call faulted in every page of its temporaries again. The radix sort of 2**20 f32
(two 4 MB temporaries) spent 27% of its time in the kernel's page faults: 6.5 -> 4.8 ms
on one core. The blocks stay the program's: what a call's temporaries peak at stays
mapped while the executable lives, as XLA's buffer allocator keeps it; a module's global
destructor (run when the JIT engine is destroyed or the disk-cache or exported library is
unloaded) gives them back. Smaller blocks go to malloc and free at once, as before.

The module's two functions (and the destructor's) call the allocator's core (`CORE`),
passing the module's slots and parked-bytes count: LLVM inlines it there, or, after the
pipeline, the core's definitions become declarations of the runtime library's copy
(runtime/shared_runtime.py: ~10 ms less JIT a program; the stages show the core).

Thread-safe without a lock: a slot holds a block's address or 0, taken with an atomic
exchange and filled with a compare-and-swap, so concurrent calls (replicas, the parallel
loops' workers) never share a block. Each block starts with a HEADER-byte header holding
its size. Imports nothing of ours but `dialect.context`.
"""

from __future__ import annotations

from typing import Any

from mlir import ir

from ...dialect.context import parsed_once

ALLOC = "_mlir_memref_to_llvm_alloc"
FREE = "_mlir_memref_to_llvm_free"
RELEASE = "xlamlir_release_blocks"
CORE_ALLOC = "xlamlir_blocks_alloc"
CORE_FREE = "xlamlir_blocks_free"
CORE_RELEASE = "xlamlir_blocks_release"
BLOCKS = "xlamlir_blocks"
_PARKED = "xlamlir_parked_bytes"
SLOTS = 8
MIN_BYTES = 1 << 17  # glibc's initial mmap threshold: smaller blocks come from its heap
# At most this many bytes parked per module (a program called once keeps no more than
# this of its peak while its executable lives); a block that would pass it is freed.
PARKED_LIMIT = 256 << 20
HEADER = 16  # keeps malloc's 16-byte alignment; alignment beyond it is the caller's

_SLOT = (f"  %slot = llvm.getelementptr %blocks[0, %i] : (!llvm.ptr, i64) -> !llvm.ptr, "
         f"!llvm.array<{SLOTS} x i64>")
_CONSTANTS = f"""  %zero = llvm.mlir.constant(0 : i64) : i64
  %one = llvm.mlir.constant(1 : i64) : i64
  %slots = llvm.mlir.constant({SLOTS} : i64) : i64
  %min = llvm.mlir.constant({MIN_BYTES} : i64) : i64"""


def _take_each(done: str, found: str) -> str:
    """Blocks ^scan(%i) and ^take: slot %i's block taken out of it (%got, 0 when the slot
    was empty; %next = %i + 1), then ^`found` with a block, the next slot without one,
    ^`done` after the last slot."""
    return f"""^scan(%i: i64):
  %done = llvm.icmp "eq" %i, %slots : i64
  llvm.cond_br %done, ^{done}, ^take
^take:
{_SLOT}
  %got = llvm.atomicrmw xchg %slot, %zero acq_rel : !llvm.ptr, i64
  %empty = llvm.icmp "eq" %got, %zero : i64
  %next = llvm.add %i, %one : i64
  llvm.cond_br %empty, ^scan(%next : i64), ^{found}"""


_STATE = "%blocks: !llvm.ptr, %parked: !llvm.ptr"
# The allocator's code, given the program's state (its slots and its parked-bytes count):
# the same for every program, so a program may call the copy in the runtime library
# (runtime/shared_runtime.py) instead of its own.
CORE = f"""
llvm.func internal @{CORE_ALLOC}({_STATE}, %size: i64) -> !llvm.ptr {{
{_CONSTANTS}
  %header = llvm.mlir.constant({HEADER} : i64) : i64
  %total = llvm.add %size, %header : i64
  %small = llvm.icmp "ult" %total, %min : i64
  llvm.cond_br %small, ^fresh, ^scan(%zero : i64)
{_take_each("fresh", "check")}
^check:
  %block = llvm.inttoptr %got : i64 to !llvm.ptr
  %capacity = llvm.load %block : !llvm.ptr -> i64
  %fits = llvm.icmp "uge" %capacity, %total : i64
  %twice = llvm.shl %total, %one : i64
  %close = llvm.icmp "ule" %capacity, %twice : i64
  %use = llvm.and %fits, %close : i1
  llvm.cond_br %use, ^taken, ^back
^taken:
  %left = llvm.atomicrmw sub %parked, %capacity acq_rel : !llvm.ptr, i64
  llvm.br ^done(%block : !llvm.ptr)
^back:
  %pair = llvm.cmpxchg %slot, %zero, %got acq_rel monotonic : !llvm.ptr, i64
  %kept = llvm.extractvalue %pair[1] : !llvm.struct<(i64, i1)>
  llvm.cond_br %kept, ^scan(%next : i64), ^drop
^drop:
  %gone = llvm.atomicrmw sub %parked, %capacity acq_rel : !llvm.ptr, i64
  llvm.call @free(%block) : (!llvm.ptr) -> ()
  llvm.br ^scan(%next : i64)
^fresh:
  %new = llvm.call @malloc(%total) : (i64) -> !llvm.ptr
  %null = llvm.mlir.zero : !llvm.ptr
  %failed = llvm.icmp "eq" %new, %null : !llvm.ptr
  llvm.cond_br %failed, ^out(%null : !llvm.ptr), ^mark
^mark:
  llvm.store %total, %new : i64, !llvm.ptr
  llvm.br ^done(%new : !llvm.ptr)
^done(%b: !llvm.ptr):
  %user = llvm.getelementptr %b[{HEADER}] : (!llvm.ptr) -> !llvm.ptr, i8
  llvm.br ^out(%user : !llvm.ptr)
^out(%result: !llvm.ptr):
  llvm.return %result : !llvm.ptr
}}
llvm.func internal @{CORE_FREE}({_STATE}, %user: !llvm.ptr) {{
{_CONSTANTS}
  %null = llvm.mlir.zero : !llvm.ptr
  %none = llvm.icmp "eq" %user, %null : !llvm.ptr
  llvm.cond_br %none, ^out, ^header
^header:
  %block = llvm.getelementptr %user[-{HEADER}] : (!llvm.ptr) -> !llvm.ptr, i8
  %capacity = llvm.load %block : !llvm.ptr -> i64
  %small = llvm.icmp "ult" %capacity, %min : i64
  %bits = llvm.ptrtoint %block : !llvm.ptr to i64
  llvm.cond_br %small, ^release, ^budget
^budget:
  %limit = llvm.mlir.constant({PARKED_LIMIT} : i64) : i64
  %before = llvm.atomicrmw add %parked, %capacity acq_rel : !llvm.ptr, i64
  %after = llvm.add %before, %capacity : i64
  %over = llvm.icmp "ugt" %after, %limit : i64
  llvm.cond_br %over, ^refund, ^scan(%zero : i64)
^scan(%i: i64):
  %done = llvm.icmp "eq" %i, %slots : i64
  llvm.cond_br %done, ^refund, ^put
^put:
{_SLOT}
  %pair = llvm.cmpxchg %slot, %zero, %bits acq_rel monotonic : !llvm.ptr, i64
  %kept = llvm.extractvalue %pair[1] : !llvm.struct<(i64, i1)>
  %next = llvm.add %i, %one : i64
  llvm.cond_br %kept, ^out, ^scan(%next : i64)
^refund:
  %back = llvm.atomicrmw sub %parked, %capacity acq_rel : !llvm.ptr, i64
  llvm.br ^release
^release:
  llvm.call @free(%block) : (!llvm.ptr) -> ()
  llvm.br ^out
^out:
  llvm.return
}}
llvm.func internal @{CORE_RELEASE}({_STATE}) {{
{_CONSTANTS}
  llvm.br ^scan(%zero : i64)
{_take_each("out", "release")}
^release:
  %block = llvm.inttoptr %got : i64 to !llvm.ptr
  %capacity = llvm.load %block : !llvm.ptr -> i64
  %left = llvm.atomicrmw sub %parked, %capacity acq_rel : !llvm.ptr, i64
  llvm.call @free(%block) : (!llvm.ptr) -> ()
  llvm.br ^scan(%next : i64)
^out:
  llvm.return
}}
"""
LIBC = """
llvm.func @malloc(i64) -> !llvm.ptr attributes {sym_visibility = "private"}
llvm.func @free(!llvm.ptr) attributes {sym_visibility = "private"}
"""
_ADDRESSES = (f"  %blocks = llvm.mlir.addressof @{BLOCKS} : !llvm.ptr\n"
              f"  %parked = llvm.mlir.addressof @{_PARKED} : !llvm.ptr")
# The program's state and the functions its code calls, each a call of the core with it.
_PROGRAM = f"""
llvm.mlir.global internal @{BLOCKS}(dense<0> : tensor<{SLOTS}xi64>) {{alignment = 64 : i64}}
  : !llvm.array<{SLOTS} x i64>
llvm.mlir.global internal @{_PARKED}(0 : i64) {{alignment = 64 : i64}} : i64
llvm.func internal @{ALLOC}(%size: i64) -> !llvm.ptr {{
{_ADDRESSES}
  %block = llvm.call @{CORE_ALLOC}(%blocks, %parked, %size) : (!llvm.ptr, !llvm.ptr, i64) -> !llvm.ptr
  llvm.return %block : !llvm.ptr
}}
llvm.func internal @{FREE}(%user: !llvm.ptr) {{
{_ADDRESSES}
  llvm.call @{CORE_FREE}(%blocks, %parked, %user) : (!llvm.ptr, !llvm.ptr, !llvm.ptr) -> ()
  llvm.return
}}
llvm.func internal @{RELEASE}() {{
{_ADDRESSES}
  llvm.call @{CORE_RELEASE}(%blocks, %parked) : (!llvm.ptr, !llvm.ptr) -> ()
  llvm.return
}}
llvm.mlir.global_dtors dtors = [@{RELEASE}], priorities = [65535 : i32], data = [#llvm.zero]
"""
_FUNCTIONS = LIBC + CORE + _PROGRAM
#: The core's functions, with their LLVM dialect types (runtime/shared_runtime.py).
CORE_FUNCTIONS = {CORE_ALLOC: "(!llvm.ptr, !llvm.ptr, i64) -> !llvm.ptr",
                  CORE_FREE: "(!llvm.ptr, !llvm.ptr, !llvm.ptr)",
                  CORE_RELEASE: "(!llvm.ptr, !llvm.ptr)"}


def _symbol(op: Any) -> str | None:
    return ir.StringAttr(op.attributes["sym_name"]).value if "sym_name" in op.attributes else None


def _parsed(context: ir.Context) -> ir.Module:
    """_FUNCTIONS parsed, once per reused context."""
    return parsed_once(context, _FUNCTIONS)


def cache_blocks(module_op: Any, pass_: Any) -> None:
    """Define the allocation functions a module (LLVM dialect) calls: see the module
    docstring. A module without memref allocations is left as it is."""
    module = module_op.opview if hasattr(module_op, "opview") else module_op
    top = module.regions[0].blocks[0]
    symbols = {_symbol(op): op for op in top.operations}
    declared = [symbols[name] for name in (ALLOC, FREE)
                if name in symbols and not len(symbols[name].regions[0].blocks)]
    if not declared:
        return
    for op in declared:
        op.operation.erase()
    at = ir.InsertionPoint(top)
    for op in _parsed(module.context).body.operations:
        name = _symbol(op)
        if name is None or name not in symbols or name in (ALLOC, FREE):
            op.operation.clone(ip=at)
