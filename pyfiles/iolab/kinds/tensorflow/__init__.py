"""Workload kind `tensorflow`: tf.data over the data set's TFRecord shards, feeding emulated accelerators.

workload.py (the campaign's entry, its host call), host.py (the tf.data loader, on iolab.host.loader's step loop); its
loader.json is read by the pytorch kind's parser (kinds/pytorch/parser.py); its role is roles/bench_tensorflow/.
"""
