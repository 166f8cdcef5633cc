#![no_main]
//! See walcdc_core::fuzzing::fuzz_reader_state.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| walcdc_core::fuzzing::fuzz_reader_state(data));
