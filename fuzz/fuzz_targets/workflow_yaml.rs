#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| uwf::fuzzing::workflow_yaml(data));
