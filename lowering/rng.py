"""Lowerings of the rng family. Imports `dialect` and the lowering modules."""
