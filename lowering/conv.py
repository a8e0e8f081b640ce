"""Lowerings of the conv family. Imports `dialect` and the lowering modules."""
