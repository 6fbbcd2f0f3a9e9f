"""The host side: what runs on the benchmark hosts (stdlib first; loaders and data sets need their stack).

It never imports the controller side (campaign, bench, runner, samples, report, ...),
only itself and the shared leaves `iolab.errors` and `iolab.units`; a test holds it
so (tests/unit/test_structure.py). The controller runs it there as
`python -m iolab.host.<module>` from the release it installs (role iolab_host).
"""
