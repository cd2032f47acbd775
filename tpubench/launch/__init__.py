"""Scale-out (docs/launch.md): one workload measured on many machine types through SkyPilot.

`targets` turns `--on` values into priced targets, `plan` decides per target what runs where and
what it should cost, `tasks` writes SkyPilot task files, `skypilot` talks to SkyPilot (in this
environment or in its own), and `collect` brings the results home.
"""
