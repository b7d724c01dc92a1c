//! libFuzzer target: any bytes as the body of every answer type of the service's interface.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    mailtarget_operator_fuzz::api_responses(data);
});
