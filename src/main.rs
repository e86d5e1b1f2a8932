//! The `dlqctl` binary: everything lives in the library; this only tunes the allocator and
//! hands over the exit code.

/// See Cargo.toml for why not the system allocator (and for the `system-alloc` feature that
/// profilers need).
#[cfg(not(feature = "system-alloc"))]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    #[cfg(all(not(target_os = "linux"), not(feature = "system-alloc")))]
    tune_allocator();
    dlqctl::run()
}

/// On Linux the options are set before the first allocation (the runtime allocates before
/// `main`, and mimalloc sets up its first arena then): an ELF constructor.
#[cfg(all(target_os = "linux", not(feature = "system-alloc")))]
#[used]
#[unsafe(link_section = ".init_array")]
static TUNE_ALLOCATOR: extern "C" fn() = {
    extern "C" fn tune() {
        tune_allocator();
    }
    tune
};

/// mimalloc by default commits whole arenas up front and returns freed memory to the OS late:
/// a large `lint` peaked at 85 MiB with it, 68 MiB with these two options, at no measurable
/// cost in time (BENCHMARKS.md §1). A `MIMALLOC_*` variable the user sets still wins.
/// Allocates nothing (it runs before the allocator is set up).
#[cfg(not(feature = "system-alloc"))]
fn tune_allocator() {
    // Indexes into mimalloc.h's `mi_option_e` (the same in mimalloc v2 and v3), which
    // libmimalloc-sys does not name.
    const ARENA_EAGER_COMMIT: libmimalloc_sys::mi_option_t = 4;
    const PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;
    unsafe extern "C" {
        fn getenv(name: *const std::ffi::c_char) -> *mut std::ffi::c_char;
    }
    for (option, var, value) in [
        (ARENA_EAGER_COMMIT, c"MIMALLOC_ARENA_EAGER_COMMIT", 0),
        (PURGE_DELAY, c"MIMALLOC_PURGE_DELAY", 0),
    ] {
        // SAFETY: getenv reads the environment with a NUL-terminated name (no allocation);
        // mi_option_set only stores an integer in mimalloc's option table, and both indexes
        // exist in the mimalloc libmimalloc-sys links.
        unsafe {
            if getenv(var.as_ptr()).is_null() {
                libmimalloc_sys::mi_option_set(option, value);
            }
        }
    }
}
