"""The generated data sets' shapes and pack formats, which the controller plans with and the hosts make (stdlib only).

kind → (mean bytes per sample, standard deviation, file suffix): MLPerf Storage's record_length_bytes
and record_length_bytes_stdev (docs/REFERENCE_FIGURES.md). The generator draws sizes from them
(iolab.host.dataset.samples: unet3d's NPZ files, cosmoflow's samples; iolab.host.dataset.gen: the
JPEG kinds, every image about its one size, as DLIO generates a file without a stdev); the dataset_gen
role's probe (iolab.host.loader.dataset_state) estimates the space a data set needs from them.
"""

from __future__ import annotations

SHAPES = {
    "unet3d": (146_600_628, 68_341_808, "npz"),
    "cosmoflow": (2_828_486, 71_311, "bin"),
    "retinanet": (322_957, 0, "jpg"),  # MLPerf Storage v3.0: no record_length_bytes_stdev
}
JPEG_KINDS = tuple(kind for kind, (_, _, suffix) in SHAPES.items() if suffix == "jpg")
GENERATORS = {
    kind: f"iolab.host.dataset.gen/1:{kind}" if kind in JPEG_KINDS else f"iolab.host.dataset.samples/1:{kind}"
    for kind in SHAPES
}
MEAN_SIZE = 114_660  # the imagenet-like generator's mean file size (MLPerf Storage resnet50)
FORMATS = ("packed", "wds", "tfrecord")  # the packed copies of a data set (iolab.host.dataset.pack)
SAMPLES_PER_SHARD = 1251  # MLPerf Storage resnet50: samples per TFRecord file
