//! Test tooling, built only with the `writer` feature (and for this crate's tests): a
//! CUBRID-format log writer and the encoders of class records and heap rows it uses. Property
//! tests, benchmarks, robustness work and `walcdc.testing` share it; readers never use it.

pub mod encode;
pub mod writer;
