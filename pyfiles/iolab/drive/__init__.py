"""Driving the hosts: Ansible (runner, execute), the fan-out, leases, services, live telemetry, faults in action."""
