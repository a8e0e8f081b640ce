"""Lowerings of the indexing family. Imports `dialect` and the lowering modules."""
