//! libFuzzer target: any bytes as a manifest file (`mailtarget_operator::manifest::load_str`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    mailtarget_operator_fuzz::manifest(data);
});
