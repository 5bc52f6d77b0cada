"""Development tooling for specload's tests and benchmarks; not installed with the package."""
