"""The sample sizes of MLPerf Storage's unet3d and cosmoflow data sets, and the generator of each (stdlib only).

kind → (mean bytes per sample, standard deviation, file suffix): MLPerf Storage v2's
record_length_bytes and record_length_bytes_stdev (docs/REFERENCE_FIGURES.md). The generator
(iolab.host.dataset.samples) draws sizes from them; the dataset_gen role's probe
(iolab.host.loader.dataset_state) estimates the space a data set needs from them.
"""

from __future__ import annotations

SHAPES = {"unet3d": (146_600_628, 68_341_808, "npz"), "cosmoflow": (2_828_486, 71_311, "bin")}
GENERATORS = {kind: f"iolab.host.dataset.samples/1:{kind}" for kind in SHAPES}
