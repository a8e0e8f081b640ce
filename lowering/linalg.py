"""Lowerings of the linalg family. Imports `dialect` and the lowering modules."""
