"""Lowerings of the sort family. Imports `dialect` and the lowering modules."""
