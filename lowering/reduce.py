"""Lowerings of the reduce family. Imports `dialect` and the lowering modules."""
