#![no_main]
//! See walcdc_core::fuzzing::fuzz_walk_from.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| walcdc_core::fuzzing::fuzz_walk_from(data));
