"""Lowerings of the fft family. Imports `dialect` and the lowering modules."""
