"""Hardware: accelerator specs, the host's chips, peak probes, model shapes with their FLOP and byte
counts, and roofline efficiency."""
