"""What every workload kind stands on: base (the Workload, its host call's parts), accelerator (the emulated and
real accelerators), mlperf (MLPerf Storage's presets, rules and checkpoint models), kvcache_rules. The kinds are
iolab.kinds, one folder each, with their registry above them all (iolab.kinds.registry)."""
