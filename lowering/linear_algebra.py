"""Lowerings of the linear_algebra family. Imports `dialect` and the lowering modules."""
