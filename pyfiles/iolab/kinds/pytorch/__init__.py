"""Workload kind `pytorch`: a PyTorch DataLoader over the data set, feeding emulated or real accelerators.

workload.py (the campaign's entry, its loader options, its host call), parser.py (loader.json → AU, samples/s and the
rest: the tensorflow kind's loader writes the same file), host.py (the loader: one rank a process per accelerator,
on iolab.host.loader's readers and step loop); its role is roles/bench_pytorch/.
"""
