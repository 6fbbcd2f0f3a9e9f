"""A command's work: the campaign loop, its sessions and plan, calibration, the searches, the tasks' shared CLI."""
