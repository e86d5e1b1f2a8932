//! The `dlqctl` binary: everything lives in the library; this only hands over the exit code.

/// See Cargo.toml for why not the system allocator.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    dlqctl::run()
}
