"""Scalar code for one element: XLA's exact semantics of every elementwise op as
arith/math/complex ops (`arithmetic`, `conversion`), the storage types of tensors
(`storage`) and the one table from op name to scalar emitter (`elementwise`) that both
the tensor lowering (`lowering.ops.elementwise`) and sub-computations
(`lowering.patterns.computations`) read. Imports `dialect` only.
"""
