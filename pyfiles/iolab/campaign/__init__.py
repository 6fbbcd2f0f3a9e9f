"""The campaign model: the file parsed and expanded into runs (sweeps, profiles, GPU legs, faults, hosts)."""
