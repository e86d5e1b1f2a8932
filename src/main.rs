//! The `dlqctl` binary: everything lives in the library; this only tunes the allocator and
//! hands over the exit code.

/// See Cargo.toml for why not the system allocator.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    tune_allocator();
    dlqctl::run()
}

/// mimalloc by default commits whole arenas up front and returns freed memory to the OS late:
/// a large `lint` peaked at 92 MiB with it, 60 MiB with these two options, at no measurable
/// cost in time (BENCHMARKS.md §1). A `MIMALLOC_*` variable the user sets still wins.
fn tune_allocator() {
    // Indexes into mimalloc.h's `mi_option_e` (the same in mimalloc v2 and v3), which
    // libmimalloc-sys does not name.
    const ARENA_EAGER_COMMIT: libmimalloc_sys::mi_option_t = 4;
    const PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;
    for (option, var, value) in [
        (ARENA_EAGER_COMMIT, "MIMALLOC_ARENA_EAGER_COMMIT", 0),
        (PURGE_DELAY, "MIMALLOC_PURGE_DELAY", 0),
    ] {
        if std::env::var_os(var).is_none() {
            // SAFETY: mi_option_set only stores an integer in mimalloc's option table; both
            // indexes exist in the linked mimalloc (libmimalloc-sys 0.1.49 bundles v2.2).
            unsafe { libmimalloc_sys::mi_option_set(option, value) };
        }
    }
}
