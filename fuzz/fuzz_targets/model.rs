//! Any bytes decode into a config and up to 512 operations; the crate must
//! not panic except where the program makes its expiry function panic (or
//! call back into its own manager), and must agree with the reference model
//! on every result.
//!
//! Run (stable toolchain): `RUSTC_BOOTSTRAP=1 cargo fuzz run -s none model -- -max_total_time=600`

#![no_main]

use libfuzzer_sys::fuzz_target;

use keyed_backoff_testkit::model;

fuzz_target!(|data: &[u8]| {
    // Panics the program provokes are caught and checked by the driver;
    // any other panic still reaches the fuzzer's hook and is a crash.
    model::quiet_expected_panics();
    let (cfg, ops) = model::decode(data);
    if let Err(disagreement) = model::run(cfg, &ops) {
        panic!("{disagreement}");
    }
});
