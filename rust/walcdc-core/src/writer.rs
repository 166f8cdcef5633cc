//! The log writer: produces CUBRID-format log sets for tests and benchmarks.
