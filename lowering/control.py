"""Lowerings of the control family. Imports `dialect` and the lowering modules."""
