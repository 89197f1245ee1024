"""The site tools as a package: generator, make site, the emulated cluster (imported as testbed_site)."""
