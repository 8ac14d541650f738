//! Shared by the async tests: a current-thread tokio runtime with paused
//! time, where sleeps complete at once and advance the virtual clock.

pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("runtime")
}
