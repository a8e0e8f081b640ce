"""Lowerings of the shape family. Imports `dialect` and the lowering modules."""
