"""The emulated Slurm cluster and what measures it (imported as testbed_site.cluster)."""
