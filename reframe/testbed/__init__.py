"""The testbed's Python package: registry, launch plan, results layer and reports."""
