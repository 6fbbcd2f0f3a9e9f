"""The storage under test put in place on a host and taken away, one module per backend kind (each `python -m
iolab.host.storage.<kind>`, the argv from iolab.shared.calls), and what they share (`call`)."""
