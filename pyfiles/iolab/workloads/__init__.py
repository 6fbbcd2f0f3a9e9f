"""What every workload kind stands on (base: the Workload, its host call's parts; accelerator; mlperf: the presets
and rules), and the kinds not yet in a folder of their own, one module each (schema, defaults, the bench role's
variables, the host call). The kinds' registry, above them all, is iolab.kinds.registry; their folders iolab.kinds."""
