"""What the controller and the hosts both use: constants, formats and pure functions (stdlib only).

It runs on the hosts too, so it imports nothing but the standard library and itself (and the
package's leaves `iolab.errors` and `iolab.units`); the controller side (iolab.*, backends,
workloads, parsers) and the host side (iolab.host) import it, never each other. A test holds
it so (tests/unit/test_structure.py).
"""
