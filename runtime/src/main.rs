// Records are many small allocations (a key, a value, column values):
// mimalloc's per-thread free lists serve them much faster than glibc's malloc.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    sluice_runtime::cli::main()
}
