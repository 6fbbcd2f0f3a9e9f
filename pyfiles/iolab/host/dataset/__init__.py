"""ImageNet-shaped data sets on the benchmark hosts: generate, histogram, pack, verify.

    python -m iolab.host.dataset gen ROOT --files 2000 --seed 1     real JPEGs, ImageNet's size histogram
    python -m iolab.host.dataset histogram ROOT                     sizes by power-of-two bucket, fio --bssplit
    python -m iolab.host.dataset pack ROOT --format all             packed file + index, tar shards, TFRecord
    python -m iolab.host.dataset verify ROOT                        every byte against the manifest

Modules (import the functions from them; this package imports nothing, so that the
controller can use the light ones without Pillow or numpy):

    gen        gen(), target_sizes()                     needs Pillow and numpy
    manifest   Manifest, Entry, Record                   the data set's identity (its hash)
    histogram  histogram(), bssplit(), parse_bssplit()   stdlib
    pack       pack(), check(), PackInfo                 stdlib (google-crc32c speeds up TFRecord CRCs)
    packed     PackedReader                              one file, one index, os.pread
    wds        webdataset-style tar shards               stdlib tarfile
    tfrecord   TFRecord framing, tf.train.Example codec  no TensorFlow
    crc32c     CRC-32C                                   google-crc32c, pure Python without it
    verify     verify()                                  files and packs against the manifest
"""
