"""Lowerings of the dot family. Imports `dialect` and the lowering modules."""
